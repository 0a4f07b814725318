"""The on-request nodes (compute/evaluation/nodes/on_request.py) at their edges, without a server:
stale ranges at the period's start and end and over an empty input, literal ranges without a start
or an end, an integral and a running sum over no points. Their values over written points are
checked on a real server (tests/server/test_on_request.py)."""

from __future__ import annotations

import numpy as np
import pytest

from compute.evaluation.nodes.base import EvalEnv
from compute.evaluation.nodes.inputs import ChannelInput
from compute.evaluation.nodes.on_request import (
    CumulativeSum,
    Integral,
    LiteralRanges,
    PhaseUnwrap,
    StaleRanges,
)
from compute.evaluation.results import NO_START, OPEN_END, NumericPoints

pytestmark = pytest.mark.unit

S = 1_000_000_000


def env(ts: list[int], values: list[float] | None = None, start: int = 0, now: int = 10 * S) -> EvalEnv:
    points = NumericPoints(np.asarray(ts, np.int64), np.asarray(values or [1.0] * len(ts), np.float64))
    return EvalEnv({0: points}, window_start=start, now=now)


def spans(node: StaleRanges | LiteralRanges, e: EvalEnv) -> list[tuple[int, int]]:
    out = node.evaluate(e)
    return list(zip(out.starts.tolist(), out.ends.tolist(), strict=True))


def test_stale_ranges_at_the_edges_of_the_period() -> None:
    node = StaleRanges(ChannelInput(0, "numeric"), 2 * S)
    # stale from the read start (the period's start less the threshold) to the first point, between
    # 4 s and 7 s, and from 7 s on (the period ends 3 s later): open
    assert spans(node, env([3 * S, 4 * S, 7 * S], start=3 * S)) == [
        (S, 3 * S),
        (4 * S, 7 * S),
        (7 * S, OPEN_END),
    ]
    # gaps shorter than the threshold are no range
    assert spans(node, env([S, 2 * S, 3 * S], start=2 * S, now=4 * S)) == []
    # no points at all: stale over the whole read span, still open
    assert spans(node, env([], start=5 * S)) == [(3 * S, OPEN_END)]
    # a fixed end closes the last range there
    fixed = StaleRanges(ChannelInput(0, "numeric"), 2 * S, start_ns=0, end_ns=9 * S)
    assert spans(fixed, env([S, 2 * S], start=0)) == [(2 * S, 9 * S)]


def test_literal_ranges_open_at_either_side_and_merged() -> None:
    node = LiteralRanges(((None, 2 * S), (S, 3 * S), (5 * S, None)))
    assert spans(node, env([])) == [(NO_START, 3 * S), (5 * S, OPEN_END)]


def test_running_nodes_over_no_points_and_from_their_start() -> None:
    x = ChannelInput(0, "numeric")
    for node in (CumulativeSum(x, 0), Integral(x, 0, S), PhaseUnwrap(x, 360.0)):
        assert len(node.evaluate(env([])).ts) == 0
    e = env([S, 2 * S, 3 * S, 4 * S], [1.0, 2.0, 3.0, 4.0])
    assert CumulativeSum(x, 2 * S).evaluate(e).values.tolist() == [2.0, 5.0, 9.0]
    assert Integral(x, 2 * S, S).evaluate(e).values.tolist() == [0.0, 2.5, 6.0]
    assert Integral(x, 2 * S, 1_000_000).evaluate(e).values.tolist() == [0.0, 2500.0, 6000.0]
