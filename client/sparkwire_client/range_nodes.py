"""Builders for the range, enum and value nodes beyond `sparkwire_client.nodes`: duration filters,
padding, equality, stability, instants (changes, crossovers, peaks), value maps, resampling,
unions and the selection of one range.

    temp = numeric_channel("ri.demo", "engine.temp")
    alarm = held_for(temp.above(90), seconds=5)          # above 90 for more than 5 s
    phase = value_map(temp, [(None, 20, "cold"), (20, 80, "warm"), (80, None, "hot")])
    tile = last_range(alarm)                              # the current-alarm tile
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Literal, TypeVar

from sparkwire_client.nodes import (
    Computable,
    Condition,
    EnumSeries,
    Json,
    Node,
    NumericSeries,
    RangeSeries,
    ThresholdOperator,
    _compute_duration,
    _duration,
    _literal,
    _union,
)

Series = NumericSeries | EnumSeries
S = TypeVar("S", NumericSeries, EnumSeries)  # a node of the input's own family
Side = Literal["start", "end", "both"]
Comparison = Literal["gt", "ge", "lt", "le", "eq", "ne"]
_PADDING = {"start": "PAD_START", "end": "PAD_END", "both": "PAD_START_AND_END"}
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
    ranges: RangeSeries,
    seconds: float,
    comparison: ThresholdOperator = "GREATER_THAN",
    unbounded: Literal["INFINITY", "WINDOW_BOUND"] = "INFINITY",
    v1: bool = False,
) -> RangeSeries:
    """The ranges whose duration `comparison` `seconds` (`durationFilterV2`; `v1`: the older
    `durationFilter`); a range still open counts as infinitely long (INFINITY) or as lasting to
    the window's edge (WINDOW_BOUND)."""
    if v1:
        body: Json = {
            "input": ranges.json,
            "threshold": _literal(_duration(seconds)),
            "operator": comparison,
            "unboundedBehavior": unbounded,
        }
        return RangeSeries(_union("durationFilter", body), ranges.variables)
    body = {
        "input": ranges.json,
        "duration": _compute_duration(seconds),
        "comparison": comparison,
        "unboundedBehavior": unbounded,
    }
    return RangeSeries(_union("durationFilterV2", body), ranges.variables)


def padded(ranges: RangeSeries, seconds: float, side: Side = "both", v1: bool = False) -> RangeSeries:
    """Every range widened by `seconds` at its start, end or both (`paddedRangesV2`; `v1`: `paddedRanges`)."""
    if v1:
        body: Json = {
            "input": ranges.json,
            "padding": _literal(_duration(seconds)),
            "paddingConfiguration": _PADDING[side],
        }
        return RangeSeries(_union("paddedRanges", body), ranges.variables)
    body = {
        "input": ranges.json,
        "duration": _compute_duration(seconds),
        "paddingConfiguration": _PADDING[side],
    }
    return RangeSeries(_union("paddedRangesV2", body), ranges.variables)


def condition_ranges(condition: Condition) -> RangeSeries:
    """Where a condition over one series and constants holds (`booleanRanges`), e.g.
    `condition_ranges(temp.gt(20) & temp.lt(80))`."""
    return RangeSeries(_union("booleanRanges", {"input": condition.json}), condition.variables)


def threshold_v2(
    x: NumericSeries, comparison: Comparison, value: float, tolerance: float | None = None
) -> RangeSeries:
    """Where `x <comparison> value` (`thresholdRangesV2`); eq / ne take a `tolerance`."""
    body: Json = {"threshold": _literal(float(value))}
    if tolerance is not None:
        body["tolerance"] = _literal(float(tolerance))
    return RangeSeries(
        _union("thresholdRangesV2", {"input": x.json, "comparison": _union(comparison, body)}), x.variables
    )


def category_ranges(x: EnumSeries, values: Iterable[str], negate: bool = False) -> RangeSeries:
    """Where x's label is one of `values` (or, `negate`, none of them) (`categoryFilterRangesV2`)."""
    body = {
        "input": x.json,
        "values": [_literal(v) for v in sorted(set(values))],
        "operator": "IS_NOT_IN" if negate else "IS_IN",
    }
    return RangeSeries(_union("categoryFilterRangesV2", body), x.variables)


def all_equal(*inputs: Series, tolerance: float = 0.0, negate: bool = False, v1: bool = False) -> RangeSeries:
    """Where every input is equal (numeric: within `tolerance` of each other), or (`negate`) not
    all equal: `numericEqualityRangesV2` or `categoricalEqualityRangesV2` (`v1`: the older
    `seriesEqualityRangesNode` or `enumSeriesEqualityRangesNode`)."""
    if len(inputs) < 2 or len({isinstance(x, NumericSeries) for x in inputs}) != 1:
        raise ValueError("all_equal needs two or more series, all numeric or all enum")
    numeric = isinstance(inputs[0], NumericSeries)
    body: Json = {
        ("input" if v1 else "inputs"): [x.json for x in inputs],
        "equalityOperator": "NOT_ALL_EQUAL" if negate else "ALL_EQUAL",
    }
    if numeric:
        body["tolerance"] = _literal(float(tolerance))
    kind = {
        (True, False): "numericEqualityRangesV2",
        (False, False): "categoricalEqualityRangesV2",
        (True, True): "seriesEqualityRangesNode",
        (False, True): "enumSeriesEqualityRangesNode",
    }[(numeric, v1)]
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


