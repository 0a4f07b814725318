"""Nodes as Nominal's own builder (`nominal-compute`) emits them, over a real server: a channel
selected by dataset rid and name (`selectNumeric`), `thresholdRangesV2`, arithmetic on two selected
series, `selectEnum` (built with nominal-api's classes: `nominal-compute` has no builder for it),
the older Reference + channel-variable form, `timeShiftV2` of numeric and enum series,
`categoryFilterRangesV2`, `filterWhere` and `booleanRanges` over one series, the builder's
arithmetic, derivative, value difference and rolling nodes with exact values, refusals named by
field, and subscription ids that are any non-empty string up to 256 characters. Every node JSON
comes from `.to_json()` or from nominal-api's Conjure classes, decoded by nominal-api before it is
sent.

Also: each table of Nominal names in compute/evaluation/nominal_variants.py equals nominal-api's Conjure IR,
and the evaluators' tables name exactly those values."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import nominal.compute as nc
import pytest
from conjure_python_client import ConjureEncoder
from nominal_api import api as api_types
from nominal_api import scout_compute_api as sc
from nominal_api import scout_run_api

from schemas.client import SUBSCRIPTION_ID_MAX_LENGTH
from tests.client_view import ResultView
from tests.conftest import ServerProcess
from tests.server.test_compute_errors import assert_nominal_types
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


def enum_of(expr: nc.CategoricalSeries) -> sc.EnumSeries:
    decoded: sc.EnumSeries = DECODER.read_from_string(expr.to_json(), sc.EnumSeries)
    return decoded


def enum_series_node(expr: nc.CategoricalSeries | sc.EnumSeries) -> Json:
    enum = expr if isinstance(expr, sc.EnumSeries) else enum_of(expr)
    summarize = sc.SummarizeSeries(input=sc.Series(enum=enum), numeric_aggregations={})
    return encoded(sc.ComputableNode(series=summarize))


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


def converted(expr: nc.NumericSeries, unit: str, output_unit: str) -> Json:
    """`expr` in `unit` (unitOverride) converted to `output_unit`, with nominal-api's classes."""
    named = sc.NumericSeries(unit_override=sc.UnitOverrideSeries(input=numeric_of(expr), unit=unit))
    conversion = sc.NumericSeries(
        unit_conversion=sc.UnitConversionSeries(input=named, output_unit=output_unit)
    )
    summarize = sc.SummarizeSeries(input=sc.Series(numeric=conversion), numeric_aggregations={})
    return encoded(sc.ComputableNode(series=summarize))


def api_node(x: sc.NumericSeries) -> Json:
    summarize = sc.SummarizeSeries(input=sc.Series(numeric=x), numeric_aggregations={})
    return encoded(sc.ComputableNode(series=summarize))


def summary(**fields: Any) -> Json:
    """A SummarizeSeries of the refusal tests' channel with extra fields, with nominal-api's classes."""
    fields.setdefault("numeric_aggregations", {})
    summarize = sc.SummarizeSeries(input=sc.Series(numeric=numeric_of(CHANNEL)), **fields)
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


