"""Builders of the `NumericSeries` variants (and the `series` root, SummarizeSeries): channel
reads, constants, arithmetic, derivatives, time shifts, filters, aggregations, trigonometry,
power, modulo, floor division, atan2, the bit operations, offset, scale,
the deprecated unary/binary arithmetic enums, if/else, the cross-series reductions, union, the
newest/oldest points, NaN and approximate filters, time differences and absolute timestamps, the
deprecated rolling operation, and enum-to-numeric.

Each builder reads a variant's JSON through the `Builder` (builder.py: its shape checks and
Nominal's error names) and returns an evaluator of compute/evaluation/nodes/."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from compute.evaluation import nodes
from compute.evaluation.compiler import registry
from compute.evaluation.compiler.builder import Builder, Subject
from compute.evaluation.compiler.dimensions import subset_of_tags
from compute.evaluation.compiler.helpers import pointwise, radius
from compute.evaluation.compiler.limits import too_many_points
from compute.evaluation.compiler.registry import Build, builds
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError, MalformedNode, not_supported, polling_only, refuse
from compute.evaluation.nodes.aggregate import (
    FUNCTION_OPERATORS,
    AggregateUnderRanges,
    CountDuplicate,
    FilterWithinRanges,
    GroupByTime,
    NthPoint,
    Operator,
    RangeDuration,
    ResampleForwardFill,
    RollingPoints,
    RollingTimeSlices,
    SinceTime,
    ToStartOfInterval,
)
from compute.evaluation.nodes.align import FFILL_RADIUS_NS
from compute.evaluation.nodes.arithmetic import THRESHOLD_OPS, apply_binary, apply_unary
from compute.evaluation.nodes.combine import UNION_REDUCERS, SelectPoints, Union
from compute.evaluation.nodes.expression import FilterByExpression, InvalidExpression, compile_expression
from compute.evaluation.nodes.math import (
    BINARY_FIELDS,
    BINARY_KERNELS,
    BIT_OPERATIONS,
    REDUCE_KERNELS,
    TRIG_KERNELS,
    Kernel,
    bit_kernel,
    if_else_kernel,
)
from compute.evaluation.nodes.outputs import arrow_of_enum
from compute.evaluation.nodes.rolling import RollingAggregation
from compute.evaluation.nodes.select import (
    AbsoluteTimestamp,
    ApproximateFilter,
    DropNan,
    EnumToNumeric,
    TimeDifference,
)
from compute.evaluation.nodes.units import Converted, WithUnit
from compute.evaluation.nominal_variants import (
    BINARY_OPERATORS,
    BOOLEAN_COMPARISONS,
    ROLLING_OPERATORS,
    STRATEGY_POLLING_ONLY,
    TIME_UNIT_NANOS,
    UNARY_OPERATORS,
)
from compute.evaluation.output_format import arrow_format
from compute.evaluation.results import INT64_MAX
from compute.evaluation.summarize import Decimation
from compute.evaluation.units import UnknownUnit, conversion, unit

Json = Any
Columns = Callable[[list[np.ndarray]], np.ndarray]


def _malformed(message: str) -> Exception:
    return MalformedNode(message)


# -- NumericSeries -------------------------------------------------------------------------------
def _unary(op: str) -> Build:
    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        x = b.numeric(b.get(b.obj(v, op), "x", op))
        if isinstance(x, nodes.Constant):  # folded now, with the same numpy maths
            return nodes.Constant(float(apply_unary(op, np.array([x.value]))[0]))
        return nodes.UnaryNode(op, x)

    return build


def _binary(op: str) -> Build:
    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, op)
        left, right = b.numeric(b.get(o, "left", op)), b.numeric(b.get(o, "right", op))
        if isinstance(left, nodes.Constant) and isinstance(right, nodes.Constant):
            return nodes.Constant(float(apply_binary(op, np.array([left.value]), np.array([right.value]))[0]))
        return nodes.BinaryNode(op, left, right)

    return build


@builds("NumericSeries", "constant")
def _constant(b: Builder, v: Json) -> nodes.SeriesNode:
    _, inner = b.variant("ConstantNumericSeries", v)
    return nodes.Constant(b.double_constant(inner))


def _negatives(b: Builder, o: dict[str, Json]) -> str:
    config = o.get("negativeValuesConfiguration")
    return "allowNegativeValues" if config is None else b.variant("NegativeValueConfiguration", config)[0]


@builds("NumericSeries", "derivative")
def _derivative(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "derivative")
    unit = o.get("timeUnit")
    unit = "SECONDS" if unit is None else b.enum_value("TimeUnit", unit, "derivative.timeUnit")
    x = b.timed(b.numeric(b.get(o, "input", "derivative")), "derivative")
    return nodes.Derivative(x, TIME_UNIT_NANOS[unit], _negatives(b, o))


@builds("NumericSeries", "valueDifference")
def _value_difference(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "valueDifference")
    x = b.timed(b.numeric(b.get(o, "input", "valueDifference")), "valueDifference")
    return nodes.ValueDifference(x, _negatives(b, o))


def _time_shift(version: str, family: str) -> Build:
    """`timeShift` (a `DurationConstant`) and `timeShiftV2` (a `Duration` expression, which is what
    nominal-compute's `.time_shift()` emits) of a numeric or an enum series: one evaluator."""

    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, version)
        raw_input = b.get(o, "input", version)
        x = b.timed(b.numeric(raw_input) if family == "numeric" else b.enum(raw_input), version)
        duration = b.get(o, "duration", version)
        shift_ns = (
            b.duration_constant(duration) if version == "timeShift" else b.duration_expression(duration)
        )
        if abs(shift_ns) > INT64_MAX:
            raise ComputeError(
                "InvalidComputation",
                f"{version}.duration of {human_duration(shift_ns)} is beyond int64 nanoseconds "
                "(about 292 years)",
                {"invalidTypes": "", "variant": version, "field": "duration"},
            )
        return nodes.TimeShift(x, shift_ns)

    return build


