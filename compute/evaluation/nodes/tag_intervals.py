"""`NumericSeries.tagByIntervals`, which Nominal computes only when polled (`TAG_BY_INTERVALS`).
nominal-api's `TagByIntervalsSeries`: "Injects tags derived from interval boundaries onto a numeric
series. Points within an interval get tagged; points outside all intervals are dropped. Intervals
come from either events or ranges. If intervals with different tag map overlap, a data point
falling in multiple intervals is duplicated into each matching output group. Overlapping intervals
with equal tag maps are not allowed. Optional time shift subtracts a per-interval anchor from
timestamps after matching."

The intervals are either a range series' ranges over the period ([start, end), as every range is),
evaluated in each of the input's groups, or the events a query found when the plan was compiled
(`EventInterval`: "Each event defines [timestamp, timestamp+duration)"; the ones that meet the
period). Each interval is tagged by its `tagBy` sources (`ReservedTagKey` INTERVAL_INDEX: its
zero-based position in time order among the period's intervals; INTERVAL_START: its start, epoch
nanoseconds in decimal; an event's EVENT_LEVEL, property and label tags, fixed when compiled), and
its points (in each input group) go to the output group keyed by the input group's tags plus the
interval's. Intervals with equal tags (events tagged by their level, say) share one group; if two
of them overlap the computation is refused, as nominal-api does not allow it. A range series holds
no overlapping ranges, so ranges never do.

The time shift subtracts each interval's anchor from its points' timestamps: its start
(`intervalStart`), its end (`intervalEnd`) or an event's start (`EventAnchor`, `eventTimeShift`). An
interval without that anchor (a range open at the period's end, or begun before anything held; no
event of the shift's query in its window) cannot be resolved: `InvalidComputation`, as nominal-api
says "resolution throws if start is missing". A shifted group's period is shifted with it (its
points are kept, and summarized, over the request's period less the anchor; several intervals in
one group: from the earliest to the latest shifted period).

A node across groups (nodes/cross_group.py): its output groups depend on the intervals, so it maps
its input's groups itself (`members`) instead of by key. Built only by a poll (POLLED_ONLY):
evaluated once, whole, over the period."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import EARLIEST, EvalEnv, GroupKey, Node, RangeNode, SeriesNode, numeric
from compute.evaluation.nodes.cross_group import CrossGroup, Family, _family, groups_of
from compute.evaluation.results import NO_START, OPEN_END, NumericPoints

INTERVAL_INDEX = "INTERVAL_INDEX"
INTERVAL_START = "INTERVAL_START"
EVENT_LEVEL = "EVENT_LEVEL"
EVENT_LABEL_PREFIX = "EVENT_LABEL_PREFIX:"  # ReservedTagKey: "EVENT_LABEL_PREFIX + ":" + labelName"
NOMINAL_ABSENT = "NOMINAL_ABSENT"  # ReservedTagValue: "a dimension that has no value"
TAG_KEYS = {"intervalIndex": INTERVAL_INDEX, "rangeStartTimestamp": INTERVAL_START}


def _unresolved(why: str) -> ComputeError:
    return ComputeError(
        "InvalidComputation", f"tagByIntervals: {why}", {"invalidTypes": "", "variant": "tagByIntervals"}
    )


@dataclass(frozen=True)
class EventInterval:
    """An event's interval [start, end) and the tags fixed by the event (level, property, label)."""

    start: int
    end: int
    tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class EventAnchor:
    """`eventTimeShift`: "the start timestamp of the event at the configured zero-based index from
    this query whose event time lies in the anchor window [start, end), or [start, +infinity) when
    the end is absent. The window is the tagging interval". `starts`: the query's events' starts in
    ascending order; `descending`: sortOrder DESC."""

    starts: tuple[int, ...]
    index: int = 0
    descending: bool = False

    def resolve(self, start: int, end: int) -> int:
        if start == NO_START:
            raise _unresolved("an interval began before the period: it has no start to anchor an event in")
        starts = np.asarray(self.starts, np.int64)
        lo = int(np.searchsorted(starts, start, side="left"))
        hi = len(starts) if end == OPEN_END else int(np.searchsorted(starts, end, side="left"))
        found = starts[lo:hi]
        if self.index >= len(found):
            window = f"[{start}, {'+infinity' if end == OPEN_END else end})"
            raise _unresolved(
                f"the time shift's query has {len(found)} events in the interval {window}: "
                f"none at index {self.index}"
            )
        return int(found[len(found) - 1 - self.index] if self.descending else found[self.index])


@dataclass(frozen=True)
class Span:
    """One interval's part of an output group: [start, end) and the anchor subtracted."""

    start: int
    end: int
    shift: int


@dataclass
class Group:
    """One output group: the input group it reads and the intervals whose points it holds."""

    source: GroupKey
    env: EvalEnv
    spans: list[Span] = field(default_factory=list)


