"""Live evaluation touches only what new points can change (nodes/base.py's contract), and stays
exact: for every node kind in the registry, a computation fed points in random orders (late points
and overwrites included) while its window slides past its history sends frames whose merged view
equals a fresh computation's FullResult, and its FullResult is the fresh one's byte for byte.

No Spark and no server: the engine's own Computation, frames from app.frames, merged by the test's
client view. The cases below must name every registered node kind
(`test_every_registered_node_kind_has_an_exactness_case`), so a new kind without one fails here."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from app.protocol import frames
from compute.evaluation.compiler import Limits, ResultOptions, compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.evaluation.nodes import Node, OutputNode
from compute.evaluation.nodes.base import node_kinds
from compute.evaluation.nodes.outputs import SummarizeRanges
from compute.evaluation.results import EnumBuckets, NumericBuckets
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests import node_json as n
from tests.client_view import ResultView, clip_ranges, first_difference
from tests.server.test_compute_property import STATES, variables

NANOS = 1_000_000_000
MS = 1_000_000
WINDOW_NS = 4 * NANOS  # short: the window slides past most of what is written
RID = "ri.incremental"
SERIES = {
    ("a", ()): 1,
    ("b", ()): 2,
    ("e", ()): 3,
    ("g", (("vehicle", "v1"),)): 4,
    ("g", (("vehicle", "v2"),)): 5,
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

GRID = st.integers(-4, 4).map(lambda i: i / 2)


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
    ):
        count = draw(st.integers(0, 60))
        gaps = draw(st.lists(st.sampled_from([7, 50, 200, 400, 1300, 2600]), min_size=count, max_size=count))
        t, stamps = 0, []
        for gap in gaps:
            t += gap * MS + draw(st.integers(0, 3))
            stamps.append(t)
        values = [draw(st.sampled_from(STATES)) if channel == "e" else draw(GRID) for _ in stamps]
        points = list(zip(stamps, values, strict=True))
        if points and draw(st.booleans()):  # a later write of an existing timestamp wins
            t0, _ = draw(st.sampled_from(points))
            points.append((t0, draw(st.sampled_from(STATES)) if channel == "e" else draw(GRID)))
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
    plan = compile_plan(node, WINDOW_NS, variables(RID), Limits(), ResultOptions())
    computation = Computation("exact", plan, allowed_lateness_ns=1000 * NANOS)  # none dropped
    for (channel, tags), sid in SERIES.items():
        kind = SeriesKind.ENUM if channel == "e" else SeriesKind.NUMERIC
        computation.route(SeriesInfo(sid, SeriesKey.of(RID, channel, dict(tags)), kind))
    return computation


def _rows(request: Any, seq: int) -> tuple[int, Rows]:
    channel, tags, points = request
    ts = np.array([BASE + t for t, _ in points], np.int64)
    values = np.array([v for _, v in points], dtype=object if channel == "e" else np.float64)
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
        elif kind.startswith("bucketed") and width is not None:
            value = [(end, bucket) for end, bucket in value if end - width >= cutoff]
        out[key] = (kind, value)
    return out


def _bucket_width(computation: Computation) -> int | None:
    buckets = (o for o in computation.outputs.values() if isinstance(o, NumericBuckets | EnumBuckets))
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
        covered |= _kinds(compile_plan(node, WINDOW_NS, variables(RID), Limits(), ResultOptions()).root)
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
    whole = Derivative.evaluate
    calls: list[int] = []

    def counted(self: Any, env: Any) -> Any:
        calls.append(1)
        return whole(self, env)

    Derivative.evaluate = counted  # type: ignore[method-assign]
    try:
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
    finally:
        Derivative.evaluate = whole  # type: ignore[method-assign]
