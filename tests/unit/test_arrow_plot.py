"""Arrow output's pieces: which columns a SummarizeSeries built with nominal-api's classes asks for
(compute/evaluation/output_format.py), and the IPC stream written for buckets of random points,
read back with pyarrow and checked against the points (app/protocol/arrow_plot.py)."""

from __future__ import annotations

import base64
import json
import math
import statistics
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conjure_python_client import ConjureEncoder
from nominal_api import scout_compute_api as sc

from app.protocol import frames
from app.protocol.arrow_plot import arrow_body
from app.tiers import wire
from app.tiers.mirror import ResultMirror
from compute.evaluation import deltas
from compute.evaluation.compiler.limits import Limits
from compute.evaluation.errors import ComputeError
from compute.evaluation.output_format import (
    ARROW_FORMATS,
    FIELD_COLUMNS,
    V1_FIELDS,
    ArrowFormat,
    arrow_format,
)
from compute.evaluation.request import ComputationRequest
from compute.evaluation.results import NumericPoints
from compute.evaluation.summarize import numeric_buckets
from tests.wire import channel_variable, series_node

SECOND = 1_000_000_000

CHANNEL = sc.Series(numeric=sc.NumericSeries(raw=sc.Reference(name="x")))


def summarize(**fields: Any) -> dict[str, Any]:
    """A SummarizeSeries as Nominal's client sends it."""
    fields.setdefault("numeric_aggregations", {})
    encoded: dict[str, Any] = ConjureEncoder.do_encode(sc.SummarizeSeries(input=CHANNEL, **fields))
    return encoded


def v2(name: str) -> sc.NumericOutputFieldV2:
    return sc.NumericOutputFieldV2(field=sc.NumericOutputFieldV2Name[name])


def test_every_nominal_field_and_format_has_its_place() -> None:
    """The tables of output_format.py name exactly nominal-api's enum values (UNKNOWN aside)."""
    names = {e.value for e in sc.NumericOutputFieldV2Name} - {"UNKNOWN"}
    assert set(FIELD_COLUMNS) == names
    assert set(V1_FIELDS) == {e.value for e in sc.NumericOutputField} - {"UNKNOWN"}
    assert set(ARROW_FORMATS) == {e.value for e in sc.OutputFormat} - {"UNKNOWN", "LEGACY"}


def test_legacy_and_absent_formats_are_not_arrow() -> None:
    assert arrow_format(summarize()) is None
    assert arrow_format(summarize(output_format=sc.OutputFormat.LEGACY)) is None


def test_the_columns_follow_the_fields_in_request_order_once_each() -> None:
    fmt = arrow_format(
        summarize(
            output_format=sc.OutputFormat.ARROW_V3,
            numeric_output_fields=[
                sc.NumericOutputField.LAST_POINT,
                sc.NumericOutputField.COUNT,
                sc.NumericOutputField.LAST_POINT,
                sc.NumericOutputField.MIN,
            ],
        )
    )
    assert fmt == ArrowFormat("ARROW_V3", ("LAST_POINT", "COUNT", "MIN"))
    assert [c for c, _ in fmt.bucket_columns()] == ["last_value", "last_timestamp", "count", "min"]
    fmt = arrow_format(
        summarize(
            output_format=sc.OutputFormat.ARROW_V4,
            numeric_output_fields_v2=[v2("ROOT_MEAN_SQUARE"), v2("SUM"), v2("STANDARD_DEVIATION")],
        )
    )
    assert fmt is not None
    assert [c for c, _ in fmt.bucket_columns()] == ["root_mean_square", "sum", "standard_deviation"]


