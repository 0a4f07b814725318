"""PySpark Python Data Source over the Redis Streams log: the stream reader plans one input
partition per Redis partition that has new entries, so executors read the partitions in parallel;
offsets are per partition and are committed once the micro-batch's results are published. The
batch reader back-fills by time range. Its methods run in Spark's Python workers (on executors
for `read`): they see only the options, never the server's memory."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from compute.storage.records import POINT_SCHEMA_DDL
from compute.storage.redis import layout as rs

SOURCE_NAME = "sparkwire_redis"
NANOS_PER_MS = 1_000_000


@dataclass
class PartitionRange(InputPartition):
    partition: int
    after: int
    upto: int


@dataclass
class BackfillRange(InputPartition):
    partition: int
    after: int
    upto: int
    series_ids: frozenset[int]
    from_ts: int


def _layout(options: dict[str, str]) -> rs.RedisLayout:
    return rs.RedisLayout(options["prefix"], int(options["partitions"]))


class RedisDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return POINT_SCHEMA_DDL

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        opts = dict(self.options)
        start = {int(p): (int(v[0]), int(v[1])) for p, v in json.loads(opts["start"]).items()}
        return RedisStreamReader(opts["url"], _layout(opts), opts["consumer"], start)

    def reader(self, schema: object) -> DataSourceReader:
        opts = dict(self.options)
        ids = frozenset(int(x) for x in opts.get("series_ids", "").split(",") if x)
        return RedisBackfillReader(
            opts["url"], _layout(opts), ids, int(opts["from_ts"]), int(opts["upto_seq"])
        )


class RedisStreamReader(DataSourceStreamReader):
    """Offsets are `{partition: [seq, points]}`: every entry of the partition at or below `seq`
    has been handed to Spark, and the partition had received `points` points by then."""

    def __init__(
        self, url: str, layout: rs.RedisLayout, consumer: str, start: dict[int, tuple[int, int]]
    ) -> None:
        self.url = url
        self.layout = layout
        self.consumer = consumer
        self.start = start

    def initialOffset(self) -> dict:
        return {str(p): [seq, n] for p, (seq, n) in self.start.items()}

    def latestOffset(self) -> dict:
        newest = rs.head(rs.client(self.url), self.layout)
        offsets = dict(self.start)
        for p, position in newest.items():
            if position[0] > offsets.get(p, (-1, 0))[0]:
                offsets[p] = position
        return {str(p): [seq, n] for p, (seq, n) in offsets.items()}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        ranges: list[InputPartition] = []
        for p, (upto, _) in end.items():
            after = start.get(p, [0, 0])[0]
            if upto > after:
                ranges.append(PartitionRange(int(p), int(after), int(upto)))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PartitionRange)
        yield from rs.read_range(
            rs.client(self.url), self.layout, partition.partition, partition.after, partition.upto
        )

    def commit(self, end: dict) -> None:
        """Called by Spark after the micro-batch's `foreachBatch` (which publishes) has returned."""
        offsets = {int(p): int(v[0]) for p, v in end.items()}
        rs.store_committed(rs.client(self.url), self.layout, self.consumer, offsets)


class RedisBackfillReader(DataSourceReader):
    def __init__(
        self, url: str, layout: rs.RedisLayout, series_ids: frozenset[int], from_ts: int, upto_seq: int
    ) -> None:
        self.url = url
        self.layout = layout
        self.series_ids = series_ids
        self.from_ts = from_ts
        self.upto_seq = upto_seq

    def partitions(self) -> Sequence[InputPartition]:
        """One input partition per Redis partition holding any of the series. Points are appended
        after they are stamped, so reading ids from `from_ts` on finds them; points stamped ahead
        of their append are found by reading back as far as that partition was ever ahead."""
        by_partition: dict[int, set[int]] = {}
        for sid in self.series_ids:
            by_partition.setdefault(self.layout.partition_of(sid), set()).add(sid)
        skew = rs.future_skew_ms(rs.client(self.url), self.layout)
        from_ms = self.from_ts // NANOS_PER_MS
        return [
            BackfillRange(p, rs.seq_at_ms(from_ms - skew[p]) - 1, self.upto_seq, frozenset(ids), self.from_ts)
            for p, ids in sorted(by_partition.items())
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BackfillRange)
        yield from rs.read_range(
            rs.client(self.url),
            self.layout,
            partition.partition,
            partition.after,
            partition.upto,
            partition.series_ids,
            partition.from_ts,
        )
