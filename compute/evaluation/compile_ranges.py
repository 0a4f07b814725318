"""Builders for the range-on-range, multi-series equality, stability and enum-mapping nodes (their
evaluators: nodes/range_ops.py, nodes/enum_ops.py), registered into compiler.py's tables by their
Conjure variant names. Refusals name the field or type, as every builder in compiler.py does."""

from __future__ import annotations

import math

from compute.evaluation import compile_numeric
from compute.evaluation import compiler as c
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError, not_supported
from compute.evaluation.nodes import Constant, EnumConstant, OutputNode, RangeNode, SeriesNode, Threshold
from compute.evaluation.nodes.aggregate import ToStartOfInterval
from compute.evaluation.nodes.align import FFILL_RADIUS_NS
from compute.evaluation.nodes.enum_ops import (
    EnumAggregateDuplicates,
    EnumFilterTransformation,
    EnumResample,
    EnumUnion,
    ValueMap,
)
from compute.evaluation.nodes.outputs import SummarizeRanges
from compute.evaluation.nodes.range_aggregation import RangeNumericAggregation, SummarizeRangeAggregates
from compute.evaluation.nodes.range_events import Crossover, Extrema, OnChange
from compute.evaluation.nodes.range_ops import (
    DurationFilter,
    PaddedRanges,
    SeriesEquality,
    StabilityDetection,
)
from compute.evaluation.nodes.select_value import SelectRange
from compute.evaluation.results import RANGE_AGGREGATES

Json = c.Json
B = c._Builder


def _union(value: Json, union: str, allowed: tuple[str, ...]) -> tuple[str, Json]:
    """A union of nominal-api that nominal_variants.VARIANTS does not list (only these builders use it)."""
    if not isinstance(value, dict) or value.get("type") not in allowed or value["type"] not in value:
        raise c.MalformedNode(f"{union}: expected one of {', '.join(allowed)}")
    return value["type"], value[value["type"]]


def _refuse(what: str, field_name: str, reason: str) -> ComputeError:
    return not_supported(f"{what}.{field_name}: {reason}", what, field=field_name)


