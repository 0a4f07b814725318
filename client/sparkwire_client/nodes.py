"""Builders for the compute nodes Sparkwire evaluates, so nobody hand-writes Conjure JSON.

    temp = numeric_channel("ri.demo", "engine.temp", tags={"vehicle": "a1"})
    node = series((temp - 32) / 1.8, buckets=500)        # a ComputableNode, ready to subscribe
    hot = ranges(temp.above(90))                         # threshold ranges

    capped = if_else(temp.gt(120), 120, temp)          # ifElse over a condition (BooleanSeries)
    formula = expression("sin(x) * 2 + 1", {"x": temp})  # Nominal's arithmetic expression node

Series nodes combine with Python operators (`+ - * / // % **`, unary `-`, `abs()`); conditions
with `&` and `|`; range series with `&` (intersection), `|` (union) and `~` (complement). The
range, enum and value nodes are in `range_nodes`, the charts in `charts`; `raw_node` sends any
node as it is (Conjure JSON or nominal-api objects). Channels become variables of the request's
context, named after what they select, so identical requests from different programs are identical
on the wire and share one computation on the server.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Json = dict[str, Any]
NANOS = 1_000_000_000

ThresholdOperator = Literal[
    "GREATER_THAN",
    "GREATER_THAN_OR_EQUAL_TO",
    "LESS_THAN",
    "LESS_THAN_OR_EQUAL_TO",
    "EQUAL_TO",
    "NOT_EQUAL_TO",
]
BoundsOperator = Literal[
    "OUTSIDE_BOUNDS", "OUTSIDE_OR_EQUAL_TO_BOUNDS", "INSIDE_BOUNDS", "INSIDE_OR_EQUAL_TO_BOUNDS"
]
Aggregation = Literal["sum", "average", "min", "max", "count", "standardDeviation", "rootMeanSquare"]
BitOperation = Literal["bitAnd", "bitOr", "bitXor", "bitShiftLeft", "bitShiftRight", "bitTest"]
Reduction = Literal["max", "min", "mean", "sum", "product"]
AggregationFunction = Literal["SUM", "MEAN", "MIN", "MAX", "COUNT", "STANDARD_DEVIATION", "ROOT_MEAN_SQUARE"]
UnionOperation = Literal["MIN", "MAX", "MEAN", "SUM", "COUNT", "STANDARD_DEVIATION", "ROOT_MEAN_SQUARE"]
UnaryOperation = Literal["COS", "SIN", "TAN", "ABS", "ASIN", "ACOS", "LOG", "LN", "SQRT"]
BitFunction = Literal["and", "or", "xor", "shiftRight", "shiftLeft", "bitTest"]
TimeUnit = Literal["DAYS", "HOURS", "MINUTES", "SECONDS", "MILLISECONDS", "MICROSECONDS", "NANOSECONDS"]


def _union(kind: str, value: Any) -> Json:
    return {"type": kind, kind: value}


def _literal(value: Any) -> Json:
    return _union("literal", value)


def _duration(seconds: float) -> Json:
    """`scout.run.api.Duration`: whole seconds and nanoseconds."""
    ns = round(seconds * NANOS)
    return {"seconds": ns // NANOS, "nanos": ns % NANOS}


def _compute_duration(seconds: float) -> Json:
    """`scout.compute.api.Duration` (a union of units with 32-bit integer counts): the coarsest exact unit."""
    ns = round(seconds * NANOS)
    if ns % NANOS == 0:
        return _union("seconds", {"seconds": _literal(ns // NANOS)})
    if ns % 1_000_000 == 0:
        return _union("milliseconds", {"milliseconds": _literal(ns // 1_000_000)})
    return _union("nanoseconds", {"nanoseconds": _literal(ns)})


@dataclass(frozen=True)
class Node:
    """A piece of a compute tree: its Conjure JSON and the context variables it refers to."""

    json: Json
    variables: Mapping[str, Json] = field(default_factory=dict)

    @staticmethod
    def _merge(*nodes: Node) -> dict[str, Json]:
        merged: dict[str, Json] = {}
        for node in nodes:
            merged.update(node.variables)
        return merged


# -- series -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NumericSeries(Node):
    """A `NumericSeries` node."""

    def _unary(self, kind: str, **extra: Any) -> NumericSeries:
        key = "input" if kind in _INPUT_KEYED else "x"
        return NumericSeries(_union(kind, {key: self.json, **extra}), self.variables)

    def _binary(self, kind: str, other: NumericSeries | float, swap: bool = False) -> NumericSeries:
        rhs = other if isinstance(other, NumericSeries) else constant(other)
        left, right = (rhs, self) if swap else (self, rhs)
        return NumericSeries(_union(kind, {"left": left.json, "right": right.json}), Node._merge(left, right))

    def __add__(self, other: NumericSeries | float) -> NumericSeries:
        return self._binary("add", other)

    def __radd__(self, other: float) -> NumericSeries:
        return self._binary("add", other, swap=True)

    def __sub__(self, other: NumericSeries | float) -> NumericSeries:
        return self._binary("subtract", other)

    def __rsub__(self, other: float) -> NumericSeries:
        return self._binary("subtract", other, swap=True)

    def __mul__(self, other: NumericSeries | float) -> NumericSeries:
        return self._binary("multiply", other)

    def __rmul__(self, other: float) -> NumericSeries:
        return self._binary("multiply", other, swap=True)

    def __truediv__(self, other: NumericSeries | float) -> NumericSeries:
        return self._binary("divide", other)

    def __rtruediv__(self, other: float) -> NumericSeries:
        return self._binary("divide", other, swap=True)

    def __neg__(self) -> NumericSeries:
        return self._unary("negate")

    def __abs__(self) -> NumericSeries:
        return self._unary("abs")

    def sqrt(self) -> NumericSeries:
        return self._unary("sqrt")

    def ln(self) -> NumericSeries:
        return self._unary("ln")

    def log10(self) -> NumericSeries:
        return self._unary("log10")

    def derivative(self, time_unit: TimeUnit | None = None) -> NumericSeries:
        """Change per `time_unit` (seconds by default), one point per input point after the first."""
        return self._unary("derivative", **({"timeUnit": time_unit} if time_unit else {}))

    def value_difference(self) -> NumericSeries:
        return self._unary("valueDifference")

    def time_shift(self, seconds: float) -> NumericSeries:
        return self._unary("timeShift", duration=_literal(_duration(seconds)))

    def where(self, operator: ThresholdOperator, threshold: float) -> NumericSeries:
        """Only the points that meet `value <operator> threshold` (thresholdFilter)."""
        return self._unary("thresholdFilter", threshold=_literal(float(threshold)), operator=operator)

    def rolling(self, window_seconds: float, aggregation: Aggregation) -> NumericSeries:
        """A rolling-time aggregation over the last `window_seconds` at every point."""
        builder = _union(
            "rollingTime",
            {"input": _union("numeric", self.json), "window": _compute_duration(window_seconds)},
        )
        return NumericSeries(
            _union("numericAggregation", {"input": builder, "operator": _union(aggregation, {})}),
            self.variables,
        )

    def __pow__(self, other: NumericSeries | float) -> NumericSeries:
        rhs = other if isinstance(other, NumericSeries) else constant(other)
        body = {"base": self.json, "exponent": rhs.json}
        return NumericSeries(_union("power", body), Node._merge(self, rhs))

    def __mod__(self, other: NumericSeries | float) -> NumericSeries:
        """The remainder, with the sign of the dividend (fmod)."""
        return self._binary("modulo", other)

    def __floordiv__(self, other: NumericSeries | float) -> NumericSeries:
        return self._binary("floorDivide", other)

    def sin(self) -> NumericSeries:
        return self._unary("sin")

    def cos(self) -> NumericSeries:
        return self._unary("cos")

    def tan(self) -> NumericSeries:
        return self._unary("tan")

    def asin(self) -> NumericSeries:
        return self._unary("asin")

    def acos(self) -> NumericSeries:
        return self._unary("acos")

    def bits(self, operation: BitOperation, operand: int) -> NumericSeries:
        """A bit operation on every value cast to int64 (bitTest: `operand` is the bit index)."""
        key = "index" if operation == "bitTest" else "operand"
        return NumericSeries(
            _union(operation, {"input": self.json, key: _literal(int(operand))}), self.variables
        )

    def in_unit(self, unit: str) -> NumericSeries:
        """The series named as being in `unit` (a UCUM symbol such as "[psi]", "Cel", "km/h")."""
        return self._unary("unitOverride", unit=unit)

    def convert_to(self, unit: str) -> NumericSeries:
        """The series converted to `unit`; its own unit must be named first (`in_unit`)."""
        return self._unary("unitConversion", outputUnit=unit)

    def drop_nan(self) -> NumericSeries:
        return self._unary("dropNan")

    def resample(self, interval_seconds: float) -> NumericSeries:
        """A point every `interval_seconds` on the epoch-aligned grid, each the latest value at or
        before it (resampleV2, forward fill)."""
        return NumericSeries(
            _union("resampleV2", {"input": self.json, "interval": _compute_duration(interval_seconds)}),
            self.variables,
        )

    def time_difference(self, unit: TimeUnit = "SECONDS") -> NumericSeries:
        """The time since the previous point, at every point after the first (timeDifference)."""
        return NumericSeries(
            _union("timeDifference", {"input": _union("numeric", self.json), "timeUnit": unit}),
            self.variables,
        )

    def time_shift_v2(self, seconds: float) -> NumericSeries:
        """`timeShiftV2`: as `time_shift`, the duration as a compute `Duration`."""
        return self._unary("timeShiftV2", duration=_compute_duration(seconds))

    def since(self, start_ns: int) -> NumericSeries:
        """Only the points at or after `start_ns` (`timeRangeFilter`, a start only: an end cannot stream)."""
        start = {"seconds": start_ns // NANOS, "nanos": start_ns % NANOS}
        return self._unary("timeRangeFilter", startTime=_literal(start))

    # -- computed on request only (sparkwire_client.compute; a subscription is refused, as by Nominal)
    def cumulative_sum(self, start_ns: int) -> NumericSeries:
        """The running total of the values from `start_ns` on (`cumulativeSum`)."""
        start = {"seconds": start_ns // NANOS, "nanos": start_ns % NANOS}
        return self._unary("cumulativeSum", startTimestamp=_literal(start))

    def integral(self, start_ns: int, time_unit: TimeUnit | None = None) -> NumericSeries:
        """The running trapezoidal area from `start_ns` on, time in `time_unit` (seconds by default)."""
        start = {"seconds": start_ns // NANOS, "nanos": start_ns % NANOS}
        extra = {"timeUnit": time_unit} if time_unit else {}
        return self._unary("integral", startTimestamp=_literal(start), **extra)

    def phase_unwrap(self, period: float) -> NumericSeries:
        """Whole multiples of `period` added wherever a step exceeds half of it (`phaseUnwrap`)."""
        return self._unary("phaseUnwrap", period=_literal(period))

    def near(self, value: float, tolerance: float, equal: bool = True) -> NumericSeries:
        """The points within `tolerance` of `value` (`equal`), or the others (`approximateFilter`)."""
        return self._unary(
            "approximateFilter",
            threshold=_literal(float(value)),
            tolerance=_literal(float(tolerance)),
            operator="EQUAL_TO" if equal else "NOT_EQUAL_TO",
        )

    def filter_where(self, condition: Condition) -> NumericSeries:
        """The points where `condition` (over this series and constants) holds (`filterWhere`)."""
        body = {"input": self.json, "condition": condition.json}
        return NumericSeries(_union("filterWhere", body), Node._merge(self, condition))

    def within(self, ranges: RangeSeries) -> NumericSeries:
        """The points inside the ranges (`filterTransformation`)."""
        body = {"input": self.json, "filter": ranges.json}
        return NumericSeries(_union("filterTransformation", body), Node._merge(self, ranges))

    def newest_points(self, n: int) -> NumericSeries:
        """The window's last `n` points (`selectNewestPoints`)."""
        return self._unary("selectNewestPoints", numPoints=_literal(int(n)))

    def oldest_points(self, n: int) -> NumericSeries:
        """The window's first `n` points (`selectOldestPoints`)."""
        return self._unary("selectOldestPoints", numPoints=_literal(int(n)))

    def offset(self, value: float) -> NumericSeries:
        """x + value (`offset`, deprecated in Nominal: `x + value` builds `add`)."""
        return self._unary("offset", scalar=_literal(float(value)))

    def scale(self, value: float) -> NumericSeries:
        """x * value (`scale`, deprecated in Nominal: `x * value` builds `multiply`)."""
        return self._unary("scale", scalar=_literal(float(value)))

    def unary_arithmetic(self, operation: UnaryOperation) -> NumericSeries:
        """`unaryArithmetic` (deprecated in Nominal; LOG is base 10): `x.cos()` and the like build
        the current nodes."""
        return self._unary("unaryArithmetic", operation=operation)

    def bit_operation(self, function: BitFunction, operand: int) -> NumericSeries:
        """`bitOperation` (deprecated in Nominal: `bits` builds the current nodes); for bitTest the
        operand is the bit index."""
        key = "index" if function == "bitTest" else "operand"
        return self._unary("bitOperation", function=_union(function, {key: int(operand)}))

    def rolling_operation(self, window_seconds: float, aggregation: Aggregation) -> NumericSeries:
        """`rollingOperation` (deprecated in Nominal: `rolling` builds numericAggregation)."""
        window = _union("duration", _literal(_duration(window_seconds)))
        return self._unary("rollingOperation", window=window, operator=_union(aggregation, {}))

    def rolling_points(
        self, points: int, aggregation: Aggregation | Literal["percentile"], percentile: float | None = None
    ) -> NumericSeries:
        """The aggregation over the last `points` points at every point (rollingPoints)."""
        builder = _union(
            "rollingPoints", {"input": _union("numeric", self.json), "points": _literal(int(points))}
        )
        return self._aggregation(builder, aggregation, percentile)

    def group_by(
        self,
        aggregation: Aggregation | Literal["percentile"],
        every_seconds: float | None = None,
        tags: Iterable[str] | None = None,
        percentile: float | None = None,
    ) -> NumericSeries:
        """The aggregation over the points sharing a timestamp (or an epoch-aligned interval of
        `every_seconds`) and the group's tags (or only `tags`, a subset of them) (groupBy)."""
        body = {
            "input": _union("numeric", self.json),
            "tags": _union("current", {})
            if tags is None
            else _union("subset", {"tags": [_literal(t) for t in sorted(set(tags))]}),
            "timestamp": _union("current", {})
            if every_seconds is None
            else _union("every", _compute_duration(every_seconds)),
        }
        return self._aggregation(_union("groupBy", body), aggregation, percentile)

    def _aggregation(self, builder: Json, aggregation: str, percentile: float | None) -> NumericSeries:
        if (aggregation == "percentile") != (percentile is not None):
            raise ValueError("give percentile (in [0, 1]) exactly when the aggregation is 'percentile'")
        operator = _union(
            aggregation, {} if percentile is None else {"percentile": _literal(float(percentile))}
        )
        return NumericSeries(
            _union("numericAggregation", {"input": builder, "operator": operator}), self.variables
        )

    def aggregate_duplicates(self, function: AggregationFunction = "MEAN") -> NumericSeries:
        """The points sharing a timestamp as one (`aggregate`, deprecated in Nominal)."""
        return self._unary("aggregate", function=function, groupByTags=[])

    def resample_v1(self, interval_seconds: float) -> NumericSeries:
        """`resample` with forward fill (its default; Nominal's older form of `resample`)."""
        config = {"interval": _literal(_duration(interval_seconds))}
        return self._unary("resample", resampleConfiguration=config)

    def absolute_timestamp(self, unit: TimeUnit = "SECONDS") -> NumericSeries:
        """Each point's timestamp (since the epoch, in `unit`) as its value (`absoluteTimestamp`)."""
        return NumericSeries(
            _union("absoluteTimestamp", {"input": _union("numeric", self.json), "timeUnit": unit}),
            self.variables,
        )

    # -- conditions (BooleanSeries: ifElse, filterWhere, condition_ranges) -------------------------
    def _compare(self, kind: str, other: NumericSeries | float) -> Condition:
        rhs = other if isinstance(other, NumericSeries) else constant(other)
        return Condition(_union(kind, {"left": self.json, "right": rhs.json}), Node._merge(self, rhs))

    def gt(self, other: NumericSeries | float) -> Condition:
        return self._compare("greaterThan", other)

    def ge(self, other: NumericSeries | float) -> Condition:
        return self._compare("greaterThanOrEqualTo", other)

    def lt(self, other: NumericSeries | float) -> Condition:
        return self._compare("lessThan", other)

    def le(self, other: NumericSeries | float) -> Condition:
        return self._compare("lessThanOrEqualTo", other)

    def eq(self, other: NumericSeries | float) -> Condition:
        return self._compare("equalTo", other)

    def ne(self, other: NumericSeries | float) -> Condition:
        return self._compare("notEqualTo", other)

    # -- across groups (a channel's groupByTags, or the series' own tags) ---------------------------
    def filter_by_tag(self, key: str, values: Iterable[str], exclude: bool = False) -> NumericSeries:
        """Only the groups (for a tag not grouped by: the series) whose tag `key` is one of `values`
        (`exclude`: is none of them)."""
        return NumericSeries(_filter_by_tag(self.json, key, values, exclude), self.variables)

    def select_tags(self, *keys: str) -> NumericSeries:
        """Each group keyed by only these tags; groups that then share them become one, every point kept."""
        return NumericSeries(_select_tags(self.json, keys), self.variables)

    def z_score(self, *family_tags: str, radius_seconds: float | None = None) -> NumericSeries:
        """Each group's (value - mean) / stddev across its family (the groups sharing `family_tags`;
        all groups when none) at each timestamp, values forward filled within `radius_seconds` (1 s)."""
        body: Json = {"input": self.json, "groupByTags": [_literal(k) for k in sorted(set(family_tags))]}
        if radius_seconds is not None:
            ffill = {"interpolationRadius": _literal(_duration(radius_seconds))}
            body["interpolationConfiguration"] = _union("forwardFillInterpolation", ffill)
        return NumericSeries(_union("zScore", body), self.variables)

    # -- ranges -------------------------------------------------------------------------------
    def threshold(self, operator: ThresholdOperator, value: float) -> RangeSeries:
        return RangeSeries(
            _union(
                "threshold", {"input": self.json, "threshold": _literal(float(value)), "operator": operator}
            ),
            self.variables,
        )

    def above(self, value: float) -> RangeSeries:
        return self.threshold("GREATER_THAN", value)

    def below(self, value: float) -> RangeSeries:
        return self.threshold("LESS_THAN", value)

    def bounds(self, lower: float, upper: float, operator: BoundsOperator = "INSIDE_BOUNDS") -> RangeSeries:
        return RangeSeries(
            _union(
                "minMaxThreshold",
                {
                    "input": self.json,
                    "lowerBound": _literal(float(lower)),
                    "upperBound": _literal(float(upper)),
                    "operator": operator,
                },
            ),
            self.variables,
        )


