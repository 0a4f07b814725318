"""Connection liveness and graceful shutdown, on a server of their own (short ping and grace times)."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import websockets

from tests.conftest import ServerProcess, start_server
from tests.wire import Client, channel_variable, new_id, series_node, subscription, write_points


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("lifecycle")
    env = {"SPARKWIRE_PING_INTERVAL": "1", "SPARKWIRE_PING_TIMEOUT": "2", "SPARKWIRE_SHUTDOWN_GRACE": "10"}
    server = start_server(base / "data", base / "server.log", env=env)
    yield server
    server.stop()


async def test_idle_connections_are_pinged_and_dead_ones_closed(own_server: ServerProcess) -> None:
    silent = await Client.connect(own_server.ws_url, auto_pong=False)
    alive = await Client.connect(own_server.ws_url)  # answers pings
    ping = await asyncio.wait_for(silent.health.get(), 10)
    assert ping["type"] == "ping"
    await asyncio.wait_for(silent.ws.wait_closed(), 20)  # never answered: dropped
    assert alive.ws.close_code is None  # answered every ping: still open
    await alive.close()


async def test_sigterm_drains_then_closes_with_1012(own_server: ServerProcess) -> None:
    rid = f"ri.drain.{time.time_ns()}"
    client = await Client.connect(own_server.ws_url)
    sub_id = new_id()
    await client.subscribe({sub_id: subscription(series_node(), {"x": channel_variable(rid, "p")}, 600)})
    assert (await client.creation(sub_id))["type"] == "success"
    assert (await client.update(sub_id))["type"] == "full"
    await write_points(own_server.base_url, rid, "p", [(time.time_ns(), 1.0)])
    assert (await client.update(sub_id))["type"] == "append"  # the stream is warm for this series

    own_server.process.send_signal(signal.SIGTERM)
    notice = await asyncio.wait_for(client.health.get(), 10)
    assert notice["type"] == "shutdownNotice"
    async with httpx.AsyncClient(base_url=own_server.base_url) as http:
        assert (await http.get("/readyz")).status_code == 503
        assert (await http.get("/persistent-compute/enabled")).status_code == 503
    acknowledged = time.time_ns()
    await write_points(own_server.base_url, rid, "p", [(acknowledged, 7.0)])
    update = await client.update(sub_id, timeout=9)  # updates keep flowing in the grace period
    assert update["append"]["result"]["numeric"]["values"] == [7.0]

    await asyncio.wait_for(client.ws.wait_closed(), 20)
    assert client.ws.close_code == 1012
    assert own_server.process.wait(60) == 0  # a clean exit
    with pytest.raises((OSError, websockets.InvalidHandshake)):
        await websockets.connect(own_server.ws_url, open_timeout=2)
    db = Path(own_server.data_dir) / "log.db"
    with sqlite3.connect(db) as conn:  # the write acknowledged during the drain is on disk
        blocks = conn.execute("SELECT ts FROM blocks").fetchall()
    stamps = [t for (blob,) in blocks for t in struct.unpack(f"<{len(blob) // 8}q", blob)]
    assert stamps.count(acknowledged) == 1
