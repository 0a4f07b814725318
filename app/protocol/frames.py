"""ServerMessage encoding: compute outputs (numpy columns) to Conjure JSON bytes, built as plain
dicts and lists (no per-point model objects); a result is encoded once and spliced into each
subscriber's envelope."""

from __future__ import annotations

import bisect
import datetime
import math
import uuid
from typing import Any, cast

import numpy as np
import orjson

from app.protocol.shared_payload import SharedPayload, spliced
from compute.evaluation.computation import GroupKey
from compute.evaluation.curve_fit_results import CurveFitOutput
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.lttb_paging import PagedPoints
from compute.evaluation.output_format import ArrowFormat
from compute.evaluation.results import (
    NO_START,
    OPEN_END,
    RANGE_AGGREGATES,
    AggregatedRanges,
    Cartesian3dBuckets,
    CartesianBuckets,
    CartesianPoints,
    EnumBuckets,
    EnumHistogram,
    EnumPoints,
    EnumValue,
    LogPoints,
    MultivariateBuckets,
    NumericBuckets,
    NumericHistogram,
    NumericPoints,
    NumericValue,
    Output,
    Ranges,
    RangesSummary,
    RangeValue,
    SinglePoint,
)
from compute.evaluation.spectra import (
    FrequencyBuckets,
    FrequencyComplex,
    FrequencyMagnitudePhase,
    FrequencyPlot,
    FrequencyPlotV2,
    Spectrum,
)
from compute.storage.log_lines import read_log_text
from schemas.timestamps import split_nanos, split_nanos_array

Json = Any


def timestamp(ns: int) -> dict[str, int]:
    s, n = split_nanos(ns)
    return {"seconds": s, "nanos": n}


def timestamps(ns: np.ndarray) -> list[dict[str, int]]:
    s, n = split_nanos_array(ns)
    return [{"seconds": a, "nanos": b} for a, b in zip(s.tolist(), n.tolist(), strict=True)]


