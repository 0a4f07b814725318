"""Durations in error messages read in human units (compute/evaluation/durations.py; issue 50, item 10)."""

from __future__ import annotations

import pytest

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError

S = 1_000_000_000


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0 s"),
        (7, "7 ns"),
        (1_500, "1.5 µs"),
        (250_000_000, "250 ms"),
        (S, "1 s"),
        (90 * S, "1.5 min"),
        (100_000_000_000_000, "27.8 h"),  # the windowWidth
        (86_400 * S, "24 h"),
        (36 * 3_600 * S, "36 h"),
        (3 * 86_400 * S, "3 d"),
        (2**63 - 1, "106,752 d"),
        (-5 * S, "-5 s"),
    ],
)
def test_a_duration_is_said_in_its_largest_unit(ns: int, text: str) -> None:
    assert human_duration(ns) == text


def test_a_window_past_the_limit_is_refused_in_hours_with_its_params_in_nanoseconds() -> None:
    node = {"type": "numeric", "numeric": {"input": {"type": "constant", "constant": 1.0}}}
    with pytest.raises(ComputeError) as refused:
        compile_plan(node, 100_000_000_000_000, {}, Limits(), ResultOptions())
    assert refused.value.message == (
        "windowWidth 27.8 h exceeds the limit of 24 h (SPARKWIRE_MAX_WINDOW_SECONDS)"
    )
    assert refused.value.params == {"maxWindowNanos": "86400000000000"}
