"""A one-shot reference evaluator for the compute subset, written for the tests from docs/protocol.md in
plain Python (lists, dicts, `math`): it reads Nominal node JSON itself and never calls the server's
code. It evaluates a node over every point written and returns what a client should see, in the
normalized form of `tests.client_view` (timestamps as int ns, enum values as strings)."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.client_view import point_order

NANOS = 1_000_000_000
MS = 1_000_000
FFILL_RADIUS = NANOS
DEFAULT_BUCKETS = 1000
DEFAULT_MAX_RANGES = 2000
UNITS = {
    "DAYS": 86_400 * NANOS,
    "HOURS": 3_600 * NANOS,
    "MINUTES": 60 * NANOS,
    "SECONDS": NANOS,
    "MILLISECONDS": MS,
    "MICROSECONDS": 1_000,
    "NANOSECONDS": 1,
}
INF = float("inf")

Points = list[tuple[int, Any]]  # sorted by timestamp, unique timestamps
Ranges = list[tuple[float, float]]  # [start, end) with -inf / inf for "since ever" / "still open"
GroupKey = tuple[tuple[str, str], ...]


@dataclass
class Store:
    """Every write, in order: (data source rid, channel, tags, points)."""

    writes: list[tuple[str, str, dict[str, str], list[tuple[int, Any]]]] = field(default_factory=list)

    def write(
        self, rid: str, channel: str, points: list[tuple[int, Any]], tags: dict[str, str] | None = None
    ) -> None:
        self.writes.append((rid, channel, dict(tags or {}), list(points)))

    def series(self) -> dict[tuple[str, str, tuple[tuple[str, str], ...]], dict[int, Any]]:
        """Per series: timestamp -> value, the latest write of a timestamp winning."""
        out: dict[tuple[str, str, tuple[tuple[str, str], ...]], dict[int, Any]] = {}
        for rid, channel, tags, points in self.writes:
            series = out.setdefault((rid, channel, tuple(sorted(tags.items()))), {})
            for t, v in points:
                series[t] = v
        return out


class Constant:
    def __init__(self, value: float) -> None:
        self.value = value


@dataclass
class Env:
    context: dict[str, Any]
    store: Store
    group: dict[str, str]  # this group's tag values ({} when not grouped)
    # Tests on a series' own tags (NOMINAL_CHANNEL: its channel's name) that every channel read below
    # a filterByTag or selectTags naming a tag beyond the grouping applies: "the series produced by input"
    narrow: tuple[Callable[[dict[str, str]], bool], ...] = ()


def passes(env: Env, channel: str, tags: dict[str, str]) -> bool:
    """Whether a series of `channel` with `tags` passes every test of `env.narrow`."""
    return all(test({**tags, "NOMINAL_CHANNEL": channel}) for test in env.narrow)


# -- constants and variables ------------------------------------------------------------------------
def _var(env: Env, name: str, kinds: tuple[str, ...]) -> Any:
    value = env.context[name]
    assert value["type"] in kinds, (name, value["type"])
    return value[value["type"]]


def _double(env: Env, c: dict[str, Any]) -> float:
    raw = c["literal"] if c["type"] == "literal" else _var(env, c["variable"], ("double", "integer"))
    return float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(raw, raw))


def _string(env: Env, c: dict[str, Any]) -> str:
    return str(c["literal"] if c["type"] == "literal" else _var(env, c["variable"], ("string",)))


def _duration(d: dict[str, int]) -> int:
    return d["seconds"] * NANOS + d.get("nanos", 0)


def _duration_constant(env: Env, c: dict[str, Any]) -> int:
    return _duration(c["literal"] if c["type"] == "literal" else _var(env, c["variable"], ("duration",)))


DURATION_UNITS = {
    "nanoseconds": 1,
    "milliseconds": MS,
    "seconds": NANOS,
    "minutes": 60 * NANOS,
    "hours": 3600 * NANOS,
    "days": 86400 * NANOS,
}


def _duration_expression(env: Env, d: dict[str, Any]) -> int:
    kind, body = d["type"], d[d["type"]]
    if kind == "reference":
        return _duration(_var(env, body["name"], ("duration",)))
    if kind in DURATION_UNITS:
        count = body[kind]
        count = count["literal"] if count["type"] == "literal" else _var(env, count["variable"], ("integer",))
        return int(count) * DURATION_UNITS[kind]
    if kind == "negate":
        return -_duration_expression(env, body["input"])
    left, right = _duration_expression(env, body["left"]), _duration_expression(env, body["right"])
    return left + right if kind == "add" else left - right


def _string_set(env: Env, c: dict[str, Any]) -> set[str]:
    return set(c["literal"] if c["type"] == "literal" else _var(env, c["variable"], ("stringSet",)))


# -- channels ---------------------------------------------------------------------------------------
def group_by_of(ds: dict[str, Any], context: dict[str, Any]) -> list[str]:
    env = Env(context, Store(), {})
    return sorted({_string(env, g) for g in ds.get("groupByTags") or []})


def _channel(env: Env, ds: dict[str, Any]) -> Points:
    rid, channel = _string(env, ds["dataSourceRid"]), _string(env, ds["channel"])
    tags = {k: _string(env, v) for k, v in (ds.get("tags") or {}).items()}
    group_by = group_by_of(ds, env.context)
    merged: dict[int, Any] = {}
    for (s_rid, s_channel, s_tags), points in env.store.series().items():
        st = dict(s_tags)
        if s_rid != rid or s_channel != channel or any(st.get(k) != v for k, v in tags.items()):
            continue
        if any(st.get(k, "") != env.group.get(k) for k in group_by) or not passes(env, s_channel, st):
            continue
        merged.update(points)
    return sorted(merged.items())


def select(env: Env, body: dict[str, Any]) -> Points:
    """`selectNumeric` of a saved dataset: "When `name` is omitted, selection starts from all channels
    in the dataset scope" (nominal-api's SelectSeries), narrowed by `env.narrow`."""
    rid = _string(env, body["dataset"]["saved"]["rid"])
    name = _string(env, body["name"]) if body.get("name") else None
    # docs/protocol.md: each channel read (one point per timestamp, as `_channel` reads one), their
    # points "merged in time order": a timestamp two channels share keeps both channels' points
    by_channel: dict[str, dict[int, Any]] = {}
    for (s_rid, s_channel, s_tags), points in env.store.series().items():
        if s_rid == rid and name in (None, s_channel) and passes(env, s_channel, dict(s_tags)):
            by_channel.setdefault(s_channel, {}).update(points)
    return sorted((p for points in by_channel.values() for p in points.items()), key=point_order)


