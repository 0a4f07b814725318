"""Roots of a node tree (`ComputableNode`): what a client receives for each group.

A grouped response holds one result type across its groups, so the roots decide for all groups at
once (e.g. every group is bucketed as soon as one group holds more than B points).

Each root holds its input's output per group from the window's start on (`HeldSeries`, `HeldRanges`):
a live micro-batch re-evaluates the input only from where it can have changed
(`Node.evaluate_since`), splices that part in, and drops what left the window."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import (
    UNCHANGED,
    EvalEnv,
    GroupKey,
    OutputNode,
    RangeNode,
    Series,
    SeriesNode,
)
from compute.evaluation.nodes.cross_group import regroup
from compute.evaluation.nodes.inputs import ChannelInput
from compute.evaluation.output_format import ArrowFormat
from compute.evaluation.results import (
    EnumPoints,
    EnumValue,
    NumericPoints,
    NumericValue,
    Output,
    Ranges,
    RangesSummary,
    SinglePoint,
)
from compute.evaluation.summarize import MS, BucketMemo, Decimation, enum_buckets
from compute.evaluation.window import SeriesWindow

DEFAULT_MAX_RANGES = 2000


def _undecimated_too_many(count: int, what: str) -> ComputeError:
    return ComputeError(
        "UnavailableResultConfiguration",
        f"{count} {what} in the window and decimateResults is false",
        {"reason": "TOO_MANY_POINTS_FOR_UNDECIMATED_APPENDS"},
    )


def arrow_of_enum() -> ComputeError:
    return ComputeError(
        "InvalidComputation",
        "SummarizeSeries.outputFormat Arrow of an enum series (arrowEnum, arrowBucketedEnum) is not produced "
        "by Sparkwire; use LEGACY",
        {"invalidTypes": "SummarizeSeries", "field": "outputFormat"},
    )


class HeldSeries:
    """Per group, a root's input series from the window's start on. A channel read as is needs no
    copy: its window's views are that already."""

    def __init__(self) -> None:
        self._held: dict[GroupKey, Held] = {}

    def whole(self, node: SeriesNode, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Series]:
        envs = regroup(node, envs)  # the output's groups (a node may act across groups)
        out = {k: node.evaluate(env).since(env.window_start) for k, env in envs.items()}
        if isinstance(node, ChannelInput):
            self._held = {}
            return out
        self._held = {k: _hold(s) for k, s in out.items()}
        # views of what is held, so that the next batch's bucket memo finds the same memory
        return {k: _view(self._held[k], envs[k]) for k in out}

    def update(
        self, node: SeriesNode, envs: Mapping[GroupKey, EvalEnv], since: Mapping[GroupKey, int]
    ) -> dict[GroupKey, Series]:
        if isinstance(node, ChannelInput):
            return self.whole(node, envs)
        envs = regroup(node, envs)
        out: dict[GroupKey, Series] = {}
        held: dict[GroupKey, Held] = {}
        for k, env in envs.items():
            ws, entry = env.window_start, self._held.get(k)
            changed = since.get(k, UNCHANGED)
            if entry is not None and changed != UNCHANGED:
                start = max(changed, ws)
                part = node.evaluate_since(env, start)
                if part.kind == entry[0]:
                    values = part.codes if isinstance(part, EnumPoints) else part.values
                    entry[1].splice(start, part.ts, values)
                    if isinstance(part, EnumPoints):  # the categories only grow
                        entry = (entry[0], entry[1], part.categories)
                else:  # the result type changed (an enum channel's first point): start over
                    entry = None
            if entry is None:
                entry = _hold(node.evaluate(env).since(ws))
            entry[1].trim_before(ws)
            held[k] = entry
            out[k] = _view(entry, env)
        self._held = held
        return out


# What a root holds of a group's series: its kind, its points, and an enum's categories (a channel's
# are the computation's, a `valueMap`'s its own labels)
Held = tuple[str, SeriesWindow, list[str]]


def _view(entry: Held, env: EvalEnv) -> Series:
    kind, window, categories = entry
    if kind == EnumPoints.kind:
        return EnumPoints(window.ts, window.values, categories)
    return NumericPoints(window.ts, window.values)


def _hold(s: Series) -> Held:
    if isinstance(s, EnumPoints):
        window = SeriesWindow(np.int32)
        window.splice(0, s.ts, s.codes)
        return s.kind, window, s.categories
    window = SeriesWindow(np.float64)
    window.splice(0, s.ts, s.values)
    return s.kind, window, []


class HeldRanges:
    """Per group, a root's input ranges clipped at the window's start."""

    def __init__(self) -> None:
        self._held: dict[GroupKey, Ranges] = {}

    def whole(self, node: RangeNode, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Ranges]:
        envs = regroup(node, envs)
        self._held = {k: node.evaluate(env).clip(env.window_start) for k, env in envs.items()}
        return dict(self._held)

    def update(
        self, node: RangeNode, envs: Mapping[GroupKey, EvalEnv], since: Mapping[GroupKey, int]
    ) -> dict[GroupKey, Ranges]:
        held: dict[GroupKey, Ranges] = {}
        for k, env in regroup(node, envs).items():
            ws, old = env.window_start, self._held.get(k)
            changed = since.get(k, UNCHANGED)
            if old is None:
                held[k] = node.evaluate(env).clip(ws)
            elif changed == UNCHANGED:
                held[k] = old.clip(ws)
            else:
                start = max(changed, ws)
                held[k] = splice_ranges(old.clip(ws), start, node.evaluate_since(env, start))
        self._held = held
        return dict(held)


