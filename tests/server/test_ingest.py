"""`POST /storage/writer/v1`: what is accepted is stored exactly; what is refused stores nothing."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess
from tests.log_file import StoredRow, stored_rows
from tests.wire import NANOS, Client, channel_variable, new_id, series_node, subscription, ts


def stored(server: ServerProcess, rid: str) -> list[StoredRow]:
    """Read the server's log file directly: what is really on disk for this data source, a point a row."""
    return stored_rows(server.data_dir, rid)


def body(rid: str, batches: list[dict[str, Any]]) -> dict[str, Any]:
    return {"dataSourceRid": rid, "batches": batches}


def doubles(
    channel: str, points: list[tuple[int, Any]], tags: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "channel": channel,
        "tags": tags or {},
        "points": {"type": "double", "double": [{"timestamp": ts(t), "value": v} for t, v in points]},
    }


def strings(channel: str, points: list[tuple[int, str]]) -> dict[str, Any]:
    return {
        "channel": channel,
        "points": {"type": "string", "string": [{"timestamp": ts(t), "value": v} for t, v in points]},
    }


def rid_for(name: str) -> str:
    return f"ri.ingest.{name}.{time.time_ns()}"


def test_double_and_string_points_are_stored_with_exact_timestamps(server: ServerProcess) -> None:
    rid = rid_for("ok")
    t0 = 1_763_769_600 * NANOS + 123_456_789
    request = body(
        rid,
        [
            doubles("engine.temp", [(t0, 21.5), (t0 + 1, "NaN"), (t0 + 2, "Infinity")], {"vehicle": "a1"}),
            strings("gear", [(t0, "P"), (t0 + 5, "D")]),
        ],
    )
    r = httpx.post(f"{server.base_url}/storage/writer/v1", json=request)
    assert r.status_code == 200, r.text
    rows = stored(server, rid)
    assert [(c, t, v, s) for c, _, t, v, s in rows] == [
        ("engine.temp", t0, 21.5, None),
        ("engine.temp", t0 + 1, None, None),  # SQLite keeps NaN as NULL; it streams back as "NaN"
        ("engine.temp", t0 + 2, float("inf"), None),
        ("gear", t0, None, "P"),
        ("gear", t0 + 5, None, "D"),
    ]
    assert rows[0][1] == '{"vehicle":"a1"}'


BAD_REQUESTS = {
    "not json": b"{nope",
    "missing dataSourceRid": {"batches": []},
    "empty dataSourceRid": {"dataSourceRid": "", "batches": []},
    "unknown points type": {
        "dataSourceRid": "x",
        "batches": [{"channel": "c", "points": {"type": "int64", "int64": []}}],
    },
    "negative nanos": {
        "dataSourceRid": "x",
        "batches": [
            {
                "channel": "c",
                "points": {
                    "type": "double",
                    "double": [{"timestamp": {"seconds": 1, "nanos": -1}, "value": 1}],
                },
            }
        ],
    },
    "value of wrong type": {
        "dataSourceRid": "x",
        "batches": [
            {
                "channel": "c",
                "points": {
                    "type": "double",
                    "double": [{"timestamp": {"seconds": 1, "nanos": 0}, "value": "hot"}],
                },
            }
        ],
    },
    "timestamp beyond int64 nanoseconds": {
        "dataSourceRid": "x",
        "batches": [
            {
                "channel": "c",
                "points": {
                    "type": "double",
                    "double": [{"timestamp": {"seconds": 10**12, "nanos": 0}, "value": 1.0}],
                },
            }
        ],
    },
}


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
def test_invalid_requests_get_400_with_a_serializable_error(server: ServerProcess, name: str) -> None:
    payload = BAD_REQUESTS[name]
    if isinstance(payload, bytes):
        r = httpx.post(f"{server.base_url}/storage/writer/v1", content=payload)
    else:
        r = httpx.post(f"{server.base_url}/storage/writer/v1", json=payload)
    assert r.status_code == 400
    error = r.json()
    assert error["name"] == "Default:InvalidArgument"
    assert error["statusCode"] == 400
    assert error["message"]
    assert error["errorInstanceId"]
    # Conjure's HTTP error fields beside them (tests/server/test_http_errors.py decodes them as a client)
    assert (error["errorCode"], error["errorName"]) == ("INVALID_ARGUMENT", "Default:InvalidArgument")
    assert error["parameters"] == error["params"]


