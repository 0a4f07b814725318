"""Replay (docs/extensions.md): a subscription re-watches a past period of its series from the log,
against a real server (real Spark, the embedded log and the Kafka log), plus the session's own
checks (app/protocol/ws_session.py) and what the logs say they still hold (compute/storage/horizon.py)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from datetime import datetime
from typing import Any

import websockets
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from compute.storage.series import SeriesKey
from compute.storage.series_ids import series_id
from schemas.server import server_message_adapter
from tests.client_view import ResultView
from tests.conftest import KAFKA_LOG_SERVER_TOPIC, ServerProcess
from tests.kafka_broker import KafkaBroker
from tests.wire import (
    NANOS,
    Client,
    channel_variable,
    full_entries,
    new_id,
    series_node,
    subscription,
    ts,
    write_points,
)

WINDOW_S = 20.0
WINDOW_NS = int(WINDOW_S * NANOS)
MS = 1_000_000


def unique_rid(name: str) -> str:
    return f"ri.replay.{name}.{time.time_ns()}"


class ReplayClient(Client):
    """tests/wire.py's client, which also takes `replayEnded` (a Sparkwire message a Nominal client
    never receives: it never asks for a replay), checked against schemas/server.py (the AsyncAPI
    document's model). Every other frame must still decode as a strict Nominal client decodes it.
    `events` keeps each subscription's updates and its replayEnded in the order they arrived."""

    def __init__(self, ws: websockets.ClientConnection) -> None:
        self.events: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.ended: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        super().__init__(ws, auto_pong=True, strict=True)

    @classmethod
    async def open(cls, ws_url: str) -> ReplayClient:
        return cls(await websockets.connect(ws_url, max_size=None))

    def _check(self, text: str, frame: dict[str, Any]) -> None:
        if frame["type"] != "replayEnded":
            super()._check(text, frame)
            return
        server_message_adapter.validate_json(text)  # as schemas/server.py (AsyncAPI) says
        assert set(frame["replayEnded"]) == {"subscriptionId", "then"}, frame

    async def _file(self, frame: dict[str, Any]) -> None:
        if frame["type"] == "replayEnded":
            body = frame["replayEnded"]
            self.frames.append(frame)
            self.events.setdefault(body["subscriptionId"], []).append(("ended", body))
            self.ended.setdefault(body["subscriptionId"], asyncio.Queue()).put_nowait(body)
            return
        if frame["type"] == "subscriptionUpdate":
            body = frame["subscriptionUpdate"]
            self.events.setdefault(body["subscriptionId"], []).append(("update", body["update"]))
        await super()._file(frame)

    async def replay_ended(self, sub_id: str, timeout: float = 60) -> dict[str, Any]:
        q = self.ended.setdefault(sub_id, asyncio.Queue())
        return await asyncio.wait_for(q.get(), timeout)

    async def round_trip(self) -> None:
        """A ping answered: the server has handled every message sent before it."""
        sent_at = _iso_now()
        await self.ws.send(json.dumps({"type": "ping", "ping": {"sentAt": sent_at}}))
        while True:
            health = await asyncio.wait_for(self.health.get(), 30)
            if health["type"] == "pong":
                return


def _iso_now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).isoformat()


def replay_sub(
    rid: str,
    channel: str,
    start: int,
    end: int,
    *,
    speed: float | None = None,
    then: str | None = None,
    min_delay_ms: int = 0,
) -> dict[str, Any]:
    sub = subscription(
        series_node(), {"x": channel_variable(rid, channel)}, WINDOW_S, min_delay_ms=min_delay_ms
    )
    replay: dict[str, Any] = {"start": ts(start), "end": ts(end)}
    if speed is not None:
        replay["speed"] = speed
    if then is not None:
        replay["then"] = then
    sub["sparkwire"] = {"replay": replay}
    return sub


def recorded_run(base: int, seconds: int, hz: int = 5) -> list[tuple[int, float]]:
    """A test run: `seconds` of points at `hz`, from `base`."""
    step = NANOS // hz
    return [(base + i * step, float(i % 23) + i / 1000) for i in range(seconds * hz)]


def in_window(points: list[tuple[int, float]], end: int) -> list[tuple[int, float]]:
    """What a computation over the window ending at `end` holds: ts in [end - window, end]."""
    return [(t, v) for t, v in points if end - WINDOW_NS <= t <= end]


