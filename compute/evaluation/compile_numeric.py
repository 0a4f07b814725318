"""Builders of the `NumericSeries` variants beyond the first subset (compiler.py registers them in
its table): trigonometry, power, modulo, floor division, atan2, the bit operations, offset, scale,
the deprecated unary/binary arithmetic enums, if/else, the cross-series reductions, union, the
newest/oldest points, NaN and approximate filters, time differences and absolute timestamps, the
deprecated rolling operation, and enum-to-numeric.

Each builder reads a variant's JSON through the compiler's `_Builder` (its shape checks and
Nominal's error names) and returns an evaluator of compute/evaluation/nodes/."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from compute.evaluation import nodes
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError, not_supported, polling_only
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
from compute.evaluation.nodes.arithmetic import THRESHOLD_OPS
from compute.evaluation.nodes.combine import UNION_REDUCERS, SelectPoints, Union
from compute.evaluation.nodes.expression import FilterByExpression, InvalidExpression, compile_expression
from compute.evaluation.nodes.math import (
    BINARY_FIELDS,
    BINARY_KERNELS,
    BIT_OPERATIONS,
    REDUCE_KERNELS,
    TRIG_KERNELS,
    Kernel,
    Pointwise,
    bit_kernel,
    fold,
    if_else_kernel,
)
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
    BOOLEAN_COMPARISONS,
    ROLLING_OPERATORS,
    TIME_UNIT_NANOS,
)
from compute.evaluation.units import UnknownUnit, conversion, unit

if TYPE_CHECKING:
    from compute.evaluation.compiler import _Builder

Json = Any
Columns = Callable[[list[np.ndarray]], np.ndarray]


def _malformed(message: str) -> Exception:
    from compute.evaluation.compiler import MalformedNode  # the compiler imports this module

    return MalformedNode(message)


def _refuse(what: str, field_name: str, message: str) -> ComputeError:
    return not_supported(message, what, field=field_name)


def radius(b: _Builder, o: dict[str, Json], what: str) -> int:
    """`interpolationConfiguration`: forward fill with its radius (Nominal's default 1 s)."""
    config = o.get("interpolationConfiguration")
    if config is None:
        return FFILL_RADIUS_NS
    _, inner = b.variant("InterpolationConfiguration", config)
    ffill = b.obj(inner, "forwardFillInterpolation")
    ns = b.duration_constant(b.get(ffill, "interpolationRadius", "forwardFillInterpolation"))
    if ns < 0:
        raise _refuse(
            what,
            "interpolationConfiguration",
            f"{what}: a negative interpolation radius ({human_duration(ns)})",
        )
    return ns


def pointwise(name: str, inputs: list[nodes.SeriesNode], kernel: Kernel, radius_ns: int) -> nodes.SeriesNode:
    """The node, or its value folded now when every input is a constant."""
    if all(isinstance(x, nodes.Constant) for x in inputs):
        value = fold(kernel, [x.value for x in inputs if isinstance(x, nodes.Constant)])
        if value is None:
            raise not_supported(f"'{name}' of constants has no value", name)
        return nodes.Constant(value)
    return Pointwise(name, inputs, kernel, radius_ns)


# -- one or two inputs ----------------------------------------------------------------------------
def _trig(op: str) -> Callable[[_Builder, Json], nodes.SeriesNode]:
    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        return pointwise(op, [b.numeric(b.get(b.obj(v, op), "x", op))], TRIG_KERNELS[op], 0)

    return build


def _binary_math(op: str) -> Callable[[_Builder, Json], nodes.SeriesNode]:
    first, second = BINARY_FIELDS[op]

    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, op)
        inputs = [b.numeric(b.get(o, first, op)), b.numeric(b.get(o, second, op))]
        return pointwise(op, inputs, BINARY_KERNELS[op], FFILL_RADIUS_NS)

    return build


def _bit_operand(b: _Builder, operation: str, operand: int, field_name: str) -> Kernel:
    """Shifts and bit indices are 0..63 (Nominal's InvalidBitOperation otherwise); and/or/xor
    operands are any int64."""
    shifts = operation in ("bitShiftLeft", "bitShiftRight", "bitTest")
    low, high = (0, 63) if shifts else (-(2**63), 2**63 - 1)
    if not low <= operand <= high:
        raise _refuse(operation, field_name, f"{operation}.{field_name} {operand} is outside [{low}, {high}]")
    return bit_kernel(operation, operand)


