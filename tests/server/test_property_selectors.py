"""`selectNumericProperty` and `selectCategoricalProperty` over a real server: typed properties of
assets and runs (`typedProperties`, Nominal's `TypedPropertyValue`) kept by the catalog, read as a
constant broadcast by the node that consumes it, refused by name where nominal-api says they are
unsupported or where the property is missing or of the other type, and followed by live
subscriptions when an edit changes them. Nodes are built with nominal-api's classes."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest
from nominal_api import scout_compute_api as sc
from nominal_api import scout_rids_api

from sparkwire_client import Catalog
from sparkwire_client.assets import typed_values
from tests.conftest import ServerProcess
from tests.server.test_nominal_datasets import (
    WINDOW_S,
    create,
    enc,
    lit,
    next_full,
    numeric_node,
    points,
    put,
    refused,
    rid,
    saved,
    select,
    subscribe,
)
from tests.wire import NANOS, Client, subscription, write_points

Json = dict[str, Any]


def numeric(v: float) -> Json:
    return {"type": "numericValue", "numericValue": v}


def string(v: str) -> Json:
    return {"type": "stringValue", "stringValue": v}


def asset_ds(r: str) -> sc.Dataset:
    return sc.Dataset(asset=sc.Asset(rid=lit(r)))


def run_ds(r: str) -> sc.Dataset:
    return sc.Dataset(run=sc.Run(rid=lit(r)))


def numeric_property(name: str, dataset: sc.Dataset | None) -> sc.NumericSeries:
    return sc.NumericSeries(select_numeric_property=sc.SelectProperty(property_name=name, dataset=dataset))


def categorical_property(name: str, dataset: sc.Dataset | None) -> sc.EnumSeries:
    return sc.EnumSeries(select_categorical_property=sc.SelectProperty(property_name=name, dataset=dataset))


def times(a: sc.NumericSeries, b: sc.NumericSeries) -> sc.NumericSeries:
    return sc.NumericSeries(multiply=sc.Multiply(left=a, right=b))


def equal_ranges(*inputs: sc.EnumSeries) -> Json:
    node = sc.ComputableNode(
        ranges=sc.SummarizeRanges(
            input=sc.RangeSeries(
                categorical_equality_ranges_v2=sc.CategoricalEqualityRangesV2(
                    inputs=list(inputs), equality_operator=sc.EqualityOperator.ALL_EQUAL
                )
            )
        )
    )
    return dict(enc(node))


def enum_node(e: sc.EnumSeries) -> Json:
    return dict(
        enc(sc.ComputableNode(series=sc.SummarizeSeries(input=sc.Series(enum=e), numeric_aggregations={})))
    )


@pytest.fixture
async def client(server: ServerProcess) -> Any:
    c = await Client.connect(server.ws_url)
    yield c
    await c.close()


async def test_typed_properties_are_kept_served_and_validated(server: ServerProcess) -> None:
    catalog = Catalog(server.base_url)
    asset = await asyncio.to_thread(
        catalog.create_asset, "rig", [], None, {"gain": 2.5, "fluid": "LOX", "stage": 2}
    )
    assert typed_values(asset) == {"gain": 2.5, "fluid": "LOX", "stage": 2.0}
    assert asset["typedProperties"]["fluid"] == string("LOX")  # a Conjure union: only its variant
    assert typed_values(await asyncio.to_thread(catalog.asset, asset["rid"])) == typed_values(asset)
    run = await create(
        server.base_url,
        "runs",
        {"title": "r", "start": {"seconds": 1}, "typedProperties": {"gain": numeric(4.0)}},
    )
    assert run["typedProperties"] == {"gain": numeric(4.0)}
    # an update given typedProperties replaces them all; one without leaves them
    updated = await put(
        server.base_url, f"assets/{asset['rid']}", {"typedProperties": {"gain": numeric(3.0)}}
    )
    assert updated["typedProperties"] == {"gain": numeric(3.0)}
    assert (await put(server.base_url, f"assets/{asset['rid']}", {"title": "rig 2"}))["typedProperties"] == {
        "gain": numeric(3.0)
    }
    bad = {
        "both values": {"type": "numericValue", "numericValue": 1.0, "stringValue": "x"},
        "no value": {"type": "stringValue"},
        "unknown variant": {"type": "booleanValue", "booleanValue": True},
        "infinite": {"type": "numericValue", "numericValue": "Infinity"},
        "a string as a number": {"type": "numericValue", "numericValue": "two"},
    }
    async with httpx.AsyncClient() as http:
        for why, value in bad.items():
            answer = await http.post(
                f"{server.base_url}/assets/v1/assets",
                json={"title": "x", "dataScopes": [], "typedProperties": {"p": value}},
            )
            assert answer.status_code == 400, (why, answer.text)
            assert answer.json()["errorName"] == "Default:InvalidArgument", (why, answer.text)


async def test_numeric_property_scales_a_channel_and_follows_an_edit(
    server: ServerProcess, client: Client
) -> None:
    r1, t0 = rid(), time.time_ns() - 60 * NANOS
    speed = [(t0, 1.0), (t0 + NANOS, 2.0)]
    await write_points(server.base_url, r1, "speed", speed)
    scope = {"dataScopeName": "main", "dataSourceRid": r1, "seriesTags": {}}
    asset = await create(
        server.base_url,
        "assets",
        {"title": "car", "dataScopes": [scope], "typedProperties": {"gain": numeric(2.5)}},
    )
    over_asset = times(
        sc.NumericSeries(select_numeric=select(asset_ds(asset["rid"]), "speed")),
        numeric_property("gain", asset_ds(asset["rid"])),
    )
    view = await subscribe(client, "prop-asset", numeric_node(over_asset))
    assert points(view) == {(): [(t, v * 2.5) for t, v in speed]}

    # a run over that asset reads the run's own property, never the asset's
    run = await create(
        server.base_url,
        "runs",
        {
            "title": "lap",
            "assetRids": [asset["rid"]],
            "start": {"seconds": t0 // NANOS - 1},
            "typedProperties": {"gain": numeric(-4.0)},
        },
    )
    over_run = times(
        sc.NumericSeries(select_numeric=select(run_ds(run["rid"]), "speed")),
        numeric_property("gain", run_ds(run["rid"])),
    )
    run_view = await subscribe(client, "prop-run", numeric_node(over_run))
    assert points(run_view) == {(): [(t, v * -4.0) for t, v in speed]}

    # live: a new point is scaled as it arrives
    await write_points(server.base_url, r1, "speed", [(t0 + 2 * NANOS, 10.0)])
    append = await client.update("prop-asset", timeout=120)
    assert append["type"] == "append", append
    view.apply(append)
    assert points(view) == {(): [(t, v * 2.5) for t, v in [*speed, (t0 + 2 * NANOS, 10.0)]]}

    # an edit of the property reaches the live subscription as a FullResult with the new value
    await asyncio.to_thread(
        Catalog(server.base_url).update_asset, asset["rid"], typed_properties={"gain": 3.0}
    )
    edited = await next_full(client, "prop-asset")
    assert points(edited) == {(): [(t, v * 3.0) for t, v in [*speed, (t0 + 2 * NANOS, 10.0)]]}


async def test_categorical_property_is_compared_with_an_enum_channel(
    server: ServerProcess, client: Client
) -> None:
    r1, t0 = rid(), time.time_ns() - 60 * NANOS
    mode = [(t0, "IDLE"), (t0 + NANOS, "LOX"), (t0 + 2 * NANOS, "LOX"), (t0 + 3 * NANOS, "FUEL")]
    await write_points(server.base_url, r1, "mode", mode)
    asset = await create(
        server.base_url,
        "assets",
        {
            "title": "stand",
            "dataScopes": [{"dataScopeName": "main", "dataSourceRid": r1, "seriesTags": {}}],
            "typedProperties": {"fluid": string("LOX")},
            "properties": {"site": "FUEL"},
        },
    )
    channel = sc.EnumSeries(select_enum=select(asset_ds(asset["rid"]), "mode"))
    # the property stands at every timestamp of the channel: equal while the mode is the fluid
    view = await subscribe(
        client, "cat-eq", equal_ranges(channel, categorical_property("fluid", asset_ds(asset["rid"])))
    )
    assert view.snapshot() == {(): ("range", [(t0 + NANOS, t0 + 3 * NANOS)])}
    # an untyped string property is read too (Nominal's older properties are strings)
    site = await subscribe(
        client, "cat-site", equal_ranges(categorical_property("site", asset_ds(asset["rid"])), channel)
    )
    assert site.snapshot() == {(): ("range", [(t0 + 3 * NANOS, float("inf"))])}
    # the edit: the fluid becomes FUEL
    await put(server.base_url, f"assets/{asset['rid']}", {"typedProperties": {"fluid": string("FUEL")}})
    edited = await next_full(client, "cat-eq")
    assert edited.snapshot() == {(): ("range", [(t0 + 3 * NANOS, float("inf"))])}


async def test_what_a_property_selector_cannot_answer_is_refused_by_name(
    server: ServerProcess, client: Client
) -> None:
    r1 = rid()
    scope = {"dataScopeName": "main", "dataSourceRid": r1, "seriesTags": {}}
    tag = uuid.uuid4().hex
    a = await create(
        server.base_url,
        "assets",
        {
            "title": "a",
            "dataScopes": [scope],
            "properties": {"batch": tag},
            "typedProperties": {"gain": numeric(1.0), "fluid": string("LOX")},
        },
    )
    await create(
        server.base_url,
        "assets",
        {
            "title": "b",
            "dataScopes": [scope],
            "properties": {"batch": tag},
            "typedProperties": {"gain": numeric(2.0)},
        },
    )
    both = sc.Dataset(
        search=sc.SearchDataset(
            target=sc.SearchTarget(
                assets=sc.AssetsSearchTarget(
                    query=sc.ResourceSearchQuery(
                        properties=scout_rids_api.PropertiesFilter(name="batch", values=[tag])
                    )
                )
            ),
            max_results=None,
        )
    )
    speed = sc.NumericSeries(select_numeric=select(asset_ds(a["rid"]), "speed"))
    mode = sc.EnumSeries(select_enum=select(asset_ds(a["rid"]), "mode"))
    cases: dict[str, tuple[Json, Json]] = {
        "saved dataset": (
            numeric_node(times(speed, numeric_property("gain", saved(r1)))),
            {"variant": "selectNumericProperty", "field": "dataset"},
        ),
        "no dataset": (
            numeric_node(times(speed, numeric_property("gain", None))),
            {"variant": "selectNumericProperty", "field": "dataset"},
        ),
        "missing property": (
            numeric_node(times(speed, numeric_property("mass", asset_ds(a["rid"])))),
            {
                "variant": "selectNumericProperty",
                "field": "propertyName",
                "propertyName": "mass",
                "rid": a["rid"],
            },
        ),
        "a string read as a number": (
            numeric_node(times(speed, numeric_property("fluid", asset_ds(a["rid"])))),
            {
                "variant": "selectNumericProperty",
                "field": "propertyName",
                "propertyName": "fluid",
                "rid": a["rid"],
            },
        ),
        "a number read as a label": (
            equal_ranges(mode, categorical_property("gain", asset_ds(a["rid"]))),
            {
                "variant": "selectCategoricalProperty",
                "field": "propertyName",
                "propertyName": "gain",
                "rid": a["rid"],
            },
        ),
        "assets that disagree": (
            numeric_node(times(speed, numeric_property("gain", both))),
            {"variant": "selectNumericProperty", "field": "dataset", "propertyName": "gain"},
        ),
        "a label as the whole series": (
            enum_node(categorical_property("fluid", asset_ds(a["rid"]))),
            {"variant": "selectCategoricalProperty"},
        ),
        "a label where timestamps are needed": (
            dict(
                enc(
                    sc.ComputableNode(
                        ranges=sc.SummarizeRanges(
                            input=sc.RangeSeries(
                                on_change=sc.OnChangeRanges(
                                    input=sc.Series(enum=categorical_property("fluid", asset_ds(a["rid"])))
                                )
                            )
                        )
                    )
                )
            ),
            {"variant": "selectCategoricalProperty"},
        ),
    }
    for name, (node, params) in cases.items():
        got = await refused(client, f"refused-{name}", node)
        assert got == {"invalidTypes": "", **params}, (name, got)


async def test_a_property_alone_is_a_constant_and_has_no_series(
    server: ServerProcess, client: Client
) -> None:
    """As `constant`: a SummarizeSeries of it alone is refused (it has no timestamps of its own)."""
    scope = {"dataScopeName": "main", "dataSourceRid": rid(), "seriesTags": {}}
    asset = await create(
        server.base_url,
        "assets",
        {"title": "c", "dataScopes": [scope], "typedProperties": {"gain": numeric(1.0)}},
    )
    node = numeric_node(numeric_property("gain", asset_ds(asset["rid"])))
    await client.subscribe({"alone": subscription(node, {}, WINDOW_S)})
    creation = await client.creation("alone", timeout=60)
    assert creation["type"] == "error", creation
    assert creation["error"]["serializableError"]["params"] == {"invalidTypes": "", "variant": "series"}
