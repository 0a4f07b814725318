"""Kafka's records of the point log (layout.py beside this) unpacked into points, for every reader:
the stream's micro-batches and back-fills (spark_frames.py) and `KafkaLog.read`. Kept apart from
the layout so that a process that only writes (an edge) does not load Arrow."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa

from compute.storage.kafka.layout import BLOCK_HEADER, NUMERIC_BLOCK
from compute.storage.records import POINT_SCHEMA

# The rows a Kafka read hands the driver: a block per row, decoded with numpy (`points_of_blocks`).
BLOCK_SCHEMA = pa.schema([("seq", pa.int64()), ("series_id", pa.int64()), ("block", pa.binary())])


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
        kind, n = BLOCK_HEADER.unpack_from(block)
        body = BLOCK_HEADER.size + 8 * n
        stamp_bytes.append(block[BLOCK_HEADER.size : body])
        if kind == NUMERIC_BLOCK:
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
