"""An edge's mirror of a computation stays identical to it: random node trees fed random arrival
orders (late points, overwrites, a window sliding past old points and buckets), each change sent as
`deltas.diff` through msgpack bytes and applied to the previous copy, must give the same outputs
as the computation itself, and the same FullResult bytes (app/protocol/frames.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.protocol import frames
from compute.evaluation import deltas
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.evaluation.results import EnumBuckets, NumericBuckets, NumericPoints, RangesSummary
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests.server.test_compute_property import computable, variables, writes
from tests.unit.test_compute_units import BASE, RID, SERIES

WINDOW_NS = 20 * 1_000_000_000  # short: the points of `writes` span about a minute
STEP_NS = 2 * 1_000_000_000  # the clock per micro-batch, so the window slides past old points


def _round_trip(payload: list[Any]) -> list[Any]:
    """What the edge receives: the payload through msgpack bytes."""
    return deltas.decode(deltas.encode({"p": payload}))["p"]  # type: ignore[no-any-return]


def _same(a: deltas.Outputs, b: deltas.Outputs, grouped: bool) -> bool:
    return a.keys() == b.keys() and frames.full_update(a, grouped) == frames.full_update(b, grouped)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=computable, requests=writes(), before_share=st.floats(0, 1))
def test_a_mirror_fed_deltas_equals_the_computation(
    node: dict[str, Any], requests: list[Any], before_share: float
) -> None:
    plan = compile_plan(node, WINDOW_NS, variables(RID), Limits(), ResultOptions())
    computation = Computation("unit", plan, allowed_lateness_ns=WINDOW_NS)
    for (channel, tags), sid in SERIES.items():
        kind = SeriesKind.ENUM if channel == "e" else SeriesKind.NUMERIC
        computation.route(SeriesInfo(sid, SeriesKey.of(RID, channel, dict(tags)), kind))
    seq = 0

    def rows_of(request: Any) -> dict[int, Rows]:
        nonlocal seq
        channel, tags, points = request
        seqs = np.arange(seq + 1, seq + 1 + len(points))
        seq += len(points)
        ts = np.array([BASE + t for t, _ in points], np.int64)
        values = np.array([v for _, v in points], dtype=object if channel == "e" else np.float64)
        return {SERIES[(channel, tuple(sorted(tags.items())))]: Rows(seqs, ts, values)}

    before = int(len(requests) * before_share)
    now = BASE + WINDOW_NS
    history: dict[int, list[Rows]] = {}
    for request in requests[:before]:
        for sid, r in rows_of(request).items():
            history.setdefault(sid, []).append(r)
    computation.backfill_seq = seq
    computation.load_backfill(
        {
            sid: Rows(*(np.concatenate([getattr(r, f) for r in rs]) for f in ("seq", "ts", "values")))
            for sid, rs in history.items()
        },
        now,
    )
    published = computation.snapshot(None)
    mirror = deltas.apply({}, _round_trip(deltas.whole(published)))
    assert _same(mirror, published, plan.grouped)
    for request in requests[before:]:
        now += STEP_NS
        if computation.apply_batch(rows_of(request), now) is None:
            continue
        current = computation.snapshot(None)
        mirror = deltas.apply(mirror, _round_trip(deltas.diff(published, current)))
        published = current
        assert _same(mirror, current, plan.grouped), "the mirror drifted from the computation"


def test_a_delta_carries_only_the_rows_past_what_the_copy_already_holds() -> None:
    ts = np.arange(100, dtype=np.int64) * 10
    old = {(): NumericPoints(ts, np.arange(100, dtype=np.float64))}
    # the window moved past 5 points, 2 points were appended, the last old value was rewritten
    new_ts = np.r_[ts[5:], 1000, 1010]
    new_values = np.r_[np.arange(5, 99, dtype=np.float64), -1.0, 7.0, 8.0]
    new = {(): NumericPoints(new_ts, new_values)}
    [[_, part]] = deltas.diff(old, new)
    assert (part["drop"], part["keep"]) == (5, 94)
    assert len(part["rows"]["ts"]["data"]) == 3 * 8  # three rows of int64, not a hundred
    applied = deltas.apply(old, _round_trip(deltas.diff(old, new)))[()]
    assert isinstance(applied, NumericPoints)
    assert applied.ts.tolist() == new_ts.tolist() and applied.values.tolist() == new_values.tolist()


def test_nan_and_negative_zero_are_changes_only_when_their_bits_change() -> None:
    ts = np.arange(3, dtype=np.int64)
    old = {(): NumericPoints(ts, np.array([np.nan, 0.0, 1.0]))}
    same = {(): NumericPoints(ts.copy(), np.array([np.nan, 0.0, 1.0]))}
    signed = {(): NumericPoints(ts.copy(), np.array([np.nan, -0.0, 1.0]))}
    assert deltas.diff(old, same)[0][1]["keep"] == 3
    assert deltas.diff(old, signed)[0][1]["keep"] == 1
    applied = deltas.apply(old, _round_trip(deltas.diff(old, signed)))[()]
    assert isinstance(applied, NumericPoints) and np.signbit(applied.values[1])


def test_outputs_without_rows_travel_whole() -> None:
    old = {(("vehicle", "v1"),): RangesSummary(np.array([0]), np.array([5]), np.array([2]))}
    new = {(("vehicle", "v1"),): RangesSummary(np.array([0, 9]), np.array([5, 12]), np.array([2, 1]))}
    [[group, part]] = _round_trip(deltas.diff(old, new))
    assert group == [["vehicle", "v1"]] and "rows" not in part
    applied = deltas.apply(old, [[group, part]])[(("vehicle", "v1"),)]
    assert isinstance(applied, RangesSummary) and applied.counts.tolist() == [2, 1]


def test_enum_bucket_histograms_survive_the_trip() -> None:
    def buckets(n: int) -> EnumBuckets:
        ends = np.arange(1, n + 1, dtype=np.int64) * 10
        col = np.zeros(n, np.int64)
        return EnumBuckets(10, ends, [{0: i, 1: 2} for i in range(n)], col, col.astype(np.int32),
                           col, col.astype(np.int32), col + 2, ["idle", "run"])  # fmt: skip

    old, new = {(): buckets(3)}, {(): buckets(5)}
    applied = deltas.apply(old, _round_trip(deltas.diff(old, new)))[()]
    assert isinstance(applied, EnumBuckets)
    assert applied.histograms == [{0: i, 1: 2} for i in range(5)] and applied.categories == ["idle", "run"]


def test_numeric_aggregations_columns_survive_the_trip() -> None:
    """SummarizeSeries.numericAggregations' extra bucket columns reach an edge's mirror whole."""

    def buckets(n: int, shift: float) -> NumericBuckets:
        ends = np.arange(1, n + 1, dtype=np.int64) * 10
        f, i = np.arange(n, dtype=np.float64) + shift, np.arange(n, dtype=np.int64)
        extra = {"p90": f * 2, "total": f + 0.5}
        return NumericBuckets(10, ends, f, f, f, i + 1, f, i, f, i, f, aggregations=extra)

    old, new = {(): buckets(3, 0.0)}, {(): buckets(5, 0.25)}
    for before in (old, {}):
        applied = deltas.apply(before, _round_trip(deltas.diff(before, new)))[()]
        assert isinstance(applied, NumericBuckets)
        assert set(applied.aggregations) == {"p90", "total"}
        for name, column in new[()].aggregations.items():
            assert np.array_equal(applied.aggregations[name], column), name
        assert frames.full_update({(): applied}, False) == frames.full_update(new, False)
