"""Enum series nodes: a numeric series mapped to labels (`valueMap`), an enum series kept inside
ranges (`filterTransformation`), duplicate-timestamp aggregation (`aggregate`), resampling onto an
epoch-aligned grid (`resample`, `resampleV2`) and the union of several series (`union`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation import cost
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import (
    EvalEnv,
    Node,
    PointByPoint,
    RangeNode,
    Reach,
    Series,
    SeriesNode,
    enum,
    grid_end,
    log_lines,
    numeric,
)
from compute.evaluation.results import EnumPoints, LogPoints, Ranges


@dataclass
class ValueMap(PointByPoint):
    """`valueMap`: each point's value looked up in value ranges [lower, upper) (the compiler has
    resolved open bounds and checked they ascend without overlapping) and replaced by that range's
    label; a value no range captures (NaN included) takes `default`, or is dropped without one.
    The labels are numbered in the mapping's order, `default` after them."""

    input: SeriesNode
    lowers: list[float]
    uppers: list[float]
    labels: list[int]  # per range: index into `categories`
    categories: list[str]
    default: int | None

    def apply(self, x: Series) -> EnumPoints:
        s = numeric(x, "valueMap")
        codes = np.full(len(s), -1, np.int32)
        for lower, upper, label in zip(self.lowers, self.uppers, self.labels, strict=True):
            hit = (codes < 0) & (s.values >= lower) & (s.values < upper)  # the first capturing range
            codes[hit] = label
        if self.default is not None:
            codes[codes < 0] = self.default
        keep = codes >= 0
        return EnumPoints(s.ts[keep], codes[keep], self.categories)


@dataclass
class EnumFilterTransformation(SeriesNode):
    """`filterTransformation` of an enum series: its points whose timestamp lies inside one of the
    filter's ranges (start inclusive, end exclusive, an open end reaching on)."""

    input: SeriesNode
    filter: RangeNode

    def children(self) -> Sequence[Node]:
        return (self.input, self.filter)

    def reach(self) -> Reach:
        return Reach()  # a point and the ranges holding its timestamp

    def evaluate(self, env: EvalEnv) -> EnumPoints:
        return self._apply(self.input.evaluate(env), self.filter.evaluate(env), env)

    def evaluate_since(self, env: EvalEnv, since: int) -> EnumPoints:
        x, r = self.input_since(self.input, env, since), self.input_since(self.filter, env, since)
        return self._apply(x, r, env)

    def _apply(self, x: Series, r: Ranges, env: EvalEnv) -> EnumPoints:
        s = enum(x, "filterTransformation", env.categories)
        # normalized ranges: the range a point might lie in is the last one starting at or before it
        i = np.searchsorted(r.starts, s.ts, side="right") - 1
        inside = (i >= 0) & (s.ts < r.ends[np.maximum(i, 0)]) if len(r) else np.zeros(len(s), bool)
        return EnumPoints(s.ts[inside], s.codes[inside], s.categories)


def label_ranks(categories: list[str]) -> np.ndarray:
    """Per code, its label's rank in string order (by code point): Nominal's "String MAX / MIN"."""
    return np.argsort(np.argsort(np.asarray(categories or [""], dtype=object), kind="stable"), kind="stable")


@dataclass
class EnumAggregateDuplicates(PointByPoint):
    """`aggregate` (AggregateEnumSeries) and `enumAggregation` over the current tags and timestamps:
    the points sharing a timestamp become one, MAX keeping the label that sorts last (by code
    point), MIN the first. A channel holds one value per timestamp (a later write replaces);
    duplicates come from nodes such as `toStartOfInterval`. A timestamp's output depends on its
    own points only (reach 0)."""

    input: SeriesNode
    function: str  # MIN or MAX

    def apply(self, x: Series) -> EnumPoints:
        s = enum(x, "aggregate", [])
        if len(s) < 2 or not (s.ts[1:] == s.ts[:-1]).any():
            return s
        order = np.lexsort((label_ranks(s.categories)[s.codes], s.ts))  # by time, then by label
        ts, codes = s.ts[order], s.codes[order]
        new = np.r_[True, ts[1:] != ts[:-1]]  # the first of each timestamp's run
        keep = np.r_[new[1:], True] if self.function == "MAX" else new
        return EnumPoints(ts[keep], codes[keep], s.categories)