_INPUT_KEYED = frozenset(
    {
        "cumulativeSum",
        "integral",
        "phaseUnwrap",
        "derivative",
        "valueDifference",
        "timeShift",
        "thresholdFilter",
        "unitOverride",
        "unitConversion",
        "dropNan",
        "timeShiftV2",
        "timeRangeFilter",
        "approximateFilter",
        "selectNewestPoints",
        "selectOldestPoints",
        "offset",
        "scale",
        "unaryArithmetic",
        "bitOperation",
        "rollingOperation",
        "aggregate",
        "resample",
    }
)


@dataclass(frozen=True)
class Condition(Node):
    """A `BooleanSeries`: a comparison of numeric series and constants (`x.gt(90)`), combined with
    `&` and `|`; for `if_else`, `NumericSeries.filter_where` and `range_nodes.condition_ranges`."""

    def __and__(self, other: Condition) -> Condition:
        return Condition(_union("and", {"left": self.json, "right": other.json}), Node._merge(self, other))

    def __or__(self, other: Condition) -> Condition:
        return Condition(_union("or", {"left": self.json, "right": other.json}), Node._merge(self, other))


def if_else(
    condition: Condition, then: NumericSeries | float, otherwise: NumericSeries | float
) -> NumericSeries:
    """`then` where `condition` holds, else `otherwise`, all aligned at once (`ifElse`)."""
    a = then if isinstance(then, NumericSeries) else constant(then)
    b = otherwise if isinstance(otherwise, NumericSeries) else constant(otherwise)
    body = {"condition": condition.json, "trueValue": a.json, "falseValue": b.json}
    return NumericSeries(_union("ifElse", body), Node._merge(condition, a, b))


