"""Nodes as Nominal's own builder (`nominal-compute`) emits them, over a real server: a channel
selected by dataset rid and name (`selectNumeric`), `thresholdRangesV2`, arithmetic on two selected
series, `selectEnum` (built with nominal-api's classes: `nominal-compute` has no builder for it),
the older Reference + channel-variable form, refusals named by field, and subscription ids that are
any non-empty string up to 256 characters. Every node JSON comes from `.to_json()` or from
nominal-api's Conjure classes, decoded by nominal-api before it is sent.

Also: each table of Nominal names in compute/nominal_variants.py equals nominal-api's Conjure IR,
and the evaluators' tables name exactly those values."""

from __future__ import annotations

import asyncio
import json
import time
import typing
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nominal.compute as nc
import nominal_api
import pytest
from conjure_python_client import ConjureEncoder
from nominal_api import scout_compute_api as sc

from compute.nodes.arithmetic import THRESHOLD_OPS
from compute.nodes.ranges import MIN_MAX_OPS
from compute.nodes.rolling import OPERATORS as ROLLING_OPERATORS
from compute.nodes.time_ops import NANOS_PER_UNIT
from compute.nominal_variants import DURATION_UNIT_NANOS, ENUMS, THRESHOLD_COMPARISONS, VARIANTS
from schemas.client import SUBSCRIPTION_ID_MAX_LENGTH
from sparkwire_client import nodes as client_nodes
from tests.client_view import ResultView
from tests.conftest import ServerProcess
from tests.wire import DECODER, NANOS, Client, channel_variable, new_id, subscription, write_points

WINDOW_S = 3600.0
WINDOW_NS = int(WINDOW_S * NANOS)
MS = 1_000_000
INF = float("inf")
Json = dict[str, Any]


def unique_rid() -> str:
    return f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"


# -- ComputableNodes from nominal-compute expressions, through nominal-api's classes --------------
def encoded(value: Any) -> Json:
    return dict(ConjureEncoder.do_encode(value))


def numeric_of(expr: nc.NumericSeries) -> sc.NumericSeries:
    """nominal-compute's JSON, decoded by nominal-api (which refuses anything it does not know)."""
    decoded: sc.NumericSeries = DECODER.read_from_string(expr.to_json(), sc.NumericSeries)
    return decoded


def series_node(expr: nc.NumericSeries) -> Json:
    summarize = sc.SummarizeSeries(input=sc.Series(numeric=numeric_of(expr)), numeric_aggregations={})
    return encoded(sc.ComputableNode(series=summarize))


def ranges_node(expr: nc.RangeSeries) -> Json:
    ranges: sc.RangeSeries = DECODER.read_from_string(expr.to_json(), sc.RangeSeries)
    return encoded(sc.ComputableNode(ranges=sc.SummarizeRanges(input=ranges)))


def select_enum_node(rid: str, channel: str) -> Json:
    select = sc.SelectSeries(
        name=sc.StringConstant(literal=channel),
        dataset=sc.Dataset(saved=sc.SavedDataset(rid=sc.StringConstant(literal=rid))),
    )
    summarize = sc.SummarizeSeries(
        input=sc.Series(enum=sc.EnumSeries(select_enum=select)), numeric_aggregations={}
    )
    return encoded(sc.ComputableNode(series=summarize))


def select(rid: str, channel: str) -> nc.NumericSeries:
    return nc.NumericSeries.SelectNumeric(channel, nc.Dataset.Saved(rid))


# -- the subscription's life ----------------------------------------------------------------------
async def subscribe(client: Client, sub_id: str, node: Json, variables: Json | None = None) -> ResultView:
    """Subscribe; the FullResult becomes the view."""
    await client.subscribe({sub_id: subscription(node, variables or {}, WINDOW_S, lateness_s=WINDOW_S)})
    creation = await client.creation(sub_id, timeout=120)
    assert creation["type"] == "success", creation
    view = ResultView(WINDOW_NS)
    full = await client.update(sub_id, timeout=300)
    assert full["type"] == "full", full
    view.apply(full)
    return view


async def appended_until(client: Client, sub_id: str, view: ResultView, expected: Any) -> None:
    """Apply updates until the view shows `expected` (a generous deadline: Spark shares the
    machine); every one of them an AppendResult."""
    deadline = time.monotonic() + 240
    while view.snapshot() != {(): expected} and time.monotonic() < deadline:
        update = await client.update(sub_id, timeout=max(1.0, deadline - time.monotonic()))
        assert update["type"] == "append", update
        view.apply(update)
    assert view.snapshot() == {(): expected}
    assert view.appends, "no AppendResult"


