"""How today's Nominal requests name their data, over a real server: variables bound to a series
(`VariableValue.series`) and to a sub-computation (`computeNode`), `tagFilters`, the `Dataset`
algebra under the select nodes, and asset and run channels resolved against the catalog Sparkwire
keeps (app/assets.py), which survives a kill -9. Every node and variable is built with nominal-api's
classes and serialized by conjure_python_client."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest
from conjure_python_client import ConjureEncoder
from nominal_api import scout_compute_api as sc
from nominal_api import scout_rids_api

from compute.evaluation.compiler import datasets
from compute.evaluation.compiler.builder import Builder as _Builder
from sparkwire_client import Catalog, CatalogError, DataScope, asset_channel
from sparkwire_client import nodes as client_nodes
from tests.client_view import ResultView
from tests.conftest import ServerProcess, start_server
from tests.hostile import make_jwt
from tests.unit.test_nominal_names import conjure_ir, ir_names
from tests.wire import NANOS, Client, subscription, write_points

WINDOW_S = 3600.0
WINDOW_NS = int(WINDOW_S * NANOS)
MS = 1_000_000
Json = dict[str, Any]


def rid() -> str:
    return f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"


def enc(value: Any) -> Any:
    return ConjureEncoder.do_encode(value)


def lit(s: str) -> sc.StringConstant:
    return sc.StringConstant(literal=s)


def saved(r: str) -> sc.Dataset:
    return sc.Dataset(saved=sc.SavedDataset(rid=lit(r)))


def select(dataset: sc.Dataset | None, name: str) -> sc.SelectSeries:
    return sc.SelectSeries(name=lit(name), dataset=dataset)


def numeric_node(n: sc.NumericSeries) -> Json:
    return dict(
        enc(sc.ComputableNode(series=sc.SummarizeSeries(input=sc.Series(numeric=n), numeric_aggregations={})))
    )


def ref(name: str) -> sc.NumericSeries:
    return sc.NumericSeries(raw=sc.Reference(name=name))


def series_var(s: sc.SelectSeries, group_by: list[str] | None = None) -> Json:
    v = sc.VariableValue(series=sc.SeriesVariable(select=s, group_by_tags=[lit(g) for g in group_by or []]))
    return dict(enc(v))


def plus(a: sc.NumericSeries, b: sc.NumericSeries) -> sc.NumericSeries:
    return sc.NumericSeries(add=sc.Add(left=a, right=b))


async def subscribe(client: Client, sub_id: str, node: Json, variables: Json | None = None) -> ResultView:
    await client.subscribe({sub_id: subscription(node, variables or {}, WINDOW_S, lateness_s=WINDOW_S)})
    creation = await client.creation(sub_id, timeout=120)
    assert creation["type"] == "success", creation
    view = ResultView(WINDOW_NS)
    full = await client.update(sub_id, timeout=300)
    assert full["type"] == "full", full
    view.apply(full)
    return view


async def refused(client: Client, sub_id: str, node: Json, variables: Json | None = None) -> Json:
    await client.subscribe({sub_id: subscription(node, variables or {}, WINDOW_S)})
    creation = await client.creation(sub_id, timeout=60)
    assert creation["type"] == "error", creation
    assert creation["error"]["serializableError"]["name"] == "PersistentCompute:InvalidComputation", creation
    params: Json = creation["error"]["serializableError"]["params"]
    return params


def points(view: ResultView) -> dict[Any, list[tuple[int, float]]]:
    return {k: [tuple(p) for p in pts] for k, (_, pts) in view.snapshot().items()}


@pytest.fixture
async def client(server: ServerProcess) -> Any:
    c = await Client.connect(server.ws_url)
    yield c
    await c.close()


async def test_series_and_compute_node_variables_and_tag_filters(
    server: ServerProcess, client: Client
) -> None:
    r, t0 = rid(), time.time_ns() - 60 * NANOS
    xs = [(t0, 1.0), (t0 + NANOS, 2.0), (t0 + 2 * NANOS, 3.0)]
    await write_points(server.base_url, r, "x", xs)

    # VariableValue.series: a series selected from a dataset, its type chosen by the consuming node
    view = await subscribe(
        client, "series-var", numeric_node(ref("xs")), {"xs": series_var(select(saved(r), "x"))}
    )
    assert points(view) == {(): xs}

    # VariableValue.computeNode: x + x bound to `twice`, referenced twice: (x + x) + (x + x)
    twice = sc.VariableValue(
        compute_node=sc.ComputeNodeWithContext(
            series_node=sc.ComputeNode(numeric=plus(ref("x"), ref("x"))),
            context=sc.Context(variables={}, dataset_references={}),
        )
    )
    variables = {"twice": dict(enc(twice)), "x": series_var(select(saved(r), "x"))}
    view = await subscribe(client, "compute-var", numeric_node(plus(ref("twice"), ref("twice"))), variables)
    assert points(view) == {(): [(t, 4 * v) for t, v in xs]}

    # tagFilters: IN and NOT_IN, Nominal's semantics (a series without the tag passes NOT_IN)
    tr = rid()
    await write_points(server.base_url, tr, "y", [(t0, 1.0)], tags={"car": "a"})
    await write_points(server.base_url, tr, "y", [(t0 + MS, 2.0)], tags={"car": "b"})
    await write_points(server.base_url, tr, "y", [(t0 + 2 * MS, 3.0)], tags={"car": "c"})
    await write_points(server.base_url, tr, "y", [(t0 + 3 * MS, 4.0)])

    def filtered(op: str, values: list[str]) -> Json:
        f = sc.TagFilters(single=sc.TagFilter(key=lit("car"), values=[lit(v) for v in values], operator=op))
        channel = sc.DataSourceChannel(
            data_source_rid=lit(tr),
            channel=lit("y"),
            tags={},
            tag_filters=f,
            tags_to_group_by=[],
            group_by_tags=[],
        )
        return {"y": dict(enc(sc.VariableValue(channel=sc.ChannelSeries(data_source=channel))))}

    view = await subscribe(client, "tag-in", numeric_node(ref("y")), filtered("IN", ["a", "c"]))
    assert points(view) == {(): [(t0, 1.0), (t0 + 2 * MS, 3.0)]}
    view = await subscribe(client, "tag-not-in", numeric_node(ref("y")), filtered("NOT_IN", ["a", "c"]))
    assert points(view) == {(): [(t0 + MS, 2.0), (t0 + 3 * MS, 4.0)]}

    derived = sc.VariableValue(
        derived=sc.DerivedSeries(
            function=sc.FunctionDerivedSeries(
                module_name=lit("m"),
                function_name=lit("f"),
                version_reference=sc.ModuleVersionReference(
                    pinned=sc.PinnedModuleVersionReference(version=lit("1"))
                ),
                function_args={},
            )
        )
    )
    error = await refused(client, "derived", numeric_node(ref("d")), {"d": dict(enc(derived))})
    assert (error["invalidTypes"], error["variant"]) == ("", "derived"), error


async def test_the_dataset_algebra(server: ServerProcess, client: Client) -> None:
    r1, r2, t0 = rid(), rid(), time.time_ns() - 60 * NANOS
    one = [(t0, 1.0), (t0 + 2 * NANOS, 3.0)]
    two = [(t0 + NANOS, 20.0)]
    await write_points(server.base_url, r1, "x", one)
    await write_points(server.base_url, r2, "x", two)

    def tagged(d: sc.Dataset, k: str, v: str) -> sc.Dataset:
        return sc.Dataset(tag=sc.TaggedDataset(input=d, key=lit(k), value=lit(v)))

    both = sc.Dataset(
        combine=sc.CombinedDataset(inputs=[tagged(saved(r1), "src", "one"), tagged(saved(r2), "src", "two")])
    )
    # combine: the union of the points, in time order
    view = await subscribe(client, "combine", numeric_node(ref("x")), {"x": series_var(select(both, "x"))})
    assert points(view) == {(): sorted(one + two)}
    # tag: an injected tag groups like a series tag
    view = await subscribe(
        client, "grouped", numeric_node(ref("x")), {"x": series_var(select(both, "x"), ["src"])}
    )
    assert points(view) == {(("src", "one"),): one, (("src", "two"),): two}
    # filter: folded against the injected tag
    only_two = sc.Dataset(
        filter=sc.FilteredDataset(
            input=both,
            predicate=sc.TagPredicate(
                in_=sc.TagIn(key=lit("src"), values=sc.StringSetConstantV2(literal=[lit("two")]))
            ),
        )
    )
    view = await subscribe(client, "filter", numeric_node(ref("x")), {"x": series_var(select(only_two, "x"))})
    assert points(view) == {(): two}
    # timeShift: positive moves points later
    shifted = sc.Dataset(
        time_shift=sc.TimeShiftedDataset(
            input=saved(r1),
            offset=sc.Duration(seconds=sc.DurationSeconds(seconds=sc.IntegerConstant(literal=-1))),
        )
    )
    view = await subscribe(
        client, "shift", numeric_node(sc.NumericSeries(select_numeric=select(shifted, "x")))
    )
    assert points(view) == {(): [(t - NANOS, v) for t, v in one]}
    # withSeries + dropSeries: rename x to renamed
    renamed = sc.Dataset(
        drop_series=sc.DropSeriesDataset(
            input=sc.Dataset(
                with_series=sc.WithSeriesDataset(
                    input=saved(r1),
                    series=[
                        sc.NamedSeries(
                            name=lit("renamed"),
                            definition=sc.Series(numeric=sc.NumericSeries(select_numeric=select(None, "x"))),
                        )
                    ],
                )
            ),
            names=[lit("x")],
        )
    )
    view = await subscribe(
        client, "renamed", numeric_node(sc.NumericSeries(select_numeric=select(renamed, "renamed")))
    )
    assert points(view) == {(): one}
    error = await refused(
        client, "dropped", numeric_node(sc.NumericSeries(select_numeric=select(renamed, "x")))
    )
    assert (error["invalidTypes"], error["variant"]) == ("", "dropSeries"), error

    # refused by name, with the reason
    search = sc.Dataset(
        search=sc.SearchDataset(
            target=sc.SearchTarget(
                assets=sc.AssetsSearchTarget(query=sc.ResourceSearchQuery(workspace=lit("car")))
            ),
            max_results=None,
        )
    )
    error = await refused(
        client, "search", numeric_node(sc.NumericSeries(select_numeric=select(search, "x")))
    )
    assert (error["invalidTypes"], error["variant"]) == ("", "search"), error
    reference = sc.Dataset(reference=sc.DatasetReference(name=lit("d")))
    error = await refused(
        client, "reference", numeric_node(sc.NumericSeries(select_numeric=select(reference, "x")))
    )
    assert (error["invalidTypes"], error["variant"]) == ("", "reference"), error


def with_context(node: Json, context: sc.Context) -> Json:
    """A subscription whose whole `Context` (variables and dataset references) is nominal-api's."""
    sub = subscription(node, {}, WINDOW_S, lateness_s=WINDOW_S)
    sub["computeRequest"]["context"] = dict(enc(context))
    return sub