def events_until_ended(client: ReplayClient, sub_id: str) -> list[tuple[str, dict[str, Any]]]:
    events = client.events.get(sub_id, [])
    kinds = [kind for kind, _ in events]
    assert kinds.count("ended") == 1, kinds
    return events[: kinds.index("ended") + 1]


async def write_recorded_run(server: ServerProcess, rid: str, channel: str, seconds: int = 60) -> list:
    """`seconds` of points ending 5 minutes ago."""
    base = time.time_ns() - 300 * NANOS - seconds * NANOS
    points = recorded_run(base, seconds)
    await write_points(server.base_url, rid, channel, points)
    return points


async def creation_error(client: ReplayClient, sub_id: str) -> dict[str, Any]:
    creation = await client.creation(sub_id)
    assert creation["type"] == "error", creation
    error: dict[str, Any] = creation["error"]["serializableError"]
    return error


# -- against the embedded log ------------------------------------------------------------------------
async def test_replay_as_fast_as_possible_starts_at_the_window_of_start_and_ends_at_end(
    server: ServerProcess,
) -> None:
    rid = unique_rid("fast")
    points = await write_recorded_run(server, rid, "speed")
    base = points[0][0]
    start = base + 25_050 * MS  # between two points
    end = points[250][0]  # a point's own timestamp: it is in the period
    client = await ReplayClient.open(server.ws_url)
    try:
        sub_id = new_id()
        await client.subscribe({sub_id: replay_sub(rid, "speed", start, end)})
        assert (await client.creation(sub_id))["type"] == "success"
        first = await client.update(sub_id)
        assert first["type"] == "full"
        # The FullResult of the window ending at replay.start, exactly.
        assert full_entries(first) == ("numeric", in_window(points, start))
        ended = await client.replay_ended(sub_id)
        assert ended == {"subscriptionId": sub_id, "then": "stop"}
        events = events_until_ended(client, sub_id)
        updates = [u for kind, u in events if kind == "update"]
        assert updates[0] == first
        appends = updates[1:]
        assert len(appends) >= 2, "the period arrives as appends, as if live"
        assert all(u["type"] == "append" for u in appends)
        view = ResultView(WINDOW_NS)
        for update in updates:
            view.apply(update)
        # FullResult + appends = a computation over the window ending at replay.end, point by point.
        assert view.latest_end == end
        assert view.ungrouped().normalized() == in_window(points, end)
        assert events[-1][0] == "ended", "replayEnded comes after the last update"
        # then: stop: nothing more, even when the series gets new points.
        await write_points(server.base_url, rid, "speed", [(time.time_ns(), 1.5)])
        await asyncio.sleep(2.0)
        assert len(client.events[sub_id]) == len(events)
    finally:
        await client.close()


async def test_replay_then_live_joins_the_shared_computation(server: ServerProcess) -> None:
    rid = unique_rid("live")
    points = await write_recorded_run(server, rid, "live")
    now = time.time_ns()
    recent = [(now - 3 * NANOS, 101.0), (now - 2 * NANOS, 102.0), (now - NANOS, 103.0)]
    await write_points(server.base_url, rid, "live", recent)
    start, end = points[100][0], points[200][0]
    client = await ReplayClient.open(server.ws_url)
    try:
        sub_id = new_id()
        await client.subscribe({sub_id: replay_sub(rid, "live", start, end, then="live")})
        assert (await client.creation(sub_id))["type"] == "success"
        first = await client.update(sub_id)
        assert full_entries(first) == ("numeric", in_window(points, start))
        assert await client.replay_ended(sub_id) == {"subscriptionId": sub_id, "then": "live"}
        replayed = [u for kind, u in events_until_ended(client, sub_id) if kind == "update"]
        view = ResultView(WINDOW_NS)
        for update in replayed:
            view.apply(update)
        assert view.ungrouped().normalized() == in_window(points, end)
        for _ in replayed[1:]:  # the first was taken above
            await client.update(sub_id)  # drained: what follows came after replayEnded
        live_full = await client.update(sub_id)
        assert live_full["type"] == "full"
        assert full_entries(live_full) == ("numeric", recent)  # the live window, not the replay's
        fresh = (time.time_ns(), 104.0)
        await write_points(server.base_url, rid, "live", [fresh])
        live = ResultView(WINDOW_NS)
        live.apply(live_full)
        deadline = time.monotonic() + 30
        while fresh not in live.ungrouped().normalized():
            assert time.monotonic() < deadline, "the live append never came"
            update = await client.update(sub_id, timeout=30)
            assert update["type"] == "append"
            live.apply(update)
        assert live.ungrouped().normalized() == [*recent, fresh]
    finally:
        await client.close()


