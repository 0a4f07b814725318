"""The nodes Nominal computes on request and refuses to stream (compute/evaluation/nodes/on_request.py)
on a real server: points written over HTTP, polled through nominal-api's generated ComputeService
client, each value checked against a reference computed from the written points with the
definition nominal-api's docstring gives (scipy's cumulative trapezoid for the integral, a plain
loop for the unwrap). A live subscription to these nodes is still refused with Nominal's type
(tests/server/test_compute_errors.py)."""

from __future__ import annotations

import math
import time
import uuid
from typing import Any

import httpx
import numpy as np
import pytest
from scipy.integrate import cumulative_trapezoid

from tests import node_json as n
from tests.conftest import ServerProcess
from tests.server.test_compute_service import TOKEN, ns, request, secured, service
from tests.wire import NANOS, write_points

__all__ = ["secured"]  # the module-scoped server with a tokens file, shared with test_compute_service

MS = 1_000_000
Json = dict[str, Any]


def _timestamp(t: int) -> Json:
    return {"type": "literal", "literal": {"seconds": t // NANOS, "nanos": t % NANOS}}


@pytest.fixture(scope="module")
async def written(secured: ServerProcess) -> Json:
    """A ramp, a phase wrapping at 360 degrees, and a channel with two gaps."""
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 600) * NANOS
    ramp = [(t0 + i * 10 * MS, 0.5 * i + (i % 7)) for i in range(2000)]
    phase = [(t0 + i * 10 * MS, (7.5 * i) % 360.0) for i in range(500)]
    gappy_ts = [t0 + i * 100 * MS for i in range(20)]  # 0 .. 1.9 s
    gappy_ts += [t0 + 5 * NANOS + i * 100 * MS for i in range(10)]  # a 3.1 s gap, then 5 .. 5.9 s
    gappy = [(t, 1.0) for t in gappy_ts]
    async with httpx.AsyncClient(
        base_url=secured.base_url, headers={"Authorization": TOKEN}, timeout=120
    ) as c:
        for name, points in (("ramp", ramp), ("phase", phase), ("gappy", gappy)):
            await write_points(secured.base_url, rid, name, points, client=c)
    return {"rid": rid, "t0": t0, "ramp": ramp, "phase": phase, "gappy": gappy}


def _points(answer: Any) -> list[tuple[int, float]]:
    assert answer.numeric is not None, answer
    return [(ns(t), v) for t, v in zip(answer.numeric.timestamps, answer.numeric.values, strict=True)]


def _ranges(answer: Any) -> list[tuple[int, int | None]]:
    assert answer.range is not None, answer
    return [(ns(r.start), None if r.end is None else ns(r.end)) for r in answer.range]


def test_cumulative_sum_and_integral_from_their_start(secured: ServerProcess, written: Json) -> None:
    rid, t0, ramp = written["rid"], written["t0"], written["ramp"]
    client = service(secured.base_url)
    begin = t0 + 2 * NANOS + 5 * MS  # between two points: the sums start at the next one
    start, end = t0, t0 + 8 * NANOS  # 800 points in the period, fewer than the 1,000 buckets
    inside = [(t, v) for t, v in ramp if begin <= t < end]
    summed = n.union("cumulativeSum", {"input": n.channel(rid, "ramp"), "startTimestamp": _timestamp(begin)})
    got = _points(client.compute(TOKEN, request(n.series(n.numeric_series(summed)), start, end)))
    running, want = 0.0, []
    for t, v in inside:
        running += v
        want.append((t, running))
    assert [t for t, _ in got] == [t for t, _ in want]
    assert np.allclose([v for _, v in got], [v for _, v in want], rtol=1e-12)

    for unit, seconds in (("SECONDS", 1.0), ("MILLISECONDS", 1e-3)):
        integral = n.union(
            "integral",
            {"input": n.channel(rid, "ramp"), "startTimestamp": _timestamp(begin), "timeUnit": unit},
        )
        got = _points(client.compute(TOKEN, request(n.series(n.numeric_series(integral)), start, end)))
        since = np.array([t - inside[0][0] for t, _ in inside], np.int64)  # exact before scaling
        reference = cumulative_trapezoid([v for _, v in inside], since / NANOS / seconds, initial=0)
        assert [t for t, _ in got] == [t for t, _ in inside]
        assert np.allclose([v for _, v in got], reference, rtol=1e-9, atol=1e-9)


def test_phase_unwrap_removes_the_wraps(secured: ServerProcess, written: Json) -> None:
    rid, t0, phase = written["rid"], written["t0"], written["phase"]
    node = n.union("phaseUnwrap", {"input": n.channel(rid, "phase"), "period": n.literal(360.0)})
    got = _points(
        service(secured.base_url).compute(
            TOKEN, request(n.series(n.numeric_series(node)), t0, t0 + 5 * NANOS)
        )
    )
    # the docstring's rule, step by step: a jump of more than half the period gets whole periods added
    want, offset, previous = [], 0.0, None
    for t, v in phase:
        if previous is not None:
            step = v - previous
            if abs(step) > 180.0:
                offset -= 360.0 * round(step / 360.0)
        previous = v
        want.append((t, v + offset))
    assert [t for t, _ in got] == [t for t, _ in want]
    assert np.allclose([v for _, v in got], [v for _, v in want])
    assert math.isclose(got[-1][1], 7.5 * 499)  # one straight line after unwrapping


def test_stale_ranges_and_literal_ranges(secured: ServerProcess, written: Json) -> None:
    rid, t0 = written["rid"], written["t0"]
    client = service(secured.base_url)
    start, end = t0, t0 + 8 * NANOS
    stale = n.union(
        "numericStaleRangesV2",
        {
            "input": n.channel(rid, "gappy"),
            "threshold": {"type": "seconds", "seconds": {"seconds": n.literal(1)}},
        },
    )
    got = _ranges(client.compute(TOKEN, request(n.ranges(stale), start, end)))
    # the gap 1.9 s -> 5 s, and from the last point (5.9 s) to the period's end, still stale there
    assert got == [(t0 + 1900 * MS, t0 + 5 * NANOS), (t0 + 5900 * MS, None)]
    literal = n.union(
        "literalRanges",
        {
            "literalRanges": [
                {"startTimestamp": _timestamp(t0 + NANOS), "endTimestamp": _timestamp(t0 + 2 * NANOS)},
                {"startTimestamp": _timestamp(t0 + 3 * NANOS)},
            ]
        },
    )
    assert _ranges(client.compute(TOKEN, request(n.ranges(literal), start, end))) == [
        (t0 + NANOS, t0 + 2 * NANOS),
        (t0 + 3 * NANOS, None),
    ]
