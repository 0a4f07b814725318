"""Nodes that combine or pick points rather than compute values: `union` (the points of several
series in one), `selectNewestPoints` / `selectOldestPoints` (the last / first N points)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.base import EvalEnv, Node, SeriesNode, numeric
from compute.evaluation.results import NumericPoints

# `NumericUnionOperation` (deprecated, still sent): how points sharing a timestamp become one.
UNION_REDUCERS: dict[str, str] = {
    "MIN": "min",
    "MAX": "max",
    "MEAN": "mean",
    "SUM": "sum",
    "COUNT": "count",
    "STANDARD_DEVIATION": "std",
    "ROOT_MEAN_SQUARE": "rms",
}


def _reduce_runs(ts: np.ndarray, values: np.ndarray, how: str) -> NumericPoints:
    """One point per distinct timestamp of a sorted series: the reduction of its run of values."""
    if not len(ts):
        return NumericPoints(ts, values)
    starts = np.flatnonzero(np.r_[True, ts[1:] != ts[:-1]])
    counts = np.diff(np.r_[starts, len(ts)]).astype(np.float64)
    with np.errstate(all="ignore"):
        if how == "min":
            out = np.minimum.reduceat(values, starts)
        elif how == "max":
            out = np.maximum.reduceat(values, starts)
        elif how == "sum":
            out = np.add.reduceat(values, starts)
        elif how == "mean":
            out = np.add.reduceat(values, starts) / counts
        elif how == "count":
            out = counts
        elif how == "rms":
            out = np.sqrt(np.add.reduceat(values * values, starts) / counts)
        elif how == "std":  # population, as numericAggregation's standardDeviation
            mean = np.add.reduceat(values, starts) / counts
            d = values - np.repeat(mean, counts.astype(np.int64))
            out = np.sqrt(np.add.reduceat(d * d, starts) / counts)
        else:
            raise ValueError(how)
    return NumericPoints(ts[starts], np.asarray(out, np.float64))


@dataclass
class Union(SeriesNode):
    """Every point of every input. Without an operation points sharing a timestamp are all kept
    (SQL UNION ALL), in the order of the inputs; with one they become one point."""

    inputs: list[SeriesNode]
    reducer: str | None = None  # a value of UNION_REDUCERS

    def children(self) -> Sequence[Node]:
        return tuple(self.inputs)

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        parts = [numeric(x.evaluate(env), "union") for x in self.inputs]
        ts = np.concatenate([p.ts for p in parts]) if parts else np.empty(0, np.int64)
        values = np.concatenate([p.values for p in parts]) if parts else np.empty(0, np.float64)
        order = np.argsort(ts, kind="stable")  # ties keep the inputs' order
        ts, values = ts[order], values[order]
        if self.reducer is None:
            return NumericPoints(ts, values)
        return _reduce_runs(ts, values, self.reducer)


@dataclass
class SelectPoints(SeriesNode):
    """`selectNewestPoints` / `selectOldestPoints`: the N points with the latest / earliest
    timestamps within the window. Which points those are depends on every point of the window
    (a new point pushes the oldest of the N out; the window sliding brings a new one in), so the
    node declares the whole window as its lookback and is evaluated over it whole."""

    input: SeriesNode
    count: int
    newest: bool
    window_ns: int

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        return self.window_ns

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        s = numeric(self.input.evaluate(env), "selectNewestPoints" if self.newest else "selectOldestPoints")
        first = int(np.searchsorted(s.ts, env.window_start, side="left"))
        ts, values = s.ts[first:], s.values[first:]
        if self.newest:
            start = max(len(ts) - self.count, 0)
            return NumericPoints(ts[start:], values[start:])
        return NumericPoints(ts[: self.count], values[: self.count])
