"""The point log's records as Arrow: a point row, and a block row (one series' points of one request
as arrays), the shapes both logs hand Spark and the engine."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

POINT_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("series_id", pa.int64()),
        ("ts", pa.int64()),
        ("value", pa.float64()),
        ("str", pa.string()),
    ]
)
POINT_SCHEMA_DDL = "seq long, series_id long, ts long, value double, str string"
# The stream's rows: one per block, its points as arrays (a numeric block's `str` and an enum block's
# `value` are null). Spark copies and serializes every row the stream reader hands it, so a row per
# point cost the JVM per point (docs/decisions/0017-stream-rows-are-blocks.md).
BLOCK_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("series_id", pa.int64()),
        ("ts", pa.list_(pa.int64())),
        ("value", pa.list_(pa.float64())),
        ("str", pa.list_(pa.string())),
    ]
)
BLOCK_SCHEMA_DDL = "seq long, series_id long, ts array<long>, value array<double>, str array<string>"


def points_of_blocks(table: pa.Table) -> pa.Table:
    """BLOCK_SCHEMA rows (e.g. a micro-batch's `toArrow()`) -> POINT_SCHEMA rows, in the same order."""
    counts = pc.list_value_length(table.column("ts")).to_numpy(zero_copy_only=False).astype(np.int64)
    total = int(counts.sum())
    seq = np.repeat(table.column("seq").to_numpy(), counts)
    sid = np.repeat(table.column("series_id").to_numpy(), counts)
    ts = pc.list_flatten(table.column("ts"))
    value_lists, str_lists = table.column("value"), table.column("str")
    if value_lists.null_count == 0:  # numeric only
        value, text = pc.list_flatten(value_lists), pa.nulls(total, pa.string())
    else:
        enum_point = np.repeat(value_lists.is_null().to_numpy(zero_copy_only=False), counts)
        values = np.full(total, np.nan)
        values[~enum_point] = pc.list_flatten(value_lists).to_numpy()
        strings = np.full(total, None, dtype=object)
        strings[enum_point] = pc.list_flatten(str_lists).to_pylist()
        value, text = pa.array(values, mask=enum_point), pa.array(strings, pa.string())
    return pa.table([seq, sid, ts, value, text], schema=POINT_SCHEMA)