@builds("NumericSeries", "thresholdFilter")
def _threshold_filter(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "thresholdFilter")
    x = b.timed(b.numeric(b.get(o, "input", "thresholdFilter")), "thresholdFilter")
    op = b.enum_value("ThresholdOperator", b.get(o, "operator", "thresholdFilter"), "thresholdFilter")
    return nodes.ThresholdFilter(x, op, b.double_constant(b.get(o, "threshold", "thresholdFilter")))


@builds("NumericSeries", "filterWhere")
def _filter_where(b: Builder, v: Json) -> nodes.SeriesNode:
    """`filterWhere` (nominal-compute's `.filter_where(condition)`): the input's points where a
    condition over the input itself and constants holds; `x.filter_where(x > c)` is thresholdFilter."""
    o = b.obj(v, "filterWhere")
    raw_input = b.get(o, "input", "filterWhere")
    x = b.timed(b.numeric(raw_input), "filterWhere")
    condition = b.condition(
        b.get(o, "condition", "filterWhere"), Subject(raw_input, x), "filterWhere", "condition"
    )
    return nodes.FilterWhere(x, condition)


@builds("NumericSeries", "numericAggregation")
def _numeric_aggregation(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "numericAggregation")
    shape, builder = b.variant("AggregationBuilder", b.get(o, "input", "numericAggregation"))
    operator, _ = b.variant("NumericAggregationOperator", b.get(o, "operator", "numericAggregation"))
    if shape != "rollingTime" or operator not in ROLLING_OPERATORS:
        return aggregation(b, v)  # rollingPoints, groupBy, percentile
    rolling = b.obj(builder, "rollingTime")
    window_ns = b.duration_expression(b.get(rolling, "window", "rollingTime"))
    if window_ns <= 0:
        raise not_supported(
            f"a rolling window must be positive, got {human_duration(window_ns)}",
            "rollingTime",
            field="window",
        )
    x = b.timed(b.series(b.get(rolling, "input", "rollingTime")), "numericAggregation")
    return nodes.RollingAggregation(x, window_ns, operator)


builds("NumericSeries", "raw")(lambda b, v: b.channel_input(v, "numeric"))
builds("NumericSeries", "channel")(lambda b, v: b.channel_series(v, "numeric"))
builds("NumericSeries", "selectNumeric")(lambda b, v: b.select_series(v, "numeric"))
for op in UNARY_OPERATORS:
    builds("NumericSeries", op)(_unary(op))
for op in BINARY_OPERATORS:
    builds("NumericSeries", op)(_binary(op))
builds("NumericSeries", "timeShift")(_time_shift("timeShift", "numeric"))
builds("NumericSeries", "timeShiftV2")(_time_shift("timeShiftV2", "numeric"))
builds("EnumSeries", "raw")(lambda b, v: b.channel_input(v, "enum"))
builds("EnumSeries", "channel")(lambda b, v: b.channel_series(v, "enum"))
builds("EnumSeries", "selectEnum")(lambda b, v: b.select_series(v, "enum"))
builds("EnumSeries", "timeShift")(_time_shift("timeShift", "enum"))
builds("EnumSeries", "timeShiftV2")(_time_shift("timeShiftV2", "enum"))


# -- ComputableNode ------------------------------------------------------------------------------
@builds("ComputableNode", "series")
def _summarize_series(b: Builder, value: Json) -> nodes.OutputNode:
    window_ns, limits, options = b.window_ns, b.limits, b.options
    o = b.obj(value, "SummarizeSeries")
    strategy = o.get("summarizationStrategy")
    skind = None if strategy is None else b.variant("SummarizationStrategy", strategy)[0]
    input_json = o.get("input")
    if b.polled and isinstance(input_json, dict) and input_json.get("type") == "log" and skind != "page":
        raise refuse(
            "SummarizeSeries",
            "summarizationStrategy",
            "a log series is answered in pages only (summarizationStrategy page: Nominal's pagedLog)",
        )
    if skind in STRATEGY_POLLING_ONLY:
        # computed once over the period (builders/lttb_paging.py), or re-evaluated whole over the
        # window each batch for a subscription that asked, when the strategy streams (streamed.py)
        if b.polled or (b.streamed and skind in registry.streamed("SummarizationStrategy")):
            return registry.builder("SummarizationStrategy", skind, b.polled, b.streamed)(b, o)
        raise polling_only(
            f"summarization strategy '{skind}' supports polling only", STRATEGY_POLLING_ONLY[skind]
        )
    aggregations = summary_aggregations(b, o)
    arrow = arrow_format(o)
    if arrow is not None:  # V2 percentile fields: bucket columns computed as numericAggregations are
        aggregations += percentile_columns(arrow.percentiles)
    buckets, resolution = o.get("buckets"), o.get("resolution")
    for name, x in (("buckets", buckets), ("resolution", resolution)):
        if x is not None and (not isinstance(x, int) or isinstance(x, bool)):
            raise MalformedNode(f"SummarizeSeries.{name} must be an integer")
    decimation = Decimation.of(window_ns, buckets, resolution)
    if decimation.max_points > limits.max_points:
        raise too_many_points(decimation.max_points, "buckets", limits)
    series_json = b.get(o, "input", "SummarizeSeries")
    if arrow is not None and isinstance(series_json, dict) and series_json.get("type") == "enum":
        raise arrow_of_enum()
    series = b.timed(b.series(series_json), "series")
    return nodes.SummarizeSeries(
        series, decimation, options.decimate, limits.max_points, arrow=arrow, aggregations=aggregations
    )


