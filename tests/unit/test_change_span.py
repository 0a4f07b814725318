"""An AppendResult's span never ends before it starts. A point stamped ahead of the server's clock (a
writer whose clock runs ahead, a timestamp written ahead) can start an open range or become the last
value after the micro-batch's `now`; the append must still reach it (start <= end, end at or after
the point), as a client merging it requires (tests/client_view.py checks start <= end)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests import node_json as n
from tests.wire import NANOS, channel_variable

pytestmark = pytest.mark.unit

RID = "ri.sparkwire.main.dataset.change-span"
SID = 3
MS = 1_000_000
NOW = 1_800_000_000 * NANOS
X = n.numeric_series(n.num("x"))
NODES: dict[str, Any] = {
    "open range": n.ranges(n.threshold(n.num("x"), "GREATER_THAN", n.literal(0.5))),
    "last point": n.value("lastPoint", X),
    "raw points": n.series(X),
}


def computation(node: Any) -> Computation:
    plan = compile_plan(node, 60 * NANOS, {"x": channel_variable(RID, "x")}, Limits(), ResultOptions())
    c = Computation("span", plan, None)
    c.route(SeriesInfo(SID, SeriesKey.of(RID, "x", {}), SeriesKind.NUMERIC))
    c.load_backfill({}, NOW - 10 * NANOS)
    return c


def rows(seq0: int, ts_ms: list[int], values: list[float]) -> Rows:
    ts = NOW + np.asarray(ts_ms, np.int64) * MS
    return Rows(np.arange(seq0, seq0 + len(ts)), ts, np.asarray(values, np.float64))


@pytest.mark.parametrize("name", list(NODES))
def test_a_point_stamped_ahead_of_the_clock_gives_an_append_that_reaches_it(name: str) -> None:
    c = computation(NODES[name])
    first = c.apply_batch({SID: rows(1, [-2000, -1000], [0.0, 0.0])}, NOW - 500 * MS)
    assert first is None or first.start <= first.end  # no range yet: nothing changed
    # The batch's clock is NOW; the point that starts the range (or is the newest) is 3 ms ahead.
    change = c.apply_batch({SID: rows(3, [3], [1.0])}, NOW)
    assert change is not None
    assert change.start <= change.end, (change.start - NOW, change.end - NOW)
    assert change.end >= NOW + 3 * MS
    assert change.start <= NOW + 3 * MS