def test_a_request_with_one_bad_point_stores_none_of_its_points(server: ServerProcess) -> None:
    rid = rid_for("atomic")
    good = doubles("a", [(NANOS * 1_700_000_000, 1.0)])
    bad = doubles("b", [(NANOS * 1_700_000_000, 2.0)])
    bad["points"]["double"].append({"timestamp": {"seconds": 1_700_000_001, "nanos": 0}, "value": None})
    r = httpx.post(f"{server.base_url}/storage/writer/v1", json=body(rid, [good, bad]))
    assert r.status_code == 400
    assert "batches.1" in r.json()["message"]  # the message says where
    assert stored(server, rid) == []


def test_string_points_on_a_double_series_are_refused_whole(server: ServerProcess) -> None:
    rid = rid_for("kind")
    t = NANOS * 1_700_000_000
    assert httpx.post(
        f"{server.base_url}/storage/writer/v1", json=body(rid, [doubles("c", [(t, 1.0)])])
    ).is_success
    r = httpx.post(
        f"{server.base_url}/storage/writer/v1",
        json=body(rid, [doubles("other", [(t, 5.0)]), strings("c", [(t + 1, "x")])]),
    )
    assert r.status_code == 400
    assert "holds double points" in r.json()["message"]
    assert [(c, v) for c, _, _, v, _ in stored(server, rid)] == [("c", 1.0)]


async def test_string_channel_streams_as_an_enum_series(server: ServerProcess) -> None:
    rid = rid_for("enum")
    now = time.time_ns()
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        r = await http.post(
            "/storage/writer/v1", json=body(rid, [strings("gear", [(now - NANOS, "P"), (now, "D")])])
        )
        assert r.status_code == 200
        client = await Client.connect(server.ws_url)
        sub_id = new_id()
        await client.subscribe(
            {sub_id: subscription(series_node(kind="enum"), {"x": channel_variable(rid, "gear")}, 600)}
        )
        assert (await client.creation(sub_id))["type"] == "success"
        full = (await client.update(sub_id))["full"]["result"]
        assert full["type"] == "enum"
        assert [full["enum"]["categories"][v] for v in full["enum"]["values"]] == ["P", "D"]
        r = await http.post("/storage/writer/v1", json=body(rid, [strings("gear", [(time.time_ns(), "N")])]))
        append = (await client.update(sub_id))["append"]["result"]
        assert append["type"] == "enum"
        assert [append["enum"]["categories"][v] for v in append["enum"]["values"]] == ["N"]
        assert append["enum"]["categories"][:2] == ["P", "D"]  # categories stay stable across appends
        await client.close()


async def test_nan_and_infinities_round_trip_as_conjure_doubles(server: ServerProcess) -> None:
    rid = rid_for("nan")
    now = time.time_ns()
    request = body(
        rid, [doubles("v", [(now - 3, "NaN"), (now - 2, "Infinity"), (now - 1, "-Infinity"), (now, 1.5)])]
    )
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        assert (await http.post("/storage/writer/v1", json=request)).status_code == 200
    client = await Client.connect(server.ws_url)
    sub_id = new_id()
    await client.subscribe({sub_id: subscription(series_node(), {"x": channel_variable(rid, "v")}, 600)})
    assert (await client.creation(sub_id))["type"] == "success"
    full = (await client.update(sub_id))["full"]["result"]
    assert full["numeric"]["values"] == ["NaN", "Infinity", "-Infinity", 1.5]
    await client.close()