def numeric(points: list[tuple[int, float]]) -> tuple[str, list[tuple[int, float]]]:
    return "numeric", sorted(points)


def ranges(spans: list[tuple[float, float]]) -> tuple[str, list[tuple[float, float]]]:
    return "range", spans


@pytest.fixture
async def client(server: ServerProcess) -> Any:
    c = await Client.connect(server.ws_url)  # it answers the server's pings itself
    yield c
    await c.close()


# -- selectNumeric ----------------------------------------------------------------------------------
async def test_a_channel_selected_by_dataset_rid_and_name(server: ServerProcess, client: Client) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 120 * NANOS
    written = [(t0 + i * 1_500 * MS + i, 0.25 * i - 3.0) for i in range(12)]
    await write_points(server.base_url, rid, "engine.temp", written)
    await write_points(server.base_url, rid, "engine.rpm", [(t0, 999.0)])  # another channel
    await write_points(server.base_url, unique_rid(), "engine.temp", [(t0, 999.0)])  # another dataset
    view = await subscribe(client, "temp", series_node(select(rid, "engine.temp")))
    assert view.snapshot() == {(): numeric(written)}  # timestamps to the nanosecond, values exact

    fresh = [(time.time_ns(), 41.5), (time.time_ns() + 7, -0.125)]
    await write_points(server.base_url, rid, "engine.temp", fresh)
    await appended_until(client, "temp", view, numeric(written + fresh))


async def test_arithmetic_on_two_selected_series_aligns_by_forward_fill(
    server: ServerProcess, client: Client
) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 60 * NANOS
    await write_points(server.base_url, rid, "a", [(t0, 1.5), (t0 + 600 * MS, 2.5), (t0 + 1200 * MS, 4.0)])
    await write_points(server.base_url, rid, "b", [(t0, 0.25), (t0 + 900 * MS, 0.5)])
    total = select(rid, "a") + select(rid, "b")
    view = await subscribe(client, "a+b", series_node(total))
    # at every timestamp of either input, each input's newest value at or before it (within 1 s)
    expected = [(t0, 1.75), (t0 + 600 * MS, 2.75), (t0 + 900 * MS, 3.0), (t0 + 1200 * MS, 4.5)]
    assert view.snapshot() == {(): numeric(expected)}

    await write_points(server.base_url, rid, "a", [(t0 + 1500 * MS, 10.0)])  # b still 0.5, 600 ms old
    await appended_until(client, "a+b", view, numeric([*expected, (t0 + 1500 * MS, 10.5)]))


# -- thresholdRangesV2 ------------------------------------------------------------------------------
VALUES = [1.0, 3.0, 2.5, 4.0, 2.0, 5.0, 2.5, 0.0]  # one point a second from t0


Build = Callable[[nc.NumericSeries], nc.RangeSeries]
# name -> (ranges over the selected channel, expected ranges as (start, end) point indices; an end of
# len(VALUES) means still open)
COMPARISONS: dict[str, tuple[Build, list[tuple[int, int]]]] = {
    "gt": (lambda s: s.threshold_ranges().gt(2.5), [(1, 2), (3, 4), (5, 6)]),
    "ge": (lambda s: s.threshold_ranges().ge(2.5), [(1, 4), (5, 7)]),
    "lt": (lambda s: s.threshold_ranges().lt(2.5), [(0, 1), (4, 5), (7, 8)]),
    "le": (lambda s: s.threshold_ranges().le(2.5), [(0, 1), (2, 3), (4, 5), (6, 8)]),
    "eq": (lambda s: s.threshold_ranges().eq(2.5), [(2, 3), (6, 7)]),
    "ne": (lambda s: s.threshold_ranges().ne(2.5), [(0, 2), (3, 6), (7, 8)]),
    "eq_within_half": (lambda s: s.threshold_ranges().eq(2.5, tolerance=0.5), [(1, 3), (4, 5), (6, 7)]),
    "ne_beyond_half": (
        lambda s: s.threshold_ranges().ne(2.5, tolerance=0.5),
        [(0, 1), (3, 4), (5, 6), (7, 8)],
    ),
    "persistence_at_its_defaults": (
        lambda s: s.threshold_ranges(
            min_points=1, min_duration=nc.Duration.Nanoseconds(1), range_start="condition_start"
        ).gt(2.5),
        [(1, 2), (3, 4), (5, 6)],
    ),
}
# after one more point, 2.5: open ranges end at it or carry on, closed ones stay
AFTER_ONE_MORE: dict[str, list[tuple[int, int]]] = {
    "gt": [(1, 2), (3, 4), (5, 6)],
    "ge": [(1, 4), (5, 7), (8, 9)],
    "lt": [(0, 1), (4, 5), (7, 8)],
    "le": [(0, 1), (2, 3), (4, 5), (6, 9)],
    "eq": [(2, 3), (6, 7), (8, 9)],
    "ne": [(0, 2), (3, 6), (7, 8)],
    "eq_within_half": [(1, 3), (4, 5), (6, 7), (8, 9)],
    "ne_beyond_half": [(0, 1), (3, 4), (5, 6), (7, 8)],
    "persistence_at_its_defaults": [(1, 2), (3, 4), (5, 6)],
}


