"""Pointwise numeric nodes: unary maths, binary arithmetic (aligned by forward fill, a constant
broadcast), the threshold filter, and conditions (a `BooleanSeries` over one series' own points)
with the filter that keeps the points where one holds. IEEE semantics throughout: sqrt(-1) is NaN,
x/0 is +-inf, a comparison with NaN is false except `!=`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compute.evaluation.nodes.align import FFILL_RADIUS_NS, forward_fill
from compute.evaluation.nodes.base import EvalEnv, Node, Reach, SeriesNode, cut, numeric
from compute.evaluation.nodes.inputs import Constant
from compute.evaluation.results import NumericPoints

Unary = Callable[[np.ndarray], np.ndarray]
BinaryOp = Callable[[Any, Any], np.ndarray]  # arrays, or an array and a scalar

# The evaluators, keyed by the names in compute/evaluation/nominal_variants.py (UNARY_OPERATORS,
# BINARY_OPERATORS, ThresholdOperator); tests/unit/test_nominal_names.py checks the keys against them.
UNARY_OPS: dict[str, Unary] = {
    "abs": np.abs,
    "negate": np.negative,
    "sqrt": np.sqrt,
    "ln": np.log,
    "log10": np.log10,
}
BINARY_OPS: dict[str, BinaryOp] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
}
THRESHOLD_OPS: dict[str, BinaryOp] = {
    "GREATER_THAN": np.greater,
    "GREATER_THAN_OR_EQUAL_TO": np.greater_equal,
    "LESS_THAN": np.less,
    "LESS_THAN_OR_EQUAL_TO": np.less_equal,
    "EQUAL_TO": np.equal,
    "NOT_EQUAL_TO": np.not_equal,
}


def apply_unary(op: str, values: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(UNARY_OPS[op](values), np.float64)


def apply_binary(op: str, left: np.ndarray | np.float64, right: np.ndarray | np.float64) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(BINARY_OPS[op](left, right), np.float64)


@dataclass
class UnaryNode(SeriesNode):
    op: str
    x: SeriesNode

    def children(self) -> Sequence[Node]:
        return (self.x,)

    def reach(self) -> Reach:
        return Reach()

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._apply(self.x.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        return self._apply(self.input_since(self.x, env, since))

    def _apply(self, x: Any) -> NumericPoints:
        s = numeric(x, self.op)
        return NumericPoints(s.ts, apply_unary(self.op, s.values))


@dataclass
class BinaryNode(SeriesNode):
    op: str
    left: SeriesNode
    right: SeriesNode

    def children(self) -> Sequence[Node]:
        return (self.left, self.right)

    def own_lookback_ns(self) -> int:
        aligned = not isinstance(self.left, Constant) and not isinstance(self.right, Constant)
        return FFILL_RADIUS_NS if aligned else 0

    def reach(self) -> Reach:
        return Reach(ns=self.own_lookback_ns())  # forward fill reads up to its radius back

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._combine(lambda node: node.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        out: NumericPoints = cut(self._combine(lambda node: self.input_since(node, env, since)), since)
        return out

    def _combine(self, read: Callable[[SeriesNode], Any]) -> NumericPoints:
        if isinstance(self.left, Constant):
            r = numeric(read(self.right), self.op)
            return NumericPoints(r.ts, apply_binary(self.op, np.float64(self.left.value), r.values))
        if isinstance(self.right, Constant):
            lv = numeric(read(self.left), self.op)
            return NumericPoints(lv.ts, apply_binary(self.op, lv.values, np.float64(self.right.value)))
        left = numeric(read(self.left), self.op)
        right = numeric(read(self.right), self.op)
        ts, (a, b) = forward_fill([left, right])
        return NumericPoints(ts, apply_binary(self.op, a, b))


@dataclass
class ThresholdFilter(SeriesNode):
    """`thresholdFilter`: only the points whose value satisfies `value <operator> threshold`."""

    input: SeriesNode
    operator: str
    threshold: float

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach()

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._filter(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        return self._filter(self.input_since(self.input, env, since))

    def _filter(self, x: Any) -> NumericPoints:
        s = numeric(x, "thresholdFilter")
        keep = THRESHOLD_OPS[self.operator](s.values, self.threshold)
        return NumericPoints(s.ts[keep], s.values[keep])


class Condition(ABC):
    """A `BooleanSeries` whose numeric operands are constants or one and the same series: it holds
    or not at each of that series' points, so no alignment is involved."""

    @abstractmethod
    def holds(self, values: np.ndarray) -> np.ndarray:
        """One bool per value of the series."""


@dataclass
class Comparison(Condition):
    """`left <operator> right`, each side a constant or (None) the series' own value."""

    operator: str  # a ThresholdOperator
    left: float | None
    right: float | None

    def holds(self, values: np.ndarray) -> np.ndarray:
        a = values if self.left is None else np.float64(self.left)
        b = values if self.right is None else np.float64(self.right)
        return np.asarray(THRESHOLD_OPS[self.operator](a, b), bool) & np.ones(len(values), bool)


@dataclass
class BothHold(Condition):
    """`and`."""

    left: Condition
    right: Condition

    def holds(self, values: np.ndarray) -> np.ndarray:
        return self.left.holds(values) & self.right.holds(values)


@dataclass
class EitherHolds(Condition):
    """`or`."""

    left: Condition
    right: Condition

    def holds(self, values: np.ndarray) -> np.ndarray:
        return self.left.holds(values) | self.right.holds(values)


@dataclass
class FilterWhere(SeriesNode):
    """`filterWhere`: only the points of `input` at which `condition` (over `input` itself) holds."""

    input: SeriesNode
    condition: Condition

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach()

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._filter(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        return self._filter(self.input_since(self.input, env, since))

    def _filter(self, x: Any) -> NumericPoints:
        s = numeric(x, "filterWhere")
        keep = self.condition.holds(s.values)
        return NumericPoints(s.ts[keep], s.values[keep])
