"""Live evaluation touches only what new points can change (nodes/base.py's contract), and stays
exact: for every node kind in the registry, a computation fed points in random orders (late points
and overwrites included) while its window slides past its history sends frames whose merged view
equals a fresh computation's FullResult, and its FullResult is the fresh one's byte for byte.

No Spark and no server: the engine's own Computation, frames from app.frames, merged by the test's
client view. The cases below must name every registered node kind
(`test_every_registered_node_kind_has_an_exactness_case`), so a new kind without one fails here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from app.protocol import frames
from compute.evaluation.compiler.catalogs import Catalogs
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.evaluation.nodes import Node, OutputNode
from compute.evaluation.nodes.base import node_kinds
from compute.evaluation.nodes.outputs import SummarizeRanges
from compute.evaluation.results import EnumBuckets, MultivariateBuckets, NumericBuckets
from compute.storage.assets import Asset, DataScope, Run
from compute.storage.composite_points import double_array_text, struct_text
from compute.storage.events import Event
from compute.storage.log_lines import log_text
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests import node_json as n
from tests.client_view import ResultView, clip_ranges, first_difference
from tests.server import test_compute_numeric_nodes as numeric_nodes
from tests.server import test_compute_ranges_enums as range_enum_nodes
from tests.server.test_compute_property import STATES, variables

NANOS = 1_000_000_000
MS = 1_000_000
SECOND = 1000 * MS
WINDOW_NS = 4 * NANOS  # short: the window slides past most of what is written
RID = "ri.incremental"
SERIES = {
    ("a", ()): 1,
    ("b", ()): 2,
    ("e", ()): 3,
    ("g", (("vehicle", "v1"),)): 4,
    ("g", (("vehicle", "v2"),)): 5,
    ("l", ()): 6,  # log lines (SeriesKind.LOG)
    ("v", ()): 7,  # double arrays and structs (decision 0104)
    ("s", ()): 8,
}
TEXT_KINDS = {
    "e": SeriesKind.ENUM,
    "l": SeriesKind.LOG,
    "v": SeriesKind.DOUBLE_ARRAY,
    "s": SeriesKind.STRUCT,
}
BASE = 1_800_000_000 * NANOS
J = dict[str, Any]


def _cmp(kind: str, left: J, right: J) -> J:
    return n.union(kind, {"left": left, "right": right})


def _filter_where(x: J, condition: J) -> J:
    return n.union("filterWhere", {"input": x, "condition": condition})


def _boolean_ranges(condition: J) -> J:
    return n.union("booleanRanges", {"input": condition})


a, b, g = n.num("a"), n.num("b"), n.num("g")
# channel "l"'s log lines, as the log stores them
LOG_LINES = [
    log_text("Disk full", {"level": "ERROR"}),
    log_text("error: reset", {"level": "WARN", "host": "a1"}),
    log_text("all good", {}),
    log_text("ERR-42", {"host": "a1"}),
]
# channels "v" and "s": arrays (of varied lengths: an index out of bounds omits the point) and
# structs (a field missing, or not a number: the row filtered out), as the log stores them
ARRAYS = [double_array_text(x) for x in ([1.0, 2.0, 3.0], [4.0], [], [float("nan"), 5.5], [-1.0, 0.5])]
STRUCTS = [
    struct_text(json.dumps(x))
    for x in ({"m": {"t": 1.5, "s": "ok"}}, {"m": {"t": "hot"}}, {"m": {}}, {"m": {"t": -2, "s": True}})
]
# Every node kind, alone and nested (a point-reach node over a time-reach one and the reverse).
CASES: dict[str, J] = {
    "raw": n.series(n.numeric_series(a), buckets=8),
    "raw_unbucketed": n.series(n.numeric_series(a)),
    "enum_raw": n.series(n.enum_series(n.raw("e")), buckets=6),
    "unary": n.series(n.numeric_series(n.unary("abs", a))),
    "sum_aligned": n.series(n.numeric_series(n.binary("add", a, b)), buckets=8),
    "sum_grouped": n.series(n.numeric_series(n.binary("multiply", g, a))),
    "constant_times": n.series(n.numeric_series(n.binary("multiply", n.const(2.0), a))),
    "threshold_filter": n.series(n.numeric_series(n.threshold_filter(a, "GREATER_THAN", n.literal(0.0)))),
    "filter_where": n.series(
        n.numeric_series(_filter_where(a, _cmp("lessThan", a, n.const(1.0)))),
    ),
    "derivative": n.series(n.numeric_series(n.derivative(a)), buckets=8),
    "derivative_of_sum": n.series(n.numeric_series(n.derivative(n.binary("add", a, b)))),
    "value_difference": n.series(n.numeric_series(n.value_difference(a))),
    "time_shift_back": n.series(n.numeric_series(n.time_shift(a, n.literal(n.duration(NANOS // 2))))),
    "time_shift_forward": n.series(n.numeric_series(n.time_shift(a, n.literal(n.duration(-3 * NANOS // 2))))),
    "rolling_mean": n.series(n.numeric_series(n.rolling(n.numeric_series(a), NANOS, "average")), buckets=8),
    "rolling_std_of_derivative": n.series(
        n.numeric_series(n.rolling(n.numeric_series(n.derivative(a)), 3 * NANOS // 2, "standardDeviation"))
    ),
    "derivative_of_rolling": n.series(
        n.numeric_series(n.derivative(n.rolling(n.numeric_series(a), NANOS, "max")))
    ),
    "threshold": n.ranges(n.threshold(a, "GREATER_THAN", n.literal(0.0))),
    "threshold_summarized": n.ranges(n.threshold(a, "GREATER_THAN", n.literal(0.0)), max_ranges=2),
    "min_max": n.ranges(n.min_max(n.binary("add", a, b), "INSIDE_BOUNDS", n.literal(-1.0), n.literal(1.5))),
    "enum_filter": n.ranges(n.enum_filter(n.raw("e"), "IS_IN", n.literal(["run", "fault"]))),
    "boolean_ranges": n.ranges(
        _boolean_ranges(
            n.union(
                "or",
                {"left": _cmp("greaterThan", a, n.const(1.0)), "right": _cmp("equalTo", a, n.const(-1.0))},
            )
        )
    ),
    "not": n.ranges(n.not_(n.threshold(a, "LESS_THAN", n.literal(0.5)))),
    "intersect_union": n.ranges(
        n.union_ranges(
            n.intersect(
                n.threshold(a, "GREATER_THAN", n.literal(-1.0)), n.threshold(b, "LESS_THAN", n.literal(1.0))
            ),
            n.threshold(n.derivative(a), "GREATER_THAN", n.literal(0.0)),
        )
    ),
    "threshold_grouped": n.ranges(n.threshold(g, "GREATER_THAN_OR_EQUAL_TO", n.literal(0.0))),
    "first_point": n.value("firstPoint", n.numeric_series(n.derivative(a))),
    "last_point": n.value("lastPoint", n.numeric_series(n.binary("subtract", a, b))),
}

# The kinds written against `evaluate(env)` alone, one case each (their JSON is that of the server
# tests, which check them against the reference evaluator): under the contract's default they are
# evaluated whole and cut, and must still be exact as the window slides.
CASES.update(
    {
        f"numeric_{name}": numeric_nodes.CASES[name]
        for name in (
            "mean_radius_3s",  # Pointwise, aligned within a radius
            "grouped_if_else",  # Pointwise over a grouped and a shared channel
            "union",  # Union
            "select_newest_points",  # SelectPoints
            "select_oldest_points",
            "nth_point_downsample",  # NthPoint
            "drop_nan",  # DropNan
            "approximate_filter",  # ApproximateFilter
            "time_difference_ms",  # TimeDifference
            "absolute_timestamp_of_enum",  # AbsoluteTimestamp
            "enum_to_numeric_default",  # EnumToNumeric
            "unit_conversion_celsius_to_fahrenheit",  # Converted over WithUnit
            "filter_by_expression",  # FilterByExpression
            "rolling_points_std",  # RollingPoints
            "rolling_time_percentile",  # RollingTimeSlices
            "group_by_every_10s_mean",  # GroupByTime
            "to_start_of_interval_then_group_by_max",  # ToStartOfInterval
            "filter_transformation",  # FilterWithinRanges
            "aggregate_under_ranges",  # AggregateUnderRanges
            "range_duration_ms",  # RangeDuration
            "count_duplicate",  # CountDuplicate
            "resample_v2",  # ResampleForwardFill
            "tag_filter_not_in_and",  # FilterByTag
            "select_tags_every_vehicle_as_one_bucketed",  # SelectTags
            "grouped_select_tags_drops_a_tag",
            "grouped_z_score_within_4s",  # ZScore
            "z_score_by_site_plus_shared_a",  # a node over ZScore and a shared channel
            "grouped_z_score_of_selected_tags",  # ZScore over SelectTags
            "group_by_no_tag_every_10s_mean",  # groupBy of a subset of the tags (over SelectTags)
            "resample_v1_default_forward_fill",  # ResampleForwardFill, its last point rounded up
        )
    }
)
CASES.update(
    {
        f"ranges_enums_{name}": range_enum_nodes.CASES[name]
        for name in (
            "duration_filter_longer",  # DurationFilter
            "padded",  # PaddedRanges
            "series_equality_not_all",  # SeriesEquality
            "categorical_equality_v2",  # SeriesEquality over ValueMap
            "stability_v2",  # StabilityDetection
            "value_map",  # ValueMap
            "filter_transformation",  # EnumFilterTransformation
            "aggregate",  # EnumAggregateDuplicates
            "on_change_numeric",  # OnChange
            "on_change_enum",
            "crossover",  # Crossover
            "extrema_v2_both",  # Extrema
            "first_range",  # SelectRange
            "last_range_of_instants",
            "resample_v2",  # EnumResample
            "union_max_of_colliding_series",  # EnumUnion
            "histogram_bucket_count",  # NumericHistogramChart over ChartInputs
            "histogram_width_and_offset",
            "histogram_enum",  # EnumHistogramChart
            "scatter_spatial_buckets",  # ScatterChart
            "scatter_temporal_buckets",
            "grouped_scatter",
            "scatter3d_octants",  # Scatter3dChart
            "multivariate",  # MultivariateChart over DriverAligned
            "grouped_multivariate",
            "grouped_threshold_of_z_score",  # ranges over ZScore
            "enum_tag_filter",  # FilterByTag of an enum series
            "grouped_enum_select_tags",  # SelectTags of an enum series
            "to_start_of_interval_then_aggregate_max",  # ToStartOfInterval and aggregate of an enum series
            "nth_point_downsample",  # NthPoint of an enum series
            "first_value_point",  # SelectValue as a SinglePoint
            "last_value_point_of_enum",
            "range_max_of_b_while_a_above_zero",  # RangeNumericAggregation, SummarizeRangeAggregates
            "range_all_aggregates_of_a_while_a_above_two",
        )
    }
)
# Two groups' valueMap labels joined in one group (selectTags of no key): an enum merge
_STATES = range_enum_nodes.CASES["grouped_value_map"]["series"]["input"]["enum"]
CASES["enum_select_tags_joined"] = n.series(
    n.enum_series(n.union("selectTags", {"input": _STATES, "tagKeys": []})), buckets=6
)
# arrays and structs (nodes/composite.py), streamed under `sparkwire.streamPolled`: an element of
# each array under a node of time reach, bucketed; a number of each struct
_SECOND_ELEMENT = n.union("select1dArrayIndex", {"input": n.raw("v"), "index": n.literal(1)})
CASES["array_index_derivative"] = n.series(n.numeric_series(n.derivative(_SECOND_ELEMENT)), buckets=6)
_FIELD = {"input": n.raw("s"), "fieldPath": [n.literal("m.t")], "dataType": "INT64"}
CASES["struct_number"] = n.series(n.numeric_series(n.union("extractFromStruct", _FIELD)))
# contains (nodes/logs.py): a point per log line, 1.0 where the operator matches
CASES["contains"] = n.series(
    n.numeric_series(
        n.union(
            "contains",
            {
                "input": n.raw("l"),
                "operator": n.union(
                    "or",
                    [
                        n.union("exactMatchCaseInsensitiveFilter", {"token": "err"}),
                        n.union("arg", {"key": n.literal("host"), "operator": {"regex": "^a"}}),
                    ],
                ),
            },
        )
    ),
)
SINCE = BASE + 6 * NANOS  # timeRangeFilter's start, inside the ~20 s written
# refpropV2 (fluid properties, a Pointwise kernel): water in its two-phase dome (390-410 K, 498-502
# kg/m^3), so every aligned point has a finite pressure; V1 with a 3 s forward-fill radius.
CASES["refprop_v2_water_pressure"] = n.series(
    n.numeric_series(
        n.union(
            "refpropV2",
            {
                "inputs": {
                    "TEMPERATURE": n.binary("add", n.num("a"), n.const(400.0)),
                    "MASS_DENSITY": n.binary("add", n.num("b"), n.const(500.0)),
                },
                "outputProperty": "PRESSURE",
                "substance": "WATER",
            },
        )
    )
)
CASES["refprop_v1_radius_3s"] = n.series(
    n.numeric_series(
        n.union(
            "refprop",
            {
                "inputs": {
                    "PRESSURE": n.binary("add", n.num("a"), n.const(101325.0)),
                    "MASS_DENSITY": n.binary("add", n.num("b"), n.const(300.0)),
                },
                "outputProperty": "TEMPERATURE",
                "substance": "NITROGEN",
                "interpolationConfiguration": n.union(
                    "forwardFillInterpolation",
                    {"interpolationRadius": n.union("literal", {"seconds": 3, "nanos": 0})},
                ),
            },
        )
    )
)
# SummarizeSeries.numericAggregations: extra bucket columns, re-bucketed only where the window changed
CASES["summary_numeric_aggregations"] = n.union(
    "series",
    {
        "input": n.numeric_series(n.num("a")),
        "buckets": 6,
        "numericAggregations": {
            "p25": n.union("percentile", {"percentile": n.literal(0.25)}),
            "total": n.union("sum", {}),
            "rms": n.union("rootMeanSquare", {}),
        },
    },
)
CASES["since_time"] = n.series(
    n.numeric_series(
        n.union(
            "timeRangeFilter",
            {"input": a, "startTime": n.literal({"seconds": SINCE // NANOS, "nanos": SINCE % NANOS})},
        )
    )
)
# A series variable over a dataset of two branches (SharedSubtree over MergedBranches): the saved
# data source, and a run over it that holds its points from the run's start on (PointsFrom).
RUN = Run(
    "ri.incremental.run",
    "run",
    [],
    BASE + 3 * NANOS,
    None,
    [DataScope("scope", RID)],
    typed_properties={"state": STATES[1], "gain": -1.5},
)
BRANCHES = n.union(
    "combine",
    {"inputs": [n.union("saved", {"rid": n.literal(RID)}), n.union("run", {"rid": n.literal(RUN.rid)})]},
)
VARIABLES = {
    **variables(RID),
    "l": n.channel(RID, "l"),
    "v": n.channel(RID, "v"),
    "s": n.channel(RID, "s"),
    "branches": n.union(
        "series", {"select": {"name": n.literal("a"), "dataset": BRANCHES}, "groupByTags": []}
    ),
}
CASES["dataset_branches"] = n.series(
    n.numeric_series(n.binary("add", n.num("branches"), n.num("branches"))), buckets=8
)

# The run's typed properties as constants (EnumConstant broadcast by SeriesEquality; Constant by
# BinaryNode): the channel "e" equal to the run's state, and "a" scaled by its gain.
RUN_DATASET = n.union("run", {"rid": n.literal(RUN.rid)})
CASES["categorical_property_equality"] = n.ranges(
    n.union(
        "categoricalEqualityRangesV2",
        {
            "inputs": [
                n.raw("e"),
                n.union("selectCategoricalProperty", {"propertyName": "state", "dataset": RUN_DATASET}),
            ],
            "equalityOperator": "ALL_EQUAL",
        },
    )
)
CASES["numeric_property_scale"] = n.series(
    n.numeric_series(
        n.binary(
            "multiply", a, n.union("selectNumericProperty", {"propertyName": "gain", "dataset": RUN_DATASET})
        )
    ),
    buckets=8,
)

# WINDOW_BOUND: an open range measured to the window's end as of each update (`now`), a missing
# start from the window's start: a range kept or dropped as the batches' `now` moves.
CASES["duration_filter_v2_window_bound"] = n.ranges(
    n.union(
        "durationFilterV2",
        {
            "input": n.threshold(a, "GREATER_THAN", n.literal(0.0)),
            "duration": n.union("seconds", {"seconds": n.literal(1)}),
            "comparison": "GREATER_THAN",
            "unboundedBehavior": "WINDOW_BOUND",
        },
    )
)

# Events (a FLAG over 2-5 s, an instant at 8 s, an ERROR over 12-13 s, one of another label) as
# ranges under a threshold, and as labels compared with the channel "e": they read no channel, so
# a live update never changes them; the channels' points move what they are combined with.
EVENTS = [
    Event(
        "ri.event.1", "1", ["ri.asset.x"], 2 * SECOND, 3 * SECOND, "fill", "", "FLAG", ["x"], {"s": STATES[0]}
    ),
    Event("ri.event.2", "2", ["ri.asset.x"], 8 * SECOND, 0, "mark", "", "INFO", ["x"], {"s": STATES[1]}),
    Event(
        "ri.event.3", "3", ["ri.asset.x"], 12 * SECOND, SECOND, "burn", "", "ERROR", ["x"], {"s": STATES[0]}
    ),
    Event("ri.event.4", "4", ["ri.asset.x"], 4 * SECOND, 9 * SECOND, "other", "", "INFO", ["y"], {}),
]
LABEL_X = n.union("label", n.literal("x"))
CASES["events_search_under_threshold"] = n.ranges(
    n.union(
        "intersectRange",
        {
            "inputs": [
                n.union("eventsSearch", {"query": LABEL_X}),
                n.threshold(a, "GREATER_THAN", n.literal(0.0)),
            ]
        },
    )
)
CASES["event_aggregation_equality"] = n.ranges(
    n.union(
        "categoricalEqualityRangesV2",
        {
            "inputs": [
                n.raw("e"),
                n.union(
                    "eventAggregation",
                    {"query": LABEL_X, "valueSource": n.union("property", n.literal("s"))},
                ),
            ],
            "equalityOperator": "ALL_EQUAL",
        },
    )
)


class _Events:
    def events(self) -> list[Event]:
        return EVENTS


class _Catalog:
    """The one run the `dataset_branches` case reads."""

    def asset(self, rid: str) -> Asset | None:
        return None

    def run(self, rid: str) -> Run | None:
        return RUN if rid == RUN.rid else None

    def assets(self) -> list[Asset]:
        return []

    def runs(self) -> list[Run]:
        return [RUN]


def _plan(node: J, window_ns: int = WINDOW_NS) -> Any:
    """The node compiled against the test's variables, with the test's run in the catalog."""
    catalogs = Catalogs(assets=_Catalog(), events=_Events())
    # streamed: the polled variants marked with `streams` compile too (under `sparkwire.streamPolled`)
    return compile_plan(
        node, window_ns, VARIABLES, Limits(), ResultOptions(), catalogs=catalogs, streamed=True
    )


GRID = st.integers(-4, 4).map(lambda i: i / 2)
TEXTS = {"v": ARRAYS, "s": STRUCTS}


def _value(draw: st.DrawFn, channel: str) -> Any:
    if channel == "e":
        return draw(st.sampled_from(STATES))
    if channel == "l":
        return draw(st.sampled_from(LOG_LINES))
    if channel in TEXTS:
        return draw(st.sampled_from(TEXTS[channel]))
    return draw(GRID)


@st.composite
def feeds(draw: st.DrawFn) -> list[tuple[str, dict[str, str], list[tuple[int, Any]]]]:
    """Write requests in arrival order over ~20 s (so a 4 s window slides past most of it): dense
    and sparse stretches (gaps beyond the 1 s forward-fill radius), overwrites, and late requests."""
    requests: list[tuple[int, str, dict[str, str], list[tuple[int, Any]]]] = []
    for channel, tags in (
        ("a", {}),
        ("b", {}),
        ("e", {}),
        ("g", {"vehicle": "v1"}),
        ("g", {"vehicle": "v2"}),
        ("l", {}),
        ("v", {}),
        ("s", {}),
    ):
        count = draw(st.integers(0, 60))
        gaps = draw(st.lists(st.sampled_from([7, 50, 200, 400, 1300, 2600]), min_size=count, max_size=count))
        t, stamps = 0, []
        for gap in gaps:
            t += gap * MS + draw(st.integers(0, 3))
            stamps.append(t)
        values = [_value(draw, channel) for _ in stamps]
        points = list(zip(stamps, values, strict=True))
        if points and draw(st.booleans()):  # a later write of an existing timestamp wins
            t0, _ = draw(st.sampled_from(points))
            points.append((t0, _value(draw, channel)))
        size = draw(st.integers(1, 6))
        for i in range(0, len(points), size):
            chunk = points[i : i + size]
            requests.append((chunk[0][0], channel, tags, chunk))
    requests.sort(key=lambda r: r[0])  # mostly in time order, as a feed arrives ...
    order = list(range(len(requests)))
    for _ in range(draw(st.integers(0, 4))):  # ... with a few requests arriving late
        if len(order) > 1:
            i = draw(st.integers(0, len(order) - 1))
            j = draw(st.integers(0, len(order) - 1))
            order.insert(j, order.pop(i))
    return [requests[i][1:] for i in order]


def _computation(node: J) -> Computation:
    plan = _plan(node)
    computation = Computation("exact", plan, allowed_lateness_ns=1000 * NANOS)  # none dropped
    for (channel, tags), sid in SERIES.items():
        kind = TEXT_KINDS.get(channel, SeriesKind.NUMERIC)
        computation.route(SeriesInfo(sid, SeriesKey.of(RID, channel, dict(tags)), kind))
    return computation


def _rows(request: Any, seq: int) -> tuple[int, Rows]:
    channel, tags, points = request
    ts = np.array([BASE + t for t, _ in points], np.int64)
    values = np.array([v for _, v in points], dtype=object if channel in TEXT_KINDS else np.float64)
    seqs = np.arange(seq + 1, seq + 1 + len(points))
    return SERIES[(channel, tuple(sorted(tags.items())))], Rows(seqs, ts, values)


def _fresh(node: J, written: list[tuple[int, Rows]], seq: int, now: int) -> Computation:
    """A computation subscribed now: everything written so far arrives by back-fill."""
    fresh = _computation(node)
    fresh.backfill_seq = seq
    by_series: dict[int, list[Rows]] = {}
    for sid, r in written:
        by_series.setdefault(sid, []).append(r)
    fresh.load_backfill(
        {
            sid: Rows(*(np.concatenate([getattr(r, f) for r in rs]) for f in ("seq", "ts", "values")))
            for sid, rs in by_series.items()
        },
        now,
    )
    return fresh


def _settled_view(view: ResultView, cutoff: int, width: int | None) -> Any:
    """What a client shows from the window's start on: a bucket cut by the start is the client's to
    trim (never announced, computation._settled), ranges start at it."""
    snapshot = clip_ranges(view.snapshot(), cutoff)
    out = {}
    for key, (kind, value) in snapshot.items():
        if kind in ("numeric", "enum"):
            value = [(t, v) for t, v in value if t >= cutoff]
        elif (kind.startswith("bucketed") or kind == "multivariate") and width is not None:
            value = [(end, bucket) for end, bucket in value if end - width >= cutoff]
        out[key] = (kind, value)
    return out


def _bucket_width(computation: Computation) -> int | None:
    buckets = (
        o
        for o in computation.outputs.values()
        if isinstance(o, NumericBuckets | EnumBuckets | MultivariateBuckets)
    )
    return next((o.width for o in buckets), None)


def run_exactness(node: J, requests: list[Any], before: int) -> None:
    written: list[tuple[int, Rows]] = []
    seq, newest = 0, 0
    for request in requests[:before]:
        sid, r = _rows(request, seq)
        seq += len(r.seq)
        written.append((sid, r))
        newest = max(newest, int(r.ts.max()))
    now = max(newest, BASE) + MS
    live = _fresh(node, written, seq, now)
    plan = live.plan
    view = ResultView(WINDOW_NS)
    view.apply(json.loads(frames.full_update(live.snapshot(None), plan.grouped)))
    for step, request in enumerate(requests[before:]):
        sid, r = _rows(request, seq)
        seq += len(r.seq)
        written.append((sid, r))
        newest = max(newest, int(r.ts.max()))
        now = max(now + MS, newest + MS)
        change = live.apply_batch({sid: r}, now)
        if change is not None:
            if change.full:
                view.apply(json.loads(frames.full_update(live.snapshot(None), plan.grouped)))
            else:
                snap = live.snapshot(change.start)
                view.apply(json.loads(frames.append_update(snap, plan.grouped, change.start, change.end)))
        if step % 4 and step != len(requests) - before - 1:
            continue  # a fresh computation every few batches (and after the last)
        fresh = _fresh(node, written, seq, now)
        full = frames.full_update(fresh.snapshot(None), plan.grouped)
        assert frames.full_update(live.snapshot(None), plan.grouped) == full, (
            f"FullResult differs at step {step}"
        )
        expected = ResultView(WINDOW_NS)
        expected.apply(json.loads(full))
        # the client trims at its newest `end` less the window (a point shifted into the future
        # moves that past the server's window start)
        cutoff = max(now, view.latest_end) - WINDOW_NS
        width = _bucket_width(fresh)
        if isinstance(plan.root, SummarizeRanges) and any(
            o.kind == "rangesSummary" for o in fresh.outputs.values()
        ):
            continue  # a rangesSummary travels whole: the FullResult check above covers it
        diff = first_difference(_settled_view(view, cutoff, width), _settled_view(expected, cutoff, width))
        assert diff is None, f"merged frames differ from a fresh FullResult at step {step}: {diff}"


@pytest.mark.parametrize("case", sorted(CASES))
@settings(
    max_examples=12,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking (minutes); the example is printed
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(requests=feeds(), before_share=st.floats(0, 0.5))
# The held start moves past the point before a lone derivative point (2.642 s): its bucket empties,
# which an append of buckets cannot say (it only replaces buckets), so a FullResult is due.
@example(
    requests=[("a", {}, [(t * MS, 0.0)]) for t in (7, 14, 21, 28, 35, 42, 2642, *range(3942, 3992, 7), 5291)],
    before_share=0.0,
)
def test_live_frames_equal_a_fresh_full_result_as_the_window_slides(
    case: str, requests: list[Any], before_share: float
) -> None:
    run_exactness(CASES[case], requests, int(len(requests) * before_share))


def _kinds(node: Node | OutputNode) -> set[str]:
    found = {type(node).__name__}
    children = [node.input] if isinstance(node, OutputNode) else list(node.children())
    for child in children:
        found |= _kinds(child)
    return found


def test_every_registered_node_kind_has_an_exactness_case() -> None:
    covered: set[str] = set()
    for node in CASES.values():
        covered |= _kinds(_plan(node).root)
    missing = sorted(set(node_kinds()) - covered)
    assert not missing, f"node kinds without an exactness case in CASES: {missing}"


def test_a_live_batch_evaluates_only_the_new_points() -> None:
    """An hour of 1 kHz x and y bucketed: a 100-point micro-batch re-evaluates x + y over those
    points (and the forward fill's 1 s before them), not over the 3.6 million the window holds."""
    window = 3600 * NANOS
    node = n.series(n.numeric_series(n.binary("add", a, b)), buckets=1000)
    plan = compile_plan(node, window, variables(RID), Limits(), ResultOptions())
    computation = Computation("hour", plan, allowed_lateness_ns=None)
    for (channel, tags), sid in SERIES.items():
        kind = SeriesKind.ENUM if channel == "e" else SeriesKind.NUMERIC
        computation.route(SeriesInfo(sid, SeriesKey.of(RID, channel, dict(tags)), kind))
    points = 3_600_000
    ts = BASE + np.arange(points, dtype=np.int64) * MS
    computation.backfill_seq = 2 * points
    computation.load_backfill(
        {
            1: Rows(np.arange(points), ts, np.sin(np.arange(points) / 100)),
            2: Rows(np.arange(points), ts, np.ones(points)),
        },
        int(ts[-1]) + MS,
    )
    seen: list[int] = []
    evaluate = type(plan.root.input).evaluate_since

    def spy(self: Any, env: Any, since: int) -> Any:
        out = evaluate(self, env, since)
        seen.append(len(out))
        return out

    type(plan.root.input).evaluate_since = spy  # type: ignore[method-assign]
    try:
        t = int(ts[-1])
        for _ in range(3):
            new = t + MS * np.arange(1, 101, dtype=np.int64)
            rows = {
                1: Rows(np.arange(100) + 10**8, new, np.zeros(100)),
                2: Rows(np.arange(100) + 10**8, new, np.ones(100)),
            }
            t = int(new[-1])
            assert computation.apply_batch(rows, t + MS) is not None
    finally:
        type(plan.root.input).evaluate_since = evaluate  # type: ignore[method-assign]
    assert seen == [100, 100, 100]
    out = computation.outputs[()]
    assert isinstance(out, NumericBuckets) and out.count.sum() > 3_000_000


@contextmanager
def whole_evaluations(kind: type) -> Iterator[list[int]]:
    """Counts `kind.evaluate` calls (whole evaluations) while the block runs."""
    whole = kind.evaluate  # type: ignore[attr-defined]
    calls: list[int] = []

    def counted(self: Any, env: Any) -> Any:
        calls.append(1)
        return whole(self, env)

    kind.evaluate = counted  # type: ignore[attr-defined]
    try:
        yield calls
    finally:
        kind.evaluate = whole  # type: ignore[attr-defined]


def test_a_derivative_over_a_dense_channel_stays_incremental_when_the_held_start_moves() -> None:
    """The held history's start moves once per step (225 s for an hour window); a derivative's
    first point depends on the point held before it, but over a dense channel that point is there
    (`head_settled`), so the step costs no whole evaluation. A window starting in a gap (no point
    between the held start and the window's) is not settled, and is evaluated whole: the fallback
    that keeps it exact."""
    from compute.evaluation.nodes import Derivative

    window = 3600 * NANOS
    node = n.series(n.numeric_series(n.derivative(a)), buckets=1000)
    plan = compile_plan(node, window, variables(RID), Limits(), ResultOptions())
    computation = Computation("hour", plan, allowed_lateness_ns=None)
    computation.route(SeriesInfo(1, SeriesKey.of(RID, "a", {}), SeriesKind.NUMERIC))
    points = 3_600_000
    ts = BASE + np.arange(points, dtype=np.int64) * MS
    computation.backfill_seq = points
    now = int(ts[-1]) + NANOS  # the window's start 1 s past a step: the held start is before it
    computation.load_backfill({1: Rows(np.arange(points), ts, np.sin(np.arange(points) / 100))}, now)
    with whole_evaluations(Derivative) as calls:
        step = plan.history_step_ns
        t = int(ts[-1])
        for _ in range(3):  # each batch's clock a whole step later: the held start moves every time
            new = t + MS * np.arange(1, 101, dtype=np.int64)
            t = int(new[-1])
            now += step
            assert computation.apply_batch({1: Rows(np.arange(100) + t, new, np.zeros(100))}, now) is not None
        assert calls == []
        # nothing written for an hour: the window starts just after a step past the last point, so
        # the point before the window's first one is not held and the step is evaluated whole
        grid = (t // step + 1) * step
        later = grid + window + 100 * MS
        rows = {1: Rows(np.array([later]), np.array([later - MS]), np.zeros(1))}
        assert computation.apply_batch(rows, later) is not None
        assert calls == [1]


def test_rolling_points_over_history_shorter_than_the_window_stays_incremental() -> None:
    """rollingPoints(100)'s first outputs depend on the points held before them, so a held start
    that drops points re-evaluates it whole. A channel whose history is shorter than the window
    drops none as the held start moves, and each live batch reduces only its new points' windows
    (CI's budget test found 20,000 points x 100 reduced whole on every batch: 0.1 s of CPU)."""
    from compute.evaluation.nodes.aggregate import RollingPoints

    window = 60 * NANOS
    rolling_points = {"input": a, "points": {"type": "literal", "literal": 100}}
    body = {"input": n.union("rollingPoints", rolling_points), "operator": n.union("average", {})}
    node = n.series(n.numeric_series(n.union("numericAggregation", body)))
    plan = compile_plan(node, window, variables(RID), Limits(), ResultOptions())
    computation = Computation("sparse", plan, allowed_lateness_ns=None)
    computation.route(SeriesInfo(1, SeriesKey.of(RID, "a", {}), SeriesKind.NUMERIC))
    points = 20_000
    ts = BASE + np.arange(points, dtype=np.int64) * MS  # 20 s of a 60 s window
    computation.backfill_seq = points
    now = int(ts[-1]) + MS
    computation.load_backfill({1: Rows(np.arange(points), ts, np.sin(np.arange(points) / 100))}, now)
    with whole_evaluations(RollingPoints) as calls:
        step = plan.history_step_ns
        t = int(ts[-1])
        for _ in range(3):  # each batch a whole step later: the held start moves, over no point
            new = t + MS * np.arange(1, 11, dtype=np.int64)
            t = int(new[-1])
            now += step
            assert computation.apply_batch({1: Rows(np.arange(10) + t, new, np.zeros(10))}, now) is not None
        assert calls == []
        # nothing written for two windows: the held start drops every point before the new one,
        # which has no 100 points before it held, so the head is evaluated whole
        now = t + window + plan.lookback_ns + 2 * step
        later = now - MS
        rows = {1: Rows(np.array([later]), np.array([later]), np.zeros(1))}
        assert computation.apply_batch(rows, now) is not None
        assert calls == [1]


# The kinds with an incremental form beyond those of the contract's first cut, by the case that
# holds each (nodes/base.py: a `reach` and an `evaluate_since`).
INCREMENTAL_CASES = {
    "Pointwise": "numeric_mean_radius_3s",
    "DropNan": "numeric_drop_nan",
    "ApproximateFilter": "numeric_approximate_filter",
    "WithUnit": "numeric_unit_conversion_celsius_to_fahrenheit",
    "Converted": "numeric_unit_conversion_celsius_to_fahrenheit",
    "EnumToNumeric": "numeric_enum_to_numeric_default",
    "TimeDifference": "numeric_time_difference_ms",
    "ValueMap": "ranges_enums_value_map",
    "EnumFilterTransformation": "ranges_enums_filter_transformation",
    "FilterWithinRanges": "numeric_filter_transformation",
    "AbsoluteTimestamp": "numeric_absolute_timestamp_of_enum",
    "SinceTime": "since_time",
    "FilterByTag": "numeric_tag_filter_not_in_and",
    "SelectTags": "numeric_select_tags_every_vehicle_as_one_bucketed",
    "ZScore": "numeric_grouped_z_score_within_4s",
    "ToStartOfInterval": "ranges_enums_to_start_of_interval_then_aggregate_max",
    "EnumAggregateDuplicates": "ranges_enums_to_start_of_interval_then_aggregate_max",
    "Contains": "contains",
    "SelectNumericIndex": "array_index_derivative",
    "ExtractNumber": "struct_number",
}


def _find(node: Node | OutputNode, kind: str) -> Node | None:
    if type(node).__name__ == kind:
        return node  # type: ignore[return-value]
    children = [node.input] if isinstance(node, OutputNode) else list(node.children())
    return next((found for c in children if (found := _find(c, kind)) is not None), None)


@pytest.mark.parametrize("kind", sorted(INCREMENTAL_CASES))
def test_an_incremental_kind_is_not_evaluated_whole_by_a_live_batch(kind: str) -> None:
    """10 s of a, b and e every 10 ms back-filled, then micro-batches of 50 ms each: the kind's
    output is re-evaluated from the new points on (`evaluate_since`), never whole (`evaluate`)."""
    computation = _computation(CASES[INCREMENTAL_CASES[kind]])
    node = _find(computation.plan.root, kind)
    assert node is not None, f"{INCREMENTAL_CASES[kind]} holds no {kind}"
    step = 10 * MS

    def rows(first: int, count: int, seq: int) -> dict[int, Rows]:
        ts = BASE + (first + np.arange(count, dtype=np.int64)) * step
        seqs = np.arange(seq, seq + count)
        states = np.array([STATES[i % len(STATES)] for i in range(first, first + count)], dtype=object)
        return {
            1: Rows(seqs, ts, np.sin(np.arange(first, first + count) / 7) * 3),
            2: Rows(seqs, ts, np.cos(np.arange(first, first + count) / 5) * 3),
            3: Rows(seqs, ts, states),
            4: Rows(seqs, ts, np.sin(np.arange(first, first + count) / 3)),  # g, vehicle v1
            5: Rows(seqs, ts + 3 * MS, np.cos(np.arange(first, first + count) / 11)),  # g, vehicle v2
            6: Rows(
                seqs,
                ts,
                np.array([LOG_LINES[i % len(LOG_LINES)] for i in range(first, first + count)], dtype=object),
            ),
            **{
                sid: Rows(
                    seqs,
                    ts,
                    np.array([texts[i % len(texts)] for i in range(first, first + count)], dtype=object),
                )
                for sid, texts in ((7, ARRAYS), (8, STRUCTS))
            },
        }

    computation.backfill_seq = 1000
    computation.load_backfill(rows(0, 1000, 1), BASE + 1000 * step)
    cls = type(node)
    whole, part = cls.evaluate, cls.evaluate_since
    calls: list[str] = []

    def counted_whole(self: Any, env: Any) -> Any:
        calls.append("whole")
        return whole(self, env)

    def counted_part(self: Any, env: Any, since: int) -> Any:
        calls.append("since")
        return part(self, env, since)

    cls.evaluate, cls.evaluate_since = counted_whole, counted_part  # type: ignore[method-assign]
    try:
        for i in range(3):
            first = 1000 + 5 * i
            computation.apply_batch(rows(first, 5, 10_000 + first), BASE + (first + 5) * step)
    finally:
        cls.evaluate, cls.evaluate_since = whole, part  # type: ignore[method-assign]
    assert calls and "whole" not in calls, f"{kind}: {calls}"