async def test_replay_at_10x_takes_about_a_tenth_of_the_period(server: ServerProcess) -> None:
    rid = unique_rid("speed10")
    points = await write_recorded_run(server, rid, "s", seconds=30)
    start, end = points[25][0], points[25][0] + 20 * NANOS  # a 20 s period
    client = await ReplayClient.open(server.ws_url)
    try:
        sub_id = new_id()
        await client.subscribe({sub_id: replay_sub(rid, "s", start, end, speed=10)})
        assert (await client.creation(sub_id))["type"] == "success"
        first = await client.update(sub_id)
        began = time.monotonic()
        assert full_entries(first) == ("numeric", in_window(points, start))
        await client.replay_ended(sub_id, timeout=60)
        took = time.monotonic() - began
        assert took >= 1.5, f"20 s at 10x ended after {took:.2f} s"
        assert took < 15, f"20 s at 10x took {took:.2f} s"
        arrivals = client.arrivals[sub_id]
        assert len(arrivals) >= 5
        assert arrivals[-1] - arrivals[1] >= 1.0, "the appends are spread over the replay, not sent at once"
        view = ResultView(WINDOW_NS)
        for kind, update in events_until_ended(client, sub_id):
            if kind == "update":
                view.apply(update)
        assert view.ungrouped().normalized() == in_window(points, end)
    finally:
        await client.close()


async def test_min_delay_paces_a_replay_like_a_live_subscription(server: ServerProcess) -> None:
    rid = unique_rid("paced")
    points = await write_recorded_run(server, rid, "m", seconds=30)
    start, end = points[25][0], points[25][0] + 20 * NANOS
    client = await ReplayClient.open(server.ws_url)
    try:
        sub_id = new_id()
        sub = replay_sub(rid, "m", start, end, speed=10, min_delay_ms=500)
        await client.subscribe({sub_id: sub})
        assert (await client.creation(sub_id))["type"] == "success"
        await client.replay_ended(sub_id, timeout=60)
        arrivals = client.arrivals[sub_id]
        gaps = [b - a for a, b in itertools.pairwise(arrivals)]
        assert gaps and min(gaps) >= 0.45, gaps  # never faster than minDelay
        view = ResultView(WINDOW_NS)
        for kind, update in events_until_ended(client, sub_id):
            if kind == "update":
                view.apply(update)
        assert view.ungrouped().normalized() == in_window(points, end)  # coalesced, nothing lost
    finally:
        await client.close()


async def test_unsubscribe_mid_replay_stops_it(server: ServerProcess) -> None:
    rid = unique_rid("stop")
    points = await write_recorded_run(server, rid, "u")
    start, end = points[0][0] + 20 * NANOS, points[-1][0]  # 40 s at 1x
    client = await ReplayClient.open(server.ws_url)
    try:
        sub_id = new_id()
        await client.subscribe({sub_id: replay_sub(rid, "u", start, end, speed=1)})
        assert (await client.creation(sub_id))["type"] == "success"
        assert (await client.update(sub_id))["type"] == "full"
        assert (await client.update(sub_id, timeout=10))["type"] == "append"  # it is playing
        await client.ws.send(json.dumps({"type": "unsubscribe", "unsubscribe": [sub_id]}))
        await client.round_trip()  # the unsubscribe is handled
        await asyncio.sleep(0.3)
        seen = len(client.events[sub_id])
        await asyncio.sleep(2.5)  # at 1x, appends would come every 100-200 ms
        assert len(client.events[sub_id]) == seen
        assert sub_id not in client.ended
    finally:
        await client.close()


async def test_closing_the_connection_mid_replay_leaves_the_server_serving(server: ServerProcess) -> None:
    rid = unique_rid("close")
    points = await write_recorded_run(server, rid, "c", seconds=30)
    client = await ReplayClient.open(server.ws_url)
    sub_id = new_id()
    await client.subscribe({sub_id: replay_sub(rid, "c", points[0][0], points[-1][0], speed=1)})
    assert (await client.update(sub_id))["type"] == "full"
    await client.close()
    # The next replay on a new connection is served as usual.
    other = await ReplayClient.open(server.ws_url)
    try:
        sub_id = new_id()
        await other.subscribe({sub_id: replay_sub(rid, "c", points[50][0], points[100][0])})
        assert full_entries(await other.update(sub_id)) == ("numeric", in_window(points, points[50][0]))
        await other.replay_ended(sub_id)
    finally:
        await other.close()
    assert "Traceback" not in server.log_text()[-20000:]


