"""Leaves of a node tree: a channel's points, and a constant (which has a value everywhere and no
timestamps of its own)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compute.evaluation.errors import polling_only
from compute.evaluation.nodes.base import (
    EvalEnv,
    Reach,
    Series,
    SeriesNode,
    cut,
    empty_numeric,
    enum,
    log_lines,
    numeric,
    stored_texts,
)
from compute.evaluation.results import (
    DoubleArrayPoints,
    EnumPoints,
    LogPoints,
    StoredTexts,
    StringArrayPoints,
    StructPoints,
)

# The channels read as arrays and structs, by what a builder expects (builders/composite.py)
STORED_TEXTS: dict[str, type[StoredTexts]] = {
    "double-array": DoubleArrayPoints,
    "string-array": StringArrayPoints,
    "struct": StructPoints,
}


@dataclass
class ChannelInput(SeriesNode):
    """The points of the series one of the plan's channel selectors routes here."""

    index: int
    # "numeric", "enum", "log" (a LogSeries: builders/logs.py), a key of STORED_TEXTS (an array or a
    # struct series), or None when a `Series.raw` leaves it open
    expect: str | None = None

    def reads_channel(self) -> bool:
        return True

    def reach(self) -> Reach:
        return Reach()

    def changed_from(self, changed: int) -> int:
        return changed

    def points_before(self, env: EvalEnv, t: int) -> int:
        series = env.inputs.get(self.index)
        return 0 if series is None else int(series.ts.searchsorted(t, side="left"))

    def evaluate_since(self, env: EvalEnv, since: int) -> Series:
        out: Series = cut(self.evaluate(env), since)  # views of the window: no copy
        return out

    def evaluate(self, env: EvalEnv) -> Series:
        series = env.inputs.get(self.index)
        if series is None:
            if self.expect == "enum":
                return EnumPoints(np.empty(0, np.int64), np.empty(0, np.int32), env.categories)
            if self.expect == "log":
                return LogPoints(np.empty(0, np.int64), np.empty(0, np.int32), env.categories)
            return empty_numeric()
        if self.expect == "numeric":
            return numeric(series, "numeric")
        if self.expect == "enum":
            return enum(series, "enum", env.categories)
        if self.expect == "log":
            return log_lines(series, "log")
        if self.expect in STORED_TEXTS:
            return stored_texts(series, STORED_TEXTS[self.expect], self.expect)
        if isinstance(series, StoredTexts):  # Nominal's `array` / `struct` series: polling only
            kind = "STRUCT" if isinstance(series, StructPoints) else "ARRAY"
            raise polling_only(
                f"a {series.channel} channel read as a series streams by polling only, and Sparkwire "
                "answers no array or struct plot (select1dArrayIndex and extractFromStruct read one)",
                kind,
            )
        if isinstance(series, LogPoints):  # a log channel read as a `Series`: Nominal's `log`, polling only
            raise polling_only(
                "a log channel read as a series streams by polling only (a log node such as contains "
                "streams over it)",
                "LOG_SERIES",
            )
        return series


@dataclass
class Constant(SeriesNode):
    """`constant` (and any arithmetic over constants only, folded when compiled). Binary nodes
    broadcast it; it never reaches a node that needs timestamps (the compiler refuses that)."""

    value: float

    def reach(self) -> Reach:
        return Reach()  # no channel: never changes

    def evaluate(self, env: EvalEnv) -> Series:
        raise AssertionError("a constant is broadcast by its consumer, never evaluated on its own")


@dataclass
class EnumConstant(SeriesNode):
    """A label with no timestamps of its own (`selectCategoricalProperty`): like `constant`, it
    stands at every time and is broadcast by its consumer; only the categorical equality nodes take
    one (the compiler refuses it anywhere else)."""

    label: str

    def reach(self) -> Reach:
        return Reach()  # no channel: never changes

    def evaluate(self, env: EvalEnv) -> Series:
        raise AssertionError("an enum constant is broadcast by its consumer, never evaluated on its own")