# -- timeShiftV2 (`.time_shift()`), numeric and enum --------------------------------------------------
async def test_time_shift_v2_moves_numeric_and_enum_points(server: ServerProcess, client: Client) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 60 * NANOS
    written = [(t0 + i * 700 * MS + i, v) for i, v in enumerate([1.5, -2.0, 0.25, 8.0])]
    states = [(t0 + i * NANOS + 3, s) for i, s in enumerate(["idle", "run", "fault"])]
    await write_points(server.base_url, rid, "p", written)
    await write_points(server.base_url, rid, "state", states)
    variables = {
        "state": channel_variable(rid, "state"),
        "shift": {"type": "duration", "duration": {"seconds": 4, "nanos": 250}},
    }
    p, state = select(rid, "p"), nc.CategoricalSeries.Reference("state")
    v1_enum = sc.EnumSeries(  # EnumSeries.timeShift (a DurationConstant), from nominal-api's classes
        time_shift=sc.EnumTimeShiftSeries(
            input=enum_of(state),
            duration=sc.DurationConstant(literal=scout_run_api.Duration(seconds=1, nanos=500)),
        )
    )
    shifts: dict[str, tuple[Json, int]] = {
        "later": (series_node(p.time_shift(nc.Duration.Seconds(2))), 2 * NANOS),
        "earlier": (series_node(p.time_shift(-nc.Duration.Milliseconds(1500))), -1500 * MS),
        "sum": (series_node(p.time_shift(nc.Duration.Seconds(1) + nc.Duration.Nanoseconds(7))), NANOS + 7),
        "variable": (series_node(p.time_shift(nc.Duration.Reference("shift"))), 4 * NANOS + 250),
        "enum": (enum_series_node(state.time_shift(nc.Duration.Seconds(3))), 3 * NANOS),
        "enum_v1": (enum_series_node(v1_enum), NANOS + 500),
    }
    views = {name: await subscribe(client, name, node, variables) for name, (node, _) in shifts.items()}

    def expected(name: str, numbers: list[tuple[int, float]], labels: list[tuple[int, str]]) -> Any:
        shift = shifts[name][1]
        if name.startswith("enum"):
            return ("enum", [(t + shift, s) for t, s in labels])
        return numeric([(t + shift, v) for t, v in numbers])

    for name, view in views.items():
        assert view.snapshot() == {(): expected(name, written, states)}, name

    fresh, fresh_state = (time.time_ns(), 3.75), (time.time_ns() + 11, "stop")
    await write_points(server.base_url, rid, "p", [fresh])
    await write_points(server.base_url, rid, "state", [fresh_state])
    for name, view in views.items():
        await appended_until(client, name, view, expected(name, [*written, fresh], [*states, fresh_state]))


# -- categoryFilterRangesV2 (`.category_ranges()`) ----------------------------------------------------
STATES = ["idle", "run", "run", "fault", "idle", "run"]  # one point a second from t0
CATEGORY_RANGES: dict[str, tuple[Callable[[nc.CategoricalSeries], nc.RangeSeries], list[tuple[int, int]]]] = {
    # name: (ranges over the enum channel, expected ranges as point indices; len(STATES) = still open)
    "is_in": (lambda s: s.category_ranges().is_in(["run", "fault"]), [(1, 4), (5, 6)]),
    "is_not_in": (lambda s: s.category_ranges().is_not_in(["run"]), [(0, 1), (3, 5)]),
    "eq": (lambda s: s.category_ranges().eq("fault"), [(3, 4)]),
    "ne": (lambda s: s.category_ranges().ne("idle"), [(1, 4), (5, 6)]),
    "variable": (
        lambda s: s.category_ranges().is_in([nc.StringConstant.Reference("wanted")]),
        [(0, 1), (4, 5)],
    ),
    "none": (lambda s: s.category_ranges().is_in([]), []),
    "all": (lambda s: s.category_ranges().is_not_in([]), [(0, 6)]),
    "persistence_at_its_defaults": (
        lambda s: s.category_ranges(
            min_points=1, min_duration=nc.Duration.Nanoseconds(1), range_start="condition_start"
        ).is_in(["run"]),
        [(1, 3), (5, 6)],
    ),
}
# after one more point, "fault"
CATEGORY_RANGES_AFTER: dict[str, list[tuple[int, int]]] = {
    "is_in": [(1, 4), (5, 7)],
    "is_not_in": [(0, 1), (3, 5), (6, 7)],
    "eq": [(3, 4), (6, 7)],
    "ne": [(1, 4), (5, 7)],
    "variable": [(0, 1), (4, 5)],
    "none": [],
    "all": [(0, 7)],
    "persistence_at_its_defaults": [(1, 3), (5, 6)],
}