# -- one or two inputs ----------------------------------------------------------------------------
def _trig(op: str) -> Callable[[Builder, Json], nodes.SeriesNode]:
    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        return pointwise(op, [b.numeric(b.get(b.obj(v, op), "x", op))], TRIG_KERNELS[op], 0)

    return build


def _binary_math(op: str) -> Callable[[Builder, Json], nodes.SeriesNode]:
    first, second = BINARY_FIELDS[op]

    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, op)
        inputs = [b.numeric(b.get(o, first, op)), b.numeric(b.get(o, second, op))]
        return pointwise(op, inputs, BINARY_KERNELS[op], FFILL_RADIUS_NS)

    return build


def _bit_operand(b: Builder, operation: str, operand: int, field_name: str) -> Kernel:
    """Shifts and bit indices are 0..63 (Nominal's InvalidBitOperation otherwise); and/or/xor
    operands are any int64."""
    shifts = operation in ("bitShiftLeft", "bitShiftRight", "bitTest")
    low, high = (0, 63) if shifts else (-(2**63), 2**63 - 1)
    if not low <= operand <= high:
        raise refuse(operation, field_name, f"{operation}.{field_name} {operand} is outside [{low}, {high}]")
    return bit_kernel(operation, operand)


def _bit(op: str) -> Callable[[Builder, Json], nodes.SeriesNode]:
    field_name = "index" if op == "bitTest" else "operand"

    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, op)
        x = b.numeric(b.get(o, "input", op))
        kernel = _bit_operand(b, op, b.integer_constant(b.get(o, field_name, op)), field_name)
        return pointwise(op, [x], kernel, 0)

    return build


# BitOperationFunction's variants (deprecated bitOperation) -> the NumericSeries bit variant.
BIT_FUNCTIONS: dict[str, tuple[str, str]] = {
    "and": ("bitAnd", "operand"),
    "or": ("bitOr", "operand"),
    "xor": ("bitXor", "operand"),
    "shiftLeft": ("bitShiftLeft", "operand"),
    "shiftRight": ("bitShiftRight", "operand"),
    "bitTest": ("bitTest", "index"),
}


@builds("NumericSeries", "bitOperation")
def _bit_operation(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "bitOperation")
    x = b.numeric(b.get(o, "input", "bitOperation"))
    kind, inner = b.variant("BitOperationFunction", b.get(o, "function", "bitOperation"))
    op, field_name = BIT_FUNCTIONS[kind]
    operand = b.get(b.obj(inner, kind), field_name, kind)
    if not isinstance(operand, int) or isinstance(operand, bool):
        raise _malformed(f"bitOperation {kind}.{field_name} must be an integer")
    return pointwise("bitOperation", [x], _bit_operand(b, op, operand, field_name), 0)


@builds("NumericSeries", "offset")
def _offset(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "offset")
    x = b.numeric(b.get(o, "input", "offset"))
    return pointwise(
        "offset",
        [x, nodes.Constant(b.double_constant(b.get(o, "scalar", "offset")))],
        lambda c: c[0] + c[1],
        0,
    )


@builds("NumericSeries", "scale")
def _scale(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "scale")
    if o.get("scalarUnit") is not None:
        raise refuse(
            "scale",
            "scalarUnit",
            "scale.scalarUnit changes the unit of the result; Sparkwire's series carry no unit, "
            "so it cannot be honoured: omit it, or use unitOverride",
        )
    x = b.numeric(b.get(o, "input", "scale"))
    return pointwise(
        "scale", [x, nodes.Constant(b.double_constant(b.get(o, "scalar", "scale")))], lambda c: c[0] * c[1], 0
    )


# UnaryArithmeticOperation -> its kernel (LOG is base 10, as Nominal's enum says).
UNARY_ARITHMETIC: dict[str, Kernel] = {
    "COS": TRIG_KERNELS["cos"],
    "SIN": TRIG_KERNELS["sin"],
    "TAN": TRIG_KERNELS["tan"],
    "ASIN": TRIG_KERNELS["asin"],
    "ACOS": TRIG_KERNELS["acos"],
    "ABS": lambda c: np.abs(c[0]),
    "LOG": lambda c: np.log10(c[0]),
    "LN": lambda c: np.log(c[0]),
    "SQRT": lambda c: np.sqrt(c[0]),
}


