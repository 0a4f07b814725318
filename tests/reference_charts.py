"""The chart roots (`ComputableNode` `histogram`, `cartesian`) evaluated the plain way, for the tests:
written from nominal-api's docs of NumericHistogramNode, EnumHistogramNode, SummarizeCartesian,
SpatialDecimateStrategy and TemporalDecimateStrategy and from docs/protocol.md's chart table where
those docs are silent, in plain Python over tests/reference.py's series. It never calls the server's
code. Results are in tests.client_view's normalized form."""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Any

from tests import reference as r

DEFAULT_BUCKETS = 100
DEFAULT_MAX_POINTS = 2000


def evaluate_chart(
    kind: str, body: dict[str, Any], envs: dict[r.GroupKey, r.Env], window_start: int, window_ns: int
) -> dict[r.GroupKey, tuple[str, Any]]:
    if kind == "histogram":
        return {g: _histogram(env, body, window_start) for g, env in envs.items()}
    if kind == "cartesian3d":
        return evaluate_3d(body, envs, window_start)
    if kind == "multivariate":
        return evaluate_multivariate(body, envs, window_start, window_ns)
    pairs = {g: _pairs(env, body, window_start) for g, env in envs.items()}
    max_points = body.get("maxPoints") or DEFAULT_MAX_POINTS
    if all(len(p) <= max_points for p in pairs.values()):
        return {g: ("cartesian", p) for g, p in pairs.items()}
    strategy = body.get("summarizationStrategy") or {"type": "spatial", "spatial": {}}
    if strategy["type"] == "temporal":
        width = r.bucket_width(window_ns, max_points)
        how = strategy["temporal"]
        return {
            g: ("cartesian", _temporal(p, width, how["xAggregation"], how["yAggregation"]))
            for g, p in pairs.items()
        }
    bounds = body.get("bounds")
    return {
        g: ("bucketedCartesian", _spatial(p, max_points, bounds and _bounds(envs[g], bounds)))
        for g, p in pairs.items()
    }


# -- histograms -------------------------------------------------------------------------------------
def _in_window(points: r.Points, window_start: int) -> list[Any]:
    return [v for t, v in points if t >= window_start]


def _histogram(env: r.Env, body: dict[str, Any], window_start: int) -> tuple[str, Any]:
    kind, node = body["type"], body[body["type"]]
    names = sorted(node["inputs"])
    if kind == "enum":
        values = {
            n: _in_window(r.series(env, {"type": "enum", "enum": node["inputs"][n]}), window_start)
            for n in names
        }
        labels = sorted({v for vs in values.values() for v in vs})
        return "enumHistogram", [(label, {n: values[n].count(label) for n in names}) for label in labels]
    values = {
        n: [
            v
            for v in _in_window(
                r.series(env, {"type": "numeric", "numeric": node["inputs"][n]}), window_start
            )
            if math.isfinite(v)
        ]
        for n in names
    }
    every = [v for vs in values.values() for v in vs]
    if not every:
        return "numericHistogram", []
    strategy = node.get("bucketStrategy") or {
        "type": "bucketCount",
        "bucketCount": {"type": "literal", "literal": DEFAULT_BUCKETS},
    }
    if strategy["type"] == "bucketCount":
        count = strategy["bucketCount"]["literal"]
        lo, hi = min(every), max(every)
        # width (max - min) / n, or (max - min) / (n - 1) where n buckets on multiples of the
        # first would not reach the maximum; 1 when every value is equal
        width = 1.0 if lo == hi else (hi - lo) / count
        if lo != hi and count > 1 and math.floor(hi / width) - math.floor(lo / width) + 1 > count:
            width = (hi - lo) / (count - 1)
        offset = 0.0
        keys = list(range(math.floor(lo / width), math.floor(hi / width) + 1))  # empty buckets too
    else:
        wo = strategy["bucketWidthAndOffset"]
        width = r._double(env, wo["width"])
        offset = r._double(env, wo["offset"]) if wo.get("offset") else 0.0
        keys = sorted({math.floor((v - offset) / width) for v in every})  # buckets holding a value
    out = []
    for k in keys:
        counts = {n: sum(1 for v in values[n] if math.floor((v - offset) / width) == k) for n in names}
        out.append((k * width + offset, (k + 1) * width + offset, counts))
    return "numericHistogram", out


# -- scatter ----------------------------------------------------------------------------------------
def _bounds(env: r.Env, b: dict[str, Any]) -> tuple[float, float, float, float]:
    return (
        r._double(env, b["minX"]),
        r._double(env, b["maxX"]),
        r._double(env, b["minY"]),
        r._double(env, b["maxY"]),
    )


