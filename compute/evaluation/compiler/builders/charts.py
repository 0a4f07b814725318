"""Builders of the chart roots (`ComputableNode` `histogram`, `cartesian`, `cartesian3d`; evaluators in
nodes/charts.py) and `multivariate`, registered as `ComputableNode` variants."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.helpers import one_of
from compute.evaluation.compiler.limits import ResultOptions, too_many_points
from compute.evaluation.compiler.registry import Build, builds
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError, MalformedNode, refuse
from compute.evaluation.nodes import OutputNode, SeriesNode
from compute.evaluation.nodes.align import FFILL_RADIUS_NS
from compute.evaluation.nodes.charts import (
    AGGREGATIONS,
    DEFAULT_HISTOGRAM_BUCKETS,
    DEFAULT_SCATTER_POINTS,
    MAX_SCATTER_POINTS,
    Bounds,
    DriverAligned,
    EnumHistogramChart,
    MultivariateChart,
    NumericHistogramChart,
    Scatter3dChart,
    ScatterChart,
)
from compute.evaluation.nodes.cross_group import crosses
from compute.evaluation.nodes.math import Pointwise
from compute.evaluation.summarize import MS

Json = Any
B = Builder


def _no_appends(options: ResultOptions, what: str) -> None:
    """A chart's results have no append form (nominal-api's ComputeNodeAppendResponse lists none),
    so a subscription that asks for appends only cannot be served."""
    if options.append_only:
        raise ComputeError(
            "UnavailableResultConfiguration",
            f"'{what}' results have no append form; subscribe without resultConfiguration.appendOnly",
            {"reason": "APPENDS_NOT_SUPPORTED_FOR_COMPUTE"},
        )


def _integer(value: Json, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedNode(f"{what} must be an integer")
    return value


# -- histogram -------------------------------------------------------------------------------------
def histogram(b: B, value: Json) -> OutputNode:
    limits, options = b.limits, b.options
    _no_appends(options, "histogram")
    kind, inner = one_of(value, "Histogram", ("numeric", "enum"))
    what = "NumericHistogramNode" if kind == "numeric" else "EnumHistogramNode"
    o = b.obj(inner, what)
    inputs = b.obj(b.get(o, "inputs", what), f"{what}.inputs")
    if not inputs:
        raise refuse("histogram", "inputs", "needs at least one input series")
    names = sorted(inputs)  # the channels' order in every bucket's counts
    if kind == "enum":
        return EnumHistogramChart(names, [b.enum(inputs[name]) for name in names])
    series: list[SeriesNode] = [b.timed(b.numeric(inputs[name]), "histogram") for name in names]
    strategy = o.get("bucketStrategy")
    if strategy is None:
        return NumericHistogramChart(names, series, bucket_count=DEFAULT_HISTOGRAM_BUCKETS)
    skind, body = one_of(strategy, "NumericHistogramBucketStrategy", ("bucketCount", "bucketWidthAndOffset"))
    if skind == "bucketCount":
        count = b.integer_constant(body)
        if count < 1:
            raise refuse("histogram", "bucketStrategy.bucketCount", f"must be at least 1, got {count}")
        if count > limits.max_points:
            raise too_many_points(count, "buckets", limits)
        return NumericHistogramChart(names, series, bucket_count=count)
    wo = b.obj(body, "NumericHistogramBucketWidthAndOffset")
    width = b.double_constant(b.get(wo, "width", "bucketWidthAndOffset"))
    if not (width > 0 and math.isfinite(width)):
        raise refuse("histogram", "bucketStrategy.width", f"must be a positive number, got {width}")
    offset = 0.0 if wo.get("offset") is None else b.double_constant(wo["offset"])
    if not (offset >= 0 and math.isfinite(offset)):  # "The offset must be non-negative."
        raise refuse("histogram", "bucketStrategy.offset", f"must be a non-negative number, got {offset}")
    return NumericHistogramChart(names, series, width=width, offset=offset)


# -- cartesian -------------------------------------------------------------------------------------
def cartesian(b: B, value: Json) -> OutputNode:
    window_ns, options = b.window_ns, b.options
    _no_appends(options, "cartesian")
    what = "SummarizeCartesian"
    o = b.obj(value, what)
    _, scatter = one_of(b.get(o, "input", what), "Cartesian", ("scatter",))
    s = b.obj(scatter, "Scatter")
    x = b.timed(b.numeric(b.get(s, "x", "scatter")), "scatter")
    y = b.timed(b.numeric(b.get(s, "y", "scatter")), "scatter")
    max_points = _count(o, "maxPoints", DEFAULT_SCATTER_POINTS, MAX_SCATTER_POINTS, "cartesian")
    bounds = None
    if o.get("bounds") is not None:
        bo = b.obj(o["bounds"], "CartesianBounds")
        edges = [b.double_constant(b.get(bo, k, "bounds")) for k in ("minX", "maxX", "minY", "maxY")]
        if not (edges[0] <= edges[1] and edges[2] <= edges[3]):  # NaN too
            raise refuse("cartesian", "bounds", f"each minimum must be at most its maximum, got {edges}")
        bounds = Bounds(*edges)
    temporal = None
    if o.get("summarizationStrategy") is not None:
        skind, body = one_of(
            o["summarizationStrategy"], "ScatterSummarizationStrategy", ("spatial", "temporal")
        )
        if skind == "temporal":
            to = b.obj(body, "TemporalDecimateStrategy")
            aggregations = [b.get(to, k, "temporal") for k in ("xAggregation", "yAggregation")]
            for a in aggregations:
                if a not in AGGREGATIONS:
                    raise MalformedNode(f"temporal: not a ScatterTemporalAggregation: {a!r}")
            temporal = (aggregations[0], aggregations[1])
    # x and y as the two components of one alignment (forward fill, 1 s), so their pairs share a time
    xs, ys = (Pointwise("cartesian", [x, y], _component(i)) for i in range(2))
    return ScatterChart(xs, ys, window_ns, max_points, bounds, temporal)


def _count(o: dict[str, Json], key: str, default: int, maximum: int, what: str) -> int:
    """An optional count (`maxPoints`, `bucketCount`): its documented default when absent, at least
    1, and above its documented maximum `TooManyPoints`."""
    count = default if o.get(key) is None else _integer(o[key], key)
    if count < 1:
        raise refuse(what, key, f"must be at least 1, got {count}")
    if count > maximum:
        raise ComputeError(
            "TooManyPoints", f"{key} {count} exceeds the maximum of {maximum}", {"limit": str(maximum)}
        )
    return count


def cartesian3d(b: B, value: Json) -> OutputNode:
    options = b.options
    _no_appends(options, "cartesian3d")
    what = "SummarizeCartesian3d"
    o = b.obj(value, what)
    _, scatter = one_of(b.get(o, "input", what), "Cartesian3d", ("scatter3d",))
    s = b.obj(scatter, "Scatter3d")
    if s.get("driverSeries") is not None:
        raise refuse(
            "cartesian3d",
            "driverSeries",
            "aligning on one series' timestamps is not built; omit it to align on the union of the "
            "three series' timestamps (forward fill, 1 s)",
        )
    axes = [b.timed(b.numeric(b.get(s, k, "scatter3d")), "scatter3d") for k in ("x", "y", "z")]
    max_points = _count(o, "maxPoints", DEFAULT_SCATTER_POINTS, MAX_SCATTER_POINTS, "cartesian3d")
    bounds = None
    if o.get("bounds") is not None:
        bo = b.obj(o["bounds"], "Cartesian3dBounds")
        keys = ("minX", "maxX", "minY", "maxY", "minZ", "maxZ")
        edges = [b.double_constant(b.get(bo, k, "bounds")) for k in keys]
        if not all(edges[i] <= edges[i + 1] for i in (0, 2, 4)):  # NaN too
            raise refuse("cartesian3d", "bounds", f"each minimum must be at most its maximum, got {edges}")
        bounds = [(edges[0], edges[1]), (edges[2], edges[3]), (edges[4], edges[5])]
    if o.get("summarizationStrategy") is not None:
        skind, _ = one_of(o["summarizationStrategy"], "ScatterSummarizationStrategy", ("spatial", "temporal"))
        if skind != "spatial":  # "Only spatial decimation is supported."
            raise refuse("cartesian3d", "summarizationStrategy", "only spatial decimation is supported")
    x, y, z = (Pointwise("cartesian3d", axes, _component(i)) for i in range(3))
    return Scatter3dChart(x, y, z, max_points=max_points, bounds=bounds)


def _component(i: int) -> Callable[[list[np.ndarray]], np.ndarray]:
    return lambda columns: columns[i]


DEFAULT_MULTIVARIATE_BUCKETS = 1000  # SummarizeMultivariate.bucketCount's documented default
MAX_MULTIVARIATE_BUCKETS = 10_000  # ... and its documented maximum
NUMERIC_MULTIVARIATE = ("MEAN", "MIN", "MAX", "FIRST", "LAST")


def multivariate(b: B, value: Json) -> OutputNode:
    window_ns = b.window_ns
    what = "SummarizeMultivariate"
    o = b.obj(value, what)
    if o.get("outputFormat") not in (None, "LEGACY"):
        raise refuse("multivariate", "outputFormat", f"{o['outputFormat']} is not served; use LEGACY (JSON)")
    count = _count(o, "bucketCount", DEFAULT_MULTIVARIATE_BUCKETS, MAX_MULTIVARIATE_BUCKETS, "multivariate")
    radius = FFILL_RADIUS_NS
    if o.get("interpolationConfiguration") is not None:
        _, fill = b.variant("InterpolationConfiguration", o["interpolationConfiguration"])
        radius = b.duration_constant(
            b.get(b.obj(fill, "forwardFillInterpolation"), "interpolationRadius", what)
        )
        if radius < 0:
            raise refuse(
                "multivariate", "interpolationConfiguration", f"a negative radius ({human_duration(radius)})"
            )
    inputs = b.get(o, "inputs", what)
    if not isinstance(inputs, list):
        raise MalformedNode(f"{what}.inputs must be a list")
    if not inputs:
        raise refuse("multivariate", "inputs", "needs at least one input series")
    series: list[SeriesNode] = []
    aggregations: list[list[str]] = []
    tags: list[int] = []  # how many tags each input groups by: the driver groups by the most
    for item in inputs:
        kind, body = one_of(item, "MultivariateInput", ("numeric", "enum"))
        io = b.obj(body, f"Multivariate{kind.capitalize()}Input")
        mark = len(b.selectors)
        raw = b.get(io, "series", "MultivariateInput")
        series.append(b.timed(b.numeric(raw), "multivariate") if kind == "numeric" else b.enum(raw))
        tags.append(max((len(sel.group_by) for sel in b.selectors[mark:]), default=0))
        how = b.get(io, "aggregations", "MultivariateInput")
        allowed = NUMERIC_MULTIVARIATE if kind == "numeric" else ("MODE",)
        if not isinstance(how, list) or not all(isinstance(a, str) and a in allowed for a in how):
            raise MalformedNode(f"MultivariateInput.aggregations: each one of {', '.join(allowed)}")
        if not how:
            raise refuse("multivariate", "aggregations", "an input without aggregations adds no value")
        aggregations.append(list(how))
    # "The series with the largest tag group acts as the driver": the first that groups by the most
    driver = tags.index(max(tags))
    order = [driver, *(i for i in range(len(series)) if i != driver)]
    aligned = [series[i] for i in order]
    columns: list[SeriesNode] = [DriverAligned(aligned, order.index(i), radius) for i in range(len(series))]
    width = max(MS, math.ceil(math.ceil(window_ns / count) / MS) * MS)
    group_keys = sorted({t for sel in b.selectors for t in sel.group_by})
    return MultivariateChart(columns, aggregations, width, group_keys)


def _over_plain_groups(variant: str, build: Build) -> Build:
    """A chart holds each input per computation group (nodes/charts.py `HeldInputs`), so an input
    that regroups (filterByTag, selectTags) or reads across groups (zScore) is refused by name."""

    def checked(b: B, value: Json) -> OutputNode:
        root = build(b, value)
        if crosses(root.input):
            raise refuse(
                variant,
                "input",
                "a chart over a node that acts across groups (filterByTag, selectTags, zScore) is not built; "
                "chart the channels grouped by their tags instead",
            )
        return root

    return checked


for _variant, _build in (
    ("histogram", histogram),
    ("cartesian", cartesian),
    ("cartesian3d", cartesian3d),
    ("multivariate", multivariate),
):
    builds("ComputableNode", _variant)(_over_plain_groups(_variant, _build))