@builds("NumericSeries", "unaryArithmetic")
def _unary_arithmetic(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "unaryArithmetic")
    op = b.enum_value("UnaryArithmeticOperation", b.get(o, "operation", "unaryArithmetic"), "unaryArithmetic")
    return pointwise(
        "unaryArithmetic", [b.numeric(b.get(o, "input", "unaryArithmetic"))], UNARY_ARITHMETIC[op], 0
    )


@builds("NumericSeries", "binaryArithmetic")
def _binary_arithmetic(b: Builder, v: Json) -> nodes.SeriesNode:
    """ATAN2, the enum's one value: the angle of the point (input2, input1), i.e. atan2(input1, input2)."""
    o = b.obj(v, "binaryArithmetic")
    b.enum_value("BinaryArithmeticOperation", b.get(o, "operation", "binaryArithmetic"), "binaryArithmetic")
    inputs = [
        b.numeric(b.get(o, "input1", "binaryArithmetic")),
        b.numeric(b.get(o, "input2", "binaryArithmetic")),
    ]
    return pointwise("binaryArithmetic", inputs, BINARY_KERNELS["atan2"], radius(b, o, "binaryArithmetic"))


# -- conditions and if/else ----------------------------------------------------------------------
def boolean(b: Builder, value: Json, leaves: list[nodes.SeriesNode]) -> Columns:
    """A `BooleanSeries` over any numeric series and constants: each compared series becomes a
    leaf (an input of the node that aligns them all at once), the condition a function of the
    aligned columns."""
    kind, inner = b.variant("BooleanSeries", value)
    o = b.obj(inner, kind)
    left, right = b.get(o, "left", kind), b.get(o, "right", kind)
    if kind in ("and", "or"):
        a, c = boolean(b, left, leaves), boolean(b, right, leaves)
        if kind == "and":
            return lambda cols: a(cols) & c(cols)
        return lambda cols: a(cols) | c(cols)
    compare = THRESHOLD_OPS[BOOLEAN_COMPARISONS[kind]]
    i = len(leaves)
    leaves.extend([b.numeric(left), b.numeric(right)])
    return lambda cols: np.asarray(compare(cols[i], cols[i + 1]), bool)


@builds("NumericSeries", "ifElse")
def _if_else(b: Builder, v: Json) -> nodes.SeriesNode:
    """`ifElse`: at every timestamp where the condition's series and both branches align, the
    true branch's value where the condition holds, else the false branch's."""
    o = b.obj(v, "ifElse")
    leaves: list[nodes.SeriesNode] = []
    condition = boolean(b, b.get(o, "condition", "ifElse"), leaves)
    true_at = len(leaves)
    leaves.append(b.numeric(b.get(o, "trueValue", "ifElse")))
    leaves.append(b.numeric(b.get(o, "falseValue", "ifElse")))
    return pointwise("ifElse", leaves, if_else_kernel(condition, true_at, true_at + 1), FFILL_RADIUS_NS)


# -- several inputs ------------------------------------------------------------------------------
def _inputs(b: Builder, o: dict[str, Json], what: str, field_name: str = "inputs") -> list[nodes.SeriesNode]:
    raw = b.get(o, field_name, what)
    if not isinstance(raw, list):
        raise _malformed(f"{what}.{field_name} must be a list")
    if not raw:
        raise refuse(what, field_name, f"{what} needs at least one input")
    return [b.numeric(x) for x in raw]


def _reduce(op: str) -> Callable[[Builder, Json], nodes.SeriesNode]:
    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, op)
        return pointwise(op, _inputs(b, o, op), REDUCE_KERNELS[op], radius(b, o, op))

    return build


@builds("NumericSeries", "union")
def _union(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "union")
    inputs = [b.timed(x, "union") for x in _inputs(b, o, "union", "input")]
    operation = o.get("operation")
    if operation is None:
        return Union(inputs)
    operation = b.enum_value("NumericUnionOperation", operation, "union.operation")
    if operation == "THROW":
        raise refuse(
            "union",
            "operation",
            "union.operation THROW fails a live computation at the first shared timestamp; "
            "Sparkwire refuses it: omit the operation (every point kept) or choose one that merges",
        )
    return Union(inputs, UNION_REDUCERS[operation])


def _select_points(newest: bool) -> Callable[[Builder, Json], nodes.SeriesNode]:
    what = "selectNewestPoints" if newest else "selectOldestPoints"

    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, what)
        x = b.timed(b.numeric(b.get(o, "input", what)), what)
        count = b.integer_constant(b.get(o, "numPoints", what))
        if count < 0:
            raise refuse(what, "numPoints", f"{what}.numPoints must be >= 0, got {count}")
        return SelectPoints(x, count, newest, b.window_ns)

    return build


# -- filters, time, enums --------------------------------------------------------------------------
@builds("NumericSeries", "dropNan")
def _drop_nan(b: Builder, v: Json) -> nodes.SeriesNode:
    return DropNan(b.timed(b.numeric(b.get(b.obj(v, "dropNan"), "input", "dropNan")), "dropNan"))