def _pairs(env: r.Env, body: dict[str, Any], window_start: int) -> list[tuple[int, float, float]]:
    """x and y aligned as arithmetic aligns two series (forward fill, 1 s), inside the window and the
    bounds (inclusive), without a pair holding a non-finite value."""
    scatter = body["input"]["scatter"]
    x, y = r.numeric(env, scatter["x"]), r.numeric(env, scatter["y"])
    bounds = _bounds(env, body["bounds"]) if body.get("bounds") else None
    out = []
    for t, (xv, yv) in r.align([x, y]):
        if t < window_start or not (math.isfinite(xv) and math.isfinite(yv)):
            continue
        if bounds and not (bounds[0] <= xv <= bounds[1] and bounds[2] <= yv <= bounds[3]):
            continue
        out.append((t, xv, yv))
    return out


def _aggregate(values: list[float], how: str) -> float:
    return {
        "MEAN": lambda: math.fsum(values) / len(values),
        "MIN": lambda: min(values),
        "MAX": lambda: max(values),
        "FIRST": lambda: values[0],
        "LAST": lambda: values[-1],
    }[how]()


def _temporal(pairs: list[tuple[int, float, float]], width: int, x_how: str, y_how: str) -> list[Any]:
    """Equal time buckets (epoch-aligned, stamped at their exclusive end), one pair of aggregates each."""
    buckets: dict[int, list[tuple[int, float, float]]] = {}
    for p in pairs:
        buckets.setdefault(p[0] // width, []).append(p)
    return [
        ((b + 1) * width, _aggregate([p[1] for p in ps], x_how), _aggregate([p[2] for p in ps], y_how))
        for b, ps in sorted(buckets.items())
    ]


def _leaves(points: list[tuple[Any, ...]], max_buckets: int, box: Any) -> list[list[tuple[Any, ...]]]:
    """Bisect each dimension: the bucket holding the most points (the earliest made on a tie) is
    split into the quadrants (octants in 3D) of its box (a point on a midpoint goes to the upper
    half; empty ones dropped) while the buckets stay at most `max_buckets`; coinciding points are
    never split. Points are (t, coordinate, ...)."""
    dims = len(points[0]) - 1
    box = box or [(min(p[d + 1] for p in points), max(p[d + 1] for p in points)) for d in range(dims)]
    pending = [(points, box, 0)]  # (points, box, order made)
    leaves, made = [], 0
    while pending:
        pending.sort(key=lambda e: (-len(e[0]), e[2]))
        group, edges, _ = pending.pop(0)
        if len({p[1:] for p in group}) == 1:
            leaves.append(group)
            continue
        mids = [lo + (hi - lo) / 2 for lo, hi in edges]
        parts = []
        for code in range(2**dims):  # x the lowest bit: upper half where set
            upper = [code >> d & 1 for d in range(dims)]
            part = [p for p in group if all((p[d + 1] >= mids[d]) == bool(upper[d]) for d in range(dims))]
            if part:
                sub = [(mids[d], edges[d][1]) if upper[d] else (edges[d][0], mids[d]) for d in range(dims)]
                parts.append((part, sub))
        if len(leaves) + len(pending) + len(parts) > max_buckets:
            leaves.append(group)
            leaves.extend(e[0] for e in pending)
            break
        for part, sub in parts:
            made += 1
            pending.append((part, sub, made))
    return leaves


def _spatial(pairs: list[tuple[int, float, float]], max_buckets: int, bounds: Any) -> list[Any]:
    """Buckets of pairs: their extent, first and last timestamps and count, by (minX, minY, first)."""
    if not pairs:
        return []
    box = bounds and [(bounds[0], bounds[1]), (bounds[2], bounds[3])]
    out = [
        (
            min(p[1] for p in ps),
            max(p[1] for p in ps),
            min(p[2] for p in ps),
            max(p[2] for p in ps),
            min(p[0] for p in ps),
            max(p[0] for p in ps),
            len(ps),
        )
        for ps in _leaves(pairs, max_buckets, box)
    ]
    return sorted(out, key=lambda b: (b[0], b[2], b[4]))


def evaluate_3d(
    body: dict[str, Any], envs: dict[r.GroupKey, r.Env], window_start: int
) -> dict[r.GroupKey, tuple[str, Any]]:
    """`cartesian3d`: triples aligned as arithmetic aligns three series, inside the window and the
    bounds, without a non-finite coordinate, always bucketed into octants up to `maxPoints` (2,000)
    buckets: per bucket the mean per axis, the points of each axis' minimum and maximum (the
    earliest of equal ones), first and last timestamps and count, by (min x, min y, min z, first)."""
    out: dict[r.GroupKey, tuple[str, Any]] = {}
    for g, env in envs.items():
        scatter = body["input"]["scatter3d"]
        axes = [r.numeric(env, scatter[k]) for k in ("x", "y", "z")]
        b = body.get("bounds")
        bounds = b and [
            (r._double(env, b[lo]), r._double(env, b[hi]))
            for lo, hi in (("minX", "maxX"), ("minY", "maxY"), ("minZ", "maxZ"))
        ]
        triples = [
            (t, *vs)
            for t, vs in r.align(axes)
            if t >= window_start
            and all(math.isfinite(v) for v in vs)
            and (not bounds or all(lo <= v <= hi for v, (lo, hi) in zip(vs, bounds, strict=True)))
        ]
        buckets = []
        for ps in _leaves(triples, body.get("maxPoints") or DEFAULT_MAX_POINTS, bounds) if triples else []:
            extremes = []
            for d in (1, 2, 3):
                # the earliest point holding the minimum, then the maximum, of this axis
                extremes.append(min(ps, key=lambda p, d=d: (p[d], p[0])))
                extremes.append(min(ps, key=lambda p, d=d: (-p[d], p[0])))
            means = tuple(math.fsum(p[d] for p in ps) / len(ps) for d in (1, 2, 3))
            points = tuple((p[1], p[2], p[3], p[0]) for p in extremes)
            buckets.append((means, points, min(p[0] for p in ps), max(p[0] for p in ps), len(ps)))
        buckets.sort(key=lambda b: (b[1][0][0], b[1][2][1], b[1][4][2], b[2]))
        out[g] = ("bucketedCartesian3d", buckets)
    return out


def evaluate_multivariate(
    body: dict[str, Any], envs: dict[r.GroupKey, r.Env], window_start: int, window_ns: int
) -> dict[r.GroupKey, tuple[str, Any]]:
    """`multivariate`: the driver (the input grouping by the most tags, the first on a tie) decides
    the timestamps; every other input takes its newest value at or before each, no older than the
    interpolation radius (1 s by default), and a timestamp where one has none is left out. The
    tuples in the window go into epoch-aligned buckets of ceil(window / bucketCount) (whole ms,
    default 1,000 buckets), each stamped at its exclusive end, with each input's aggregations in
    request order (MODE: the most frequent label, the first by code point on a tie)."""
    inputs = body["inputs"]
    radius = r.FFILL_RADIUS
    if body.get("interpolationConfiguration"):
        fill = body["interpolationConfiguration"]["forwardFillInterpolation"]["interpolationRadius"]
        radius = r._duration(fill["literal"])
    width = r.bucket_width(window_ns, body.get("bucketCount") or 1000)
    out: dict[r.GroupKey, tuple[str, Any]] = {}
    for g, env in envs.items():
        series = []
        for item in inputs:
            kind, inner = item["type"], item[item["type"]]
            series.append(r.series(env, {"type": kind, kind: inner["series"]}))
        grouping = [len(_group_tags(env, item[item["type"]]["series"])) for item in inputs]
        driver = grouping.index(max(grouping))
        tuples = []
        for t, _ in series[driver]:
            if t < window_start:
                continue
            values = []
            for s in series:
                stamps = [p[0] for p in s]
                i = bisect_right(stamps, t) - 1
                values.append(s[i][1] if i >= 0 and t - s[i][0] <= radius else None)
            if all(v is not None for v in values):
                tuples.append((t, values))
        buckets: dict[int, list[list[Any]]] = {}
        for t, values in tuples:
            buckets.setdefault(t // width, []).append(values)
        rows = []
        for b, members in sorted(buckets.items()):
            row: list[Any] = []
            for j, item in enumerate(inputs):
                column = [m[j] for m in members]
                for how in item[item["type"]]["aggregations"]:
                    row.append(_mode(column) if how == "MODE" else _aggregate(column, how))
            rows.append(((b + 1) * width, tuple(row)))
        out[g] = ("multivariate", rows)
    return out


def _mode(labels: list[str]) -> str:
    return min(set(labels), key=lambda label: (-labels.count(label), label))


def _group_tags(env: r.Env, node: dict[str, Any]) -> set[str]:
    """The tags the channels an input reads group by."""
    tags: set[str] = set()
    for name in r.used_variables(node):
        v = env.context.get(name)
        if v and v["type"] == "channel":
            tags |= set(r.group_by_of(v["channel"]["dataSource"], env.context))
    return tags
