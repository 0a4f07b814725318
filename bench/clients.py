"""WebSocket client processes: subscribers that record every frame, the subscribe-latency prober,
and a crowd of idle connections. Each runs as `python -m bench.clients MODE '<json spec>'`, prints
one JSON line when ready (stream, idle) and one when done, and stops on a "stop" line on stdin."""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson
import websockets
from websockets.asyncio.client import ClientConnection

from bench.frame_peek import Update, peek_update
from bench.stats import summarize

Json = Any


def _iso_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


def _say(obj: Json) -> None:
    print(json.dumps(obj), flush=True)


class BenchClient:
    """One connection: answers the server's pings, hands every subscription frame to `on_update`
    (decoded in full) or, given `on_peek`, only what latency needs (bench/frame_peek.py)."""

    def __init__(
        self,
        ws: ClientConnection,
        on_update: Callable[[str, Json, int, int], None] | None = None,
        on_peek: Callable[[Update, int, int], None] | None = None,
    ) -> None:
        self.ws = ws
        self.on_update = on_update
        self.on_peek = on_peek
        self.creations: dict[str, Json] = {}
        self.first_update: dict[str, asyncio.Future[int]] = {}
        self.pongs = 0
        self.last_pong_ns = 0
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, url: str, deflate: bool, **kw: Any) -> BenchClient:
        ws = await websockets.connect(
            url,
            max_size=None,
            ping_interval=None,
            compression="deflate" if deflate else None,
            open_timeout=60,
        )
        return cls(ws, **kw)

    def expect(self, sub_id: str) -> asyncio.Future[int]:
        fut = self.first_update.get(sub_id)
        if fut is None:
            fut = self.first_update[sub_id] = asyncio.get_running_loop().create_future()
        return fut

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                recv_ns = time.time_ns()
                if self.on_peek is not None and self._peeked(raw, recv_ns):
                    continue
                msg = orjson.loads(raw)
                kind = msg["type"]
                if kind == "subscriptionUpdate":
                    body = msg["subscriptionUpdate"]
                    sub_id = body["subscriptionId"]
                    fut = self.expect(sub_id)
                    if not fut.done():
                        fut.set_result(recv_ns)
                    if self.on_update is not None:
                        self.on_update(sub_id, body["update"], recv_ns, len(raw))
                elif kind == "subscriptionCreation":
                    body = msg["subscriptionCreation"]
                    self.creations[body["subscriptionId"]] = body["creation"]
                    if body["creation"]["type"] != "success":
                        fut = self.expect(body["subscriptionId"])
                        if not fut.done():
                            fut.set_result(-1)
                elif kind == "health":
                    health = msg["health"]
                    if health["type"] == "ping":
                        pong = {"pingOriginallySentAt": health["ping"]["sentAt"], "sentAt": _iso_now()}
                        await self.ws.send(orjson.dumps({"type": "pong", "pong": pong}).decode())
                    elif health["type"] == "pong":
                        self.pongs += 1
                        self.last_pong_ns = recv_ns
                    elif health["type"] == "clientMessageError":
                        print(f"clientMessageError: {health}", file=sys.stderr, flush=True)
        except websockets.ConnectionClosed:
            pass

    def _peeked(self, raw: str | bytes, recv_ns: int) -> bool:
        """Whether `raw` was a subscription update, handed to `on_peek`."""
        assert self.on_peek is not None
        try:
            update = peek_update(raw)
        except msgspec.ValidationError:  # not the shape the peek knows: decoded in full instead
            return False
        if update is None:
            return False
        fut = self.expect(update.subscription_id)
        if not fut.done():
            fut.set_result(recv_ns)
        self.on_peek(update, recv_ns, len(raw))
        return True

    async def subscribe(self, subs: dict[str, Json]) -> None:
        await self.ws.send(orjson.dumps({"type": "subscribe", "subscribe": subs}).decode())

    async def unsubscribe(self, ids: list[str]) -> None:
        await self.ws.send(orjson.dumps({"type": "unsubscribe", "unsubscribe": ids}).decode())

    async def ping(self) -> None:
        await self.ws.send(orjson.dumps({"type": "ping", "ping": {"sentAt": _iso_now()}}).decode())

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()


async def _stdin_stop(on_command: Callable[[str], None] | None = None) -> None:
    """Wait for "stop" (or EOF) on stdin; hand any other line to `on_command`."""
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line or line.strip() == "stop":
            return
        if on_command is not None:
            on_command(line.strip())


async def _connect_all(
    url: str, n: int, deflate: bool, concurrency: int = 64, **kw: Any
) -> list[BenchClient]:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> BenchClient:
        async with gate:
            client = await BenchClient.connect(url, deflate, **kw)
            await client.ping()  # a first message at once: the server closes silent sockets after 10 s
            return client

    return list(await asyncio.gather(*(one() for _ in range(n))))


