"""Durations in error messages, in units a person reads (`27.8 h`, not `100000000000000 ns`).

Only the text is rounded: an error's params keep the exact nanoseconds a program compares."""

from __future__ import annotations

NANOS_PER_SECOND = 1_000_000_000

# (nanoseconds in the unit, its symbol), largest first; a duration is said in the largest unit it
# reaches, so 90 s reads "1.5 min" and 27.8 h stays hours (days only from 2 d: "36 h" reads better)
_UNITS = (
    (86_400 * NANOS_PER_SECOND, "d"),
    (3_600 * NANOS_PER_SECOND, "h"),
    (60 * NANOS_PER_SECOND, "min"),
    (NANOS_PER_SECOND, "s"),
    (1_000_000, "ms"),
    (1_000, "µs"),
    (1, "ns"),
)
_DAYS_FROM = 2 * 86_400 * NANOS_PER_SECOND


def human_duration(ns: int) -> str:
    """`ns` in its largest whole unit, to 3 significant digits: 27.8 h, 24 h, 1.5 min, 250 ms,
    7 ns; whole numbers from 100 up (106,751 d). Negative durations keep their sign."""
    if ns < 0:
        return "-" + human_duration(-ns)
    for size, unit in _UNITS:
        if ns >= size and (unit != "d" or ns >= _DAYS_FROM):
            return f"{_number(ns / size)} {unit}"
    return "0 s"


def _number(value: float) -> str:
    if value >= 100:
        return f"{round(value):,}"
    text = f"{value:.3g}"
    return text if "e" not in text else f"{value:.0f}"