def union_points(*inputs: NumericSeries, operation: UnionOperation | None = None) -> NumericSeries:
    """Every input's points in one series (`union`); with `operation`, points sharing a timestamp
    become one (MIN, MAX, MEAN, SUM, COUNT, ...)."""
    body: Json = {"input": [x.json for x in inputs]}
    if operation is not None:
        body["operation"] = operation
    return NumericSeries(_union("union", body), Node._merge(*inputs))


def expression(text: str, inputs: Mapping[str, NumericSeries]) -> NumericSeries:
    """A formula over named inputs, e.g. `expression("sin(x) * 2 + 1", {"x": temp})` (`arithmetic`;
    docs/protocol.md lists what an expression may hold). The server refuses anything else by name."""
    body = {"inputs": {k: x.json for k, x in inputs.items()}, "expression": text}
    return NumericSeries(_union("arithmetic", body), Node._merge(*inputs.values()))


def filter_by_expression(base: str, text: str, inputs: Mapping[str, NumericSeries]) -> NumericSeries:
    """The points of input `base` where the boolean expression `text` over the inputs holds
    (`filterByExpression`), e.g. `filter_by_expression("x", "x > 2 and y < 1", {"x": a, "y": b})`."""
    body = {"base": base, "inputs": {k: x.json for k, x in inputs.items()}, "expression": text}
    return NumericSeries(_union("filterByExpression", body), Node._merge(*inputs.values()))


