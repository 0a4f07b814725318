"""One client that stops reading, among 100 that read: it must not grow the server's memory nor
delay anyone else. Its updates coalesce instead of queueing (app/transport/connection.py,
app/fanout/hub.py)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

import httpx
from websockets.asyncio.client import ClientConnection

from tests.conftest import ServerProcess
from tests.hostile import connect, pong_message, unique_rid, write_body
from tests.wire import NANOS, channel_variable, new_id, series_node, subscribe_message, subscription

READERS = 99
HEAVY_POINTS = 8_000  # ~0.45 MB per FullResult
STALLED_SUBSCRIPTIONS = 16  # they share one computation: owing more costs the server no more work
PHASE_SECONDS = 20.0
MIB = 1 << 20


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class Reader:
    """A light client: records when each written value first reaches it."""

    def __init__(self, ws: ClientConnection, sub_id: str) -> None:
        self.ws = ws
        self.sub_id = sub_id
        self.arrivals: dict[float, float] = {}
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for text in self.ws:
            now = time.monotonic()
            frame = json.loads(text)
            if (pong := pong_message(frame)) is not None:
                await self.ws.send(pong)  # the server pings clients that stay silent
            if frame["type"] != "subscriptionUpdate":
                continue
            update = frame["subscriptionUpdate"]["update"]
            result = update[update["type"]]["result"]
            for value in result["numeric"]["values"]:
                self.arrivals.setdefault(value, now)


class Witness:
    """Reads the heavy FullResults a stalled subscription would be owed, counting their bytes."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.bytes = 0
        self.frames = 0
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for text in self.ws:
            if '"subscriptionUpdate"' in text:
                self.bytes += len(text)
                self.frames += 1
            elif (pong := pong_message(json.loads(text))) is not None:
                await self.ws.send(pong)


async def write_light(http: httpx.AsyncClient, rid: str, first: int, seconds: float) -> dict[float, float]:
    """One point every 0.5 s; value = sequence number; returns value -> time the write was sent."""
    sent: dict[float, float] = {}
    k = first
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sent[float(k)] = time.monotonic()
        response = await http.post("/storage/writer/v1", json=write_body(rid, [(time.time_ns(), float(k))]))
        assert response.status_code == 200
        k += 1
        await asyncio.sleep(0.5)
    return sent


async def write_heavy(http: httpx.AsyncClient, rid: str, stop: asyncio.Event) -> None:
    i = 0
    while not stop.is_set():
        body = write_body(rid, [(time.time_ns(), float(i))])
        assert (await http.post("/storage/writer/v1", json=body)).status_code == 200
        i += 1
        await asyncio.sleep(1)


async def latencies(readers: list[Reader], sent: dict[float, float], wait: float = 60) -> list[float]:
    """Write -> arrival for every value at every reader (each reader must get every value)."""
    deadline = time.monotonic() + wait
    for reader in readers:
        while missing := [v for v in sent if v not in reader.arrivals]:
            assert time.monotonic() < deadline, f"a reader never got values {missing[:5]}"
            await asyncio.sleep(0.1)
    return [reader.arrivals[v] - t for reader in readers for v, t in sent.items()]


async def test_a_stalled_client_among_100_costs_no_memory_and_delays_no_one(server: ServerProcess) -> None:
    light, heavy = unique_rid("light"), unique_rid("heavy")
    now = time.time_ns()
    history = [(now - 1800 * NANOS + i * 100_000_000, float(i)) for i in range(HEAVY_POINTS)]
    light_sub = subscription(series_node(), {"x": channel_variable(light, "p")}, 3600)
    heavy_sub = subscription(series_node(buckets=100_000), {"x": channel_variable(heavy, "p")}, 3600)
    heavy_sub["subscriptionOptions"]["allowAppends"] = False  # every update: the whole window

    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        assert (await http.post("/storage/writer/v1", json=write_body(heavy, history))).status_code == 200
        readers = []
        for _ in range(READERS):
            ws = await connect(server.ws_url)
            sub_id = new_id()
            await ws.send(subscribe_message({sub_id: light_sub}))
            readers.append(Reader(ws, sub_id))
        witness = Witness(await connect(server.ws_url))
        await witness.ws.send(subscribe_message({new_id(): heavy_sub}))
        stop_heavy = asyncio.Event()
        heavy_writer = asyncio.create_task(write_heavy(http, heavy, stop_heavy))
        await latencies(readers, await write_light(http, light, 0, 5))  # warm-up: all subscribed, served

        # Phase A: everyone reads.
        sent_a = await write_light(http, light, 1000, PHASE_SECONDS)
        lat_a = await latencies(readers, sent_a)

        # Phase B: one more client subscribes to the heavy window 16 times and never reads.
        stalled = await connect(server.ws_url, max_queue=1, compression=None, ping_interval=None)
        await stalled.send(subscribe_message({new_id(): heavy_sub for _ in range(STALLED_SUBSCRIPTIONS)}))
        await asyncio.sleep(5)  # its socket buffers fill
        rss_start, witnessed_start = rss_bytes(server.process.pid), witness.bytes
        samples = []
        phase_b = asyncio.create_task(write_light(http, light, 2000, PHASE_SECONDS))
        while not phase_b.done():
            samples.append(rss_bytes(server.process.pid))
            await asyncio.sleep(0.5)
        sent_b = phase_b.result()
        owed = (witness.bytes - witnessed_start) * STALLED_SUBSCRIPTIONS
        lat_b = await latencies(readers, sent_b)
        stop_heavy.set()
        await heavy_writer

    growth = max(samples) - rss_start
    median_a, median_b = statistics.median(lat_a), statistics.median(lat_b)
    print(
        f"\nowed to the stalled client {owed / MIB:.0f} MiB in {witness.frames} frames/subscription;"
        f" server RSS {rss_start / MIB:.0f} MiB, growth {growth / MIB:.1f} MiB;"
        f" reader latency p50 {median_a * 1000:.0f} -> {median_b * 1000:.0f} ms"
    )
    # Queued frames would grow the server by about `owed`; coalesced updates by nothing that scales.
    assert owed > 16 * MIB, "the stalled client was not owed enough for this test to mean anything"
    assert growth < owed / 4, "memory grew with what the stalled client was owed"
    assert median_b <= 1.5 * median_a + 0.25, "the stalled client delayed the others"
    for reader in readers:
        await reader.ws.close()
    await witness.ws.close()
    stalled.transport.abort()
