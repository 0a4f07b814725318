"""Builders of the `RangeSeries` variants (thresholds, conditions, range-on-range, multi-series
equality, stability), the `EnumSeries` transformations (value maps, resampling, unions,
aggregations) and the `ranges` and `value` roots (evaluators: nodes/range_ops.py,
nodes/enum_ops.py, nodes/select_value.py). Refusals name the field or type at fault."""

from __future__ import annotations

import math
from typing import Any

from compute.evaluation import nodes
from compute.evaluation.compiler import registry
from compute.evaluation.compiler.builder import Builder, Subject
from compute.evaluation.compiler.helpers import one_of
from compute.evaluation.compiler.limits import too_many_points
from compute.evaluation.compiler.registry import Build, builds
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError, MalformedNode, invalid_computation, not_supported, refuse
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
from compute.evaluation.nodes.outputs import DEFAULT_MAX_RANGES, SummarizeRanges
from compute.evaluation.nodes.range_aggregation import RangeNumericAggregation, SummarizeRangeAggregates
from compute.evaluation.nodes.range_events import Crossover, Extrema, OnChange
from compute.evaluation.nodes.range_ops import (
    DurationFilter,
    PaddedRanges,
    SeriesEquality,
    StabilityDetection,
)
from compute.evaluation.nodes.select_value import SelectRange
from compute.evaluation.nominal_variants import THRESHOLD_COMPARISONS
from compute.evaluation.results import RANGE_AGGREGATES

Json = Any
B = Builder


# -- RangeSeries ---------------------------------------------------------------------------------
def _persistence(b: B, o: dict[str, Json], what: str) -> None:
    """Only the default persistence (one point, first matching point starts the range) streams."""
    config = o.get("persistenceWindowConfiguration")
    if config is None:
        return
    config = b.obj(config, f"{what}.persistenceWindowConfiguration")
    min_points = config.get("minPoints")
    min_duration = config.get("minDuration")
    start = config.get("outputRangeStart")
    trivial = (
        (min_points is None or b.variant("IntegerConstant", min_points) == ("literal", 1))
        and (min_duration is None or b.duration_constant(min_duration) <= 1)
        and (start is None or b.variant("OutputRangeStart", start)[0] == "firstPointMatchingCondition")
    )
    if not trivial:
        raise invalid_computation(f"{what} with a persistence window cannot stream", "POINT_PERSISTENCE")


def _persistence_v2(b: B, o: dict[str, Json], what: str) -> None:
    """The persistence fields of `thresholdRangesV2`, `categoryFilterRangesV2` and `booleanRanges`
    stream only at their defaults (one point, one nanosecond, the range starting at the first
    matching point); otherwise refused by name."""
    refusal: tuple[str, object] | None = None
    min_points, min_duration, start = o.get("minPoints"), o.get("minDuration"), o.get("rangeStart")
    if min_points is not None and (points := b.integer_constant(min_points)) != 1:
        refusal = ("minPoints", points)
    elif min_duration is not None and (duration_ns := b.duration_expression(min_duration)) > 1:
        refusal = ("minDuration", human_duration(duration_ns))
    elif start is not None and (kind := b.enum_value("RangeStart", start, "rangeStart")) != "CONDITION_START":
        refusal = ("rangeStart", kind)
    if refusal is not None:
        field_name, value = refusal
        raise ComputeError(
            "InvalidComputation",
            f"{what}.{field_name} = {value} asks for a persistence window, which cannot stream",
            {"invalidTypes": "POINT_PERSISTENCE", "field": field_name},
        )


@builds("RangeSeries", "thresholdRangesV2")
def _threshold_v2(b: B, v: Json) -> nodes.RangeNode:
    o = b.obj(v, "thresholdRangesV2")
    _persistence_v2(b, o, "thresholdRangesV2")
    x = b.timed(b.numeric(b.get(o, "input", "thresholdRangesV2")), "thresholdRangesV2")
    kind, comparison = b.variant("ThresholdRangesComparison", b.get(o, "comparison", "thresholdRangesV2"))
    c = b.obj(comparison, kind)
    threshold = b.double_constant(b.get(c, "threshold", kind))
    tolerance = 0.0
    if kind in ("eq", "ne") and c.get("tolerance") is not None:
        tolerance = b.double_constant(c["tolerance"])
        if not tolerance >= 0.0:  # NaN too
            message = f"thresholdRangesV2 {kind}.tolerance must be >= 0, got {tolerance}"
            raise not_supported(message, "thresholdRangesV2", field=f"comparison.{kind}.tolerance")
    return nodes.Threshold(x, THRESHOLD_COMPARISONS[kind], threshold, tolerance)


