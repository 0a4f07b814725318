"""One micro-batch's rows of a series are handed, as the same `Rows` object, to every computation
reading that series (compute/evaluation/routing.py); what they ask of the rows first (seq and time
bounds, order) is computed once (`RowFacts`). Each computation must still judge the rows by its own
state: its back-fill mark, the newest point it has seen, its allowed lateness."""

from __future__ import annotations

import numpy as np
import pytest

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests.wire import NANOS, channel_variable

pytestmark = pytest.mark.unit

RID = "ri.sparkwire.main.dataset.shared-rows"
SID = 7
MS = 1_000_000
NOW = 1_800_000_000 * NANOS


def computation(key: str, allowed_lateness_ns: int | None = None, backfill_seq: int = 0) -> Computation:
    node = {
        "type": "series",
        "series": {"input": {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": "x"}}}},
    }
    plan = compile_plan(node, 60 * NANOS, {"x": channel_variable(RID, "x")}, Limits(), ResultOptions())
    c = Computation(key, plan, allowed_lateness_ns)
    c.route(SeriesInfo(SID, SeriesKey.of(RID, "x", {}), SeriesKind.NUMERIC))
    c.backfill_seq = backfill_seq
    c.load_backfill({}, NOW - 20 * NANOS)
    return c


def rows(seq0: int, ts: list[int]) -> Rows:
    return Rows(
        np.arange(seq0, seq0 + len(ts)), NOW + np.asarray(ts, np.int64), np.arange(len(ts), dtype=float)
    )


def held(c: Computation) -> list[int]:
    out = c.snapshot(None)[()]
    return [int(t - NOW) for t in out.ts]  # type: ignore[union-attr]


@pytest.mark.parametrize("ahead_first", [True, False])
def test_shared_rows_are_judged_late_by_each_computation_s_own_newest_point(ahead_first: bool) -> None:
    ahead, fresh = computation("ahead"), computation("fresh")
    ahead.apply_batch({SID: rows(1, [-1000 * MS])}, NOW)  # ahead has seen -1 s; fresh nothing
    shared = rows(2, [-5000 * MS, -4990 * MS, -4980 * MS])  # in order, 4 s behind ahead's newest
    for c in (ahead, fresh) if ahead_first else (fresh, ahead):
        c.apply_batch({SID: shared}, NOW)
    assert ahead.late_dropped == 3 and held(ahead) == [-1000 * MS]
    assert fresh.late_dropped == 0 and held(fresh) == [-5000 * MS, -4990 * MS, -4980 * MS]


def test_shared_rows_out_of_order_keep_the_per_point_lateness_rule() -> None:
    """A batch whose points go back in time: each point is judged against the newest one written
    before it (Nominal's 100 ms default), whoever looked at the rows first."""
    first, second = computation("first"), computation("second", allowed_lateness_ns=10 * NANOS)
    shared = rows(1, [-3000 * MS, -2000 * MS, -2050 * MS, -2500 * MS, -1000 * MS])
    first.apply_batch({SID: shared}, NOW)
    second.apply_batch({SID: shared}, NOW)
    assert first.late_dropped == 1  # -2.5 s is 500 ms behind -2 s; -2.05 s only 50 ms
    assert held(first) == [-3000 * MS, -2050 * MS, -2000 * MS, -1000 * MS]
    assert second.late_dropped == 0  # within 10 s of the clock: all of them
    assert held(second) == [-3000 * MS, -2500 * MS, -2050 * MS, -2000 * MS, -1000 * MS]


def test_shared_rows_are_cut_at_each_computation_s_own_back_fill_mark() -> None:
    early, late = computation("early", backfill_seq=0), computation("late", backfill_seq=11)
    shared = rows(10, [-300 * MS, -200 * MS, -100 * MS])  # seqs 10, 11, 12
    late.apply_batch({SID: shared}, NOW)
    early.apply_batch({SID: shared}, NOW)
    assert held(early) == [-300 * MS, -200 * MS, -100 * MS]
    assert held(late) == [-100 * MS]  # seqs up to 11 are its back-fill's
    assert late.applied_seq == early.applied_seq == 12


def test_allowed_lateness_refuses_rows_older_than_the_clock_allows_for_one_reader_only() -> None:
    strict, default = computation("strict", allowed_lateness_ns=1 * NANOS), computation("default")
    shared = rows(1, [-1500 * MS, -500 * MS])
    strict.apply_batch({SID: shared}, NOW)
    default.apply_batch({SID: shared}, NOW)
    assert strict.late_dropped == 1 and held(strict) == [-500 * MS]
    assert default.late_dropped == 0 and held(default) == [-1500 * MS, -500 * MS]


def test_per_series_marks_cut_each_series_at_its_own_and_a_series_routed_later_at_none() -> None:
    """A back-fill served from the series a process follows (compute/spark/followed_series.py) is
    whole through a different seq per series: each series' stream rows are cut at its own mark, and
    a series routed after that back-fill had nothing in it, so none of its rows are cut."""
    c = computation("marks", backfill_seq=20)
    for sid in (8, 9):
        c.route(SeriesInfo(sid, SeriesKey.of(RID, "x", {"n": str(sid)}), SeriesKind.NUMERIC))
    c.backfill_marks = {SID: 20, 8: 5}  # 9 came after the back-fill
    c.apply_batch(
        {SID: rows(20, [-300 * MS, -290 * MS]), 8: rows(5, [-280 * MS, -270 * MS]), 9: rows(1, [-260 * MS])},
        NOW,
    )
    assert held(c) == [-290 * MS, -270 * MS, -260 * MS]