def splice_ranges(old: Ranges, t: int, new: Ranges) -> Ranges:
    """`old` before `t` followed by `new` (all at or after `t`); a range that `old` had open across
    `t` and `new` starts at `t` is one range."""
    head = int(old.starts.searchsorted(t, side="left"))
    starts, ends = old.starts[:head], np.minimum(old.ends[:head], t)
    if head and len(new) and ends[-1] == t and new.starts[0] == t:
        ends = ends.copy()
        ends[-1] = new.ends[0]
        return Ranges(np.concatenate([starts, new.starts[1:]]), np.concatenate([ends, new.ends[1:]]))
    return Ranges(np.concatenate([starts, new.starts]), np.concatenate([ends, new.ends]))


@dataclass
class SummarizeSeries(OutputNode):
    """`series`: raw points while every group's window holds at most B, buckets beyond."""

    series: SeriesNode
    decimation: Decimation
    decimate: bool = True  # false: resultConfiguration.appendOnly.decimateResults = false
    max_points: int = 10_000_000
    arrow: ArrowFormat | None = None  # answered as Nominal's ArrowPlot (app/protocol/arrow_plot.py)
    # numericAggregations: column name -> the reduction of a bucket's values (Operator.reduce)
    aggregations: tuple[tuple[str, Callable[[np.ndarray], float]], ...] = ()
    # the last buckets per group: a window that slid since is re-bucketed only where it changed
    memo: BucketMemo = field(default_factory=BucketMemo, compare=False, repr=False)
    held: HeldSeries = field(default_factory=HeldSeries, compare=False, repr=False)

    @property
    def input(self) -> SeriesNode:
        return self.series

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        return self._summarize(self.held.whole(self.series, envs))

    def update_groups(
        self, envs: Mapping[GroupKey, EvalEnv], since: Mapping[GroupKey, int]
    ) -> dict[GroupKey, Output]:
        return self._summarize(self.held.update(self.series, envs, since))

    def _summarize(self, series: dict[GroupKey, Series]) -> dict[GroupKey, Output]:
        if self.arrow is not None and any(isinstance(s, EnumPoints) for s in series.values()):
            raise arrow_of_enum()  # a channel variable (`raw`) turned out to hold strings
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
            k: self.memo.buckets(k, s.ts, s.values, width, dict(self.aggregations))
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
    held: HeldRanges = field(default_factory=HeldRanges, compare=False, repr=False)

    @property
    def input(self) -> RangeNode:
        return self.ranges

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        return self.summarize(self.held.whole(self.ranges, envs))

    def update_groups(
        self, envs: Mapping[GroupKey, EvalEnv], since: Mapping[GroupKey, int]
    ) -> dict[GroupKey, Output]:
        return self.summarize(self.held.update(self.ranges, envs, since))

    def summarize(self, ranges: dict[GroupKey, Ranges]) -> dict[GroupKey, Output]:
        """The ranges as they are, or past `max_ranges` in a group a rangesSummary for every group."""
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
    """`value`: the first or last point of a series in the window, as a `numericPoint` / `enumPoint`
    (firstPoint, lastPoint) or as a `singlePoint` holding a `Value` (firstValuePoint,
    lastValuePoint). No point: an empty `numeric` (or `enum`) result, since nominal-api's Python
    codec cannot decode an empty point; in a grouped response such a group is left out."""

    series: SeriesNode
    last: bool
    single: bool = False  # a SinglePoint (firstValuePoint / lastValuePoint)
    held: HeldSeries = field(default_factory=HeldSeries, compare=False, repr=False)

    @property
    def input(self) -> SeriesNode:
        return self.series

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        return self._select(self.held.whole(self.series, envs))

    def update_groups(
        self, envs: Mapping[GroupKey, EvalEnv], since: Mapping[GroupKey, int]
    ) -> dict[GroupKey, Output]:
        return self._select(self.held.update(self.series, envs, since))

    def _select(self, series: dict[GroupKey, Series]) -> dict[GroupKey, Output]:
        out: dict[GroupKey, Output] = {}
        for key, s in series.items():
            if not len(s):
                if key == ():
                    out[key] = s
                continue
            i = len(s) - 1 if self.last else 0
            if self.single:
                value = s.categories[s.codes[i]] if isinstance(s, EnumPoints) else float(s.values[i])
                out[key] = SinglePoint(int(s.ts[i]), value)
            elif isinstance(s, EnumPoints):
                out[key] = EnumValue(int(s.ts[i]), int(s.codes[i]), s.categories)
            else:
                out[key] = NumericValue(int(s.ts[i]), float(s.values[i]))
        return out
