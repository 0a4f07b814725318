"""Unit tests of pre-aggregation's pieces (no Spark): the bucket maths against numpy and
compute/summarize.py, the store's fallbacks against a fake log, and the log's range read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from compute.bucketed import LogPoints, SeriesBuckets
from compute.buckets import Buckets, BucketStore, combine, from_points, rebucket, to_numeric
from compute.log import DurableLog, SeriesWrite, connect_reader, read_series_range
from compute.preaggregate import AggRows
from compute.results import NumericBuckets
from compute.series import SeriesKey, SeriesKind
from compute.summarize import numeric_buckets

MS = 1_000_000


def assert_same(a: Buckets, b: Buckets, width: int) -> None:
    x, y = to_numeric(a, width), to_numeric(b, width)
    np.testing.assert_array_equal(x.end, y.end)
    np.testing.assert_array_equal(x.count, y.count)
    for name in ("min", "max", "first_value", "last_value"):
        np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)
    for name in ("first_ts", "last_ts"):
        np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)
    np.testing.assert_allclose(x.mean, y.mean, rtol=1e-9, atol=0)
    np.testing.assert_allclose(x.variance, y.variance, rtol=1e-9, atol=1e-12)


def as_buckets(out: NumericBuckets, width: int) -> Buckets:
    """A NumericBuckets output as the store's Buckets (index, count, mean, M2, ...), to compare."""
    return Buckets(
        out.end // width - 1,
        out.count,
        out.mean,
        out.variance * out.count,
        out.min,
        out.max,
        out.first_ts,
        out.first_value,
        out.last_ts,
        out.last_value,
    )


