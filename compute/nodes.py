"""Evaluators: one class per node kind, numpy over the inputs' window columns.

The same evaluators serve live micro-batches and back-fill: both feed a computation's windows, and
the root node turns the windows of one group into an Output.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from compute.errors import ComputeError
from compute.results import EnumPoints, NumericPoints, Output
from compute.summarize import Decimation, summarize_enum, summarize_numeric


@dataclass
class EvalEnv:
    """One group's inputs (by input index) and the window being evaluated."""

    inputs: dict[int, NumericPoints | EnumPoints]
    window_start: int
    now: int
    categories: list[str] = field(default_factory=list)


class SeriesNode(ABC):
    """A node that yields a series (numeric or enum) from the inputs."""

    lookback_ns: int = 0  # how much history before the window the node needs

    @abstractmethod
    def evaluate(self, env: EvalEnv) -> NumericPoints | EnumPoints: ...


class OutputNode(ABC):
    """The root of a computation: turns a group's inputs into what the client receives."""

    @abstractmethod
    def evaluate(self, env: EvalEnv) -> Output: ...


@dataclass
class ChannelInput(SeriesNode):
    index: int
    expect: str | None = None  # "numeric", "enum", or None when a `Series.raw` leaves it open

    def evaluate(self, env: EvalEnv) -> NumericPoints | EnumPoints:
        series = env.inputs.get(self.index)
        if series is None:
            if self.expect == "enum":
                return EnumPoints(np.empty(0, np.int64), np.empty(0, np.int32), env.categories)
            return NumericPoints(np.empty(0, np.int64), np.empty(0, np.float64))
        if self.expect == "numeric" and isinstance(series, EnumPoints):
            raise ComputeError(
                "InvalidComputation", "a numeric node reads a string channel", {"invalidTypes": "numeric"}
            )
        if self.expect == "enum" and isinstance(series, NumericPoints):
            raise ComputeError(
                "InvalidComputation", "an enum node reads a double channel", {"invalidTypes": "enum"}
            )
        return series


@dataclass
class SummarizeSeries(OutputNode):
    input: SeriesNode
    decimation: Decimation
    decimate: bool = True  # false: resultConfiguration.appendOnly.decimateResults = false
    max_points: int = 10_000_000

    def evaluate(self, env: EvalEnv) -> Output:
        series = self.input.evaluate(env).since(env.window_start)
        if not self.decimate:
            if len(series) > self.max_points:
                raise ComputeError(
                    "UnavailableResultConfiguration",
                    f"{len(series)} points in the window and decimateResults is false",
                    {"reason": "TOO_MANY_POINTS_FOR_UNDECIMATED_APPENDS"},
                )
            return series
        if isinstance(series, NumericPoints):
            return summarize_numeric(series, self.decimation)
        return summarize_enum(series, self.decimation)