async def test_dataset_references_resolve_from_the_subscriptions_context(
    server: ServerProcess, client: Client
) -> None:
    r1, r2, t0 = rid(), rid(), time.time_ns() - 60 * NANOS
    one = [(t0, 1.0), (t0 + 2 * NANOS, 3.0)]
    two = [(t0 + NANOS, 20.0)]
    await write_points(server.base_url, r1, "x", one)
    await write_points(server.base_url, r2, "x", two)

    def tagged(d: sc.Dataset, v: str) -> sc.Dataset:
        return sc.Dataset(tag=sc.TaggedDataset(input=d, key=lit("src"), value=lit(v)))

    def reference(name: str) -> sc.Dataset:
        return sc.Dataset(reference=sc.DatasetReference(name=lit(name)))

    fleet = sc.Dataset(
        combine=sc.CombinedDataset(inputs=[tagged(saved(r1), "one"), tagged(saved(r2), "two")])
    )
    references = {"fleet": fleet, "alias": reference("fleet")}  # a reference may name another

    async def first_view(sub_id: str, node: Json, context: sc.Context) -> ResultView:
        await client.subscribe({sub_id: with_context(node, context)})
        created = await client.creation(sub_id, timeout=120)
        assert created["type"] == "success", created
        full = await client.update(sub_id, timeout=300)
        assert full["type"] == "full", full
        view = ResultView(WINDOW_NS)
        view.apply(full)
        return view

    # selectNumeric over a reference: the named dataset of the context
    node = numeric_node(sc.NumericSeries(select_numeric=select(reference("fleet"), "x")))
    view = await first_view("ref", node, sc.Context(variables={}, dataset_references=references))
    assert points(view) == {(): sorted(one + two)}

    # a series variable over a reference to a reference, grouped by the tag the dataset injects
    variable = sc.VariableValue(
        series=sc.SeriesVariable(select=select(reference("alias"), "x"), group_by_tags=[lit("src")])
    )
    context = sc.Context(variables={"s": variable}, dataset_references=references)
    view = await first_view("ref-var", numeric_node(ref("s")), context)
    assert points(view) == {(("src", "one"),): one, (("src", "two"),): two}

    # a computeNode variable's own context binds `fleet` anew inside it: the inner binding wins
    inner = sc.VariableValue(
        compute_node=sc.ComputeNodeWithContext(
            series_node=sc.ComputeNode(
                numeric=sc.NumericSeries(select_numeric=select(reference("fleet"), "x"))
            ),
            context=sc.Context(variables={}, dataset_references={"fleet": saved(r2)}),
        )
    )
    context = sc.Context(variables={"v": inner}, dataset_references=references)
    view = await first_view("ref-inner", numeric_node(ref("v")), context)
    assert points(view) == {(): two}

    # what cannot resolve is refused by name: a name the context lacks, a reference to itself
    for sub_id, refs in (("ref-unknown", {"other": saved(r1)}), ("ref-loop", {"fleet": reference("fleet")})):
        await client.subscribe(
            {sub_id: with_context(node, sc.Context(variables={}, dataset_references=refs))}
        )
        created = await client.creation(sub_id, timeout=60)
        assert created["type"] == "error", created
        error = created["error"]["serializableError"]
        assert error["name"] == "PersistentCompute:InvalidComputation", error
        assert (error["params"]["invalidTypes"], error["params"]["variant"]) == ("", "reference"), error


