"""The durable log's block format: what goes in comes out point for point, in write order, for the
stream (by seq) and for back-fill (by series and time)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pyarrow as pa
import pytest

from compute.storage import records
from compute.storage.contract import SeriesWrite
from compute.storage.disk_space import Retention
from compute.storage.series import SeriesKey, SeriesKind
from compute.storage.sqlite import blocks, writer
from compute.storage.sqlite import spark_source as source
from compute.storage.sqlite.connection import connect_reader
from compute.storage.sqlite.point_log import EmbeddedLog
from compute.storage.sqlite.writer import DurableLog
from schemas.timestamps import NANOS_PER_SECOND as NANOS

A = SeriesKey.of("ri.a", "temp", {"v": "1"})
B = SeriesKey.of("ri.a", "mode", {})


def _points(batches: list[pa.RecordBatch]) -> list[tuple[int, int, int, float | None, str | None]]:
    rows = pa.Table.from_batches(batches, schema=records.POINT_SCHEMA).to_pylist()
    return [(r["seq"], r["series_id"], r["ts"], r["value"], r["str"]) for r in rows]


def _stream_points(batches: list[pa.RecordBatch]) -> list[tuple[int, int, int, float | None, str | None]]:
    """The stream's block rows, unpacked as the engine unpacks a micro-batch."""
    table = pa.Table.from_batches(batches, schema=records.BLOCK_SCHEMA)
    return _points(records.points_of_blocks(table).to_batches())


def test_points_come_back_exactly_in_write_order(tmp_path: Path) -> None:
    log = DurableLog(tmp_path / "log.db")
    first = [
        SeriesWrite(A, SeriesKind.NUMERIC, [30, 10, 20], [1.5, -2.0, 3.25]),
        SeriesWrite(B, SeriesKind.ENUM, [5, 6], ["on", "off"]),
    ]
    assert log.submit(first).result() == 5
    assert log.submit([SeriesWrite(A, SeriesKind.NUMERIC, [10, 40], [9.0, 1e300])]).result() == 2
    ids = {info.key: info.id for info in log.series()}
    reader = connect_reader(log.path)
    points = _points(blocks.read_seq_range(reader, 0, blocks.max_seq(reader)))
    assert [(sid, t, v, s) for _, sid, t, v, s in points] == [
        (ids[A], 30, 1.5, None),
        (ids[A], 10, -2.0, None),
        (ids[A], 20, 3.25, None),
        (ids[B], 5, None, "on"),
        (ids[B], 6, None, "off"),
        (ids[A], 10, 9.0, None),  # the later write of ts 10 comes later: it wins downstream
        (ids[A], 40, 1e300, None),
    ]
    seqs = [p[0] for p in points]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3  # one block per series per request
    assert _points(blocks.read_seq_range(reader, seqs[0], seqs[-1])) == points[3:]
    assert blocks.count_points(reader, 0, seqs[-1]) == 7
    assert blocks.count_points(reader, seqs[0], seqs[-1]) == 4
    log.close()


def test_back_fill_reads_one_series_from_a_time_even_inside_a_block(tmp_path: Path) -> None:
    log = DurableLog(tmp_path / "log.db")
    log.submit([SeriesWrite(A, SeriesKind.NUMERIC, [1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0])]).result()
    log.submit([SeriesWrite(B, SeriesKind.ENUM, [3], ["x"])]).result()
    log.submit([SeriesWrite(A, SeriesKind.NUMERIC, [5], [5.0])]).result()
    ids = {info.key: info.id for info in log.series()}
    reader = connect_reader(log.path)
    upto = blocks.max_seq(reader)
    got = _points(blocks.read_series_since(reader, [ids[A]], 3, upto))
    assert [(t, v) for _, _, t, v, _ in got] == [(3, 3.0), (4, 4.0), (5, 5.0)]
    got = _points(blocks.read_series_since(reader, [ids[A]], 0, upto - 1))  # up to a seq
    assert [t for _, _, t, _, _ in got] == [1, 2, 3, 4]
    log.close()


def test_the_stream_reader_hands_over_a_backlog_in_capped_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source, "MAX_POINTS_PER_BATCH", 3)
    log = DurableLog(tmp_path / "log.db")
    for k in range(7):  # one block of one point per request
        log.submit([SeriesWrite(A, SeriesKind.NUMERIC, [k], [float(k)])]).result()
    reader = source.LogStreamReader(str(log.path), 0)
    offset, steps = reader.initialOffset(), []
    while True:
        batches, end = reader.read(offset)
        if end == offset:
            assert list(batches) == []  # nothing new: no empty micro-batch either
            break
        steps.append([t for _, _, t, _, _ in _stream_points(list(batches))])
        offset = end
    assert steps == [[0, 1, 2], [3, 4, 5], [6]]
    again = _stream_points(list(reader.readBetweenOffsets({"seq": 2}, {"seq": 5})))
    assert [t for _, _, t, _, _ in again] == [2, 3, 4]  # a batch planned before a restart, read again


