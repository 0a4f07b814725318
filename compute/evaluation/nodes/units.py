"""`unitOverride` and `unitConversion`. Sparkwire's channels carry no unit, so a unit enters a
computation only through `unitOverride` (values unchanged); `unitConversion` of such a series maps
each value through the affine conversion compute/evaluation/units.py found when it was compiled."""

from __future__ import annotations

from dataclasses import dataclass

from compute.evaluation.nodes.base import PointByPoint, Series, SeriesNode, numeric
from compute.evaluation.results import NumericPoints


@dataclass
class WithUnit(PointByPoint):
    """The input's points, reported in `unit` (None: the unit cleared)."""

    input: SeriesNode
    unit: str | None

    def apply(self, x: Series) -> NumericPoints:
        return numeric(x, "unitOverride")


@dataclass
class Converted(WithUnit):
    """The input's values converted to `unit`: scale * value + offset."""

    scale: float = 1.0
    offset: float = 0.0

    def apply(self, x: Series) -> NumericPoints:
        s = numeric(x, "unitConversion")
        return NumericPoints(s.ts, s.values * self.scale + self.offset)
