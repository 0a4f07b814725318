"""Long windows read fast and exactly (docs/decisions/0032-merged-history-blocks.md): small blocks the
stream has passed are merged, and a back-fill over merged blocks gives the same points, cut at the
same seq and timestamp, as over the blocks as written; a bucketed computation back-filled from them
sends byte-identical FullResults and appends, while its window slides, to one fed the raw points."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from app.protocol import frames
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.evaluation.summarize import numeric_buckets
from compute.evaluation.window import SeriesWindow
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesKey, SeriesKind
from compute.storage.sqlite import blocks
from compute.storage.sqlite.connection import connect_reader
from compute.storage.sqlite.writer import Compaction, DurableLog

NS = 1_000_000_000
MS = 1_000_000
RID = "ri.merge"
X = SeriesKey.of(RID, "x", {})
Y = SeriesKey.of(RID, "y", {})
E = SeriesKey.of(RID, "e", {})
BASE = 1_800_000_000 * NS


Written = dict[SeriesKey, list[tuple[int, int, float | str]]]  # key -> (seq, ts, value) in write order


def _write(log: DurableLog, requests: list[list[SeriesWrite]]) -> Written:
    """Write each request; what was written, each point with its block's seq."""
    written: Written = {}
    reader = connect_reader(log.path)
    try:
        for request in requests:
            log.submit(request).result()
            newest = blocks.max_seq(reader)
            # the request's blocks are its last len(request) seqs, in order (one writer, one request)
            for offset, w in enumerate(request):
                seq = newest - len(request) + 1 + offset
                written.setdefault(w.key, []).extend(
                    (seq, int(t), v)
                    for t, v in zip(np.asarray(w.ts).tolist(), np.asarray(w.values).tolist(), strict=True)
                )
    finally:
        reader.close()
    return written


def _history(rng: np.random.Generator) -> list[list[SeriesWrite]]:
    """Small requests of two numeric series (a NaN, late points into old buckets, rewrites of a
    timestamp, a big block among small ones) and an enum series."""
    requests: list[list[SeriesWrite]] = []
    t = BASE
    for i in range(400):
        n = int(rng.integers(1, 12))
        ts = t + np.arange(n, dtype=np.int64) * 7 * MS
        t = int(ts[-1]) + 7 * MS
        xs = rng.standard_normal(n) * 1e3
        if i == 50:
            xs[0] = np.nan
        request = [SeriesWrite(X, SeriesKind.NUMERIC, ts, xs)]
        if i % 3 == 0:
            late = ts - int(rng.integers(1, 60)) * NS  # into a bucket long closed
            request.append(SeriesWrite(Y, SeriesKind.NUMERIC, np.sort(late), rng.standard_normal(n)))
        if i % 40 == 7:  # the same timestamps again: the later write wins
            request.append(SeriesWrite(X, SeriesKind.NUMERIC, ts[:2], np.array([1.25, -0.5])[: len(ts[:2])]))
        if i == 200:  # one big block: stays as written, and ends a run of small ones
            big = t + np.arange(1500, dtype=np.int64) * MS
            t = int(big[-1]) + MS
            request.append(SeriesWrite(X, SeriesKind.NUMERIC, big, rng.standard_normal(1500)))
        if i % 5 == 0:
            request.append(SeriesWrite(E, SeriesKind.ENUM, ts[:1], [f"s{i % 3}"]))
        requests.append(request)
    return requests


def _expected(written: Written, key: SeriesKey, from_ts: int, upto: int) -> list[tuple[int, int, object]]:
    return [(s, t, v) for s, t, v in written.get(key, []) if t >= from_ts and s <= upto]


def _as_list(cols: blocks.SeriesColumns) -> list[tuple[int, int, object]]:
    return list(zip(cols.seq.tolist(), cols.ts.tolist(), cols.values.tolist(), strict=True))


def _same(got: list[tuple[int, int, object]], want: list[tuple[int, int, object]]) -> bool:
    """Equal, NaN included (repr compares NaN as NaN)."""
    return repr(got) == repr(want)


@pytest.fixture
def log(tmp_path: Path) -> DurableLog:
    durable = DurableLog(tmp_path / "log.db")
    durable.compaction = Compaction(min_blocks=1, step_blocks=97, small_block=64, merged_points=150)
    return durable