def _reference(env: Env, ref: dict[str, Any]) -> Points:
    channel = _var(env, ref["name"], ("channel",))
    assert channel["type"] == "dataSource"
    return _channel(env, channel["dataSource"])


# -- series -----------------------------------------------------------------------------------------
def series(env: Env, node: dict[str, Any]) -> Points | Constant:
    kind, body = node["type"], node[node["type"]]
    if kind == "raw":
        return _reference(env, body)
    if kind == "numeric":
        return numeric(env, body)
    if kind == "enum":
        inner_kind, inner = body["type"], body[body["type"]]
        if inner_kind == "raw":
            return _reference(env, inner)
        if inner_kind not in ("raw", "channel"):
            from tests import reference_ranges  # it builds on this module

            return reference_ranges.enum_series(env, inner_kind, inner)
        assert inner_kind == "channel" and inner["type"] == "dataSource"
        return _channel(env, inner["dataSource"])
    raise NotImplementedError(kind)


def _points(x: Points | Constant) -> Points:
    assert not isinstance(x, Constant)
    return x


UNARY = {
    "abs": abs,
    "negate": lambda v: -v,
    "sqrt": lambda v: math.sqrt(v) if v >= 0 else (v if math.isnan(v) else math.nan),
    "ln": lambda v: math.log(v) if v > 0 else (-INF if v == 0 else math.nan),
    "log10": lambda v: math.log10(v) if v > 0 else (-INF if v == 0 else math.nan),
}


def _divide(a: float, b: float) -> float:
    if b != 0:
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(INF, a) * math.copysign(1.0, b)


BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": _divide,
}
COMPARE = {
    "GREATER_THAN": lambda v, x: v > x,
    "GREATER_THAN_OR_EQUAL_TO": lambda v, x: v >= x,
    "LESS_THAN": lambda v, x: v < x,
    "LESS_THAN_OR_EQUAL_TO": lambda v, x: v <= x,
    "EQUAL_TO": lambda v, x: v == x,
    "NOT_EQUAL_TO": lambda v, x: v != x,
}


