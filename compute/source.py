"""PySpark Python Data Source over the embedded log: a stream reader for the live query, a batch
reader for back-fill. Its methods run in Spark's Python worker processes, so they see only the
options (the log's path), never the server's memory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from compute import log as durable_log

SOURCE_NAME = "sparkwire_log"
BLOCKS_PER_PARTITION = 2_000  # a block is one series' points from one request

_readers: dict[str, sqlite3.Connection] = {}


def _reader(path: str) -> sqlite3.Connection:
    """One read-only connection per worker process and log (Python workers are reused)."""
    conn = _readers.get(path)
    if conn is None:
        conn = _readers[path] = durable_log.connect_reader(path)
    return conn


@dataclass
class SeqRange(InputPartition):
    after: int
    upto: int


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
        return durable_log.POINT_SCHEMA_DDL

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        return LogStreamReader(self.options["path"], int(self.options.get("start_seq", "0")))

    def reader(self, schema: object) -> DataSourceReader:
        ids = tuple(int(x) for x in self.options.get("series_ids", "").split(",") if x)
        return LogBackfillReader(
            self.options["path"], ids, int(self.options["from_ts"]), int(self.options["upto_seq"])
        )


class LogStreamReader(DataSourceStreamReader):
    """Offsets are `{"seq": n}`: every point with seq <= n has been handed to Spark."""

    def __init__(self, path: str, start_seq: int) -> None:
        self.path = path
        self.start_seq = start_seq

    def initialOffset(self) -> dict:
        return {"seq": self.start_seq}

    def latestOffset(self) -> dict:
        return {"seq": max(self.start_seq, durable_log.max_seq(_reader(self.path)))}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        after, upto = int(start["seq"]), int(end["seq"])
        return [
            SeqRange(lo, min(lo + BLOCKS_PER_PARTITION, upto))
            for lo in range(after, upto, BLOCKS_PER_PARTITION)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SeqRange)
        yield from durable_log.read_seq_range(_reader(self.path), partition.after, partition.upto)

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
        yield from durable_log.read_series_since(
            _reader(self.path), partition.series_ids, partition.from_ts, partition.upto_seq
        )
