"""The followed series' bookkeeping (compute/spark/followed_series.py), driven as the engine drives it:
a back-fill read seeds a series with the stream rows recorded since it was expected, re-delivered rows
are kept once, a series leaving the stream's filter is dropped, trimming keeps each series from its
oldest window start, and the budget drops the largest."""

from __future__ import annotations

import threading

import numpy as np

from compute.evaluation.computation import Rows
from compute.spark.followed_series import FollowedSeries


def rows(seqs: list[int], ts: list[int] | None = None) -> Rows:
    stamps = ts if ts is not None else [s * 10 for s in seqs]
    return Rows(np.array(seqs, np.int64), np.array(stamps, np.int64), np.array(seqs, np.float64))


def seqs(held: tuple[dict[int, Rows], dict[int, int]] | None, sid: int) -> list[int]:
    assert held is not None
    batch, _ = held
    return batch[sid].seq.tolist() if sid in batch else []


def followed(sid: int = 7, read: list[int] | None = None, mark: int = 5, from_ts: int = 0) -> FollowedSeries:
    f = FollowedSeries(budget_points=1_000)
    f.expect([sid])
    f.marked([sid], mark)
    f.seeded_by([sid], {sid: rows(read or [1, 2, 3])}, from_ts, mark)
    return f


def test_a_seeded_series_serves_the_read_then_the_stream_rows_above_its_mark() -> None:
    f = FollowedSeries(budget_points=1_000)
    assert f.serve([7], 0) is None  # not followed
    f.expect([7])
    f.record({7: rows([4, 6, 7])})  # the stream runs ahead of the read: 4 is in the read, 6 and 7 are not
    f.marked([7], 5)
    assert f.serve([7], 0) is None  # pending until its read is in
    f.seeded_by([7], {7: rows([1, 3, 4])}, 0, 5)
    f.record({7: rows([7, 8])})  # 7 again: a micro-batch re-delivered after a failure
    held = f.serve([7], 0)
    assert seqs(held, 7) == [1, 3, 4, 6, 7, 8]
    assert held is not None and held[1] == {7: 8}


def test_a_read_through_a_mark_older_than_the_recording_does_not_seed() -> None:
    """A read whose mark was taken before the series was expected may end before the recording began."""
    f = FollowedSeries(budget_points=1_000)
    f.expect([7])
    f.marked([7], 50)
    f.seeded_by([7], {7: rows([1])}, 0, 40)
    assert f.serve([7], 0) is None
    f.seeded_by([7], {7: rows([1, 45])}, 0, 50)
    assert seqs(f.serve([7], 0), 7) == [1, 45]


def test_a_window_older_than_what_is_held_is_not_served() -> None:
    f = followed(from_ts=100, read=[11, 12])
    assert f.serve([7], 99) is None
    assert seqs(f.serve([7], 115), 7) == [12]  # ts 120 only
    assert f.serve([7, 8], 100) is None  # one of its series is not followed


def test_a_series_leaving_the_filter_is_dropped_and_a_serve_waits_for_the_refresh() -> None:
    f = followed()
    f.begin_refresh()
    got: list[object] = []
    waiting = threading.Thread(target=lambda: got.append(f.serve([7], 0)))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive()  # no serve while the filter is rebuilt
    f.end_refresh([8])  # 7 left the filter: the stream no longer brings its rows
    waiting.join(5)
    assert got == [None]
    f.end_refresh(None)


def test_a_failed_read_stops_the_recording() -> None:
    f = FollowedSeries(budget_points=1_000)
    f.expect([7])
    f.record({7: rows([1, 2])})
    f.abandon([7])
    f.marked([7], 0)
    f.seeded_by([7], {7: rows([1])}, 0, 0)
    assert f.serve([7], 0) is None
    assert f.held_points() == 0


def two_series(budget: int) -> FollowedSeries:
    f = FollowedSeries(budget_points=budget)
    for sid in (1, 2):
        f.expect([sid])
        f.marked([sid], 0)
        f.seeded_by([sid], {}, 0, 0)
    for batch in range(10):
        f.record({1: rows([batch * 2 + 1, batch * 2 + 2]), 2: rows([batch + 1])})
    assert f.held_points() == 30
    return f


def test_trimming_keeps_each_series_from_its_oldest_window_start() -> None:
    f = two_series(budget=1_000)
    f.trim({1: 150, 2: 0})  # series 1 is read from ts 150 (seq 15) on
    assert seqs(f.serve([1], 150), 1) == list(range(15, 21))
    assert f.serve([1], 149) is None  # it no longer promises older points
    assert f.held_points() == 10 + 6  # what was older went
    f.trim({2: 0})  # series 1 is read by no computation any more
    assert f.serve([1], 150) is None
    assert seqs(f.serve([2], 0), 2) == list(range(1, 11))


def test_over_the_budget_the_largest_series_goes() -> None:
    f = two_series(budget=25)
    f.trim({1: 0, 2: 0})
    assert f.serve([1], 0) is None
    assert seqs(f.serve([2], 0), 2) == list(range(1, 11))


def test_over_the_budget_no_new_series_is_recorded() -> None:
    f = FollowedSeries(budget_points=2)
    f.expect([1])
    f.marked([1], 0)
    f.seeded_by([1], {1: rows([1, 2, 3])}, 0, 0)
    f.expect([2])
    f.marked([2], 3)
    f.seeded_by([2], {2: rows([1])}, 0, 3)
    assert f.serve([2], 0) is None
