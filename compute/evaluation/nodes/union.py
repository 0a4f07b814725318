"""Nodes that name data the way Nominal's datasets and variables do: the union of a dataset's
branches (`combine`, an asset's data scopes, a run's), a run's time range, and a sub-computation
bound to a variable that the tree references more than once (built once, evaluated once per group
and update)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from compute.evaluation.errors import not_supported
from compute.evaluation.nodes.base import EvalEnv, Node, Series, SeriesNode
from compute.evaluation.nodes.cross_group import merge
from compute.evaluation.results import EnumPoints, LogPoints, NumericPoints


@dataclass
class MergedBranches(SeriesNode):
    """Every point of every branch, in time order (SQL UNION ALL: equal timestamps are kept)."""

    inputs: list[SeriesNode]

    def children(self) -> Sequence[Node]:
        return self.inputs

    def evaluate(self, env: EvalEnv) -> Series:
        parts = [x.evaluate(env) for x in self.inputs]
        if all(isinstance(p, NumericPoints) for p in parts):
            ts = np.concatenate([p.ts for p in parts])
            order = np.argsort(ts, kind="stable")
            return NumericPoints(ts[order], np.concatenate([p.values for p in parts])[order])  # type: ignore[union-attr]
        if all(isinstance(p, LogPoints) for p in parts):  # log lines, each part with its own texts
            return merge(parts)
        if all(isinstance(p, EnumPoints) for p in parts):
            ts = np.concatenate([p.ts for p in parts])
            order = np.argsort(ts, kind="stable")
            codes = np.concatenate([p.codes for p in parts])[order]  # type: ignore[union-attr]
            return EnumPoints(ts[order], codes, env.categories)
        raise not_supported("a dataset's branches hold this series as both numeric and enum", "combine")


@dataclass
class SharedSubtree(SeriesNode):
    """A `VariableValue.computeNode` referenced from several places: one node, whose result for an
    evaluation (one group's `EvalEnv`) is computed once and handed to every reference."""

    input: SeriesNode
    _env: EvalEnv | None = field(default=None, repr=False, compare=False)
    _result: Series | None = field(default=None, repr=False, compare=False)

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> Series:
        if self._env is not env or self._result is None:
            self._result = self.input.evaluate(env)
            self._env = env
        return self._result


@dataclass
class PointsFrom(SeriesNode):
    """The points at or after `start_ns` (a run's branch: the run's time range, which is open at
    the end while the run streams)."""

    input: SeriesNode
    start_ns: int

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> Series:
        s = self.input.evaluate(env)
        keep = s.ts >= self.start_ns
        if keep.all():
            return s
        if isinstance(s, EnumPoints):  # a log channel's lines too (LogPoints)
            return type(s)(s.ts[keep], s.codes[keep], s.categories)
        return NumericPoints(s.ts[keep], s.values[keep])