def _bit(op: str) -> Callable[[_Builder, Json], nodes.SeriesNode]:
    field_name = "index" if op == "bitTest" else "operand"

    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
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


def _bit_operation(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "bitOperation")
    x = b.numeric(b.get(o, "input", "bitOperation"))
    kind, inner = b.variant("BitOperationFunction", b.get(o, "function", "bitOperation"))
    op, field_name = BIT_FUNCTIONS[kind]
    operand = b.get(b.obj(inner, kind), field_name, kind)
    if not isinstance(operand, int) or isinstance(operand, bool):
        raise _malformed(f"bitOperation {kind}.{field_name} must be an integer")
    return pointwise("bitOperation", [x], _bit_operand(b, op, operand, field_name), 0)


def _offset(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "offset")
    x = b.numeric(b.get(o, "input", "offset"))
    return pointwise(
        "offset",
        [x, nodes.Constant(b.double_constant(b.get(o, "scalar", "offset")))],
        lambda c: c[0] + c[1],
        0,
    )


def _scale(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "scale")
    if o.get("scalarUnit") is not None:
        raise _refuse(
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


def _unary_arithmetic(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "unaryArithmetic")
    op = b.enum_value("UnaryArithmeticOperation", b.get(o, "operation", "unaryArithmetic"), "unaryArithmetic")
    return pointwise(
        "unaryArithmetic", [b.numeric(b.get(o, "input", "unaryArithmetic"))], UNARY_ARITHMETIC[op], 0
    )


def _binary_arithmetic(b: _Builder, v: Json) -> nodes.SeriesNode:
    """ATAN2, the enum's one value: the angle of the point (input2, input1), i.e. atan2(input1, input2)."""
    o = b.obj(v, "binaryArithmetic")
    b.enum_value("BinaryArithmeticOperation", b.get(o, "operation", "binaryArithmetic"), "binaryArithmetic")
    inputs = [
        b.numeric(b.get(o, "input1", "binaryArithmetic")),
        b.numeric(b.get(o, "input2", "binaryArithmetic")),
    ]
    return pointwise("binaryArithmetic", inputs, BINARY_KERNELS["atan2"], radius(b, o, "binaryArithmetic"))


# -- conditions and if/else ----------------------------------------------------------------------
def boolean(b: _Builder, value: Json, leaves: list[nodes.SeriesNode]) -> Columns:
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


def _if_else(b: _Builder, v: Json) -> nodes.SeriesNode:
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
def _inputs(b: _Builder, o: dict[str, Json], what: str, field_name: str = "inputs") -> list[nodes.SeriesNode]:
    raw = b.get(o, field_name, what)
    if not isinstance(raw, list):
        raise _malformed(f"{what}.{field_name} must be a list")
    if not raw:
        raise _refuse(what, field_name, f"{what} needs at least one input")
    return [b.numeric(x) for x in raw]


def _reduce(op: str) -> Callable[[_Builder, Json], nodes.SeriesNode]:
    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, op)
        return pointwise(op, _inputs(b, o, op), REDUCE_KERNELS[op], radius(b, o, op))

    return build


def _union(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "union")
    inputs = [b.timed(x, "union") for x in _inputs(b, o, "union", "input")]
    operation = o.get("operation")
    if operation is None:
        return Union(inputs)
    operation = b.enum_value("NumericUnionOperation", operation, "union.operation")
    if operation == "THROW":
        raise _refuse(
            "union",
            "operation",
            "union.operation THROW fails a live computation at the first shared timestamp; "
            "Sparkwire refuses it: omit the operation (every point kept) or choose one that merges",
        )
    return Union(inputs, UNION_REDUCERS[operation])


def _select_points(newest: bool) -> Callable[[_Builder, Json], nodes.SeriesNode]:
    what = "selectNewestPoints" if newest else "selectOldestPoints"

    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, what)
        x = b.timed(b.numeric(b.get(o, "input", what)), what)
        count = b.integer_constant(b.get(o, "numPoints", what))
        if count < 0:
            raise _refuse(what, "numPoints", f"{what}.numPoints must be >= 0, got {count}")
        return SelectPoints(x, count, newest, b.window_ns)

    return build


