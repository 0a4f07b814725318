"""Builders for the range, enum and value nodes beyond `sparkwire_client.nodes`: duration filters,
padding, equality, stability, instants (changes, crossovers, peaks), value maps, resampling,
unions and the selection of one range.

    temp = numeric_channel("ri.demo", "engine.temp")
    alarm = held_for(temp.above(90), seconds=5)          # above 90 for more than 5 s
    phase = value_map(temp, [(None, 20, "cold"), (20, 80, "warm"), (80, None, "hot")])
    tile = last_range(alarm)                              # the current-alarm tile
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from sparkwire_client.nodes import (
    Computable,
    EnumSeries,
    Json,
    Node,
    NumericSeries,
    RangeSeries,
    ThresholdOperator,
    _compute_duration,
    _literal,
    _union,
)

Series = NumericSeries | EnumSeries
Side = Literal["start", "end", "both"]
PeakType = Literal["PEAK", "TROUGH", "BOTH"]
UnionOperation = Literal["THROW", "MAX", "MIN"]
RangeAggregation = Literal[
    "sum", "average", "min", "max", "count", "standardDeviation", "rootMeanSquare", "all"
]


def _variables(*nodes: Node) -> dict[str, Json]:
    return Node._merge(*nodes)


def _series(node: Series) -> Json:
    return _union("numeric" if isinstance(node, NumericSeries) else "enum", node.json)


def approximately(x: NumericSeries, value: float, tolerance: float, equal: bool = True) -> RangeSeries:
    """Where |x - value| <= tolerance (`equal`), or where it is not (`approximateThreshold`)."""
    body = {
        "input": x.json,
        "threshold": _literal(float(value)),
        "tolerance": _literal(float(tolerance)),
        "operator": "EQUAL_TO" if equal else "NOT_EQUAL_TO",
    }
    return RangeSeries(_union("approximateThreshold", body), x.variables)


def held_for(
    ranges: RangeSeries, seconds: float, comparison: ThresholdOperator = "GREATER_THAN"
) -> RangeSeries:
    """The ranges whose duration `comparison` `seconds` (`durationFilterV2`); a range still open
    counts as infinitely long (UnboundedBehavior INFINITY, the one that streams)."""
    body = {
        "input": ranges.json,
        "duration": _compute_duration(seconds),
        "comparison": comparison,
        "unboundedBehavior": "INFINITY",
    }
    return RangeSeries(_union("durationFilterV2", body), ranges.variables)


def padded(ranges: RangeSeries, seconds: float, side: Side = "both") -> RangeSeries:
    """Every range widened by `seconds` at its start, end or both (`paddedRangesV2`)."""
    config = {"start": "PAD_START", "end": "PAD_END", "both": "PAD_START_AND_END"}[side]
    body = {"input": ranges.json, "duration": _compute_duration(seconds), "paddingConfiguration": config}
    return RangeSeries(_union("paddedRangesV2", body), ranges.variables)


def all_equal(*inputs: Series, tolerance: float = 0.0, negate: bool = False) -> RangeSeries:
    """Where every input is equal (numeric: within `tolerance` of each other), or (`negate`) not
    all equal: `numericEqualityRangesV2` or `categoricalEqualityRangesV2`."""
    if len(inputs) < 2 or len({isinstance(x, NumericSeries) for x in inputs}) != 1:
        raise ValueError("all_equal needs two or more series, all numeric or all enum")
    body: Json = {
        "inputs": [x.json for x in inputs],
        "equalityOperator": "NOT_ALL_EQUAL" if negate else "ALL_EQUAL",
    }
    if isinstance(inputs[0], NumericSeries):
        body["tolerance"] = _literal(float(tolerance))
        kind = "numericEqualityRangesV2"
    else:
        kind = "categoricalEqualityRangesV2"
    return RangeSeries(_union(kind, body), _variables(*inputs))


def stable(
    x: NumericSeries, window_seconds: float, threshold: float, percentage: bool = False, min_points: int = 2
) -> RangeSeries:
    """Where x stays within `threshold` (absolute, or a percentage of the mean) of the min and max
    of the last `window_seconds` (`stabilityDetectionV2`)."""
    kind = "percentage" if percentage else "absolute"
    body = {
        "input": x.json,
        "window": _compute_duration(window_seconds),
        "minPoints": _literal(int(min_points)),
        "threshold": _union(kind, {"value": _literal(float(threshold))}),
    }
    return RangeSeries(_union("stabilityDetectionV2", body), x.variables)


def on_change(x: Series) -> RangeSeries:
    """An instant (a zero-duration range) at every point whose value differs from the previous one."""
    return RangeSeries(_union("onChange", {"input": _series(x)}), x.variables)


def crossovers(a: NumericSeries, b: NumericSeries) -> RangeSeries:
    """An instant wherever a crosses b (`seriesCrossoverRangesNode`)."""
    body = {"inputA": a.json, "inputB": b.json}
    return RangeSeries(_union("seriesCrossoverRangesNode", body), _variables(a, b))


def extrema(x: NumericSeries, selection: PeakType = "PEAK") -> RangeSeries:
    """An instant at every point of a peak, a trough or both (`extremaRangesV2`)."""
    return RangeSeries(_union("extremaRangesV2", {"input": x.json, "selection": selection}), x.variables)


def value_map(
    x: NumericSeries, mapping: Sequence[tuple[float | None, float | None, str]], default: str | None = None
) -> EnumSeries:
    """Labels for value ranges [lower, upper) (None: open to the neighbouring range or infinity);
    a value no range captures takes `default`, or is dropped (`valueMap`)."""
    body: Json = {
        "input": x.json,
        "mapping": [
            {
                **({} if lower is None else {"start": _literal(float(lower))}),
                **({} if upper is None else {"end": _literal(float(upper))}),
                "output": _literal(label),
            }
            for lower, upper, label in mapping
        ],
    }
    if default is not None:
        body["default"] = _literal(default)
    return EnumSeries(_union("valueMap", body), x.variables)


def within(x: EnumSeries, ranges: RangeSeries) -> EnumSeries:
    """The points of x inside the ranges (`filterTransformation`)."""
    body = {"input": x.json, "filter": ranges.json}
    return EnumSeries(_union("filterTransformation", body), _variables(x, ranges))


def resample(x: EnumSeries, seconds: float) -> EnumSeries:
    """x forward-filled onto an epoch-aligned grid every `seconds` (`resampleV2`)."""
    return EnumSeries(
        _union("resampleV2", {"input": x.json, "interval": _compute_duration(seconds)}), x.variables
    )


def to_start_of_interval(x: Series, seconds: float) -> Series:
    """Every point of x moved to the start of its epoch-aligned interval of `seconds`
    (`toStartOfInterval`); points landing on one timestamp are all kept (see `aggregate`)."""
    body = {"input": x.json, "window": _compute_duration(seconds)}
    return type(x)(_union("toStartOfInterval", body), x.variables)


def aggregate(x: EnumSeries, function: Literal["MIN", "MAX"] = "MAX") -> EnumSeries:
    """x's points sharing a timestamp as one: the label sorting last (MAX) or first (MIN)."""
    return EnumSeries(_union("aggregate", {"input": x.json, "function": function}), x.variables)