async def test_category_ranges_v2_on_an_enum_channel(server: ServerProcess, client: Client) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 60 * NANOS
    stamps = [t0 + i * NANOS for i in range(len(STATES))]
    await write_points(server.base_url, rid, "state", list(zip(stamps, STATES, strict=True)))
    variables = {"state": channel_variable(rid, "state"), "wanted": {"type": "string", "string": "idle"}}
    state = nc.CategoricalSeries.Reference("state")
    views = {
        name: await subscribe(client, name, ranges_node(build(state)), variables)
        for name, (build, _) in CATEGORY_RANGES.items()
    }
    # on a time-shifted enum series: `run` a second later
    shifted_node = ranges_node(state.time_shift(nc.Duration.Seconds(1)).category_ranges().eq("run"))
    shifted = await subscribe(client, "shifted", shifted_node, variables)
    for name, (_, indices) in CATEGORY_RANGES.items():
        assert views[name].snapshot() == {(): ranges(spans(indices, stamps))}, name
    assert shifted.snapshot() == {
        (): ranges([(stamps[1] + NANOS, stamps[3] + NANOS), (stamps[5] + NANOS, INF)])
    }

    # Stamped 2 s behind the clock, so that the shifted range ends 1 s behind it: an append for a
    # range that changes ahead of the server's clock has a `start` after its `end` (the append's
    # end follows the newest point of point results only; compute/evaluation/computation.py).
    newest = time.time_ns() - 2 * NANOS
    await write_points(server.base_url, rid, "state", [(newest, "fault")])
    for name, indices in CATEGORY_RANGES_AFTER.items():
        expected_after = ranges(spans(indices, [*stamps, newest]))
        if views[name].snapshot() != {(): expected_after}:  # unchanged ones need no update
            await appended_until(client, name, views[name], expected_after)
    shifted_after = [(stamps[1] + NANOS, stamps[3] + NANOS), (stamps[5] + NANOS, newest + NANOS)]
    await appended_until(client, "shifted", shifted, ranges(shifted_after))


# -- filterWhere (`.filter_where()`) and booleanRanges (`(...).ranges()`) over one series ------------
FilterBuild = Callable[[nc.NumericSeries], nc.NumericSeries]
FILTERS: dict[str, FilterBuild] = {
    # name: filter over the selected channel; expected: the points of VALUES the predicate keeps
    "gt": lambda s: s.filter_where(s > 2.5),
    "inside": lambda s: s.filter_where((s >= 2.0) & (s < 4.0)),
    "outside": lambda s: s.filter_where((s < 1.0) | (s > 4.0)),
    "eq": lambda s: s.filter_where(s == 2.5),
    "ne": lambda s: s.filter_where(s != 2.5),
    "constant_on_the_left": lambda s: s.filter_where(nc.NumericSeries.Constant(2.5) <= s),
}
KEEPS: dict[str, Callable[[float], bool]] = {
    "gt": lambda v: v > 2.5,
    "inside": lambda v: 2.0 <= v < 4.0,
    "outside": lambda v: v < 1.0 or v > 4.0,
    "eq": lambda v: v == 2.5,
    "ne": lambda v: v != 2.5,
    "constant_on_the_left": lambda v: v >= 2.5,
}
BOOLEAN_RANGES: dict[str, tuple[Build, list[tuple[int, int]]]] = {
    # name: (ranges over the selected channel, expected ranges as indices into VALUES)
    "gt": (lambda s: (s > 2.5).ranges(), [(1, 2), (3, 4), (5, 6)]),
    "inside_bounds": (lambda s: ((s > 2.0) & (s < 4.0)).ranges(), [(1, 3), (6, 7)]),
    "outside_or_equal": (lambda s: ((s <= 2.0) | (s >= 4.0)).ranges(), [(0, 1), (3, 6), (7, 8)]),
    "nested": (lambda s: (((s > 0.5) & (s < 3.0)) | (s == 5.0)).ranges(), [(0, 1), (2, 3), (4, 7)]),
    "persistence_at_its_defaults": (
        lambda s: (s > 2.5).ranges(
            min_points=1, min_duration=nc.Duration.Nanoseconds(1), range_start="condition_start"
        ),
        [(1, 2), (3, 4), (5, 6)],
    ),
}
BOOLEAN_RANGES_AFTER: dict[str, list[tuple[int, int]]] = {  # after one more point, 2.5
    "gt": [(1, 2), (3, 4), (5, 6)],
    "inside_bounds": [(1, 3), (6, 7), (8, 9)],
    "outside_or_equal": [(0, 1), (3, 6), (7, 8)],
    "nested": [(0, 1), (2, 3), (4, 7), (8, 9)],
    "persistence_at_its_defaults": [(1, 2), (3, 4), (5, 6)],
}


