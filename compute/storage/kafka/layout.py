"""How Sparkwire's point log lies in Kafka, shared by the writer (point_log.py beside this) and the
Spark reads (spark_frames.py).

- `{topic}` (the points, `partitions` partitions, `message.timestamp.type=LogAppendTime`): one record
  holds one series' points of one request (a block, at most `BLOCK_POINTS` points; a larger write is
  several records): key the series id in decimal ASCII (Spark reads it as a number in the JVM),
  partition `id % partitions`, value `kind byte, uint32 count, count int64 ns timestamps, then
  count float64 values` (little-endian, so NaN and every timestamp round-trip exactly) or, for
  string and log series, a JSON list of strings. An empty value is a snapshot barrier
  (point_log.py's `end_offset`), never a point.
- `{topic}-series` (one partition, `cleanup.policy=compact`): the series catalog, key the series id,
  value its kind and key (series_ids.py's `definition`). Compaction keeps one record per series
  forever, whatever the points' retention, so a reader from the beginning gets the whole catalog.
- blocks.py beside this unpacks them into points (the reading side, with Arrow; a writer needs none).
- A point's `seq` is `append time ms << 20 | offset & 0xFFFFF`: the broker stamps the append time,
  so seqs of every partition share one clock and one number can split them all (a back-fill
  snapshot).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import orjson

from compute.storage.series import SeriesKind

SEQ_BITS = 20
SEQ_MASK = (1 << SEQ_BITS) - 1
BLOCK_POINTS = 32_768  # 512 KiB of a numeric block: under Kafka's 1 MiB record default
BLOCK_HEADER = struct.Struct("<cI")
NUMERIC_BLOCK = b"v"
STRING_BLOCK = b"e"

# Points may be stamped up to max-future-seconds (default 60 s) ahead of their append: a back-fill
# starts this much before its window so they are not missed, and a partition that lost records to
# retention holds every point stamped this much after its first record left (KafkaLog.held_from).
FUTURE_MARGIN_MS = 60_000


@dataclass(frozen=True)
class KafkaLayout:
    topic: str
    partitions: int

    @property
    def catalog_topic(self) -> str:
        return f"{self.topic}-series"

    def partition_of(self, series_id: int) -> int:
        return series_id % self.partitions


def seq_at_ms(ms: int) -> int:
    """The smallest seq of a record appended at or after this millisecond."""
    return max(ms, 0) << SEQ_BITS


def encode_blocks(kind: SeriesKind, ts: np.ndarray, values: object) -> list[bytes]:
    """One series' points of one request as record values, `BLOCK_POINTS` at most each."""
    out = []
    for start in range(0, len(ts), BLOCK_POINTS):
        part = ts[start : start + BLOCK_POINTS]
        n = len(part)
        if kind is SeriesKind.NUMERIC:
            column = np.asarray(values, dtype="<f8")[start : start + n]
            out.append(BLOCK_HEADER.pack(NUMERIC_BLOCK, n) + part.astype("<i8").tobytes() + column.tobytes())
        else:
            texts = list(values)[start : start + n]  # type: ignore[call-overload]
            out.append(
                BLOCK_HEADER.pack(STRING_BLOCK, n) + part.astype("<i8").tobytes() + orjson.dumps(texts)
            )
    return out