def value_at(points: Points, stamps: list[int], t: int) -> Any | None:
    """Forward fill with a 1 s radius: the newest value at or before t, if no older than 1 s."""
    i = bisect.bisect_right(stamps, t) - 1
    if i < 0 or t - points[i][0] > FFILL_RADIUS:
        return None
    return points[i][1]


def align(inputs: list[Points | Constant]) -> list[tuple[int, list[Any]]]:
    stamps = sorted({t for x in inputs if not isinstance(x, Constant) for t, _ in x})
    own = [None if isinstance(x, Constant) else [t for t, _ in x] for x in inputs]
    out = []
    for t in stamps:
        values = [
            x.value if isinstance(x, Constant) else value_at(x, xs, t)  # type: ignore[arg-type]
            for x, xs in zip(inputs, own, strict=True)
        ]
        if all(v is not None for v in values):
            out.append((t, values))
    return out


def _negatives(points: Points, config: dict[str, Any] | None) -> Points:
    mode = (config or {"type": "allowNegativeValues"})["type"]
    if mode == "setNegativeValuesToZero":
        return [(t, 0.0 if v < 0 else v) for t, v in points]
    if mode == "excludeNegativeValues":
        return [(t, v) for t, v in points if not v < 0]
    return points


def _rolling(points: Points, window: int, op: str) -> Points:
    out = []
    first = 0
    for i, (t, _) in enumerate(points):
        while points[first][0] <= t - window:
            first += 1
        vals = [v for _, v in points[first : i + 1]]
        n = len(vals)
        if op == "count":
            r = float(n)
        elif op == "sum":
            r = sum(vals)
        elif op == "average":
            r = sum(vals) / n
        elif op == "min":
            r = min(vals)
        elif op == "max":
            r = max(vals)
        elif op == "rootMeanSquare":
            r = math.sqrt(sum(v * v for v in vals) / n)
        else:  # standardDeviation, population
            mean = sum(vals) / n
            r = math.sqrt(sum((v - mean) ** 2 for v in vals) / n)
        out.append((t, r))
    return out


BOOLEAN = {
    "greaterThan": COMPARE["GREATER_THAN"],
    "greaterThanOrEqualTo": COMPARE["GREATER_THAN_OR_EQUAL_TO"],
    "lessThan": COMPARE["LESS_THAN"],
    "lessThanOrEqualTo": COMPARE["LESS_THAN_OR_EQUAL_TO"],
    "equalTo": COMPARE["EQUAL_TO"],
    "notEqualTo": COMPARE["NOT_EQUAL_TO"],
}


def condition(env: Env, node: dict[str, Any]) -> tuple[Points | None, Any]:
    """A BooleanSeries over one series and constants: (that series' points, whether it holds at a
    timestamp of theirs)."""
    kind, body = node["type"], node[node["type"]]
    if kind in ("and", "or"):
        (lp, lc), (rp, rc) = condition(env, body["left"]), condition(env, body["right"])
        if kind == "and":
            return lp or rp, lambda t: lc(t) and rc(t)
        return lp or rp, lambda t: lc(t) or rc(t)
    left, right = numeric(env, body["left"]), numeric(env, body["right"])
    subject = next((x for x in (left, right) if not isinstance(x, Constant)), None)

    def at(x: Points | Constant) -> Any:
        if isinstance(x, Constant):
            return lambda t: x.value
        values = dict(x)
        return lambda t: values[t]

    lv, rv, op = at(left), at(right), BOOLEAN[kind]
    return subject, lambda t: op(lv(t), rv(t))