def numpy_buckets(ts: np.ndarray, values: np.ndarray, width: int) -> Buckets:
    """Straight numpy, bucket by bucket: the judge."""
    keys = np.unique(ts // width)
    rows = []
    for k in keys:
        m = ts // width == k
        t, v = ts[m], values[m]
        rows.append((k, len(v), v.mean(), v.var() * len(v), v.min(), v.max(), t[0], v[0], t[-1], v[-1]))
    cols = list(zip(*rows, strict=True))
    ints = {0, 1, 6, 8}
    return Buckets(*(np.array(c, np.int64 if i in ints else np.float64) for i, c in enumerate(cols)))


def points(rng: np.random.Generator, n: int, span_ms: int = 10_000) -> tuple[np.ndarray, np.ndarray]:
    ts = np.unique(rng.integers(0, span_ms * MS, n)) + 1_763_769_600 * 10**9
    return ts, rng.normal(50, 10, len(ts))


@pytest.mark.parametrize("seed", range(5))
def test_from_points_matches_numpy_and_summarize(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ts, values = points(rng, 5000)
    width = 7 * MS
    b = from_points(ts, values, width)
    assert_same(b, numpy_buckets(ts, values, width), width)
    nb = numeric_buckets(ts, values, width)
    np.testing.assert_array_equal(to_numeric(b, width).end, nb.end)
    np.testing.assert_allclose(to_numeric(b, width).variance, nb.variance, rtol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_combining_random_parts_is_exact(seed: int) -> None:
    """Points split at random into parts (disjoint timestamps), each bucketed, then combined."""
    rng = np.random.default_rng(seed)
    ts, values = points(rng, 5000)
    width = 10 * MS
    part = rng.integers(0, 4, len(ts))
    parts = [from_points(ts[part == i], values[part == i], width) for i in range(4)]
    assert_same(combine(Buckets.concat(parts)), numpy_buckets(ts, values, width), width)


@pytest.mark.parametrize("seed", range(5))
def test_rebucket_fine_to_coarse(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ts, values = points(rng, 8000)
    fine, coarse = 2 * MS, 12 * MS
    assert_same(
        rebucket(from_points(ts, values, fine), fine, coarse), numpy_buckets(ts, values, coarse), coarse
    )


def test_combine_single_rows_unchanged() -> None:
    ts = np.array([1, 2, 3], np.int64) * MS
    b = from_points(ts, np.array([0.1, 0.2, 0.3]), MS)
    c = combine(b)
    np.testing.assert_array_equal(c.mean, b.mean)
    np.testing.assert_array_equal(c.m2, b.m2)


def test_store_merge_replace_trim() -> None:
    rng = np.random.default_rng(7)
    ts, values = points(rng, 3000)
    width = 20 * MS
    store = BucketStore(width)
    half = len(ts) // 2
    store.merge(from_points(ts[:half], values[:half], width))
    store.merge(from_points(ts[half:], values[half:], width))
    assert_same(store.buckets, numpy_buckets(ts, values, width), width)
    # replacing the buckets of some keys with values recomputed from changed points
    values2 = values.copy()
    values2[100:200] += 5
    keys = np.unique(ts[100:200] // width)
    fresh = from_points(ts, values2, width)
    store.replace(fresh.take(np.isin(fresh.key, keys)), keys)
    assert_same(store.buckets, numpy_buckets(ts, values2, width), width)
    store.trim_before(int(keys[-1]))
    assert store.buckets.key[0] == keys[-1]


def test_nan_and_infinity_like_numpy() -> None:
    ts = np.arange(10, dtype=np.int64) * MS
    values = np.array([1.0, np.nan, 3, 4, np.inf, 6, 7, -np.inf, 9, 10])
    width = 5 * MS
    with np.errstate(invalid="ignore"):  # inf - inf in the deviations, as numpy itself gives
        nb = numeric_buckets(ts, values, width)
        b = to_numeric(from_points(ts, values, width), width)
    for name in ("min", "max", "mean", "variance"):
        np.testing.assert_array_equal(getattr(b, name), getattr(nb, name))


class FakeLog:
    """Every write as (seq, pos, ts, value); reads like compute/log.py's read_series_range."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, float]] = []
        self.seq = 0
        self.reads = 0

    def write(self, ts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.seq += 1
        self.rows += [
            (self.seq, i, int(t), float(v)) for i, (t, v) in enumerate(zip(ts, values, strict=True))
        ]
        return np.full(len(ts), self.seq, np.int64), np.arange(len(ts), dtype=np.int64)

    def read(self, sid: int, from_ts: int, to_ts: int, after: int, upto: int) -> pa.Table:
        self.reads += 1
        rows = [r for r in self.rows if from_ts <= r[2] < to_ts and after < r[0] <= upto]
        cols = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
        return pa.table(
            {
                "seq": pa.array(cols[0], pa.int64()),
                "pos": pa.array(cols[1], pa.int64()),
                "ts": pa.array(cols[2], pa.int64()),
                "value": pa.array(cols[3], pa.float64()),
            }
        )

    def truth(self) -> tuple[np.ndarray, np.ndarray]:
        last: dict[int, float] = {}
        for _, _, t, v in self.rows:
            last[t] = v
        ts = np.array(sorted(last), np.int64)
        return ts, np.array([last[t] for t in ts.tolist()])


def agg_rows(ts: np.ndarray, values: np.ndarray, seq: int, width: int) -> AggRows:
    """What Spark's pre-aggregation gives for one block of points (duplicates counted)."""
    order = np.argsort(ts, kind="stable")
    t, v = ts[order], values[order]
    keys = np.unique(t // width)
    parts = []
    distinct = []
    for k in keys:
        m = t // width == k
        tt, vv = t[m], v[m]
        uniq = np.r_[tt[1:] != tt[:-1], True]
        part = from_points(tt[uniq], vv[uniq], width)
        part.count = np.array([len(tt)], np.int64)  # Spark counts every row
        parts.append(part)
        distinct.append(int(uniq.sum()))
    b = Buckets.concat(parts)
    n = len(b)
    return AggRows(
        width,
        b,
        np.full(n, seq, np.int64),
        np.full(n, seq, np.int64),
        np.array(distinct),
        np.zeros(n, np.int64),
    )


def test_series_buckets_exact_under_rewrites_duplicates_and_late_points() -> None:
    """Random blocks (in order, late, rewriting timestamps, duplicates inside a block) fed as
    pre-aggregated rows or raw points: the buckets always equal bucketing the latest points."""
    rng = np.random.default_rng(3)
    log = FakeLog()
    lp = LogPoints(log.read)
    fine, width = 2 * MS, 10 * MS
    sb = SeriesBuckets(width)
    base = 1_763_769_600 * 10**9
    clock = base
    for step in range(200):
        clock += 10 * MS
        n = int(rng.integers(1, 40))
        ts = clock - rng.integers(0, 10 * MS, n)
        if step % 7 == 3:  # late points reaching back
            ts -= 50 * MS
        if step % 11 == 5 and log.rows:  # rewrite timestamps already written
            ts[: n // 2] = rng.choice([r[2] for r in log.rows], n // 2)
        if step % 13 == 1:  # a timestamp twice in one block
            ts[-1] = ts[0]
        values = rng.normal(0, 1, n)
        seq, _ = log.write(ts, values)
        if step % 2:
            sb.add_aggregates(1, agg_rows(ts, values, int(seq[0]), fine), int(seq[0]), lp)
        else:
            sb.add_points(1, ts, values, int(seq[0]), lp)
        window_start = clock - 300 * MS
        got = sb.window(1, window_start, log.seq, lp)
        t, v = log.truth()
        keep = t >= window_start
        assert_same(got, numpy_buckets(t[keep], v[keep], width), width)
    assert sb.recomputed > 0


def test_refused_points_are_left_out_of_log_reads() -> None:
    log = FakeLog()
    lp = LogPoints(log.read)
    ts = np.array([10, 20, 30], np.int64) * MS
    seq, pos = log.write(ts, np.array([1.0, 2.0, 3.0]))
    lp.refuse(1, seq[1:2], pos[1:2], ts[1:2])
    t, v = lp.points(1, 0, 100 * MS, log.seq)
    np.testing.assert_array_equal(t, ts[[0, 2]])
    np.testing.assert_array_equal(v, [1.0, 3.0])


def test_sqlite_range_read(tmp_path: Path) -> None:
    durable = DurableLog(tmp_path / "log.db")
    key = SeriesKey.of("ds", "x", {})
    try:
        durable.submit([SeriesWrite(key, SeriesKind.NUMERIC, [5, 1, 9], [0.5, 0.1, 0.9])]).result()
        durable.submit([SeriesWrite(key, SeriesKind.NUMERIC, [20, 3], [2.0, 0.3])]).result()
        conn = connect_reader(durable.path)
        t = read_series_range(conn, 1, 2, 10, 0, 10)
        assert t.column("ts").to_pylist() == [5, 9, 3]
        assert t.column("pos").to_pylist() == [0, 2, 1]
        assert t.column("seq").to_pylist() == [1, 1, 2]
        assert read_series_range(conn, 1, 2, 10, 1, 10).column("ts").to_pylist() == [3]
        assert read_series_range(conn, 1, 10, 30, 0, 1).column("ts").to_pylist() == []
        assert read_series_range(conn, 1, 21, 30, 0, 10).num_rows == 0
    finally:
        durable.close()


def batch_agg(seq: np.ndarray, ts: np.ndarray, values: np.ndarray, width: int) -> AggRows:
    """What the Spark plan gives for one series' rows of a batch (several blocks)."""
    keys = ts // width
    rows = []
    for k in np.unique(keys):
        m = keys == k
        t, v, s = ts[m], values[m], seq[m]
        o = np.argsort(t, kind="stable")
        t, v = t[o], v[o]
        uniq = np.r_[t[1:] != t[:-1], True]
        b = from_points(t[uniq], v[uniq], width)
        b.count = np.array([len(t)], np.int64)
        rows.append((b, int(s.min()), int(s.max()), int(uniq.sum())))
    bs = Buckets.concat([r[0] for r in rows])
    ints = [np.array([r[i] for r in rows], np.int64) for i in (1, 2, 3)]
    return AggRows(width, bs, ints[0], ints[1], ints[2], np.zeros(len(rows), np.int64))


@pytest.mark.parametrize("seed", range(4))
def test_computation_over_random_batches_equals_bucketing_the_points(tmp_path: Path, seed: int) -> None:
    """A computation fed random batches (raw or pre-aggregated, blocks in order, late, rewriting,
    duplicated) from a real SQLite log always gives what bucketing its accepted points gives."""
    from compute.compiler import Limits, ResultOptions, compile_plan
    from compute.computation import Computation, Rows
    from compute.embedded_log import EmbeddedLog
    from tests import node_json as nj

    rng = np.random.default_rng(seed)
    durable = DurableLog(tmp_path / "log.db")
    log = EmbeddedLog(durable, "t")
    key = SeriesKey.of("ds", "x", {})
    window = 2 * 10**9
    plan = compile_plan(
        nj.series(nj.num("v"), buckets=20), window, {"v": nj.channel("ds", "x")}, Limits(), ResultOptions()
    )
    width = plan.root.decimation.bucket_width  # type: ignore[attr-defined]
    c = Computation("k", plan, allowed_lateness_ns=window)
    c.enable_preaggregation(log.read_series_range, 1)
    now = 1_763_769_600 * 10**9
    written: dict[int, float] = {}
    blocks: list[tuple[int, np.ndarray, np.ndarray]] = []

    def write(ts: np.ndarray) -> None:
        values = np.round(rng.normal(0, 10, len(ts)), 2)
        durable.submit([SeriesWrite(key, SeriesKind.NUMERIC, ts.tolist(), values.tolist())]).result()
        blocks.append((log.end_offset(), ts, values))
        for t, v in zip(ts.tolist(), values.tolist(), strict=True):
            written[t] = v

    try:
        newest = now - window
        while newest < now:  # history
            ts = newest + np.arange(1, 101, dtype=np.int64) * MS
            write(ts)
            newest = int(ts[-1])
        for info in log.series():
            c.route(info)
        c.backfill_seq = log.end_offset()
        sid = log.series()[0].id
        seq = np.concatenate([np.full(len(b[1]), b[0]) for b in blocks])
        hist = Rows(seq, np.concatenate([b[1] for b in blocks]), np.concatenate([b[2] for b in blocks]))
        c.load_backfill({sid: batch_agg(hist.seq, hist.ts, hist.values, width // 5)}, now)
        assert c.bucketed
        for step in range(60):
            blocks.clear()
            for _ in range(int(rng.integers(1, 4))):
                n = int(rng.integers(1, 150))
                ts = newest + np.sort(rng.integers(1, 100, n)) * MS
                kind = rng.integers(0, 5)
                if kind == 0:  # late points, new timestamps
                    ts = ts - 700 * MS + 1
                elif kind == 1:  # rewrites of written timestamps
                    ts = rng.choice(np.array(sorted(written)[-3000:]), n)
                elif kind == 2 and n > 1:  # a timestamp twice in one block
                    ts[-1] = ts[0]
                write(ts)
                newest = max(newest, int(ts.max()))
            now = max(now + 50 * MS, newest)
            seq = np.concatenate([np.full(len(b[1]), b[0]) for b in blocks])
            ts_all = np.concatenate([b[1] for b in blocks])
            values_all = np.concatenate([b[2] for b in blocks])
            if step % 3:
                rows = batch_agg(seq, ts_all, values_all, width // int(rng.choice([1, 2, 5])))
                c.apply_batch({sid: rows}, now)
            else:
                c.apply_batch({sid: Rows(seq, ts_all, values_all)}, now)
            t = np.array(sorted(written), np.int64)
            v = np.array([written[x] for x in t.tolist()])
            keep = t >= now - window
            expected = numeric_buckets(t[keep], v[keep], width)
            got = c.outputs[()]
            assert got.kind == "bucketedNumeric", step
            assert_same(as_buckets(got, width), as_buckets(expected, width), width)
        assert c.aggregated_points > 0
    finally:
        durable.close()


def test_rows_a_computation_cannot_take_as_buckets_are_read_raw(tmp_path: Path) -> None:
    """Pre-aggregated rows reaching a computation they were not meant for (a bucket width they do
    not nest in, or a node that needs points) are replaced by the log's points: same results."""
    from compute.compiler import Limits, ResultOptions, compile_plan
    from compute.computation import Computation, Rows
    from compute.embedded_log import EmbeddedLog
    from tests import node_json as nj

    durable = DurableLog(tmp_path / "log.db")
    log = EmbeddedLog(durable, "t")
    key = SeriesKey.of("ds", "x", {})
    window = 2 * 10**9
    ctx = {"v": nj.channel("ds", "x")}
    summary = compile_plan(nj.series(nj.num("v"), buckets=20), window, ctx, Limits(), ResultOptions())
    last = compile_plan(nj.value("lastPoint", nj.num("v")), window, ctx, Limits(), ResultOptions())
    now = 1_763_769_600 * 10**9
    try:
        ts = now - window + np.arange(1, 3001, dtype=np.int64) * MS // 2
        values = np.sin(np.arange(len(ts)) / 7)
        durable.submit(
            [SeriesWrite(key, SeriesKind.NUMERIC, ts[:2000].tolist(), values[:2000].tolist())]
        ).result()
        mark = log.end_offset()
        durable.submit(
            [SeriesWrite(key, SeriesKind.NUMERIC, ts[2000:].tolist(), values[2000:].tolist())]
        ).result()
        sid = log.series()[0].id
        outputs = []
        for plan, agg_width in ((summary, 30 * MS), (last, 10 * MS)):
            c = Computation(f"k{agg_width}", plan, allowed_lateness_ns=window)
            c.enable_preaggregation(log.read_series_range, 1)
            for info in log.series():
                c.route(info)
            c.backfill_seq = mark
            c.load_backfill({sid: Rows(np.full(2000, mark, np.int64), ts[:2000], values[:2000])}, now)
            assert c.bucketed == (plan is summary)  # the summary holds buckets from here on
            seq = np.full(1000, log.end_offset(), np.int64)
            c.apply_batch({sid: batch_agg(seq, ts[2000:], values[2000:], agg_width)}, now)
            outputs.append(c.outputs[()])
        assert c.aggregated_points == 0  # neither took them as buckets
        expected = numeric_buckets(ts, values, 100 * MS)
        got = outputs[0]
        assert got.kind == "bucketedNumeric"
        for name in ("end", "count", "min", "max", "first_ts", "last_ts", "first_value", "last_value"):
            np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))
        np.testing.assert_allclose(got.mean, expected.mean, rtol=1e-12)
        np.testing.assert_allclose(got.variance, expected.variance, rtol=1e-9, atol=1e-15)
        assert outputs[1].ts == int(ts[-1]) and outputs[1].value == values[-1]
    finally:
        durable.close()
