"""`numericAggregation` with `rollingTime`: for each input point at t, an aggregate of the points in
(t - D, t].

Time is cut into epoch-aligned blocks of width D. The window of a point in block b is a prefix of
block b (up to the point) plus a suffix of block b-1 (after t - D). Prefixes and suffixes are
accumulated inside each block only, so every output depends on nothing but the points in its own
window: trimming older history changes no bit of it, appends stay small, and a fresh computation
gives the same bits as a live one. Work is O(n); the Python-level loop runs over blocks or over
positions within a block, whichever is fewer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.base import EvalEnv, Node, Reach, Series, SeriesNode, cut, numeric
from compute.evaluation.nominal_variants import ROLLING_OPERATORS
from compute.evaluation.results import EnumPoints, NumericPoints

OPERATORS = ROLLING_OPERATORS  # what `rolling` evaluates: the names are nominal_variants' table


@dataclass
class Blocks:
    """Where each point's window lies: its block's first index, its window's first index."""

    starts: np.ndarray  # first index of each block
    lengths: np.ndarray
    own_start: np.ndarray  # per point: first index of its block
    window_start: np.ndarray  # per point: first index inside (t - D, t]

    @classmethod
    def of(cls, ts: np.ndarray, width: int) -> Blocks:
        ids = ts // width
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        lengths = np.diff(np.r_[starts, len(ts)])
        own_start = np.repeat(starts, lengths)
        window_start = np.searchsorted(ts, ts - width, side="right")
        return cls(starts, lengths, own_start, window_start)

    @property
    def reaches_back(self) -> np.ndarray:
        """Points whose window includes a suffix of the previous block."""
        return self.window_start < self.own_start

    def accumulate(self, ufunc: np.ufunc, values: np.ndarray, reverse: bool = False) -> np.ndarray:
        """ufunc.accumulate inside every block, left to right (or right to left). Both loops below
        apply the same operations in the same order, so they give the same bits."""
        out = np.empty(len(values), np.float64)
        if not len(values):
            return out
        if len(self.starts) <= int(self.lengths.max()):
            for s, n in zip(self.starts.tolist(), self.lengths.tolist(), strict=True):
                seg = values[s : s + n]
                out[s : s + n] = ufunc.accumulate(seg[::-1])[::-1] if reverse else ufunc.accumulate(seg)
            return out
        for p in range(int(self.lengths.max())):  # many short blocks: every block's p-th step at once
            alive = self.lengths > p
            idx = (self.starts + self.lengths - 1 - p if reverse else self.starts + p)[alive]
            if p == 0:
                out[idx] = values[idx]
            else:
                out[idx] = ufunc(out[idx + 1 if reverse else idx - 1], values[idx])
        return out

    def combine(self, ufunc: np.ufunc, values: np.ndarray) -> np.ndarray:
        """ufunc over each window: the previous block's suffix (if any) with the own block's prefix."""
        prefix = self.accumulate(ufunc, values)
        back = self.reaches_back
        if not back.any():
            return prefix
        suffix = self.accumulate(ufunc, values, reverse=True)
        out = prefix.copy()
        out[back] = ufunc(suffix[self.window_start[back]], prefix[back])
        return out

    def anchored(self, values: np.ndarray, reverse: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per point: (anchor, sum of v - anchor, sum of (v - anchor)^2) over the block's prefix
        (anchor: the block's first value) or suffix (anchor: its last value). Centred sums keep the
        variance accurate; each anchor lies inside every window that uses it."""
        edge = self.starts + self.lengths - 1 if reverse else self.starts
        anchor = np.repeat(values[edge], self.lengths)
        d = values - anchor
        return anchor, self.accumulate(np.add, d, reverse), self.accumulate(np.add, d * d, reverse)


def _standard_deviation(values: np.ndarray, blocks: Blocks, counts: np.ndarray) -> np.ndarray:
    """Population standard deviation: the prefix and suffix parts as (count, mean, M2), merged with
    Chan et al.'s formula."""
    idx = np.arange(len(values))
    a_anchor, a_s1, a_s2 = blocks.anchored(values, reverse=False)
    n_a = (idx - blocks.own_start + 1).astype(np.float64)
    mean = a_anchor + a_s1 / n_a
    m2 = a_s2 - a_s1 * a_s1 / n_a
    back = blocks.reaches_back
    if back.any():
        b_anchor, b_s1, b_s2 = blocks.anchored(values, reverse=True)
        j = blocks.window_start[back]
        n_b = (blocks.own_start[back] - j).astype(np.float64)
        mean_b = b_anchor[j] + b_s1[j] / n_b
        m2_b = b_s2[j] - b_s1[j] * b_s1[j] / n_b
        na, n = n_a[back], n_a[back] + n_b
        delta = mean[back] - mean_b
        m2[back] = m2[back] + m2_b + delta * delta * na * n_b / n
    return np.sqrt(np.maximum(m2, 0.0) / counts)


def rolling(op: str, values: np.ndarray, ts: np.ndarray, width: int) -> np.ndarray:
    blocks = Blocks.of(ts, width)
    counts = (np.arange(len(ts)) - blocks.window_start + 1).astype(np.float64)
    with np.errstate(all="ignore"):
        if op == "count":
            return counts
        if op == "sum":
            return blocks.combine(np.add, values)
        if op == "average":
            return blocks.combine(np.add, values) / counts
        if op == "min":
            return blocks.combine(np.minimum, values)
        if op == "max":
            return blocks.combine(np.maximum, values)
        if op == "rootMeanSquare":
            return np.sqrt(blocks.combine(np.add, values * values) / counts)
        if op == "standardDeviation":
            return _standard_deviation(values, blocks, counts)
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

    def reach(self) -> Reach:
        # A point's aggregate reads (t - D, t] only, bit for bit whatever lies before (see above).
        return Reach(ns=self.window_ns)

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._aggregate(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        out: NumericPoints = cut(self._aggregate(self.input_since(self.input, env, since)), since)
        return out

    def _aggregate(self, s: Series) -> NumericPoints:
        if isinstance(s, EnumPoints) and self.operator != "count":
            s = numeric(s, f"numericAggregation {self.operator}")  # refuses
        if not len(s.ts):
            return NumericPoints(s.ts, np.empty(0, np.float64))
        values = s.values if isinstance(s, NumericPoints) else np.zeros(len(s.ts))
        return NumericPoints(s.ts, rolling(self.operator, values, s.ts, self.window_ns))