async def test_filter_where_and_boolean_ranges_over_one_series(server: ServerProcess, client: Client) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 60 * NANOS
    stamps = [t0 + i * NANOS for i in range(len(VALUES))]
    points = list(zip(stamps, VALUES, strict=True))
    await write_points(server.base_url, rid, "p", points)
    channel = select(rid, "p")
    filters = {
        f"filter_{n}": await subscribe(client, f"filter_{n}", series_node(b(channel)))
        for n, b in FILTERS.items()
    }
    boolean = {
        f"ranges_{n}": await subscribe(client, f"ranges_{n}", ranges_node(b(channel)))
        for n, (b, _) in BOOLEAN_RANGES.items()
    }
    for name, keeps in KEEPS.items():
        expected = numeric([(t, v) for t, v in points if keeps(v)])
        assert filters[f"filter_{name}"].snapshot() == {(): expected}, name
    for name, (_, indices) in BOOLEAN_RANGES.items():
        assert boolean[f"ranges_{name}"].snapshot() == {(): ranges(spans(indices, stamps))}, name

    fresh = (time.time_ns(), 2.5)
    await write_points(server.base_url, rid, "p", [fresh])
    for name, keeps in KEEPS.items():
        expected_after = numeric([(t, v) for t, v in [*points, fresh] if keeps(v)])
        if filters[f"filter_{name}"].snapshot() != {(): expected_after}:
            await appended_until(client, f"filter_{name}", filters[f"filter_{name}"], expected_after)
    for name, indices in BOOLEAN_RANGES_AFTER.items():
        expected_after = ranges(spans(indices, [*stamps, fresh[0]]))
        if boolean[f"ranges_{name}"].snapshot() != {(): expected_after}:
            await appended_until(client, f"ranges_{name}", boolean[f"ranges_{name}"], expected_after)


# -- what the builder emits for the rest of the subset: the same nodes, with exact values ------------
async def test_arithmetic_derivative_value_difference_and_rolling_as_the_builder_emits_them(
    server: ServerProcess, client: Client
) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 60 * NANOS
    stamps = [t0 + i * NANOS for i in range(len(VALUES))]
    points = list(zip(stamps, VALUES, strict=True))
    await write_points(server.base_url, rid, "p", points)
    s = select(rid, "p")
    window = nc.Duration.Seconds(2)  # (t - 2 s, t]: a point and the one a second before it
    # VALUES are short binary fractions: every sum, mean and variance below is exact in any order

    def pairs(f: Callable[[float, float], float]) -> list[tuple[int, float]]:
        return [(b[0], f(a[1], b[1])) for a, b in itertools.pairwise(points)]

    def rolled(f: Callable[[list[float]], float]) -> list[tuple[int, float]]:
        return [(t, f([v for u, v in points if t - 2 * NANOS < u <= t])) for t, _ in points]

    cases: dict[str, tuple[nc.NumericSeries, list[tuple[int, float]]]] = {
        "arithmetic": (nc.abs(2.0 * s - 5.0) / 2.0, [(t, abs(2.0 * v - 5.0) / 2.0) for t, v in points]),
        "sqrt_negate": (-s.sqrt(), [(t, -math.sqrt(v)) for t, v in points]),
        "derivative_ms": (s.derivative(time_unit="milliseconds"), pairs(lambda a, b: (b - a) / 1000.0)),
        "derivative_no_negatives": (
            s.derivative(
                negative_values_configuration=nc.NegativeValueConfiguration.SetNegativeValuesToZero()
            ),
            pairs(lambda a, b: max(b - a, 0.0)),
        ),
        "value_difference_excluding_negatives": (
            s.value_difference(nc.NegativeValueConfiguration.ExcludeNegativeValues()),
            [(t, d) for t, d in pairs(lambda a, b: b - a) if d >= 0],
        ),
        "rolling_sum": (s.rolling_time(window).sum(), rolled(sum)),
        "rolling_mean": (s.rolling_time(window).mean(), rolled(lambda xs: sum(xs) / len(xs))),
        "rolling_min": (s.rolling_time(window).min(), rolled(min)),
        "rolling_max": (s.rolling_time(window).max(), rolled(max)),
        "rolling_count": (s.rolling_time(window).count(), rolled(lambda xs: float(len(xs)))),
        "rolling_std": (s.rolling_time(window).std(), rolled(lambda xs: math.sqrt(statistics.pvariance(xs)))),
        "rolling_rms": (
            s.rolling_time(window).root_mean_square(),
            rolled(lambda xs: math.sqrt(sum(x * x for x in xs) / len(xs))),
        ),
    }
    for name, (expr, expected) in cases.items():
        view = await subscribe(client, name, series_node(expr))
        assert view.snapshot() == {(): numeric(expected)}, name


