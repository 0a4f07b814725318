"""Reference evaluation, written from nominal-api's docs in plain Python, of the range-on-range,
equality, stability and enum-mapping nodes (tests.reference dispatches here for them). Like
tests.reference it never calls the server's code."""

from __future__ import annotations

import itertools
import math
from typing import Any

from tests import reference as r

INF = math.inf


def _aligned(env: r.Env, inputs: list[Any], enum: bool) -> list[tuple[int, list[Any]]]:
    series = [r.series(env, {"type": "enum", "enum": x}) if enum else r.numeric(env, x) for x in inputs]
    return r.align(series)


def _all_equal(values: list[Any], tolerance: float) -> bool:
    if isinstance(values[0], str):
        return len(set(values)) == 1
    if any(math.isnan(v) for v in values):
        return False
    return max(values) - min(values) <= tolerance


def _stable(points: r.Points, window: int, min_points: int, threshold: float, percentage: bool) -> r.Ranges:
    flags = []
    for i, (t, v) in enumerate(points):
        inside = [x for s, x in points[: i + 1] if s > t - window]
        limit = threshold
        if percentage:
            limit = abs(sum(inside) / len(inside)) * threshold / 100
        ok = len(inside) >= min_points and v - min(inside) <= limit and max(inside) - v <= limit
        flags.append((t, ok))
    return r._condition_ranges(flags, lambda ok: ok)


