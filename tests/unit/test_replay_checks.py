"""Replay's checks without a server: the session's (app/protocol/ws_session.py) and what the
embedded log says it still holds (compute/storage/horizon.py). tests/server/test_replay.py plays
replays against a real server."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from app.protocol.ws_session import Send, Session, SessionConfig, StartSubscription
from compute.storage.contract import SeriesWrite
from compute.storage.disk_space import Retention
from compute.storage.horizon import embedded_held_from
from compute.storage.series import SeriesKey, SeriesKind
from compute.storage.sqlite.writer import DurableLog
from tests.server.test_replay import replay_sub
from tests.unit.test_session import at, principal
from tests.wire import (
    NANOS,
)

T0_NS = int(at(0).unix) * NANOS


def _replay_message(sub_id: str, start: int, end: int, **replay: Any) -> str:
    sub = replay_sub("ri.session.mine", "p", start, end)
    sub["sparkwire"]["replay"].update(replay)
    return json.dumps({"type": "subscribe", "subscribe": {sub_id: sub}})


def _session(config: SessionConfig | None = None) -> Session:
    return Session(principal(), config or SessionConfig(), at(0))


def _frames(actions: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(a.frame) for a in actions if isinstance(a, Send)]


def test_a_replay_is_created_only_once_its_start_succeeded() -> None:
    session = _session()
    now = at(10)
    actions = session.receive(_replay_message("r1", T0_NS - 60 * NANOS, T0_NS - 30 * NANOS, speed=2), now)
    assert _frames(actions) == []  # no creation yet: the start reads the log first
    [start] = [a for a in actions if isinstance(a, StartSubscription)]
    assert start.replay is not None and start.replay.speed == 2 and start.replay.then == "stop"
    assert start.replay.start.to_nanos() == T0_NS - 60 * NANOS
    [frame] = _frames(session.subscription_started("r1"))
    assert frame["subscriptionCreation"]["creation"]["type"] == "success"
    assert session.subscription_started("r1") == []  # answered once


def test_a_replay_whose_start_fails_gets_a_creation_error() -> None:
    from compute.evaluation.errors import ComputeError

    session = _session()
    session.receive(_replay_message("r1", T0_NS - 60 * NANOS, T0_NS - 30 * NANOS), at(1))
    refusal = ComputeError("ReplayOutOfRange", "older than what the log still holds")
    [frame] = _frames(session.subscription_failed("r1", refusal))
    creation = frame["subscriptionCreation"]["creation"]
    assert creation["type"] == "error"
    assert creation["error"]["serializableError"]["name"] == "PersistentCompute:ReplayOutOfRange"
    assert session.live == []


def test_an_edge_refuses_replay_saying_it_needs_role_all() -> None:
    session = _session(SessionConfig(replay_available=False))
    actions = session.receive(_replay_message("r1", T0_NS - 60 * NANOS, T0_NS - 30 * NANOS), at(1))
    assert not [a for a in actions if isinstance(a, StartSubscription)]
    [frame] = _frames(actions)
    error = frame["subscriptionCreation"]["creation"]["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:ReplayUnavailable"
    assert "--role all" in error["message"]


def test_retention_counts_the_window_before_the_start() -> None:
    session = _session(SessionConfig(retention_s=3600))
    now = at(0)
    # start - window (20 s) just inside the hour the log keeps: accepted
    inside = T0_NS - 3600 * NANOS + 21 * NANOS
    actions = session.receive(_replay_message("in", inside, inside + NANOS), now)
    assert [a for a in actions if isinstance(a, StartSubscription)]
    # start inside, start - window outside: refused
    outside = T0_NS - 3600 * NANOS + 19 * NANOS
    [frame] = _frames(session.receive(_replay_message("out", outside, outside + NANOS), now))
    error = frame["subscriptionCreation"]["creation"]["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:ReplayOutOfRange"
    assert "retention" in error["message"] and "heldFrom" in error["params"]


def test_the_embedded_log_tells_where_its_byte_cap_pruned_to(tmp_path: Path) -> None:
    key = SeriesKey.of("ri.held", "p", {})

    def write(log: DurableLog, t: int) -> None:
        log.submit([SeriesWrite(key, SeriesKind.NUMERIC, [t, t + 1], [1.0, 2.0])]).result(10)

    kept = DurableLog(tmp_path / "kept.db", retention=Retention(0, 0))
    for t in (100, 200, 300):
        write(kept, t)
    assert embedded_held_from(kept.path, 0) is None  # nothing pruned
    kept.close()

    capped = DurableLog(tmp_path / "capped.db", retention=Retention(0, 1))  # every block but the newest
    for t in (100, 200, 300):
        write(capped, t)
    deadline = time.monotonic() + 15
    while embedded_held_from(capped.path, 1) != 300:
        assert time.monotonic() < deadline, "the byte cap never pruned"
        time.sleep(0.1)
    capped.close()


def test_a_merged_oldest_block_is_not_taken_for_a_pruned_one(tmp_path: Path) -> None:
    """Merged blocks (decision 0032) keep their last member's seq: the first member's says nothing
    was pruned before them, so a replay reaching back to the first point is not refused."""
    key = SeriesKey.of("ri.held", "p", {})
    log = DurableLog(tmp_path / "merged.db", retention=Retention(0, 1 << 30))  # a cap far away
    for t in (100, 200, 300):
        log.submit([SeriesWrite(key, SeriesKind.NUMERIC, [t, t + 1], [1.0, 2.0])]).result(10)
    log.close()
    with sqlite3.connect(
        tmp_path / "merged.db"
    ) as db:  # blocks 1 and 2 as one merged row, as the writer merges
        db.execute("DELETE FROM blocks WHERE seq = 1")
        db.execute("UPDATE blocks SET first_seq = 1 WHERE seq = 2")
    assert embedded_held_from(tmp_path / "merged.db", 1 << 30) is None
    with sqlite3.connect(tmp_path / "merged.db") as db:  # now the first member is gone: pruned
        db.execute("UPDATE blocks SET first_seq = NULL WHERE seq = 2")
    assert embedded_held_from(tmp_path / "merged.db", 1 << 30) == 200
