"""The nodes Nominal computes on request and refuses to stream (`InvalidComputationType`s): a
running sum, a running integral, phase unwrapping, ranges where data goes stale, literal ranges.
Built only when a node is polled (Nominal's ComputeService, registry.py `polls`), each is
evaluated once, whole, over the period it is asked for (`POLLED_ONLY`): their output at a time
depends on every point since their start, which no micro-batch holds. Each is defined as
nominal-api 0.1505.0's docstring defines it (docs/protocol.md, "Computed on request")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.base import EvalEnv, Node, RangeNode, SeriesNode, numeric
from compute.evaluation.nodes.events import event_ranges
from compute.evaluation.results import NO_START, OPEN_END, NumericPoints, Ranges


def _from(x: NumericPoints, start_ns: int | None) -> NumericPoints:
    """The points at or after `start_ns` (None: all)."""
    return x if start_ns is None else x.since(start_ns)


@dataclass
class CumulativeSum(SeriesNode):
    """`cumulativeSum`: "the running total of the series values", from `startTimestamp` on: at each
    point of the input from then, the sum of the values of every point from then up to it (NaN
    propagates from where it appears, as a sum does)."""

    POLLED_ONLY = True
    input: SeriesNode
    start_ns: int

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        x = _from(numeric(self.input.evaluate(env), "cumulativeSum"), self.start_ns)
        return NumericPoints(x.ts, np.cumsum(x.values))


@dataclass
class Integral(SeriesNode):
    """`integral`: "the running sum of the area underneath a series using the trapezoidal rule",
    from `startTimestamp` on, time in `timeUnit` (seconds by default): 0 at the first point from
    then, and at each later point the previous value plus the trapezoid between the two points,
    (v[i-1] + v[i]) / 2 * (t[i] - t[i-1]) in the unit."""

    POLLED_ONLY = True
    input: SeriesNode
    start_ns: int
    unit_ns: int

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        x = _from(numeric(self.input.evaluate(env), "integral"), self.start_ns)
        if len(x.ts) == 0:
            return x
        areas = (x.values[1:] + x.values[:-1]) / 2 * (np.diff(x.ts) / self.unit_ns)
        return NumericPoints(x.ts, np.concatenate(([0.0], np.cumsum(areas))))


@dataclass
class PhaseUnwrap(SeriesNode):
    """`phaseUnwrap`: "adding whole multiples of `period` whenever the step between consecutive
    samples exceeds half the period"; as many points as its input (numpy's `unwrap`, whose
    default discontinuity is half the period)."""

    POLLED_ONLY = True
    input: SeriesNode
    period: float

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        x = numeric(self.input.evaluate(env), "phaseUnwrap")
        if len(x.ts) == 0:
            return x
        return NumericPoints(x.ts, np.unwrap(x.values, period=self.period))


@dataclass
class StaleRanges(RangeNode):
    """`staleRange`, `numericStaleRangesV2`, `categoricalStaleRangesV2`: "ranges for which data does
    not exist for the specified duration or longer". A range runs from the last point before a gap
    of at least `threshold_ns` to the point that ends it, [t_i, t_i+1); before the first point, from
    the period's start (or `start_ns`), when the first point comes `threshold_ns` or more after it;
    after the last point, from it on, open, when the period's end (or `end_ns`) is `threshold_ns`
    or more after it. The input is read `threshold_ns` before the period (its lookback), as
    Nominal "increases window size by the specified staleness threshold", so a gap that began
    before the period is found."""

    POLLED_ONLY = True
    input: SeriesNode
    threshold_ns: int
    start_ns: int | None = None
    end_ns: int | None = None

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.threshold_ns

    def evaluate(self, env: EvalEnv) -> Ranges:
        ts = self.input.evaluate(env).ts
        first = env.window_start - self.threshold_ns if self.start_ns is None else self.start_ns
        last = env.now if self.end_ns is None else self.end_ns
        ts = ts[(ts >= first) & (ts <= last)]
        spans: list[tuple[int, int]] = []
        if len(ts) == 0:
            if last - first >= self.threshold_ns:
                spans.append((first, OPEN_END if self.end_ns is None else last))
            return _ranges(spans)
        if ts[0] - first >= self.threshold_ns:
            spans.append((first, int(ts[0])))
        gaps = np.flatnonzero(np.diff(ts) >= self.threshold_ns)
        spans += [(int(ts[i]), int(ts[i + 1])) for i in gaps]
        if last - ts[-1] >= self.threshold_ns:
            spans.append((int(ts[-1]), OPEN_END if self.end_ns is None else last))
        return _ranges(spans)


def _ranges(spans: list[tuple[int, int]]) -> Ranges:
    if not spans:
        return Ranges.empty()
    array = np.asarray(spans, np.int64)
    return Ranges(array[:, 0].copy(), array[:, 1].copy())


@dataclass
class LiteralRanges(RangeNode):
    """`literalRanges`: the ranges the request lists, [start, end); without a start a range began
    before anything held, without an end it is still open. Ranges that overlap or touch are one
    (a range series holds no overlapping ranges)."""

    POLLED_ONLY = True
    spans: tuple[tuple[int | None, int | None], ...]

    def evaluate(self, env: EvalEnv) -> Ranges:
        return event_ranges(
            [(NO_START if s is None else s, OPEN_END if e is None else e) for s, e in self.spans]
        )
