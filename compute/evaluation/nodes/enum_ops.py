"""Enum series nodes: a numeric series mapped to labels (`valueMap`), an enum series kept inside
ranges (`filterTransformation`), and duplicate-timestamp aggregation (`aggregate`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.base import EvalEnv, Node, RangeNode, SeriesNode, enum, numeric
from compute.evaluation.results import EnumPoints


@dataclass
class ValueMap(SeriesNode):
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

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> EnumPoints:
        s = numeric(self.input.evaluate(env), "valueMap")
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

    def evaluate(self, env: EvalEnv) -> EnumPoints:
        s = enum(self.input.evaluate(env), "filterTransformation", env.categories)
        r = self.filter.evaluate(env)
        # normalized ranges: the range a point might lie in is the last one starting at or before it
        i = np.searchsorted(r.starts, s.ts, side="right") - 1
        inside = (i >= 0) & (s.ts < r.ends[np.maximum(i, 0)]) if len(r) else np.zeros(len(s), bool)
        return EnumPoints(s.ts[inside], s.codes[inside], s.categories)


@dataclass
class EnumAggregateDuplicates(SeriesNode):
    """`aggregate` (AggregateEnumSeries): aggregates points sharing a timestamp. Sparkwire's store
    keeps one value per timestamp of a series (a later write replaces), and no enum node here makes
    duplicates, so every point passes unchanged."""

    input: SeriesNode

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> EnumPoints:
        return enum(self.input.evaluate(env), "aggregate", env.categories)
