"""The pieces without Spark: a live Computation fed rows in random arrival orders, its frames
encoded by app.protocol.frames and merged by the client view, must equal the reference evaluator; and the
outputs' first_change/since contract on its own. Fast, so hypothesis can try many trees here; the
same trees run against a real server in test_compute_property.py."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.protocol import frames
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.evaluation.nodes.align import forward_fill
from compute.evaluation.results import (
    OPEN_END,
    PROVENANCE,
    NumericBuckets,
    NumericPoints,
    Ranges,
    same_memory,
)
from compute.evaluation.summarize import BucketMemo, numeric_buckets
from compute.evaluation.window import SeriesWindow
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests.client_view import ResultView, clip_ranges, first_difference, merge_ranges
from tests.reference import Store, evaluate
from tests.server.test_compute_property import REL, WINDOW_NS, computable, variables, writes

RID = "ri.unit"
SERIES = {
    ("a", ()): 1,
    ("b", ()): 2,
    ("e", ()): 3,
    ("g", (("vehicle", "v1"),)): 4,
    ("g", (("vehicle", "v2"),)): 5,
}
BASE = 1_800_000_000 * 1_000_000_000


def _update(raw: bytes) -> dict[str, Any]:
    return dict(json.loads(raw))


def run_live(node: dict[str, Any], requests: list[Any], before: int) -> tuple[ResultView, Store, int]:
    """Feed a computation like the engine does (back-fill, then one micro-batch per request) and
    apply its frames like a client; returns the view, what was written, and the clock."""
    context = variables(RID)
    plan = compile_plan(node, WINDOW_NS, context, Limits(), ResultOptions())
    computation = Computation("unit", plan, allowed_lateness_ns=WINDOW_NS)
    for (channel, tags), sid in SERIES.items():
        kind = SeriesKind.ENUM if channel == "e" else SeriesKind.NUMERIC
        computation.route(SeriesInfo(sid, SeriesKey.of(RID, channel, dict(tags)), kind))
    store = Store()
    seq = 0
    now = BASE + 300 * 1_000_000_000

    def rows_of(request: Any) -> dict[int, Rows]:
        nonlocal seq
        channel, tags, points = request
        store.write(RID, channel, [(BASE + t, v) for t, v in points], tags)
        seqs = np.arange(seq + 1, seq + 1 + len(points))
        seq += len(points)
        ts = np.array([BASE + t for t, _ in points], np.int64)
        values = np.array([v for _, v in points], dtype=object if channel == "e" else np.float64)
        return {SERIES[(channel, tuple(sorted(tags.items())))]: Rows(seqs, ts, values)}

    history: dict[int, list[Rows]] = {}
    for request in requests[:before]:
        for sid, r in rows_of(request).items():
            history.setdefault(sid, []).append(r)
    computation.backfill_seq = seq
    merged_history = {
        sid: Rows(*(np.concatenate([getattr(r, f) for r in rs]) for f in ("seq", "ts", "values")))
        for sid, rs in history.items()
    }
    computation.load_backfill(merged_history, now)
    view = ResultView(WINDOW_NS)
    view.apply(_update(frames.full_update(computation.snapshot(None), plan.grouped)))
    for request in requests[before:]:
        now += 1_000_000
        change = computation.apply_batch(rows_of(request), now)
        if change is None:
            continue
        if change.full:
            view.apply(_update(frames.full_update(computation.snapshot(None), plan.grouped)))
        else:
            snap = computation.snapshot(change.start)
            view.apply(_update(frames.append_update(snap, plan.grouped, change.start, change.end)))
    return view, store, now


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(node=computable, requests=writes(), before_share=st.floats(0, 1))
def test_live_computation_merged_by_a_client_equals_the_reference(
    node: dict[str, Any], requests: list[Any], before_share: float
) -> None:
    view, store, now = run_live(node, requests, int(len(requests) * before_share))
    cutoff = now - WINDOW_NS
    expected = evaluate(node, variables(RID), store, WINDOW_NS, cutoff)
    diff = first_difference(clip_ranges(view.snapshot(), cutoff), expected, REL)
    assert diff is None, diff


# -- the first_change / since contract --------------------------------------------------------
stamps = st.lists(st.integers(0, 60), unique=True, max_size=12).map(sorted)


@given(old_ts=stamps, new_ts=stamps, seed=st.integers(0, 3))
def test_numeric_append_from_first_change_turns_old_into_new(
    old_ts: list[int], new_ts: list[int], seed: int
) -> None:
    old = NumericPoints(np.array(old_ts, np.int64), np.array([float(t % 3) for t in old_ts]))
    new = NumericPoints(np.array(new_ts, np.int64), np.array([float((t + seed) % 3) for t in new_ts]))
    start = new.first_change(old)
    if start is None:
        assert old_ts == new_ts and list(old.values) == list(new.values)
        return
    end = max([60, *new_ts])
    # the client's merge: points in [start, end] replaced by the append
    merged = {t: v for t, v in zip(old_ts, old.values.tolist(), strict=True) if not start <= t <= end}
    part = new.since(start)
    merged.update(zip(part.ts.tolist(), part.values.tolist(), strict=True))
    assert sorted(merged.items()) == list(zip(new_ts, new.values.tolist(), strict=True))
    # and nothing before `start` differs: the append is as small as it can be
    assert [(t, v) for t, v in zip(old_ts, old.values, strict=True) if t < start] == [
        (t, v) for t, v in zip(new_ts, new.values, strict=True) if t < start
    ]


def _ranges(bounds: list[int], open_end: bool) -> Ranges:
    starts, ends = bounds[0::2], bounds[1::2]
    if open_end and len(starts) > len(ends):
        ends = [*ends, OPEN_END]
    starts = starts[: len(ends)]
    return Ranges(np.array(starts, np.int64), np.array(ends, np.int64))


@given(a=stamps, b=stamps, open_a=st.booleans(), open_b=st.booleans())
def test_range_append_from_first_change_turns_old_into_new(
    a: list[int], b: list[int], open_a: bool, open_b: bool
) -> None:
    old, new = _ranges(a, open_a), _ranges(b, open_b)
    start = new.first_change(old)

    def as_list(r: Ranges) -> list[tuple[float, float]]:
        return [
            (s, float("inf") if e == OPEN_END else e)
            for s, e in zip(r.starts.tolist(), r.ends.tolist(), strict=True)
        ]

    if start is None:
        assert as_list(old) == as_list(new)
        return
    kept = [(s, min(e, start)) for s, e in as_list(old) if s < start]
    assert merge_ranges(kept + as_list(new.since(start))) == as_list(new)


@given(
    gaps=st.lists(st.integers(1, 400), min_size=1, max_size=300),
    width=st.integers(1, 2000),
    cut=st.integers(0, 100),
    offset=st.floats(-1e6, 1e6),
)
def test_rolling_values_depend_only_on_their_own_window(
    gaps: list[int], width: int, cut: int, offset: float
) -> None:
    """Each rolling value equals a plain computation over its window, and dropping history older
    than a window changes no bit of the later values (small appends; fresh == live exactly)."""
    from compute.evaluation.nodes.rolling import OPERATORS, rolling

    ts = np.cumsum(np.array(gaps, np.int64))
    rng = np.random.default_rng(len(gaps))
    values = offset + rng.normal(0, 10, len(ts))
    cut = min(cut, len(ts) - 1)
    keep_from = int(np.searchsorted(ts, ts[cut] + width, side="left"))  # first point not needing the cut part
    for op in OPERATORS:
        full = rolling(op, values, ts, width)
        trimmed = rolling(op, values[cut:], ts[cut:], width)
        assert np.array_equal(full[keep_from:], trimmed[keep_from - cut :]), op
        for i in range(0, len(ts), max(1, len(ts) // 20)):
            window = values[(ts > ts[i] - width) & (ts <= ts[i])]
            plain = {
                "sum": window.sum(),
                "average": window.mean(),
                "min": window.min(),
                "max": window.max(),
                "count": len(window),
                "standardDeviation": window.std(),
                "rootMeanSquare": np.sqrt((window * window).mean()),
            }[op]
            scale = max(1.0, abs(offset)) * len(window)
            assert abs(full[i] - plain) <= 1e-9 * scale, (op, i, full[i], plain)


def test_grouped_frames_decode_with_the_same_result_type_in_every_group() -> None:
    """Decimation is decided across groups: one group over B points buckets every group."""
    node = {
        "type": "series",
        "series": {
            "input": {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": "g"}}},
            "buckets": 5,
        },
    }
    requests = [
        ("g", {"vehicle": "v1"}, [(i * 10**9, float(i)) for i in range(8)]),
        ("g", {"vehicle": "v2"}, [(0, 1.0)]),
    ]
    view, _, _ = run_live(node, requests, before=2)
    assert {k: kind for k, (kind, _) in view.snapshot().items()} == {
        (("vehicle", "v1"),): "bucketedNumeric",
        (("vehicle", "v2"),): "bucketedNumeric",
    }


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 300), unique=True, max_size=60),
    st.sampled_from([None, 0, 1, 5, 100]),
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 300), st.floats(-5, 5)), max_size=40),
            st.integers(0, 300),
        ),
        max_size=30,
    ),
)
def test_series_window_matches_a_plain_model_and_never_changes_what_it_returned(
    history: list[int], room: int | None, steps: list[tuple[list[tuple[int, float]], int]]
) -> None:
    """History (taken over in a buffer with `room` spare after it, or inserted when room is None),
    then batches of (ts, value) in write order, each followed by a trim: the window holds the last
    write of each timestamp >= the trim, sorted; columns returned earlier, the history's included,
    keep their contents."""
    window = SeriesWindow(np.float64)
    model = {t: float(t) / 7 for t in sorted(history)}
    ts, values = np.array(list(model), np.int64), np.array(list(model.values()))
    if room is None:
        window.insert(ts, values)
    else:
        ts_buffer, values_buffer = np.empty(len(ts) + room, np.int64), np.empty(len(ts) + room)
        ts_buffer[: len(ts)], values_buffer[: len(ts)] = ts, values
        assert window.adopt(ts_buffer[: len(ts)], values_buffer[: len(ts)], ts_buffer, values_buffer)
    earlier = [(window.ts, window.values, ts.tolist(), values.tolist())]
    for points, trim in steps:
        window.insert(np.array([t for t, _ in points], np.int64), np.array([v for _, v in points]))
        model.update(points)
        window.trim_before(trim)
        model = {t: v for t, v in model.items() if t >= trim}
        assert window.ts.tolist() == sorted(model)
        assert window.values.tolist() == [model[t] for t in sorted(model)]
        assert len(window) == len(model)
        earlier.append((window.ts, window.values, window.ts.tolist(), window.values.tolist()))
    for ts, values, ts_then, values_then in earlier:
        assert ts.tolist() == ts_then and values.tolist() == values_then


def test_a_batch_written_out_of_order_costs_its_own_points_not_the_windows() -> None:
    """Writers with several requests in flight commit them out of order: a batch newer than the
    window but unsorted is sorted on its own and appended in place (the window's memory is not
    copied), and one reaching back into the window copies the points before it unchanged."""
    window = SeriesWindow(np.float64)
    window.insert(np.arange(1000, dtype=np.int64) * 10, np.arange(1000, dtype=np.float64))
    held_ts, held_values = window.ts, window.values
    window.insert(np.array([10_030, 10_010, 10_020, 10_010], np.int64), np.array([3.0, 1.0, 2.0, -1.0]))
    assert window.ts[-3:].tolist() == [10_010, 10_020, 10_030]
    assert window.values[-3:].tolist() == [-1.0, 2.0, 3.0]  # the last write of 10_010 wins
    assert same_memory(window.ts[:1000], held_ts) and same_memory(window.values[:1000], held_values)

    window.insert(np.array([10_025, 9_995], np.int64), np.array([7.0, 8.0]))  # behind the newest
    assert window.ts[-6:].tolist() == [9_990, 9_995, 10_010, 10_020, 10_025, 10_030]
    assert window.values[-6:].tolist() == [999.0, 8.0, -1.0, 2.0, 7.0, 3.0]
    assert window.ts[:1000].tolist() == held_ts.tolist() and held_ts[-1] == 9_990  # old views kept


def test_a_window_takes_over_only_sorted_views_of_the_buffers_it_is_given_and_only_when_empty() -> None:
    ts_buffer, values_buffer = np.arange(10, dtype=np.int64) * 10, np.arange(10, dtype=np.float64)
    middle = SeriesWindow(np.float64)
    assert middle.adopt(ts_buffer[2:5], values_buffer[2:5], ts_buffer, values_buffer)
    assert middle.ts.tolist() == [20, 30, 40] and middle.values.tolist() == [2.0, 3.0, 4.0]
    middle.insert(np.array([45], np.int64), np.array([-1.0]))  # appended into the buffers' room
    assert ts_buffer[5] == 45 and values_buffer[5] == -1.0 and middle.ts.tolist() == [20, 30, 40, 45]

    ts_buffer, values_buffer = np.arange(10, dtype=np.int64) * 10, np.arange(10, dtype=np.float64)
    unsorted, duplicates = np.array([30, 10, 20], np.int64), np.array([5, 5, 6], np.int64)
    refused = {  # why -> (window's dtype, ts, values, ts's buffer); values are values_buffer's
        "not empty": (np.float64, ts_buffer[:3], values_buffer[:3], ts_buffer),
        "a copy": (np.float64, ts_buffer[:3].copy(), values_buffer[:3], ts_buffer),
        "columns offset apart": (np.float64, ts_buffer[:3], values_buffer[1:4], ts_buffer),
        "not sorted": (np.float64, unsorted, values_buffer[:3], unsorted),
        "equal timestamps": (np.float64, duplicates, values_buffer[:3], duplicates),
        "another dtype": (np.int32, ts_buffer[:3], values_buffer[:3], ts_buffer),
    }
    for why, (dtype, ts, values, tsb) in refused.items():
        window = SeriesWindow(dtype)
        if why == "not empty":
            window.insert(np.array([1], np.int64), np.array([1.0]))
        before = (window.ts.tolist(), window.values.tolist())
        assert not window.adopt(ts, values, tsb, values_buffer), why
        assert (window.ts.tolist(), window.values.tolist()) == before, why


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.tuples(st.integers(0, 400), st.sampled_from([0.5, -1.25, 3.0, 1e300, float("nan")])),
                max_size=40,
            ),
            st.integers(0, 400),
        ),
        max_size=30,
    ),
    st.sampled_from([1, 7, 25, 1000]),
)
def test_bucket_memo_gives_bit_identical_buckets_as_the_window_slides(
    steps: list[tuple[list[tuple[int, float]], int]], width: int
) -> None:
    """A window fed batches (late points and rewrites included) and trimmed after each: the memo's
    buckets equal re-bucketing the whole window, bit for bit (NaN in the same places)."""
    window = SeriesWindow(np.float64)
    memo = BucketMemo()
    previous: tuple[NumericBuckets, NumericBuckets] | None = None
    for points, trim in steps:
        window.insert(np.array([t for t, _ in points], np.int64), np.array([v for _, v in points]))
        window.trim_before(trim)
        with np.errstate(over="ignore", invalid="ignore"):  # 1e300 squared: inf in both
            got, expected = (
                memo.buckets("g", window.ts, window.values, width),
                numeric_buckets(window.ts, window.values, width),
            )
        for f in dataclasses.fields(NumericBuckets):
            if f.metadata == PROVENANCE:  # where the rows came from (the memo's), not what they hold
                continue
            a, b = getattr(got, f.name), getattr(expected, f.name)
            if isinstance(a, np.ndarray):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), f.name
            else:
                assert a == b
        # the diff that skips the buckets the memo says it reused finds the change a full read finds
        if previous is not None:
            assert got.first_change(previous[0]) == expected.first_change(previous[1])
        previous = got, expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 400), st.sampled_from([0.5, -1.25, 3.0, -0.0, 1e300, float("nan")])),
        max_size=60,
    ),
    st.sampled_from([1, 7, 25, 1000]),
)
def test_buckets_built_as_one_matrix_equal_each_column_by_its_definition(
    points: list[tuple[int, float]], width: int
) -> None:
    """numeric_buckets writes every column of float64 buckets into one int64 matrix (the bucket
    memo's layout): each equals, bit for bit, its own reduction over each bucket's points."""
    by_ts = dict(points)  # the last write of a timestamp, as a window holds it
    ts = np.array(sorted(by_ts), np.int64)
    values = np.array([by_ts[t] for t in ts.tolist()], np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # 1e300 squared: inf
        got = numeric_buckets(ts, values, width)
        if not len(ts):
            assert len(got) == 0
            return
        ids = ts // width
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        counts = np.diff(np.r_[starts, len(ts)]).astype(np.int64)
        last = starts + counts - 1
        mean = np.add.reduceat(values, starts) / counts
        deviation = values - np.repeat(mean, counts)
        expected = {
            "end": (ids[starts] + 1) * width,
            "min": np.minimum.reduceat(values, starts),
            "max": np.maximum.reduceat(values, starts),
            "mean": mean,
            "count": counts,
            "variance": np.add.reduceat(deviation * deviation, starts) / counts,
            "first_ts": ts[starts],
            "first_value": values[starts],
            "last_ts": ts[last],
            "last_value": values[last],
        }
    assert got.stacked is not None
    for name, column in expected.items():
        a = getattr(got, name)
        assert a.dtype == column.dtype and a.tobytes() == column.tobytes(), name
        assert np.shares_memory(a, got.stacked), name  # a row of the matrix, not a copy


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.tuples(st.integers(0, 400), st.sampled_from([0.5, -1.25, -0.0, float("nan")])), max_size=30
            ),
            st.integers(0, 400),
            st.integers(-10, 450),
        ),
        min_size=2,
        max_size=20,
    ),
    st.sampled_from([1, 7, 25]),
)
def test_a_diff_cut_by_index_equals_the_diff_of_the_cut_outputs(
    steps: list[tuple[list[tuple[int, float]], int, int]], width: int
) -> None:
    """first_change(old, since) (the live diff, computation._settled_change) finds what a full read
    of `since`'s cuts finds: for points that are views of one window (appended, overwritten,
    trimmed: the same-memory shortcut) against copies in other memory, and for the bucket memo's
    outputs (their known-same spans skipped) against buckets made afresh (read whole)."""
    window = SeriesWindow(np.float64)
    memo = BucketMemo()
    old: tuple[NumericPoints, NumericPoints, NumericBuckets, NumericBuckets] | None = None
    for points, trim, cut in steps:
        window.insert(np.array([t for t, _ in points], np.int64), np.array([v for _, v in points]))
        window.trim_before(trim)
        with np.errstate(invalid="ignore"):
            buckets = memo.buckets("g", window.ts, window.values, width)
            fresh = numeric_buckets(window.ts, window.values, width)
        view = NumericPoints(window.ts, window.values)
        copied = NumericPoints(window.ts.copy(), window.values.copy())
        if old is not None:
            expected = copied.since(cut).first_change(old[1].since(cut))
            assert view.first_change(old[0], since=cut) == expected
            assert copied.first_change(old[0], since=cut) == expected
            assert fresh.known_same is None
            expected = fresh.since(cut).first_change(old[3].since(cut))
            assert buckets.first_change(old[2], since=cut) == expected
        old = view, copied, buckets, fresh


def test_first_change_of_views_of_one_window_sees_only_what_was_appended() -> None:
    """Two views of the same window memory compare without reading it (results.same_memory); an
    append past them is still the change, and equal contents in other memory are no change."""
    window = SeriesWindow()
    window.insert(np.arange(10, dtype=np.int64), np.arange(10, dtype=np.float64))
    old = NumericPoints(window.ts, window.values)
    window.insert(np.array([10, 11], np.int64), np.array([5.0, 6.0]))
    new = NumericPoints(window.ts, window.values)
    assert new.first_change(old) == 10
    assert new.first_change(NumericPoints(new.ts.copy(), new.values.copy())) is None
    window.insert(np.array([3], np.int64), np.array([-1.0]))  # an overwrite: new arrays
    assert NumericPoints(window.ts, window.values).first_change(new) == 3


def test_first_change_sees_a_zero_changing_sign_and_not_the_same_nan() -> None:
    ts = np.arange(3, dtype=np.int64)
    old = NumericPoints(ts, np.array([1.0, 0.0, np.nan]))
    assert NumericPoints(ts, np.array([1.0, -0.0, np.nan])).first_change(old) == 1
    assert NumericPoints(ts.copy(), np.array([1.0, 0.0, np.nan])).first_change(old) is None


def _forward_fill_by_definition(
    series: list[NumericPoints], radius: int
) -> tuple[list[int], list[list[float]]]:
    stamps, columns = [], [[] for _ in series]
    for t in sorted({int(t) for s in series for t in s.ts}):
        picked = []
        for s in series:
            before = [i for i, u in enumerate(s.ts.tolist()) if u <= t and t - u <= radius]
            if not before:
                break
            picked.append(float(s.values[before[-1]]))
        else:
            stamps.append(t)
            for column, v in zip(columns, picked, strict=True):
                column.append(v)
    return stamps, columns


@given(
    st.lists(st.integers(0, 40), max_size=25, unique=True),
    st.lists(st.integers(0, 40), max_size=25, unique=True),
    st.booleans(),
)
def test_forward_fill_equals_its_definition_with_shared_and_own_timestamps(
    left: list[int], right: list[int], shared: bool
) -> None:
    if shared:  # channels sampled together take the shortcut
        right = left
    series = [
        NumericPoints(np.array(sorted(x), np.int64), np.arange(len(x), dtype=np.float64) + k)
        for k, x in enumerate((left, right))
    ]
    ts, (a, b) = forward_fill(series, radius_ns=5)
    stamps, (want_a, want_b) = _forward_fill_by_definition(series, 5)
    assert ts.tolist() == stamps
    assert a.tolist() == want_a and b.tolist() == want_b
