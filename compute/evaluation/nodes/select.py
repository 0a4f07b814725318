"""Nodes that keep some of a series' points or replace its values by facts about its points:
`dropNan`, `approximateFilter`, `timeDifference`, `absoluteTimestamp`, and `enumToNumeric` (an enum
series' categories mapped to numbers)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.base import (
    EvalEnv,
    Node,
    PointByPoint,
    Reach,
    Series,
    SeriesNode,
    cut,
    enum,
    numeric,
)
from compute.evaluation.results import NumericPoints


@dataclass
class DropNan(PointByPoint):
    """The points whose value is not NaN (infinities stay)."""

    input: SeriesNode

    def apply(self, x: Series) -> NumericPoints:
        s = numeric(x, "dropNan")
        keep = ~np.isnan(s.values)
        return NumericPoints(s.ts[keep], s.values[keep])


@dataclass
class ApproximateFilter(PointByPoint):
    """EQUAL_TO keeps the points with |value - threshold| <= tolerance; NOT_EQUAL_TO the others
    (a NaN value is equal to nothing, so only NOT_EQUAL_TO keeps it)."""

    input: SeriesNode
    threshold: float
    tolerance: float
    not_equal: bool

    def apply(self, x: Series) -> NumericPoints:
        s = numeric(x, "approximateFilter")
        with np.errstate(all="ignore"):
            near = np.abs(s.values - self.threshold) <= self.tolerance
        keep = ~near if self.not_equal else near
        return NumericPoints(s.ts[keep], s.values[keep])


@dataclass
class TimeDifference(SeriesNode):
    """For every point after the first (numeric or enum): the time since the previous point, in
    the time unit. Like derivative, the first held point has no predecessor."""

    input: SeriesNode
    unit_ns: int

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach(points=1)  # the point before

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._apply(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        out: NumericPoints = cut(self._apply(self.input_since(self.input, env, since)), since)
        return out

    def _apply(self, s: Series) -> NumericPoints:
        return NumericPoints(s.ts[1:], np.diff(s.ts) / self.unit_ns)


@dataclass
class AbsoluteTimestamp(PointByPoint):
    """Every point's value replaced by its own timestamp (since the Unix epoch) in the time unit."""

    input: SeriesNode
    unit_ns: int

    def apply(self, s: Series) -> NumericPoints:
        return NumericPoints(s.ts, s.ts / self.unit_ns)


@dataclass
class EnumToNumeric(SeriesNode):
    """Each enum point's category mapped to its number; a category without one takes the default,
    or (no default) its point is dropped."""

    input: SeriesNode
    mapping: dict[str, float]
    default: float | None

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach()

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._apply(self.input.evaluate(env), env)

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        return self._apply(self.input_since(self.input, env, since), env)

    def _apply(self, x: Series, env: EvalEnv) -> NumericPoints:
        s = enum(x, "enumToNumeric", env.categories)
        fallback = np.nan if self.default is None else self.default
        table = np.array([self.mapping.get(c, fallback) for c in s.categories] + [fallback], np.float64)
        mapped = np.array([c in self.mapping for c in s.categories] + [False], bool)
        codes = s.codes.astype(np.int64)
        keep = mapped[codes] | (self.default is not None)
        return NumericPoints(s.ts[keep], table[codes[keep]])
