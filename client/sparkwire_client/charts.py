"""Builders for the charts that sit beside a time chart: a histogram of values (numeric or enum),
an X-Y scatter (and its 3D form) and a multivariate bucketing, as `ComputableNode`s ready to
subscribe.

    temp, rpm = numeric_channel(rid, "engine.temp"), numeric_channel(rid, "engine.rpm")
    spread = histogram({"temp": temp}, bucket_count=20)
    curve = scatter(rpm, temp, max_points=2000)       # spatial buckets beyond 2,000 pairs

A histogram's or scatter's result has no append form in Nominal's protocol: every update is a
FullResult, and `View.rows()` holds the chart; a multivariate result appends buckets
(docs/protocol.md, the chart table)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from sparkwire_client.nodes import (
    Computable,
    EnumSeries,
    Json,
    Node,
    NumericSeries,
    _duration,
    _literal,
    _union,
)

ScatterAggregation = Literal["MEAN", "MIN", "MAX", "FIRST", "LAST"]


def histogram(
    inputs: Mapping[str, NumericSeries],
    bucket_count: int | None = None,
    width: float | None = None,
    offset: float | None = None,
) -> Computable:
    """How many values of each input (keyed by the names given) fall in each value bucket:
    `bucket_count` buckets over the values' range (the server's default: 100), or buckets of
    `width` shifted right by `offset`."""
    if bucket_count is not None and width is not None:
        raise ValueError("give bucket_count or width, not both")
    body: Json = {"inputs": {name: s.json for name, s in inputs.items()}}
    if bucket_count is not None:
        body["bucketStrategy"] = _union("bucketCount", _literal(int(bucket_count)))
    elif width is not None:
        strategy: Json = {"width": _literal(float(width))}
        if offset is not None:
            strategy["offset"] = _literal(float(offset))
        body["bucketStrategy"] = _union("bucketWidthAndOffset", strategy)
    elif offset is not None:
        raise ValueError("offset needs a width")
    return Computable(_union("histogram", _union("numeric", body)), Node._merge(*inputs.values()))


def enum_histogram(inputs: Mapping[str, EnumSeries]) -> Computable:
    """How many points of each input carry each label."""
    body: Json = {"inputs": {name: s.json for name, s in inputs.items()}}
    return Computable(_union("histogram", _union("enum", body)), Node._merge(*inputs.values()))


def scatter(
    x: NumericSeries,
    y: NumericSeries,
    max_points: int | None = None,
    bounds: tuple[float, float, float, float] | None = None,
    temporal: tuple[ScatterAggregation, ScatterAggregation] | None = None,
) -> Computable:
    """The (x, y) pairs of two series aligned in time; beyond `max_points` pairs (default 2,000,
    at most 10,000) buckets: spatial ones, or with `temporal=(x_aggregation, y_aggregation)` one
    aggregated pair per time bucket. `bounds` = (min_x, max_x, min_y, max_y), inclusive."""
    body: Json = {"input": _union("scatter", {"x": x.json, "y": y.json})}
    if max_points is not None:
        body["maxPoints"] = int(max_points)
    if bounds is not None:
        keys = ("minX", "maxX", "minY", "maxY")
        body["bounds"] = {k: _literal(float(v)) for k, v in zip(keys, bounds, strict=True)}
    if temporal is not None:
        body["summarizationStrategy"] = _union(
            "temporal", {"xAggregation": temporal[0], "yAggregation": temporal[1]}
        )
    return Computable(_union("cartesian", body), Node._merge(x, y))


def scatter3d(
    x: NumericSeries,
    y: NumericSeries,
    z: NumericSeries,
    max_points: int | None = None,
    bounds: tuple[float, float, float, float, float, float] | None = None,
) -> Computable:
    """The (x, y, z) triples of three series aligned in time, always as spatial buckets (octants),
    at most `max_points` of them (default 2,000; a bucket per distinct point while they fit).
    `bounds` = (min_x, max_x, min_y, max_y, min_z, max_z), inclusive."""
    body: Json = {"input": _union("scatter3d", {"x": x.json, "y": y.json, "z": z.json})}
    if max_points is not None:
        body["maxPoints"] = int(max_points)
    if bounds is not None:
        keys = ("minX", "maxX", "minY", "maxY", "minZ", "maxZ")
        body["bounds"] = {k: _literal(float(v)) for k, v in zip(keys, bounds, strict=True)}
    return Computable(_union("cartesian3d", body), Node._merge(x, y, z))


def multivariate(
    inputs: Sequence[tuple[NumericSeries | EnumSeries, Sequence[str]]],
    bucket_count: int | None = None,
    radius_seconds: float | None = None,
) -> Computable:
    """Several series aligned on the first one's timestamps (each other forward-filled, no older
    than `radius_seconds`, default 1 s) and bucketed in time (`bucket_count` buckets over the window,
    default 1,000): per bucket, each input's aggregations in order (numeric: MEAN, MIN, MAX, FIRST,
    LAST; enum: MODE). Appendable: a bucket replaces the one with the same end."""
    body: Json = {
        "inputs": [
            _union(
                "enum" if isinstance(s, EnumSeries) else "numeric",
                {"series": s.json, "aggregations": list(how)},
            )
            for s, how in inputs
        ]
    }
    if bucket_count is not None:
        body["bucketCount"] = int(bucket_count)
    if radius_seconds is not None:
        radius = _union("literal", _duration(radius_seconds))
        body["interpolationConfiguration"] = _union(
            "forwardFillInterpolation", {"interpolationRadius": radius}
        )
    return Computable(_union("multivariate", body), Node._merge(*(s for s, _ in inputs)))
