"""The reference evaluation (tests/reference.py) of the NumericSeries variants beyond the first subset,
written from nominal-api's docs in plain Python (`math`, ints), never from the server's code.

- sin/cos/tan/asin/acos, power, modulo (the remainder takes the dividend's sign), floorDivide
  (floor(left / right)), atan2(y, x): IEEE results, NaN where the maths has none.
- bit operations: the value cast to int64 (truncated toward zero; NaN/inf have no integer: no
  point), then the operation on 64-bit two's complement.
- ifElse, max, min, mean, sum, product: the inputs aligned by forward fill (1 s radius or the
  node's own), the condition and the branches at each aligned timestamp.
- union: every point, points sharing a timestamp merged by the operation; selectNewestPoints: the
  last N points; dropNan; approximateFilter; timeDifference; absoluteTimestamp; enumToNumeric."""

from __future__ import annotations

import itertools
import math
from typing import Any

from tests import reference as r

INT64 = 2**64


def _safe(f: Any, *args: float) -> float:
    try:
        return float(f(*args))
    except (ValueError, ZeroDivisionError):
        return math.nan
    except OverflowError:
        return math.inf


def _asin(v: float) -> float:
    return math.asin(v) if -1.0 <= v <= 1.0 else math.nan


def _acos(v: float) -> float:
    return math.acos(v) if -1.0 <= v <= 1.0 else math.nan


TRIG = {
    "sin": lambda v: _safe(math.sin, v),
    "cos": lambda v: _safe(math.cos, v),
    "tan": lambda v: _safe(math.tan, v),
    "asin": _asin,
    "acos": _acos,
}


def _power(a: float, b: float) -> float:
    if a == 0 and b < 0:
        return math.inf
    return _safe(math.pow, a, b)


def _floor_divide(a: float, b: float) -> float:
    q = r._divide(a, b)
    return q if math.isnan(q) or math.isinf(q) else float(math.floor(q))


BINARY = {
    "power": (("base", "exponent"), _power),
    "modulo": (("left", "right"), lambda a, b: _safe(math.fmod, a, b)),
    "floorDivide": (("left", "right"), _floor_divide),
    "atan2": (("y", "x"), math.atan2),
}


def _wrap(i: int) -> int:
    return (i + 2**63) % INT64 - 2**63


def _bits(op: str, v: float, k: int) -> float | None:
    if math.isnan(v) or math.isinf(v) or not -(2**63) <= v < 2**63:
        return None
    i = int(v)  # truncates toward zero
    if op in ("bitAnd", "and"):
        return float(_wrap(i & k))
    if op in ("bitOr", "or"):
        return float(_wrap(i | k))
    if op in ("bitXor", "xor"):
        return float(_wrap(i ^ k))
    if op in ("bitShiftLeft", "shiftLeft"):
        return float(_wrap(i << k))
    if op in ("bitShiftRight", "shiftRight"):
        return float(i >> k)
    return float((i >> k) & 1)  # bitTest


def _radius(body: dict[str, Any]) -> int:
    config = body.get("interpolationConfiguration")
    if config is None:
        return r.FFILL_RADIUS
    return r._duration(config["forwardFillInterpolation"]["interpolationRadius"]["literal"])


def _align(inputs: list[Any], radius: int) -> list[tuple[int, list[Any]]]:
    saved = r.FFILL_RADIUS
    r.FFILL_RADIUS = radius  # value_at reads the module's radius
    try:
        return r.align(inputs)
    finally:
        r.FFILL_RADIUS = saved


def _condition(env: r.Env, node: dict[str, Any], leaves: list[Any]) -> Any:
    kind, body = node["type"], node[node["type"]]
    if kind in ("and", "or"):
        a, b = _condition(env, body["left"], leaves), _condition(env, body["right"], leaves)
        return (lambda vs: a(vs) and b(vs)) if kind == "and" else (lambda vs: a(vs) or b(vs))
    compare = r.COMPARE[
        {
            "greaterThan": "GREATER_THAN",
            "greaterThanOrEqualTo": "GREATER_THAN_OR_EQUAL_TO",
            "lessThan": "LESS_THAN",
            "lessThanOrEqualTo": "LESS_THAN_OR_EQUAL_TO",
            "equalTo": "EQUAL_TO",
            "notEqualTo": "NOT_EQUAL_TO",
        }[kind]
    ]
    i = len(leaves)
    leaves.extend([r.numeric(env, body["left"]), r.numeric(env, body["right"])])
    return lambda vs: compare(vs[i], vs[i + 1])


def _reduce(kind: str, values: list[float]) -> float:
    if any(math.isnan(v) for v in values):
        return math.nan
    if kind == "max":
        return max(values)
    if kind == "min":
        return min(values)
    if kind == "sum":
        return math.fsum(values)
    if kind == "mean":
        return math.fsum(values) / len(values)
    return math.prod(values)