def spans(indices: list[tuple[int, int]], times: list[int]) -> list[tuple[float, float]]:
    return [(times[s], times[e] if e < len(times) else INF) for s, e in indices]


async def test_threshold_ranges_v2_on_a_selected_channel(server: ServerProcess, client: Client) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 60 * NANOS
    stamps = [t0 + i * NANOS for i in range(len(VALUES))]
    await write_points(server.base_url, rid, "p", list(zip(stamps, VALUES, strict=True)))
    channel = select(rid, "p")
    views = {
        name: await subscribe(client, name, ranges_node(build(channel)))
        for name, (build, _) in COMPARISONS.items()
    }
    for name, (_, expected) in COMPARISONS.items():
        assert views[name].snapshot() == {(): ranges(spans(expected, stamps))}, name

    newest = time.time_ns()
    await write_points(server.base_url, rid, "p", [(newest, 2.5)])
    for name, indices in AFTER_ONE_MORE.items():
        expected_after = ranges(spans(indices, [*stamps, newest]))
        if views[name].snapshot() != {(): expected_after}:  # unchanged ones need no update
            await appended_until(client, name, views[name], expected_after)


# -- selectEnum, and the older Reference + channel-variable form -------------------------------------
async def test_an_enum_channel_selected_by_dataset_rid_and_name(
    server: ServerProcess, client: Client
) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 60 * NANOS
    written = [(t0 + i * NANOS, state) for i, state in enumerate(["idle", "run", "run", "fault", "idle"])]
    await write_points(server.base_url, rid, "state", written)
    view = await subscribe(client, "state", select_enum_node(rid, "state"))
    assert view.snapshot() == {(): ("enum", written)}

    fresh = [(time.time_ns(), "stop")]
    await write_points(server.base_url, rid, "state", fresh)
    await appended_until(client, "state", view, ("enum", written + fresh))


async def test_the_reference_and_channel_variable_form_still_works_and_mixes_with_select(
    server: ServerProcess, client: Client
) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 60 * NANOS
    x_points = [(t0, 2.0), (t0 + 500 * MS, 3.0), (t0 + NANOS, 1.0)]
    await write_points(server.base_url, rid, "x", x_points, tags={"vehicle": "a1"})
    await write_points(server.base_url, rid, "y", [(t0, 0.5), (t0 + NANOS, 0.25)])
    variables = {"x": channel_variable(rid, "x", tags={"vehicle": "a1"})}
    x = nc.NumericSeries.Reference("x")

    plain = await subscribe(client, "ref", series_node(x), variables)
    assert plain.snapshot() == {(): numeric(x_points)}
    above = await subscribe(client, "ref-ranges", ranges_node(x.threshold_ranges().gt(1.5)), variables)
    assert above.snapshot() == {(): ranges([(t0, t0 + NANOS)])}
    mixed = await subscribe(client, "ref-mixed", series_node(x * select(rid, "y")), variables)
    assert mixed.snapshot() == {(): numeric([(t0, 1.0), (t0 + 500 * MS, 1.5), (t0 + NANOS, 0.25)])}

    fresh = (time.time_ns(), 6.0)
    await write_points(server.base_url, rid, "x", [fresh], tags={"vehicle": "a1"})
    await appended_until(client, "ref", plain, numeric([*x_points, fresh]))
    await appended_until(client, "ref-ranges", above, ranges([(t0, t0 + NANOS), (fresh[0], INF)]))