def test_v2_percentiles_and_numeric_aggregations_are_columns_in_their_places() -> None:
    """A V2 percentile's column stands where the request names it ("pXX" by default, or its
    outputName); numericAggregations' columns follow the fields', sorted by name."""

    def pct(p: float, name: str | None = None) -> sc.NumericOutputFieldV2:
        literal = sc.DoubleConstant(literal=p)
        return sc.NumericOutputFieldV2(
            percentile=sc.NumericOutputPercentile(percentile=literal, output_name=name)
        )

    fmt = arrow_format(
        summarize(
            output_format=sc.OutputFormat.ARROW_V4,
            numeric_output_fields_v2=[pct(0.95), v2("MAX"), pct(0.5, "median"), pct(0.999)],
        )
    )
    assert fmt is not None and fmt.percentiles == (("p95", 0.95), ("median", 0.5), ("p99.9", 0.999))
    assert [c for c, _ in fmt.bucket_columns()] == ["p95", "max", "median", "p99.9"]
    values = np.array([4.0, 1.0, 3.0, 2.0])
    buckets = numeric_buckets(
        np.array([1, 2, 3, 4], np.int64),
        values,
        10,
        {"p95": lambda v: float(np.quantile(v, 0.95)), "median": np.median, "p99.9": np.max, "extra": np.sum},
    )
    kind, plot = arrow_body(buckets, fmt, None)
    with pa.ipc.open_stream(base64.b64decode(plot["arrowBinary"])) as reader:
        table = reader.read_all()
    assert kind == "arrowBucketedNumeric"
    assert table.column_names == ["end_bucket_timestamp", "p95", "max", "median", "p99.9", "extra"]
    assert table.column("median").to_pylist() == [2.5] and table.column("extra").to_pylist() == [10.0]


def test_no_field_named_is_the_mean_alone() -> None:
    for version in (sc.OutputFormat.ARROW_V3, sc.OutputFormat.ARROW_V4):
        fmt = arrow_format(summarize(output_format=version))
        assert fmt is not None and [c for c, _ in fmt.bucket_columns()] == ["mean"]


REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "fields_with_legacy": (
        summarize(numeric_output_fields=[sc.NumericOutputField.MIN]),
        "numericOutputFields",
    ),
    "v2_fields_with_legacy": (summarize(numeric_output_fields_v2=[v2("MIN")]), "numericOutputFieldsV2"),
    "empty_fields": (
        summarize(output_format=sc.OutputFormat.ARROW_V3, numeric_output_fields=[]),
        "numericOutputFields",
    ),
    "both_lists": (
        summarize(
            output_format=sc.OutputFormat.ARROW_V3,
            numeric_output_fields=[sc.NumericOutputField.MIN],
            numeric_output_fields_v2=[v2("MIN")],
        ),
        "numericOutputFieldsV2",
    ),
    "percentile_beyond_one": (
        summarize(
            output_format=sc.OutputFormat.ARROW_V4,
            numeric_output_fields_v2=[
                sc.NumericOutputFieldV2(
                    percentile=sc.NumericOutputPercentile(percentile=sc.DoubleConstant(literal=1.5))
                )
            ],
        ),
        "numericOutputFieldsV2",
    ),
    "percentile_column_named_twice": (
        summarize(
            output_format=sc.OutputFormat.ARROW_V4,
            numeric_output_fields_v2=[
                sc.NumericOutputFieldV2(
                    percentile=sc.NumericOutputPercentile(percentile=sc.DoubleConstant(literal=0.95))
                ),
                sc.NumericOutputFieldV2(
                    percentile=sc.NumericOutputPercentile(
                        percentile=sc.DoubleConstant(literal=0.5), output_name="p95"
                    )
                ),
            ],
        ),
        "numericOutputFieldsV2",
    ),
    "unknown_field": (
        summarize(
            output_format=sc.OutputFormat.ARROW_V3, numeric_output_fields=[sc.NumericOutputField.UNKNOWN]
        ),
        "numericOutputFields",
    ),
    "unknown_format": (summarize(output_format=sc.OutputFormat.UNKNOWN), "outputFormat"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_cannot_be_honoured_is_refused_by_the_fields_name(name: str) -> None:
    request, field = REFUSED[name]
    with pytest.raises(ComputeError) as refused:
        arrow_format(request)
    assert refused.value.name == "InvalidComputation"
    assert refused.value.params == {"invalidTypes": "", "variant": "SummarizeSeries", "field": field}


def decoded(plot: dict[str, Any]) -> pa.Table:
    with pa.ipc.open_stream(base64.b64decode(plot["arrowBinary"])) as reader:
        return reader.read_all()


def test_a_bucket_stream_holds_each_buckets_statistics_of_its_points() -> None:
    rng = np.random.default_rng(61)
    ts = np.sort(rng.integers(1_700_000_000_000_000_000, 1_700_000_060_000_000_000, 5_000))
    ts = np.unique(ts)
    values = rng.normal(3.0, 40.0, len(ts))
    values[17] = np.nan  # a NaN stays a NaN, not a null
    width = 1_000_000_000
    fields = ("MIN", "MAX", "MEAN", "COUNT", "VARIANCE", "FIRST_POINT", "LAST_POINT", "SUM")
    kind, plot = arrow_body(
        numeric_buckets(ts, values, width),
        ArrowFormat("ARROW_V4", (*fields, "STANDARD_DEVIATION", "ROOT_MEAN_SQUARE")),
        ["vehicle"],
    )
    assert kind == "arrowBucketedNumeric" and plot["groupByKeys"] == ["vehicle"]
    rows = decoded(plot).to_pylist()
    ends = ts // width * width + width
    assert [r["end_bucket_timestamp"] for r in rows] == sorted(set(ends.tolist()))
    for row in rows:
        inside = ends == row["end_bucket_timestamp"]
        v, t = values[inside].tolist(), ts[inside].tolist()
        assert row["count"] == len(v)
        assert (row["first_timestamp"], row["last_timestamp"]) == (t[0], t[-1])
        if any(math.isnan(x) for x in v):
            assert all(math.isnan(row[c]) for c in ("sum", "mean", "variance", "standard_deviation"))
            continue
        assert (row["min"], row["max"], row["first_value"], row["last_value"]) == (
            min(v),
            max(v),
            v[0],
            v[-1],
        )
        assert math.isclose(row["mean"], statistics.fmean(v), rel_tol=1e-12)
        assert math.isclose(row["variance"], statistics.pvariance(v), rel_tol=1e-9)
        assert math.isclose(row["sum"], math.fsum(v), rel_tol=1e-12)
        assert math.isclose(row["standard_deviation"], statistics.pstdev(v), rel_tol=1e-9)
        rms = math.sqrt(math.fsum(x * x for x in v) / len(v))
        assert math.isclose(row["root_mean_square"], rms, rel_tol=1e-9)


def test_raw_points_are_timestamp_and_value_exactly() -> None:
    ts = np.array([1, 2_000_000_001, 4_000_000_002], np.int64)
    values = np.array([0.1, -math.inf, math.nan])
    kind, plot = arrow_body(NumericPoints(ts, values), ArrowFormat("ARROW_V3"), None)
    assert kind == "arrowNumeric" and "groupByKeys" not in plot
    table = decoded(plot)
    assert table.schema == pa.schema(
        [pa.field("timestamp", pa.int64(), nullable=False), pa.field("value", pa.float64())]
    )
    assert table.column("timestamp").to_pylist() == ts.tolist()
    got = table.column("value").to_pylist()
    assert got[:2] == [0.1, -math.inf] and math.isnan(got[2])


def test_an_edge_answers_arrow_as_the_compute_tier_computes_it() -> None:
    """Two tiers: the request travels as JSON and is compiled on both sides, and the edge's mirror
    of the outputs (deltas over Redis) encodes the same ArrowPlot frames as the original."""
    node = series_node(buckets=10)
    node["series"].update(outputFormat="ARROW_V4", numericOutputFieldsV2=[{"type": "field", "field": "SUM"}])
    request = ComputationRequest(node, 60 * SECOND, {"x": channel_variable("ri.m", "temp")}, None)
    plan = ComputationRequest.from_json(request.to_json()).compile(Limits())
    assert plan.arrow == ArrowFormat("ARROW_V4", ("SUM",))
    mirror = ResultMirror(request, request.compile(Limits()))
    ts = np.arange(1, 101, dtype=np.int64) * SECOND // 10
    outputs = {(): numeric_buckets(ts, np.linspace(-3.0, 7.0, len(ts)), SECOND)}
    message = {"t": wire.SNAPSHOT, "e": "a", "v": 0, "end": 11 * SECOND, "o": deltas.whole(outputs)}
    mirror.apply(deltas.decode(deltas.encode(message)))  # as the edge receives it
    sent = frames.full_update(mirror.snapshot(None), mirror.plan.grouped, mirror.plan.arrow)
    assert sent == frames.full_update(outputs, plan.grouped, plan.arrow)
    result = json.loads(sent)["full"]["result"]
    assert result["type"] == "arrowBucketedNumeric"
    assert decoded(result["arrowBucketedNumeric"]).column_names == ["end_bucket_timestamp", "sum"]
