"""Aggregations other than the rolling time window of nodes/rolling.py: the points of a rolling
point count (`rollingPoints`), a rolling time window's `percentile`, points grouped by timestamp
(`groupBy`, the deprecated `aggregate`), points under ranges (`aggregateUnderRanges`,
`groupWithinRangesV2`), and the other nodes over ranges or timestamps: `filterTransformation`,
`rangeDuration`, `countDuplicate`, `toStartOfInterval`, `nthPointDownsample`.

Each operator reduces a slice of values as nodes/rolling.py's operators do (standard deviation is
the population's); `percentile` p in [0, 1] interpolates linearly between the two nearest ranks
(numpy's default, Hyndman and Fan's 7th definition).

Nodes whose output at a timestamp depends on points arbitrarily far from it (a range's aggregate at
its start, the N points before a point, every N-th point counted from the window's first) declare
the whole window as their lookback, so that they are evaluated over it whole."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation import cost
from compute.evaluation.durations import human_duration
from compute.evaluation.nodes.base import (
    EvalEnv,
    Node,
    PointByPoint,
    RangeNode,
    Reach,
    Series,
    SeriesNode,
    cut,
    enum,
    grid_end,
    log_lines,
    numeric,
)
from compute.evaluation.results import NO_START, OPEN_END, EnumPoints, NumericPoints, Ranges

# NumericAggregationFunction (deprecated enum) -> NumericAggregationOperator variant.
FUNCTION_OPERATORS: dict[str, str] = {
    "SUM": "sum",
    "MEAN": "average",
    "MIN": "min",
    "MAX": "max",
    "COUNT": "count",
    "STANDARD_DEVIATION": "standardDeviation",
    "ROOT_MEAN_SQUARE": "rootMeanSquare",
}
SLICE_OPERATORS: tuple[str, ...] = (*FUNCTION_OPERATORS.values(), "percentile")


@dataclass(frozen=True)
class Operator:
    name: str  # a value of SLICE_OPERATORS
    percentile: float = 0.5  # for "percentile", in [0, 1]

    def reduce(self, v: np.ndarray) -> float:
        if self.name == "count":
            return float(len(v))
        with np.errstate(all="ignore"):
            if self.name == "sum":
                return float(np.sum(v))
            if self.name == "average":
                return float(np.sum(v) / len(v))
            if self.name == "min":
                return float(np.min(v))
            if self.name == "max":
                return float(np.max(v))
            if self.name == "rootMeanSquare":
                return float(np.sqrt(np.sum(v * v) / len(v)))
            if self.name == "standardDeviation":
                d = v - np.sum(v) / len(v)
                return float(np.sqrt(np.sum(d * d) / len(v)))
            if self.name == "percentile":
                return float(np.quantile(v, self.percentile))
        raise ValueError(self.name)


CHUNK_ELEMENTS = 4_000_000  # rows of a window matrix are reduced this many elements at a time


def window_reduce(op: Operator, v: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For every i: the operator over v[first[i] : i + 1] (first non-decreasing, first[i] <= i),
    vectorized: each row of a matrix of the last L values (L the longest window) with the
    positions before its window masked out, reduced by numpy's NaN-ignoring reductions. A real NaN
    inside a window makes its result NaN (count excepted), as the plain reductions would."""
    n = len(v)
    out = np.empty(n, np.float64)
    if not n:
        return out
    idx = np.arange(n)
    counts = idx - first + 1
    if op.name == "count":
        return counts.astype(np.float64)
    width = int(counts.max())
    cost.charge_work(n * width, f"{op.name} over windows of up to {width:,} points, {n:,} times")
    nan_before = np.r_[0, np.cumsum(np.isnan(v))]
    has_nan = nan_before[idx + 1] - nan_before[first] > 0
    windows = np.lib.stride_tricks.sliding_window_view(np.r_[np.full(width - 1, np.nan), v], width)
    rows = max(1, CHUNK_ELEMENTS // width)
    columns = np.arange(width)
    for lo in range(0, n, rows):
        hi = min(n, lo + rows)
        block = windows[lo:hi].copy()
        outside = columns[None, :] < (width - counts[lo:hi])[:, None]
        if op.name == "percentile":  # sorted with the positions outside the window last
            block[outside] = np.inf
            out[lo:hi] = _sorted_quantile(np.sort(block, axis=1), counts[lo:hi], op.percentile)
            continue
        block[outside] = np.nan
        with np.errstate(all="ignore"):
            if op.name == "sum":
                r = np.nansum(block, axis=1)
            elif op.name == "average":
                r = np.nansum(block, axis=1) / counts[lo:hi]
            elif op.name == "min":
                r = np.nanmin(block, axis=1)
            elif op.name == "max":
                r = np.nanmax(block, axis=1)
            elif op.name == "rootMeanSquare":
                r = np.sqrt(np.nansum(block * block, axis=1) / counts[lo:hi])
            elif op.name == "standardDeviation":
                r = np.nanstd(block, axis=1)
            else:
                raise ValueError(op.name)
        out[lo:hi] = r
    out[has_nan] = np.nan
    return out


def _sorted_quantile(rows: np.ndarray, counts: np.ndarray, p: float) -> np.ndarray:
    """The p-quantile of each row's first `count` (sorted) values, linear between ranks."""
    h = (counts - 1) * p
    below = np.floor(h).astype(np.int64)
    above = np.minimum(below + 1, counts - 1)
    low = np.take_along_axis(rows, below[:, None], axis=1)[:, 0]
    high = np.take_along_axis(rows, above[:, None], axis=1)[:, 0]
    with np.errstate(all="ignore"):
        return np.where(above > below, low + (h - below) * (high - low), low)


def _values(s: NumericPoints | EnumPoints, op: Operator, what: str) -> np.ndarray:
    """The values to reduce: count reduces a series of any type, every other operator numbers."""
    if isinstance(s, EnumPoints):
        if op.name != "count":
            numeric(s, f"{what} {op.name}")  # refuses
        return np.zeros(len(s.ts))
    return s.values


@dataclass
class RollingPoints(SeriesNode):
    """For every point: the operator over it and the `count - 1` points before it. Its reach is
    those points, so a live batch reduces the windows of its new points only (issue 44: over 200,000
    points a window of 20,000 cost 39 s of CPU per batch when each batch evaluated it whole); a whole
    evaluation is charged `points x count` first (`window_reduce`)."""

    input: SeriesNode
    count: int
    operator: Operator
    window_ns: int

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.window_ns

    def reach(self) -> Reach:
        return Reach(points=self.count - 1)

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._reduce(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        out: NumericPoints = cut(self._reduce(self.input_since(self.input, env, since)), since)
        return out

    def _reduce(self, s: Series) -> NumericPoints:
        v = _values(s, self.operator, "rollingPoints")
        first = np.maximum(np.arange(len(v)) - self.count + 1, 0)
        return NumericPoints(s.ts, window_reduce(self.operator, v, first))


@dataclass
class RollingTimeSlices(SeriesNode):
    """For every point at t: the operator over the points in (t - D, t] (for the operators
    nodes/rolling.py has no block algorithm for: percentile)."""

    input: SeriesNode
    window_ns: int
    operator: Operator

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.window_ns

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        s = self.input.evaluate(env)
        v = _values(s, self.operator, "numericAggregation")
        first = np.searchsorted(s.ts, s.ts - self.window_ns, side="right")
        return NumericPoints(s.ts, window_reduce(self.operator, v, first))


@dataclass
class GroupByTime(SeriesNode):
    """`groupBy` with the input's own tags: one point per timestamp (`width` None: points sharing
    a timestamp) or per epoch-aligned bucket [k*width, (k+1)*width) at its start."""

    input: SeriesNode
    width: int | None
    operator: Operator

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return 0 if self.width is None else self.width

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        s = self.input.evaluate(env)
        v = _values(s, self.operator, "groupBy")
        keys = s.ts if self.width is None else (s.ts // self.width) * self.width
        if not len(keys):
            return NumericPoints(keys, np.empty(0, np.float64))
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        ends = np.r_[starts[1:], len(keys)]
        out = np.array(
            [self.operator.reduce(v[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        )
        return NumericPoints(keys[starts], out.astype(np.float64))


@dataclass
class AggregateUnderRanges(SeriesNode):
    """`aggregateUnderRanges` / `groupWithinRangesV2`: for every range holding points, one point at
    its start (the window's start for a range without one) with the operator over its points."""

    input: SeriesNode
    ranges: RangeNode
    operator: Operator
    window_ns: int

    def children(self) -> Sequence[Node]:
        return (self.input, self.ranges)

    def own_lookback_ns(self) -> int:
        return self.window_ns

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        s = self.input.evaluate(env)
        v = _values(s, self.operator, "aggregateUnderRanges")
        r = self.ranges.evaluate(env)
        starts = np.where(r.starts == NO_START, env.window_start, r.starts)
        lo = np.searchsorted(s.ts, r.starts, side="left")  # NO_START: from the first held point
        hi = np.searchsorted(s.ts, r.ends, side="left")
        keep = hi > lo
        out = [
            self.operator.reduce(v[a:b]) for a, b in zip(lo[keep].tolist(), hi[keep].tolist(), strict=True)
        ]
        ts = starts[keep]
        order = np.argsort(ts, kind="stable")
        return NumericPoints(ts[order], np.asarray(out, np.float64)[order])


@dataclass
class FilterWithinRanges(SeriesNode):
    """`filterTransformation`: the input's points whose timestamp lies in one of the ranges."""

    input: SeriesNode
    ranges: RangeNode

    def children(self) -> Sequence[Node]:
        return (self.input, self.ranges)

    def reach(self) -> Reach:
        return Reach()  # a point and the ranges holding its timestamp

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._apply(self.input.evaluate(env), self.ranges.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        return self._apply(
            self.input_since(self.input, env, since), self.input_since(self.ranges, env, since)
        )

    def _apply(self, x: Series, r: Ranges) -> NumericPoints:
        s = numeric(x, "filterTransformation")
        # normalized ranges: the last range starting at or before t holds t if t < its end
        i = np.searchsorted(r.starts, s.ts, side="right") - 1
        ok = i >= 0
        keep = ok & (s.ts < r.ends[np.where(ok, i, 0)]) if len(r.starts) else np.zeros(len(s.ts), bool)
        return NumericPoints(s.ts[keep], s.values[keep])


@dataclass
class RangeDuration(SeriesNode):
    """One point per range at its start, valued its duration in the time unit. A range without a
    start or an end is dropped, or (clampToWindow) clamped to the window's start / `now`."""

    ranges: RangeNode
    unit_ns: int
    clamp: bool

    def children(self) -> Sequence[Node]:
        return (self.ranges,)

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        r = self.ranges.evaluate(env)
        starts, ends = r.starts, r.ends
        if self.clamp:
            starts = np.where(starts == NO_START, env.window_start, starts)
            ends = np.where(ends == OPEN_END, np.maximum(env.now, starts), ends)
        else:
            keep = (starts != NO_START) & (ends != OPEN_END)
            starts, ends = starts[keep], ends[keep]
        return NumericPoints(starts, (ends - starts) / self.unit_ns)


@dataclass
class CountDuplicate(SeriesNode):
    """`countDuplicate`: at every timestamp of the inputs, how many points they have there."""

    inputs: list[SeriesNode]

    def children(self) -> Sequence[Node]:
        return tuple(self.inputs)

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        ts = np.concatenate([x.evaluate(env).ts for x in self.inputs])
        stamps, counts = np.unique(ts, return_counts=True)
        return NumericPoints(stamps.astype(np.int64), counts.astype(np.float64))


def _typed(s: Series, categorical: bool, node: str, env: EvalEnv) -> Series:
    """The input as the family the node was built for (NumericSeries or EnumSeries)."""
    return enum(s, node, env.categories) if categorical else numeric(s, node)


def _take(s: Series, ts: np.ndarray, index: slice | np.ndarray) -> Series:
    """The points of `s` at `index`, with the timestamps `ts`, numeric or enum alike."""
    if isinstance(s, EnumPoints):  # a log series (LogPoints) stays one
        return type(s)(ts, s.codes[index], s.categories)
    return NumericPoints(ts, s.values[index])


@dataclass
class ToStartOfInterval(SeriesNode):
    """`toStartOfInterval` of a numeric or an enum series: every point moved to the start of its
    epoch-aligned interval, floor(t / w) * w; points that land on one timestamp are all kept (Nominal
    leaves merging them to a later node: `aggregate`, `groupBy`). A snapped point is never later
    than its own timestamp and less than w earlier, so its output from `since` on is its input's
    points from `since` on, snapped (the reach: [t, t + w] of the input)."""

    input: SeriesNode
    width: int
    categorical: bool = False  # built as an EnumSeries
    lines: bool = False  # built as a LogSeries (when polled: builders/log_series.py)

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.width

    def reach(self) -> Reach:
        return Reach(ns=self.width, shift_ns=-self.width)

    def evaluate(self, env: EvalEnv) -> Series:
        return self._snap(self.input.evaluate(env), env)

    def evaluate_since(self, env: EvalEnv, since: int) -> Series:
        out: Series = cut(self._snap(self.input_since(self.input, env, since), env), since)
        return out

    def _snap(self, x: Series, env: EvalEnv) -> Series:
        s = (
            log_lines(x, "toStartOfInterval")
            if self.lines
            else _typed(x, self.categorical, "toStartOfInterval", env)
        )
        return _take(s, (s.ts // self.width) * self.width, slice(None))


@dataclass
class NthPoint(SeriesNode):
    """`nthPointDownsample` of a numeric or an enum series: every n-th point, counted from the
    window's first point (Nominal: "starting from the earliest"; a subscription's series starts at
    its window). Which points are kept moves as the window's start passes a point, so it has no
    reach: every micro-batch evaluates it whole (the contract's exact default)."""

    input: SeriesNode
    n: int
    window_ns: int
    categorical: bool = False  # built as an EnumSeries

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.window_ns

    def evaluate(self, env: EvalEnv) -> Series:
        s = _typed(self.input.evaluate(env), self.categorical, "nthPointDownsample", env)
        first = int(np.searchsorted(s.ts, env.window_start, side="left"))
        return _take(s, s.ts[first :: self.n], slice(first, None, self.n))


@dataclass
class ResampleForwardFill(SeriesNode):
    """`resampleV2`, and `resample` (v1) with forward fill, its default: a point at every
    epoch-aligned multiple of the interval from the first held point's timestamp rounded up to one,
    valued the newest input point at or before it (forward fill, no radius). `resampleV2`'s grid ends
    at the last point; v1's, as ForwardFillResampleInterpolationConfiguration's docs say, at the last
    point's timestamp rounded up too (`last_rounded_up`), so its last grid point may lie after the
    last input point. A new point adds grid points before its own timestamp: evaluated whole."""

    input: SeriesNode
    interval_ns: int
    window_ns: int
    last_rounded_up: bool = False  # v1

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.window_ns  # a grid point carries a value from arbitrarily far before it

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        s = numeric(self.input.evaluate(env), "resample" if self.last_rounded_up else "resampleV2")
        if not len(s.ts):
            return s
        iv = self.interval_ns
        first = -(-int(s.ts[0]) // iv) * iv  # the first multiple at or after the first point
        last = -(-int(s.ts[-1]) // iv) * iv if self.last_rounded_up else int(s.ts[-1])
        last = min(last, grid_end(env, iv))
        if last < first:
            return NumericPoints(s.ts[:0], s.values[:0])
        cost.check_grid((last - first) // iv + 1, f"resample every {human_duration(iv)}")
        grid = np.arange(first, last + 1, iv, dtype=np.int64)
        idx = np.searchsorted(s.ts, grid, side="right") - 1  # >= 0: grid[0] >= the first point
        return NumericPoints(grid, s.values[idx])


@dataclass
class SinceTime(PointByPoint):
    """`timeRangeFilter` with a start only, NumericSeries or (`categorical`) EnumSeries: the points at
    or after it (an end is refused: Nominal's TIME_RANGE_FILTER_WITH_FIXED_END)."""

    input: SeriesNode
    start_ns: int
    categorical: bool = False  # built as an EnumSeries

    def evaluate(self, env: EvalEnv) -> Series:
        return self.apply(_typed(self.input.evaluate(env), self.categorical, "timeRangeFilter", env))

    def evaluate_since(self, env: EvalEnv, since: int) -> Series:
        x = self.input_since(self.input, env, since)
        return self.apply(_typed(x, self.categorical, "timeRangeFilter", env))

    def apply(self, x: Series) -> Series:
        assert isinstance(x, NumericPoints | EnumPoints), "typed by evaluate"
        return x.since(self.start_ns)
