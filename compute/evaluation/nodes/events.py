"""The nodes over Sparkwire's events (compute/storage/events.py), built by
compute/evaluation/compiler/builders/events.py with the events their query found when the plan was compiled.

They read no channel: like `constant`, they hold their output whole and never change while the plan
lives. A created, edited or archived event reaches a live subscription by compiling it again (the
catalog's notice, app/fanout/catalog_edits.py): a plan that found other events is a computation of
its own, whose FullResult follows (docs/decisions/0072-events.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.base import EvalEnv, RangeNode, Reach, SeriesNode
from compute.evaluation.results import EnumPoints, Ranges


def event_ranges(spans: list[tuple[int, int]]) -> Ranges:
    """Each event's [start, end) as normalized ranges: events that overlap are one range (a range
    series holds no overlapping ranges), as are ranges that touch end to start; an instant (a
    zero-duration event) inside a range is part of it, one anywhere else stays an instant."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged:
            last = merged[-1]
            inside = start < last[1] or (start == last[1] and end > start and last[1] > last[0])
            if inside or (
                start == last[0] and last[0] == last[1]
            ):  # overlapping, touching, or over an instant
                last[1] = max(last[1], end)
                continue
        merged.append([start, end])
    if not merged:
        return Ranges.empty()
    array = np.asarray(merged, np.int64)
    return Ranges(array[:, 0].copy(), array[:, 1].copy())


@dataclass
class EventsSearch(RangeNode):
    """`eventsSearch`: a range for each event the query found, [timestamp, timestamp + duration)."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def reach(self) -> Reach:
        return Reach()  # no channel: never changes

    def evaluate(self, env: EvalEnv) -> Ranges:
        return event_ranges(list(zip(self.starts, self.ends, strict=True)))


@dataclass
class EventsEnum(SeriesNode):
    """`eventAggregation`: a point at each found event's timestamp whose label is the event's value
    (a property's, or its level); events at one timestamp are each a point, in label order."""

    ts: tuple[int, ...]
    codes: tuple[int, ...]  # index into `categories`
    categories: list[str]

    def reach(self) -> Reach:
        return Reach()  # no channel: never changes

    def evaluate(self, env: EvalEnv) -> EnumPoints:
        return EnumPoints(np.asarray(self.ts, np.int64), np.asarray(self.codes, np.int32), self.categories)
