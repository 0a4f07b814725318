"""`numericAggregation` with `rollingTime`: for each input point at t, an aggregate of the points in
(t - window, t].

Each output depends only on the points in its own window, summed left to right: the value at a
timestamp does not change when older history is trimmed, so appends stay small and a fresh
computation gives the same bits. The loop runs over window positions (at most the largest window's
point count), each step vectorized over every output point still inside its window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compute.nodes.base import EvalEnv, Node, SeriesNode, numeric
from compute.results import EnumPoints, NumericPoints

OPERATORS = ("sum", "average", "min", "max", "count", "standardDeviation", "rootMeanSquare")

Step = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _fold(
    values: np.ndarray,
    starts: np.ndarray,
    counts: np.ndarray,
    init: float,
    step: Step,
    center: np.ndarray | None = None,
) -> np.ndarray:
    """acc_i = step(...step(step(init, v[s_i]), v[s_i + 1])..., v[s_i + c_i - 1]) for every row i;
    with `center`, each v is first replaced by (v - center_i)^2."""
    order = np.argsort(-counts, kind="stable")  # rows still active at step j form a prefix
    s_sorted, c_sorted = starts[order], counts[order]
    c_center = center[order] if center is not None else None
    acc = np.full(len(starts), init, np.float64)
    for j in range(int(c_sorted[0]) if len(c_sorted) else 0):
        active = int(np.searchsorted(-c_sorted, -j, side="left"))  # rows with count > j
        v = values[s_sorted[:active] + j]
        if c_center is not None:
            v = v - c_center[:active]
            v = v * v
        acc[:active] = step(acc[:active], v)
    out = np.empty_like(acc)
    out[order] = acc
    return out


def _sum(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    return _fold(values, starts, counts, 0.0, np.add)


def rolling(op: str, values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    n = counts.astype(np.float64)
    with np.errstate(all="ignore"):
        if op == "count":
            return n
        if op == "sum":
            return _sum(values, starts, counts)
        if op == "average":
            return _sum(values, starts, counts) / n
        if op == "min":
            return _fold(values, starts, counts, np.inf, np.minimum)
        if op == "max":
            return _fold(values, starts, counts, -np.inf, np.maximum)
        if op == "rootMeanSquare":
            return np.sqrt(_sum(values * values, starts, counts) / n)
        if op == "standardDeviation":  # population, two passes for accuracy
            mean = _sum(values, starts, counts) / n
            return np.sqrt(_fold(values, starts, counts, 0.0, np.add, center=mean) / n)
    raise ValueError(op)


@dataclass
class RollingAggregation(SeriesNode):
    input: SeriesNode
    window_ns: int
    operator: str

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.window_ns

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        s = self.input.evaluate(env)
        if isinstance(s, EnumPoints) and self.operator != "count":
            s = numeric(s, f"numericAggregation {self.operator}")  # refuses
        if not len(s.ts):
            return NumericPoints(s.ts, np.empty(0, np.float64))
        starts = np.searchsorted(s.ts, s.ts - self.window_ns, side="right")
        counts = np.arange(len(s.ts)) - starts + 1
        values = s.values if isinstance(s, NumericPoints) else np.zeros(len(s.ts))
        return NumericPoints(s.ts, rolling(self.operator, values, starts, counts))