# -- refusals ------------------------------------------------------------------------------------
RID = "ri.sparkwire.test.dataset.refused"
CHANNEL = select(RID, "p")
REFUSED: dict[str, tuple[Json, dict[str, str]]] = {
    # name: (node, params the InvalidComputation must carry)
    "dataset_asset": (
        series_node(nc.NumericSeries.SelectNumeric("p", nc.Dataset.Asset("ri.a"))),
        {"invalidTypes": "asset"},
    ),
    "dataset_run": (
        series_node(nc.NumericSeries.SelectNumeric("p", nc.Dataset.Run("ri.r"))),
        {"invalidTypes": "run"},
    ),
    "dataset_tag": (
        series_node(nc.NumericSeries.SelectNumeric("p", nc.Dataset.Saved(RID).tag("k", "v"))),
        {"invalidTypes": "tag"},
    ),
    "dataset_combine": (
        series_node(nc.NumericSeries.SelectNumeric("p", nc.Dataset.Combine([nc.Dataset.Saved(RID)]))),
        {"invalidTypes": "combine"},
    ),
    "dataset_time_shift": (
        series_node(
            nc.NumericSeries.SelectNumeric("p", nc.Dataset.Saved(RID).time_shift(nc.Duration.Seconds(1)))
        ),
        {"invalidTypes": "timeShift"},
    ),
    "no_dataset": (series_node(nc.NumericSeries.SelectNumeric("p")), {"invalidTypes": "dataset"}),
    "no_name": (
        series_node(nc.NumericSeries.SelectNumeric(dataset=nc.Dataset.Saved(RID))),
        {"invalidTypes": "name"},
    ),
    "sampling": (
        series_node(
            nc.NumericSeries.SelectNumeric("p", nc.Dataset.Saved(RID), sampling=nc.Sampling.HashSubsample(2))
        ),
        {"invalidTypes": "sampling"},
    ),
    "min_points": (
        ranges_node(CHANNEL.threshold_ranges(min_points=3).gt(1.0)),
        {"invalidTypes": "POINT_PERSISTENCE", "field": "minPoints"},
    ),
    "min_duration": (
        ranges_node(CHANNEL.threshold_ranges(min_duration=nc.Duration.Seconds(2)).gt(1.0)),
        {"invalidTypes": "POINT_PERSISTENCE", "field": "minDuration"},
    ),
    "persistence_start": (
        ranges_node(CHANNEL.threshold_ranges(range_start="persistence_start").gt(1.0)),
        {"invalidTypes": "POINT_PERSISTENCE", "field": "rangeStart"},
    ),
    "negative_tolerance": (
        ranges_node(CHANNEL.threshold_ranges().eq(1.0, tolerance=-0.5)),
        {"invalidTypes": "tolerance"},
    ),
}


async def test_what_cannot_stream_is_refused_by_name_and_the_rest_still_works(client: Client) -> None:
    await client.subscribe({name: subscription(node, {}, WINDOW_S) for name, (node, _) in REFUSED.items()})
    for name, (_, params) in REFUSED.items():
        creation = await client.creation(name)
        assert creation["type"] == "error", (name, creation)
        error = creation["error"]["serializableError"]
        assert error["name"] == "PersistentCompute:InvalidComputation", (name, error)
        assert error["statusCode"] == 400
        assert error["params"].items() >= params.items(), (name, error["params"])
    ok = await subscribe(client, "ok", series_node(select(unique_rid(), "p")))
    assert ok.snapshot() == {(): numeric([])}


# -- subscription ids ------------------------------------------------------------------------------
async def test_any_non_empty_id_up_to_the_limit_works_end_to_end(
    server: ServerProcess, client: Client
) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 60 * NANOS
    await write_points(server.base_url, rid, "p", [(t0, 1.0)])
    node = series_node(select(rid, "p"))
    ids = ["my-sub-1", str(uuid.uuid4()), "vehicle a1 / température ✓", "x" * SUBSCRIPTION_ID_MAX_LENGTH]
    views = {sub_id: await subscribe(client, sub_id, node) for sub_id in ids}
    for view in views.values():
        assert view.snapshot() == {(): numeric([(t0, 1.0)])}
    fresh = (time.time_ns(), 2.0)
    await write_points(server.base_url, rid, "p", [fresh])
    for sub_id, view in views.items():
        await appended_until(client, sub_id, view, numeric([(t0, 1.0), fresh]))
    # the id names the subscription in every frame, and unsubscribing by it works
    names = {
        f["subscriptionUpdate"]["subscriptionId"] for f in client.frames if f["type"] == "subscriptionUpdate"
    }
    assert set(ids) <= names
    await client.ws.send(json.dumps({"type": "unsubscribe", "unsubscribe": ids}))
    await client.ws.send(json.dumps({"type": "ping", "ping": {"sentAt": "2026-01-01T00:00:00Z"}}))
    health = await asyncio.wait_for(client.health.get(), 30)
    assert health["type"] == "pong", health  # the unsubscribe was no clientMessageError
    unsubscribed_at = len(client.frames)  # the server handled the unsubscribe before this pong
    other = await subscribe(client, "my-sub-2", node)  # the same computation, a new subscriber
    assert other.snapshot() == {(): numeric([(t0, 1.0), fresh])}
    newer = (time.time_ns(), 3.0)
    await write_points(server.base_url, rid, "p", [newer])
    await appended_until(client, "my-sub-2", other, numeric([(t0, 1.0), fresh, newer]))
    late = [f for f in client.frames[unsubscribed_at:] if f["type"] == "subscriptionUpdate"]
    assert {f["subscriptionUpdate"]["subscriptionId"] for f in late} == {"my-sub-2"}