def numeric(env: Env, node: dict[str, Any]) -> Points | Constant:
    kind, body = node["type"], node[node["type"]]
    if kind == "raw":
        return _reference(env, body)
    if kind == "channel":
        return _channel(env, body["dataSource"])
    if kind == "selectNumeric":
        return select(env, body)
    if kind == "constant":
        return Constant(_double(env, body["double"]))
    if kind in UNARY:
        x = numeric(env, body["x"])
        if isinstance(x, Constant):
            return Constant(UNARY[kind](x.value))
        return [(t, UNARY[kind](v)) for t, v in x]
    if kind in BINARY:
        left, right = numeric(env, body["left"]), numeric(env, body["right"])
        if isinstance(left, Constant) and isinstance(right, Constant):
            return Constant(BINARY[kind](left.value, right.value))
        return [(t, BINARY[kind](a, b)) for t, (a, b) in align([left, right])]
    if kind == "derivative":
        x = _points(numeric(env, body["input"]))
        unit = UNITS[body.get("timeUnit") or "SECONDS"]
        rates = [(t1, (v1 - v0) / ((t1 - t0) / unit)) for (t0, v0), (t1, v1) in itertools.pairwise(x)]
        return _negatives(rates, body.get("negativeValuesConfiguration"))
    if kind == "valueDifference":
        x = _points(numeric(env, body["input"]))
        diffs = [(t1, v1 - v0) for (_, v0), (t1, v1) in itertools.pairwise(x)]
        return _negatives(diffs, body.get("negativeValuesConfiguration"))
    if kind == "timeShift":
        shift = _duration_constant(env, body["duration"])
        return [(t + shift, v) for t, v in _points(numeric(env, body["input"]))]
    if kind == "filterWhere":
        x = _points(numeric(env, body["input"]))
        _, holds = condition(env, body["condition"])
        return [(t, v) for t, v in x if holds(t)]
    if kind == "thresholdFilter":
        x = _points(numeric(env, body["input"]))
        threshold, op = _double(env, body["threshold"]), COMPARE[body["operator"]]
        return [(t, v) for t, v in x if op(v, threshold)]
    if (
        kind == "numericAggregation"
        and body["input"]["type"] == "rollingTime"
        and body["operator"]["type"] != "percentile"
    ):
        rolling = body["input"]["rollingTime"]
        x = _points(series(env, rolling["input"]))
        op = body["operator"]["type"]
        if op == "count":
            x = [(t, 0.0) for t, _ in x]
        return _rolling(x, _duration_expression(env, rolling["window"]), op)
    from tests.reference_numeric import more_numeric  # it builds on this module

    return more_numeric(env, kind, body)


# -- ranges -----------------------------------------------------------------------------------------
def _condition_ranges(points: Points, cond: Any) -> Ranges:
    out: Ranges = []
    start: int | None = None
    for t, v in points:
        if cond(v):
            if start is None:
                start = t
        elif start is not None:
            out.append((start, t))
            start = None
    if start is not None:
        out.append((start, INF))
    return out


