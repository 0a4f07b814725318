"""What every evaluator shares: the inputs of one group, and the three node families (a series, a
set of ranges, the output a client receives). Evaluators are pure functions of their inputs'
numpy columns, so live micro-batches and back-fill run the very same code."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.results import EnumPoints, NumericPoints, Output, Ranges

GroupKey = tuple[tuple[str, str], ...]
Series = NumericPoints | EnumPoints


@dataclass
class EvalEnv:
    """One group's inputs (by input index) and the window being evaluated."""

    inputs: dict[int, Series]
    window_start: int
    now: int
    categories: list[str] = field(default_factory=list)


class Node:
    """Any node below the output: knows its children and how much history before the window it
    needs (the sum along the path, so nested lookbacks add up)."""

    def children(self) -> Sequence[Node]:
        return ()

    def own_lookback_ns(self) -> int:
        return 0

    @property
    def lookback_ns(self) -> int:
        return self.own_lookback_ns() + max((c.lookback_ns for c in self.children()), default=0)

    def reads_channel(self) -> bool:
        return any(c.reads_channel() for c in self.children())


class SeriesNode(Node, ABC):
    """A node that yields a series (numeric or enum) over the held part of the window."""

    @abstractmethod
    def evaluate(self, env: EvalEnv) -> Series: ...


class RangeNode(Node, ABC):
    """A node that yields normalized ranges."""

    @abstractmethod
    def evaluate(self, env: EvalEnv) -> Ranges: ...


class OutputNode(ABC):
    """The root of a computation: turns every group's inputs into what its clients receive. It sees
    all groups at once because a grouped response holds one result type across groups."""

    @property
    @abstractmethod
    def input(self) -> Node: ...

    @abstractmethod
    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]: ...

    @property
    def lookback_ns(self) -> int:
        return self.input.lookback_ns


def empty_numeric() -> NumericPoints:
    return NumericPoints(np.empty(0, np.int64), np.empty(0, np.float64))


def numeric(series: Series, node: str) -> NumericPoints:
    """The series as numbers, or an honest refusal when a numeric node reads an enum channel."""
    if isinstance(series, EnumPoints):
        raise ComputeError(
            "InvalidComputation",
            f"'{node}' needs a numeric series, got a string channel",
            {"invalidTypes": node},
        )
    return series


def enum(series: Series, node: str, categories: list[str]) -> EnumPoints:
    if isinstance(series, NumericPoints):
        if not len(series):  # nothing written yet: an empty enum series
            return EnumPoints(series.ts, np.empty(0, np.int32), categories)
        raise ComputeError(
            "InvalidComputation",
            f"'{node}' needs an enum series, got a double channel",
            {"invalidTypes": node},
        )
    return series