@dataclass
class EnumResample(SeriesNode):
    """`resample` (forward fill) / `resampleV2`: a point at every multiple of `interval_ns` (since the
    epoch) from the first input point's timestamp rounded up to one, through the last's rounded up
    but not past the clock (`grid_end`), each taking the label of the newest input point at or
    before it. Its first grid point in the window needs the point before it: that much history is
    declared, one interval. A grid over `max_resample_points` is refused (compute/evaluation/cost.py)."""

    input: SeriesNode
    interval_ns: int

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.interval_ns

    def evaluate(self, env: EvalEnv) -> EnumPoints:
        s = enum(self.input.evaluate(env), "resample", env.categories)
        if not len(s):
            return s
        step = self.interval_ns
        first = -(-int(s.ts[0]) // step) * step
        last = min(-(-int(s.ts[-1]) // step) * step, grid_end(env, step))
        if last < first:
            return EnumPoints(s.ts[:0], s.codes[:0], s.categories)
        count = (last - first) // step + 1
        cost.check_grid(count, f"resample every {human_duration(step)}")
        grid = first + step * np.arange(count, dtype=np.int64)
        at = np.searchsorted(s.ts, grid, side="right") - 1  # >= 0: grid[0] >= the first point
        return EnumPoints(grid, s.codes[at], s.categories)


@dataclass
class EnumUnion(SeriesNode):
    """`union`: every input's points in one series; where several share a timestamp, MAX keeps the
    label that sorts last (by code point), MIN the one that sorts first, THROW refuses the
    computation (InvalidComputation, at evaluation). A LogSeries `union` (`lines`, built when
    polled) has one operation, KEEP_ALL: every line of every input, in time order (lines sharing a
    timestamp in the order of the inputs)."""

    inputs: list[SeriesNode]
    operation: str  # THROW, MAX, MIN; KEEP_ALL for log lines
    lines: bool = False

    def children(self) -> Sequence[Node]:
        return self.inputs

    def _lines(self, env: EvalEnv) -> LogPoints:
        series = [log_lines(x.evaluate(env), "union") for x in self.inputs]
        index: dict[str, int] = {}
        ts_parts, code_parts = [], []
        for s in series:  # one numbering of every input's lines
            recode = np.array([index.setdefault(c, len(index)) for c in s.categories] or [0], np.int32)
            ts_parts.append(s.ts)
            code_parts.append(recode[s.codes] if len(s) else np.empty(0, np.int32))
        ts = np.concatenate(ts_parts).astype(np.int64)
        codes = np.concatenate(code_parts).astype(np.int32)
        order = np.argsort(ts, kind="stable")
        return LogPoints(ts[order], codes[order], list(index))

    def evaluate(self, env: EvalEnv) -> EnumPoints:
        if self.lines:
            return self._lines(env)
        series = [enum(x.evaluate(env), "union", env.categories) for x in self.inputs]
        categories: list[str] = []
        index: dict[str, int] = {}
        ts_parts, code_parts = [], []
        for s in series:  # one numbering of every input's labels
            recode = np.array([index.setdefault(c, len(index)) for c in s.categories] or [0], np.int32)
            ts_parts.append(s.ts)
            code_parts.append(recode[s.codes] if len(s) else np.empty(0, np.int32))
        categories = list(index)
        ts, codes = np.concatenate(ts_parts), np.concatenate(code_parts).astype(np.int32)
        if not len(ts):
            return EnumPoints(ts.astype(np.int64), codes, categories)
        order = np.lexsort((label_ranks(categories)[codes], ts))  # by time, then by label
        ts, codes = ts[order], codes[order]
        dup = ts[1:] == ts[:-1]
        if dup.any():
            if self.operation == "THROW":
                raise ComputeError(
                    "InvalidComputation",
                    f"union with THROW: {int(dup.sum())} points share a timestamp with another input's",
                    {"invalidTypes": "", "variant": "union", "field": "operation"},
                )
            # MAX: the last of each timestamp's run (largest label); MIN: the first
            keep = np.r_[~dup, True] if self.operation == "MAX" else np.r_[True, ~dup]
            ts, codes = ts[keep], codes[keep]
        return EnumPoints(ts, codes, categories)