def _normalize(ranges: Ranges) -> Ranges:
    out: list[list[float]] = []
    for s, e in sorted(ranges):
        if s >= e:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    cursor = -INF
    for s, e in ranges:
        if cursor < s:
            out.append((cursor, s))
        cursor = e
    if cursor < INF:
        out.append((cursor, INF))
    return out


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    out = [(max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b if max(s1, s2) < min(e1, e2)]
    return _normalize(out)


def ranges(env: Env, node: dict[str, Any]) -> Ranges:
    kind, body = node["type"], node[node["type"]]
    if kind == "threshold":
        x = _points(numeric(env, body["input"]))
        threshold, op = _double(env, body["threshold"]), COMPARE[body["operator"]]
        return _condition_ranges(x, lambda v: op(v, threshold))
    if kind == "minMaxThreshold":
        x = _points(numeric(env, body["input"]))
        lo, hi = _double(env, body["lowerBound"]), _double(env, body["upperBound"])
        conditions = {
            "OUTSIDE_BOUNDS": lambda v: v < lo or v > hi,
            "OUTSIDE_OR_EQUAL_TO_BOUNDS": lambda v: v <= lo or v >= hi,
            "INSIDE_BOUNDS": lambda v: lo < v < hi,
            "INSIDE_OR_EQUAL_TO_BOUNDS": lambda v: lo <= v <= hi,
        }
        return _condition_ranges(x, conditions[body["operator"]])
    if kind == "enumFilter":
        inner = body["input"]
        x = _points(series(env, {"type": "enum", "enum": inner}))
        values = _string_set(env, body["values"])
        if body["operator"] == "IS_IN":
            return _condition_ranges(x, lambda v: v in values)
        return _condition_ranges(x, lambda v: v not in values)
    if kind == "booleanRanges":
        subject, holds = condition(env, body["input"])
        return _condition_ranges([(t, t) for t, _ in subject or []], holds)
    if kind == "not":
        return _complement(ranges(env, body["input"]))
    if kind == "unionRange":
        return _normalize([r for child in body["inputs"] for r in ranges(env, child)])
    if kind == "intersectRange":
        result = ranges(env, body["inputs"][0])
        for child in body["inputs"][1:]:
            result = _intersect(result, ranges(env, child))
        return result
    from tests import reference_ranges  # it builds on this module

    return reference_ranges.ranges(env, kind, body)


# -- what the client sees ---------------------------------------------------------------------------
def bucket_width(window_ns: int, buckets: int) -> int:
    return max(MS, math.ceil(math.ceil(window_ns / buckets) / MS) * MS)


def _numeric_bucket(points: Points) -> dict[str, Any]:
    values = [v for _, v in points]
    mean = sum(values) / len(values)
    bucket = {
        "min": min(values),
        "max": max(values),
        "mean": mean,
        "count": len(values),
        "variance": sum((v - mean) ** 2 for v in values) / len(values),
    }
    if len(points) > 1:
        bucket["first"], bucket["last"] = points[0], points[-1]
    return bucket


def _enum_bucket(points: Points) -> dict[str, Any]:
    histogram: dict[str, int] = {}
    for _, v in points:
        histogram[v] = histogram.get(v, 0) + 1
    bucket: dict[str, Any] = {"histogram": histogram, "first": points[0]}
    if len(points) > 1:
        bucket["last"] = points[-1]
    return bucket


def _buckets(points: Points, width: int) -> list[tuple[int, dict[str, Any]]]:
    groups: dict[int, Points] = {}
    for t, v in points:
        groups.setdefault(t // width, []).append((t, v))
    make = _enum_bucket if points and isinstance(points[0][1], str) else _numeric_bucket
    return [((b + 1) * width, make(pts)) for b, pts in sorted(groups.items())]


def reference_buckets(points: list[tuple[int, Any]], width: int) -> list[tuple[int, dict[str, Any]]]:
    """The epoch-aligned buckets of `points` (in any order) computed the plain way, as
    tests.client_view holds them: [(exclusive end, bucket)]."""
    return _buckets(sorted(points), width)


def assert_bucket_matches(held: dict[str, Any], ref: dict[str, Any]) -> None:
    """A numeric bucket a client holds (tests.client_view's form) is the reference's: the count and
    the first/last points exactly (both absent when the bucket holds one point), the statistics to
    1e-9 (the server sums in another order)."""
    assert held["count"] == ref["count"], (held, ref)
    for stat in ("min", "max", "mean", "variance"):
        assert math.isclose(held[stat], ref[stat], rel_tol=1e-9, abs_tol=1e-9), (stat, held, ref)
    assert (held.get("first"), held.get("last")) == (ref.get("first"), ref.get("last")), (held, ref)


def is_enum(points: Points) -> bool:
    return bool(points) and isinstance(points[0][1], str)


def evaluate(
    node: dict[str, Any], context: dict[str, Any], store: Store, window_ns: int, window_start: int
) -> dict[GroupKey, tuple[str, Any]]:
    """{group: (wire kind, normalized result)} for a ComputableNode over every point in `store`,
    keeping what lies at or after `window_start`; raw points in `point_order`."""
    out = _evaluate(node, context, store, window_ns, window_start)
    return {
        g: (kind, sorted(value, key=point_order) if kind in ("numeric", "enum") else value)
        for g, (kind, value) in out.items()
    }


def _evaluate(
    node: dict[str, Any], context: dict[str, Any], store: Store, window_ns: int, window_start: int
) -> dict[GroupKey, tuple[str, Any]]:
    groups = _groups(node, context, store)
    from tests.reference_cross_group import output_groups  # it builds on this module

    regrouped = output_groups(node, groups, context, store)  # filterByTag and selectTags regroup
    groups = groups if regrouped is None else regrouped
    kind, body = node["type"], node[node["type"]]
    envs = {g: Env(context, store, dict(g)) for g in groups}
    if kind == "series":
        per_group = {
            g: [p for p in _points(series(env, body["input"])) if p[0] >= window_start]
            for g, env in envs.items()
        }
        buckets = body.get("buckets") or DEFAULT_BUCKETS
        declared_enum = body["input"]["type"] == "enum"  # an empty enum series is still an enum
        if any(len(p) > buckets for p in per_group.values()):
            width = bucket_width(window_ns, buckets)
            return {
                g: ("bucketedEnum" if is_enum(p) else "bucketedNumeric", _buckets(p, width))
                for g, p in per_group.items()
            }
        return {g: ("enum" if declared_enum or is_enum(p) else "numeric", p) for g, p in per_group.items()}
    if kind == "ranges" and body["input"]["type"] == "rangeNumericAggregation":
        from tests import reference_ranges  # it builds on this module

        return reference_ranges.range_aggregation(
            body["input"]["rangeNumericAggregation"], envs, window_start
        )
    if kind == "ranges":
        clipped = {
            g: [
                (max(s, window_start), e)
                for s, e in ranges(env, body["input"])
                if e > window_start or s == e >= window_start  # s == e: an instant
            ]
            for g, env in envs.items()
        }
        max_ranges = body.get("maxRanges") or DEFAULT_MAX_RANGES
        if any(len(r) > max_ranges for r in clipped.values()):
            width = bucket_width(window_ns, max_ranges)
            return {g: ("rangesSummary", _summaries(r, width)) for g, r in clipped.items()}
        return {g: ("range", r) for g, r in clipped.items()}
    if kind in ("histogram", "cartesian", "cartesian3d", "multivariate"):
        from tests import reference_charts  # it builds on this module

        return reference_charts.evaluate_chart(kind, body, envs, window_start, window_ns)
    if kind == "value" and body["type"] in ("firstValuePoint", "lastValuePoint"):
        from tests import reference_ranges  # it builds on this module

        return reference_ranges.select_value_point(body, envs, window_start)
    if kind == "value" and body["type"] in ("firstRange", "lastRange", "nthRange"):
        from tests import reference_ranges  # it builds on this module

        return reference_ranges.select_range(body, envs, window_start)
    if kind == "value":
        out: dict[GroupKey, tuple[str, Any]] = {}
        for g, env in envs.items():
            points = [p for p in _points(series(env, body[body["type"]])) if p[0] >= window_start]
            if not points:
                if not g:
                    out[g] = ("numeric", [])
                continue
            point = points[-1] if body["type"] == "lastPoint" else points[0]
            out[g] = ("enumPoint" if isinstance(point[1], str) else "numericPoint", point)
        return out
    raise NotImplementedError(kind)


def _summaries(r: Ranges, width: int) -> list[tuple[float, float, int]]:
    groups: dict[int, list[tuple[float, float]]] = {}
    for s, e in r:
        groups.setdefault(int(s) // width, []).append((s, e))
    return [(rs[0][0], max(e for _, e in rs), len(rs)) for _, rs in sorted(groups.items())]


def used_variables(node: Any) -> set[str]:
    """Names the node refers to: References ({"name": ...}) and variable constants."""
    found: set[str] = set()
    if isinstance(node, dict):
        if set(node) == {"name"} and isinstance(node["name"], str):
            found.add(node["name"])
        if node.get("type") == "variable" and isinstance(node.get("variable"), str):
            found.add(node["variable"])
        for v in node.values():
            found |= used_variables(v)
    elif isinstance(node, list):
        for v in node:
            found |= used_variables(v)
    return found


def _groups(node: dict[str, Any], context: dict[str, Any], store: Store) -> list[GroupKey]:
    """Tag combinations of the grouped channels that have points (one () group when not grouped)."""
    used = used_variables(node)
    grouped = [
        v["channel"]["dataSource"]
        for name, v in context.items()
        if name in used and v["type"] == "channel" and v["channel"]["dataSource"].get("groupByTags")
    ]
    if not grouped:
        return [()]
    env = Env(context, store, {})
    keys: set[GroupKey] = set()
    for ds in grouped:
        rid, channel = _string(env, ds["dataSourceRid"]), _string(env, ds["channel"])
        by = group_by_of(ds, context)
        for (s_rid, s_channel, s_tags), _ in store.series().items():
            if s_rid == rid and s_channel == channel:
                st = dict(s_tags)
                keys.add(tuple((k, st.get(k, "")) for k in by))
    return sorted(keys)
