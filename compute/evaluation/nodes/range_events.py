"""Range nodes that mark instants: a zero-duration range [t, t] at every point where something
happens (a value changes, two series cross, a peak or trough). Each looks at a point's neighbours
only: the first held point has no predecessor and the newest no successor, so near the start of the
held history (the window plus the plan's lookback) an instant can be missing, as a derivative's
first point is; the newest point becomes a peak only once its successor arrives."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.align import FFILL_RADIUS_NS, forward_fill
from compute.evaluation.nodes.base import EvalEnv, Node, RangeNode, SeriesNode, numeric
from compute.evaluation.nodes.inputs import Constant
from compute.evaluation.results import EnumPoints, Ranges


def instants(ts: np.ndarray) -> Ranges:
    ts = ts.astype(np.int64)
    return Ranges(ts, ts.copy())


@dataclass
class OnChange(RangeNode):
    """`onChange` (numeric or enum) and `categoricalOnChangeRangesV2` (enum): an instant at every
    point whose value differs from the previous point's (enum: by label; NaN differs from NaN
    never, as both are 'no number', and from every number)."""

    input: SeriesNode

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> Ranges:
        s = self.input.evaluate(env)
        if isinstance(s, EnumPoints):
            labels = np.asarray(s.categories, dtype=object)[s.codes] if len(s) else np.empty(0, object)
            changed = labels[1:] != labels[:-1]
        else:
            a, b = s.values[1:], s.values[:-1]
            changed = (a != b) & ~(np.isnan(a) & np.isnan(b))
        return instants(s.ts[1:][changed])


@dataclass
class Crossover(RangeNode):
    """`seriesCrossoverRangesNode`: the two series aligned as arithmetic aligns them (forward
    fill, 1 s radius); an instant at the first point where a - b has the opposite sign of the last
    non-zero difference before it. Points where they are equal (or either is NaN) only touch. One
    side may be a constant (a fixed level, its commonest use): it stands at every point of the other."""

    a: SeriesNode
    b: SeriesNode

    def children(self) -> Sequence[Node]:
        return (self.a, self.b)

    def own_lookback_ns(self) -> int:
        return FFILL_RADIUS_NS

    def evaluate(self, env: EvalEnv) -> Ranges:
        ts, difference = self._difference(env)
        with np.errstate(invalid="ignore"):
            sign = np.nan_to_num(np.sign(difference), nan=0.0)
        signed = np.flatnonzero(sign)
        flips = signed[1:][sign[signed[1:]] != sign[signed[:-1]]]
        return instants(ts[flips])

    def _difference(self, env: EvalEnv) -> tuple[np.ndarray, np.ndarray]:
        """a - b at each aligned timestamp (the compiler lets at most one side be a constant)."""
        if isinstance(self.b, Constant):
            a = numeric(self.a.evaluate(env), "seriesCrossoverRangesNode")
            return a.ts, a.values - self.b.value
        if isinstance(self.a, Constant):
            b = numeric(self.b.evaluate(env), "seriesCrossoverRangesNode")
            return b.ts, self.a.value - b.values
        a = numeric(self.a.evaluate(env), "seriesCrossoverRangesNode")
        b = numeric(self.b.evaluate(env), "seriesCrossoverRangesNode")
        ts, (va, vb) = forward_fill([a, b])
        return ts, va - vb


@dataclass
class Extrema(RangeNode):
    """`peak` and `extremaRangesV2`: an instant at every point of a peak (higher than the points on
    both sides) or trough (lower); a flat run of equal values is one extremum and each of its points
    is returned. The first and last runs have a missing side and are never extrema. NaN points are
    left out before looking."""

    input: SeriesNode
    peaks: bool
    troughs: bool
    reach_ns: int  # the window: a plateau's points, all returned, can reach back that far

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def own_lookback_ns(self) -> int:
        """A new point decides whether the run before it is an extremum, and that flat run (every
        point of which is returned) can have begun arbitrarily long ago: declared honestly as the
        window, the farthest back an output the client sees can change."""
        return self.reach_ns

    def evaluate(self, env: EvalEnv) -> Ranges:
        s = numeric(self.input.evaluate(env), "peak")
        keep = ~np.isnan(s.values)
        ts, v = s.ts[keep], s.values[keep]
        if len(v) < 3:
            return Ranges.empty()
        run_first = np.flatnonzero(np.r_[True, v[1:] != v[:-1]])  # each flat run: its first index
        run_value = v[run_first]
        run_of = np.repeat(np.arange(len(run_first)), np.diff(np.r_[run_first, len(v)]))
        inner = np.zeros(len(run_first), bool)
        inner[1:-1] = True
        prev, nxt = np.r_[np.nan, run_value[:-1]], np.r_[run_value[1:], np.nan]
        with np.errstate(invalid="ignore"):
            peak = inner & (run_value > prev) & (run_value > nxt)
            trough = inner & (run_value < prev) & (run_value < nxt)
        chosen = (peak & self.peaks) | (trough & self.troughs)
        return instants(ts[chosen[run_of]])
