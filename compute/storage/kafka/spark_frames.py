"""The Kafka log as Spark reads it: Spark's built-in Kafka source (`format("kafka")`, the connector
jars fetched by deploy/kafka.sh), so the JVM reads the partitions (on the executors of a cluster) and
offsets live in Spark's checkpoint. The stream's rows are blocks (seq, series_id, block): the series
filter runs in the JVM on the record key, and the blocks reach the driver through Arrow as bytes,
which numpy unpacks (blocks.points_of_blocks). A back-fill is a Spark batch job from the offsets of
a time (`startingOffsetsByTimestamp`), its blocks unpacked into points on the executors."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from compute.storage.kafka.blocks import BLOCK_SCHEMA, points_of_blocks
from compute.storage.kafka.layout import FUTURE_MARGIN_MS, SEQ_BITS, SEQ_MASK, KafkaLayout
from compute.storage.records import POINT_SCHEMA_DDL

KAFKA_SCRIPT = Path(__file__).resolve().parents[3] / "deploy" / "kafka.sh"
NANOS_PER_MS = 1_000_000


def connector_jars() -> list[str]:
    """Spark's Kafka connector and what PySpark lacks of its dependencies, as files (spark.jars),
    fetched with Maven into the cache on first use."""
    done = subprocess.run([str(KAFKA_SCRIPT), "spark-jars"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"fetching Spark's Kafka connector failed: {done.stderr.strip()[-500:]}")
    return [jar for jar in done.stdout.strip().split(",") if jar]


class KafkaFrames:
    block_schema = BLOCK_SCHEMA

    def __init__(self, bootstrap: str, layout: KafkaLayout) -> None:
        self.bootstrap = bootstrap
        self.layout = layout

    @property
    def jars(self) -> list[str]:
        return connector_jars()

    def _options(self) -> dict[str, str]:
        return {
            "kafka.bootstrap.servers": self.bootstrap,
            "subscribe": self.layout.topic,
            "kafka.isolation.level": "read_committed",  # a request's transaction, whole or not at all
            # Retention may delete what a stopped query had not read: read on from what is left.
            "failOnDataLoss": "false",
        }

    @staticmethod
    def _blocks(records: DataFrame) -> DataFrame:
        seq: Column = F.shiftleft(F.unix_millis(F.col("timestamp")), SEQ_BITS).bitwiseOR(
            F.col("offset").bitwiseAND(F.lit(SEQ_MASK))
        )
        return records.where(F.length("value") > 0).select(
            seq.alias("seq"),
            F.col("key").cast("string").cast("long").alias("series_id"),
            F.col("value").alias("block"),
        )

    def stream(self, spark: SparkSession, options: dict[str, str]) -> DataFrame:
        """The stream from the log's `stream_options` (its `startingOffsets`: the end when it starts)."""
        return self._blocks(spark.readStream.format("kafka").options(**self._options(), **options).load())

    def points(self, blocks: pa.Table) -> pa.Table:
        """A micro-batch's collected blocks as POINT_SCHEMA rows."""
        return points_of_blocks(blocks)

    def history(
        self, spark: SparkSession, series_ids: Sequence[int], from_ts: int, upto_seq: int
    ) -> DataFrame:
        """Points of these series with ts >= from_ts and seq <= upto_seq: a batch job reading each
        partition that holds one of them from the offset of (from_ts - FUTURE_MARGIN_MS)."""
        partitions = sorted({self.layout.partition_of(s) for s in series_ids})
        if not partitions:
            return spark.createDataFrame([], POINT_SCHEMA_DDL)
        from_ms = max(from_ts // NANOS_PER_MS - FUTURE_MARGIN_MS, 0)
        topic = self.layout.topic
        options = {k: v for k, v in self._options().items() if k != "subscribe"}
        options["assign"] = json.dumps({topic: partitions})
        reader = spark.read.format("kafka").options(**options)
        reader = reader.option(
            "startingOffsetsByTimestamp", json.dumps({topic: {str(p): from_ms for p in partitions}})
        )
        reader = reader.option("startingOffsetsByTimestampStrategy", "latest")  # nothing that late: none
        blocks = self._blocks(reader.option("endingOffsets", "latest").load())
        blocks = blocks.where(F.col("series_id").isin(list(series_ids)) & (F.col("seq") <= F.lit(upto_seq)))

        def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                yield from points_of_blocks(pa.Table.from_batches([batch]), from_ts).to_batches()

        return blocks.mapInArrow(decode, POINT_SCHEMA_DDL)