# -- refusals ------------------------------------------------------------------------------------
RID = "ri.sparkwire.test.dataset.refused"
CHANNEL = select(RID, "p")
OTHER = select(RID, "q")
STATE = nc.CategoricalSeries.Reference("state")
REFUSED_VARIABLES = {"state": channel_variable(RID, "state")}
REFUSED: dict[str, tuple[Json, dict[str, str]]] = {
    # name: (node, params the InvalidComputation must carry)
    "dataset_asset": (
        series_node(nc.NumericSeries.SelectNumeric("p", nc.Dataset.Asset("ri.a"))),
        {"invalidTypes": "", "variant": "asset"},
    ),
    "dataset_run": (
        series_node(nc.NumericSeries.SelectNumeric("p", nc.Dataset.Run("ri.r"))),
        {"invalidTypes": "", "variant": "run"},
    ),
    "no_dataset": (
        series_node(nc.NumericSeries.SelectNumeric("p")),
        {"invalidTypes": "", "variant": "selectNumeric", "field": "dataset"},
    ),
    "no_name": (
        series_node(nc.NumericSeries.SelectNumeric(dataset=nc.Dataset.Saved(RID))),
        {"invalidTypes": "", "variant": "selectNumeric", "field": "name"},
    ),
    "sampling": (
        series_node(
            nc.NumericSeries.SelectNumeric("p", nc.Dataset.Saved(RID), sampling=nc.Sampling.HashSubsample(2))
        ),
        {"invalidTypes": "", "variant": "selectNumeric", "field": "sampling"},
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
        {"invalidTypes": "", "variant": "thresholdRangesV2", "field": "comparison.eq.tolerance"},
    ),
    "time_shift_beyond_int64": (
        series_node(CHANNEL.time_shift(nc.Duration.Days(2**31 - 1))),
        {"invalidTypes": "", "variant": "timeShiftV2", "field": "duration"},
    ),
    "enum_time_shift_beyond_int64": (
        enum_series_node(STATE.time_shift(-nc.Duration.Days(2**31 - 1))),
        {"invalidTypes": "", "variant": "timeShiftV2", "field": "duration"},
    ),
    "category_regex": (
        ranges_node(STATE.category_ranges().matches_regex(["r.*"])),
        {"invalidTypes": "", "variant": "categoryFilterRangesV2", "field": "operator"},
    ),
    "category_min_points": (
        ranges_node(STATE.category_ranges(min_points=2).is_in(["run"])),
        {"invalidTypes": "POINT_PERSISTENCE", "field": "minPoints"},
    ),
    "category_min_duration": (
        ranges_node(STATE.category_ranges(min_duration=nc.Duration.Milliseconds(500)).is_in(["run"])),
        {"invalidTypes": "POINT_PERSISTENCE", "field": "minDuration"},
    ),
    "category_persistence_start": (
        ranges_node(STATE.category_ranges(range_start="persistence_start").is_in(["run"])),
        {"invalidTypes": "POINT_PERSISTENCE", "field": "rangeStart"},
    ),
    "boolean_ranges_min_points": (
        ranges_node((CHANNEL > 1.0).ranges(min_points=2)),
        {"invalidTypes": "POINT_PERSISTENCE", "field": "minPoints"},
    ),
    "boolean_ranges_over_two_series": (
        ranges_node(((CHANNEL > 1.0) & (OTHER < 2.0)).ranges()),
        {"invalidTypes": "", "variant": "booleanRanges", "field": "input"},
    ),
    "boolean_ranges_comparing_two_series": (
        ranges_node((CHANNEL > OTHER).ranges()),
        {"invalidTypes": "", "variant": "booleanRanges", "field": "input"},
    ),
    "boolean_ranges_of_constants": (
        ranges_node((nc.NumericSeries.Constant(2.0) > 1.0).ranges()),
        {"invalidTypes": "", "variant": "booleanRanges"},
    ),
    "filter_where_on_another_series": (
        series_node(CHANNEL.filter_where(OTHER > 1.0)),
        {"invalidTypes": "", "variant": "filterWhere", "field": "condition"},
    ),
    "filter_where_on_a_derived_series": (
        series_node(CHANNEL.filter_where(CHANNEL.derivative() > 0.0)),
        {"invalidTypes": "", "variant": "filterWhere", "field": "condition"},
    ),
    "unit_conversion_of_a_channel_without_unit": (
        series_node(CHANNEL.unit_conversion("km")),
        {"invalidTypes": "", "variant": "unitConversion", "field": "input"},
    ),
    "unit_conversion_to_an_unknown_unit": (
        converted(CHANNEL, "m", "furlongs per fortnight"),
        {"invalidTypes": "", "variant": "unitConversion", "field": "outputUnit"},
    ),
    "unit_conversion_between_dimensions": (
        converted(CHANNEL, "m", "s"),
        {"invalidTypes": "", "variant": "unitConversion", "field": "outputUnit"},
    ),
    # numericAggregations compute (tests/server/test_summary_aggregations.py); nominal-api makes them
    # "mutually exclusive" with numericOutputFieldsV2
    "summary_with_numeric_aggregations_and_v2_fields": (
        summary(
            numeric_aggregations={
                "p90": sc.NumericAggregationOperator(
                    percentile=sc.Percentile(percentile=sc.DoubleConstant(literal=0.9))
                )
            },
            output_format=sc.OutputFormat.ARROW_V3,
            numeric_output_fields_v2=[sc.NumericOutputFieldV2(field=sc.NumericOutputFieldV2Name.MEAN)],
        ),
        {"invalidTypes": "", "variant": "SummarizeSeries", "field": "numericAggregations"},
    ),
    "summary_with_a_percentile_beyond_one": (
        summary(
            numeric_aggregations={
                "p150": sc.NumericAggregationOperator(
                    percentile=sc.Percentile(percentile=sc.DoubleConstant(literal=1.5))
                )
            }
        ),
        {"invalidTypes": "", "variant": "percentile", "field": "percentile"},
    ),
    # Arrow output (tests/server/test_arrow_output.py): what it cannot honour is refused by name
    "summary_as_arrow_of_an_enum_series": (
        encoded(
            sc.ComputableNode(
                series=sc.SummarizeSeries(
                    input=sc.Series(enum=enum_of(STATE)),
                    numeric_aggregations={},
                    output_format=sc.OutputFormat.ARROW_V3,
                )
            )
        ),
        {"invalidTypes": "", "variant": "SummarizeSeries", "field": "outputFormat"},
    ),
    # a V2 percentile computes (tests/server/test_summary_aggregations.py); its column named twice does not
    "summary_as_arrow_with_a_percentile_column_named_twice": (
        summary(
            output_format=sc.OutputFormat.ARROW_V4,
            numeric_output_fields_v2=[
                sc.NumericOutputFieldV2(
                    percentile=sc.NumericOutputPercentile(percentile=sc.DoubleConstant(literal=0.95))
                ),
                sc.NumericOutputFieldV2(
                    percentile=sc.NumericOutputPercentile(
                        percentile=sc.DoubleConstant(literal=0.5), output_name="p95"
                    )
                ),
            ],
        ),
        {"invalidTypes": "", "variant": "SummarizeSeries", "field": "numericOutputFieldsV2"},
    ),
    "summary_as_arrow_with_both_field_lists": (
        summary(
            output_format=sc.OutputFormat.ARROW_V4,
            numeric_output_fields=[sc.NumericOutputField.MIN],
            numeric_output_fields_v2=[sc.NumericOutputFieldV2(field=sc.NumericOutputFieldV2Name.MAX)],
        ),
        {"invalidTypes": "", "variant": "SummarizeSeries", "field": "numericOutputFieldsV2"},
    ),
    "summary_as_arrow_with_no_field": (
        summary(output_format=sc.OutputFormat.ARROW_V3, numeric_output_fields=[]),
        {"invalidTypes": "", "variant": "SummarizeSeries", "field": "numericOutputFields"},
    ),
    "summary_legacy_with_output_fields": (
        summary(output_format=sc.OutputFormat.LEGACY, numeric_output_fields=[sc.NumericOutputField.MIN]),
        {"invalidTypes": "", "variant": "SummarizeSeries", "field": "numericOutputFields"},
    ),
    "expression_calling_python": (
        api_node(
            sc.NumericSeries(
                arithmetic=sc.ArithmeticSeries(
                    inputs={"p": numeric_of(CHANNEL)}, expression="__import__('os').system('true') + p"
                )
            )
        ),
        {"invalidTypes": "", "variant": "arithmetic", "field": "expression"},
    ),
    "expression_reading_attributes": (
        api_node(
            sc.NumericSeries(
                arithmetic=sc.ArithmeticSeries(inputs={"p": numeric_of(CHANNEL)}, expression="p.__class__")
            )
        ),
        {"invalidTypes": "", "variant": "arithmetic", "field": "expression"},
    ),
    "filter_expression_that_is_no_condition": (
        api_node(
            sc.NumericSeries(
                filter_by_expression=sc.FilterByExpressionSeries(
                    base="p", inputs={"p": numeric_of(CHANNEL)}, expression="p + 1"
                )
            )
        ),
        {"invalidTypes": "", "variant": "filterByExpression", "field": "expression"},
    ),
    "bit_shift_beyond_63": (
        series_node(CHANNEL.bit_shift_left(64)),
        {"invalidTypes": "", "variant": "bitShiftLeft", "field": "operand"},
    ),
    "union_throw": (
        api_node(
            sc.NumericSeries(
                union=sc.NumericUnionSeries(
                    input=[numeric_of(CHANNEL)], operation=sc.NumericUnionOperation.THROW
                )
            )
        ),
        {"invalidTypes": "", "variant": "union", "field": "operation"},
    ),
    "time_range_filter_with_an_end": (
        api_node(
            sc.NumericSeries(
                time_range_filter=sc.NumericTimeRangeFilterSeries(
                    input=numeric_of(CHANNEL),
                    end_time=sc.TimestampConstant(
                        literal=api_types.Timestamp(seconds=2_000_000_000, nanos=0)
                    ),
                )
            )
        ),
        {"invalidTypes": "TIME_RANGE_FILTER_WITH_FIXED_END", "field": "endTime"},
    ),
    "z_score_by_a_tag_the_channel_is_not_grouped_by": (
        series_node(CHANNEL.z_score(["vehicle"])),
        {"invalidTypes": "", "variant": "zScore", "field": "groupByTags"},
    ),
}