def test_the_streams_block_rows_unpack_to_the_points_written(tmp_path: Path) -> None:
    """The stream hands Spark one row per block (decision record 0017); unpacked, they are the
    points written, numeric (NaN and -0.0 included) and enum blocks interleaved or alone."""
    log = DurableLog(tmp_path / "log.db")
    log.submit([SeriesWrite(A, SeriesKind.NUMERIC, [3, 1], [float("nan"), -0.0])]).result()
    log.submit(
        [
            SeriesWrite(B, SeriesKind.ENUM, [2, 4, 4], ["on", "", "off"]),
            SeriesWrite(A, SeriesKind.NUMERIC, [5], [1e308]),
        ]
    ).result()
    log.submit([SeriesWrite(B, SeriesKind.ENUM, [7], ["x"])]).result()
    ids = {info.key: info.id for info in log.series()}
    a, b = ids[A], ids[B]
    by_seq = {  # seq -> the points of its block, in write order
        1: [(1, a, 3, float("nan"), None), (1, a, 1, -0.0, None)],
        2: [(2, b, 2, None, "on"), (2, b, 4, None, ""), (2, b, 4, None, "off")],
        3: [(3, a, 5, 1e308, None)],
        4: [(4, b, 7, None, "x")],
    }
    reader = connect_reader(log.path)
    assert blocks.max_seq(reader) == 4
    for after in range(4):
        for end in range(after + 1, 5):  # numeric only, enum only, and mixed
            read = blocks.read_block_range(reader, after, end)
            assert [b.schema for b in read] == [records.BLOCK_SCHEMA]
            expected = [p for seq in range(after + 1, end + 1) for p in by_seq[seq]]
            got = _stream_points(read)
            assert str(got) == str(expected)  # str: NaN equals NaN, and -0.0 stays -0.0
    assert _stream_points(blocks.read_block_range(reader, 4, 4)) == []
    log.close()


def test_the_drivers_history_read_is_what_the_back_fill_data_source_reads(tmp_path: Path) -> None:
    """The embedded log's back-fill is read by the driver (decision record 0016); the Spark data
    source's batch reader, given the same options, reads the same points."""
    log = DurableLog(tmp_path / "log.db")
    embedded = EmbeddedLog(log, "test")
    log.submit([SeriesWrite(A, SeriesKind.NUMERIC, [1, 2, 3, 4], [1.0, float("nan"), 3.0, 4.0])]).result()
    log.submit([SeriesWrite(B, SeriesKind.ENUM, [3, 9], ["x", "y"])]).result()
    upto = embedded.end_offset()
    log.submit([SeriesWrite(A, SeriesKind.NUMERIC, [5, 2], [5.0, 2.5])]).result()  # after the mark
    ids = sorted(info.id for info in log.series())
    options = embedded.backfill_options(ids, 2, upto)
    data_source = embedded.data_source(options)
    reader = data_source.reader(data_source.schema())
    via_spark_reader = [b for p in reader.partitions() for b in reader.read(p)]
    direct = embedded.read_history(ids, 2, upto)
    assert direct.schema == records.POINT_SCHEMA
    assert str(direct.to_pylist()) == str(pa.Table.from_batches(via_spark_reader).to_pylist())  # NaN == NaN
    assert [(r["ts"], r["str"]) for r in direct.to_pylist()] == [
        (2, None),
        (3, None),
        (4, None),
        (3, "x"),
        (9, "y"),
    ]
    embedded.close()