@builds("NumericSeries", "approximateFilter")
def _approximate_filter(b: Builder, v: Json) -> nodes.SeriesNode:
    what = "approximateFilter"
    o = b.obj(v, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    op = b.enum_value("ApproximateThresholdOperator", b.get(o, "operator", what), f"{what}.operator")
    tolerance = b.double_constant(b.get(o, "tolerance", what))
    if not tolerance >= 0.0:
        raise refuse(what, "tolerance", f"{what}.tolerance must be >= 0, got {tolerance}")
    return ApproximateFilter(
        x, b.double_constant(b.get(o, "threshold", what)), tolerance, op == "NOT_EQUAL_TO"
    )


def _time_unit(b: Builder, o: dict[str, Json], what: str, default: str | None) -> str:
    unit = o.get("timeUnit", default)
    if unit is None:
        raise _malformed(f"{what}.timeUnit is required")
    return b.enum_value("TimeUnit", unit, f"{what}.timeUnit")


@builds("NumericSeries", "timeDifference")
def _time_difference(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "timeDifference")
    x = b.timed(b.series(b.get(o, "input", "timeDifference")), "timeDifference")
    return TimeDifference(x, TIME_UNIT_NANOS[_time_unit(b, o, "timeDifference", "SECONDS")])


@builds("NumericSeries", "absoluteTimestamp")
def _absolute_timestamp(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "absoluteTimestamp")
    unit = _time_unit(b, o, "absoluteTimestamp", None)
    if unit == "NANOSECONDS":
        raise refuse(
            "absoluteTimestamp", "timeUnit", "absoluteTimestamp in NANOSECONDS is refused (Nominal's docs)"
        )
    x = b.timed(b.series(b.get(o, "input", "absoluteTimestamp")), "absoluteTimestamp")
    return AbsoluteTimestamp(x, TIME_UNIT_NANOS[unit])


@builds("NumericSeries", "rollingOperation")
def _rolling_operation(b: Builder, v: Json) -> nodes.SeriesNode:
    """Deprecated `rollingOperation`: numericAggregation with rollingTime, its window a Duration."""
    o = b.obj(v, "rollingOperation")
    operator, _ = b.variant("NumericAggregationOperator", b.get(o, "operator", "rollingOperation"))
    if operator not in ROLLING_OPERATORS:
        raise registry.refusal("NumericAggregationOperator", operator)
    _, window = b.variant("Window", b.get(o, "window", "rollingOperation"))
    window_ns = b.duration_constant(window)
    if window_ns <= 0:
        raise refuse(
            "rollingOperation",
            "window",
            f"a rolling window must be positive, got {human_duration(window_ns)}",
        )
    x = b.timed(b.numeric(b.get(o, "input", "rollingOperation")), "rollingOperation")
    return RollingAggregation(x, window_ns, operator)


@builds("NumericSeries", "enumToNumeric")
def _enum_to_numeric(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "enumToNumeric")
    mapping = b.get(o, "mapping", "enumToNumeric")
    if not isinstance(mapping, dict):
        raise _malformed("enumToNumeric.mapping must be a map")
    values = {str(k): b.double_constant(c) for k, c in mapping.items()}
    default = None if o.get("defaultValue") is None else b.double_constant(o["defaultValue"])
    return EnumToNumeric(b.enum(b.get(o, "input", "enumToNumeric")), values, default)


# -- expressions ---------------------------------------------------------------------------------
def _named_inputs(b: Builder, o: dict[str, Json], what: str) -> dict[str, nodes.SeriesNode]:
    raw = b.get(o, "inputs", what)
    if not isinstance(raw, dict):
        raise _malformed(f"{what}.inputs must be a map")
    if not raw:
        raise refuse(what, "inputs", f"{what} needs at least one input")
    return {str(name): b.numeric(x) for name, x in sorted(raw.items())}


def _expression(b: Builder, o: dict[str, Json], what: str, names: list[str], boolean: bool) -> Any:
    source = b.get(o, "expression", what)
    if not isinstance(source, str):
        raise _malformed(f"{what}.expression must be a string")
    try:
        return compile_expression(source, names, boolean, b.budget.charge_subtree)
    except InvalidExpression as e:
        raise refuse(what, "expression", f"{what}.expression {source[:200]!r}: {e}") from None


@builds("NumericSeries", "arithmetic")
def _arithmetic(b: Builder, v: Json) -> nodes.SeriesNode:
    """Deprecated `arithmetic`: an expression over named inputs, aligned by forward fill."""
    o = b.obj(v, "arithmetic")
    inputs = _named_inputs(b, o, "arithmetic")
    names = list(inputs)
    f = _expression(b, o, "arithmetic", names, boolean=False)

    def kernel(cols: list[np.ndarray]) -> np.ndarray:
        out = np.asarray(f(dict(zip(names, cols, strict=True))), np.float64)
        return np.broadcast_to(out, cols[0].shape)

    return pointwise("arithmetic", list(inputs.values()), kernel, radius(b, o, "arithmetic"))


@builds("NumericSeries", "filterByExpression")
def _filter_by_expression(b: Builder, v: Json) -> nodes.SeriesNode:
    what = "filterByExpression"
    o = b.obj(v, what)
    inputs = _named_inputs(b, o, what)
    base = b.get(o, "base", what)
    if base not in inputs:
        raise refuse(what, "base", f"{what}.base {base!r} is not one of the inputs {sorted(inputs)}")
    if any(isinstance(x, nodes.Constant) for x in inputs.values()):
        raise refuse(
            what, "inputs", f"{what}: every input must be a series; write constants in the expression"
        )
    condition = _expression(b, o, what, list(inputs), boolean=True)
    return FilterByExpression(base, inputs, condition, radius(b, o, what))


# -- aggregations ---------------------------------------------------------------------------------
def operator(b: Builder, value: Json) -> Operator:
    """A `NumericAggregationOperator`; `udf` is polling-only (Nominal's AGGREGATION_UDF)."""
    kind, inner = b.variant("NumericAggregationOperator", value)
    if kind == "udf":
        raise registry.refusal("NumericAggregationOperator", kind)
    if kind != "percentile":
        return Operator(kind)
    p = b.double_constant(b.get(b.obj(inner, "percentile"), "percentile", "percentile"))
    if not 0.0 <= p <= 1.0:
        raise refuse("percentile", "percentile", f"a percentile is in [0, 1], got {p}")
    return Operator(kind, p)


def aggregation(b: Builder, v: Json) -> nodes.SeriesNode:
    """`numericAggregation` over `rollingPoints`, `groupBy`, or `rollingTime` with `percentile`
    (the other rollingTime operators are numericAggregation's RollingAggregation, above)."""
    what = "numericAggregation"
    o = b.obj(v, what)
    shape, builder = b.variant("AggregationBuilder", b.get(o, "input", what))
    op = operator(b, b.get(o, "operator", what))
    inner = b.obj(builder, shape)
    x = b.timed(b.series(b.get(inner, "input", shape)), what)
    if shape == "rollingTime":
        window_ns = b.duration_expression(b.get(inner, "window", shape))
        if window_ns <= 0:
            raise not_supported(
                f"a rolling window must be positive, got {human_duration(window_ns)}",
                "rollingTime",
                field="window",
            )
        if op.name in ROLLING_OPERATORS:
            return RollingAggregation(x, window_ns, op.name)
        return RollingTimeSlices(x, window_ns, op)
    if shape == "rollingPoints":
        count = b.integer_constant(b.get(inner, "points", shape))
        if count < 1:
            raise refuse(shape, "points", f"rollingPoints.points must be >= 1, got {count}")
        return RollingPoints(x, count, op, b.window_ns)
    tags_kind, tags = b.variant("GroupByTags", b.get(inner, "tags", shape))
    if tags_kind == "subset":  # the groups sharing the subset's values joined, then aggregated
        x = subset_of_tags(b, x, b.obj(tags, "subset"))
    if inner.get("alignment") is not None:
        raise refuse(
            "groupBy",
            "alignment",
            "groupBy.alignment (aligning the source groups before aggregating) is not supported; omit it "
            "to aggregate the points at their own timestamps",
        )
    stamp_kind, every = b.variant("GroupByTimestamp", b.get(inner, "timestamp", shape))
    width = None if stamp_kind == "current" else b.duration_expression(every)
    if width is not None and width <= 0:
        raise refuse(
            "groupBy", "timestamp", f"groupBy.timestamp every must be positive, got {human_duration(width)}"
        )
    return GroupByTime(x, width, op)


@builds("NumericSeries", "aggregate")
def _aggregate_deprecated(b: Builder, v: Json) -> nodes.SeriesNode:
    """Deprecated `aggregate`: points sharing a timestamp, within the input's own tag groups."""
    o = b.obj(v, "aggregate")
    fn = b.enum_value("NumericAggregationFunction", b.get(o, "function", "aggregate"), "aggregate.function")
    if o.get("groupByTags") or o.get("aggregateByAllGroupings"):
        raise refuse(
            "aggregate",
            "groupByTags",
            "aggregate across tag groups (groupByTags / aggregateByAllGroupings) is not supported; "
            "Sparkwire groups only by the channel's groupByTags",
        )
    if o.get("interpolationConfiguration") is not None:
        raise refuse(
            "aggregate", "interpolationConfiguration", "aggregate with interpolation is not supported"
        )
    x = b.timed(b.numeric(b.get(o, "input", "aggregate")), "aggregate")
    return GroupByTime(x, None, Operator(FUNCTION_OPERATORS[fn]))


@builds("NumericSeries", "aggregateUnderRanges")
def _under_ranges(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "aggregateUnderRanges")
    fn = b.enum_value(
        "NumericAggregationFunction",
        b.get(o, "operation", "aggregateUnderRanges"),
        "aggregateUnderRanges.operation",
    )
    x = b.timed(b.numeric(b.get(o, "input", "aggregateUnderRanges")), "aggregateUnderRanges")
    ranges = b.ranges(b.get(o, "ranges", "aggregateUnderRanges"))
    return AggregateUnderRanges(x, ranges, Operator(FUNCTION_OPERATORS[fn]), b.window_ns)


@builds("NumericSeries", "groupWithinRangesV2")
def _within_ranges(b: Builder, v: Json) -> nodes.SeriesNode:
    what = "groupWithinRangesV2"
    o = b.obj(v, what)
    op = operator(b, b.get(o, "aggregation", what))
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    return AggregateUnderRanges(x, b.ranges(b.get(o, "ranges", what)), op, b.window_ns)


@builds("NumericSeries", "filterTransformation")
def _filter_transformation(b: Builder, v: Json) -> nodes.SeriesNode:
    what = "filterTransformation"
    o = b.obj(v, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    return FilterWithinRanges(x, b.ranges(b.get(o, "filter", what)))


@builds("NumericSeries", "rangeDuration")
def _range_duration(b: Builder, v: Json) -> nodes.SeriesNode:
    what = "rangeDuration"
    o = b.obj(v, what)
    behavior, _ = b.variant("UnboundedRangeBehavior", b.get(o, "unboundedRangeBehavior", what))
    unit = _time_unit(b, o, what, "SECONDS")
    return RangeDuration(
        b.ranges(b.get(o, "input", what)), TIME_UNIT_NANOS[unit], behavior == "clampToWindow"
    )


@builds("NumericSeries", "countDuplicate")
def _count_duplicate(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "countDuplicate")
    raw = b.get(o, "inputs", "countDuplicate")
    if not isinstance(raw, list):
        raise _malformed("countDuplicate.inputs must be a list")
    if not raw:
        raise refuse("countDuplicate", "inputs", "countDuplicate needs at least one input")
    return CountDuplicate([b.enum(x) for x in raw])


def _family_input(b: Builder, o: dict[str, Json], what: str, categorical: bool) -> nodes.SeriesNode:
    raw = b.get(o, "input", what)
    return b.timed(b.enum(raw) if categorical else b.numeric(raw), what)


def to_start_of_interval(categorical: bool) -> Callable[[Builder, Json], nodes.SeriesNode]:
    """`toStartOfInterval`, NumericSeries or (`categorical`) EnumSeries: points snapped to the
    interval's start, colliding points all kept (its docs leave merging them to a downstream node)."""

    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        what = "toStartOfInterval"
        o = b.obj(v, what)
        width = b.duration_expression(b.get(o, "window", what))
        if width <= 0:
            raise refuse(what, "window", f"{what}.window must be positive, got {human_duration(width)}")
        return ToStartOfInterval(_family_input(b, o, what, categorical), width, categorical=categorical)

    return build


def nth_point(categorical: bool) -> Callable[[Builder, Json], nodes.SeriesNode]:
    """`nthPointDownsample`, NumericSeries or (`categorical`) EnumSeries: every n-th point counted
    from the window's first."""

    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        what = "nthPointDownsample"
        o = b.obj(v, what)
        n = b.integer_constant(b.get(o, "n", what))
        if n < 1:
            raise refuse(what, "n", f"{what}.n must be >= 1, got {n}")
        return NthPoint(_family_input(b, o, what, categorical), n, b.window_ns, categorical=categorical)

    return build


MAX_RESAMPLE_POINTS = 10_000_000  # Nominal's TooManyResamplePoints limit


@builds("NumericSeries", "resampleV2")
def _resample_v2(b: Builder, v: Json) -> nodes.SeriesNode:
    what = "resampleV2"
    o = b.obj(v, what)
    interval = b.duration_expression(b.get(o, "interval", what))
    if interval <= 0:
        raise refuse(what, "interval", f"{what}.interval must be positive, got {human_duration(interval)}")
    if b.window_ns // interval > MAX_RESAMPLE_POINTS:
        raise ComputeError(
            "TooManyPoints",
            f"{what} every {human_duration(interval)} over a {human_duration(b.window_ns)} window exceeds "
            f"{MAX_RESAMPLE_POINTS:,} points",
            {"limit": str(MAX_RESAMPLE_POINTS)},
        )
    return ResampleForwardFill(b.timed(b.numeric(b.get(o, "input", what)), what), interval, b.window_ns)


@builds("NumericSeries", "resample")
def _resample(b: Builder, v: Json) -> nodes.SeriesNode:
    """`resample` (v1): forward fill (the default, or asked for by name). Constant interpolation is
    refused by name: its docs say only what an interval without points takes, and its gaps "at the
    start of the series ... and at the end" reach the window's moving edges, so the answer would
    change with the clock between points."""
    what = "resample"
    o = b.obj(v, what)
    config = b.obj(b.get(o, "resampleConfiguration", what), "NumericResampleConfiguration")
    interval = b.duration_constant(b.get(config, "interval", "resampleConfiguration"))
    if config.get("interpolation") is not None:
        kind, _ = b.variant("NumericResampleInterpolationConfiguration", config["interpolation"])
        if kind != "forwardFillResampleInterpolationConfiguration":
            raise refuse(
                what,
                "resampleConfiguration.interpolation",
                "constant interpolation is not supported: its docs leave open what an interval holding "
                "points takes, and its empty intervals at the window's moving edges change with the "
                "clock; use forward fill",
            )
    if interval <= 0:
        raise refuse(
            what,
            "resampleConfiguration.interval",
            f"{what}.interval must be positive, got {human_duration(interval)}",
        )
    if b.window_ns // interval > MAX_RESAMPLE_POINTS:
        raise ComputeError(
            "TooManyPoints",
            f"{what} every {human_duration(interval)} over a {human_duration(b.window_ns)} window exceeds "
            f"{MAX_RESAMPLE_POINTS:,} points",
            {"limit": str(MAX_RESAMPLE_POINTS)},
        )
    node = b.timed(b.numeric(b.get(o, "input", what)), what)
    return ResampleForwardFill(node, interval, b.window_ns, last_rounded_up=True)


def time_range_filter(categorical: bool) -> Callable[[Builder, Json], nodes.SeriesNode]:
    """`timeRangeFilter`, NumericSeries or (`categorical`) EnumSeries: the points from startTime on.
    An endTime is a fixed end, which nothing after it can stream (Nominal's own refusal)."""

    def build(b: Builder, v: Json) -> nodes.SeriesNode:
        what = "timeRangeFilter"
        o = b.obj(v, what)
        if o.get("endTime") is not None:
            raise ComputeError(
                "InvalidComputation",
                f"{what} with an endTime has a fixed end: nothing after it can stream",
                {"invalidTypes": "TIME_RANGE_FILTER_WITH_FIXED_END", "field": "endTime"},
            )
        x = _family_input(b, o, what, categorical)
        start = o.get("startTime")
        return x if start is None else SinceTime(x, b.timestamp_constant(start), categorical=categorical)

    return build


# The bucket columns a numericAggregations name may not take in Arrow output (compute/evaluation/
# output_format.py names them); in LEGACY the extra columns travel apart, in `NumericBucket.aggregations`.
def summary_aggregations(
    b: Builder, o: dict[str, Json]
) -> tuple[tuple[str, Callable[[np.ndarray], float]], ...]:
    """`SummarizeSeries.numericAggregations`: each named extra column of a bucket, the operator's
    reduction of that bucket's own points (exact: a percentile is of the bucket's values)."""
    raw = o.get("numericAggregations") or {}
    if not isinstance(raw, dict):
        raise _malformed("SummarizeSeries.numericAggregations must be a map of name -> operator")
    out = []
    for name in sorted(raw):
        if not name:
            raise refuse(
                "SummarizeSeries", "numericAggregations", "a numericAggregations name must not be empty"
            )
        out.append((name, operator(b, raw[name]).reduce))
    return tuple(out)


def percentile_columns(
    percentiles: tuple[tuple[str, float], ...],
) -> tuple[tuple[str, Callable[[np.ndarray], float]], ...]:
    """numericOutputFieldsV2's percentile columns, reduced per bucket as numericAggregations are."""
    return tuple((name, Operator("percentile", p).reduce) for name, p in percentiles)


# -- units ---------------------------------------------------------------------------------------
def _unit_symbol(b: Builder, value: Json, what: str, field_name: str) -> str:
    if not isinstance(value, str):
        raise _malformed(f"{what}.{field_name} must be a unit symbol (a string)")
    try:
        unit(value)
    except UnknownUnit:
        raise refuse(
            what,
            field_name,
            f"{what}.{field_name} '{value}' is not a unit symbol Sparkwire knows (UCUM, read by pint)",
        ) from None
    return value


@builds("NumericSeries", "unitOverride")
def _unit_override(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "unitOverride")
    x = b.timed(b.numeric(b.get(o, "input", "unitOverride")), "unitOverride")
    symbol = o.get("unit")
    return WithUnit(x, None if symbol is None else _unit_symbol(b, symbol, "unitOverride", "unit"))


@builds("NumericSeries", "unitConversion")
def _unit_conversion(b: Builder, v: Json) -> nodes.SeriesNode:
    """The input's unit must be known: Sparkwire's channels carry none, so the input is a
    `unitOverride` (or another conversion) naming it."""
    what = "unitConversion"
    o = b.obj(v, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    target = _unit_symbol(b, b.get(o, "outputUnit", what), what, "outputUnit")
    if not isinstance(x, WithUnit) or x.unit is None:
        raise refuse(
            what,
            "input",
            f"{what}: the input series has no unit (Sparkwire's channels carry none); "
            "name it with unitOverride around the input",
        )
    try:
        scale, offset = conversion(x.unit, target)
    except ValueError as e:
        raise refuse(what, "outputUnit", f"{what}: {e}") from None
    return Converted(x, target, scale, offset)


for op in TRIG_KERNELS:
    builds("NumericSeries", op)(_trig(op))
for op in BINARY_KERNELS:
    builds("NumericSeries", op)(_binary_math(op))
for op in BIT_OPERATIONS:
    builds("NumericSeries", op)(_bit(op))
for op in REDUCE_KERNELS:
    builds("NumericSeries", op)(_reduce(op))
builds("NumericSeries", "selectNewestPoints")(_select_points(newest=True))
builds("NumericSeries", "selectOldestPoints")(_select_points(newest=False))
builds("NumericSeries", "toStartOfInterval")(to_start_of_interval(categorical=False))
builds("NumericSeries", "nthPointDownsample")(nth_point(categorical=False))
builds("NumericSeries", "timeRangeFilter")(time_range_filter(categorical=False))
builds("EnumSeries", "toStartOfInterval")(
    to_start_of_interval(categorical=True)
)  # one builder, both families
builds("EnumSeries", "nthPointDownsample")(nth_point(categorical=True))
builds("EnumSeries", "timeRangeFilter")(time_range_filter(categorical=True))
builds("Series", "raw")(lambda b, v: b.channel_input(v, None))
builds("Series", "numeric")(lambda b, v: b.numeric(v))
builds("Series", "enum")(lambda b, v: b.enum(v))
