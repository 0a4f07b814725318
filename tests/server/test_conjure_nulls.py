"""Conjure reads a present `null` as an absent optional field, and nominal-api's Python encoder writes
every unset optional as `null` (issue 49, item 1). Every node variant the client's builders cover is
sent here as nominal-api's encoder writes it, nulls included, to a real server, and must be created;
`timeDifference` and `rangeDuration` built with their `timeUnit` unset must compute in seconds, the
default nominal-api documents."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest
from conjure_python_client import ConjureDecoder, ConjureEncoder
from nominal_api import persistent_compute_api as pc
from nominal_api import scout_compute_api as sc

from sparkwire_client.modules import enum_parameter, numeric_parameter
from sparkwire_client.nodes import Node
from tests.conftest import ServerProcess
from tests.unit.test_client_coverage import ASSET, BUILT, RID
from tests.wire import NANOS, Client, full_entries, subscribe_message, write_points

pytestmark = pytest.mark.server

WINDOW_S = 60
BATCH = 100  # under max_subscriptions_per_connection (128)


def _encoded_with_nulls(request: dict[str, Any]) -> dict[str, Any]:
    """The request as nominal-api's own classes encode it: every unset optional a `null`."""
    decoded = ConjureDecoder().read_from_string(json.dumps(request), pc.StreamingComputeNodeRequest)
    encoded: dict[str, Any] = json.loads(json.dumps(ConjureEncoder.do_encode(decoded)))
    return encoded


def _has_null(value: Any) -> bool:
    if isinstance(value, dict):
        return any(v is None or _has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_null(v) for v in value)
    return False


def _sub(request: dict[str, Any]) -> dict[str, Any]:
    return {"computeRequest": request, "subscriptionOptions": {"minDelay": 0, "allowAppends": True}}


async def _catalog(base_url: str, rid: str) -> tuple[str, str]:
    """The asset and the module the coverage table names, created on the server: their rid and
    apiName there."""
    api_name = f"cover{uuid.uuid4().hex[:8]}"
    scopes = [{"dataScopeName": "main", "dataSourceRid": rid}]
    typed = {
        "gain": {"type": "numericValue", "numericValue": 2.5},
        "fluid": {"type": "stringValue", "stringValue": "LOX"},
    }
    v, m = numeric_parameter("v"), enum_parameter("m")

    def function(name: str, parameter: str, kind: str, body: Node, node_kind: str) -> dict[str, Any]:
        return {
            "name": name,
            "description": "",
            "parameters": [{"name": parameter, "type": kind}],
            "functionNode": {"type": node_kind, node_kind: body.json},
            "isExported": True,
        }

    functions = [
        function("twice", "v", "NUMERIC_SERIES", v * 2, "numeric"),
        function("same", "m", "ENUM_SERIES", m, "enum"),
        function("hot", "v", "NUMERIC_SERIES", v.above(90), "ranges"),
    ]
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        asset = await http.post(
            "/assets/v1/assets", json={"title": "rig", "dataScopes": scopes, "typedProperties": typed}
        )
        assert asset.status_code == 200, asset.text
        body = {
            "apiName": api_name,
            "title": "cover",
            "description": "",
            "definition": {"functions": functions},
        }
        module = await http.post("/scout/v2/module", json=body)
        assert module.status_code == 200, module.text
    return asset.json()["rid"], api_name


async def test_every_covered_variant_is_created_as_nominal_apis_encoder_writes_it(
    server: ServerProcess,
) -> None:
    rid = f"ri.test.nulls.{uuid.uuid4().hex[:12]}"
    asset, api_name = await _catalog(server.base_url, rid)
    requests = {}
    for key, node in BUILT.items():
        text = json.dumps(node.request(WINDOW_S)).replace(ASSET, asset).replace(f'"{RID}"', f'"{rid}"')
        text = text.replace('"cover"', f'"{api_name}"')
        requests[key] = _encoded_with_nulls(json.loads(text))
    assert sum(_has_null(r) for r in requests.values()) > len(requests) // 2, "the encoder wrote no nulls"
    client = await Client.connect(server.ws_url)
    try:
        keys = sorted(requests)
        for start in range(0, len(keys), BATCH):
            batch = {f"n{i}": keys[i] for i in range(start, min(start + BATCH, len(keys)))}
            await client.ws.send(subscribe_message({sid: _sub(requests[key]) for sid, key in batch.items()}))
            refused = {}
            for sid, key in batch.items():
                creation = await client.creation(sid, 60)
                if creation["type"] != "success":
                    refused[key] = creation
            assert not refused, refused
            await client.ws.send(json.dumps({"type": "unsubscribe", "unsubscribe": list(batch)}))
    finally:
        await client.close()


async def test_an_unset_time_unit_sent_as_null_means_seconds(server: ServerProcess) -> None:
    rid = f"ri.test.nulls.{uuid.uuid4().hex[:12]}"
    start = time.time_ns() - 10 * NANOS
    await write_points(server.base_url, rid, "x", [(start + i * 2 * NANOS, float(i)) for i in range(4)])
    x = sc.NumericSeries(raw=sc.Reference(name="x"))
    node = sc.ComputableNode(
        series=sc.SummarizeSeries(
            input=sc.Series(
                numeric=sc.NumericSeries(time_difference=sc.TimeDifferenceSeries(input=sc.Series(numeric=x)))
            ),
            numeric_aggregations={},
        )
    )
    variable = {
        "type": "channel",
        "channel": {
            "type": "dataSource",
            "dataSource": {
                "dataSourceRid": {"type": "literal", "literal": rid},
                "channel": {"type": "literal", "literal": "x"},
                "tags": {},
                "tagsToGroupBy": [],
                "groupByTags": [],
            },
        },
    }
    request = {
        "node": ConjureEncoder.do_encode(node),
        "windowWidth": {"seconds": WINDOW_S, "nanos": 0},
        "context": {"variables": {"x": variable}, "datasetReferences": {}},
    }
    encoded = _encoded_with_nulls(request)
    assert encoded["node"]["series"]["input"]["numeric"]["timeDifference"]["timeUnit"] is None
    client = await Client.connect(server.ws_url)
    try:
        await client.ws.send(subscribe_message({"td": _sub(encoded)}))
        creation = await client.creation("td", 60)
        assert creation["type"] == "success", creation
        kind, entries = full_entries(await client.update("td", 60))
        assert kind == "numeric"
        assert [v for _, v in entries] == [2.0, 2.0, 2.0]  # points 2 s apart, in seconds
    finally:
        await client.close()


async def test_a_null_field_of_a_catalog_body_is_an_absent_one(server: ServerProcess) -> None:
    """The same rule on HTTP bodies (app/api/admitted_route.py): `properties: null` is no properties,
    not a 400 for a map that is not one."""
    rid = f"ri.test.nulls.{uuid.uuid4().hex[:12]}"
    scopes = [{"dataScopeName": "main", "dataSourceRid": rid, "seriesTags": None}]
    body = {"title": "rig", "dataScopes": scopes, "properties": None, "typedProperties": None}
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        created = await http.post("/assets/v1/assets", json=body)
        assert created.status_code == 200, created.text
        asset = created.json()
        assert asset["properties"] == {} and asset["dataScopes"][0]["seriesTags"] == {}
        url = f"/assets/v1/assets/{asset['rid']}"
        assert (await http.put(url, json={"properties": {"k": "v"}})).status_code == 200
        renamed = await http.put(url, json={"title": "rig 2", "properties": None})  # null: left as it is
        assert renamed.status_code == 200, renamed.text
        assert renamed.json()["title"] == "rig 2" and renamed.json()["properties"] == {"k": "v"}
