"""Roots of a node tree (`ComputableNode`): what a client receives for each group.

A grouped response holds one result type across its groups, so the roots decide for all groups at
once (e.g. every group is bucketed as soon as one group holds more than B points)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import EvalEnv, GroupKey, OutputNode, RangeNode, SeriesNode
from compute.evaluation.results import (
    EnumPoints,
    EnumValue,
    NumericPoints,
    NumericValue,
    Output,
    Ranges,
    RangesSummary,
)
from compute.evaluation.summarize import MS, BucketMemo, Decimation, enum_buckets

DEFAULT_MAX_RANGES = 2000


def _undecimated_too_many(count: int, what: str) -> ComputeError:
    return ComputeError(
        "UnavailableResultConfiguration",
        f"{count} {what} in the window and decimateResults is false",
        {"reason": "TOO_MANY_POINTS_FOR_UNDECIMATED_APPENDS"},
    )


@dataclass
class SummarizeSeries(OutputNode):
    """`series`: raw points while every group's window holds at most B, buckets beyond."""

    series: SeriesNode
    decimation: Decimation
    decimate: bool = True  # false: resultConfiguration.appendOnly.decimateResults = false
    max_points: int = 10_000_000
    # the last buckets per group: a window that slid since is re-bucketed only where it changed
    memo: BucketMemo = field(default_factory=BucketMemo, compare=False, repr=False)

    @property
    def input(self) -> SeriesNode:
        return self.series

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        series = {k: self.series.evaluate(env).since(env.window_start) for k, env in envs.items()}
        if not self.decimate:
            for s in series.values():
                if len(s) > self.max_points:
                    raise _undecimated_too_many(len(s), "points")
            return dict(series)
        if all(len(s) <= self.decimation.max_points for s in series.values()):
            self.memo.retain(())
            return dict(series)
        width = self.decimation.bucket_width
        self.memo.retain(series.keys())
        return {
            k: self.memo.buckets(k, s.ts, s.values, width)
            if isinstance(s, NumericPoints)
            else enum_buckets(s.ts, s.codes, s.categories, width)
            for k, s in series.items()
        }


@dataclass
class SummarizeRanges(OutputNode):
    """`ranges`: the ranges overlapping the window (one that began earlier starts at the window's
    start); more than `max_ranges` in a group gives a `rangesSummary` for every group."""

    ranges: RangeNode
    window_ns: int
    max_ranges: int = DEFAULT_MAX_RANGES
    append_only: bool = False
    decimate: bool = True

    @property
    def input(self) -> RangeNode:
        return self.ranges

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        ranges = {k: self.ranges.evaluate(env).clip(env.window_start) for k, env in envs.items()}
        most = max((len(r) for r in ranges.values()), default=0)
        if most <= self.max_ranges:
            return dict(ranges)
        if self.append_only:  # a rangesSummary has no append form
            if not self.decimate:
                raise _undecimated_too_many(most, "ranges")
            raise ComputeError(
                "UnavailableResultConfiguration",
                f"{most} ranges exceed maxRanges ({self.max_ranges}) and a rangesSummary cannot be appended",
                {"reason": "APPENDS_NOT_SUPPORTED_FOR_COMPUTE"},
            )
        width = max(MS, math.ceil(math.ceil(self.window_ns / self.max_ranges) / MS) * MS)
        return {k: summarize_ranges(r, width) for k, r in ranges.items()}


def summarize_ranges(r: Ranges, width: int) -> RangesSummary:
    """Per epoch-aligned bucket of `width`: the span of the ranges starting in it, and their count."""
    if not len(r):
        empty = np.empty(0, np.int64)
        return RangesSummary(empty, empty, empty)
    ids = r.starts // width
    firsts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    counts = np.diff(np.r_[firsts, len(ids)])
    return RangesSummary(r.starts[firsts], np.maximum.reduceat(r.ends, firsts), counts.astype(np.int64))


@dataclass
class SelectValue(OutputNode):
    """`value`: the first or last point of a series in the window. No point: an empty `numeric`
    (or `enum`) result, since nominal-api's Python codec cannot decode an empty `numericPoint`;
    in a grouped response such a group is left out."""

    series: SeriesNode
    last: bool

    @property
    def input(self) -> SeriesNode:
        return self.series

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        out: dict[GroupKey, Output] = {}
        for key, env in envs.items():
            s = self.series.evaluate(env).since(env.window_start)
            if not len(s):
                if key == ():
                    out[key] = s
                continue
            i = len(s) - 1 if self.last else 0
            if isinstance(s, EnumPoints):
                out[key] = EnumValue(int(s.ts[i]), int(s.codes[i]), s.categories)
            else:
                out[key] = NumericValue(int(s.ts[i]), float(s.values[i]))
        return out
