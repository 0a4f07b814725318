"""Routing series to live computations (compute/evaluation/routing.py), without Spark: which
computations a batch's rows reach, the series filter's changes, and that the lock the event loop
takes is never held while the catalog is read (a Redis round trip can take seconds)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.evaluation.routing import Routes
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests.wire import NANOS, channel_variable

pytestmark = pytest.mark.unit

RID = "ri.sparkwire.main.dataset.routing"


def computation(key: str, channel_name: str) -> Computation:
    node = {
        "type": "series",
        "series": {"input": {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": "x"}}}},
    }
    plan = compile_plan(
        node, 60 * NANOS, {"x": channel_variable(RID, channel_name)}, Limits(), ResultOptions()
    )
    return Computation(key, plan, None)


def series(sid: int, channel_name: str) -> SeriesInfo:
    return SeriesInfo(sid, SeriesKey.of(RID, channel_name, {}), SeriesKind.NUMERIC)


def rows(n: int) -> Rows:
    return Rows(np.arange(1, n + 1), np.arange(n) * NANOS, np.ones(n))


class Catalog:
    def __init__(self, known: list[SeriesInfo]) -> None:
        self.known = list(known)
        self.new: list[SeriesInfo] = []
        self.gate: threading.Event | None = None  # when set: polls wait on it (a slow Redis)

    def series(self) -> list[SeriesInfo]:
        return list(self.known)

    def poll_new_series(self) -> list[SeriesInfo]:
        if self.gate is not None:
            self.gate.wait(10)
        new, self.new = self.new, []
        self.known += new
        return new


def test_rows_reach_the_computations_reading_their_series_and_new_series_are_routed() -> None:
    catalog = Catalog([series(1, "a"), series(2, "b")])
    routes = Routes(catalog)
    reads_a, reads_b = computation("ka", "a"), computation("kb", "b")
    assert routes.register(reads_a) is reads_a
    assert routes.register(reads_b) is reads_b
    assert routes.register(computation("ka", "a")) is reads_a  # same key: the live one
    assert routes.series_in_use() == [1, 2]
    assert routes.series_in_use() is None  # unchanged since

    batch = {1: rows(3), 2: rows(2), 9: rows(1)}  # series 9: read by no one
    targets = routes.targets(batch)
    assert set(targets) == {reads_a, reads_b}
    assert list(targets[reads_a]) == [1] and list(targets[reads_b]) == [2]

    catalog.new = [series(3, "a")]  # a second series of channel "a" (another server wrote it)
    assert routes.series_in_use() == [1, 2, 3]
    assert list(routes.targets({3: rows(1)})[reads_a]) == [3]

    routes.remove(reads_b)
    assert routes.find("kb") is None and routes.computations() == [reads_a]
    assert routes.series_in_use() == [1, 3]
    assert reads_b not in routes.targets(batch)


def test_the_event_loops_lock_is_free_while_the_catalog_is_read() -> None:
    catalog = Catalog([series(1, "a")])
    routes = Routes(catalog)
    live = computation("ka", "a")
    routes.register(live)
    catalog.gate = threading.Event()
    polling = threading.Thread(target=routes.series_in_use)
    polling.start()
    try:
        time.sleep(0.2)  # the poll is now waiting on the "network"
        assert polling.is_alive()
        started = time.monotonic()
        assert routes.find("ka") is live  # what the event loop calls
        routes.remove(computation("other", "a"))
        assert time.monotonic() - started < 0.1
    finally:
        catalog.gate.set()
        polling.join(10)