async def create(base_url: str, path: str, body: Json) -> Json:
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{base_url}/assets/v1/{path}", json=body)
    assert response.status_code == 200, response.text
    created: Json = response.json()
    return created


async def test_asset_and_run_channels_resolve_against_the_catalog(
    server: ServerProcess, client: Client
) -> None:
    r1, r2, t0, fleet = rid(), rid(), time.time_ns() - 60 * NANOS, uuid.uuid4().hex
    await write_points(server.base_url, r1, "speed", [(t0, 1.0)], tags={"car": "a1"})
    await write_points(
        server.base_url, r1, "speed", [(t0 + MS, 99.0)], tags={"car": "zz"}
    )  # outside the scope
    await write_points(server.base_url, r2, "speed", [(t0 + 2 * MS, 2.0)])
    asset = await create(
        server.base_url,
        "assets",
        {
            "title": "car a1",
            "properties": {"team": "red", "fleet": fleet},
            "dataScopes": [
                {"dataScopeName": "main", "dataSourceRid": r1, "seriesTags": {"car": "a1"}},
                {"dataScopeName": "aux", "dataSourceRid": r2},
            ],
        },
    )
    channel = sc.ChannelSeries(
        asset=sc.AssetChannel(
            asset_rid=lit(asset["rid"]),
            data_scope_name=lit("main"),
            channel=lit("speed"),
            additional_tags={},
            tags_to_group_by=[],
            group_by_tags=[],
        )
    )
    view = await subscribe(
        client, "asset-channel", numeric_node(ref("s")), {"s": dict(enc(sc.VariableValue(channel=channel)))}
    )
    assert points(view) == {(): [(t0, 1.0)]}

    # Dataset.asset: one branch per data scope, tagged ASSET_RID and DATA_SCOPE
    by_scope = series_var(select(sc.Dataset(asset=sc.Asset(rid=lit(asset["rid"]))), "speed"), ["DATA_SCOPE"])
    view = await subscribe(client, "asset-dataset", numeric_node(ref("s")), {"s": by_scope})
    assert points(view) == {
        (("DATA_SCOPE", "main"),): [(t0, 1.0)],
        (("DATA_SCOPE", "aux"),): [(t0 + 2 * MS, 2.0)],
    }

    # search: the catalog's assets whose string property matches, each one branch per data scope
    by_fleet = sc.ResourceSearchQuery(
        properties=scout_rids_api.PropertiesFilter(name="fleet", values=[fleet])
    )
    found = sc.Dataset(
        search=sc.SearchDataset(
            target=sc.SearchTarget(assets=sc.AssetsSearchTarget(query=by_fleet)), max_results=None
        )
    )
    view = await subscribe(
        client, "search", numeric_node(ref("s")), {"s": series_var(select(found, "speed"), ["ASSET_RID"])}
    )
    assert points(view) == {(("ASSET_RID", asset["rid"]),): [(t0, 1.0), (t0 + 2 * MS, 2.0)]}

    # withDimensions: the asset's property as a tag to group by
    team = sc.Dimension(
        tag_key=None,
        value=sc.DimensionValue(string_property=sc.StringPropertyDimension(property_name=lit("team"))),
    )
    with_team = sc.Dataset(
        with_dimensions=sc.DimensionsDataset(
            input=sc.Dataset(asset=sc.Asset(rid=lit(asset["rid"]))), dimensions=[team]
        )
    )
    view = await subscribe(
        client, "dimensions", numeric_node(ref("s")), {"s": series_var(select(with_team, "speed"), ["team"])}
    )
    assert points(view) == {(("team", "red"),): [(t0, 1.0), (t0 + 2 * MS, 2.0)]}

    # a run still going streams, from its start on; a run that has ended is refused as Nominal refuses it
    await write_points(server.base_url, r2, "speed", [(t0 - 5 * NANOS, 7.0)])  # before the run below
    live = await create(
        server.base_url,
        "runs",
        {"title": "lap", "assetRids": [asset["rid"]], "start": {"seconds": t0 // NANOS}},
    )
    run_channel = sc.ChannelSeries(
        run=sc.RunChannel(
            run_rid=lit(live["rid"]),
            data_scope_name=lit("aux"),
            channel=lit("speed"),
            additional_tags={},
            tags_to_group_by=[],
            group_by_tags=[],
        )
    )
    run_vars = {"s": dict(enc(sc.VariableValue(channel=run_channel)))}
    view = await subscribe(client, "run-channel", numeric_node(ref("s")), run_vars)
    assert points(view) == {(): [(t0 + 2 * MS, 2.0)]}

    # alignByAnchor: each run's start onto the earliest run start (absolute time), grouped by run
    earlier = await create(
        server.base_url,
        "runs",
        {"title": "lap 0", "assetRids": [asset["rid"]], "start": {"seconds": t0 // NANOS - 10}},
    )
    aux = sc.TagPredicate(
        in_=sc.TagIn(key=lit("DATA_SCOPE"), values=sc.StringSetConstantV2(literal=[lit("aux")]))
    )
    runs = sc.Dataset(
        combine=sc.CombinedDataset(
            inputs=[
                sc.Dataset(run=sc.Run(rid=lit(live["rid"]))),
                sc.Dataset(run=sc.Run(rid=lit(earlier["rid"]))),
            ]
        )
    )
    aligned = sc.Dataset(
        align_by_anchor=sc.AnchorAlignedDataset(
            input=sc.Dataset(filter=sc.FilteredDataset(input=runs, predicate=aux)),
            anchor=sc.DatasetAnchor(run=sc.IntervalAnchor(interval_start=sc.IntervalStartTimeShift())),
            reference=sc.AnchorReference(earliest_anchor=sc.EarliestAnchorReference()),
        )
    )
    view = await subscribe(
        client, "aligned", numeric_node(ref("s")), {"s": series_var(select(aligned, "speed"), ["RUN_RID"])}
    )
    assert points(view) == {
        (("RUN_RID", earlier["rid"]),): [(t0 - 5 * NANOS, 7.0), (t0 + 2 * MS, 2.0)],
        (("RUN_RID", live["rid"]),): [(t0 + 2 * MS - 10 * NANOS, 2.0)],
    }
    ended = await create(
        server.base_url,
        "runs",
        {"title": "done", "assetRids": [asset["rid"]], "start": {"seconds": 1}, "end": {"seconds": 2}},
    )
    error = await refused(
        client,
        "ended-run",
        numeric_node(
            sc.NumericSeries(select_numeric=select(sc.Dataset(run=sc.Run(rid=lit(ended["rid"]))), "speed"))
        ),
    )
    assert error["invalidTypes"] == "RUN_WITH_FIXED_END", error


async def put(base_url: str, path: str, body: Json) -> Json:
    async with httpx.AsyncClient() as http:
        response = await http.put(f"{base_url}/assets/v1/{path}", json=body)
    assert response.status_code == 200, response.text
    updated: Json = response.json()
    return updated


async def next_full(client: Client, sub_id: str) -> ResultView:
    """The subscription's next FullResult, past any append that was on its way before it."""
    while True:
        update = await client.update(sub_id, timeout=300)
        assert update["type"] in ("full", "append"), update
        if update["type"] == "full":
            break
    view = ResultView(WINDOW_NS)
    view.apply(update)
    return view


async def next_error(client: Client, sub_id: str) -> Json:
    """The subscription's error update, past any data frame that was on its way before it."""
    while True:
        update = await client.update(sub_id, timeout=120)
        if update["type"] == "error":
            error: Json = update["error"]["serializableError"]
            return error


async def test_catalog_edits_reach_running_subscriptions(server: ServerProcess, client: Client) -> None:
    r1, r2, t0, fleet = rid(), rid(), time.time_ns() - 60 * NANOS, uuid.uuid4().hex
    mine = [(t0, 1.0), (t0 + NANOS, 2.0)]
    await write_points(server.base_url, r1, "speed", mine, tags={"car": "a1"})
    await write_points(server.base_url, r1, "speed", [(t0 + MS, 99.0)], tags={"car": "zz"})
    other = [(t0 + 2 * NANOS, 50.0), (t0 + 3 * NANOS, 51.0)]
    await write_points(server.base_url, r2, "speed", other)
    scope = {"dataScopeName": "main", "dataSourceRid": r1, "seriesTags": {"car": "a1"}}
    asset = await create(
        server.base_url, "assets", {"title": "car", "properties": {"fleet": fleet}, "dataScopes": [scope]}
    )
    channel = sc.ChannelSeries(
        asset=sc.AssetChannel(
            asset_rid=lit(asset["rid"]),
            data_scope_name=lit("main"),
            channel=lit("speed"),
            additional_tags={},
            tags_to_group_by=[],
            group_by_tags=[],
        )
    )
    by_channel = {"s": dict(enc(sc.VariableValue(channel=channel)))}
    assert points(await subscribe(client, "edit-channel", numeric_node(ref("s")), by_channel)) == {(): mine}
    by_fleet = sc.ResourceSearchQuery(
        properties=scout_rids_api.PropertiesFilter(name="fleet", values=[fleet])
    )
    search = sc.Dataset(
        search=sc.SearchDataset(
            target=sc.SearchTarget(assets=sc.AssetsSearchTarget(query=by_fleet)), max_results=None
        )
    )
    by_search = {"s": series_var(select(search, "speed"))}
    assert points(await subscribe(client, "edit-search", numeric_node(ref("s")), by_search)) == {(): mine}

    # the asset's data scope now points at another data source: both subscriptions follow it with a
    # fresh FullResult over the other source's data
    moved = await asyncio.to_thread(
        Catalog(server.base_url).update_asset, asset["rid"], data_scopes=[DataScope("main", r2)]
    )
    assert moved["dataScopes"] == [{"dataScopeName": "main", "dataSourceRid": r2, "seriesTags": {}}]
    assert points(await next_full(client, "edit-channel")) == {(): other}
    assert points(await next_full(client, "edit-search")) == {(): other}
    # and they stay live on it: a new point of the other source arrives as an append
    await write_points(server.base_url, r2, "speed", [(t0 + 4 * NANOS, 52.0)])
    append = await client.update("edit-channel", timeout=120)
    assert append["type"] == "append", append

    # a new asset the search finds joins it; an edit of a property takes the asset out of it
    await create(
        server.base_url,
        "assets",
        {"title": "car 2", "properties": {"fleet": fleet}, "dataScopes": [{**scope, "dataSourceRid": r1}]},
    )
    assert points(await next_full(client, "edit-search")) == {
        (): sorted([*other, (t0 + 4 * NANOS, 52.0), *mine])
    }
    await put(server.base_url, f"assets/{asset['rid']}", {"properties": {"fleet": "elsewhere"}})
    assert points(await next_full(client, "edit-search")) == {(): mine}

    # a run that ends: its live subscription ends with the error its creation would get now
    run = await create(
        server.base_url,
        "runs",
        {"title": "lap", "assetRids": [asset["rid"]], "start": {"seconds": t0 // NANOS}},
    )
    over_run = series_var(select(sc.Dataset(run=sc.Run(rid=lit(run["rid"]))), "speed"))
    assert points(await subscribe(client, "edit-run", numeric_node(ref("s")), {"s": over_run})) == {
        (): [*other, (t0 + 4 * NANOS, 52.0)]
    }
    await put(server.base_url, f"runs/{run['rid']}", {"end": {"seconds": time.time_ns() // NANOS}})
    error = await next_error(client, "edit-run")
    assert error["name"] == "PersistentCompute:InvalidComputation", error
    assert error["params"] == {"invalidTypes": "RUN_WITH_FIXED_END", "rid": run["rid"]}, error

    # a deleted asset: its subscription ends, naming it
    async with httpx.AsyncClient() as http:
        assert (await http.delete(f"{server.base_url}/assets/v1/assets/{asset['rid']}")).status_code == 204
    error = await next_error(client, "edit-channel")
    assert error["params"] == {"invalidTypes": "", "variant": "asset", "rid": asset["rid"]}, error

    # a body field the update does not know is refused, not ignored
    async with httpx.AsyncClient() as http:
        refused_update = await http.put(
            f"{server.base_url}/assets/v1/runs/{run['rid']}", json={"description": "x"}
        )
    assert refused_update.status_code == 400, refused_update.text
    assert refused_update.json()["errorName"] == "Default:InvalidArgument"


SECRET = "test-secret-that-is-long-enough-for-hs256"


async def test_the_catalog_needs_admin_to_change_follows_data_source_permissions_and_survives_kill_9(
    tmp_path: Any,
) -> None:
    env = {"SPARKWIRE_JWT_SECRET": SECRET}
    server = start_server(tmp_path / "data", tmp_path / "a.log", env=env, own_process_group=True)
    admin = make_jwt(SECRET, ["*"], 3600, sub="ops", admin=True)
    reader = make_jwt(SECRET, ["ri.open.*"], 3600, sub="car")
    try:
        scopes = [DataScope("open", "ri.open.a"), DataScope("secret", "ri.secret.b", {"k": "v"})]
        with pytest.raises(CatalogError) as refused_change:
            Catalog(server.base_url, token=reader).create_asset("stand", scopes)
        assert refused_change.value.status == 403
        with pytest.raises(CatalogError) as no_token:
            Catalog(server.base_url).assets()
        assert no_token.value.status == 401
        created = Catalog(server.base_url, token=admin).create_asset("stand", scopes, {"site": "north"})
        assert Catalog(server.base_url, token=reader).asset(created["rid"]) == created
        paths = httpx.get(f"{server.base_url}/openapi.json").json()["paths"]
        assert {"post", "get"} <= set(paths["/assets/v1/assets"]) and "delete" in paths[
            "/assets/v1/runs/{rid}"
        ]
        assert {"put", "delete"} <= set(paths["/assets/v1/assets/{rid}"]) & set(
            paths["/assets/v1/runs/{rid}"]
        )
        error_ref = paths["/assets/v1/assets"]["post"]["responses"]["403"]["content"]["application/json"]
        assert error_ref["schema"] == {"$ref": "#/components/schemas/ConjureError"}

        # an asset names data sources, it does not grant them
        ws = await Client.connect(server.ws_url, additional_headers={"Authorization": f"Bearer {reader}"})
        try:
            for sub_id, scope in (("open", "open"), ("secret", "secret")):
                computable = client_nodes.series(asset_channel(created["rid"], scope, "speed"))
                await ws.subscribe({sub_id: subscription(computable.json, computable.variables, WINDOW_S)})
            assert (await ws.creation("open", timeout=120))["type"] == "success"
            denied = (await ws.creation("secret", timeout=60))["error"]["serializableError"]
            assert denied["name"] == "PersistentCompute:PermissionDenied", denied
            assert denied["params"] == {"rids": "ri.secret.b"}, denied
            # nor does an edit: a scope moved to a data source the token does not reach ends the
            # subscription over it as its creation would now be refused; the asset now stands on no
            # data source the token reaches, so it is refused by its own rid (catalog_reach.py)
            moved = [DataScope("open", "ri.secret.c"), DataScope("secret", "ri.secret.b", {"k": "v"})]
            await asyncio.to_thread(
                Catalog(server.base_url, token=admin).update_asset, created["rid"], data_scopes=moved
            )
            denied = await next_error(ws, "open")
            assert denied["name"] == "PersistentCompute:PermissionDenied", denied
            assert denied["params"] == {"rids": created["rid"]}, denied
            with pytest.raises(CatalogError) as refused_edit:
                Catalog(server.base_url, token=reader).update_asset(created["rid"], title="mine")
            assert refused_edit.value.status == 403
            created = Catalog(server.base_url, token=admin).asset(created["rid"])
        finally:
            await ws.close()

        server.kill_all()
        server = start_server(tmp_path / "data", tmp_path / "b.log", env=env, own_process_group=True)
        assert Catalog(server.base_url, token=admin).asset(created["rid"]) == created
        with pytest.raises(CatalogError) as missing:
            Catalog(server.base_url, token=admin).asset("ri.scout.main.asset.nope")
        assert missing.value.status == 404 and "Assets:AssetNotFound" in missing.value.body
        Catalog(server.base_url, token=admin).delete_asset(created["rid"])
        assert Catalog(server.base_url, token=admin).assets() == []
    finally:
        server.kill_all()


def test_the_dataset_tables_name_exactly_nominal_apis_variants() -> None:
    ir = conjure_ir()
    for union, variants in datasets.UNIONS.items():
        assert variants == ir_names(ir, union), union
    resolver = datasets.Resolver(_Builder({}), {})
    assert set(resolver.kinds) == ir_names(ir, "Dataset")  # a resolution for every Dataset kind
    assert ir_names(ir, "TagFilterOperator") == {"IN", "NOT_IN"}  # the two the compiler reads
    assert {"ASSET_RID", "DATA_SCOPE", "RUN_RID", "NOMINAL_CHANNEL"} <= ir_names(ir, "ReservedTagKey")