async def test_what_cannot_stream_is_refused_by_name_and_the_rest_still_works(client: Client) -> None:
    await client.subscribe(
        {name: subscription(node, REFUSED_VARIABLES, WINDOW_S) for name, (node, _) in REFUSED.items()}
    )
    for name, (_, params) in REFUSED.items():
        creation = await client.creation(name)
        assert creation["type"] == "error", (name, creation)
        error = creation["error"]["serializableError"]
        assert error["name"] == "PersistentCompute:InvalidComputation", (name, error)
        assert error["statusCode"] == 400
        assert error["params"].items() >= params.items(), (name, error["params"])
        assert_nominal_types(error["params"])
    ok = await subscribe(client, "ok", series_node(select(unique_rid(), "p")))
    assert ok.snapshot() == {(): numeric([])}


# -- the unit a creation reports ---------------------------------------------------------------------
async def test_a_creation_reports_the_unit_its_result_is_in(server: ServerProcess, client: Client) -> None:
    rid, t0 = unique_rid(), time.time_ns() - 60 * NANOS
    await write_points(server.base_url, rid, "p", [(t0, 14.5)])
    channel = select(rid, "p")
    named = sc.NumericSeries(unit_override=sc.UnitOverrideSeries(input=numeric_of(channel), unit="[psi]"))
    nodes = {
        "converted": (converted(channel, "[psi]", "kPa"), "kPa"),
        "overridden": (api_node(named), "[psi]"),
        "last_point_converted": (
            encoded(
                sc.ComputableNode(
                    value=sc.SelectValue(
                        last_point=sc.Series(
                            numeric=sc.NumericSeries(
                                unit_conversion=sc.UnitConversionSeries(input=named, output_unit="kPa")
                            )
                        )
                    )
                )
            ),
            "kPa",
        ),
        "plain": (series_node(channel), None),
        "abs_of_a_conversion": (
            api_node(sc.NumericSeries(abs=sc.Abs(x=named))),
            None,
        ),  # units not carried on
    }
    await client.subscribe({name: subscription(node, {}, WINDOW_S) for name, (node, _) in nodes.items()})
    for name, (_, unit) in nodes.items():
        creation = await client.creation(name, timeout=120)
        assert creation["type"] == "success", (name, creation)
        single = creation["success"]["unitResult"]["single"]
        if unit is None:
            assert single == {"type": "noUnitAvailable", "noUnitAvailable": []}, name
        else:
            assert single == {"type": "success", "success": unit}, name
    view = ResultView(WINDOW_NS)
    view.apply(await client.update("converted", timeout=300))
    [(t, kpa)] = view.ungrouped().normalized()
    assert t == t0 and math.isclose(kpa, 14.5 * 6.894757293168361, rel_tol=1e-9)  # 1 psi in kPa


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