@builds("RangeSeries", "threshold")
def _threshold(b: B, v: Json) -> nodes.RangeNode:
    o = b.obj(v, "threshold")
    _persistence(b, o, "threshold")
    x = b.timed(b.numeric(b.get(o, "input", "threshold")), "threshold")
    op = b.enum_value("ThresholdOperator", b.get(o, "operator", "threshold"), "threshold")
    return nodes.Threshold(x, op, b.double_constant(b.get(o, "threshold", "threshold")))


@builds("RangeSeries", "minMaxThreshold")
def _min_max_threshold(b: B, v: Json) -> nodes.RangeNode:
    o = b.obj(v, "minMaxThreshold")
    _persistence(b, o, "minMaxThreshold")
    x = b.timed(b.numeric(b.get(o, "input", "minMaxThreshold")), "minMaxThreshold")
    op = b.enum_value("MinMaxThresholdOperator", b.get(o, "operator", "minMaxThreshold"), "minMaxThreshold")
    lower = b.double_constant(b.get(o, "lowerBound", "minMaxThreshold"))
    upper = b.double_constant(b.get(o, "upperBound", "minMaxThreshold"))
    return nodes.MinMaxThreshold(x, op, lower, upper)


@builds("RangeSeries", "enumFilter")
def _enum_filter(b: B, v: Json) -> nodes.RangeNode:
    o = b.obj(v, "enumFilter")
    _persistence(b, o, "enumFilter")
    op = b.enum_value("EnumFilterOperator", b.get(o, "operator", "enumFilter"), "enumFilter")
    if op == "MATCHES_ANY_REGEX":
        raise not_supported(
            "enumFilter MATCHES_ANY_REGEX is not supported; use IS_IN", "enumFilter", field="operator"
        )
    values = b.string_set_constant(b.get(o, "values", "enumFilter"))
    return nodes.EnumFilter(b.enum(b.get(o, "input", "enumFilter")), values, negate=op == "IS_NOT_IN")


@builds("RangeSeries", "categoryFilterRangesV2")
def _category_filter_v2(b: B, v: Json) -> nodes.RangeNode:
    """`categoryFilterRangesV2` (nominal-compute's `.category_ranges().is_in()` and siblings) is
    `enumFilter` with its values as a list of `StringConstant`s."""
    what = "categoryFilterRangesV2"
    o = b.obj(v, what)
    _persistence_v2(b, o, what)
    op = b.enum_value("EnumFilterOperator", b.get(o, "operator", what), f"{what}.operator")
    if op == "MATCHES_ANY_REGEX":
        raise ComputeError(
            "InvalidComputation",
            f"{what}.operator MATCHES_ANY_REGEX (RE2 patterns) is not supported; use IS_IN",
            {"invalidTypes": "", "variant": what, "field": "operator"},
        )
    values = b.get(o, "values", what)
    if not isinstance(values, list):
        raise MalformedNode(f"{what}.values must be a list")
    labels = frozenset(b.string_constant(x) for x in values)
    return nodes.EnumFilter(b.enum(b.get(o, "input", what)), labels, negate=op == "IS_NOT_IN")


@builds("RangeSeries", "booleanRanges")
def _boolean_ranges(b: B, v: Json) -> nodes.RangeNode:
    """`booleanRanges` (nominal-compute's `(x > a).ranges()`, `((x > a) & (x < b)).ranges()`, ...):
    where a condition over one series and constants holds."""
    what = "booleanRanges"
    o = b.obj(v, what)
    _persistence_v2(b, o, what)
    subject = Subject()
    condition = b.condition(b.get(o, "input", what), subject, what, "input")
    if subject.node is None:
        raise not_supported(f"'{what}' needs a series that reads a channel, not only constants", what)
    return nodes.ConditionRanges(subject.node, condition)