def stable_v1(
    x: NumericSeries, window_seconds: float, threshold: float, percentage: bool = False, min_points: int = 2
) -> RangeSeries:
    """As `stable`, as the older `stabilityDetection` node (its window in a `windowConfiguration`)."""
    kind = "percentage" if percentage else "absolute"
    body = {
        "input": x.json,
        "windowConfiguration": {
            "duration": _literal(_duration(window_seconds)),
            "minPoints": _literal(int(min_points)),
        },
        "threshold": _union(kind, {"value": _literal(float(threshold))}),
    }
    return RangeSeries(_union("stabilityDetection", body), x.variables)


def on_change(x: Series) -> RangeSeries:
    """An instant (a zero-duration range) at every point whose value differs from the previous one."""
    return RangeSeries(_union("onChange", {"input": _series(x)}), x.variables)


def label_changes(x: EnumSeries) -> RangeSeries:
    """An instant at every point whose label differs from the previous one (`categoricalOnChangeRangesV2`)."""
    return RangeSeries(_union("categoricalOnChangeRangesV2", {"input": x.json}), x.variables)


def crossovers(a: NumericSeries, b: NumericSeries) -> RangeSeries:
    """An instant wherever a crosses b (`seriesCrossoverRangesNode`)."""
    body = {"inputA": a.json, "inputB": b.json}
    return RangeSeries(_union("seriesCrossoverRangesNode", body), _variables(a, b))


def extrema(x: NumericSeries, selection: PeakType = "PEAK") -> RangeSeries:
    """An instant at every point of a peak, a trough or both (`extremaRangesV2`)."""
    return RangeSeries(_union("extremaRangesV2", {"input": x.json, "selection": selection}), x.variables)


def peaks(x: NumericSeries, return_type: PeakType = "PEAK") -> RangeSeries:
    """As `extrema`, as the older `peak` node (`returnType`)."""
    return RangeSeries(_union("peak", {"input": x.json, "returnType": return_type}), x.variables)


def ranges_variable(ranges: RangeSeries) -> RangeSeries:
    """The ranges as a context variable holding the node (`RangeSeries.raw` referring to a
    `computeNode`), as Nominal's workbooks share one range definition among charts."""
    value = {
        "type": "computeNode",
        "computeNode": {
            "seriesNode": _union("ranges", ranges.json),
            "context": {"variables": dict(sorted(ranges.variables.items())), "datasetReferences": {}},
        },
    }
    digest = hashlib.sha1(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]
    name = f"ranges#{digest}"
    return RangeSeries(_union("raw", {"name": name}), {name: value})


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


def within(x: S, ranges: RangeSeries) -> S:
    """The points of x (enum or numeric) inside the ranges (`filterTransformation`)."""
    body = {"input": x.json, "filter": ranges.json}
    return type(x)(_union("filterTransformation", body), _variables(x, ranges))


def resample(x: EnumSeries, seconds: float, v1: bool = False) -> EnumSeries:
    """x forward-filled onto an epoch-aligned grid every `seconds` (`resampleV2`; `v1`: `resample`)."""
    if v1:
        config = {"interval": _literal(_duration(seconds))}
        return EnumSeries(_union("resample", {"input": x.json, "resampleConfiguration": config}), x.variables)
    return EnumSeries(
        _union("resampleV2", {"input": x.json, "interval": _compute_duration(seconds)}), x.variables
    )


def enum_aggregation(x: EnumSeries, operator: Literal["min", "max"] = "max") -> EnumSeries:
    """x's points sharing a timestamp (within each group) as one: the label sorting first (min) or
    last (max) (`enumAggregation` with a groupBy of the current tags and timestamps)."""
    builder = _union(
        "groupBy",
        {"input": _series(x), "tags": _union("current", {}), "timestamp": _union("current", {})},
    )
    body = {"input": builder, "operator": _union(operator, {})}
    return EnumSeries(_union("enumAggregation", body), x.variables)


def to_start_of_interval(x: S, seconds: float) -> S:
    """Every point of x moved to the start of its epoch-aligned interval of `seconds`
    (`toStartOfInterval`); points landing on one timestamp are all kept (see `aggregate`)."""
    body = {"input": x.json, "window": _compute_duration(seconds)}
    return type(x)(_union("toStartOfInterval", body), x.variables)


def aggregate(x: EnumSeries, function: Literal["MIN", "MAX"] = "MAX") -> EnumSeries:
    """x's points sharing a timestamp as one: the label sorting last (MAX) or first (MIN)."""
    return EnumSeries(_union("aggregate", {"input": x.json, "function": function}), x.variables)


def every_nth(x: S, n: int) -> S:
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
    "category_ranges",
    "condition_ranges",
    "crossovers",
    "enum_aggregation",
    "every_nth",
    "extrema",
    "first_range",
    "first_value_point",
    "held_for",
    "label_changes",
    "last_range",
    "last_value_point",
    "nth_range",
    "on_change",
    "padded",
    "peaks",
    "range_aggregate",
    "ranges_variable",
    "resample",
    "stable",
    "stable_v1",
    "threshold_v2",
    "to_start_of_interval",
    "union",
    "value_map",
    "within",
]
