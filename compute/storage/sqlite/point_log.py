"""The embedded SQLite log (compute/log.py) behind the `PointLog` contract: one partition, offsets
are the log's `seq`, and each consumer's committed offset is a small file beside the database
(written by the server and by the Spark stream's commit, which runs in another process)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import SimpleDataSourceStreamReader

from compute.storage import records
from compute.storage.contract import Offsets, ReadResult, SeriesWrite
from compute.storage.horizon import embedded_held_from
from compute.storage.series import SeriesInfo
from compute.storage.sqlite import blocks
from compute.storage.sqlite.connection import connect_reader
from compute.storage.sqlite.spark_source import LogDataSource, LogStreamReader
from compute.storage.sqlite.writer import DurableLog

POLL_S = 0.01  # how often a waiting read looks for new rows


def committed_path(log_path: str | Path, consumer: str) -> Path:
    return Path(f"{log_path}.consumers") / f"{consumer}.json"


def load_committed(log_path: str | Path, consumer: str) -> int | None:
    try:
        return int(json.loads(committed_path(log_path, consumer).read_text())["seq"])
    except FileNotFoundError:
        return None


def store_committed(log_path: str | Path, consumer: str, seq: int) -> None:
    path = committed_path(log_path, consumer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"seq": seq}))
    os.replace(tmp, path)  # readers never see a half-written file


class CommittingStreamReader(LogStreamReader):
    def __init__(self, path: str, start_seq: int, consumer: str) -> None:
        super().__init__(path, start_seq)
        self.consumer = consumer

    def commit(self, end: dict) -> None:
        """Spark calls this once the micro-batch's results are published."""
        store_committed(self.path, self.consumer, int(end["seq"]))


class CommittingLogDataSource(LogDataSource):
    """The embedded log's data source, with the stream's commits recorded for `pending`."""

    def simpleStreamReader(self, schema: object) -> SimpleDataSourceStreamReader:
        return CommittingStreamReader(
            self.options["path"], int(self.options.get("start_seq", "0")), self.options["consumer"]
        )


class EmbeddedLog:
    data_source = CommittingLogDataSource

    def __init__(self, durable: DurableLog, consumer: str) -> None:
        self.durable = durable
        self.consumer = consumer
        self._conn = connect_reader(durable.path)
        self._new: list[SeriesInfo] = []
        self._new_lock = threading.Lock()
        self._position: int | None = None  # where `read` stands
        self._stream_start: int | None = None  # where the last stream started (it reads after it)
        # The writer announces a series before its first points commit (compute/log.py).
        durable.on_new_series = self._announce
        # The writer may merge blocks the stream has committed past (and `read` has read past): no
        # reader by seq reads them again (docs/decisions/0032-merged-history-blocks.md).
        durable.compact_upto = self._merge_mark

    # -- the source contract -----------------------------------------------------------------------
    def partitions(self) -> list[int]:
        return [0]

    def read(self, limit: int, timeout_ms: int) -> ReadResult:
        if self._position is None:
            self._position = load_committed(self.durable.path, self.consumer) or 0
        after = self._position
        deadline = time.monotonic() + timeout_ms / 1000
        newest = blocks.max_seq(self._conn)
        while newest <= after and time.monotonic() < deadline:
            time.sleep(POLL_S)
            newest = blocks.max_seq(self._conn)
        upto = min(newest, after + limit)  # one record (block) per seq; rolled-back seqs leave gaps
        batches = blocks.read_seq_range(self._conn, after, upto) if upto > after else []
        table = pa.Table.from_batches(batches, schema=records.POINT_SCHEMA)
        self._position = max(after, upto)
        return ReadResult(table, {0: self._position})

    def _merge_mark(self) -> int | None:
        """The seq the stream has passed: it starts after the log's end (`stream_options`) and reads
        on from its committed offset, never below. None while no stream was started."""
        committed = load_committed(self.durable.path, self.consumer)
        passed = max(committed or 0, self._stream_start or 0) if self._stream_start is not None else committed
        if passed is None:
            return None
        return passed if self._position is None else min(passed, self._position)

    def commit(self, offsets: Offsets) -> None:
        store_committed(self.durable.path, self.consumer, offsets[0])

    def pending(self) -> int:
        committed = load_committed(self.durable.path, self.consumer)
        newest = blocks.max_seq(self._conn)
        # Offsets count blocks (a series' points of one request); lag is counted in points.
        return blocks.count_points(self._conn, committed or 0, newest)

    def ready(self) -> bool:
        try:
            blocks.max_seq(self._conn)
        except Exception:
            return False
        return True

    # -- ingest and catalog ------------------------------------------------------------------------
    def submit(self, writes: list[SeriesWrite]) -> Future[int]:
        return self.durable.submit(writes)

    def series(self) -> list[SeriesInfo]:
        return self.durable.series()

    def poll_new_series(self) -> list[SeriesInfo]:
        with self._new_lock:
            new, self._new = self._new, []
        return new

    def _announce(self, info: SeriesInfo) -> None:
        with self._new_lock:
            self._new.append(info)

    # -- Spark -------------------------------------------------------------------------------------
    def stream_options(self) -> dict[str, str]:
        start = self.end_offset()
        self._stream_start = start
        return {
            "path": str(self.durable.path),
            "start_seq": str(start),
            "consumer": self.consumer,
        }

    def end_offset(self) -> int:
        # The writer is the only one assigning seqs, and it does so in commit order.
        return blocks.max_seq(self._conn)

    def backfill_options(self, series_ids: Sequence[int], from_ts: int, upto_seq: int) -> dict[str, str]:
        return {
            "path": str(self.durable.path),
            "series_ids": ",".join(map(str, series_ids)),
            "from_ts": str(from_ts),
            "upto_seq": str(upto_seq),
        }

    # -- history read by the driver ----------------------------------------------------------------
    @property
    def driver_reads(self) -> bool:
        return True

    def read_history(self, series_ids: Sequence[int], from_ts: int, upto_seq: int) -> pa.Table:
        batches = [
            blocks.columns_batch(sid, c)
            for sid, c in self.read_history_columns(series_ids, from_ts, upto_seq).items()
        ]
        return pa.Table.from_batches(batches, schema=records.POINT_SCHEMA)

    def read_history_columns(
        self,
        series_ids: Sequence[int],
        from_ts: int,
        upto_seq: int,
        spare: Callable[[int], int] | None = None,
    ) -> dict[int, blocks.SeriesColumns]:
        """`read_history` as numpy columns per series, in seq order (what the engine's back-fill
        wants, without a table to split); `spare`: room to leave after each (blocks.read_series_columns)."""
        # A connection of its own (back-fills run beside the stream's reads of the log), mapped.
        conn = connect_reader(self.durable.path, mapped=True)
        try:
            return blocks.read_series_columns(conn, series_ids, from_ts, upto_seq, spare)
        finally:
            conn.close()

    # -- optional capabilities -----------------------------------------------------------------------
    @property
    def spark_frames(self) -> None:
        return None  # read through its Python data source

    @property
    def local_writer(self) -> DurableLog:
        return self.durable

    def held_from(self, series_ids: Sequence[int]) -> int | None:
        return embedded_held_from(self.durable.path, self.durable.retention.max_bytes)

    def close(self) -> None:
        self.durable.close()
        self._conn.close()