def test_merged_blocks_read_back_the_same_points_at_every_cut(log: DurableLog) -> None:
    written = _write(log, _history(np.random.default_rng(5)))
    ids = {info.key: info.id for info in log.series()}
    reader = connect_reader(log.path)
    end = blocks.max_seq(reader)
    every_ts = sorted(t for points in written.values() for _, t, _ in points)
    cuts = [
        (from_ts, upto)
        for from_ts in (every_ts[0], every_ts[len(every_ts) // 3] + 1, every_ts[-5])
        for upto in (end, end // 2, end // 2 + 1, 7)
    ]

    def check() -> None:
        for from_ts, upto in cuts:
            for spare in (None, _half):
                got = blocks.read_series_columns(reader, list(ids.values()), from_ts, upto, spare)
                for key, sid in ids.items():
                    want = _expected(written, key, from_ts, upto)
                    assert _same(_as_list(got[sid]) if sid in got else [], want), (key, from_ts, upto)

    check()  # as written
    mark = end * 2 // 3  # merge only what "the stream" passed: blocks after the mark stay as written
    log.compact_upto = lambda: mark
    merged = 0
    while step := log.compact().result():
        merged += step
    assert merged > 0
    assert blocks.read_seq_range(reader, mark, end)  # the stream's range past the mark is untouched
    rows_after = reader.execute("SELECT count(*) FROM blocks WHERE seq > ?", (mark,)).fetchone()[0]
    assert rows_after == end - mark
    check()  # merged: the same points, seqs and cuts
    log.compact_upto = lambda: end
    while log.compact().result():
        pass
    check()
    sizes = [n for (n,) in reader.execute("SELECT n FROM blocks WHERE first_seq IS NOT NULL")]
    assert sizes and max(sizes) <= 150
    reader.close()
    log.close()


def _half(points: int) -> int:
    return points // 2 + 1


def test_series_written_in_order_are_read_into_buffers_a_window_takes_over(log: DurableLog) -> None:
    """Asked for room, a read hands each numeric series' columns in buffers of their own with that
    room after them, which a window takes over whole; the points are the plain read's at every cut,
    as written and merged, and an enum series' come as before."""
    rng = np.random.default_rng(3)
    requests, t = [], BASE
    for i in range(120):
        ts = t + np.arange(10, dtype=np.int64) * MS
        t = int(ts[-1]) + MS
        request = [SeriesWrite(key, SeriesKind.NUMERIC, ts, rng.standard_normal(10)) for key in (X, Y)]
        if i % 4 == 0:
            request.append(SeriesWrite(E, SeriesKind.ENUM, ts[:2], [f"s{i % 3}", "t"]))
        requests.append(request)
    written = _write(log, requests)
    ids = {info.key: info.id for info in log.series()}
    reader = connect_reader(log.path)
    end = blocks.max_seq(reader)

    def check() -> None:
        for from_ts in (BASE, BASE + 333 * MS):  # the second starts inside a block
            for upto in (end, end - 4):
                plain = blocks.read_series_columns(reader, list(ids.values()), from_ts, upto)
                roomy = blocks.read_series_columns(reader, list(ids.values()), from_ts, upto, _half)
                for key, sid in ids.items():
                    want = _expected(written, key, from_ts, upto)
                    assert _same(_as_list(plain[sid]), want) and _same(_as_list(roomy[sid]), want)
                    cols = roomy[sid]
                    if key == E:
                        assert cols.buffers is None
                        continue
                    assert cols.buffers is not None, (key, from_ts, upto)
                    assert len(cols.buffers[0]) >= len(cols.ts) + _half(len(cols.ts))
                    assert SeriesWindow(np.float64).adopt(cols.ts, cols.values, *cols.buffers)

    check()
    log.compact_upto = lambda: end
    while log.compact().result():
        pass
    assert reader.execute("SELECT count(*) FROM blocks WHERE first_seq IS NOT NULL").fetchone()[0] > 0
    check()
    reader.close()


def test_a_log_written_before_merged_blocks_opens_and_reads(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE series (id INTEGER PRIMARY KEY, data_source_rid TEXT NOT NULL, channel TEXT NOT NULL,
            tags TEXT NOT NULL, kind TEXT NOT NULL, UNIQUE (data_source_rid, channel, tags));
        CREATE TABLE blocks (seq INTEGER PRIMARY KEY, series_id INTEGER NOT NULL, n INTEGER NOT NULL,
            max_ts INTEGER NOT NULL, ts BLOB NOT NULL, value BLOB, str TEXT);
        INSERT INTO series VALUES (1, 'ri.merge', 'x', '{}', 'double');
        """
    )
    for k in range(5):
        ts = np.arange(k * 3, k * 3 + 3, dtype="<i8")
        conn.execute(
            "INSERT INTO blocks (series_id, n, max_ts, ts, value) VALUES (1, 3, ?, ?, ?)",
            (int(ts[-1]), ts.tobytes(), (ts * 0.5).astype("<f8").tobytes()),
        )
    conn.commit()
    conn.close()
    log = DurableLog(path)
    log.compaction = Compaction(min_blocks=1, step_blocks=100, small_block=64, merged_points=100)
    reader = connect_reader(path)
    want = [(k // 3 + 1, k, k * 0.5) for k in range(1, 15)]
    assert _as_list(blocks.read_series_columns(reader, [1], 1, 5)[1]) == want
    log.compact_upto = lambda: 5
    assert log.compact().result() == 4  # five blocks become one (a min_ts of NULL is computed)
    assert _as_list(blocks.read_series_columns(reader, [1], 1, 5)[1]) == want
    assert _as_list(blocks.read_series_columns(reader, [1], 4, 3)[1]) == want[3:8]
    reader.close()
    log.close()


def test_a_merge_step_rewrites_at_most_its_points_bound(tmp_path: Path) -> None:
    """A step stops once the small blocks it examined hold `step_points` points, however few blocks
    that is (a fast feed writes blocks of hundreds of points): the writer is held for a bounded
    rewrite, the next step goes on from there, and the points read back the same."""
    log = DurableLog(tmp_path / "log.db")
    log.compaction = Compaction(
        min_blocks=1, step_blocks=1000, step_points=200, small_block=64, merged_points=1000
    )
    requests = [
        [
            SeriesWrite(
                X, SeriesKind.NUMERIC, BASE + np.arange(i * 50, (i + 1) * 50, dtype=np.int64), np.arange(50.0)
            )
        ]
        for i in range(12)
    ]
    written = _write(log, requests)
    reader = connect_reader(log.path)
    end = blocks.max_seq(reader)
    log.compact_upto = lambda: end
    steps = []
    while step := log.compact().result():
        steps.append(step)
    assert steps == [3, 3, 3]  # 4 blocks of 50 reach 200 points: each step merges them into one
    rows = reader.execute("SELECT n FROM blocks ORDER BY seq").fetchall()
    assert [n for (n,) in rows] == [200, 200, 200]
    want = _expected(written, X, BASE, end)
    assert _same(_as_list(blocks.read_series_columns(reader, [1], BASE, end)[1]), want)
    reader.close()
    log.close()


# -- bucketed computations: byte-identical to the raw points ---------------------------------------------
def _reference_buckets(ts: np.ndarray, values: np.ndarray, width: int) -> list[np.ndarray]:
    """numeric_buckets as it was: every timestamp divided by the width."""
    ids = ts // width
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    counts = np.diff(np.r_[starts, len(ids)])
    sums = np.add.reduceat(values, starts)
    mean = sums / counts
    dev = values - np.repeat(mean, counts)
    last = starts + counts - 1
    return [
        (ids[starts] + 1) * width,
        np.minimum.reduceat(values, starts),
        np.maximum.reduceat(values, starts),
        mean,
        counts,
        np.add.reduceat(dev * dev, starts) / counts,
        ts[starts],
        values[starts],
        ts[last],
        values[last],
    ]


@pytest.mark.parametrize("seed", range(6))
def test_bucketing_a_long_window_is_bit_identical_to_dividing_every_timestamp(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4_000, 40_000))
    # whole milliseconds (points on bucket edges, repeated timestamps) or any nanosecond
    gaps = rng.integers(0, 3, n) * MS if seed % 2 else rng.integers(0, 3 * MS, n)
    ts = np.cumsum(gaps).astype(np.int64) + int(rng.integers(-(10**12), 10**12)) * MS
    values = rng.standard_normal(n) * 10.0 ** float(rng.integers(-3, 150))
    values[rng.integers(0, n, 5)] = np.nan
    width = int(rng.integers(1, 50)) * MS
    got = numeric_buckets(ts, values, width)
    want = _reference_buckets(ts, values, width)
    names = [
        "end",
        "min",
        "max",
        "mean",
        "count",
        "variance",
        "first_ts",
        "first_value",
        "last_ts",
        "last_value",
    ]
    for name, expected in zip(names, want, strict=True):
        column = getattr(got, name)
        assert column.dtype == expected.dtype or column.dtype.kind == expected.dtype.kind, name
        assert column.tobytes() == expected.astype(column.dtype).tobytes(), name


def _bucketed(window_ns: int, buckets: int) -> Computation:
    node = {
        "type": "series",
        "series": {
            "input": {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": "x"}}},
            "buckets": buckets,
        },
    }
    lit = {"type": "literal"}
    context = {
        "x": {
            "type": "channel",
            "channel": {
                "type": "dataSource",
                "dataSource": {
                    "dataSourceRid": {**lit, "literal": RID},
                    "channel": {**lit, "literal": "x"},
                    "tags": {},
                    "tagsToGroupBy": [],
                    "groupByTags": [],
                },
            },
        }
    }
    plan = compile_plan(node, window_ns, context, Limits(), ResultOptions())
    return Computation("merge", plan, allowed_lateness_ns=window_ns)


def test_a_bucketed_back_fill_from_merged_blocks_sends_what_the_raw_points_give(log: DurableLog) -> None:
    """The FullResult of a computation back-filled from merged blocks (the engine's read) is byte for
    byte that of one fed the raw points written; so is every update while the window slides past
    a bucket's start and late points (and a NaN) land in old buckets."""
    rng = np.random.default_rng(11)
    written = _write(log, _history(rng))
    ids = {info.key: info.id for info in log.series()}
    end = blocks.max_seq(connect_reader(log.path))
    log.compact_upto = lambda: end
    while log.compact().result():
        pass
    window = 9 * NS
    newest = max(t for _, t, _ in written[X])
    now = newest + 137 * MS  # the window's start cuts a bucket (widths are whole milliseconds)
    merged, raw = _bucketed(window, 200), _bucketed(window, 200)
    from compute.storage.series import SeriesInfo

    for c in (merged, raw):
        c.route(SeriesInfo(ids[X], X, SeriesKind.NUMERIC))
        c.backfill_seq = end
    from_ts = now - window
    reader = connect_reader(log.path)
    cols = blocks.read_series_columns(reader, [ids[X]], from_ts, end)[ids[X]]
    reader.close()
    merged.load_backfill({ids[X]: Rows(cols.seq, cols.ts, cols.values)}, now)
    points = [(s, t, v) for s, t, v in written[X] if t >= from_ts]
    raw.load_backfill(
        {
            ids[X]: Rows(
                np.array([p[0] for p in points], np.int64),
                np.array([p[1] for p in points], np.int64),
                np.array([p[2] for p in points], np.float64),
            )
        },
        now,
    )
    full = frames.full_update(merged.snapshot(None), False)
    assert full == frames.full_update(raw.snapshot(None), False)
    assert b"bucketed" in full.lower() or b"buckets" in full
    seq = end
    for step in range(40):
        now += int(rng.integers(50, 700)) * MS  # the window slides; buckets leave it
        n = int(rng.integers(1, 6))
        ts = np.sort(now - rng.integers(0, 8 * NS, n)).astype(np.int64)  # late into old buckets too
        values = rng.standard_normal(n)
        if step == 13:
            values[0] = np.nan
        seq += 1
        rows = {ids[X]: Rows(np.full(n, seq, np.int64), ts, values)}
        a, b = merged.apply_batch(rows, now), raw.apply_batch(rows, now)
        assert a == b
        assert frames.full_update(merged.snapshot(None), False) == frames.full_update(
            raw.snapshot(None), False
        )
        if a is not None:
            assert frames.append_update(
                merged.snapshot(a.start), False, a.start, a.end
            ) == frames.append_update(raw.snapshot(a.start), False, a.start, a.end)
    log.close()


def test_only_blocks_the_stream_has_passed_are_merged(tmp_path: Path) -> None:
    """The embedded log lets its writer merge what its stream will never read again: blocks up to
    where the stream started, then up to its committed offset; nothing before a stream exists."""
    from compute.storage.sqlite.point_log import EmbeddedLog, store_committed

    durable = DurableLog(tmp_path / "log.db")
    durable.compaction = Compaction(min_blocks=1, step_blocks=1000, small_block=64, merged_points=1000)
    embedded = EmbeddedLog(durable, "test")

    def write(k: int) -> None:
        for i in range(k):
            ts = np.array([i * 10, i * 10 + 1], np.int64) + blocks.max_seq(embedded._conn) * 100
            durable.submit([SeriesWrite(X, SeriesKind.NUMERIC, ts, np.array([1.0, 2.0]))]).result()

    write(10)
    assert durable.compact().result() == 0  # no stream yet: nothing is known to be passed
    start = int(embedded.stream_options()["start_seq"])
    write(10)
    assert durable.compact().result() == 9  # the ten blocks before the stream's start become one
    reader = connect_reader(durable.path)
    stream_part = blocks.read_from(reader, start, 10_000)[0]
    assert sum(b.num_rows for b in stream_part) == 10  # what the stream reads next is untouched
    store_committed(durable.path, "test", start + 5)
    assert durable.compact().result() == 4
    assert sum(b.num_rows for b in blocks.read_from(reader, start + 5, 10_000)[0]) == 5
    reader.close()
    embedded.close()