def _range_inputs(b: B, v: Json, what: str) -> list[nodes.RangeNode]:
    inputs = b.get(b.obj(v, what), "inputs", what)
    if not isinstance(inputs, list):
        raise MalformedNode(f"{what}.inputs must be a list")
    if not inputs:
        raise not_supported(f"{what} needs at least one input", what, field="inputs")
    return [b.ranges(r) for r in inputs]


builds("RangeSeries", "not")(lambda b, v: nodes.NotRanges(b.ranges(b.get(b.obj(v, "not"), "input", "not"))))
builds("RangeSeries", "intersectRange")(
    lambda b, v: nodes.IntersectRanges(_range_inputs(b, v, "intersectRange"))
)
builds("RangeSeries", "unionRange")(lambda b, v: nodes.UnionRanges(_range_inputs(b, v, "unionRange")))


@builds("RangeSeries", "approximateThreshold")
def _approximate_threshold(b: B, v: Json) -> RangeNode:
    """`approximateThreshold`: EQUAL_TO where |value - threshold| <= tolerance, NOT_EQUAL_TO elsewhere."""
    what = "approximateThreshold"
    o = b.obj(v, what)
    _persistence(b, o, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    operator = b.get(o, "operator", what)
    if operator not in ("EQUAL_TO", "NOT_EQUAL_TO"):
        raise MalformedNode(f"{what}: not an ApproximateThresholdOperator: {operator!r}")
    tolerance = b.double_constant(b.get(o, "tolerance", what))
    if not tolerance >= 0.0:  # NaN too
        raise refuse(what, "tolerance", f"must be >= 0, got {tolerance}")
    return Threshold(x, operator, b.double_constant(b.get(o, "threshold", what)), tolerance)


def _window_bound(b: B, o: dict[str, Json], what: str, default: str) -> bool:
    """Whether a missing bound is the window's edge (WINDOW_BOUND) rather than infinitely far
    (INFINITY). The edge is the window's as of the computation's last update: like every computation
    it is re-evaluated when a point arrives, not as the clock alone moves (as rangeNumericAggregation)."""
    behavior = o.get("unboundedBehavior") or default
    if behavior not in ("INFINITY", "WINDOW_BOUND"):
        raise MalformedNode(f"{what}.unboundedBehavior: not an UnboundedBehavior: {behavior!r}")
    return bool(behavior == "WINDOW_BOUND")


@builds("RangeSeries", "durationFilter")
def _duration_filter(b: B, v: Json) -> RangeNode:
    what = "durationFilter"
    o = b.obj(v, what)
    window_bound = _window_bound(b, o, what, "INFINITY")  # UnboundedBehavior: "Defaults to INFINITY"
    op = b.enum_value("ThresholdOperator", b.get(o, "operator", what), f"{what}.operator")
    duration_ns = b.duration_constant(b.get(o, "threshold", what))
    return DurationFilter(b.ranges(b.get(o, "input", what)), op, duration_ns, window_bound)


@builds("RangeSeries", "durationFilterV2")
def _duration_filter_v2(b: B, v: Json) -> RangeNode:
    what = "durationFilterV2"
    o = b.obj(v, what)
    # its docs: "Defaults to treating the missing bound as the edge of the compute request window"
    window_bound = _window_bound(b, o, what, "WINDOW_BOUND")
    op = b.enum_value("ThresholdOperator", b.get(o, "comparison", what), f"{what}.comparison")
    duration_ns = b.duration_expression(b.get(o, "duration", what))
    return DurationFilter(b.ranges(b.get(o, "input", what)), op, duration_ns, window_bound)


def _padded(version: str) -> Build:
    def build(b: B, v: Json) -> RangeNode:
        o = b.obj(v, version)
        if version == "paddedRanges":
            padding = b.duration_constant(b.get(o, "padding", version))
            config = o.get("paddingConfiguration") or "PAD_START_AND_END"
        else:
            padding = b.duration_expression(b.get(o, "duration", version))
            config = b.get(o, "paddingConfiguration", version)
        if config not in ("PAD_START", "PAD_END", "PAD_START_AND_END"):
            raise MalformedNode(f"{version}.paddingConfiguration: not a padding configuration: {config!r}")
        if padding < 0:
            raise refuse(
                version, "padding", f"a negative padding ({human_duration(padding)}) is not supported"
            )
        ranges = b.ranges(b.get(o, "input", version))
        return PaddedRanges(ranges, padding, pad_start=config != "PAD_END", pad_end=config != "PAD_START")

    return build


def _equality_operator(b: B, o: dict[str, Json], what: str) -> bool:
    op = b.get(o, "equalityOperator", what)
    if op not in ("ALL_EQUAL", "NOT_ALL_EQUAL"):
        raise MalformedNode(f"{what}.equalityOperator: not an EqualityOperator: {op!r}")
    return bool(op == "ALL_EQUAL")


def _interpolation(b: B, o: dict[str, Json], what: str) -> None:
    """The default (forward fill, 1 s radius) is what the evaluator does; any other is refused."""
    config = o.get("interpolationConfiguration")
    if config is None:
        return
    _, ffill = one_of(config, "InterpolationConfiguration", ("forwardFillInterpolation",))
    radius = b.obj(ffill, "forwardFillInterpolation").get("interpolationRadius")
    if radius is not None and b.duration_constant(radius) != FFILL_RADIUS_NS:
        raise refuse(what, "interpolationConfiguration", "only the default 1 s forward-fill radius streams")


def _equality_inputs(b: B, o: dict[str, Json], what: str, key: str, categorical: bool) -> list[SeriesNode]:
    raw = b.get(o, key, what)
    if not isinstance(raw, list):
        raise MalformedNode(f"{what}.{key} must be a list")
    if len(raw) < 2:
        raise refuse(what, key, f"needs at least two series, got {len(raw)}")
    if not categorical:
        return [b.timed(b.numeric(x), what) for x in raw]
    inputs = [b.enum(x, constant_ok=True) for x in raw]  # a property's label is broadcast
    if all(isinstance(x, EnumConstant) for x in inputs):
        raise refuse(what, key, "needs at least one series; its other inputs may be property labels")
    return inputs


def _tolerance(b: B, o: dict[str, Json], what: str) -> float:
    if o.get("tolerance") is None:
        return 0.0
    tolerance = b.double_constant(o["tolerance"])
    if not tolerance >= 0.0:
        raise refuse(what, "tolerance", f"must be >= 0, got {tolerance}")
    return tolerance


def _equality(what: str, categorical: bool, v2: bool) -> Build:
    def build(b: B, v: Json) -> RangeNode:
        o = b.obj(v, what)
        if v2:
            _persistence_v2(b, o, what)
        else:
            _persistence(b, o, what)
            _interpolation(b, o, what)
        tolerance = 0.0 if categorical else _tolerance(b, o, what)
        inputs = _equality_inputs(b, o, what, "inputs" if v2 else "input", categorical)
        return SeriesEquality(inputs, _equality_operator(b, o, what), categorical, tolerance)

    return build


def _stability(version: str) -> Build:
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
            raise refuse(version, "window", f"must be strictly positive, got {human_duration(window_ns)}")
        min_points = 2 if min_points_json is None else b.integer_constant(min_points_json)
        if min_points < 0:
            raise refuse(version, "minPoints", f"must be non-negative, got {min_points}")
        kind, threshold = one_of(b.get(o, "threshold", version), "Threshold", ("absolute", "percentage"))
        value = b.double_constant(b.get(b.obj(threshold, kind), "value", kind))
        if not value >= 0.0:
            raise refuse(version, "threshold", f"must be >= 0, got {value}")
        x = b.timed(b.numeric(b.get(o, "input", version)), version)
        return StabilityDetection(x, window_ns, min_points, value, percentage=kind == "percentage")

    return build


@builds("RangeSeries", "onChange")
def _on_change(b: B, v: Json) -> RangeNode:
    o = b.obj(v, "onChange")
    return OnChange(b.timed(b.series(b.get(o, "input", "onChange")), "onChange"))


@builds("RangeSeries", "categoricalOnChangeRangesV2")
def _categorical_on_change(b: B, v: Json) -> RangeNode:
    what = "categoricalOnChangeRangesV2"
    return OnChange(b.timed(b.enum(b.get(b.obj(v, what), "input", what)), what))


@builds("RangeSeries", "seriesCrossoverRangesNode")
def _crossover(b: B, v: Json) -> RangeNode:
    what = "seriesCrossoverRangesNode"
    o = b.obj(v, what)
    x, y = b.numeric(b.get(o, "inputA", what)), b.numeric(b.get(o, "inputB", what))
    if isinstance(x, Constant) and isinstance(y, Constant):  # two fixed levels never cross
        b.timed(x, what)
    return Crossover(x, y)


def _extrema(what: str) -> Build:
    """`peak` (`returnType`, else `returnsPeaks`, else peaks) and `extremaRangesV2` (`selection`).
    A minimum prominence needs the terrain on both sides as far as it reaches: refused."""

    def build(b: B, v: Json) -> RangeNode:
        o = b.obj(v, what)
        if o.get("minimumProminence") is not None:
            prominence = b.double_constant(o["minimumProminence"])
            if prominence != 0.0:
                raise refuse(
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
            raise MalformedNode(f"{what}: not a PeakType: {selection!r}")
        x = b.timed(b.numeric(b.get(o, "input", what)), what)
        return Extrema(x, peaks=selection != "TROUGH", troughs=selection != "PEAK", reach_ns=b.window_ns)

    return build


@builds("RangeSeries", "rangeNumericAggregation")
def _range_numeric_aggregation(b: B, v: Json) -> RangeNode:
    """`rangeNumericAggregation`: its ranges, each valued by `operation` over the input's points in
    it (the values reach the client at a `ranges` root, `summarize_ranges` below)."""
    what = "rangeNumericAggregation"
    o = b.obj(v, what)
    operation, _ = one_of(
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


@builds("RangeSeries", "raw")
def _raw_ranges(b: B, v: Json) -> RangeNode:
    """`raw`: a Reference to a context variable holding a `computeNode` (ComputeNodeWithContext)
    whose node is `ranges`; that range series is built with the nested context's variables, its
    channels read like every other channel of the computation."""
    ref = b.obj(v, "Reference")
    _, value = b.typed_variable(ref.get("name"), ("computeNode",))
    o = b.obj(value, "ComputeNodeWithContext")
    kind, ranges = one_of(
        b.get(o, "seriesNode", "ComputeNodeWithContext"), "ComputeNode", COMPUTE_NODE_VARIANTS
    )
    if kind != "ranges":
        raise refuse("raw", "seriesNode", f"the variable holds a '{kind}' node, expected 'ranges'")
    context = b.obj(b.get(o, "context", "ComputeNodeWithContext"), "Context")
    for key, field_value in context.items():
        if key != "variables" and field_value not in (None, {}, [], False):
            raise refuse("raw", f"context.{key}", "only a nested context's variables are supported")
    variables = b.obj(context.get("variables") or {}, "Context.variables")
    # one list of channels, one record of the catalog read and one budget, for the plan
    return b.nested(variables).ranges(ranges)


builds("RangeSeries", "peak")(_extrema("peak"))
builds("RangeSeries", "extremaRangesV2")(_extrema("extremaRangesV2"))
builds("RangeSeries", "paddedRanges")(_padded("paddedRanges"))
builds("RangeSeries", "paddedRangesV2")(_padded("paddedRangesV2"))
builds("RangeSeries", "seriesEqualityRangesNode")(
    _equality("seriesEqualityRangesNode", categorical=False, v2=False)
)
builds("RangeSeries", "numericEqualityRangesV2")(
    _equality("numericEqualityRangesV2", categorical=False, v2=True)
)
builds("RangeSeries", "enumSeriesEqualityRangesNode")(
    _equality("enumSeriesEqualityRangesNode", categorical=True, v2=False)
)
builds("RangeSeries", "categoricalEqualityRangesV2")(
    _equality("categoricalEqualityRangesV2", categorical=True, v2=True)
)
builds("RangeSeries", "stabilityDetection")(_stability("stabilityDetection"))
builds("RangeSeries", "stabilityDetectionV2")(_stability("stabilityDetectionV2"))


# -- EnumSeries ----------------------------------------------------------------------------------
@builds("EnumSeries", "valueMap")
def _value_map(b: B, v: Json) -> SeriesNode:
    """Open bounds resolved as documented: a missing start is the prior range's end (or -inf), a
    missing end the next range's start (or +inf); the ranges must ascend without overlapping."""
    what = "valueMap"
    o = b.obj(v, what)
    mapping = b.get(o, "mapping", what)
    if not isinstance(mapping, list):
        raise MalformedNode(f"{what}.mapping must be a list")
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
            raise refuse(what, "mapping", f"range {i} [{lowers[i]}, {uppers[i]}) is empty or not a range")
        if i and lowers[i] < uppers[i - 1]:
            raise refuse(what, "mapping", f"range {i} overlaps or precedes range {i - 1}")
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


@builds("EnumSeries", "filterTransformation")
def _enum_filter_transformation(b: B, v: Json) -> SeriesNode:
    what = "filterTransformation"
    o = b.obj(v, what)
    x = b.timed(b.enum(b.get(o, "input", what)), what)
    return EnumFilterTransformation(x, b.ranges(b.get(o, "filter", what)))


@builds("EnumSeries", "aggregate")
def _aggregate(b: B, v: Json) -> SeriesNode:
    what = "aggregate"
    o = b.obj(v, what)
    function = b.get(o, "function", what)
    if function not in ("MIN", "MAX"):
        raise MalformedNode(f"{what}.function: not an EnumAggregationFunction: {function!r}")
    return EnumAggregateDuplicates(b.timed(b.enum(b.get(o, "input", what)), what), function)


FORWARD_FILL = "forwardFillResampleInterpolationConfiguration"


def _resample(version: str) -> Build:
    def build(b: B, v: Json) -> SeriesNode:
        o = b.obj(v, version)
        if version == "resample":
            config = b.obj(b.get(o, "resampleConfiguration", version), "EnumResampleConfiguration")
            interval_ns = b.duration_constant(b.get(config, "interval", "resampleConfiguration"))
            if config.get("interpolation") is not None:
                kind, _ = one_of(
                    config["interpolation"],
                    "EnumResampleInterpolationConfiguration",
                    (
                        "forwardFillResampleInterpolationConfiguration",
                        "constantResampleInterpolationConfiguration",
                    ),
                )
                if kind != FORWARD_FILL:
                    raise refuse(
                        version,
                        "interpolation",
                        "constant interpolation is not supported (its docs leave open what a bucket "
                        "with points takes); use forward fill",
                    )
        else:
            interval_ns = b.duration_expression(b.get(o, "interval", version))
        if interval_ns <= 0:
            raise refuse(version, "interval", f"must be positive, got {human_duration(interval_ns)}")
        return EnumResample(b.timed(b.enum(b.get(o, "input", version)), version), interval_ns)

    return build


@builds("EnumSeries", "union")
def _enum_union(b: B, v: Json) -> SeriesNode:
    o = b.obj(v, "union")
    raw = b.get(o, "input", "union")
    if not isinstance(raw, list) or not raw:
        raise MalformedNode("union.input must be a non-empty list")
    operation = b.get(o, "operation", "union")
    if operation not in ("THROW", "MAX", "MIN"):
        raise MalformedNode(f"union.operation: not an EnumUnionOperation: {operation!r}")
    return EnumUnion([b.timed(b.enum(x), "union") for x in raw], operation)


@builds("EnumSeries", "enumAggregation")
def _enum_aggregation(b: B, v: Json) -> SeriesNode:
    """`enumAggregation` with min or max over `groupBy` of the current tags and the current
    timestamps: a Sparkwire series holds one value per timestamp of a group, so each aggregate is
    that point (as `aggregate`); with tumbling windows (`every`), one point per window at its start.
    Tag subsets, alignment, rolling builders and UDFs are refused by name."""
    what = "enumAggregation"
    o = b.obj(v, what)
    operator, _ = one_of(b.get(o, "operator", what), "EnumAggregationOperator", ("min", "max", "udf"))
    if operator == "udf":
        raise refuse(what, "operator", "a user-defined function cannot run in Sparkwire")
    shape, builder = b.variant("AggregationBuilder", b.get(o, "input", what))
    if shape != "groupBy":
        raise refuse(what, "input", f"'{shape}': only the groupBy shape is accepted (as Nominal's docs say)")
    g = b.obj(builder, "groupBy")
    tags, _ = one_of(b.get(g, "tags", "groupBy"), "GroupByTags", ("current", "subset"))
    timestamp, every = one_of(b.get(g, "timestamp", "groupBy"), "GroupByTimestamp", ("current", "every"))
    if tags != "current":
        raise refuse(what, "input.groupBy.tags", f"'{tags}' is not supported; use current")
    if g.get("alignment") is not None:
        raise refuse(what, "input.groupBy.alignment", "alignment is not supported")
    series = b.get(g, "input", "groupBy")
    if b.variant("Series", series)[0] == "numeric":
        raise refuse(what, "input.groupBy.input", f"{operator} needs a categorical series (Nominal's docs)")
    x = b.timed(b.series(series), what)
    if timestamp == "every":
        # Nominal's docs: a point at t falls into the epoch-aligned bucket [floor(t / w) * w, + w), one
        # point per bucket at its start: the points snapped as toStartOfInterval does, then merged.
        width = b.duration_expression(every)
        if width <= 0:
            raise refuse(
                what, "input.groupBy.timestamp", f"every must be positive, got {human_duration(width)}"
            )
        x = ToStartOfInterval(x, width, categorical=True)
    return EnumAggregateDuplicates(x, operator.upper())


builds("EnumSeries", "resample")(_resample("resample"))
builds("EnumSeries", "resampleV2")(_resample("resampleV2"))


# -- SelectValue ---------------------------------------------------------------------------------
def _summarize_ranges(b: B, value: Json) -> OutputNode:
    window_ns, limits, options = b.window_ns, b.limits, b.options
    o = b.obj(value, "SummarizeRanges")
    max_ranges = o.get("maxRanges")
    if max_ranges is None:
        max_ranges = DEFAULT_MAX_RANGES
    if not isinstance(max_ranges, int) or isinstance(max_ranges, bool):
        raise MalformedNode("SummarizeRanges.maxRanges must be an integer")
    if max_ranges <= 0:
        raise not_supported(
            f"maxRanges must be positive, got {max_ranges}", "SummarizeRanges", field="maxRanges"
        )
    if max_ranges > limits.max_points:
        raise too_many_points(max_ranges, "ranges", limits)
    ranges = b.ranges(b.get(o, "input", "SummarizeRanges"))
    return nodes.SummarizeRanges(ranges, window_ns, max_ranges, options.append_only, options.decimate)


def _select_value(b: B, value: Json) -> OutputNode:
    kind, inner = b.variant("SelectValue", value)
    if kind not in ("firstPoint", "lastPoint", "firstValuePoint", "lastValuePoint"):
        raise registry.refusal("SelectValue", kind)
    return nodes.SelectValue(
        b.timed(b.series(inner), kind), last=kind.startswith("last"), single=kind.endswith("ValuePoint")
    )


@builds("ComputableNode", "value")
def select_value(b: B, value: Json) -> OutputNode:
    """`firstRange`, `lastRange`, `nthRange` here; the point selections are `_select_value`'s."""
    kind, inner = b.variant("SelectValue", value)
    if kind == "firstRange":
        return SelectRange(_unvalued(b, inner, kind), 0, descending=False)
    if kind == "lastRange":
        return SelectRange(_unvalued(b, inner, kind), 0, descending=True)
    if kind == "nthRange":
        o = b.obj(inner, "nthRange")
        index = b.integer_constant(b.get(o, "index", "nthRange"))
        if index < 0:
            raise refuse("nthRange", "index", f"must be >= 0, got {index}")
        order = b.get(o, "sortOrder", "nthRange")
        if order not in ("ASC", "DESC"):
            raise MalformedNode(f"nthRange.sortOrder: not a RangeSortOrder: {order!r}")
        return SelectRange(
            _unvalued(b, b.get(o, "input", "nthRange"), kind), index, descending=order == "DESC"
        )
    return _select_value(b, value)


def _unvalued(b: B, value: Json, what: str) -> RangeNode:
    """The ranges a range selection picks from; a rangeNumericAggregation's values would be lost in
    its `rangeValue`, so it is refused by name rather than sent without them."""
    ranges = b.ranges(value)
    if isinstance(ranges, RangeNumericAggregation):
        raise refuse(what, "input", "the values of a rangeNumericAggregation are sent only by a ranges node")
    return ranges


@builds("ComputableNode", "ranges")
def summarize_ranges(b: B, value: Json) -> OutputNode:
    """`ranges`: `_summarize_ranges`, or over a rangeNumericAggregation its ranges with their values."""
    root = _summarize_ranges(b, value)
    if isinstance(root, SummarizeRanges) and isinstance(root.ranges, RangeNumericAggregation):
        return SummarizeRangeAggregates(root.ranges, root)
    return root
