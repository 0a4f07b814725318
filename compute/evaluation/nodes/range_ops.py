"""Range nodes over other ranges or over several aligned series: duration filters, padding, the
equality of several series, and stability detection.

Every node keeps the range conventions of nodes/ranges.py: normalized ranges, `end` exclusive,
OPEN_END while the condition still holds at the newest point, NO_START for a range that began
before anything the computation holds. A range whose condition began before the held history (the
window plus the plan's lookback) starts at its first held point, as for every range node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.align import FFILL_RADIUS_NS, forward_fill
from compute.evaluation.nodes.arithmetic import THRESHOLD_OPS
from compute.evaluation.nodes.base import EvalEnv, Node, RangeNode, SeriesNode, enum, numeric
from compute.evaluation.nodes.inputs import EnumConstant
from compute.evaluation.nodes.ranges import condition_ranges, coverage
from compute.evaluation.nodes.rolling import rolling
from compute.evaluation.results import INT64_MAX, INT64_MIN, NO_START, OPEN_END, NumericPoints, Ranges


@dataclass
class DurationFilter(RangeNode):
    """`durationFilter` / `durationFilterV2`: the input ranges whose duration `<operator>` the
    threshold. A range without a start or an end is infinitely long (UnboundedBehavior INFINITY),
    or (`window_bound`, WINDOW_BOUND) measured to the window's edge as of this evaluation: a missing
    start from the window's start, a missing end to `now`, so an open range's length grows with each
    update (the node has no reach: it is evaluated whole every micro-batch).
    A kept range ending in the window may have started up to `duration_ns` before it, so that much
    history is needed to measure it."""

    input: RangeNode
    operator: str  # a ThresholdOperator
    duration_ns: int
    window_bound: bool = False

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return max(self.duration_ns, 0)

    def evaluate(self, env: EvalEnv) -> Ranges:
        r = self.input.evaluate(env)
        if self.window_bound:
            starts = np.where(r.starts == NO_START, env.window_start, r.starts)
            ends = np.where(r.ends == OPEN_END, np.maximum(env.now, starts), r.ends)
            lengths = (ends - starts).astype(np.float64)
        else:
            unbounded = (r.starts == NO_START) | (r.ends == OPEN_END)
            lengths = np.where(unbounded, np.inf, (r.ends - r.starts).astype(np.float64))
        keep = THRESHOLD_OPS[self.operator](lengths, float(self.duration_ns))
        return Ranges(r.starts[keep], r.ends[keep])


@dataclass
class PaddedRanges(RangeNode):
    """`paddedRanges` / `paddedRangesV2`: every range widened by `padding_ns` at its start, its end
    or both, then overlapping ranges joined. An open end stays open and a missing start missing. A
    change of the input at t reaches back to t - `padding_ns` (a start padded earlier), and a range
    that ended up to `padding_ns` before the window reaches into it once its end is padded."""

    input: RangeNode
    padding_ns: int  # >= 0, the compiler refuses a negative padding
    pad_start: bool
    pad_end: bool

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.padding_ns

    def evaluate(self, env: EvalEnv) -> Ranges:
        r = self.input.evaluate(env)
        p = np.int64(self.padding_ns)
        starts, ends = r.starts, r.ends
        if self.pad_start:  # saturating: a start before int64's first instant has no start at all
            starts = np.where(starts < INT64_MIN + p, NO_START, starts - p)
        if self.pad_end:
            ends = np.where(ends > INT64_MAX - p, OPEN_END, ends + p)
        return coverage([Ranges(starts.astype(np.int64), ends.astype(np.int64))], need=1)


@dataclass
class SeriesEquality(RangeNode):
    """`seriesEqualityRangesNode` / `numericEqualityRangesV2` (numeric inputs) and
    `enumSeriesEqualityRangesNode` / `categoricalEqualityRangesV2` (enum inputs): where all inputs
    are equal (ALL_EQUAL) or not all equal (NOT_ALL_EQUAL). The inputs are aligned as arithmetic
    aligns them (forward fill, 1 s radius): a timestamp where some input has no value within the
    radius is no point of the condition. Numeric inputs are equal while their spread (max - min)
    is at most `tolerance`; a NaN is equal to nothing. Enum inputs compare their labels."""

    inputs: list[SeriesNode]
    all_equal: bool
    categorical: bool
    tolerance: float = 0.0

    def children(self) -> Sequence[Node]:
        return self.inputs

    def own_lookback_ns(self) -> int:
        return FFILL_RADIUS_NS

    def _aligned(self, env: EvalEnv) -> tuple[np.ndarray, list[np.ndarray]]:
        name = "categoricalEqualityRanges" if self.categorical else "numericEqualityRanges"
        if not self.categorical:
            return forward_fill([numeric(x.evaluate(env), name) for x in self.inputs])
        series = [
            enum(x.evaluate(env), name, env.categories)
            for x in self.inputs
            if not isinstance(x, EnumConstant)
        ]
        labels: dict[str, int] = {}  # one numbering of every input's labels, so codes compare
        as_numbers = []
        for s in series:
            recode = np.array([labels.setdefault(c, len(labels)) for c in s.categories] or [0], np.float64)
            as_numbers.append(NumericPoints(s.ts, recode[s.codes] if len(s.codes) else np.empty(0)))
        ts, aligned = forward_fill(as_numbers)
        # a constant label (selectCategoricalProperty) stands at every aligned timestamp
        constants = [
            float(labels.setdefault(x.label, len(labels))) for x in self.inputs if isinstance(x, EnumConstant)
        ]
        return ts, list(aligned) + [np.full(len(ts), code) for code in constants]

    def evaluate(self, env: EvalEnv) -> Ranges:
        ts, values = self._aligned(env)
        stacked = np.vstack(values) if len(ts) else np.empty((len(values), 0))
        with np.errstate(invalid="ignore"):
            spread = stacked.max(axis=0) - stacked.min(axis=0) if len(ts) else np.empty(0)
        equal = spread <= self.tolerance  # NaN spread: not equal
        return condition_ranges(ts, equal if self.all_equal else ~equal)


@dataclass
class StabilityDetection(RangeNode):
    """`stabilityDetection` / `stabilityDetectionV2`: where the input is stable. At every point t,
    over the points in (t - window, t] (the point itself included): stable when there are at least
    `min_points` of them and the value lies within `threshold` of both their min and their max. A
    percentage threshold is that percentage of the absolute mean of the same points."""

    input: SeriesNode
    window_ns: int
    min_points: int
    threshold: float
    percentage: bool

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.window_ns

    def evaluate(self, env: EvalEnv) -> Ranges:
        s = numeric(self.input.evaluate(env), "stabilityDetection")
        if not len(s):
            return Ranges.empty()
        v = s.values
        lo, hi = rolling("min", v, s.ts, self.window_ns), rolling("max", v, s.ts, self.window_ns)
        count = rolling("count", v, s.ts, self.window_ns)
        limit = self.threshold
        if self.percentage:
            limit = np.abs(rolling("average", v, s.ts, self.window_ns)) * (self.threshold / 100.0)
        with np.errstate(invalid="ignore"):
            stable = (count >= self.min_points) & (v - lo <= limit) & (hi - v <= limit)
        return condition_ranges(s.ts, stable)