# -- filters, time, enums --------------------------------------------------------------------------
def _drop_nan(b: _Builder, v: Json) -> nodes.SeriesNode:
    return DropNan(b.timed(b.numeric(b.get(b.obj(v, "dropNan"), "input", "dropNan")), "dropNan"))


def _approximate_filter(b: _Builder, v: Json) -> nodes.SeriesNode:
    what = "approximateFilter"
    o = b.obj(v, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    op = b.enum_value("ApproximateThresholdOperator", b.get(o, "operator", what), f"{what}.operator")
    tolerance = b.double_constant(b.get(o, "tolerance", what))
    if not tolerance >= 0.0:
        raise _refuse(what, "tolerance", f"{what}.tolerance must be >= 0, got {tolerance}")
    return ApproximateFilter(
        x, b.double_constant(b.get(o, "threshold", what)), tolerance, op == "NOT_EQUAL_TO"
    )


def _time_unit(b: _Builder, o: dict[str, Json], what: str, default: str | None) -> str:
    unit = o.get("timeUnit", default)
    if unit is None:
        raise _malformed(f"{what}.timeUnit is required")
    return b.enum_value("TimeUnit", unit, f"{what}.timeUnit")


def _time_difference(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "timeDifference")
    x = b.timed(b.series(b.get(o, "input", "timeDifference")), "timeDifference")
    return TimeDifference(x, TIME_UNIT_NANOS[_time_unit(b, o, "timeDifference", "SECONDS")])


def _absolute_timestamp(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "absoluteTimestamp")
    unit = _time_unit(b, o, "absoluteTimestamp", None)
    if unit == "NANOSECONDS":
        raise _refuse(
            "absoluteTimestamp", "timeUnit", "absoluteTimestamp in NANOSECONDS is refused (Nominal's docs)"
        )
    x = b.timed(b.series(b.get(o, "input", "absoluteTimestamp")), "absoluteTimestamp")
    return AbsoluteTimestamp(x, TIME_UNIT_NANOS[unit])


def _rolling_operation(b: _Builder, v: Json) -> nodes.SeriesNode:
    """Deprecated `rollingOperation`: numericAggregation with rollingTime, its window a Duration."""
    o = b.obj(v, "rollingOperation")
    operator, _ = b.variant("NumericAggregationOperator", b.get(o, "operator", "rollingOperation"))
    if operator not in ROLLING_OPERATORS:
        raise b.unsupported("NumericAggregationOperator", operator)
    _, window = b.variant("Window", b.get(o, "window", "rollingOperation"))
    window_ns = b.duration_constant(window)
    if window_ns <= 0:
        raise _refuse(
            "rollingOperation",
            "window",
            f"a rolling window must be positive, got {human_duration(window_ns)}",
        )
    x = b.timed(b.numeric(b.get(o, "input", "rollingOperation")), "rollingOperation")
    return RollingAggregation(x, window_ns, operator)


def _enum_to_numeric(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "enumToNumeric")
    mapping = b.get(o, "mapping", "enumToNumeric")
    if not isinstance(mapping, dict):
        raise _malformed("enumToNumeric.mapping must be a map")
    values = {str(k): b.double_constant(c) for k, c in mapping.items()}
    default = None if o.get("defaultValue") is None else b.double_constant(o["defaultValue"])
    return EnumToNumeric(b.enum(b.get(o, "input", "enumToNumeric")), values, default)


# -- expressions ---------------------------------------------------------------------------------
def _named_inputs(b: _Builder, o: dict[str, Json], what: str) -> dict[str, nodes.SeriesNode]:
    raw = b.get(o, "inputs", what)
    if not isinstance(raw, dict):
        raise _malformed(f"{what}.inputs must be a map")
    if not raw:
        raise _refuse(what, "inputs", f"{what} needs at least one input")
    return {str(name): b.numeric(x) for name, x in sorted(raw.items())}


def _expression(b: _Builder, o: dict[str, Json], what: str, names: list[str], boolean: bool) -> Any:
    source = b.get(o, "expression", what)
    if not isinstance(source, str):
        raise _malformed(f"{what}.expression must be a string")
    try:
        return compile_expression(source, names, boolean, b.budget.charge_subtree)
    except InvalidExpression as e:
        raise _refuse(what, "expression", f"{what}.expression {source[:200]!r}: {e}") from None


def _arithmetic(b: _Builder, v: Json) -> nodes.SeriesNode:
    """Deprecated `arithmetic`: an expression over named inputs, aligned by forward fill."""
    o = b.obj(v, "arithmetic")
    inputs = _named_inputs(b, o, "arithmetic")
    names = list(inputs)
    f = _expression(b, o, "arithmetic", names, boolean=False)

    def kernel(cols: list[np.ndarray]) -> np.ndarray:
        out = np.asarray(f(dict(zip(names, cols, strict=True))), np.float64)
        return np.broadcast_to(out, cols[0].shape)

    return pointwise("arithmetic", list(inputs.values()), kernel, radius(b, o, "arithmetic"))


def _filter_by_expression(b: _Builder, v: Json) -> nodes.SeriesNode:
    what = "filterByExpression"
    o = b.obj(v, what)
    inputs = _named_inputs(b, o, what)
    base = b.get(o, "base", what)
    if base not in inputs:
        raise _refuse(what, "base", f"{what}.base {base!r} is not one of the inputs {sorted(inputs)}")
    if any(isinstance(x, nodes.Constant) for x in inputs.values()):
        raise _refuse(
            what, "inputs", f"{what}: every input must be a series; write constants in the expression"
        )
    condition = _expression(b, o, what, list(inputs), boolean=True)
    return FilterByExpression(base, inputs, condition, radius(b, o, what))


# -- aggregations ---------------------------------------------------------------------------------
def operator(b: _Builder, value: Json) -> Operator:
    """A `NumericAggregationOperator`; `udf` is polling-only (Nominal's AGGREGATION_UDF)."""
    kind, inner = b.variant("NumericAggregationOperator", value)
    if kind == "udf":
        raise b.unsupported("NumericAggregationOperator", kind)
    if kind != "percentile":
        return Operator(kind)
    p = b.double_constant(b.get(b.obj(inner, "percentile"), "percentile", "percentile"))
    if not 0.0 <= p <= 1.0:
        raise _refuse("percentile", "percentile", f"a percentile is in [0, 1], got {p}")
    return Operator(kind, p)


def aggregation(b: _Builder, v: Json) -> nodes.SeriesNode:
    """`numericAggregation` over `rollingPoints`, `groupBy`, or `rollingTime` with `percentile`
    (the other rollingTime operators are compiler.py's RollingAggregation)."""
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
            raise _refuse(shape, "points", f"rollingPoints.points must be >= 1, got {count}")
        return RollingPoints(x, count, op, b.window_ns)
    tags_kind, tags = b.variant("GroupByTags", b.get(inner, "tags", shape))
    if tags_kind == "subset":  # the groups sharing the subset's values joined, then aggregated
        from compute.evaluation.compile_cross_group import subset_of_tags  # it imports this module

        x = subset_of_tags(b, x, b.obj(tags, "subset"))
    if inner.get("alignment") is not None:
        raise _refuse(
            "groupBy",
            "alignment",
            "groupBy.alignment (aligning the source groups before aggregating) is not supported; omit it "
            "to aggregate the points at their own timestamps",
        )
    stamp_kind, every = b.variant("GroupByTimestamp", b.get(inner, "timestamp", shape))
    width = None if stamp_kind == "current" else b.duration_expression(every)
    if width is not None and width <= 0:
        raise _refuse(
            "groupBy", "timestamp", f"groupBy.timestamp every must be positive, got {human_duration(width)}"
        )
    return GroupByTime(x, width, op)


def _aggregate_deprecated(b: _Builder, v: Json) -> nodes.SeriesNode:
    """Deprecated `aggregate`: points sharing a timestamp, within the input's own tag groups."""
    o = b.obj(v, "aggregate")
    fn = b.enum_value("NumericAggregationFunction", b.get(o, "function", "aggregate"), "aggregate.function")
    if o.get("groupByTags") or o.get("aggregateByAllGroupings"):
        raise _refuse(
            "aggregate",
            "groupByTags",
            "aggregate across tag groups (groupByTags / aggregateByAllGroupings) is not supported; "
            "Sparkwire groups only by the channel's groupByTags",
        )
    if o.get("interpolationConfiguration") is not None:
        raise _refuse(
            "aggregate", "interpolationConfiguration", "aggregate with interpolation is not supported"
        )
    x = b.timed(b.numeric(b.get(o, "input", "aggregate")), "aggregate")
    return GroupByTime(x, None, Operator(FUNCTION_OPERATORS[fn]))


def _under_ranges(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "aggregateUnderRanges")
    fn = b.enum_value(
        "NumericAggregationFunction",
        b.get(o, "operation", "aggregateUnderRanges"),
        "aggregateUnderRanges.operation",
    )
    x = b.timed(b.numeric(b.get(o, "input", "aggregateUnderRanges")), "aggregateUnderRanges")
    ranges = b.ranges(b.get(o, "ranges", "aggregateUnderRanges"))
    return AggregateUnderRanges(x, ranges, Operator(FUNCTION_OPERATORS[fn]), b.window_ns)


def _within_ranges(b: _Builder, v: Json) -> nodes.SeriesNode:
    what = "groupWithinRangesV2"
    o = b.obj(v, what)
    op = operator(b, b.get(o, "aggregation", what))
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    return AggregateUnderRanges(x, b.ranges(b.get(o, "ranges", what)), op, b.window_ns)


def _filter_transformation(b: _Builder, v: Json) -> nodes.SeriesNode:
    what = "filterTransformation"
    o = b.obj(v, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    return FilterWithinRanges(x, b.ranges(b.get(o, "filter", what)))


def _range_duration(b: _Builder, v: Json) -> nodes.SeriesNode:
    what = "rangeDuration"
    o = b.obj(v, what)
    behavior, _ = b.variant("UnboundedRangeBehavior", b.get(o, "unboundedRangeBehavior", what))
    unit = _time_unit(b, o, what, "SECONDS")
    return RangeDuration(
        b.ranges(b.get(o, "input", what)), TIME_UNIT_NANOS[unit], behavior == "clampToWindow"
    )


def _count_duplicate(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "countDuplicate")
    raw = b.get(o, "inputs", "countDuplicate")
    if not isinstance(raw, list):
        raise _malformed("countDuplicate.inputs must be a list")
    if not raw:
        raise _refuse("countDuplicate", "inputs", "countDuplicate needs at least one input")
    return CountDuplicate([b.enum(x) for x in raw])


def _family_input(b: _Builder, o: dict[str, Json], what: str, categorical: bool) -> nodes.SeriesNode:
    raw = b.get(o, "input", what)
    return b.timed(b.enum(raw) if categorical else b.numeric(raw), what)


def to_start_of_interval(categorical: bool) -> Callable[[_Builder, Json], nodes.SeriesNode]:
    """`toStartOfInterval`, NumericSeries or (`categorical`) EnumSeries: points snapped to the
    interval's start, colliding points all kept (its docs leave merging them to a downstream node)."""

    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        what = "toStartOfInterval"
        o = b.obj(v, what)
        width = b.duration_expression(b.get(o, "window", what))
        if width <= 0:
            raise _refuse(what, "window", f"{what}.window must be positive, got {human_duration(width)}")
        return ToStartOfInterval(_family_input(b, o, what, categorical), width, categorical=categorical)

    return build


def nth_point(categorical: bool) -> Callable[[_Builder, Json], nodes.SeriesNode]:
    """`nthPointDownsample`, NumericSeries or (`categorical`) EnumSeries: every n-th point counted
    from the window's first."""

    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        what = "nthPointDownsample"
        o = b.obj(v, what)
        n = b.integer_constant(b.get(o, "n", what))
        if n < 1:
            raise _refuse(what, "n", f"{what}.n must be >= 1, got {n}")
        return NthPoint(_family_input(b, o, what, categorical), n, b.window_ns, categorical=categorical)

    return build


MAX_RESAMPLE_POINTS = 10_000_000  # Nominal's TooManyResamplePoints limit


def _resample_v2(b: _Builder, v: Json) -> nodes.SeriesNode:
    what = "resampleV2"
    o = b.obj(v, what)
    interval = b.duration_expression(b.get(o, "interval", what))
    if interval <= 0:
        raise _refuse(what, "interval", f"{what}.interval must be positive, got {human_duration(interval)}")
    if b.window_ns // interval > MAX_RESAMPLE_POINTS:
        raise ComputeError(
            "TooManyPoints",
            f"{what} every {human_duration(interval)} over a {human_duration(b.window_ns)} window exceeds "
            f"{MAX_RESAMPLE_POINTS:,} points",
            {"limit": str(MAX_RESAMPLE_POINTS)},
        )
    return ResampleForwardFill(b.timed(b.numeric(b.get(o, "input", what)), what), interval, b.window_ns)


def _resample(b: _Builder, v: Json) -> nodes.SeriesNode:
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
            raise _refuse(
                what,
                "resampleConfiguration.interpolation",
                "constant interpolation is not supported: its docs leave open what an interval holding "
                "points takes, and its empty intervals at the window's moving edges change with the "
                "clock; use forward fill",
            )
    if interval <= 0:
        raise _refuse(
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


def _timestamp_constant(b: _Builder, value: Json) -> int:
    kind, inner = b.variant("TimestampConstant", value)
    if kind == "variable":
        _, inner = b.typed_variable(inner, ("timestamp",))
    t = b.obj(inner, "Timestamp")
    seconds, nanos = t.get("seconds"), t.get("nanos", 0)
    if not isinstance(seconds, int) or not isinstance(nanos, int) or isinstance(seconds, bool):
        raise _malformed("a Timestamp needs integer 'seconds' and 'nanos'")
    return seconds * 1_000_000_000 + nanos


def time_range_filter(categorical: bool) -> Callable[[_Builder, Json], nodes.SeriesNode]:
    """`timeRangeFilter`, NumericSeries or (`categorical`) EnumSeries: the points from startTime on.
    An endTime is a fixed end, which nothing after it can stream (Nominal's own refusal)."""

    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
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
        return x if start is None else SinceTime(x, _timestamp_constant(b, start), categorical=categorical)

    return build


# -- what stays refused, and why ------------------------------------------------------------------
# Nominal streams these, but Sparkwire cannot compute them honestly; InvalidComputationType has no
# value for "not supported here", so invalidTypes stays empty and `variant` names the node.
REFUSED: dict[str, str] = {}
# Refused as Nominal does: polling only, with its PollingOnlyComputationType.
POLLING_ONLY: dict[str, tuple[str, str]] = {
    "select1dArrayIndex": (
        "ARRAY",
        "select1dArrayIndex reads an array series, which streams by polling only",
    ),
    "extractFromStruct": ("STRUCT", "extractFromStruct reads a struct series, which streams by polling only"),
}


def _refused(kind: str) -> Callable[[_Builder, Json], nodes.SeriesNode]:
    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        if kind in POLLING_ONLY:
            enum, reason = POLLING_ONLY[kind]
            raise polling_only(reason, enum)
        raise not_supported(f"NumericSeries '{kind}' is not supported by Sparkwire: {REFUSED[kind]}", kind)

    return build


# The bucket columns a numericAggregations name may not take in Arrow output (compute/evaluation/
# output_format.py names them); in LEGACY the extra columns travel apart, in `NumericBucket.aggregations`.
def summary_aggregations(
    b: _Builder, o: dict[str, Json]
) -> tuple[tuple[str, Callable[[np.ndarray], float]], ...]:
    """`SummarizeSeries.numericAggregations`: each named extra column of a bucket, the operator's
    reduction of that bucket's own points (exact: a percentile is of the bucket's values)."""
    raw = o.get("numericAggregations") or {}
    if not isinstance(raw, dict):
        raise _malformed("SummarizeSeries.numericAggregations must be a map of name -> operator")
    out = []
    for name in sorted(raw):
        if not name:
            raise _refuse(
                "SummarizeSeries", "numericAggregations", "a numericAggregations name must not be empty"
            )
        out.append((name, operator(b, raw[name]).reduce))
    return tuple(out)


def percentile_columns(
    percentiles: tuple[tuple[str, float], ...],
) -> tuple[tuple[str, Callable[[np.ndarray], float]], ...]:
    """numericOutputFieldsV2's percentile columns, reduced per bucket as numericAggregations are."""
    return tuple((name, Operator("percentile", p).reduce) for name, p in percentiles)


def _fluid_property(kind: str) -> Callable[[_Builder, Json], nodes.SeriesNode]:
    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        from compute.evaluation import compile_fluids  # it imports this module's radius, pointwise

        return compile_fluids.build(b, kind, v)

    return build


# -- units ---------------------------------------------------------------------------------------
def _unit_symbol(b: _Builder, value: Json, what: str, field_name: str) -> str:
    if not isinstance(value, str):
        raise _malformed(f"{what}.{field_name} must be a unit symbol (a string)")
    try:
        unit(value)
    except UnknownUnit:
        raise _refuse(
            what,
            field_name,
            f"{what}.{field_name} '{value}' is not a unit symbol Sparkwire knows (UCUM, read by pint)",
        ) from None
    return value


def _unit_override(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "unitOverride")
    x = b.timed(b.numeric(b.get(o, "input", "unitOverride")), "unitOverride")
    symbol = o.get("unit")
    return WithUnit(x, None if symbol is None else _unit_symbol(b, symbol, "unitOverride", "unit"))


def _unit_conversion(b: _Builder, v: Json) -> nodes.SeriesNode:
    """The input's unit must be known: Sparkwire's channels carry none, so the input is a
    `unitOverride` (or another conversion) naming it."""
    what = "unitConversion"
    o = b.obj(v, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    target = _unit_symbol(b, b.get(o, "outputUnit", what), what, "outputUnit")
    if not isinstance(x, WithUnit) or x.unit is None:
        raise _refuse(
            what,
            "input",
            f"{what}: the input series has no unit (Sparkwire's channels carry none); "
            "name it with unitOverride around the input",
        )
    try:
        scale, offset = conversion(x.unit, target)
    except ValueError as e:
        raise _refuse(what, "outputUnit", f"{what}: {e}") from None
    return Converted(x, target, scale, offset)


BUILDERS: dict[str, Callable[[_Builder, Json], nodes.SeriesNode]] = {
    **{op: _trig(op) for op in TRIG_KERNELS},
    **{op: _binary_math(op) for op in BINARY_KERNELS},
    **{op: _bit(op) for op in BIT_OPERATIONS},
    "bitOperation": _bit_operation,
    "offset": _offset,
    "scale": _scale,
    "unaryArithmetic": _unary_arithmetic,
    "binaryArithmetic": _binary_arithmetic,
    "ifElse": _if_else,
    **{op: _reduce(op) for op in REDUCE_KERNELS},
    "union": _union,
    "selectNewestPoints": _select_points(newest=True),
    "selectOldestPoints": _select_points(newest=False),
    "dropNan": _drop_nan,
    "approximateFilter": _approximate_filter,
    "timeDifference": _time_difference,
    "absoluteTimestamp": _absolute_timestamp,
    "rollingOperation": _rolling_operation,
    "enumToNumeric": _enum_to_numeric,
    "aggregate": _aggregate_deprecated,
    "aggregateUnderRanges": _under_ranges,
    "groupWithinRangesV2": _within_ranges,
    "filterTransformation": _filter_transformation,
    "rangeDuration": _range_duration,
    "countDuplicate": _count_duplicate,
    "toStartOfInterval": to_start_of_interval(categorical=False),
    "nthPointDownsample": nth_point(categorical=False),
    "resampleV2": _resample_v2,
    "resample": _resample,
    "timeRangeFilter": time_range_filter(categorical=False),
    **{kind: _refused(kind) for kind in (*REFUSED, *POLLING_ONLY)},
    "arithmetic": _arithmetic,
    "filterByExpression": _filter_by_expression,
    "unitOverride": _unit_override,
    "unitConversion": _unit_conversion,
    "refprop": _fluid_property("refprop"),
    "refpropV2": _fluid_property("refpropV2"),
}