async def test_replays_out_of_range_are_refused_at_creation(server: ServerProcess) -> None:
    rid = unique_rid("refused")
    now = time.time_ns()
    client = await ReplayClient.open(server.ws_url)
    try:
        cases = {
            "equal": (now - 60 * NANOS, now - 60 * NANOS, "must be after replay.start"),
            "backwards": (now - 60 * NANOS, now - 120 * NANOS, "must be after replay.start"),
            "future": (now + 3600 * NANOS, now + 7200 * NANOS, "in the future"),
            # The server keeps 7 days (the embedded log's default retention).
            "retention": (now - 8 * 86400 * NANOS, now - 7 * 86400 * NANOS, "retention"),
        }
        ids = {name: new_id() for name in cases}
        await client.subscribe(
            {ids[name]: replay_sub(rid, "x", start, end) for name, (start, end, _) in cases.items()}
        )
        for name, (_, _, says) in cases.items():
            error = await creation_error(client, ids[name])
            assert error["name"] == "PersistentCompute:ReplayOutOfRange", error
            assert says in error["message"], error
            assert error["statusCode"] == 400
            assert ("heldFrom" in error["params"]) == (name == "retention"), error
    finally:
        await client.close()


# -- against the shared log (Kafka) -----------------------------------------------------------------
async def replayed_whole(client: ReplayClient, rid: str, points: list[tuple[int, float]]) -> tuple[int, int]:
    """Replays points 100 to 220 of the run on a shared log (history read by Spark batch jobs): the
    FullResult holds the window of its start, the updates bring it to the window of its end. The
    replay's start and end."""
    start, end = points[100][0], points[220][0]
    sub_id = new_id()
    await client.subscribe({sub_id: replay_sub(rid, "r", start, end)})
    assert (await client.creation(sub_id, timeout=120))["type"] == "success"
    first = await client.update(sub_id)
    assert full_entries(first) == ("numeric", in_window(points, start))
    await client.replay_ended(sub_id)
    view = ResultView(WINDOW_NS)
    updates = [u for kind, u in events_until_ended(client, sub_id) if kind == "update"]
    assert len(updates) >= 3
    for update in updates:
        view.apply(update)
    assert view.ungrouped().normalized() == in_window(points, end)
    return start, end


async def test_replay_from_the_kafka_log_and_refused_once_deleted(
    kafka_log_server: ServerProcess, kafka_log: KafkaBroker
) -> None:
    """Then Kafka deletes the run's records, as retention does (DeleteRecords moves the partition's
    log start offset past them): the same replay is refused by name, with where the log is whole
    from, instead of replaying a hole. This deletes records of the session's Kafka-log server,
    only those of one partition written before this point."""
    rid = unique_rid("kafka")
    points = await write_recorded_run(kafka_log_server, rid, "r")
    client = await ReplayClient.open(kafka_log_server.ws_url)
    try:
        start, end = await replayed_whole(client, rid, points)

        partition = series_id(SeriesKey.of(rid, "r", {})) % 4  # the server's 4 partitions
        deleted = await asyncio.to_thread(delete_records_before_now, kafka_log.bootstrap, partition)
        assert deleted > 0
        await write_points(kafka_log_server.base_url, rid, "r", [(time.time_ns(), 1.0)])  # a record left
        again = new_id()
        await client.subscribe({again: replay_sub(rid, "r", start, end)})
        error = await creation_error(client, again)
        assert error["name"] == "PersistentCompute:ReplayOutOfRange", error
        assert "older than what the log still holds" in error["message"], error
        held = datetime.fromisoformat(error["params"]["heldFrom"].replace("Z", "+00:00"))
        # whole from the first record left (appended after the run) plus the stamping margin
        assert held.timestamp() > end / NANOS + 60, error
    finally:
        await client.close()


def delete_records_before_now(bootstrap: str, partition: int) -> int:
    """Delete every record of the Kafka-log server's partition written so far; how many offsets."""
    tp = TopicPartition(KAFKA_LOG_SERVER_TOPIC, partition)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-replay-horizon"})
    try:
        low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(KAFKA_LOG_SERVER_TOPIC, partition, high)]).values():
        future.result(timeout=30)
    return int(high - low)


# -- the session's checks (no server) ----------------------------------------------------------------


# -- what the embedded log still holds (no server) ---------------------------------------------------