def binary_arithmetic(
    input1: NumericSeries, input2: NumericSeries, operation: str = "ATAN2"
) -> NumericSeries:
    """`binaryArithmetic` (deprecated in Nominal; its one operation is ATAN2(input1, input2): `atan2`)."""
    body = {"input1": input1.json, "input2": input2.json, "operation": operation}
    return NumericSeries(_union("binaryArithmetic", body), Node._merge(input1, input2))


def count_duplicates(*inputs: EnumSeries) -> NumericSeries:
    """At every timestamp, how many points the enum inputs hold there (`countDuplicate`)."""
    return NumericSeries(_union("countDuplicate", {"inputs": [x.json for x in inputs]}), Node._merge(*inputs))


def enum_to_numeric(
    x: EnumSeries, mapping: Mapping[str, float], default: float | None = None
) -> NumericSeries:
    """Each label's number; an unmapped label takes `default`, or is dropped (`enumToNumeric`)."""
    body: Json = {"input": x.json, "mapping": {k: _literal(float(v)) for k, v in sorted(mapping.items())}}
    if default is not None:
        body["defaultValue"] = _literal(float(default))
    return NumericSeries(_union("enumToNumeric", body), x.variables)


def under_ranges(
    x: NumericSeries, ranges: RangeSeries, function: AggregationFunction = "MEAN"
) -> NumericSeries:
    """One point per range, at its start: `function` over x's points inside it (`aggregateUnderRanges`)."""
    body = {"input": x.json, "ranges": ranges.json, "operation": function}
    return NumericSeries(_union("aggregateUnderRanges", body), Node._merge(x, ranges))


