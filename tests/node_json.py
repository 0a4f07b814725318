"""Builders of Nominal compute node JSON (Conjure shapes from nominal-api), to keep tests readable."""

from __future__ import annotations

from typing import Any

from tests.wire import NANOS

J = dict[str, Any]


def union(kind: str, value: Any) -> J:
    return {"type": kind, kind: value}


def literal(x: Any) -> J:
    return union("literal", x)


def variable(name: str) -> J:
    return union("variable", name)


def duration(ns: int) -> J:
    return {"seconds": ns // NANOS, "nanos": ns % NANOS}


# -- context variables --------------------------------------------------------------------------
def channel(rid: str, name: str, tags: dict[str, str] | None = None, group_by: list[str] | None = None) -> J:
    return union(
        "channel",
        union(
            "dataSource",
            {
                "dataSourceRid": literal(rid),
                "channel": literal(name),
                "tags": {k: literal(v) for k, v in (tags or {}).items()},
                "tagsToGroupBy": [],
                "groupByTags": [literal(g) for g in (group_by or [])],
            },
        ),
    )


def double_var(x: float) -> J:
    return union("double", x)


def duration_var(ns: int) -> J:
    return union("duration", duration(ns))


def string_var(s: str) -> J:
    return union("string", s)


def string_set_var(values: list[str]) -> J:
    return union("stringSet", values)


# -- numeric series -----------------------------------------------------------------------------
def raw(name: str) -> J:
    return union("raw", {"name": name})


def num(name: str) -> J:
    """NumericSeries.raw: a numeric channel by reference."""
    return raw(name)


def const(x: float | J) -> J:
    return union("constant", union("double", x if isinstance(x, dict) else literal(x)))


def unary(op: str, x: J) -> J:
    return union(op, {"x": x})


def binary(op: str, left: J, right: J) -> J:
    return union(op, {"left": left, "right": right})


def derivative(x: J, unit: str | None = None, negatives: str | None = None) -> J:
    body: J = {"input": x}
    if unit:
        body["timeUnit"] = unit
    if negatives:
        body["negativeValuesConfiguration"] = union(negatives, {})
    return union("derivative", body)


def value_difference(x: J, negatives: str | None = None) -> J:
    body: J = {"input": x}
    if negatives:
        body["negativeValuesConfiguration"] = union(negatives, {})
    return union("valueDifference", body)


def time_shift(x: J, shift: J) -> J:
    return union("timeShift", {"input": x, "duration": shift})


def threshold_filter(x: J, operator: str, threshold: J) -> J:
    return union("thresholdFilter", {"input": x, "threshold": threshold, "operator": operator})


def window(ns: int) -> J:
    """A `scout.compute.api.Duration` expression: whole seconds, else milliseconds + nanoseconds."""
    if ns % NANOS == 0:
        return union("seconds", {"seconds": literal(ns // NANOS)})
    return union(
        "add",
        {
            "left": union("milliseconds", {"milliseconds": literal(ns // 1_000_000)}),
            "right": union("nanoseconds", {"nanoseconds": literal(ns % 1_000_000)}),
        },
    )


def rolling(series: J, window_ns: int, operator: str) -> J:
    """numericAggregation over a rolling time window; `series` is a Series (numeric or enum)."""
    return union(
        "numericAggregation",
        {
            "input": union("rollingTime", {"input": series, "window": window(window_ns)}),
            "operator": union(operator, {}),
        },
    )


def numeric_series(x: J) -> J:
    return union("numeric", x)


def enum_series(x: J) -> J:
    return union("enum", x)


# -- ranges -------------------------------------------------------------------------------------
def threshold(x: J, operator: str, value: J) -> J:
    return union("threshold", {"input": x, "threshold": value, "operator": operator})


def min_max(x: J, operator: str, lower: J, upper: J) -> J:
    return union(
        "minMaxThreshold", {"input": x, "lowerBound": lower, "upperBound": upper, "operator": operator}
    )


def enum_filter(x: J, operator: str, values: J) -> J:
    return union("enumFilter", {"input": x, "operator": operator, "values": values})


def not_(r: J) -> J:
    return union("not", {"input": r})


def intersect(*rs: J) -> J:
    return union("intersectRange", {"inputs": list(rs)})


def union_ranges(*rs: J) -> J:
    return union("unionRange", {"inputs": list(rs)})


# -- conditions (BooleanSeries) over one series and constants -----------------------------------
def compare(kind: str, left: J, right: J) -> J:
    """kind: greaterThan, greaterThanOrEqualTo, lessThan, lessThanOrEqualTo, equalTo, notEqualTo."""
    return union(kind, {"left": left, "right": right})


def either(left: J, right: J) -> J:
    return union("or", {"left": left, "right": right})


def both(left: J, right: J) -> J:
    return union("and", {"left": left, "right": right})


def filter_where(x: J, condition: J) -> J:
    return union("filterWhere", {"input": x, "condition": condition})


def boolean_ranges(condition: J) -> J:
    return union("booleanRanges", {"input": condition})


# -- computable nodes ---------------------------------------------------------------------------
def series(s: J, buckets: int | None = None, resolution: int | None = None) -> J:
    body: J = {"input": s, "numericAggregations": {}}
    if buckets is not None:
        body["buckets"] = buckets
    if resolution is not None:
        body["resolution"] = resolution
    return union("series", body)


def ranges(r: J, max_ranges: int | None = None) -> J:
    body: J = {"input": r}
    if max_ranges is not None:
        body["maxRanges"] = max_ranges
    return union("ranges", body)


def value(which: str, s: J) -> J:
    return union("value", union(which, s))