def _double(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def doubles_json(values: np.ndarray) -> orjson.Fragment | list[float | str]:
    """`doubles(values)`: when every value is finite, written by orjson from the float64 column
    itself, the same shortest round-trip digits as from a list of floats, without a Python float
    per point (decision record 0033)."""
    if values.dtype == np.float64 and np.isfinite(values).all():
        return orjson.Fragment(orjson.dumps(np.ascontiguousarray(values), option=orjson.OPT_SERIALIZE_NUMPY))
    return doubles(values)


def doubles(values: np.ndarray) -> list[float | str]:
    """Conjure DOUBLE: JSON numbers, or "NaN"/"Infinity"/"-Infinity" (JSON has no such numbers)."""
    floats: list[float] = values.tolist()
    if np.isfinite(values).all():
        return list(floats)
    return [_double(v) for v in floats]


def _numeric_buckets(b: NumericBuckets) -> Json:
    buckets = []
    cols = zip(
        b.min.tolist(),
        b.max.tolist(),
        b.mean.tolist(),
        b.count.tolist(),
        b.variance.tolist(),
        b.first_ts.tolist(),
        b.first_value.tolist(),
        b.last_ts.tolist(),
        b.last_value.tolist(),
        strict=True,
    )
    for mn, mx, mean, count, var, fts, fv, lts, lv in cols:
        bucket: dict[str, Json] = {
            "min": _double(mn),
            "max": _double(mx),
            "mean": _double(mean),
            "count": count,
            "variance": _double(var),
            "aggregations": {},
        }
        if count > 1:
            bucket["firstPoint"] = {"timestamp": timestamp(fts), "value": _double(fv)}
            bucket["lastPoint"] = {"timestamp": timestamp(lts), "value": _double(lv)}
        buckets.append(bucket)
    for name, column in b.aggregations.items():  # numericAggregations, by the request's names
        for bucket, value in zip(buckets, column.tolist(), strict=True):
            bucket["aggregations"][name] = _double(value)
    return {"timestamps": timestamps(b.end), "buckets": buckets}


def _enum_buckets(b: EnumBuckets) -> Json:
    buckets = []
    for hist, fts, fc, lts, lc, count in zip(
        b.histograms,
        b.first_ts.tolist(),
        b.first_code.tolist(),
        b.last_ts.tolist(),
        b.last_code.tolist(),
        b.count.tolist(),
        strict=True,
    ):
        bucket: dict[str, Json] = {
            "histogram": {str(k): v for k, v in hist.items()},
            "firstPoint": {"timestamp": timestamp(fts), "value": fc},
        }
        if count > 1:
            bucket["lastPoint"] = {"timestamp": timestamp(lts), "value": lc}
        buckets.append(bucket)
    return {"timestamps": timestamps(b.end), "buckets": buckets, "categories": list(b.categories)}


def _range(start: int, end: int) -> Json:
    """A Range: `end` absent while the range is open, `start` absent if it began before any data."""
    r: dict[str, Json] = {}
    if start != NO_START:
        r["start"] = timestamp(start)
    if end != OPEN_END:
        r["end"] = timestamp(end)
    return r


def _ranges(r: Ranges) -> Json:
    return [_range(s, e) for s, e in zip(r.starts.tolist(), r.ends.tolist(), strict=True)]


def _aggregated_ranges(r: AggregatedRanges) -> Json:
    """Each Range with its `value` (a RangeValue): the operation's double, every aggregate for `all`
    (a RangeAggregation), or `noPointsInRange` for a range holding no point."""
    columns = {name: getattr(r, name).tolist() for name in RANGE_AGGREGATES}
    out = []
    for i, (s, e) in enumerate(zip(r.starts.tolist(), r.ends.tolist(), strict=True)):
        body = _range(s, e)
        if not columns["count"][i]:
            body["value"] = {"type": "noPointsInRange", "noPointsInRange": {}}
        elif r.operation == "all":
            aggregation = {name: _double(float(columns[name][i])) for name in RANGE_AGGREGATES}
            body["value"] = {"type": "aggregation", "aggregation": aggregation}
        else:
            body["value"] = {"type": "double", "double": _double(float(columns[r.operation][i]))}
        out.append(body)
    return out


def _ranges_summary(r: RangesSummary) -> Json:
    return {
        "rangesSummary": [
            {"range": _range(s, e), "subRangeCount": c}
            for s, e, c in zip(r.starts.tolist(), r.ends.tolist(), r.counts.tolist(), strict=True)
        ]
    }


def _channel_counts(channels: list[str], counts: list[int]) -> Json:
    return {name: {"count": n} for name, n in zip(channels, counts, strict=True)}


def _numeric_histogram(h: NumericHistogram) -> Json:
    """Each bucket's counts under `countsByChannel` and, for clients of the deprecated field, `buckets`."""
    k = len(h.channels)
    counts = h.counts.tolist()
    buckets = []
    for i, (lower, upper) in enumerate(zip(h.lower.tolist(), h.upper.tolist(), strict=True)):
        by_channel = _channel_counts(h.channels, counts[i * k : (i + 1) * k])
        buckets.append(
            {
                "lowerBound": _double(lower),
                "upperBound": _double(upper),
                "countsByChannel": by_channel,
                "buckets": by_channel,
            }
        )
    return {"buckets": buckets}


def _enum_histogram(h: EnumHistogram) -> Json:
    k = len(h.channels)
    counts = h.counts.tolist()
    return {
        "buckets": [
            {"value": label, "countsByChannel": _channel_counts(h.channels, counts[i * k : (i + 1) * k])}
            for i, label in enumerate(h.labels)
        ]
    }


def _cartesian_buckets(b: CartesianBuckets) -> Json:
    cols = zip(
        b.min_x.tolist(),
        b.max_x.tolist(),
        b.min_y.tolist(),
        b.max_y.tolist(),
        b.min_ts.tolist(),
        b.max_ts.tolist(),
        b.count.tolist(),
        strict=True,
    )
    return {
        "buckets": [
            {
                "minX": _double(x0),
                "maxX": _double(x1),
                "minY": _double(y0),
                "maxY": _double(y1),
                "minTimestamp": timestamp(t0),
                "maxTimestamp": timestamp(t1),
                "count": count,
            }
            for x0, x1, y0, y1, t0, t1, count in cols
        ]
    }


_EXTREMES = ("minXPoint", "maxXPoint", "minYPoint", "maxYPoint", "minZPoint", "maxZPoint")


def _cartesian3d_buckets(b: Cartesian3dBuckets) -> Json:
    """Each bucket's extreme points, and (for clients of the deprecated fields) minX ... maxZ again."""
    mean, ext, ext_ts = b.mean.tolist(), b.extremes.tolist(), b.extreme_ts.tolist()
    buckets = []
    for i, (t0, t1, count) in enumerate(
        zip(b.min_ts.tolist(), b.max_ts.tolist(), b.count.tolist(), strict=True)
    ):
        bucket: dict[str, Json] = {
            "meanX": _double(mean[3 * i]),
            "meanY": _double(mean[3 * i + 1]),
            "meanZ": _double(mean[3 * i + 2]),
        }
        for k, name in enumerate(_EXTREMES):
            x, y, z = ext[(6 * i + k) * 3 : (6 * i + k) * 3 + 3]
            bucket[name] = {
                "x": _double(x),
                "y": _double(y),
                "z": _double(z),
                "timestamp": timestamp(ext_ts[6 * i + k]),
            }
            axis = "xyz"[k // 2]
            bucket[name[:4]] = bucket[name][axis]  # minX, maxX, ...: that point's own coordinate
        bucket.update({"minTimestamp": timestamp(t0), "maxTimestamp": timestamp(t1), "count": count})
        buckets.append(bucket)
    return {"buckets": buckets}


def _multivariate(b: MultivariateBuckets) -> Json:
    """Each bucket's values in request order: a number as `float64Value`, a label as `stringValue`."""
    numbers, labels = iter(b.numbers.tolist()), iter(b.labels)
    buckets = []
    for end in b.end.tolist():
        values = [
            {"type": "float64Value", "float64Value": _double(next(numbers))}
            if column == "n"
            else {"type": "stringValue", "stringValue": next(labels)}
            for column in b.layout
        ]
        buckets.append({"timestamp": timestamp(end), "values": values})
    body: dict[str, Json] = {"buckets": buckets}
    if b.group_keys:
        body["groupByKeys"] = list(b.group_keys)
    return body


def _single_point(p: SinglePoint) -> Json:
    """Nominal's SinglePoint: its `Value` a float64Value or a stringValue. A double is what Sparkwire
    stores, so nothing is downcast (precisionLoss false)."""
    value = (
        {"type": "stringValue", "stringValue": p.value}
        if isinstance(p.value, str)
        else {
            "type": "float64Value",
            "float64Value": _double(p.value),
        }
    )
    return {"timestamp": timestamp(p.ts), "value": value, "precisionLoss": False}


def _paged_log(lines: LogPoints) -> tuple[str, Json]:
    """A page of log lines as nominal-api's PagedLogPlot: each line's message and args, and an id
    naming the point in the page (its timestamp, and its rank among the page's points of it)."""
    ts = lines.ts.tolist()
    values = []
    for i, (t, code) in enumerate(zip(ts, lines.codes.tolist(), strict=True)):
        message, args = read_log_text(lines.categories[code])
        rank = i - bisect.bisect_left(ts, t, 0, i)
        values.append({"message": message, "args": args, "id": f"{t}.{rank}"})
    return "pagedLog", {"timestamps": timestamps(lines.ts), "values": values}


def _frequency_body(out: Spectrum) -> tuple[str, Json]:
    """The frequency-domain results (compute/evaluation/spectra.py), as nominal-api names them."""
    if isinstance(out, FrequencyPlot):
        plot = {"frequencies": doubles_json(out.frequencies), "amplitudes": doubles_json(out.amplitudes)}
        if isinstance(out, FrequencyPlotV2):
            return "frequencyDomainV2", {"type": "real", "real": plot}
        return "frequencyDomain", plot
    if isinstance(out, FrequencyMagnitudePhase):
        body = {
            "frequencies": doubles_json(out.frequencies),
            "magnitudes": doubles_json(out.magnitudes),
            "phases": doubles_json(out.phases),
        }
        return "frequencyDomainV2", {"type": "magnitudeAndPhase", "magnitudeAndPhase": body}
    if isinstance(out, FrequencyComplex):
        body = {
            "frequencies": doubles_json(out.frequencies),
            "real": doubles_json(out.real),
            "imaginary": doubles_json(out.imaginary),
        }
        return "frequencyDomainV2", {"type": "complex", "complex": body}
    if isinstance(out, FrequencyBuckets):
        f, a = out.frequencies.tolist(), out.amplitudes.tolist()
        buckets = []
        for i, first in enumerate(out.first.tolist()):
            count = int(out.count[i])
            bucket: Json = {
                "frequencyStart": _double(float(out.start[i])),
                "frequencyEnd": _double(float(out.end[i])),
                "frequencyCenter": _double((float(out.start[i]) + float(out.end[i])) / 2),
                "minAmplitude": _double(float(out.min[i])),
                "maxAmplitude": _double(float(out.max[i])),
                "meanAmplitude": _double(float(out.mean[i])),
                "count": count,
                "firstPoint": {"frequency": _double(f[first]), "amplitude": _double(a[first])},
            }
            if count > 1:
                last = first + count - 1
                bucket["lastPoint"] = {"frequency": _double(f[last]), "amplitude": _double(a[last])}
            buckets.append(bucket)
        return "bucketedFrequencyDomain", {"buckets": buckets}
    rows = [
        {"start": timestamp(int(s)), "end": timestamp(int(e)), "values": doubles_json(v)}
        for s, e, v in zip(out.row_start.tolist(), out.row_end.tolist(), out.values, strict=True)
    ]
    return "spectrogram", {
        "frequencyCenters": doubles_json(out.centers),
        "frequencyEdges": doubles_json(out.edges),
        "rows": rows,
    }


def _curve_fit(out: CurveFitOutput) -> Json:
    """nominal-api's CurveFitResult / CurveFitResultV2: the fit's errors and its curve's coefficients."""
    if out.curve == "custom":
        details: Json = {
            "parameters": {k: _double(v) for k, v in out.parameters.items()},
            "converged": out.converged,
            "iterations": out.iterations,
        }
    elif out.curve == "polynomial":
        details = {"a": [_double(a) for a in out.coefficients]}
    else:
        details = {"a": _double(out.coefficients[0]), "b": _double(out.coefficients[1])}
    return {
        "r2": _double(out.r2),
        "mae": _double(out.mae),
        "mse": _double(out.mse),
        "rmse": _double(out.rmse),
        "maxAbsoluteError": _double(out.max_absolute_error),
        "sampleCount": out.sample_count,
        "curveResultDetails": {"type": out.curve, out.curve: details},
    }


def output_body(out: Output) -> tuple[str, Json]:
    """(variant, value) of a ComputeNodeResponse / ComputeNodeAppendResponse."""
    if isinstance(out, PagedPoints):  # a page: its points, and nextPageToken when a full page
        kind, body = (
            _paged_log(out.points)
            if isinstance(out.points, LogPoints)
            else output_body(cast(Output, out.points))
        )
        if out.next_token is not None:
            t, rank = out.next_token
            token = {"timestamp": timestamp(t), "id": str(rank)}
            body["nextPageToken"] = {"type": "timestampAndId", "timestampAndId": token}
        return kind, body
    if isinstance(out, NumericPoints):
        return "numeric", {"timestamps": timestamps(out.ts), "values": doubles_json(out.values)}
    if isinstance(out, NumericBuckets):
        return "bucketedNumeric", _numeric_buckets(out)
    if isinstance(out, EnumPoints):
        return "enum", {
            "timestamps": timestamps(out.ts),
            "values": out.codes.tolist(),
            "categories": list(out.categories),
        }
    if isinstance(out, EnumBuckets):
        return "bucketedEnum", _enum_buckets(out)
    if isinstance(out, Ranges):
        return "range", _ranges(out)
    if isinstance(out, AggregatedRanges):
        return "range", _aggregated_ranges(out)
    if isinstance(out, RangesSummary):
        return "rangesSummary", _ranges_summary(out)
    if isinstance(out, NumericValue):
        return "numericPoint", {"timestamp": timestamp(out.ts), "value": _double(out.value)}
    if isinstance(out, EnumValue):
        return "enumPoint", {"timestamp": timestamp(out.ts), "value": out.categories[out.code]}
    if isinstance(out, SinglePoint):
        return "singlePoint", _single_point(out)
    if isinstance(out, RangeValue):
        return "rangeValue", _range(out.start, out.end)
    if isinstance(out, NumericHistogram):
        return "numericHistogram", _numeric_histogram(out)
    if isinstance(out, EnumHistogram):
        return "enumHistogram", _enum_histogram(out)
    if isinstance(out, CartesianPoints):
        return "cartesian", {
            "timestamps": timestamps(out.ts),
            "xValues": doubles_json(out.x),
            "yValues": doubles_json(out.y),
        }
    if isinstance(out, CartesianBuckets):
        return "bucketedCartesian", _cartesian_buckets(out)
    if isinstance(out, Cartesian3dBuckets):
        return "bucketedCartesian3d", _cartesian3d_buckets(out)
    if isinstance(out, MultivariateBuckets):
        return "multivariate", _multivariate(out)
    if isinstance(out, Spectrum):
        return _frequency_body(out)
    if isinstance(out, CurveFitOutput):
        return ("curveFitV2" if out.v2 else "curveFit"), _curve_fit(out)
    raise TypeError(f"no wire form for {type(out).__name__}")


def response(outputs: dict[GroupKey, Output], grouped: bool, arrow: ArrowFormat | None = None) -> Json:
    """`arrow`: the subscription asked for Nominal's ArrowPlot (app/protocol/arrow_plot.py)."""
    if arrow is not None:  # imported when first asked: Arrow is ~35 MB of an edge's resident memory
        from app.protocol.arrow_plot import arrow_body
    if not grouped:
        kind, body = output_body(outputs[()]) if arrow is None else arrow_body(outputs[()], arrow, None)
        return {"type": kind, kind: body}
    responses = []
    for key, out in sorted(outputs.items()):
        kind, body = output_body(out) if arrow is None else arrow_body(out, arrow, [k for k, _ in key])
        responses.append(
            {
                "grouping": {"type": "tagsWithValues", "tagsWithValues": dict(key)},
                "response": {"type": kind, kind: body},
            }
        )
    return {"type": "grouped", "grouped": {"responses": responses}}


def full_update(outputs: dict[GroupKey, Output], grouped: bool, arrow: ArrowFormat | None = None) -> bytes:
    return orjson.dumps({"type": "full", "full": {"result": response(outputs, grouped, arrow)}})


def append_update(
    outputs: dict[GroupKey, Output], grouped: bool, start: int, end: int, arrow: ArrowFormat | None = None
) -> bytes:
    return orjson.dumps(
        {
            "type": "append",
            "append": {
                "start": timestamp(start),
                "end": timestamp(end),
                "result": response(outputs, grouped, arrow),
            },
        }
    )


def error_json(err: ComputeError) -> Json:
    return {
        "name": f"PersistentCompute:{err.name}",
        "message": err.message,
        "errorInstanceId": str(uuid.uuid4()),
        "statusCode": err.status_code,
        "params": err.params,
    }


def error_update(err: ComputeError) -> bytes:
    return orjson.dumps({"type": "error", "error": {"serializableError": error_json(err)}})


def subscription_update(subscription_id: str, update: bytes | SharedPayload, extra: bytes = b"") -> str:
    """Splice one encoded update (shared by all subscribers of a computation) into an envelope; a
    compressing connection deflates the shared update once for all (app/transport/deflate.py).
    `extra`: the envelope's extension fields (`extension_fields`), only for subscriptions that
    asked for them (docs/extensions.md)."""
    shared = update if isinstance(update, SharedPayload) else SharedPayload(update)
    # The id as a JSON string: a client may pick any, quotes and backslashes included.
    head = b'{"type":"subscriptionUpdate","subscriptionUpdate":{"subscriptionId":' + orjson.dumps(
        subscription_id
    )
    return spliced(head + b',"update":', shared, extra + b"}}")


def extension_fields(fields: dict[str, Any]) -> bytes:
    """`,"name":value,...` to follow an envelope's last field; empty when there are none."""
    if not fields:
        return b""
    return b"," + orjson.dumps(fields)[1:-1]


_NO_UNIT = {"type": "single", "single": {"type": "noUnitAvailable", "noUnitAvailable": []}}


def unit_result(unit: str | None) -> Json:
    """A `ComputeUnitResult`: the result's unit symbol when the computation names one (`Plan.unit`)."""
    if unit is None:
        return _NO_UNIT
    return {"type": "single", "single": {"type": "success", "success": unit}}


def creation_success(subscription_id: str, unit: str | None = None) -> str:
    return orjson.dumps(
        {
            "type": "subscriptionCreation",
            "subscriptionCreation": {
                "subscriptionId": subscription_id,
                "creation": {"type": "success", "success": {"unitResult": unit_result(unit)}},
            },
        }
    ).decode()


def creation_error(subscription_id: str, err: ComputeError) -> str:
    return orjson.dumps(
        {
            "type": "subscriptionCreation",
            "subscriptionCreation": {
                "subscriptionId": subscription_id,
                "creation": {"type": "error", "error": {"serializableError": error_json(err)}},
            },
        }
    ).decode()


def _health(kind: str, value: Json) -> str:
    return orjson.dumps({"type": "health", "health": {"type": kind, kind: value}}).decode()


def iso_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


def ping() -> str:
    return _health("ping", {"sentAt": iso_now()})


def pong(originally_sent_at: str) -> str:
    return _health("pong", {"pingOriginallySentAt": originally_sent_at, "sentAt": iso_now()})


def shutdown_notice() -> str:
    return _health("shutdownNotice", {})


def client_message_error(message: str) -> str:
    err = ComputeError("InvalidClientMessage", message)
    return _health("clientMessageError", {"error": error_json(err)})


def late_report(subscription_id: str, dropped: int, newest_ns: int | None) -> str:
    """The ServerMessage `lateReport` (only ever sent to a subscription that asked for it)."""
    report: dict[str, object] = {"subscriptionId": subscription_id, "droppedPoints": dropped}
    if newest_ns is not None:
        seconds, nanos = split_nanos(newest_ns)
        report["newestDroppedTimestamp"] = {"seconds": seconds, "nanos": nanos}
    return orjson.dumps({"type": "lateReport", "lateReport": report}).decode()


def replay_ended(subscription_id: str, then: str) -> str:
    """The ServerMessage telling a replaying subscription that its period is over (only ever sent
    to subscriptions that asked for a replay)."""
    body = {"subscriptionId": subscription_id, "then": then}
    return orjson.dumps({"type": "replayEnded", "replayEnded": body}).decode()