def within_ranges(
    x: NumericSeries,
    ranges: RangeSeries,
    aggregation: Aggregation | Literal["percentile"] = "average",
    percentile: float | None = None,
) -> NumericSeries:
    """As `under_ranges`, with any aggregation operator (`groupWithinRangesV2`)."""
    if (aggregation == "percentile") != (percentile is not None):
        raise ValueError("give percentile (in [0, 1]) exactly when the aggregation is 'percentile'")
    operator = _union(aggregation, {} if percentile is None else {"percentile": _literal(float(percentile))})
    body = {"input": x.json, "ranges": ranges.json, "aggregation": operator}
    return NumericSeries(_union("groupWithinRangesV2", body), Node._merge(x, ranges))


def range_duration(
    ranges: RangeSeries,
    unbounded: Literal["clampToWindow", "drop"] = "clampToWindow",
    unit: TimeUnit | None = None,
) -> NumericSeries:
    """Each range's duration (in `unit`, seconds by default) at its start (`rangeDuration`); an open
    range lasts until now (clampToWindow) or is left out (drop)."""
    body: Json = {"input": ranges.json, "unboundedRangeBehavior": _union(unbounded, {})}
    if unit is not None:
        body["timeUnit"] = unit
    return NumericSeries(_union("rangeDuration", body), ranges.variables)


def atan2(y: NumericSeries, x: NumericSeries | float) -> NumericSeries:
    rhs = x if isinstance(x, NumericSeries) else constant(x)
    return NumericSeries(_union("atan2", {"y": y.json, "x": rhs.json}), Node._merge(y, rhs))


# RefpropProperty and RefpropSubstance values (nominal-api); docs/protocol.md says which are refused.
FluidProperty = Literal[
    "TEMPERATURE",
    "PRESSURE",
    "MASS_DENSITY",
    "MASS_SPECIFIC_ENTHALPY",
    "MASS_SPECIFIC_INTERNAL_ENERGY",
    "MASS_SPECIFIC_ENTROPY",
    "VISCOSITY",
]
Substance = Literal[
    "NITROGEN", "OXYGEN", "HELIUM", "HYDROGEN", "METHANE", "PROPANE", "BUTANE", "WATER", "XENON", "AIR",
    "CARBON_DIOXIDE", "ARGON", "CARBON_MONOXIDE", "JET_A_4658", "JET_A_3638",
]  # fmt: skip


def fluid_property(
    substance: Substance,
    output: FluidProperty,
    inputs: Mapping[FluidProperty, NumericSeries],
    radius_seconds: float | None = None,
) -> NumericSeries:
    """`output` of `substance` from two state properties (refpropV2), in SI units (K, Pa, kg/m^3,
    J/kg, J/(kg K), Pa s); e.g. `fluid_property("WATER", "MASS_DENSITY", {"TEMPERATURE": t,
    "PRESSURE": p})`. Inputs align by forward fill within 1 s, or within `radius_seconds` (then
    the node is `refprop`, which has that field); a state without a solution is NaN."""
    body: Json = {
        "inputs": {k: x.json for k, x in inputs.items()},
        "substance": substance,
        "outputProperty": output,
    }
    kind = "refpropV2"
    if radius_seconds is not None:
        kind = "refprop"
        body["interpolationConfiguration"] = _forward_fill(radius_seconds)
    return NumericSeries(_union(kind, body), Node._merge(*inputs.values()))


def _forward_fill(radius_seconds: float) -> Json:
    ffill = {"interpolationRadius": _literal(_duration(radius_seconds))}
    return _union("forwardFillInterpolation", ffill)


def across(reduction: Reduction, *inputs: NumericSeries) -> NumericSeries:
    """At every aligned timestamp, the max / min / mean / sum / product of the inputs."""
    return NumericSeries(_union(reduction, {"inputs": [x.json for x in inputs]}), Node._merge(*inputs))