# -- RangeSeries ---------------------------------------------------------------------------------
def _approximate_threshold(b: B, v: Json) -> RangeNode:
    """`approximateThreshold`: EQUAL_TO where |value - threshold| <= tolerance, NOT_EQUAL_TO elsewhere."""
    what = "approximateThreshold"
    o = b.obj(v, what)
    c._persistence(b, o, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    operator = b.get(o, "operator", what)
    if operator not in ("EQUAL_TO", "NOT_EQUAL_TO"):
        raise c.MalformedNode(f"{what}: not an ApproximateThresholdOperator: {operator!r}")
    tolerance = b.double_constant(b.get(o, "tolerance", what))
    if not tolerance >= 0.0:  # NaN too
        raise _refuse(what, "tolerance", f"must be >= 0, got {tolerance}")
    return Threshold(x, operator, b.double_constant(b.get(o, "threshold", what)), tolerance)


def _window_bound(b: B, o: dict[str, Json], what: str, default: str) -> bool:
    """Whether a missing bound is the window's edge (WINDOW_BOUND) rather than infinitely far
    (INFINITY). The edge is the window's as of the computation's last update: like every computation
    it is re-evaluated when a point arrives, not as the clock alone moves (as rangeNumericAggregation)."""
    behavior = o.get("unboundedBehavior") or default
    if behavior not in ("INFINITY", "WINDOW_BOUND"):
        raise c.MalformedNode(f"{what}.unboundedBehavior: not an UnboundedBehavior: {behavior!r}")
    return bool(behavior == "WINDOW_BOUND")


def _duration_filter(b: B, v: Json) -> RangeNode:
    what = "durationFilter"
    o = b.obj(v, what)
    window_bound = _window_bound(b, o, what, "INFINITY")  # UnboundedBehavior: "Defaults to INFINITY"
    op = b.enum_value("ThresholdOperator", b.get(o, "operator", what), f"{what}.operator")
    duration_ns = b.duration_constant(b.get(o, "threshold", what))
    return DurationFilter(b.ranges(b.get(o, "input", what)), op, duration_ns, window_bound)


def _duration_filter_v2(b: B, v: Json) -> RangeNode:
    what = "durationFilterV2"
    o = b.obj(v, what)
    # its docs: "Defaults to treating the missing bound as the edge of the compute request window"
    window_bound = _window_bound(b, o, what, "WINDOW_BOUND")
    op = b.enum_value("ThresholdOperator", b.get(o, "comparison", what), f"{what}.comparison")
    duration_ns = b.duration_expression(b.get(o, "duration", what))
    return DurationFilter(b.ranges(b.get(o, "input", what)), op, duration_ns, window_bound)


def _padded(version: str) -> c.RangeBuilder:
    def build(b: B, v: Json) -> RangeNode:
        o = b.obj(v, version)
        if version == "paddedRanges":
            padding = b.duration_constant(b.get(o, "padding", version))
            config = o.get("paddingConfiguration") or "PAD_START_AND_END"
        else:
            padding = b.duration_expression(b.get(o, "duration", version))
            config = b.get(o, "paddingConfiguration", version)
        if config not in ("PAD_START", "PAD_END", "PAD_START_AND_END"):
            raise c.MalformedNode(f"{version}.paddingConfiguration: not a padding configuration: {config!r}")
        if padding < 0:
            raise _refuse(
                version, "padding", f"a negative padding ({human_duration(padding)}) is not supported"
            )
        ranges = b.ranges(b.get(o, "input", version))
        return PaddedRanges(ranges, padding, pad_start=config != "PAD_END", pad_end=config != "PAD_START")

    return build


def _equality_operator(b: B, o: dict[str, Json], what: str) -> bool:
    op = b.get(o, "equalityOperator", what)
    if op not in ("ALL_EQUAL", "NOT_ALL_EQUAL"):
        raise c.MalformedNode(f"{what}.equalityOperator: not an EqualityOperator: {op!r}")
    return bool(op == "ALL_EQUAL")


def _interpolation(b: B, o: dict[str, Json], what: str) -> None:
    """The default (forward fill, 1 s radius) is what the evaluator does; any other is refused."""
    config = o.get("interpolationConfiguration")
    if config is None:
        return
    _, ffill = _union(config, "InterpolationConfiguration", ("forwardFillInterpolation",))
    radius = b.obj(ffill, "forwardFillInterpolation").get("interpolationRadius")
    if radius is not None and b.duration_constant(radius) != FFILL_RADIUS_NS:
        raise _refuse(what, "interpolationConfiguration", "only the default 1 s forward-fill radius streams")


def _equality_inputs(b: B, o: dict[str, Json], what: str, key: str, categorical: bool) -> list[SeriesNode]:
    raw = b.get(o, key, what)
    if not isinstance(raw, list):
        raise c.MalformedNode(f"{what}.{key} must be a list")
    if len(raw) < 2:
        raise _refuse(what, key, f"needs at least two series, got {len(raw)}")
    if not categorical:
        return [b.timed(b.numeric(x), what) for x in raw]
    inputs = [b.enum(x, constant_ok=True) for x in raw]  # a property's label is broadcast
    if all(isinstance(x, EnumConstant) for x in inputs):
        raise _refuse(what, key, "needs at least one series; its other inputs may be property labels")
    return inputs


def _tolerance(b: B, o: dict[str, Json], what: str) -> float:
    if o.get("tolerance") is None:
        return 0.0
    tolerance = b.double_constant(o["tolerance"])
    if not tolerance >= 0.0:
        raise _refuse(what, "tolerance", f"must be >= 0, got {tolerance}")
    return tolerance


def _equality(what: str, categorical: bool, v2: bool) -> c.RangeBuilder:
    def build(b: B, v: Json) -> RangeNode:
        o = b.obj(v, what)
        if v2:
            c._persistence_v2(b, o, what)
        else:
            c._persistence(b, o, what)
            _interpolation(b, o, what)
        tolerance = 0.0 if categorical else _tolerance(b, o, what)
        inputs = _equality_inputs(b, o, what, "inputs" if v2 else "input", categorical)
        return SeriesEquality(inputs, _equality_operator(b, o, what), categorical, tolerance)

    return build


def _stability(version: str) -> c.RangeBuilder:
    def build(b: B, v: Json) -> RangeNode:
        o = b.obj(v, version)
        if version == "stabilityDetection":
            config = b.obj(b.get(o, "windowConfiguration", version), "StabilityWindowConfiguration")
            window_ns = b.duration_constant(b.get(config, "duration", "windowConfiguration"))
            min_points_json = config.get("minPoints")
        else:
            window_ns = b.duration_expression(b.get(o, "window", version))
            min_points_json = o.get("minPoints")
        if window_ns <= 0:
            raise _refuse(version, "window", f"must be strictly positive, got {human_duration(window_ns)}")
        min_points = 2 if min_points_json is None else b.integer_constant(min_points_json)
        if min_points < 0:
            raise _refuse(version, "minPoints", f"must be non-negative, got {min_points}")
        kind, threshold = _union(b.get(o, "threshold", version), "Threshold", ("absolute", "percentage"))
        value = b.double_constant(b.get(b.obj(threshold, kind), "value", kind))
        if not value >= 0.0:
            raise _refuse(version, "threshold", f"must be >= 0, got {value}")
        x = b.timed(b.numeric(b.get(o, "input", version)), version)
        return StabilityDetection(x, window_ns, min_points, value, percentage=kind == "percentage")

    return build


def _on_change(b: B, v: Json) -> RangeNode:
    o = b.obj(v, "onChange")
    return OnChange(b.timed(b.series(b.get(o, "input", "onChange")), "onChange"))


def _categorical_on_change(b: B, v: Json) -> RangeNode:
    what = "categoricalOnChangeRangesV2"
    return OnChange(b.timed(b.enum(b.get(b.obj(v, what), "input", what)), what))


def _crossover(b: B, v: Json) -> RangeNode:
    what = "seriesCrossoverRangesNode"
    o = b.obj(v, what)
    x, y = b.numeric(b.get(o, "inputA", what)), b.numeric(b.get(o, "inputB", what))
    if isinstance(x, Constant) and isinstance(y, Constant):  # two fixed levels never cross
        b.timed(x, what)
    return Crossover(x, y)


def _extrema(what: str) -> c.RangeBuilder:
    """`peak` (`returnType`, else `returnsPeaks`, else peaks) and `extremaRangesV2` (`selection`).
    A minimum prominence needs the terrain on both sides as far as it reaches: refused."""

    def build(b: B, v: Json) -> RangeNode:
        o = b.obj(v, what)
        if o.get("minimumProminence") is not None:
            prominence = b.double_constant(o["minimumProminence"])
            if prominence != 0.0:
                raise _refuse(
                    what,
                    "minimumProminence",
                    f"{prominence} needs the series on both sides as far as the prominence reaches, "
                    "which cannot stream; omit it",
                )
        if what == "extremaRangesV2":
            selection = b.get(o, "selection", what)
        elif o.get("returnType") is not None:
            selection = o["returnType"]
        else:
            selection = "TROUGH" if o.get("returnsPeaks") is False else "PEAK"
        if selection not in ("PEAK", "TROUGH", "BOTH"):
            raise c.MalformedNode(f"{what}: not a PeakType: {selection!r}")
        x = b.timed(b.numeric(b.get(o, "input", what)), what)
        return Extrema(x, peaks=selection != "TROUGH", troughs=selection != "PEAK", reach_ns=b.window_ns)

    return build


def _range_numeric_aggregation(b: B, v: Json) -> RangeNode:
    """`rangeNumericAggregation`: its ranges, each valued by `operation` over the input's points in
    it (the values reach the client at a `ranges` root, `summarize_ranges` below)."""
    what = "rangeNumericAggregation"
    o = b.obj(v, what)
    operation, _ = _union(
        b.get(o, "operation", what), "RangeAggregationOperation", (*RANGE_AGGREGATES, "all")
    )
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    return RangeNumericAggregation(b.ranges(b.get(o, "ranges", what)), x, operation)


COMPUTE_NODE_VARIANTS = (
    "enum",
    "numeric",
    "log",
    "ranges",
    "array",
    "struct",
    "curveFit",
    "curveV2",
    "video",
    "raw",
)


def _raw_ranges(b: B, v: Json) -> RangeNode:
    """`raw`: a Reference to a context variable holding a `computeNode` (ComputeNodeWithContext)
    whose node is `ranges`; that range series is built with the nested context's variables, its
    channels read like every other channel of the computation."""
    ref = b.obj(v, "Reference")
    _, value = b.typed_variable(ref.get("name"), ("computeNode",))
    o = b.obj(value, "ComputeNodeWithContext")
    kind, ranges = _union(
        b.get(o, "seriesNode", "ComputeNodeWithContext"), "ComputeNode", COMPUTE_NODE_VARIANTS
    )
    if kind != "ranges":
        raise _refuse("raw", "seriesNode", f"the variable holds a '{kind}' node, expected 'ranges'")
    context = b.obj(b.get(o, "context", "ComputeNodeWithContext"), "Context")
    for key, field_value in context.items():
        if key != "variables" and field_value not in (None, {}, [], False):
            raise _refuse("raw", f"context.{key}", "only a nested context's variables are supported")
    variables = b.obj(context.get("variables") or {}, "Context.variables")
    # one list of channels and one record of the catalog's assets and runs read, for the plan
    nested = B(
        variables, b.selectors, b.window_ns, dataset_references=b.dataset_references, catalog=b.catalog
    )
    return nested.ranges(ranges)


RANGE_BUILDERS: dict[str, c.RangeBuilder] = {
    "raw": _raw_ranges,
    "onChange": _on_change,
    "categoricalOnChangeRangesV2": _categorical_on_change,
    "seriesCrossoverRangesNode": _crossover,
    "peak": _extrema("peak"),
    "extremaRangesV2": _extrema("extremaRangesV2"),
    "approximateThreshold": _approximate_threshold,
    "durationFilter": _duration_filter,
    "durationFilterV2": _duration_filter_v2,
    "paddedRanges": _padded("paddedRanges"),
    "paddedRangesV2": _padded("paddedRangesV2"),
    "seriesEqualityRangesNode": _equality("seriesEqualityRangesNode", categorical=False, v2=False),
    "numericEqualityRangesV2": _equality("numericEqualityRangesV2", categorical=False, v2=True),
    "enumSeriesEqualityRangesNode": _equality("enumSeriesEqualityRangesNode", categorical=True, v2=False),
    "categoricalEqualityRangesV2": _equality("categoricalEqualityRangesV2", categorical=True, v2=True),
    "stabilityDetection": _stability("stabilityDetection"),
    "stabilityDetectionV2": _stability("stabilityDetectionV2"),
    "rangeNumericAggregation": _range_numeric_aggregation,
}


# -- EnumSeries ----------------------------------------------------------------------------------
def _value_map(b: B, v: Json) -> SeriesNode:
    """Open bounds resolved as documented: a missing start is the prior range's end (or -inf), a
    missing end the next range's start (or +inf); the ranges must ascend without overlapping."""
    what = "valueMap"
    o = b.obj(v, what)
    mapping = b.get(o, "mapping", what)
    if not isinstance(mapping, list):
        raise c.MalformedNode(f"{what}.mapping must be a list")
    entries = [b.obj(m, "RangeMap") for m in mapping]
    starts = [None if m.get("start") is None else b.double_constant(m["start"]) for m in entries]
    ends = [None if m.get("end") is None else b.double_constant(m["end"]) for m in entries]
    lowers, uppers = [], []
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        lower = start if start is not None else (ends[i - 1] if i > 0 else None)
        upper = end if end is not None else (starts[i + 1] if i + 1 < len(entries) else None)
        lowers.append(-math.inf if lower is None else lower)
        uppers.append(math.inf if upper is None else upper)
    for i in range(len(entries)):
        if math.isnan(lowers[i]) or math.isnan(uppers[i]) or not lowers[i] < uppers[i]:
            raise _refuse(what, "mapping", f"range {i} [{lowers[i]}, {uppers[i]}) is empty or not a range")
        if i and lowers[i] < uppers[i - 1]:
            raise _refuse(what, "mapping", f"range {i} overlaps or precedes range {i - 1}")
    categories: list[str] = []
    labels = []
    for m in entries:
        label = b.string_constant(b.get(m, "output", "RangeMap"))
        if label not in categories:
            categories.append(label)
        labels.append(categories.index(label))
    default = None
    if o.get("default") is not None:
        label = b.string_constant(o["default"])
        if label not in categories:
            categories.append(label)
        default = categories.index(label)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    return ValueMap(x, lowers, uppers, labels, categories, default)


def _enum_filter_transformation(b: B, v: Json) -> SeriesNode:
    what = "filterTransformation"
    o = b.obj(v, what)
    x = b.timed(b.enum(b.get(o, "input", what)), what)
    return EnumFilterTransformation(x, b.ranges(b.get(o, "filter", what)))


def _aggregate(b: B, v: Json) -> SeriesNode:
    what = "aggregate"
    o = b.obj(v, what)
    function = b.get(o, "function", what)
    if function not in ("MIN", "MAX"):
        raise c.MalformedNode(f"{what}.function: not an EnumAggregationFunction: {function!r}")
    return EnumAggregateDuplicates(b.timed(b.enum(b.get(o, "input", what)), what), function)


FORWARD_FILL = "forwardFillResampleInterpolationConfiguration"


def _resample(version: str) -> c.SeriesBuilder:
    def build(b: B, v: Json) -> SeriesNode:
        o = b.obj(v, version)
        if version == "resample":
            config = b.obj(b.get(o, "resampleConfiguration", version), "EnumResampleConfiguration")
            interval_ns = b.duration_constant(b.get(config, "interval", "resampleConfiguration"))
            if config.get("interpolation") is not None:
                kind, _ = _union(
                    config["interpolation"],
                    "EnumResampleInterpolationConfiguration",
                    (
                        "forwardFillResampleInterpolationConfiguration",
                        "constantResampleInterpolationConfiguration",
                    ),
                )
                if kind != FORWARD_FILL:
                    raise _refuse(
                        version,
                        "interpolation",
                        "constant interpolation is not supported (its docs leave open what a bucket "
                        "with points takes); use forward fill",
                    )
        else:
            interval_ns = b.duration_expression(b.get(o, "interval", version))
        if interval_ns <= 0:
            raise _refuse(version, "interval", f"must be positive, got {human_duration(interval_ns)}")
        return EnumResample(b.timed(b.enum(b.get(o, "input", version)), version), interval_ns)

    return build


def _enum_union(b: B, v: Json) -> SeriesNode:
    o = b.obj(v, "union")
    raw = b.get(o, "input", "union")
    if not isinstance(raw, list) or not raw:
        raise c.MalformedNode("union.input must be a non-empty list")
    operation = b.get(o, "operation", "union")
    if operation not in ("THROW", "MAX", "MIN"):
        raise c.MalformedNode(f"union.operation: not an EnumUnionOperation: {operation!r}")
    return EnumUnion([b.timed(b.enum(x), "union") for x in raw], operation)


def _enum_aggregation(b: B, v: Json) -> SeriesNode:
    """`enumAggregation` with min or max over `groupBy` of the current tags and the current
    timestamps: a Sparkwire series holds one value per timestamp of a group, so each aggregate is
    that point (as `aggregate`); with tumbling windows (`every`), one point per window at its start.
    Tag subsets, alignment, rolling builders and UDFs are refused by name."""
    what = "enumAggregation"
    o = b.obj(v, what)
    operator, _ = _union(b.get(o, "operator", what), "EnumAggregationOperator", ("min", "max", "udf"))
    if operator == "udf":
        raise _refuse(what, "operator", "a user-defined function cannot run in Sparkwire")
    shape, builder = b.variant("AggregationBuilder", b.get(o, "input", what))
    if shape != "groupBy":
        raise _refuse(what, "input", f"'{shape}': only the groupBy shape is accepted (as Nominal's docs say)")
    g = b.obj(builder, "groupBy")
    tags, _ = _union(b.get(g, "tags", "groupBy"), "GroupByTags", ("current", "subset"))
    timestamp, every = _union(b.get(g, "timestamp", "groupBy"), "GroupByTimestamp", ("current", "every"))
    if tags != "current":
        raise _refuse(what, "input.groupBy.tags", f"'{tags}' is not supported; use current")
    if g.get("alignment") is not None:
        raise _refuse(what, "input.groupBy.alignment", "alignment is not supported")
    series = b.get(g, "input", "groupBy")
    if b.variant("Series", series)[0] == "numeric":
        raise _refuse(what, "input.groupBy.input", f"{operator} needs a categorical series (Nominal's docs)")
    x = b.timed(b.series(series), what)
    if timestamp == "every":
        # Nominal's docs: a point at t falls into the epoch-aligned bucket [floor(t / w) * w, + w), one
        # point per bucket at its start: the points snapped as toStartOfInterval does, then merged.
        width = b.duration_expression(every)
        if width <= 0:
            raise _refuse(
                what, "input.groupBy.timestamp", f"every must be positive, got {human_duration(width)}"
            )
        x = ToStartOfInterval(x, width, categorical=True)
    return EnumAggregateDuplicates(x, operator.upper())


ENUM_BUILDERS: dict[str, c.SeriesBuilder] = {
    "resample": _resample("resample"),
    "resampleV2": _resample("resampleV2"),
    "union": _enum_union,
    "enumAggregation": _enum_aggregation,
    "nthPointDownsample": compile_numeric.nth_point(categorical=True),  # one builder for both families
    "toStartOfInterval": compile_numeric.to_start_of_interval(categorical=True),
    "timeRangeFilter": compile_numeric.time_range_filter(categorical=True),
    "valueMap": _value_map,
    "filterTransformation": _enum_filter_transformation,
    "aggregate": _aggregate,
}


# -- SelectValue ---------------------------------------------------------------------------------
def select_value(b: B, value: Json, window_ns: int, limits: c.Limits, options: c.ResultOptions) -> OutputNode:
    """`firstRange`, `lastRange`, `nthRange` here; the point selections are compiler.py's."""
    kind, inner = b.variant("SelectValue", value)
    if kind == "firstRange":
        return SelectRange(_unvalued(b, inner, kind), 0, descending=False)
    if kind == "lastRange":
        return SelectRange(_unvalued(b, inner, kind), 0, descending=True)
    if kind == "nthRange":
        o = b.obj(inner, "nthRange")
        index = b.integer_constant(b.get(o, "index", "nthRange"))
        if index < 0:
            raise _refuse("nthRange", "index", f"must be >= 0, got {index}")
        order = b.get(o, "sortOrder", "nthRange")
        if order not in ("ASC", "DESC"):
            raise c.MalformedNode(f"nthRange.sortOrder: not a RangeSortOrder: {order!r}")
        return SelectRange(
            _unvalued(b, b.get(o, "input", "nthRange"), kind), index, descending=order == "DESC"
        )
    return c._select_value(b, value, window_ns, limits, options)


def _unvalued(b: B, value: Json, what: str) -> RangeNode:
    """The ranges a range selection picks from; a rangeNumericAggregation's values would be lost in
    its `rangeValue`, so it is refused by name rather than sent without them."""
    ranges = b.ranges(value)
    if isinstance(ranges, RangeNumericAggregation):
        raise _refuse(what, "input", "the values of a rangeNumericAggregation are sent only by a ranges node")
    return ranges


def summarize_ranges(
    b: B, value: Json, window_ns: int, limits: c.Limits, options: c.ResultOptions
) -> OutputNode:
    """`ranges`: compiler.py's, or over a rangeNumericAggregation its ranges with their values."""
    root = c._summarize_ranges(b, value, window_ns, limits, options)
    if isinstance(root, SummarizeRanges) and isinstance(root.ranges, RangeNumericAggregation):
        return SummarizeRangeAggregates(root.ranges, root)
    return root


# Registered here, not in compiler.py: this module imports the compiler, so the registration runs once
# both are loaded, whichever was imported first.
c.RANGE_BUILDERS.update(RANGE_BUILDERS)
c.ENUM_BUILDERS.update(ENUM_BUILDERS)
c.OUTPUT_BUILDERS["value"] = select_value
c.OUTPUT_BUILDERS["ranges"] = summarize_ranges
