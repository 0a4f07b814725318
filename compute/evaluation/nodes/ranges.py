"""Range nodes. A range starts at the first point that meets the condition and ends (exclusive) at
the first later point that does not; a range still true at the newest point is open. Set operations
(not, intersect, union) work on normalized ranges: sorted, never overlapping nor adjacent."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.arithmetic import THRESHOLD_OPS, Condition
from compute.evaluation.nodes.base import EvalEnv, Node, RangeNode, Reach, Series, SeriesNode, enum, numeric
from compute.evaluation.results import NO_START, OPEN_END, Ranges

# MinMaxThresholdOperator -> where `value` meets it, given (value, lower, upper); keyed by the names in
# nominal_variants' ENUMS, which tests/unit/test_nominal_names.py checks.
MIN_MAX_OPS: dict[str, Callable[[np.ndarray, float, float], np.ndarray]] = {
    "OUTSIDE_BOUNDS": lambda v, lo, hi: (v < lo) | (v > hi),
    "OUTSIDE_OR_EQUAL_TO_BOUNDS": lambda v, lo, hi: (v <= lo) | (v >= hi),
    "INSIDE_BOUNDS": lambda v, lo, hi: (v > lo) & (v < hi),
    "INSIDE_OR_EQUAL_TO_BOUNDS": lambda v, lo, hi: (v >= lo) & (v <= hi),
}


_OPEN = np.array([OPEN_END], np.int64)  # the end of a range still true at the newest point


def condition_ranges(ts: np.ndarray, cond: np.ndarray) -> Ranges:
    prev = np.zeros(len(cond), bool)  # the condition at the point before (np.r_ costs ~10 us)
    prev[1:] = cond[:-1]
    starts = ts[cond & ~prev]
    ends = ts[~cond & prev]
    if len(ends) < len(starts):
        ends = np.concatenate((ends, _OPEN))  # (np.append's wrapper costs more than the work here)
    return Ranges(starts.astype(np.int64, copy=False), ends.astype(np.int64, copy=False))


def coverage(inputs: Sequence[Ranges], need: int) -> Ranges:
    """Where at least `need` of the inputs hold: need=1 is the union, need=len(inputs) the
    intersection. Every start counts +1 and every end -1; runs of enough coverage are the result."""
    starts = np.concatenate([r.starts for r in inputs]) if inputs else np.empty(0, np.int64)
    ends = np.concatenate([r.ends for r in inputs]) if inputs else np.empty(0, np.int64)
    if not len(starts):
        return Ranges.empty()
    events = np.r_[starts, ends]
    order = np.argsort(events, kind="stable")
    events = events[order]
    steps = np.r_[np.ones(len(starts), np.int64), -np.ones(len(ends), np.int64)][order]
    last_at_time = np.r_[events[1:] != events[:-1], True]  # coverage after every event at a time
    times = events[last_at_time]
    ok = np.cumsum(steps)[last_at_time] >= need  # coverage on [times[i], times[i + 1])
    prev = np.r_[False, ok[:-1]]
    return Ranges(times[ok & ~prev], times[~ok & prev])


def complement(r: Ranges) -> Ranges:
    gap_starts = np.r_[NO_START, r.ends].astype(np.int64)
    gap_ends = np.r_[r.starts, OPEN_END].astype(np.int64)
    keep = gap_starts < gap_ends
    return Ranges(gap_starts[keep], gap_ends[keep])


@dataclass
class Threshold(RangeNode):
    """`value <operator> threshold`. A tolerance (thresholdRangesV2's eq / ne) widens EQUAL_TO to
    |value - threshold| <= tolerance; NOT_EQUAL_TO is its negation (NaN is never equal)."""

    input: SeriesNode
    operator: str
    threshold: float
    tolerance: float = 0.0

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach(points=1)  # the point before: whether a range is open there

    def evaluate(self, env: EvalEnv) -> Ranges:
        return self._ranges(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> Ranges:
        return self._ranges(self.input_since(self.input, env, since)).clip(since)

    def _ranges(self, x: Series) -> Ranges:
        s = numeric(x, "threshold")
        if self.tolerance and self.operator in ("EQUAL_TO", "NOT_EQUAL_TO"):
            with np.errstate(all="ignore"):  # inf - inf is NaN: equal infinities stay equal below
                near = (s.values == self.threshold) | (np.abs(s.values - self.threshold) <= self.tolerance)
            return condition_ranges(s.ts, near if self.operator == "EQUAL_TO" else ~near)
        return condition_ranges(s.ts, THRESHOLD_OPS[self.operator](s.values, self.threshold))


@dataclass
class ConditionRanges(RangeNode):
    """`booleanRanges`: where a condition over one series' own points holds."""

    input: SeriesNode
    condition: Condition

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach(points=1)

    def evaluate(self, env: EvalEnv) -> Ranges:
        return self._ranges(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> Ranges:
        return self._ranges(self.input_since(self.input, env, since)).clip(since)

    def _ranges(self, x: Series) -> Ranges:
        s = numeric(x, "booleanRanges")
        return condition_ranges(s.ts, self.condition.holds(s.values))


@dataclass
class MinMaxThreshold(RangeNode):
    input: SeriesNode
    operator: str
    lower: float
    upper: float

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach(points=1)

    def evaluate(self, env: EvalEnv) -> Ranges:
        return self._ranges(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> Ranges:
        return self._ranges(self.input_since(self.input, env, since)).clip(since)

    def _ranges(self, x: Series) -> Ranges:
        s = numeric(x, "minMaxThreshold")
        return condition_ranges(s.ts, MIN_MAX_OPS[self.operator](s.values, self.lower, self.upper))


@dataclass
class EnumFilter(RangeNode):
    """IS_IN / IS_NOT_IN over an enum series' categories (`enumFilter`, `categoryFilterRangesV2`)."""

    input: SeriesNode
    values: frozenset[str]
    negate: bool  # IS_NOT_IN

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach(points=1)

    def evaluate(self, env: EvalEnv) -> Ranges:
        return self._ranges(self.input.evaluate(env), env)

    def evaluate_since(self, env: EvalEnv, since: int) -> Ranges:
        return self._ranges(self.input_since(self.input, env, since), env).clip(since)

    def _ranges(self, x: Series, env: EvalEnv) -> Ranges:
        s = enum(x, "enumFilter", env.categories)
        wanted = [i for i, c in enumerate(s.categories) if c in self.values]
        cond = np.isin(s.codes, np.asarray(wanted, np.int32))
        return condition_ranges(s.ts, ~cond if self.negate else cond)


@dataclass
class NotRanges(RangeNode):
    input: RangeNode

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach()

    def evaluate(self, env: EvalEnv) -> Ranges:
        return complement(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> Ranges:
        return complement(self.input.evaluate_since(env, since)).clip(since)


@dataclass
class IntersectRanges(RangeNode):
    inputs: list[RangeNode]

    def children(self) -> Sequence[Node]:
        return self.inputs

    def reach(self) -> Reach:
        return Reach()

    def evaluate(self, env: EvalEnv) -> Ranges:
        return coverage([r.evaluate(env) for r in self.inputs], need=len(self.inputs))

    def evaluate_since(self, env: EvalEnv, since: int) -> Ranges:
        parts = [r.evaluate_since(env, since) for r in self.inputs]
        return coverage(parts, need=len(self.inputs)).clip(since)


@dataclass
class UnionRanges(RangeNode):
    inputs: list[RangeNode]

    def children(self) -> Sequence[Node]:
        return self.inputs

    def reach(self) -> Reach:
        return Reach()

    def evaluate(self, env: EvalEnv) -> Ranges:
        return coverage([r.evaluate(env) for r in self.inputs], need=1)

    def evaluate_since(self, env: EvalEnv, since: int) -> Ranges:
        return coverage([r.evaluate_since(env, since) for r in self.inputs], need=1).clip(since)
