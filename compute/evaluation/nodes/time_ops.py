"""Nodes over consecutive points and time: derivative, valueDifference, timeShift (numeric or enum).

`derivative` and `valueDifference` emit one point per input point after the first, at that point's
timestamp; the first held point has no predecessor, so near the start of the held history (the
window plus the plan's lookback) a point can lack its value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.base import EvalEnv, Node, Reach, Series, SeriesNode, cut, numeric
from compute.evaluation.nominal_variants import TIME_UNIT_NANOS
from compute.evaluation.results import INT64_MAX, INT64_MIN, EnumPoints, NumericPoints


def _negatives(ts: np.ndarray, values: np.ndarray, mode: str) -> NumericPoints:
    if mode == "setNegativeValuesToZero":
        return NumericPoints(ts, np.where(values < 0, 0.0, values))
    if mode == "excludeNegativeValues":
        keep = ~(values < 0)
        return NumericPoints(ts[keep], values[keep])
    return NumericPoints(ts, values)


@dataclass
class Derivative(SeriesNode):
    input: SeriesNode
    unit_ns: int = TIME_UNIT_NANOS["SECONDS"]  # the compiler passes the TimeUnit's length
    negatives: str = "allowNegativeValues"

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach(points=1)  # the point before

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._rate(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        out: NumericPoints = cut(self._rate(self.input_since(self.input, env, since)), since)
        return out

    def _rate(self, x: Series) -> NumericPoints:
        s = numeric(x, "derivative")
        dt = np.diff(s.ts) / self.unit_ns  # timestamps are unique: dt > 0
        with np.errstate(all="ignore"):
            rate = np.diff(s.values) / dt
        return _negatives(s.ts[1:], rate, self.negatives)


@dataclass
class ValueDifference(SeriesNode):
    input: SeriesNode
    negatives: str = "allowNegativeValues"

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach(points=1)  # the point before

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._difference(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        out: NumericPoints = cut(self._difference(self.input_since(self.input, env, since)), since)
        return out

    def _difference(self, x: Series) -> NumericPoints:
        s = numeric(x, "valueDifference")
        with np.errstate(all="ignore"):
            diff = np.diff(s.values)
        return _negatives(s.ts[1:], diff, self.negatives)


@dataclass
class TimeShift(SeriesNode):
    """Every point, numeric or enum, moves by `shift_ns` (negative: earlier). A positive shift needs
    that much history. A point that the shift would carry outside int64 nanoseconds (before 1677 or
    after 2262) cannot be represented and is left out rather than wrapped around."""

    input: SeriesNode
    shift_ns: int  # the compiler keeps |shift_ns| <= INT64_MAX

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return max(self.shift_ns, 0)

    def reach(self) -> Reach:
        return Reach(shift_ns=self.shift_ns)

    def evaluate(self, env: EvalEnv) -> Series:
        return self._shift(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> Series:
        out: Series = cut(self._shift(self.input_since(self.input, env, since)), since)
        return out

    def _shift(self, s: Series) -> Series:  # its builder already checked numeric or enum
        shift = self.shift_ns
        if shift > 0:
            keep = s.ts < INT64_MAX - shift
        elif shift < 0:
            keep = s.ts > INT64_MIN - shift
        else:
            return s
        ts = s.ts[keep] + np.int64(shift)
        if isinstance(s, EnumPoints):  # a log series (LogPoints) stays one
            return type(s)(ts, s.codes[keep], s.categories)
        return NumericPoints(ts, s.values[keep])