@dataclass(eq=False)
class TagByIntervals(CrossGroup):
    POLLED_ONLY = True

    input: SeriesNode
    ranges: RangeNode | None  # the `ranges` source, or None for `events`
    tag_by: tuple[str, ...]  # the tag keys, in the request's order
    time_shift: str | EventAnchor | None = None  # "intervalStart" / "intervalEnd" / an event anchor
    dims: tuple[str, ...] = ()
    events: tuple[EventInterval, ...] = ()  # the `events` source: the events found, in time order

    def children(self) -> Sequence[Node]:
        return (self.input,) if self.ranges is None else (self.input, self.ranges)

    def key_of(self, key: GroupKey) -> GroupKey | None:  # pragma: no cover - members() is overridden
        raise NotImplementedError("tagByIntervals maps its groups by its intervals")

    def _intervals(self, env: EvalEnv) -> list[tuple[int, int, dict[str, str]]]:
        """The intervals of one input group, in time order, with their fixed tags."""
        if self.ranges is not None:
            ranges = self.ranges.evaluate(env)
            return [
                (start, end, {})
                for start, end in zip(ranges.starts.tolist(), ranges.ends.tolist(), strict=True)
            ]
        # the events that meet the period (an instant: inside it)
        return [
            (e.start, e.end, dict(e.tags))
            for e in self.events
            if e.start < env.now and (e.end > env.window_start or (e.end == e.start >= env.window_start))
        ]

    def _shift(self, start: int, end: int) -> int:
        if self.time_shift is None:
            return 0
        if isinstance(self.time_shift, EventAnchor):
            return self.time_shift.resolve(start, end)
        if self.time_shift == "intervalStart":
            if start == NO_START:
                raise _unresolved("an interval began before the period: it has no start to shift by")
            return start
        if end == OPEN_END:
            raise _unresolved("an interval is still open at the period's end: it has no end to shift by")
        return end

    def groups(self, family: Family) -> dict[GroupKey, Group]:
        def compute() -> dict[GroupKey, Group]:
            out: dict[GroupKey, Group] = {}
            for key, env in sorted(groups_of(self.input, family).items(), key=lambda kv: kv[0]):
                for i, (start, end, fixed) in enumerate(self._intervals(env)):
                    tags: list[tuple[str, str]] = []
                    for tag in self.tag_by:
                        if tag == INTERVAL_INDEX:
                            tags.append((tag, str(i)))
                        elif tag == INTERVAL_START:
                            if start == NO_START:
                                raise _unresolved(
                                    "an interval began before the period: it has no start to tag by"
                                )
                            tags.append((tag, str(start)))
                        else:
                            tags.append((tag, fixed[tag]))
                    group = out.setdefault(key + tuple(tags), Group(key, env))
                    group.spans.append(Span(start, end, self._shift(start, end)))
            for key, group in out.items():
                reached = EARLIEST
                for span in sorted(group.spans, key=lambda s: s.start):
                    if span.start < reached and span.start < span.end:
                        raise _unresolved(
                            f"intervals with equal tags {dict(key[len(group.source) :])} overlap, "
                            "which nominal-api does not allow"
                        )
                    reached = max(reached, span.end)
            return out

        found: dict[GroupKey, Group] = family.remember((id(self), "groups", 0), compute)
        return found

    def output_groups(self, family: Family) -> dict[GroupKey, EvalEnv]:
        """Each group's env, its period shifted as its points are: a root keeps (and buckets) the
        points of [window_start, now) of this env, which with a shift are the shifted period."""
        out: dict[GroupKey, EvalEnv] = {}
        for key, group in self.groups(family).items():
            env = group.env
            low = min(s.shift for s in group.spans)
            high = max(s.shift for s in group.spans)
            out[key] = replace(
                env,
                group=key,
                window_start=env.window_start - high,
                now=env.now - low,
                held_from=env.held_from if env.held_from <= EARLIEST else env.held_from - high,
            )
        return out

    def members(self, family: Family) -> dict[GroupKey, list[tuple[GroupKey, EvalEnv]]]:
        return {key: [(g.source, g.env)] for key, g in self.groups(family).items()}

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        group = self.groups(_family(env, "tagByIntervals")).get(env.group)
        if group is None:
            return NumericPoints(np.empty(0, np.int64), np.empty(0, np.float64))
        x = numeric(self.input.evaluate(group.env), "tagByIntervals").since(group.env.window_start)
        times, values = [], []
        for span in group.spans:
            lo = 0 if span.start == NO_START else int(np.searchsorted(x.ts, span.start, side="left"))
            hi = len(x.ts) if span.end == OPEN_END else int(np.searchsorted(x.ts, span.end, side="left"))
            times.append(x.ts[lo:hi] - span.shift if span.shift else x.ts[lo:hi])
            values.append(x.values[lo:hi])
        if len(times) == 1:
            return NumericPoints(times[0], values[0])
        ts = np.concatenate(times)
        order = np.argsort(ts, kind="stable")  # in time order; equal shifted times in interval order
        return NumericPoints(ts[order], np.concatenate(values)[order])