def test_a_retention_backlog_is_pruned_in_steps_that_come_faster_than_once_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More expired blocks than one step removes (PRUNE_BLOCKS) are pruned by steps that follow each
    other every PRUNE_BACKLOG_INTERVAL_S, not every PRUNE_INTERVAL_S: a log fed more blocks a second
    than a step a second removes would otherwise outgrow its retention. Here the once-a-second pace
    is made an hour, so only the backlog pace can prune everything (a log just opened starts at it)."""
    monkeypatch.setattr(writer, "PRUNE_BLOCKS", 100)
    monkeypatch.setattr(writer, "PRUNE_INTERVAL_S", 3600.0)
    monkeypatch.setattr(writer, "PRUNE_BACKLOG_INTERVAL_S", 0.05)
    old = time.time_ns() - 7200 * 1_000_000_000
    keeper = DurableLog(tmp_path / "log.db")
    for i in range(50):  # 500 expired blocks: 5 full steps
        writes = [
            SeriesWrite(SeriesKey.of("ri.a.b.c.d", f"c{s}", {}), SeriesKind.NUMERIC, [old + i], [1.0])
            for s in range(10)
        ]
        keeper.submit(writes).result(timeout=10)
    keeper.close()

    log = DurableLog(tmp_path / "log.db", retention=Retention(3600, 0))
    try:
        deadline = time.monotonic() + 30
        while log.pruned.blocks < 499 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.pruned.blocks == 499, log.pruned  # the newest block always stays
        assert log.pruned.steps == 5, log.pruned
    finally:
        log.close()


def test_a_mapped_back_fill_reader_reads_exactly_after_pruning_shrinks_the_file(tmp_path: Path) -> None:
    """Back-fills read through a memory map (docs/decisions/0090): a mapped connection gives the
    points an unmapped one gives, and still does once pruning has cut the file shorter than the map
    it made (a stale map past the file's end would be a SIGBUS, not a wrong answer)."""
    now = time.time_ns()
    old, recent = now - 7200 * 1_000_000_000, now - 60 * 1_000_000_000
    keeper = DurableLog(tmp_path / "log.db")
    for i in range(40):  # 40 expired blocks of 20,000 points, then the series that stays
        ts = [old + i * 20_000 + k for k in range(20_000)]
        keeper.submit([SeriesWrite(A, SeriesKind.NUMERIC, ts, [float(k) for k in range(20_000)])]).result()
    keeper.submit(
        [SeriesWrite(B, SeriesKind.NUMERIC, [recent + k for k in range(5000)], [k / 7 for k in range(5000)])]
    ).result()
    ids = {info.key: info.id for info in keeper.series()}
    keeper.close()

    def read(conn: sqlite3.Connection) -> tuple[list[int], list[float]]:
        cols = blocks.read_series_columns(conn, [ids[B]], 0, blocks.max_seq(conn))[ids[B]]
        return cols.ts.tolist(), cols.values.tolist()

    mapped = connect_reader(tmp_path / "log.db", mapped=True)
    assert mapped.execute("PRAGMA mmap_size").fetchone()[0] > 0
    written = ([recent + k for k in range(5000)], [k / 7 for k in range(5000)])
    assert read(mapped) == written
    assert len(blocks.read_series_columns(mapped, [ids[A]], 0, blocks.max_seq(mapped))[ids[A]].ts) == 800_000
    before = (tmp_path / "log.db").stat().st_size

    log = DurableLog(tmp_path / "log.db", retention=Retention(3600, 0))
    try:
        deadline = time.monotonic() + 30
        while log.pruned.blocks < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.pruned.blocks == 40, log.pruned
        assert (tmp_path / "log.db").stat().st_size < before / 4  # the file shrank under the map
        assert read(mapped) == written
        assert blocks.read_series_columns(mapped, [ids[A]], 0, blocks.max_seq(mapped)) == {}
        assert read(connect_reader(tmp_path / "log.db")) == written
    finally:
        mapped.close()
        log.close()


def test_the_log_contract_read_commit_pending(tmp_path: Path) -> None:
    """The embedded log as the stream's driver-side reader sees it (compute/storage/contract.py):
    new series announced once, reads bounded by their limit, commits that lower what is pending."""
    log = EmbeddedLog(DurableLog(tmp_path / "log.db"), "reader")
    try:
        assert log.ready()
        assert log.partitions() and len(set(log.partitions())) == len(log.partitions())
        assert log.read(100, 0).points.num_rows == 0
        keys = [SeriesKey.of("ri.c", f"ch{i}", {}) for i in range(6)]
        for i, key in enumerate(keys):
            log.submit(
                [SeriesWrite(key, SeriesKind.NUMERIC, [NANOS * i, NANOS * i + 1], [float(i), -1.0])]
            ).result(10)
        assert sorted(info.key.channel for info in log.poll_new_series()) == [f"ch{i}" for i in range(6)]
        assert log.poll_new_series() == []
        assert log.pending() == 12

        first = log.read(1, 1000)  # a limit of one record
        assert 1 <= first.points.num_rows <= 2
        rest = log.read(1000, 1000)
        rows = first.points.to_pylist() + rest.points.to_pylist()
        assert sorted((r["ts"], r["value"]) for r in rows) == sorted(
            (NANOS * i + d, v) for i in range(6) for d, v in ((0, float(i)), (1, -1.0))
        )
        assert log.read(1000, 200).points.num_rows == 0  # waited, nothing new

        log.commit(first.offsets)
        assert 0 < log.pending() < 12
        log.commit(rest.offsets)
        assert log.pending() == 0
    finally:
        log.close()