def _differs(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return False
    return bool(a != b)


def _extrema(points: r.Points, peaks: bool, troughs: bool) -> r.Ranges:
    """Each flat run of equal values is compared with the runs on both sides; edge runs never count."""
    points = [(t, v) for t, v in points if not math.isnan(v)]
    runs: list[list[tuple[int, float]]] = []
    for t, v in points:
        if runs and runs[-1][0][1] == v:
            runs[-1].append((t, v))
        else:
            runs.append([(t, v)])
    out: r.Ranges = []
    for i in range(1, len(runs) - 1):
        v, before, after = runs[i][0][1], runs[i - 1][0][1], runs[i + 1][0][1]
        if (peaks and before < v > after) or (troughs and before > v < after):
            out += [(t, t) for t, _ in runs[i]]
    return out


def ranges(env: r.Env, kind: str, body: dict[str, Any]) -> r.Ranges:
    if kind == "rangeNumericAggregation":  # as a range series: its ranges (values are for a ranges node)
        return r.ranges(env, body["ranges"])
    if kind == "raw":  # a variable holding a ComputeNodeWithContext: its ranges, its own variables
        held = r._var(env, body["name"], ("computeNode",))
        inner = r.Env(held["context"]["variables"], env.store, env.group)
        return r.ranges(inner, held["seriesNode"]["ranges"])
    if kind in ("onChange", "categoricalOnChangeRangesV2"):
        if kind == "onChange":
            x = r._points(r.series(env, body["input"]))
        else:
            x = r._points(r.series(env, {"type": "enum", "enum": body["input"]}))
        return [(t1, t1) for (_, v0), (t1, v1) in itertools.pairwise(x) if _differs(v1, v0)]
    if kind == "seriesCrossoverRangesNode":
        out: r.Ranges = []
        last_sign = 0
        for t, (a, b) in r.align([r.numeric(env, body["inputA"]), r.numeric(env, body["inputB"])]):
            d = a - b
            sign = 0 if math.isnan(d) or d == 0 else (1 if d > 0 else -1)
            if sign:
                if last_sign and sign != last_sign:
                    out.append((t, t))
                last_sign = sign
        return out
    if kind in ("peak", "extremaRangesV2"):
        x = r._points(r.numeric(env, body["input"]))
        which = body.get("selection") or body.get("returnType")
        if which is None:
            which = "TROUGH" if body.get("returnsPeaks") is False else "PEAK"
        return _extrema(x, which in ("PEAK", "BOTH"), which in ("TROUGH", "BOTH"))
    if kind == "approximateThreshold":
        x = r._points(r.numeric(env, body["input"]))
        c, tol = r._double(env, body["threshold"]), r._double(env, body["tolerance"])
        near = (
            (lambda v: abs(v - c) <= tol)
            if body["operator"] == "EQUAL_TO"
            else (lambda v: not abs(v - c) <= tol)
        )
        return r._condition_ranges(x, near)
    if kind in ("durationFilter", "durationFilterV2"):
        if kind == "durationFilter":
            limit, op = r._duration_constant(env, body["threshold"]), body["operator"]
        else:
            limit, op = r._duration_expression(env, body["duration"]), body["comparison"]
        return [
            (s, e) for s, e in r.ranges(env, body["input"]) if r.COMPARE[op](e - s, limit)
        ]  # inf - x = inf
    if kind in ("paddedRanges", "paddedRangesV2"):
        if kind == "paddedRanges":
            pad, how = r._duration_constant(env, body["padding"]), body.get("paddingConfiguration")
        else:
            pad, how = r._duration_expression(env, body["duration"]), body["paddingConfiguration"]
        how = how or "PAD_START_AND_END"
        before = pad if how in ("PAD_START", "PAD_START_AND_END") else 0
        after = pad if how in ("PAD_END", "PAD_START_AND_END") else 0
        return r._normalize([(s - before, e + after) for s, e in r.ranges(env, body["input"])])
    if kind in ("seriesEqualityRangesNode", "numericEqualityRangesV2"):
        inputs = body["input"] if kind == "seriesEqualityRangesNode" else body["inputs"]
        tol = r._double(env, body["tolerance"]) if body.get("tolerance") else 0.0
        want = body["equalityOperator"] == "ALL_EQUAL"
        return r._condition_ranges(_aligned(env, inputs, False), lambda vs: _all_equal(vs, tol) == want)
    if kind in ("enumSeriesEqualityRangesNode", "categoricalEqualityRangesV2"):
        inputs = body["input"] if kind == "enumSeriesEqualityRangesNode" else body["inputs"]
        want = body["equalityOperator"] == "ALL_EQUAL"
        return r._condition_ranges(_aligned(env, inputs, True), lambda vs: _all_equal(vs, 0.0) == want)
    if kind in ("stabilityDetection", "stabilityDetectionV2"):
        x = r._points(r.numeric(env, body["input"]))
        if kind == "stabilityDetection":
            config = body["windowConfiguration"]
            window, min_points = r._duration_constant(env, config["duration"]), config.get("minPoints")
        else:
            window, min_points = r._duration_expression(env, body["window"]), body.get("minPoints")
        n = 2 if min_points is None else int(min_points["literal"])
        threshold = body["threshold"]
        value = r._double(env, threshold[threshold["type"]]["value"])
        return _stable(x, window, n, value, threshold["type"] == "percentage")
    raise NotImplementedError(kind)


def enum_series(env: r.Env, kind: str, body: dict[str, Any]) -> r.Points:
    if kind == "valueMap":
        x = r._points(r.numeric(env, body["input"]))
        bounds = [
            (
                None if m.get("start") is None else r._double(env, m["start"]),
                None if m.get("end") is None else r._double(env, m["end"]),
                r._string(env, m["output"]),
            )
            for m in body["mapping"]
        ]
        resolved = []
        for i, (s, e, label) in enumerate(bounds):
            lo = s if s is not None else (bounds[i - 1][1] if i else None)
            hi = e if e is not None else (bounds[i + 1][0] if i + 1 < len(bounds) else None)
            resolved.append((-INF if lo is None else lo, INF if hi is None else hi, label))
        default = r._string(env, body["default"]) if body.get("default") else None
        out = []
        for t, v in x:
            label = next((lab for lo, hi, lab in resolved if lo <= v < hi), default)
            if label is not None:
                out.append((t, label))
        return out
    if kind == "filterTransformation":
        x = r._points(r.series(env, {"type": "enum", "enum": body["input"]}))
        keep = r.ranges(env, body["filter"])
        return [(t, v) for t, v in x if any(s <= t < e for s, e in keep)]
    if kind in ("resample", "resampleV2"):
        x = r._points(r.series(env, {"type": "enum", "enum": body["input"]}))
        if kind == "resample":
            step = r._duration_constant(env, body["resampleConfiguration"]["interval"])
        else:
            step = r._duration_expression(env, body["interval"])
        if not x:
            return []
        up = lambda t: -(-t // step) * step  # noqa: E731  (rounded up to an interval multiple)
        out, i = [], 0
        for t in range(up(x[0][0]), up(x[-1][0]) + 1, step):
            while i + 1 < len(x) and x[i + 1][0] <= t:
                i += 1
            out.append((t, x[i][1]))  # the last known value at or before t
        return out
    if kind == "union":
        by_time: dict[int, list[str]] = {}
        for inner in body["input"]:
            for t, v in r._points(r.series(env, {"type": "enum", "enum": inner})):
                by_time.setdefault(t, []).append(v)
        pick = max if body["operation"] == "MAX" else min
        return [(t, pick(vs)) for t, vs in sorted(by_time.items())]
    if kind == "aggregate":  # duplicate timestamps into one value: String MIN / MAX
        x = r._points(r.series(env, {"type": "enum", "enum": body["input"]}))
        return _duplicates_as_one(x, max if body["function"] == "MAX" else min)
    if kind == "enumAggregation":  # groupBy current tags and timestamps: each timestamp's points as one
        group = body["input"]["groupBy"]
        x = r._points(r.series(env, group["input"]))
        if group["timestamp"]["type"] == "every":  # "[floor(t / window) * window, +window)", one point
            width = r._duration_expression(env, group["timestamp"]["every"])  # "at the bucket start"
            x = [(t // width * width, v) for t, v in x]
        return _duplicates_as_one(x, max if body["operator"]["type"] == "max" else min)
    if kind == "toStartOfInterval":  # floor(t / window) * window; colliding points all kept
        width = r._duration_expression(env, body["window"])
        return [
            (t // width * width, v)
            for t, v in r._points(r.series(env, {"type": "enum", "enum": body["input"]}))
        ]
    if kind == "timeRangeFilter":  # the points at or after startTime (a start only: an end cannot stream)
        start = r._duration(body["startTime"]["literal"])
        return [
            (t, v) for t, v in r._points(r.series(env, {"type": "enum", "enum": body["input"]})) if t >= start
        ]
    if kind == "nthPointDownsample":  # every n-th from the earliest (every point written is in the window)
        return r._points(r.series(env, {"type": "enum", "enum": body["input"]}))[:: body["n"]["literal"]]
    if kind in ("filterByTag", "selectTags"):
        from tests import reference_cross_group

        return reference_cross_group.evaluate(env, kind, body, "enum")
    raise NotImplementedError(kind)


def _duplicates_as_one(points: r.Points, pick: Any) -> r.Points:
    by_time: dict[int, list[str]] = {}
    for t, v in points:
        by_time.setdefault(t, []).append(v)
    return [(t, pick(vs)) for t, vs in sorted(by_time.items())]


def range_aggregation(
    body: dict[str, Any], envs: dict[r.GroupKey, r.Env], window_start: int
) -> dict[r.GroupKey, tuple[str, Any]]:
    """RangesNumericAggregation: "Aggregates the values of a numeric series at each range": each range
    in the window (clipped at its start) with the points in [start, end) (an instant: at its
    timestamp); the operation's value, every aggregate for `all`, None (noPointsInRange) for none."""
    operation = body["operation"]["type"]
    out: dict[r.GroupKey, tuple[str, Any]] = {}
    for g, env in envs.items():
        points = [p for p in r._points(r.numeric(env, body["input"])) if p[0] >= window_start]
        spans = [
            (max(s, window_start), e)
            for s, e in r.ranges(env, body["ranges"])
            if e > window_start or s == e >= window_start
        ]
        valued = []
        for s, e in spans:
            vals = [v for t, v in points if (s <= t < e) or (s == e == t)]
            if not vals:
                valued.append((s, e, None))
                continue
            n = len(vals)
            mean = sum(vals) / n
            stats = {
                "count": float(n),
                "sum": sum(vals),
                "average": mean,
                "min": min(vals),
                "max": max(vals),
                "standardDeviation": math.sqrt(sum((v - mean) ** 2 for v in vals) / n),
                "rootMeanSquare": math.sqrt(sum(v * v for v in vals) / n),
            }
            valued.append((s, e, stats if operation == "all" else stats[operation]))
        out[g] = ("range", valued)
    return out


def select_value_point(
    body: dict[str, Any], envs: dict[r.GroupKey, r.Env], window_start: int
) -> dict[r.GroupKey, tuple[str, Any]]:
    """SelectValue firstValuePoint / lastValuePoint: the window's first or last point as Nominal's
    SinglePoint (a number or a label); none: an empty series, or the group left out."""
    out: dict[r.GroupKey, tuple[str, Any]] = {}
    for g, env in envs.items():
        points = [p for p in r._points(r.series(env, body[body["type"]])) if p[0] >= window_start]
        if points:
            out[g] = ("singlePoint", points[-1] if body["type"] == "lastValuePoint" else points[0])
        elif not g:
            out[g] = ("numeric", [])  # as firstPoint / lastPoint (reference.py)
    return out


def select_range(
    body: dict[str, Any], envs: dict[r.GroupKey, r.Env], window_start: int
) -> dict[r.GroupKey, tuple[str, Any]]:
    """SelectValue firstRange / lastRange / nthRange: the index-th range overlapping the window
    (ASC from the earliest, DESC from the latest), one that began earlier starting at the window's
    start; none: an empty `range` result, or the group left out of a grouped response."""
    kind, inner = body["type"], body[body["type"]]
    if kind == "nthRange":
        node, index, descending = inner["input"], int(inner["index"]["literal"]), inner["sortOrder"] == "DESC"
    else:
        node, index, descending = inner, 0, kind == "lastRange"
    out: dict[r.GroupKey, tuple[str, Any]] = {}
    for g, env in envs.items():
        spans = [
            (max(s, window_start), e)
            for s, e in r.ranges(env, node)
            if e > window_start or s == e >= window_start
        ]
        if descending:
            spans.reverse()
        if index < len(spans):
            out[g] = ("rangeValue", spans[index])
        elif not g:
            out[g] = ("range", [])
    return out
