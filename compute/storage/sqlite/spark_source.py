"""PySpark Python Data Source over the embedded log: a stream reader for the live query, a batch
reader for back-fill. Its methods run in Spark's Python processes, so they see only the options
(the log's path), never the server's memory.

The stream reader is a `SimpleDataSourceStreamReader`: Spark's driver-side Python runner reads each
micro-batch while planning it and hands the rows to the JVM, so the batch's job starts no Python
worker task. The partitioned reader this replaced cost ~0.3-0.4 s per micro-batch in worker tasks
for a few thousand rows (docs/decisions/0009-driver-side-stream-read.md); the embedded log is a
file on the driver's machine, so reading it in parallel on executors bought nothing.

The stream's rows are the log's blocks (`BLOCK_SCHEMA`: a series' points of one request as arrays),
not points: Spark copies and serializes every row the driver-side reader hands it, so a row per
point made that JVM work per point (docs/decisions/0017-stream-rows-are-blocks.md). The back-fill
reader yields points; its read must ask for `POINT_SCHEMA_DDL` (the source's default schema is the
stream's).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition, SimpleDataSourceStreamReader

from compute.storage import records
from compute.storage.sqlite import blocks
from compute.storage.sqlite.connection import connect_reader

SOURCE_NAME = "sparkwire_log"
# Bounds one micro-batch after a stall (a long back-fill, a GC pause): the query catches up in steps
# of at most this many points (plus the rest of a block) instead of one batch the JVM's heap must hold.
MAX_POINTS_PER_BATCH = 500_000

_readers: dict[str, sqlite3.Connection] = {}


def _reader(path: str) -> sqlite3.Connection:
    """One read-only connection per worker process and log (Python workers are reused)."""
    conn = _readers.get(path)
    if conn is None:
        conn = _readers[path] = connect_reader(path)
    return conn


@dataclass
class BackfillPartition(InputPartition):
    series_ids: tuple[int, ...]
    from_ts: int
    upto_seq: int


class LogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return records.BLOCK_SCHEMA_DDL

    # No streamReader(): Spark then wraps simpleStreamReader() (see the module's docstring).
    def simpleStreamReader(self, schema: object) -> SimpleDataSourceStreamReader:
        return LogStreamReader(self.options["path"], int(self.options.get("start_seq", "0")))

    def reader(self, schema: object) -> DataSourceReader:
        ids = tuple(int(x) for x in self.options.get("series_ids", "").split(",") if x)
        return LogBackfillReader(
            self.options["path"], ids, int(self.options["from_ts"]), int(self.options["upto_seq"])
        )


class LogStreamReader(SimpleDataSourceStreamReader):
    """Offsets are `{"seq": n}`: every point with seq <= n has been handed to Spark."""

    def __init__(self, path: str, start_seq: int) -> None:
        self.path = path
        self.start_seq = start_seq

    def initialOffset(self) -> dict:
        return {"seq": self.start_seq}

    def read(self, start: dict) -> tuple[Iterator[pa.RecordBatch], dict]:
        """The blocks committed after `start`, up to the cap (compute/log.py: `read_from`)."""
        after = int(start["seq"])
        batches, last = blocks.read_from(_reader(self.path), after, MAX_POINTS_PER_BATCH)
        return iter(batches), ({"seq": last} if last > after else start)

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[pa.RecordBatch]:
        """A batch planned before a restart, read again."""
        return iter(blocks.read_block_range(_reader(self.path), int(start["seq"]), int(end["seq"])))

    def commit(self, end: dict) -> None:
        """The log keeps every point (back-fill reads history); nothing to release."""


class LogBackfillReader(DataSourceReader):
    def __init__(self, path: str, series_ids: tuple[int, ...], from_ts: int, upto_seq: int) -> None:
        self.path = path
        self.series_ids = series_ids
        self.from_ts = from_ts
        self.upto_seq = upto_seq

    def partitions(self) -> Sequence[InputPartition]:
        return [BackfillPartition(self.series_ids, self.from_ts, self.upto_seq)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BackfillPartition)
        yield from blocks.read_series_since(
            _reader(self.path), partition.series_ids, partition.from_ts, partition.upto_seq
        )
