"""Recovery and shutdown, against a server of their own: a streaming query that fails is
restarted (subscribers get `JobInvalidState`, then a fresh FullResult; /readyz is 503 meanwhile),
and SIGTERM drains as docs/protocol.md says without losing an acknowledged write. The SIGTERM test
ends this module's server, so it comes last."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from tests.conftest import ServerProcess, start_server
from tests.hostile import connect, pong_message, stored_points, unique_rid, update_for, write_body
from tests.wire import (
    NANOS,
    channel_variable,
    new_id,
    ns_of,
    series_node,
    subscribe_message,
    subscription,
)

GRACE = 8  # long enough for a micro-batch to go by on a busy machine


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("recovery")
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_SHUTDOWN_GRACE": str(GRACE)})
    yield proc
    proc.stop()


async def fresh_full_result(ws: ClientConnection, sub_id: str) -> list[tuple[int, float]]:
    """After a JobInvalidState error: the next updates are errors (the query may fail again on a
    busy machine, and is restarted again) until a FullResult; never an append in between."""
    while True:
        update = await update_for(ws, sub_id)
        if update["type"] == "full":
            return numeric_points(update["full"]["result"])
        assert update["type"] == "error", update
        assert update["error"]["serializableError"]["name"] == "PersistentCompute:JobInvalidState"


def _sample(metrics_text: str, name: str) -> float:
    found = re.search(rf"^{name} ([0-9.e+]+)$", metrics_text, re.M)
    assert found is not None, f"{name} missing from /metrics"
    return float(found.group(1))


def numeric_points(result: dict[str, Any]) -> list[tuple[int, float]]:
    body = result["numeric"]
    return [(ns_of(t), v) for t, v in zip(body["timestamps"], body["values"], strict=True)]


async def test_a_failed_query_restarts_and_subscribers_get_a_fresh_full_result(
    own_server: ServerProcess,
) -> None:
    server = own_server
    rid = unique_rid("recover")
    now = time.time_ns()
    written = [(now - (10 - i) * NANOS, float(i)) for i in range(3)]
    sub = subscription(series_node(), {"x": channel_variable(rid, "p")}, 3600)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        assert (await http.post("/storage/writer/v1", json=write_body(rid, written))).status_code == 200
        ws = await connect(server.ws_url)
        sub_id = new_id()
        await ws.send(subscribe_message({sub_id: sub}))
        assert await fresh_full_result(ws, sub_id) == written

        # Break the running query the way a failing disk would: its checkpoint can no longer be written.
        offsets = server.data_dir / "checkpoints" / "stream" / "offsets"
        deadline = time.monotonic() + 120
        while not (offsets.is_dir() and (await http.get("/readyz")).status_code == 200):
            assert time.monotonic() < deadline, "the query never ran"
            await asyncio.sleep(0.2)
        shutil.rmtree(offsets)
        offsets.write_text("not a directory")
        fatal = (time.time_ns(), 100.0)
        assert (await http.post("/storage/writer/v1", json=write_body(rid, [fatal]))).status_code == 200
        written.append(fatal)

        update = await update_for(ws, sub_id)
        assert update["type"] == "error", update
        error = update["error"]["serializableError"]
        assert error["name"] == "PersistentCompute:JobInvalidState"
        assert error["statusCode"] == 500

        # Degraded: not ready, and the first restart is at most 5 s away.
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        retry_in = re.search(r"restart attempt in ([0-9.]+)s", ready.json()["reason"])
        assert retry_in is not None, ready.json()
        assert float(retry_in.group(1)) <= 5
        assert (await http.get("/persistent-compute/enabled")).status_code == 503

        # Writes go on meanwhile, and a subscription made now waits for the restart.
        during = (time.time_ns(), 200.0)
        assert (await http.post("/storage/writer/v1", json=write_body(rid, [during]))).status_code == 200
        written.append(during)
        late_ws = await connect(server.ws_url)
        late_id = new_id()
        await late_ws.send(subscribe_message({late_id: sub}))

        # rebuilt from the log, the outage included
        assert await fresh_full_result(ws, sub_id) == written
        assert await fresh_full_result(late_ws, late_id) == written
        while (await http.get("/readyz")).status_code != 200:  # ready again, once the restart is over
            await asyncio.sleep(0.2)
        # /metrics counts the loss and the restart (at least one each: a busy machine may need more)
        scraped = (await http.get("/metrics")).text
        failures = _sample(scraped, "sparkwire_stream_failures_total")
        restarts = _sample(scraped, "sparkwire_stream_restarts_total")
        assert failures >= 1 and 1 <= restarts <= failures, scraped

        # The stream goes on from where the log is, without re-announcing what was sent before.
        after = (time.time_ns(), 300.0)
        assert (await http.post("/storage/writer/v1", json=write_body(rid, [after]))).status_code == 200
        update = await update_for(ws, sub_id)
        if update["type"] == "append":
            assert numeric_points(update["append"]["result"]) == [after]
        else:  # the query failed once more meanwhile: an error, then the whole window again
            assert update["type"] == "error", update
            assert await fresh_full_result(ws, sub_id) == [*written, after]
        await ws.close()
        await late_ws.close()


async def test_sigterm_drains_and_loses_no_acknowledged_write(own_server: ServerProcess) -> None:
    server = own_server
    rid = unique_rid("drain")
    acked: list[tuple[int, float]] = []
    base = time.time_ns() - 600 * NANOS
    ws = await connect(server.ws_url)
    sub_id = new_id()
    await ws.send(
        subscribe_message({sub_id: subscription(series_node(), {"x": channel_variable(rid, "w0")}, 3600)})
    )
    await update_for(ws, sub_id)
    stop = asyncio.Event()

    async def writer(w: int) -> None:
        n = 0
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            while not stop.is_set():
                points = [(base + (n + i) * 1_000_000 + w, float(w * 1_000_000 + n + i)) for i in range(5)]
                n += 5
                try:
                    response = await http.post("/storage/writer/v1", json=write_body(rid, points, f"w{w}"))
                except httpx.HTTPError:
                    await asyncio.sleep(0.05)
                    continue
                if response.status_code == 200:
                    acked.extend(points)
                await asyncio.sleep(0.02)

    async def readiness() -> list[int]:
        """/readyz from the signal on, until the server stops answering."""
        statuses: list[int] = []
        async with httpx.AsyncClient(base_url=server.base_url, timeout=5) as http:
            while True:
                try:
                    statuses.append((await http.get("/readyz")).status_code)
                except httpx.HTTPError:
                    return statuses
                await asyncio.sleep(0.1)

    writers = [asyncio.create_task(writer(w)) for w in range(3)]
    await asyncio.sleep(2)
    server.process.send_signal(signal.SIGTERM)
    poller = asyncio.create_task(readiness())

    # shutdownNotice, then updates keep flowing through the grace period, then 1012.
    frames: list[dict[str, Any]] = []
    try:
        async for text in ws:
            frame = json.loads(text)
            frames.append(frame)
            if (pong := pong_message(frame)) is not None:
                await ws.send(pong)
    except websockets.ConnectionClosed:
        pass
    stop.set()
    await asyncio.gather(*writers)
    statuses = await poller
    assert server.process.wait(60) == 0

    kinds = [f["health"]["type"] if f["type"] == "health" else f["type"] for f in frames]
    assert "shutdownNotice" in kinds
    assert "subscriptionUpdate" in kinds[kinds.index("shutdownNotice") + 1 :], (
        "no update during the grace period"
    )
    assert 503 in statuses and 200 not in statuses[statuses.index(503) :], statuses
    assert ws.close_code == 1012

    # Every write that got a 200 is in the log, once.
    stored = stored_points(server.data_dir, rid)
    assert acked, "no write was acknowledged"
    assert all(stored[p] == 1 for p in acked), "an acknowledged write is missing or stored twice"
    assert all(count == 1 for count in stored.values())