def _merge(values: list[float], operation: str) -> float:
    n = len(values)
    if operation == "COUNT":
        return float(n)
    if operation in ("MIN", "MAX", "SUM", "MEAN"):
        return _reduce({"MIN": "min", "MAX": "max", "SUM": "sum", "MEAN": "mean"}[operation], values)
    if operation == "ROOT_MEAN_SQUARE":
        return math.sqrt(math.fsum(v * v for v in values) / n)
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)


# unitConversion: (input unit, output unit) -> (scale, offset), from the units' definitions (1 psi =
# 6.894757293168361 kPa; degF = 1.8 * degC + 32; 1 km/h = 1/3.6 m/s).
CONVERSIONS = {
    ("[psi]", "kPa"): (6.894757293168361, 0.0),
    ("Cel", "[degF]"): (1.8, 32.0),
    ("km/h", "m/s"): (1 / 3.6, 0.0),
}
# arithmetic / filterByExpression: each expression the tests send, as the Python function it means.
EXPRESSIONS: dict[str, Any] = {
    "a * 2 + b^2 - sqrt(abs(a))": lambda v: v["a"] * 2 + v["b"] ** 2 - math.sqrt(abs(v["a"])),
    "(a - b) / (a + b)": lambda v: r._divide(v["a"] - v["b"], v["a"] + v["b"]),
    "a > 1 && b < 10": lambda v: v["a"] > 1 and v["b"] < 10,
    "-3 <= a <= 3 or not (b > 5)": lambda v: -3 <= v["a"] <= 3 or not v["b"] > 5,
}


def _unit(node: dict[str, Any]) -> str:
    kind, body = node["type"], node[node["type"]]
    return body["unit"] if kind == "unitOverride" else body["outputUnit"]


def _percentile(values: list[float], p: float) -> float:
    """Linear between the two nearest ranks (Hyndman and Fan's 7th definition)."""
    v = sorted(values)
    h = (len(v) - 1) * p
    lo = math.floor(h)
    return v[lo] if lo + 1 >= len(v) else v[lo] + (h - lo) * (v[lo + 1] - v[lo])


def _aggregate(op: dict[str, Any] | str, values: list[float]) -> float:
    """A NumericAggregationOperator (a union) or a NumericAggregationFunction (an enum value)."""
    name = op if isinstance(op, str) else op["type"]
    n = len(values)
    if name == "percentile":
        assert isinstance(op, dict)
        return _percentile(values, op["percentile"]["percentile"]["literal"])
    if name in ("count", "COUNT"):
        return float(n)
    if name in ("sum", "SUM"):
        return math.fsum(values)
    if name in ("average", "MEAN"):
        return math.fsum(values) / n
    if name in ("min", "MIN"):
        return min(values)
    if name in ("max", "MAX"):
        return max(values)
    if name in ("rootMeanSquare", "ROOT_MEAN_SQUARE"):
        return math.sqrt(math.fsum(v * v for v in values) / n)
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)


def _under(points: list[tuple[int, float]], rs: list[tuple[float, float]]) -> list[tuple[float, list[float]]]:
    """Each range [start, end) holding points, with their values."""
    out = []
    for start, end in rs:
        values = [v for t, v in points if start <= t < end]
        if values:
            out.append((start, values))
    return out


