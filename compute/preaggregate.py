"""The Spark side of pre-aggregation: the plan of a micro-batch (or back-fill) read when some series
are summarized from buckets, and its Arrow result split into raw rows and per-series buckets.

Which series are aggregated, and at what width, is data: a column of the broadcast series table
(`agg_width`, ns; 0 = raw), so the plan's shape depends only on whether any series is aggregated,
never on how many computations are live. Raw-mode rows and aggregated rows share one nullable schema
and come back in one `toArrow()` (one Spark action per micro-batch)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from compute.buckets import Buckets

POINT_COLUMNS = ["seq", "series_id", "ts", "value", "str"]
# Aggregated rows: seq = min seq, ts = min ts (= first point), value/str null.
AGG_COLUMNS = [
    ("agg_width", "long"),
    ("n", "long"),
    ("mean", "double"),
    ("m2", "double"),
    ("vmin", "double"),
    ("vmax", "double"),
    ("first_value", "double"),
    ("last_ts", "long"),
    ("last_value", "double"),
    ("max_seq", "long"),
    ("distinct_ts", "long"),  # < n: a timestamp written twice in the batch (the later write wins)
    ("bad", "long"),  # NaN, null or infinite values: Spark's aggregates differ from numpy's there
]


@dataclass
class AggRows:
    """One series' pre-aggregated buckets from one read, at width `width` (every timestamp of a row
    lies in its bucket; rows do not say which point was written last when `distinct_ts` < count)."""

    width: int
    buckets: Buckets
    min_seq: np.ndarray
    max_seq: np.ndarray
    distinct_ts: np.ndarray
    bad: np.ndarray

    @property
    def count(self) -> int:
        return int(self.buckets.count.sum())

    def take(self, index: np.ndarray) -> AggRows:
        return AggRows(
            self.width,
            self.buckets.take(index),
            self.min_seq[index],
            self.max_seq[index],
            self.distinct_ts[index],
            self.bad[index],
        )


def _null(kind: str) -> Column:
    return F.lit(None).cast(kind)


def plan(points: DataFrame, series: DataFrame, any_raw: bool = True) -> DataFrame:
    """`points` (POINT_SCHEMA) joined to `series` (series_id, agg_width): raw rows for agg_width 0,
    one row per (series, floor(ts / agg_width)) for the others, in one nullable schema. `any_raw`
    False (every series aggregated): no raw branch, so the source is scanned once, not twice."""
    joined = points.join(series, "series_id")
    raw = joined.where(F.col("agg_width") == 0).select(
        *POINT_COLUMNS, *(_null(kind).alias(name) for name, kind in AGG_COLUMNS)
    )
    v = F.col("value")
    bad = F.when(v.isNull() | F.isnan(v) | (F.abs(v) == float("inf")), 1).otherwise(0)
    agg = (
        joined.where(F.col("agg_width") > 0)
        # integer floor division (a double quotient would round ns timestamps across bucket edges)
        .groupBy("series_id", "agg_width", F.expr("(ts - pmod(ts, agg_width)) div agg_width").alias("bucket"))
        .agg(
            F.min("seq").alias("seq"),
            F.min("ts").alias("ts"),
            F.count(F.lit(1)).alias("n"),
            F.avg(v).alias("mean"),
            (F.var_pop(v) * F.count(v)).alias("m2"),
            F.min(v).alias("vmin"),
            F.max(v).alias("vmax"),
            F.min_by(v, F.col("ts")).alias("first_value"),
            F.max("ts").alias("last_ts"),
            F.max_by(v, F.col("ts")).alias("last_value"),
            F.max("seq").alias("max_seq"),
            # one shuffle; count_distinct plans a second aggregation (measured ~1.3x slower at 1.2M rows)
            F.size(F.array_distinct(F.collect_list("ts"))).alias("distinct_ts"),
            F.sum(bad).alias("bad"),
        )
        .select(
            "seq",
            "series_id",
            "ts",
            _null("double").alias("value"),
            _null("string").alias("str"),
            *(F.col(name).cast(kind).alias(name) for name, kind in AGG_COLUMNS),
        )
    )
    return raw.unionByName(agg) if any_raw else agg


def split(table: pa.Table) -> tuple[pa.Table, dict[int, AggRows]]:
    """The result of `plan` -> (raw rows in POINT_SCHEMA columns, aggregated rows per series)."""
    if table.num_rows == 0:
        return table.select(POINT_COLUMNS), {}
    width = pc.fill_null(table.column("agg_width"), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    is_agg = width > 0
    raw = table.filter(pa.array(~is_agg)).select(POINT_COLUMNS)
    if not is_agg.any():
        return raw, {}
    agg = table.filter(pa.array(is_agg))
    widths = width[is_agg]

    def col(name: str, dtype: type) -> np.ndarray:
        c = agg.column(name)
        return c.to_numpy(zero_copy_only=False).astype(dtype) if c.null_count == 0 else _filled(c, dtype)

    sid = col("series_id", np.int64)
    ts = col("ts", np.int64)
    out: dict[int, AggRows] = {}
    order = np.lexsort((ts, sid))
    sid_sorted = sid[order]
    bounds = np.flatnonzero(np.r_[True, sid_sorted[1:] != sid_sorted[:-1], True])
    w = widths[order]
    buckets = Buckets(
        key=ts[order] // np.maximum(w, 1),
        count=col("n", np.int64)[order],
        mean=col("mean", np.float64)[order],
        m2=col("m2", np.float64)[order],
        min=col("vmin", np.float64)[order],
        max=col("vmax", np.float64)[order],
        first_ts=ts[order],
        first_value=col("first_value", np.float64)[order],
        last_ts=col("last_ts", np.int64)[order],
        last_value=col("last_value", np.float64)[order],
    )
    min_seq, max_seq = col("seq", np.int64)[order], col("max_seq", np.int64)[order]
    distinct, bad = col("distinct_ts", np.int64)[order], col("bad", np.int64)[order]
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        idx = np.arange(a, b)
        out[int(sid_sorted[a])] = AggRows(
            int(w[a]), buckets.take(idx), min_seq[idx], max_seq[idx], distinct[idx], bad[idx]
        )
    return raw, out


def _filled(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    """A column with nulls (e.g. the mean of a bucket of null values): nulls as NaN / 0."""
    if dtype is np.float64:
        return column.to_numpy(zero_copy_only=False).astype(np.float64)
    return pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(dtype)
