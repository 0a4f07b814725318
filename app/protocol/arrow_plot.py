"""Nominal's `ArrowPlot`: a SummarizeSeries result as an Arrow IPC stream, base64 in the JSON (Conjure
binary), for subscriptions that ask for `outputFormat` ARROW_V3 / ARROW_V4 (compute/evaluation/
output_format.py). Columns, types and merge rules: docs/protocol.md, "Arrow output".

Raw points are `arrowNumeric` (`timestamp`, `value`); buckets are `arrowBucketedNumeric`
(`end_bucket_timestamp`, the requested fields' columns, then the numericAggregations' columns).
Timestamps are int64 nanoseconds since the Unix epoch; values float64; `count` uint32 (as
Nominal's own Arrow client reads them)."""

from __future__ import annotations

import base64
from typing import Any, cast

import numpy as np
import pyarrow as pa

from compute.evaluation.nodes.lttb_paging import PagedPoints
from compute.evaluation.output_format import ArrowFormat
from compute.evaluation.results import NumericBuckets, NumericPoints, Output
from schemas.timestamps import split_nanos

Json = Any
UINT32_MAX = np.iinfo(np.uint32).max


def _stream(columns: list[tuple[str, pa.Array]]) -> bytes:
    """One record batch (every row) in an IPC stream. The first column (the row's time) is declared
    non-null, the others nullable as Nominal declares them (Sparkwire writes no nulls: it sends no
    empty bucket, and a NaN stays a NaN)."""
    schema = pa.schema([pa.field(name, arr.type, nullable=i > 0) for i, (name, arr) in enumerate(columns)])
    batch = pa.record_batch([arr for _, arr in columns], schema=schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _statistic(b: NumericBuckets, name: str) -> pa.Array:
    """A bucket statistic as its Arrow column; the V2-only ones from the bucket's own figures."""
    if name == "count":
        if len(b.count) and int(b.count.max()) > UINT32_MAX:
            raise OverflowError(
                f"a bucket of {int(b.count.max())} points does not fit the uint32 count column"
            )
        return pa.array(b.count.astype(np.uint32), pa.uint32())
    if name.startswith("aggregation "):  # a V2 percentile: a column the buckets carry
        return pa.array(b.aggregations[name.removeprefix("aggregation ")], pa.float64())
    if name in ("first_ts", "last_ts"):
        return pa.array(getattr(b, name), pa.int64())
    if name == "sum":
        values = b.mean * b.count
    elif name == "standard_deviation":
        values = np.sqrt(b.variance)
    elif name == "root_mean_square":
        values = np.sqrt(b.variance + b.mean * b.mean)  # mean of squares = variance + mean^2
    else:
        values = getattr(b, name)
    return pa.array(values, pa.float64())


def numeric_points_stream(points: NumericPoints) -> bytes:
    return _stream(
        [("timestamp", pa.array(points.ts, pa.int64())), ("value", pa.array(points.values, pa.float64()))]
    )


def numeric_buckets_stream(b: NumericBuckets, fmt: ArrowFormat) -> bytes:
    columns = [("end_bucket_timestamp", pa.array(b.end, pa.int64()))]
    columns += [(name, _statistic(b, stat)) for name, stat in fmt.bucket_columns()]
    # numericAggregations: float64 columns by the request's names, after the fields, sorted by name
    written = {name for name, _ in columns}
    columns += [
        (name, pa.array(b.aggregations[name], pa.float64()))
        for name in sorted(b.aggregations)
        if name not in written
    ]
    return _stream(columns)


def arrow_body(out: Output, fmt: ArrowFormat, group_by_keys: list[str] | None) -> tuple[str, Json]:
    """(variant, ArrowPlot) of a ComputeNodeResponse / ComputeNodeAppendResponse."""
    if isinstance(out, PagedPoints):  # a page of points, with nextPageToken when it is full
        kind, page = arrow_body(cast(Output, out.points), fmt, group_by_keys)
        if out.next_token is not None:
            t, rank = out.next_token
            seconds, nanos = split_nanos(t)
            token = {"timestamp": {"seconds": seconds, "nanos": nanos}, "id": str(rank)}
            page["nextPageToken"] = {"type": "timestampAndId", "timestampAndId": token}
        return kind, page
    if isinstance(out, NumericPoints):
        kind, data = "arrowNumeric", numeric_points_stream(out)
    elif isinstance(out, NumericBuckets):
        kind, data = "arrowBucketedNumeric", numeric_buckets_stream(out, fmt)
    else:  # refused when the computation is created or first evaluated (nodes/outputs.py)
        raise TypeError(f"no Arrow form for {type(out).__name__}")
    plot: dict[str, Json] = {"arrowBinary": base64.b64encode(data).decode("ascii")}
    if group_by_keys is not None:
        plot["groupByKeys"] = group_by_keys
    return kind, plot