def every_nth(x: Series, n: int) -> Series:
    """Every n-th point of x, counted from the window's first (`nthPointDownsample`)."""
    return type(x)(_union("nthPointDownsample", {"input": x.json, "n": _literal(int(n))}), x.variables)


def union(inputs: Iterable[EnumSeries], operation: UnionOperation = "MAX") -> EnumSeries:
    """Every input's points in one series; shared timestamps resolved by `operation` (`union`)."""
    series = list(inputs)
    body = {"input": [x.json for x in series], "operation": operation}
    return EnumSeries(_union("union", body), _variables(*series))


def range_aggregate(
    ranges: RangeSeries, x: NumericSeries, operation: RangeAggregation = "average"
) -> RangeSeries:
    """Each range with a value: `operation` over x's points inside it (`rangeNumericAggregation`;
    `all`: every aggregate). The values reach the client under `ranges(...)`."""
    body = {"ranges": ranges.json, "input": x.json, "operation": _union(operation, {})}
    return RangeSeries(_union("rangeNumericAggregation", body), _variables(ranges, x))


def nth_range(ranges: RangeSeries, index: int, from_latest: bool = False) -> Computable:
    """The `index`-th range (0-based) in the window, from the earliest or the latest (`nthRange`)."""
    body = {
        "input": ranges.json,
        "index": _literal(int(index)),
        "sortOrder": "DESC" if from_latest else "ASC",
    }
    return Computable(_union("value", _union("nthRange", body)), ranges.variables)


def first_range(ranges: RangeSeries) -> Computable:
    return Computable(_union("value", _union("firstRange", ranges.json)), ranges.variables)


def last_range(ranges: RangeSeries) -> Computable:
    return Computable(_union("value", _union("lastRange", ranges.json)), ranges.variables)


def first_value_point(x: Series) -> Computable:
    """The window's first point of x as a `singlePoint` (its value a number or a label)."""
    return Computable(_union("value", _union("firstValuePoint", _series(x))), x.variables)


def last_value_point(x: Series) -> Computable:
    """The window's newest point of x as a `singlePoint`: the current-value tile."""
    return Computable(_union("value", _union("lastValuePoint", _series(x))), x.variables)


__all__ = [
    "aggregate",
    "all_equal",
    "approximately",
    "crossovers",
    "every_nth",
    "extrema",
    "first_range",
    "first_value_point",
    "held_for",
    "last_range",
    "last_value_point",
    "nth_range",
    "on_change",
    "padded",
    "range_aggregate",
    "resample",
    "stable",
    "to_start_of_interval",
    "union",
    "value_map",
    "within",
]