# -- stream: subscribers that record every frame --------------------------------------------------------
async def stream(spec: Json) -> None:
    """spec: url, deflate, out, connections: [[{"sub": ..., "measure": ...}, ...], ...]."""
    rows: list[tuple[int, int, int, int, int]] = []  # sub index, recv ns, included ts, full, bytes
    index: dict[str, tuple[int, str]] = {}
    errors: list[Json] = []

    def on_peek(update: Update, recv_ns: int, size: int) -> None:
        i, measure = index[update.subscription_id]
        if update.kind == "error":
            errors.append({"sub": i, "error": update.error_name})
            return
        inc = update.newest_ns if measure != "none" else -1
        rows.append((i, recv_ns, inc, int(update.kind == "full"), size))

    clients = await _connect_all(spec["url"], len(spec["connections"]), spec["deflate"], on_peek=on_peek)
    waits = []
    n = 0
    for client, subs in zip(clients, spec["connections"], strict=True):
        message = {}
        for s in subs:
            sub_id = str(uuid.uuid4())
            index[sub_id] = (n, s["measure"])
            n += 1
            message[sub_id] = s["sub"]
            waits.append(client.expect(sub_id))
        await client.subscribe(message)
    done, _ = await asyncio.wait(waits, timeout=spec.get("ready_timeout", 600))
    failed = [c for client in clients for c in client.creations.values() if c["type"] != "success"]
    _say(
        {
            "ready": len([f for f in done if f.result() >= 0]),
            "subscriptions": n,
            "creation_errors": failed[:5],
        }
    )

    def dump(command: str) -> None:  # "dump PATH": save the frames so far, keep recording
        np.save(command.split(maxsplit=1)[1], np.array(rows, dtype=np.int64).reshape(-1, 5))
        _say({"dumped": len(rows)})

    cpu_from, wall_from = time.process_time(), time.monotonic()  # the clients share the server's cores
    await _stdin_stop(dump)
    cpu_cores = (time.process_time() - cpu_from) / max(1e-9, time.monotonic() - wall_from)
    np.save(spec["out"], np.array(rows, dtype=np.int64).reshape(-1, 5))
    for client in clients:
        await client.close()
    _say(
        {
            "frames": len(rows),
            "update_errors": errors[:5],
            "update_error_count": len(errors),
            "cpu_cores": round(cpu_cores, 4),  # per frame at a smoke run's few frames too
        }
    )


# -- subscribe: time to the FullResult ------------------------------------------------------------------
async def subscribe_latency(spec: Json) -> None:
    """spec: url, new: [sub, ...] (each a new computation), live: sub (already live), live_repeats."""
    client = await BenchClient.connect(spec["url"], spec.get("deflate", True))

    async def time_one(sub: Json) -> float:
        sub_id = str(uuid.uuid4())
        fut = client.expect(sub_id)
        started = time.time_ns()
        await client.subscribe({sub_id: sub})
        got = await asyncio.wait_for(fut, 120)
        await client.unsubscribe([sub_id])
        if got < 0:
            raise RuntimeError(f"subscription refused: {client.creations.get(sub_id)}")
        return (got - started) / 1e6

    new_ms = [await time_one(sub) for sub in spec["new"]]
    live_ms = [await time_one(spec["live"]) for _ in range(spec["live_repeats"])]
    await client.close()
    _say({"new_ms": new_ms, "live_ms": live_ms})


# -- idle: many connections that only keep alive --------------------------------------------------------
async def idle(spec: Json) -> None:
    """spec: url, count, deflate. Ready once all are open; on stop, all ping at once and await their
    pongs: how long the server takes to answer every connection when all speak together."""
    started = time.monotonic()
    clients = await _connect_all(spec["url"], spec["count"], spec["deflate"])
    _say({"open": len(clients), "seconds": round(time.monotonic() - started, 1)})
    await _stdin_stop()
    sent = time.time_ns()
    await asyncio.gather(*(c.ping() for c in clients))
    deadline = time.monotonic() + 60
    # two pings each: the one sent on connecting and this one
    while sum(min(c.pongs, 2) for c in clients) < 2 * len(clients) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    answered = [c for c in clients if c.pongs >= 2]
    await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    round_trips = [(c.last_pong_ns - sent) / 1e6 for c in answered]
    _say({"answered": len(answered), "ping_ms": summarize(round_trips).as_dict()})


MODES = {"stream": stream, "subscribe": subscribe_latency, "idle": idle}


def main() -> None:
    mode, arg = sys.argv[1], sys.argv[2]
    spec = json.loads(Path(arg[1:]).read_text() if arg.startswith("@") else arg)
    asyncio.run(MODES[mode](spec))


if __name__ == "__main__":
    main()