@pytest.mark.parametrize(
    "sub_id",
    ["", "x" * (SUBSCRIPTION_ID_MAX_LENGTH + 1), "y" * 100_000],
    ids=["empty", "one_too_long", "huge"],
)
async def test_empty_or_oversized_ids_are_an_invalid_client_message(client: Client, sub_id: str) -> None:
    node = series_node(select(unique_rid(), "p"))
    for message in (
        {"type": "subscribe", "subscribe": {sub_id: subscription(node, {}, WINDOW_S)}},
        {"type": "unsubscribe", "unsubscribe": [sub_id]},
    ):
        await client.ws.send(json.dumps(message))
        health = await asyncio.wait_for(client.health.get(), 30)
        assert health["type"] == "clientMessageError", health
        error = health["clientMessageError"]["error"]
        assert error["name"] == "PersistentCompute:InvalidClientMessage"
        assert error["statusCode"] == 400
        assert len(error["message"]) < 1000, "the refused id is not echoed whole"
    assert sub_id not in client.creations  # nothing was created
    ok = await subscribe(client, new_id(), node)  # the connection stays usable
    assert ok.snapshot() == {(): numeric([])}


# -- the tables of Nominal names ---------------------------------------------------------------------
def conjure_ir() -> dict[tuple[str, str], Json]:
    ir = json.loads((Path(nominal_api.__file__).parent / "nominal-api.conjure.json").read_text())
    out = {}
    for t in ir["types"]:
        body = t[t["type"]]
        out[(body["typeName"]["package"], body["typeName"]["name"])] = body
    return out


def ir_names(ir: dict[tuple[str, str], Json], name: str) -> frozenset[str]:
    """The variants of a union or the values of an enum, in scout.compute.api (else io.nominal.api)."""
    body = ir.get(("io.nominal.scout.compute.api", name)) or ir[("io.nominal.api", name)]
    if "union" in body:
        return frozenset(f["fieldName"] for f in body["union"])
    return frozenset(v["value"] for v in body["values"])


def test_every_table_of_nominal_names_equals_nominal_apis_ir() -> None:
    ir = conjure_ir()
    for union, variants in VARIANTS.items():
        assert variants == ir_names(ir, union), union
    for enum, values in ENUMS.items():
        assert values == ir_names(ir, enum), enum
    assert set(THRESHOLD_COMPARISONS) == ir_names(ir, "ThresholdRangesComparison")
    assert set(THRESHOLD_COMPARISONS.values()) == ir_names(ir, "ThresholdOperator")
    assert set(DURATION_UNIT_NANOS) | {"reference", "add", "subtract", "negate"} == ir_names(ir, "Duration")


def test_the_evaluators_and_the_client_name_exactly_nominals_values() -> None:
    assert set(THRESHOLD_OPS) == ENUMS["ThresholdOperator"]
    assert set(MIN_MAX_OPS) == ENUMS["MinMaxThresholdOperator"]
    assert set(NANOS_PER_UNIT) == ENUMS["TimeUnit"]
    assert set(ROLLING_OPERATORS) <= VARIANTS["NumericAggregationOperator"]
    assert set(typing.get_args(client_nodes.ThresholdOperator)) == ENUMS["ThresholdOperator"]
    assert set(typing.get_args(client_nodes.BoundsOperator)) == ENUMS["MinMaxThresholdOperator"]
    assert set(typing.get_args(client_nodes.TimeUnit)) == ENUMS["TimeUnit"]
    assert set(typing.get_args(client_nodes.Aggregation)) == set(ROLLING_OPERATORS)
