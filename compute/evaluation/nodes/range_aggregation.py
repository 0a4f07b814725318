"""`rangeNumericAggregation`: a value per range, aggregated from a numeric series' points inside it
(RangesNumericAggregation: "Aggregates the values of a numeric series at each range specified by the
input ranges"), sent as Nominal's `range` result with each Range's `value`.

A range holds the points at or after its start and before its end ([start, end)); an instant (start
= end) holds the points at its timestamp; an open range every point from its start on. The ranges
and the points are those inside the window, as a fresh evaluation over the window sees them: a range
that began before the window aggregates from the window's start. Standard deviation is the
population's (as the rolling aggregations'); NaN propagates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.base import EvalEnv, GroupKey, Node, OutputNode, RangeNode, SeriesNode, numeric
from compute.evaluation.nodes.outputs import SummarizeRanges
from compute.evaluation.results import RANGE_AGGREGATES, AggregatedRanges, Output, Ranges


@dataclass
class RangeNumericAggregation(RangeNode):
    """As a range series nested in another range node, its ranges are those of `ranges` (the values
    concern only the root). At a `ranges` root, `aggregates` gives the ranges with their values.
    A value depends on every point of its range, however long, and on where the window starts, so
    there is no reach: each micro-batch evaluates it whole (the contract's exact default)."""

    ranges: RangeNode
    input: SeriesNode
    operation: str  # a RANGE_AGGREGATES entry, or "all"

    def children(self) -> Sequence[Node]:
        return (self.ranges, self.input)

    def evaluate(self, env: EvalEnv) -> Ranges:
        return self.ranges.evaluate(env)

    def aggregates(self, env: EvalEnv) -> AggregatedRanges:
        r = self.ranges.evaluate(env).clip(env.window_start)
        s = numeric(self.input.evaluate(env), "rangeNumericAggregation").since(env.window_start)
        lo = np.searchsorted(s.ts, r.starts, side="left")
        instant = r.ends == r.starts
        hi = np.where(
            instant,
            np.searchsorted(s.ts, r.starts, side="right"),
            np.searchsorted(s.ts, r.ends, side="left"),
        )
        count = (hi - lo).astype(np.int64)
        columns = {name: np.full(len(r), np.nan) for name in RANGE_AGGREGATES}
        columns["count"] = count
        held = count > 0
        if held.any():  # every range's points gathered into one array, reduced per range at once
            lengths = count[held]
            offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            at = np.arange(int(lengths.sum())) - np.repeat(offsets, lengths) + np.repeat(lo[held], lengths)
            v = s.values[at]
            with np.errstate(all="ignore"):
                total = np.add.reduceat(v, offsets)
                mean = total / lengths
                deviation = v - np.repeat(mean, lengths)
                columns["sum"][held] = total
                columns["average"][held] = mean
                columns["min"][held] = np.minimum.reduceat(v, offsets)
                columns["max"][held] = np.maximum.reduceat(v, offsets)
                columns["standardDeviation"][held] = np.sqrt(np.add.reduceat(deviation**2, offsets) / lengths)
                columns["rootMeanSquare"][held] = np.sqrt(np.add.reduceat(v * v, offsets) / lengths)
        return AggregatedRanges(
            r.starts,
            r.ends,
            count=columns["count"],
            sum=columns["sum"],
            average=columns["average"],
            min=columns["min"],
            max=columns["max"],
            standardDeviation=columns["standardDeviation"],
            rootMeanSquare=columns["rootMeanSquare"],
            operation=self.operation,
        )


@dataclass
class SummarizeRangeAggregates(OutputNode):
    """`ranges` over a `rangeNumericAggregation`: its ranges with their values. Past `maxRanges` in a
    group, `summary` (a SummarizeRanges of the same settings) answers as for any ranges: a
    `rangesSummary` for every group, which carries no values, or its refusal for append-only."""

    node: RangeNumericAggregation
    summary: SummarizeRanges

    @property
    def input(self) -> RangeNumericAggregation:
        return self.node

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        out = {k: self.node.aggregates(env) for k, env in envs.items()}
        if max((len(a) for a in out.values()), default=0) <= self.summary.max_ranges:
            return dict(out)
        return self.summary.summarize({k: Ranges(a.starts, a.ends) for k, a in out.items()})
