"""`NumericSeries.tagByIntervals`, which Nominal computes only when polled (`TAG_BY_INTERVALS`).
nominal-api's `TagByIntervalsSeries`: "Injects tags derived from interval boundaries onto a numeric
series. Points within an interval get tagged; points outside all intervals are dropped. ... If
intervals with different tag map overlap, a data point falling in multiple intervals is duplicated
into each matching output group. Overlapping intervals with equal tag maps are not allowed.
Optional time shift subtracts a per-interval anchor from timestamps after matching."

Here the intervals are a range series' ranges over the period ([start, end), as every range is),
evaluated in each of the input's groups. Each interval is an output group: the input group's tags
plus the interval's (`ReservedTagKey` INTERVAL_INDEX: its zero-based position in time order;
INTERVAL_START: its start, epoch nanoseconds in decimal). A range series holds no overlapping
ranges, so no point falls in two intervals of one group. The time shift subtracts the interval's
start (`intervalStart`) or end (`intervalEnd`) from each of its points' timestamps; an interval
without that bound (a range open at the period's end, or begun before anything held) cannot be
resolved: `InvalidComputation`, as nominal-api says "resolution throws if start is missing". A
shifted group's period is shifted with it (its points are kept, and summarized, over the request's
period less the anchor).

A node across groups (nodes/cross_group.py): its output groups depend on the ranges, so it maps
its input's groups itself (`members`) instead of by key. Built only by a poll (POLLED_ONLY):
evaluated once, whole, over the period."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import EARLIEST, EvalEnv, GroupKey, RangeNode, SeriesNode, numeric
from compute.evaluation.nodes.cross_group import CrossGroup, Family, _family, groups_of
from compute.evaluation.results import NO_START, OPEN_END, NumericPoints

INTERVAL_INDEX = "INTERVAL_INDEX"
INTERVAL_START = "INTERVAL_START"
TAG_KEYS = {"intervalIndex": INTERVAL_INDEX, "rangeStartTimestamp": INTERVAL_START}


def _unresolved(why: str) -> ComputeError:
    return ComputeError(
        "InvalidComputation", f"tagByIntervals: {why}", {"invalidTypes": "", "variant": "tagByIntervals"}
    )


@dataclass(frozen=True)
class Interval:
    """One output group: the input group it reads, its span [start, end) and the shift subtracted."""

    source: GroupKey
    env: EvalEnv
    start: int
    end: int
    shift: int


@dataclass(eq=False)
class TagByIntervals(CrossGroup):
    POLLED_ONLY = True

    input: SeriesNode
    ranges: RangeNode
    tag_by: tuple[str, ...]  # INTERVAL_INDEX / INTERVAL_START, in the request's order
    time_shift: str | None = None  # "intervalStart" / "intervalEnd"
    dims: tuple[str, ...] = ()

    def children(self) -> tuple[SeriesNode, RangeNode]:
        return (self.input, self.ranges)

    def key_of(self, key: GroupKey) -> GroupKey | None:  # pragma: no cover - members() is overridden
        raise NotImplementedError("tagByIntervals maps its groups by its ranges")

    def intervals(self, family: Family) -> dict[GroupKey, Interval]:
        def compute() -> dict[GroupKey, Interval]:
            out: dict[GroupKey, Interval] = {}
            for key, env in sorted(groups_of(self.input, family).items(), key=lambda kv: kv[0]):
                ranges = self.ranges.evaluate(env)
                for i, (start, end) in enumerate(
                    zip(ranges.starts.tolist(), ranges.ends.tolist(), strict=True)
                ):
                    tags: list[tuple[str, str]] = []
                    for tag in self.tag_by:
                        if tag == INTERVAL_INDEX:
                            tags.append((tag, str(i)))
                        elif start == NO_START:
                            raise _unresolved(
                                "an interval began before the period: it has no start to tag by"
                            )
                        else:
                            tags.append((tag, str(start)))
                    shift = 0
                    if self.time_shift == "intervalStart":
                        if start == NO_START:
                            raise _unresolved(
                                "an interval began before the period: it has no start to shift by"
                            )
                        shift = start
                    elif self.time_shift == "intervalEnd":
                        if end == OPEN_END:
                            raise _unresolved(
                                "an interval is still open at the period's end: it has no end to shift by"
                            )
                        shift = end
                    out[key + tuple(tags)] = Interval(key, env, start, end, shift)
            return out

        found: dict[GroupKey, Interval] = family.remember((id(self), "intervals", 0), compute)
        return found

    def output_groups(self, family: Family) -> dict[GroupKey, EvalEnv]:
        """Each interval's group, its period shifted as its points are: a root keeps (and buckets)
        the points of [window_start, now) of this env, which with a shift are the shifted period."""
        out: dict[GroupKey, EvalEnv] = {}
        for key, iv in self.intervals(family).items():
            env = iv.env
            out[key] = replace(
                env,
                group=key,
                window_start=env.window_start - iv.shift,
                now=env.now - iv.shift,
                held_from=env.held_from if env.held_from <= EARLIEST else env.held_from - iv.shift,
            )
        return out

    def members(self, family: Family) -> dict[GroupKey, list[tuple[GroupKey, EvalEnv]]]:
        return {key: [(iv.source, iv.env)] for key, iv in self.intervals(family).items()}

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        interval = self.intervals(_family(env, "tagByIntervals")).get(env.group)
        if interval is None:
            return NumericPoints(np.empty(0, np.int64), np.empty(0, np.float64))
        x = numeric(self.input.evaluate(interval.env), "tagByIntervals").since(interval.env.window_start)
        lo = 0 if interval.start == NO_START else int(np.searchsorted(x.ts, interval.start, side="left"))
        hi = len(x.ts) if interval.end == OPEN_END else int(np.searchsorted(x.ts, interval.end, side="left"))
        ts = x.ts[lo:hi] - interval.shift if interval.shift else x.ts[lo:hi]
        return NumericPoints(ts, x.values[lo:hi])