@dataclass(frozen=True)
class EnumSeries(Node):
    """An `EnumSeries` node (a string channel)."""

    def is_in(self, values: Iterable[str]) -> RangeSeries:
        return self._filter("IS_IN", values)

    def is_not_in(self, values: Iterable[str]) -> RangeSeries:
        return self._filter("IS_NOT_IN", values)

    def _filter(self, operator: str, values: Iterable[str]) -> RangeSeries:
        body = {"input": self.json, "operator": operator, "values": _literal(sorted(set(values)))}
        return RangeSeries(_union("enumFilter", body), self.variables)

    def filter_by_tag(self, key: str, values: Iterable[str], exclude: bool = False) -> EnumSeries:
        """Only the groups (for a tag not grouped by: the series) whose tag `key` is one of `values`
        (`exclude`: is none of them)."""
        return EnumSeries(_filter_by_tag(self.json, key, values, exclude), self.variables)

    def select_tags(self, *keys: str) -> EnumSeries:
        """Each group keyed by only these tags; groups that then share them become one, every point kept."""
        return EnumSeries(_select_tags(self.json, keys), self.variables)

    def time_shift(self, seconds: float, v2: bool = False) -> EnumSeries:
        """Every point moved later by `seconds` (`timeShift`; `v2`: `timeShiftV2`)."""
        duration = _compute_duration(seconds) if v2 else _literal(_duration(seconds))
        body = {"input": self.json, "duration": duration}
        return EnumSeries(_union("timeShiftV2" if v2 else "timeShift", body), self.variables)

    def since(self, start_ns: int) -> EnumSeries:
        """Only the points at or after `start_ns` (`timeRangeFilter`, a start only: an end cannot stream)."""
        start = {"seconds": start_ns // NANOS, "nanos": start_ns % NANOS}
        return EnumSeries(
            _union("timeRangeFilter", {"input": self.json, "startTime": _literal(start)}), self.variables
        )


def _filter_by_tag(series: Json, key: str, values: Iterable[str], exclude: bool) -> Json:
    kind = "notIn" if exclude else "in"
    strings = _union("literal", [_literal(v) for v in sorted(set(values))])
    return _union(
        "filterByTag", {"input": series, "predicate": _union(kind, {"key": _literal(key), "values": strings})}
    )


def _select_tags(series: Json, keys: Iterable[str]) -> Json:
    return _union("selectTags", {"input": series, "tagKeys": [_literal(k) for k in sorted(set(keys))]})


@dataclass(frozen=True)
class LogSeries(Node):
    """A `LogSeries` node: the lines of a log channel (written to `POST /storage/writer/v1/logs/{rid}`)."""

    def contains(self, operator: Json) -> NumericSeries:
        """1.0 at each log line `operator` matches, 0.0 at the others (`contains`). Build the operator
        with `log_regex`, `log_token`, `log_arg`, `log_all`, `log_any` and `log_not`."""
        return NumericSeries(_union("contains", {"input": self.json, "operator": operator}), self.variables)


def log_regex(pattern: str) -> Json:
    """A `LogFilterOperator`: the message holds a match of the RE2 expression `pattern`."""
    return _union("regexFilter", {"regex": pattern})


def log_token(token: str) -> Json:
    """A `LogFilterOperator`: the message holds `token` as a whole token, case-insensitively."""
    return _union("exactMatchCaseInsensitiveFilter", {"token": token})


def log_arg(key: str, pattern: str) -> Json:
    """A `LogFilterOperator`: the line has the arg `key`, and its value holds a match of `pattern`."""
    return _union("arg", {"key": _literal(key), "operator": {"regex": pattern}})


def log_all(*operators: Json) -> Json:
    """A `LogFilterOperator`: every one of `operators` matches (`and`)."""
    return _union("and", list(operators))


def log_any(*operators: Json) -> Json:
    """A `LogFilterOperator`: one of `operators` matches (`or`)."""
    return _union("or", list(operators))


def log_not(operator: Json) -> Json:
    """A `LogFilterOperator`: `operator` does not match (`not`)."""
    return _union("not", operator)


@dataclass(frozen=True)
class RangeSeries(Node):
    """A `RangeSeries` node: time ranges where a condition holds."""

    def __invert__(self) -> RangeSeries:
        return RangeSeries(_union("not", {"input": self.json}), self.variables)

    def __and__(self, other: RangeSeries) -> RangeSeries:
        return RangeSeries(
            _union("intersectRange", {"inputs": [self.json, other.json]}), Node._merge(self, other)
        )

    def __or__(self, other: RangeSeries) -> RangeSeries:
        return RangeSeries(
            _union("unionRange", {"inputs": [self.json, other.json]}), Node._merge(self, other)
        )


@dataclass(frozen=True)
class Computable(Node):
    """A `ComputableNode`: what a subscription computes."""

    def request(self, window_seconds: float) -> Json:
        """The `StreamingComputeNodeRequest` for a window of `window_seconds`."""
        return {
            "node": self.json,
            "windowWidth": _duration(window_seconds),
            "context": {"variables": dict(sorted(self.variables.items())), "datasetReferences": {}},
        }


# -- leaves -----------------------------------------------------------------------------------------
def _channel_variable(
    data_source_rid: str, channel: str, tags: Mapping[str, str] | None, group_by: Iterable[str] | None
) -> tuple[str, Json]:
    source = {
        "dataSourceRid": _literal(data_source_rid),
        "channel": _literal(channel),
        "tags": {k: _literal(v) for k, v in sorted((tags or {}).items())},
        "tagsToGroupBy": [],
        "groupByTags": [_literal(g) for g in sorted(set(group_by or ()))],
    }
    variable = _union("channel", _union("dataSource", source))
    digest = hashlib.sha1(json.dumps(variable, sort_keys=True).encode()).hexdigest()[:12]
    return f"{channel}#{digest}", variable


def numeric_channel(
    data_source_rid: str,
    channel: str,
    tags: Mapping[str, str] | None = None,
    group_by: Iterable[str] | None = None,
) -> NumericSeries:
    """A double channel; `tags` select series, `group_by` splits the result per tag value."""
    name, variable = _channel_variable(data_source_rid, channel, tags, group_by)
    return NumericSeries(_union("raw", {"name": name}), {name: variable})


def enum_channel(
    data_source_rid: str,
    channel: str,
    tags: Mapping[str, str] | None = None,
    group_by: Iterable[str] | None = None,
) -> EnumSeries:
    """A string channel."""
    name, variable = _channel_variable(data_source_rid, channel, tags, group_by)
    return EnumSeries(_union("raw", {"name": name}), {name: variable})


def log_channel(data_source_rid: str, channel: str = "logs") -> LogSeries:
    """A log channel ("logs", where the log writer writes a request without a channel)."""
    name, variable = _channel_variable(data_source_rid, channel, None, None)
    return LogSeries(_union("raw", {"name": name}), {name: variable})


def _scope_channel_variable(
    kind: str, rid: str, data_scope: str, channel: str, group_by: Iterable[str] | None
) -> tuple[str, Json]:
    """A channel of an asset's (kind "asset") or a run's ("run") data scope, in Sparkwire's catalog."""
    body = {
        ("assetRid" if kind == "asset" else "runRid"): _literal(rid),
        "dataScopeName": _literal(data_scope),
        "channel": _literal(channel),
        "additionalTags": {},
        "tagsToGroupBy": [],
        "groupByTags": [_literal(g) for g in sorted(set(group_by or ()))],
    }
    variable = _union("channel", _union(kind, body))
    digest = hashlib.sha1(json.dumps(variable, sort_keys=True).encode()).hexdigest()[:12]
    return f"{channel}#{digest}", variable


def asset_channel(
    asset_rid: str, data_scope: str, channel: str, group_by: Iterable[str] | None = None
) -> NumericSeries:
    """A double channel of one data scope of an asset (`sparkwire_client.assets` creates assets)."""
    name, variable = _scope_channel_variable("asset", asset_rid, data_scope, channel, group_by)
    return NumericSeries(_union("raw", {"name": name}), {name: variable})


def run_channel(
    run_rid: str, data_scope: str, channel: str, group_by: Iterable[str] | None = None
) -> NumericSeries:
    """A double channel of one data scope of a run that is still going."""
    name, variable = _scope_channel_variable("run", run_rid, data_scope, channel, group_by)
    return NumericSeries(_union("raw", {"name": name}), {name: variable})


def _inline_channel(data_source_rid: str, channel: str, tags: Mapping[str, str] | None) -> Json:
    source = {
        "dataSourceRid": _literal(data_source_rid),
        "channel": _literal(channel),
        "tags": {k: _literal(v) for k, v in sorted((tags or {}).items())},
        "tagsToGroupBy": [],
    }
    return _union("channel", _union("dataSource", source))


def inline_numeric_channel(
    data_source_rid: str, channel: str, tags: Mapping[str, str] | None = None
) -> NumericSeries:
    """A double channel written into the node itself (`NumericSeries.channel`, deprecated in
    Nominal) rather than as a context variable (`numeric_channel`)."""
    return NumericSeries(_inline_channel(data_source_rid, channel, tags))


def inline_enum_channel(
    data_source_rid: str, channel: str, tags: Mapping[str, str] | None = None
) -> EnumSeries:
    """A string channel written into the node itself (`EnumSeries.channel`)."""
    return EnumSeries(_inline_channel(data_source_rid, channel, tags))


def dataset_of(kind: Literal["asset", "run"], rid: str) -> Json:
    """A `Dataset`: an asset's or a run's data, in Sparkwire's catalog (for `select_numeric`)."""
    return _union(kind, {"rid": _literal(rid)})


def select_numeric(channel: str, dataset: Json) -> NumericSeries:
    """A double channel by name of a dataset (`selectNumeric`): `dataset_of("asset", rid)`, or
    any other `Dataset` union as JSON."""
    return NumericSeries(_union("selectNumeric", {"name": _literal(channel), "dataset": dataset}))


def select_enum(channel: str, dataset: Json) -> EnumSeries:
    """A string channel by name of a dataset (`selectEnum`)."""
    return EnumSeries(_union("selectEnum", {"name": _literal(channel), "dataset": dataset}))


def constant(value: float) -> NumericSeries:
    return NumericSeries(_union("constant", _union("double", _literal(float(value)))))


def _property_dataset(kind: Literal["asset", "run"], rid: str) -> Json:
    return _union(kind, {"rid": _literal(rid)})


def select_numeric_property(kind: Literal["asset", "run"], rid: str, property_name: str) -> NumericSeries:
    """The numeric typed property of an asset or run (`assets.Catalog`'s `typed_properties`), as a
    constant: `temp * select_numeric_property("asset", rid, "gain")`. Another dataset: `.json` by hand."""
    return NumericSeries(
        _union(
            "selectNumericProperty",
            {"propertyName": property_name, "dataset": _property_dataset(kind, rid)},
        )
    )


def select_categorical_property(kind: Literal["asset", "run"], rid: str, property_name: str) -> EnumSeries:
    """The string property of an asset or run as a label with no timestamps of its own, for
    `range_nodes.all_equal(mode, select_categorical_property(...))`."""
    return EnumSeries(
        _union(
            "selectCategoricalProperty",
            {"propertyName": property_name, "dataset": _property_dataset(kind, rid)},
        )
    )


def event_query(
    *,
    label: str | None = None,
    asset: str | None = None,
    search_text: str | None = None,
    event_type: Literal["INFO", "FLAG", "ERROR", "SUCCESS"] | None = None,
) -> Json:
    """A `ComputeEventQuery` over the events the server keeps (its EventService, /event/v1): the terms
    given, all of them (`and`). Other terms (`after`, `before`, `property`, `or`, `not`): JSON by hand."""
    terms = [
        _union(kind, value if kind == "eventType" else _literal(value))
        for kind, value in (
            ("label", label),
            ("asset", asset),
            ("searchText", search_text),
            ("eventType", event_type),
        )
        if value is not None
    ]
    if not terms:
        raise ValueError("an event query needs at least one term")
    return terms[0] if len(terms) == 1 else _union("and", terms)


def events_search(query: Json) -> RangeSeries:
    """`eventsSearch`: a range for each event the query finds, [timestamp, timestamp + duration)."""
    return RangeSeries(_union("eventsSearch", {"query": query}))


def event_aggregation(query: Json, property_name: str | None = None) -> EnumSeries:
    """`eventAggregation`: a point at each found event's timestamp, labelled with its property
    `property_name`'s value, or (None) with its level (its type: INFO, FLAG, ERROR, SUCCESS)."""
    source = _union("level", {}) if property_name is None else _union("property", _literal(property_name))
    return EnumSeries(_union("eventAggregation", {"query": query, "valueSource": source}))


# -- computable nodes -------------------------------------------------------------------------------
def _series_union(node: NumericSeries | EnumSeries) -> Json:
    return _union("numeric" if isinstance(node, NumericSeries) else "enum", node.json)


# SummarizeSeries.outputFormat's Arrow values and the bucket columns Nominal's NumericOutputField names.
ArrowFormat = Literal["ARROW_V3", "ARROW_V4"]
NumericOutputField = Literal["MIN", "MAX", "MEAN", "COUNT", "VARIANCE", "FIRST_POINT", "LAST_POINT"]
NumericOutputFieldV2 = Literal[
    "MIN", "MAX", "MEAN", "COUNT", "VARIANCE", "FIRST_POINT", "LAST_POINT",
    "SUM", "STANDARD_DEVIATION", "ROOT_MEAN_SQUARE",
]  # fmt: skip


def series(
    node: NumericSeries | EnumSeries,
    buckets: int | None = None,
    resolution_seconds: float | None = None,
    *,
    arrow: ArrowFormat | None = None,
    fields: Sequence[NumericOutputField] | None = None,
    fields_v2: Sequence[NumericOutputFieldV2 | float | tuple[str, float]] | None = None,
    aggregations: Mapping[str, Aggregation | float] | None = None,
) -> Computable:
    """The series over the window: raw points while it holds at most `buckets` (default 1000)
    points, epoch-aligned buckets (min/max/mean/...) beyond. `arrow` asks for Nominal's ArrowPlot
    (an Arrow IPC stream; the view reads it with pyarrow) with the bucket columns `fields` names
    (default: the server's, MEAN); `fields` without `arrow` is an error, as on the server.
    `fields_v2` (numericOutputFieldsV2, Arrow only, instead of `fields`): field names (SUM,
    STANDARD_DEVIATION and ROOT_MEAN_SQUARE too), a percentile p in [0, 1] (column "pXX"), or a
    (column name, p) pair. `aggregations` (numericAggregations): extra per-bucket columns, a name to
    an aggregation or a percentile p."""
    body: Json = {
        "input": _series_union(node),
        "numericAggregations": {k: _operator(v) for k, v in sorted((aggregations or {}).items())},
    }
    if arrow is not None:
        if arrow not in ("ARROW_V3", "ARROW_V4"):
            raise ValueError(f"arrow must be ARROW_V3 or ARROW_V4, not {arrow!r}")
        body["outputFormat"] = arrow
    for name, given in (("fields", fields), ("fields_v2", fields_v2)):
        if given is not None:
            if arrow is None:
                raise ValueError(f"{name} apply only to Arrow output: give arrow='ARROW_V3' or 'ARROW_V4'")
            if not given:
                raise ValueError(f"{name}: name at least one (or leave it out for the server's default)")
    if fields is not None:
        body["numericOutputFields"] = list(fields)
    if fields_v2 is not None:
        body["numericOutputFieldsV2"] = [_output_field_v2(f) for f in fields_v2]
    if buckets is not None:
        body["buckets"] = int(buckets)
    if resolution_seconds is not None:
        body["resolution"] = round(resolution_seconds * NANOS)
    return Computable(_union("series", body), node.variables)


def _operator(aggregation: str | float) -> Json:
    """A `NumericAggregationOperator`: an aggregation's name, or a percentile p."""
    if isinstance(aggregation, str):
        return _union(aggregation, {})
    return _union("percentile", {"percentile": _literal(float(aggregation))})


def _output_field_v2(field: str | float | tuple[str, float]) -> Json:
    if isinstance(field, str):
        return _union("field", field)
    if isinstance(field, tuple):
        name, p = field
        return _union("percentile", {"percentile": _literal(float(p)), "outputName": name})
    return _union("percentile", {"percentile": _literal(float(field))})


def ranges(node: RangeSeries, max_ranges: int | None = None) -> Computable:
    """The ranges over the window (a summary instead when more than `max_ranges`)."""
    body: Json = {"input": node.json}
    if max_ranges is not None:
        body["maxRanges"] = int(max_ranges)
    return Computable(_union("ranges", body), node.variables)


def first_point(node: NumericSeries | EnumSeries) -> Computable:
    return Computable(_union("value", _union("firstPoint", _series_union(node))), node.variables)


def last_point(node: NumericSeries | EnumSeries) -> Computable:
    return Computable(_union("value", _union("lastPoint", _series_union(node))), node.variables)


def _plain(value: Any) -> Any:
    """Conjure JSON as is; a nominal-api object (anything conjure_python_client encodes) encoded."""
    if isinstance(value, dict | list | str | int | float | bool) or value is None:
        return value
    from conjure_python_client import ConjureEncoder  # only where nominal-api's classes are used

    return ConjureEncoder.do_encode(value)


def raw_node(node: Any, variables: Mapping[str, Any] | None = None) -> Computable:
    """Any `ComputableNode` as is: its Conjure JSON, or an object of nominal-api's classes
    (`scout_compute_api.ComputableNode(...)`), with its context variables (name -> `VariableValue`,
    JSON or nominal-api objects). For a node the builders here do not cover."""
    return Computable(_plain(node), {k: _plain(v) for k, v in (variables or {}).items()})


def spectrum(node: NumericSeries) -> Computable:
    """The amplitude spectrum of the series over the period (`frequency` `fft`), which Nominal and
    Sparkwire compute only when polled: ask with `sparkwire_client.compute`."""
    return Computable(_union("frequency", _union("fft", {"input": node.json})), node.variables)


CurveKind = Literal["polynomial", "exponential", "logarithmic", "power"]


def _timestamp(ns: int) -> Json:
    return {"seconds": ns // NANOS, "nanos": ns % NANOS}


def curve_fit(
    node: NumericSeries,
    start_ns: int,
    end_ns: int,
    curve: CurveKind = "polynomial",
    *,
    degree: int = 1,
    intercept: float | None = None,
    x: NumericSeries | None = None,
    time_unit: TimeUnit | None = None,
) -> Computable:
    """A least-squares fit (`curveV2`) of the points of `node` from `start_ns` to `end_ns` against
    their time since the earliest one (in `time_unit`, seconds by default) or, given `x`, against
    that series: a polynomial of `degree` (with the fixed `intercept` a_0 if given), y = a e^(b x),
    y = a ln(x) + b or y = a x^b. Nominal only polls it (`sparkwire_client.compute`); a Sparkwire
    server streams it with `subscribe(..., stream_polled=True)`, one row per update (the view's
    `curve`, `r2`, `mae`, `mse`, `rmse`, `maxAbsoluteError`, `sampleCount` and the coefficients)."""
    if x is not None and time_unit is not None:
        raise ValueError("time_unit applies to a fit against time: give x or time_unit, not both")
    if curve != "polynomial" and intercept is not None:
        raise ValueError("intercept applies to a polynomial fit only")
    independent = (
        _union("numeric", {"series": x.json})
        if x is not None
        else _union("time", {"timeUnit": time_unit} if time_unit else {})
    )
    details: Json = {"independentVariable": independent}
    if curve == "polynomial":
        details["degree"] = _literal(int(degree))
        if intercept is not None:
            details["intercept"] = _literal(float(intercept))
    body = {
        "target": _union("numeric", {"series": node.json}),
        "fitRange": {"startTime": _literal(_timestamp(start_ns)), "endTime": _literal(_timestamp(end_ns))},
        "curveToFit": _union(curve, details),
    }
    variables = Node._merge(node, x) if x is not None else dict(node.variables)
    return Computable(_union("curveV2", body), variables)
