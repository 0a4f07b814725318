"""Builders of the nodes Nominal refuses to stream (`InvalidComputationType`) but computes when it is
asked for a period: `cumulativeSum`, `integral`, `phaseUnwrap`, the stale-ranges nodes and
`literalRanges` (evaluators: nodes/on_request.py). Registered with `polls`: Nominal's
ComputeService builds them, and a live subscription still gets the refusal builders/refusals.py
registers, with Nominal's type."""

from __future__ import annotations

from typing import Any

from compute.evaluation import nodes
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.registry import polls
from compute.evaluation.errors import MalformedNode, refuse
from compute.evaluation.nodes.on_request import (
    CumulativeSum,
    Integral,
    LiteralRanges,
    PhaseUnwrap,
    StaleRanges,
)
from compute.evaluation.nominal_variants import TIME_UNIT_NANOS

Json = Any


def _start(b: Builder, o: dict[str, Json], what: str) -> int:
    return b.timestamp_constant(b.get(o, "startTimestamp", what))


@polls("NumericSeries", "cumulativeSum")
def cumulative_sum(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "cumulativeSum")
    x = b.timed(b.numeric(b.get(o, "input", "cumulativeSum")), "cumulativeSum")
    return CumulativeSum(x, _start(b, o, "cumulativeSum"))


@polls("NumericSeries", "integral")
def integral(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "integral")
    x = b.timed(b.numeric(b.get(o, "input", "integral")), "integral")
    unit = o.get("timeUnit")
    unit = "SECONDS" if unit is None else b.enum_value("TimeUnit", unit, "integral.timeUnit")
    return Integral(x, _start(b, o, "integral"), TIME_UNIT_NANOS[unit])


@polls("NumericSeries", "phaseUnwrap")
def phase_unwrap(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "phaseUnwrap")
    x = b.timed(b.numeric(b.get(o, "input", "phaseUnwrap")), "phaseUnwrap")
    period = b.double_constant(b.get(o, "period", "phaseUnwrap"))
    if not period > 0:  # NaN too
        raise refuse("phaseUnwrap", "period", f"must be positive, got {period}")
    return PhaseUnwrap(x, period)


def _threshold(what: str, threshold_ns: int) -> int:
    if threshold_ns <= 0:
        raise refuse(what, "threshold", f"must be positive, got {threshold_ns} ns")
    return threshold_ns


@polls("RangeSeries", "staleRange")
def stale_range(b: Builder, v: Json) -> nodes.RangeNode:
    what = "staleRange"
    o = b.obj(v, what)
    x = b.timed(b.series(b.get(o, "input", what)), what)
    threshold = _threshold(what, b.duration_constant(b.get(o, "threshold", what)))
    start, end = o.get("startTimestamp"), o.get("endTimestamp")
    return StaleRanges(
        x,
        threshold,
        None if start is None else b.timestamp_constant(start),
        None if end is None else b.timestamp_constant(end),
    )


def _stale_ranges_v2(what: str, categorical: bool) -> Any:
    """`numericStaleRangesV2` / `categoricalStaleRangesV2`: a `Duration` threshold, the period's
    own start and end."""

    def build(b: Builder, v: Json) -> nodes.RangeNode:
        o = b.obj(v, what)
        raw = b.get(o, "input", what)
        x = b.timed(b.enum(raw) if categorical else b.numeric(raw), what)
        return StaleRanges(x, _threshold(what, b.duration_expression(b.get(o, "threshold", what))))

    return build


polls("RangeSeries", "numericStaleRangesV2")(_stale_ranges_v2("numericStaleRangesV2", categorical=False))
polls("RangeSeries", "categoricalStaleRangesV2")(
    _stale_ranges_v2("categoricalStaleRangesV2", categorical=True)
)


@polls("RangeSeries", "literalRanges")
def literal_ranges(b: Builder, v: Json) -> nodes.RangeNode:
    o = b.obj(v, "literalRanges")
    listed = b.get(o, "literalRanges", "literalRanges")
    if not isinstance(listed, list):
        raise MalformedNode("literalRanges.literalRanges must be a list")
    spans: list[tuple[int | None, int | None]] = []
    for i, item in enumerate(listed):
        r = b.obj(item, f"literalRanges[{i}]")
        if r.get("tags"):
            raise refuse(
                "literalRanges", "tags", "a literal range's tags group nothing in Sparkwire; omit them"
            )
        start, end = r.get("startTimestamp"), r.get("endTimestamp")
        spans.append(
            (
                None if start is None else b.timestamp_constant(start),
                None if end is None else b.timestamp_constant(end),
            )
        )
    return LiteralRanges(tuple(spans))
