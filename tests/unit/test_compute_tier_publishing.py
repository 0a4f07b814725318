"""The compute tier (app/tiers/compute.py) publishes outside its lock and in version order: the
batch thread's `on_changes` only queues, the publisher thread makes the Redis round trips, and a
computation's versions reach Redis in the order they were assigned (decision record 0048)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.tiers.compute import ComputeTier, _Published
from compute.evaluation import deltas
from compute.evaluation.compiler.limits import Limits
from compute.evaluation.computation import Change
from compute.evaluation.results import NumericPoints


@dataclass
class _Computation:
    key: str
    end: int = 1
    late_dropped: int = 0
    error: None = None
    outputs: dict[Any, Any] = field(default_factory=dict)  # its state now

    def snapshot(self, since: int | None) -> dict[Any, Any]:
        return dict(self.outputs)

    def late_newest_since(self, dropped: int) -> int | None:
        return None


class _Redis:
    """Records what is published; `execute` blocks until `go` is set, as a slow Redis would."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.go = threading.Event()
        self.executing = threading.Event()

    def pipeline(self, transaction: bool = False) -> _Pipe:
        return _Pipe(self)

    def close(self) -> None:
        pass


class _Pipe:
    def __init__(self, redis: _Redis) -> None:
        self.redis = redis
        self.queued: list[tuple[str, bytes]] = []

    def publish(self, channel: str, payload: bytes) -> None:
        self.queued.append((channel, payload))

    def execute(self) -> None:
        self.redis.executing.set()
        assert self.redis.go.wait(10)
        self.redis.sent += [(c, deltas.decode(p)) for c, p in self.queued]


def _tier(redis: _Redis, keys: list[str]) -> tuple[ComputeTier, dict[str, _Computation]]:
    tier = ComputeTier(engine=None, redis_url="redis://127.0.0.1:1", prefix="t", limits=Limits())  # type: ignore[arg-type]
    tier.redis.close()
    tier.redis = redis  # type: ignore[assignment]
    computations = {key: _Computation(key) for key in keys}
    for key, computation in computations.items():
        tier._running[key] = computation  # type: ignore[assignment]
        tier._published[key] = _Published(f"results:{key}", 0, {})
    return tier, computations


def test_on_changes_returns_while_redis_is_slow_and_versions_arrive_in_order() -> None:
    redis = _Redis()
    tier, computations = _tier(redis, ["a", "b"])
    publisher = threading.Thread(target=tier._publisher, daemon=True)
    publisher.start()
    change = Change(start=0, end=1, full=False)
    tier.on_changes([(computations["a"], change), (computations["b"], change)])
    assert redis.executing.wait(10)  # the publisher is inside a round trip that does not end...
    for _ in range(5):  # ...and the batch thread goes on: the lock is not held across it
        tier.on_changes([(computations["a"], change)])
    assert tier.count() == 2  # the lock is free
    redis.go.set()
    tier._outbox.put(None)
    publisher.join(10)
    assert not publisher.is_alive()
    versions = [message["v"] for channel, message in redis.sent if channel == "results:a"]
    assert versions == [1, 2, 3, 4, 5, 6]
    assert [message["v"] for channel, message in redis.sent if channel == "results:b"] == [1]
    assert tier.changes == 7


def test_snapshots_and_errors_go_through_the_same_ordered_queue() -> None:
    redis = _Redis()
    redis.go.set()
    tier, computations = _tier(redis, ["a"])
    change = Change(start=0, end=1, full=False)
    tier.on_changes([(computations["a"], change)])  # version 1
    with tier._lock:
        tier._publish_snapshot("a", bump=True)  # version 2, a snapshot
    tier.on_changes([(computations["a"], change)])  # version 3
    tier._outbox.put(None)
    tier._publisher()  # sends what is queued, then ends
    sent = [(message["t"], message["v"]) for _, message in redis.sent]
    assert [v for _, v in sent] == [1, 2, 3]
    assert sent[1][0] != sent[0][0]  # the snapshot between the two changes


def _points(*values: float) -> dict[Any, Any]:
    return {(): NumericPoints(np.arange(len(values), dtype=np.int64), np.array(values))}


def test_a_version_names_one_content() -> None:
    """An edge's mirror at (epoch, v) ignores a snapshot of (epoch, v) and applies change v + 1 to
    what it holds, so a version is never published with two contents: a snapshot asked while a
    batch is applied but not yet published is a version of its own, and a key let go and added
    again does not start over at a version its old run used (decision 0091)."""
    redis = _Redis()
    redis.go.set()
    tier, computations = _tier(redis, ["a"])
    computation = computations["a"]
    computation.outputs = _points(1.0)
    tier._published["a"] = _Published("results:a", 5, _points(1.0))
    with tier._lock:
        tier._publish_snapshot("a", bump=False)  # what version 5 holds: still version 5
        computation.outputs = _points(1.0, 2.0)  # a batch applied, its change not published yet
        tier._publish_snapshot("a", bump=False)
    tier.on_changes([(computation, Change(start=0, end=1, full=False))])
    with tier._lock:
        for _ in range(2):  # let go and added again, twice
            del tier._published["a"]
            tier._publish_snapshot("a", bump=False)
    tier._outbox.put(None)
    tier._publisher()
    sent = [
        (m["t"], m["v"], len(m["o"][0][1]["fields"]["values"]["data"]) // 8 if "o" in m else None)
        for _, m in redis.sent
    ]
    assert [(kind, v) for kind, v, _ in sent[:3]] == [("snap", 5), ("snap", 6), ("chg", 7)]
    assert [n for _, _, n in sent[:2]] == [1, 2]  # version 6 holds the batch
    runs = [v for _, v, _ in sent[3:]]
    assert len(runs) == 2 and 7 < runs[0] < runs[1]
