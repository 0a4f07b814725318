"""Configurable limits, against a server of their own with tight settings: connections per server
(1013), client messages per second, the handshake and first-message deadline, and the 4008 close
of a client that stops reading."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
import websockets

from tests.conftest import ServerProcess, start_server
from tests.hostile import (
    client_message_errors,
    close_code,
    connect,
    iso_now,
    ping_message,
    still_usable,
    unique_rid,
)
from tests.wire import NANOS, channel_variable, new_id, series_node, subscribe_message, subscription, ts

MAX_CONNECTIONS = 4
MESSAGES_PER_SECOND = 5
HANDSHAKE_TIMEOUT = 2
SLOW_CONSUMER_TIMEOUT = 3


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("limited")
    proc = start_server(
        base / "data",
        base / "server.log",
        env={
            "SPARKWIRE_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
            "SPARKWIRE_MAX_MESSAGES_PER_SECOND": str(MESSAGES_PER_SECOND),
            "SPARKWIRE_HANDSHAKE_TIMEOUT": str(HANDSHAKE_TIMEOUT),
            "SPARKWIRE_SLOW_CONSUMER_TIMEOUT": str(SLOW_CONSUMER_TIMEOUT),
        },
    )
    yield proc
    proc.stop()


async def test_connections_beyond_the_limit_are_closed_with_1013(limited: ServerProcess) -> None:
    held = [await connect(limited.ws_url) for _ in range(MAX_CONNECTIONS)]
    for ws in held:
        await still_usable(ws)
    extra = await connect(limited.ws_url)
    assert await close_code(extra) == 1013
    await held.pop().close()
    deadline = time.monotonic() + 30
    while True:  # the server notices the closed one, then there is room again
        retry = await connect(limited.ws_url)
        try:
            await still_usable(retry, timeout=10)
            break
        except websockets.ConnectionClosed:
            assert time.monotonic() < deadline, "no room after a connection closed"
            await asyncio.sleep(0.2)
    await retry.close()
    for ws in held:
        await still_usable(ws)  # the refused ones did not disturb the admitted ones
        await ws.close()


async def test_messages_over_the_rate_are_dropped_with_a_notice(limited: ServerProcess) -> None:
    ws = await connect(limited.ws_url)
    burst = 2 * MESSAGES_PER_SECOND
    sent = [f"2025-01-01T00:00:{i:02d}Z" for i in range(burst + 8)]
    for sent_at in sent:
        await ws.send(ping_message(sent_at))
    frames = []
    with pytest.raises(TimeoutError):
        while True:
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), 3)))
    pongs = [f for f in frames if f["type"] == "health" and f["health"]["type"] == "pong"]
    notices = client_message_errors(frames)
    assert burst <= len(pongs) < len(sent)
    assert len(notices) == 1
    assert f"over {MESSAGES_PER_SECOND} messages per second" in notices[0]["message"]
    await asyncio.sleep(2)  # the bucket refills
    await still_usable(ws)
    await ws.close()


async def test_a_client_that_keeps_flooding_is_closed_with_1008(limited: ServerProcess) -> None:
    ws = await connect(limited.ws_url)
    for _ in range(10 * MESSAGES_PER_SECOND):
        await ws.send(ping_message(iso_now()))
    assert await close_code(ws) == 1008


async def test_request_headers_must_arrive_within_the_deadline(limited: ServerProcess) -> None:
    polite = await connect(limited.ws_url)
    await still_usable(polite)  # its first message, within the deadline
    with socket.create_connection(("127.0.0.1", limited.port), timeout=60) as slow:
        slow.sendall(b"GET /persistent-compute/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n")
        assert slow.recv(1024) == b"", "the server answered a request whose headers never ended"
    await still_usable(polite)  # the deadline cut off the slow one only
    await polite.close()


async def test_the_first_message_must_arrive_within_the_deadline(limited: ServerProcess) -> None:
    silent = await connect(limited.ws_url)
    assert await close_code(silent) == 1008


async def test_a_client_that_stops_reading_is_closed_with_4008(limited: ServerProcess) -> None:
    """The client subscribes to FullResults of a big window, then stops reading while points keep
    coming. Its updates coalesce, but the socket takes nothing for longer than the slow-consumer
    timeout: the server gives up on it. When the client reads again it finds the 4008 close."""
    rid = unique_rid("stall")
    now = time.time_ns()
    history = [{"timestamp": ts(now - 600 * NANOS + i * 10_000_000), "value": float(i)} for i in range(8000)]
    body = {
        "dataSourceRid": rid,
        "batches": [{"channel": "p", "points": {"type": "double", "double": history}}],
    }
    async with httpx.AsyncClient(base_url=limited.base_url) as http:
        assert (await http.post("/storage/writer/v1", json=body)).status_code == 200
        # no client keepalive: a client that does not read would miss its pongs and give up first
        stalled = await connect(limited.ws_url, max_queue=1, compression=None, ping_interval=None)
        sub = subscription(series_node(buckets=100_000), {"x": channel_variable(rid, "p")}, 3600)
        sub["subscriptionOptions"]["allowAppends"] = False  # every update is the whole window
        await stalled.send(subscribe_message({new_id(): sub for _ in range(4)}))
        log_before = limited.log_text().count("slow consumer")
        deadline = time.monotonic() + 120
        i = 0
        while limited.log_text().count("slow consumer") == log_before:  # keep it owing, don't read
            assert time.monotonic() < deadline, "the server never gave up on the stalled client"
            point = {"timestamp": ts(time.time_ns()), "value": float(i)}
            one = {**body, "batches": [{"channel": "p", "points": {"type": "double", "double": [point]}}]}
            assert (await http.post("/storage/writer/v1", json=one)).status_code == 200
            i += 1
            await asyncio.sleep(0.2)
    assert await close_code(stalled) == 4008
