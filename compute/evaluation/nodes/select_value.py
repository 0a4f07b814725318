"""`value` roots that pick one range: SelectValue `firstRange`, `lastRange`, `nthRange`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compute.evaluation.nodes.base import EvalEnv, GroupKey, OutputNode, RangeNode
from compute.evaluation.nodes.cross_group import regroup
from compute.evaluation.results import Output, Ranges, RangeValue


@dataclass
class SelectRange(OutputNode):
    """The `index`-th range (0-based) of those overlapping the window, counted from the earliest
    (ASC) or the latest (DESC); firstRange is ASC 0, lastRange DESC 0. A range that began before
    the window starts at the window's start, as in a `ranges` result. No such range: an empty
    `range` result (in a grouped response the group is left out), as `value` does for no point."""

    ranges: RangeNode
    index: int
    descending: bool

    @property
    def input(self) -> RangeNode:
        return self.ranges

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        out: dict[GroupKey, Output] = {}
        for key, env in regroup(self.ranges, envs).items():
            r = self.ranges.evaluate(env).clip(env.window_start)
            if self.index >= len(r):
                if key == ():
                    out[key] = Ranges.empty()
                continue
            i = len(r) - 1 - self.index if self.descending else self.index
            out[key] = RangeValue(int(r.starts[i]), int(r.ends[i]))
        return out