def more_numeric(env: r.Env, kind: str, body: dict[str, Any]) -> Any:
    if kind in TRIG:
        x = r.numeric(env, body["x"])
        if isinstance(x, r.Constant):
            return r.Constant(TRIG[kind](x.value))
        return [(t, TRIG[kind](v)) for t, v in x]
    if kind in BINARY:
        (first, second), f = BINARY[kind]
        inputs = [r.numeric(env, body[first]), r.numeric(env, body[second])]
        return [(t, f(a, b)) for t, (a, b) in r.align(inputs)]
    if kind in ("bitAnd", "bitOr", "bitXor", "bitShiftLeft", "bitShiftRight", "bitTest"):
        k = body["index" if kind == "bitTest" else "operand"]["literal"]
        out = [(t, _bits(kind, v, k)) for t, v in r._points(r.numeric(env, body["input"]))]
        return [(t, v) for t, v in out if v is not None]
    if kind == "bitOperation":
        fkind = body["function"]["type"]
        fbody = body["function"][fkind]
        k = fbody["index" if fkind == "bitTest" else "operand"]
        out = [(t, _bits(fkind, v, k)) for t, v in r._points(r.numeric(env, body["input"]))]
        return [(t, v) for t, v in out if v is not None]
    if kind == "offset":
        return [(t, v + r._double(env, body["scalar"])) for t, v in r._points(r.numeric(env, body["input"]))]
    if kind == "scale":
        return [(t, v * r._double(env, body["scalar"])) for t, v in r._points(r.numeric(env, body["input"]))]
    if kind == "ifElse":
        leaves: list[Any] = []
        condition = _condition(env, body["condition"], leaves)
        leaves += [r.numeric(env, body["trueValue"]), r.numeric(env, body["falseValue"])]
        return [(t, vs[-2] if condition(vs) else vs[-1]) for t, vs in r.align(leaves)]
    if kind in ("max", "min", "mean", "sum", "product"):
        inputs = [r.numeric(env, x) for x in body["inputs"]]
        return [(t, _reduce(kind, vs)) for t, vs in _align(inputs, _radius(body))]
    if kind == "union":
        points = sorted(
            ((t, i, v) for i, x in enumerate(body["input"]) for t, v in r._points(r.numeric(env, x))),
            key=lambda p: (p[0], p[1]),
        )
        if body.get("operation") is None:
            return [(t, v) for t, _, v in points]
        runs: dict[int, list[float]] = {}
        for t, _, v in points:
            runs.setdefault(t, []).append(v)
        return [(t, _merge(vs, body["operation"])) for t, vs in runs.items()]
    if kind == "selectNewestPoints":
        points = r._points(r.numeric(env, body["input"]))
        n = body["numPoints"]["literal"]
        return points[max(len(points) - n, 0) :] if n else []
    if kind == "selectOldestPoints":  # every point written lies in the tests' window
        return r._points(r.numeric(env, body["input"]))[: body["numPoints"]["literal"]]
    if kind == "nthPointDownsample":  # counted from the window's first point: the first written
        return r._points(r.numeric(env, body["input"]))[:: body["n"]["literal"]]
    if kind == "dropNan":
        return [(t, v) for t, v in r._points(r.numeric(env, body["input"])) if not math.isnan(v)]
    if kind == "approximateFilter":
        threshold, tolerance = r._double(env, body["threshold"]), r._double(env, body["tolerance"])
        near = [(t, v, abs(v - threshold) <= tolerance) for t, v in r._points(r.numeric(env, body["input"]))]
        want = body["operator"] == "EQUAL_TO"
        return [(t, v) for t, v, is_near in near if is_near == want]
    if kind == "timeDifference":
        points = r._points(r.series(env, body["input"]))
        unit = r.UNITS[body.get("timeUnit") or "SECONDS"]
        return [(t1, (t1 - t0) / unit) for (t0, _), (t1, _) in itertools.pairwise(points)]
    if kind == "absoluteTimestamp":
        unit = r.UNITS[body["timeUnit"]]
        return [(t, t / unit) for t, _ in r._points(r.series(env, body["input"]))]
    if kind == "enumToNumeric":
        mapping = {k: r._double(env, c) for k, c in body["mapping"].items()}
        default = None if body.get("defaultValue") is None else r._double(env, body["defaultValue"])
        points = r._points(r.series(env, {"type": "enum", "enum": body["input"]}))
        out = [(t, mapping.get(v, default)) for t, v in points]
        return [(t, v) for t, v in out if v is not None]
    if kind == "unaryArithmetic":
        f = {"LOG": r.UNARY["log10"], "LN": r.UNARY["ln"], "SQRT": r.UNARY["sqrt"], "ABS": abs}.get(
            body["operation"]
        ) or TRIG[body["operation"].lower()]
        return [(t, f(v)) for t, v in r._points(r.numeric(env, body["input"]))]
    if kind == "binaryArithmetic":  # ATAN2: the angle of the point (input2, input1)
        inputs = [r.numeric(env, body["input1"]), r.numeric(env, body["input2"])]
        return [(t, math.atan2(y, x)) for t, (y, x) in _align(inputs, _radius(body))]
    if kind == "unitOverride":
        return r.numeric(env, body["input"])
    if kind == "unitConversion":
        scale, offset = CONVERSIONS[(_unit(body["input"]), body["outputUnit"])]
        return [(t, v * scale + offset) for t, v in r._points(r.numeric(env, body["input"]))]
    if kind == "arithmetic":
        names = sorted(body["inputs"])
        inputs = [r.numeric(env, body["inputs"][k]) for k in names]
        f = EXPRESSIONS[body["expression"]]
        return [(t, _safe(f, dict(zip(names, vs, strict=True)))) for t, vs in _align(inputs, _radius(body))]
    if kind == "filterByExpression":
        base = r._points(r.numeric(env, body["inputs"][body["base"]]))
        others = {k: r._points(r.numeric(env, x)) for k, x in body["inputs"].items() if k != body["base"]}
        f = EXPRESSIONS[body["expression"]]
        out = []
        for t, v in base:
            values = {k: r.value_at(p, [pt for pt, _ in p], t) for k, p in others.items()}
            if any(x is None for x in values.values()):
                continue
            if f({**values, body["base"]: v}):
                out.append((t, v))
        return out
    if kind == "numericAggregation":
        shape = body["input"]["type"]
        builder = body["input"][shape]
        x = r._points(r.series(env, builder["input"]))
        op = body["operator"]
        if shape == "rollingTime":
            width = r._duration_expression(env, builder["window"])
            return [(t, _aggregate(op, [v for u, v in x if t - width < u <= t])) for t, _ in x]
        if shape == "rollingPoints":
            k = builder["points"]["literal"]
            return [
                (t, _aggregate(op, [v for _, v in x[max(0, i - k + 1) : i + 1]]))
                for i, (t, _) in enumerate(x)
            ]
        if builder["tags"]["type"] == "subset":
            from tests import reference_cross_group

            x = reference_cross_group.joined(env, builder["input"], builder["tags"]["subset"]["tags"])
        stamp = builder["timestamp"]
        width = None if stamp["type"] == "current" else r._duration_expression(env, stamp["every"])
        buckets: dict[int, list[float]] = {}
        for t, v in x:
            buckets.setdefault(t if width is None else t // width * width, []).append(v)
        return [(t, _aggregate(op, vs)) for t, vs in sorted(buckets.items())]
    if kind == "aggregate":
        runs: dict[int, list[float]] = {}
        for t, v in r._points(r.numeric(env, body["input"])):
            runs.setdefault(t, []).append(v)
        return [(t, _aggregate(body["function"], vs)) for t, vs in sorted(runs.items())]
    if kind == "aggregateUnderRanges":
        x = r._points(r.numeric(env, body["input"]))
        return [
            (int(s), _aggregate(body["operation"], vs)) for s, vs in _under(x, r.ranges(env, body["ranges"]))
        ]
    if kind == "groupWithinRangesV2":
        x = r._points(r.numeric(env, body["input"]))
        return [
            (int(s), _aggregate(body["aggregation"], vs))
            for s, vs in _under(x, r.ranges(env, body["ranges"]))
        ]
    if kind == "filterTransformation":
        rs = r.ranges(env, body["filter"])
        return [(t, v) for t, v in r._points(r.numeric(env, body["input"])) if any(s <= t < e for s, e in rs)]
    if kind == "rangeDuration":
        assert body["unboundedRangeBehavior"]["type"] == "drop"
        unit = r.UNITS[body.get("timeUnit") or "SECONDS"]
        rs = r.ranges(env, body["input"])
        return [(int(s), (e - s) / unit) for s, e in rs if not math.isinf(s) and not math.isinf(e)]
    if kind == "countDuplicate":
        counts: dict[int, int] = {}
        for x in body["inputs"]:
            for t, _ in r._points(r.series(env, {"type": "enum", "enum": x})):
                counts[t] = counts.get(t, 0) + 1
        return [(t, float(c)) for t, c in sorted(counts.items())]
    if kind == "toStartOfInterval":
        width = r._duration_expression(env, body["window"])
        return [(t // width * width, v) for t, v in r._points(r.numeric(env, body["input"]))]
    if kind == "resampleV2":
        x = r._points(r.numeric(env, body["input"]))
        iv = r._duration_expression(env, body["interval"])
        if not x:
            return []
        stamps = [t for t, _ in x]
        grid = range(-(-x[0][0] // iv) * iv, x[-1][0] + 1, iv)
        return [(g, x[r.bisect.bisect_right(stamps, g) - 1][1]) for g in grid]
    if kind == "resample":  # v1, forward fill: first and last timestamps rounded UP to the interval
        x = r._points(r.numeric(env, body["input"]))
        iv = r._duration_constant(env, body["resampleConfiguration"]["interval"])
        if not x:
            return []
        stamps = [t for t, _ in x]
        up = lambda t: -(-t // iv) * iv  # noqa: E731
        return [
            (g, x[r.bisect.bisect_right(stamps, g) - 1][1]) for g in range(up(x[0][0]), up(x[-1][0]) + 1, iv)
        ]
    if kind == "timeRangeFilter":
        start = r._duration(body["startTime"]["literal"])
        return [(t, v) for t, v in r._points(r.numeric(env, body["input"])) if t >= start]
    if kind == "rollingOperation":
        x = r._points(r.numeric(env, body["input"]))
        return r._rolling(x, r._duration_constant(env, body["window"]["duration"]), body["operator"]["type"])
    if kind in ("filterByTag", "selectTags", "zScore"):
        from tests import reference_cross_group  # it builds on this module

        return reference_cross_group.evaluate(env, kind, body, "numeric")
    raise NotImplementedError(kind)
