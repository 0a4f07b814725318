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
- A point's `seq` is `append time ms << 20 | offset & 0xFFFFF`: the broker stamps the append time,
  so seqs of every partition share one clock and one number can split them all (a back-fill
  snapshot).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa

from compute.storage.records import POINT_SCHEMA
from compute.storage.series import SeriesKind

SEQ_BITS = 20
SEQ_MASK = (1 << SEQ_BITS) - 1
BLOCK_POINTS = 32_768  # 512 KiB of a numeric block: under Kafka's 1 MiB record default
_HEADER = struct.Struct("<cI")
_NUMERIC = b"v"
_STRINGS = b"e"
# The rows a Kafka read hands the driver: a block per row, decoded with numpy (`points_of_blocks`).
BLOCK_SCHEMA = pa.schema([("seq", pa.int64()), ("series_id", pa.int64()), ("block", pa.binary())])

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
            out.append(_HEADER.pack(_NUMERIC, n) + part.astype("<i8").tobytes() + column.tobytes())
        else:
            texts = list(values)[start : start + n]  # type: ignore[call-overload]
            out.append(_HEADER.pack(_STRINGS, n) + part.astype("<i8").tobytes() + orjson.dumps(texts))
    return out


def points_of_blocks(table: pa.Table, from_ts: int | None = None) -> pa.Table:
    """BLOCK_SCHEMA rows -> POINT_SCHEMA rows (every point carries its block's seq), in the same
    order; points with ts < from_ts are dropped when given. Numeric blocks are joined as bytes once
    and handed to numpy, not decoded point by point."""
    if table.num_rows == 0:
        return POINT_SCHEMA.empty_table()
    seqs = table.column("seq").to_pylist()
    sids = table.column("series_id").to_pylist()
    blocks = table.column("block").to_pylist()
    counts: list[int] = []
    stamp_bytes: list[bytes] = []
    value_bytes: list[bytes] = []
    texts: list[tuple[int, list[str]]] = []
    total = 0
    for block in blocks:
        if not block:  # a barrier
            counts.append(0)
            continue
        kind, n = _HEADER.unpack_from(block)
        body = _HEADER.size + 8 * n
        stamp_bytes.append(block[_HEADER.size : body])
        if kind == _NUMERIC:
            value_bytes.append(block[body : body + 8 * n])
        else:
            texts.append((total, orjson.loads(block[body:])))
            value_bytes.append(np.full(n, np.nan, dtype="<f8").tobytes())
        counts.append(n)
        total += n
    if total == 0:
        return POINT_SCHEMA.empty_table()
    columns = {
        "seq": np.repeat(np.asarray(seqs, dtype=np.int64), counts),
        "series_id": np.repeat(np.asarray(sids, dtype=np.int64), counts),
        "ts": np.frombuffer(b"".join(stamp_bytes), dtype="<i8").astype(np.int64),
        "value": np.frombuffer(b"".join(value_bytes), dtype="<f8").astype(np.float64),
    }
    strings: np.ndarray | None = None
    if texts:
        strings = np.full(total, None, dtype=object)
        for first, text in texts:
            strings[first : first + len(text)] = text
    if from_ts is not None:
        keep = columns["ts"] >= from_ts
        if not keep.all():
            columns = {name: col[keep] for name, col in columns.items()}
            strings = strings[keep] if strings is not None else None
    rows = len(columns["ts"])
    str_col = pa.array(strings, type=pa.string()) if strings is not None else pa.nulls(rows, pa.string())
    return pa.table([*(pa.array(c) for c in columns.values()), str_col], schema=POINT_SCHEMA)
