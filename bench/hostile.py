"""Hostile clients for the soak (bench/soak.py, `hostile=1`): the attacks of
docs/reliability-and-security.md ("Attacks tried"), one every `every_s` seconds in turn, each
checked for the answer a trusted server gives. Counts go back to the soak as JSON on stdout:
per attack how many ran and how many got an unexpected answer (a 5xx, a connection dropped without
a close code and reason, a slow socket held past its deadline).

Run by the soak as a child: python -m bench.hostile '<spec JSON>' (stops at a line on its stdin).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import websockets

from bench.computations import raw

Json = Any
NANOS = 1_000_000_000
DEADLINE_S = 10.0  # the server's handshake_timeout (its default), a slow socket's deadline


def _write(rid: str, ts: int) -> bytes:
    point = {"timestamp": {"seconds": ts // NANOS, "nanos": ts % NANOS}, "value": 1.0}
    batch = {"channel": "hostile", "tags": {}, "points": {"type": "double", "double": [point]}}
    return orjson.dumps({"dataSourceRid": rid, "batches": [batch]})


async def _http(port: int, request: bytes, read_all: bool = False) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        if read_all:
            return await asyncio.wait_for(reader.read(), 30)
        return await asyncio.wait_for(reader.read(65536), 30)
    finally:
        writer.close()


def _post(path: str, body: bytes, extra: str = "") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\n"
    return (head + extra + "\r\n").encode() + body


async def _answer(reader: asyncio.StreamReader) -> bytes:
    """One HTTP answer's status line, its body read to its Content-Length (the connection stays)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    lines = head.split(b"\r\n")
    length = next(
        (int(v) for k, _, v in (h.partition(b":") for h in lines) if k.lower() == b"content-length"), 0
    )
    await asyncio.wait_for(reader.readexactly(length), 30)
    return lines[0]


async def deep_json(port: int, rid: str) -> bool:
    """Nested 5,000 deep, small and worker-sized: 400 each, then a good write on the same connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        ok = True
        for pad in (0, 120_000):
            nested = b"[" * 5000 + b"]" * 5000
            body = b'{"dataSourceRid": "%s", "pad": "%s", "batches": %s}' % (rid.encode(), b"x" * pad, nested)
            writer.write(_post("/storage/writer/v1", body))
            ok &= (await _answer(reader)).startswith(b"HTTP/1.1 400")
        writer.write(_post("/storage/writer/v1", _write(rid, time.time_ns())))
        return ok and (await _answer(reader)).startswith(b"HTTP/1.1 200")
    finally:
        writer.close()


async def slow_headers(port: int) -> bool:
    """A complete first request, then the next one's headers a byte a second: closed in time."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    began = time.monotonic()
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.wait_for(reader.read(65536), 30)
        began = time.monotonic()
        for byte in b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"y" * 60:
            writer.write(bytes([byte]))
            with contextlib.suppress(TimeoutError):
                if await asyncio.wait_for(reader.read(1), 1.0) == b"":
                    break
        return time.monotonic() - began < DEADLINE_S + 5
    except (ConnectionError, OSError):
        return time.monotonic() - began < DEADLINE_S + 5
    finally:
        writer.close()


async def big_upgrade_header(port: int) -> bool:
    request = (
        "GET /persistent-compute/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"X-Big: {'b' * 9000}\r\n\r\n"
    ).encode()
    return (await _http(port, request, read_all=True)).startswith(b"HTTP/1.1 431")


def _sub(rid: str, data_source: Json | None = None, **sparkwire: Json) -> Json:
    body = raw(rid, 0, 100).body
    body["computeRequest"]["context"]["variables"]["x"]["channel"]["dataSource"].update(data_source or {})
    if sparkwire:
        body["sparkwire"] = sparkwire
    return body


async def bad_messages(url: str, rid: str) -> bool:
    """The six messages that once closed connections or went unanswered: each answered, none closes."""
    now = int(time.time())
    messages = [
        {"type": "subscribe", "subscribe": {"a": _sub(rid, {"tagsToGroupBy": 1.5})}},
        {"type": "subscribe", "subscribe": {"b": _sub(rid, {"groupByTags": 5})}},
        {"type": "unsubscribe", "unsubscribe": ["never"]},
        {"type": "subscribe", "subscribe": {}},
        {"type": "updateToken", "updateToken": {"token": "t"}},
        {
            "type": "subscribe",
            "subscribe": {
                "r": _sub(
                    rid,
                    replay={
                        "start": {"seconds": -1099511627776, "nanos": 0},
                        "end": {"seconds": now, "nanos": 0},
                    },
                )
            },
        },
    ]
    async with websockets.connect(url, max_size=None) as ws:
        for message in messages:
            await ws.send(json.dumps(message))
            answered = False
            while not answered:
                frame = orjson.loads(await asyncio.wait_for(ws.recv(), 30))
                kind = frame["type"]
                answered = kind == "subscriptionCreation" or (
                    kind == "health" and frame["health"]["type"] == "clientMessageError"
                )
        await ws.send(json.dumps({"type": "unsubscribe", "unsubscribe": ["r"]}))
    return True


async def churn_resumable(url: str, rid: str) -> bool:
    """Resumable subscriptions left in a loop: the lingering caps keep what they leave bounded."""
    async with websockets.connect(url, max_size=None) as ws:
        for round_ in range(3):
            subs = {f"l{round_}-{i}": _sub(rid, resume=True) for i in range(8)}
            for i, sub in enumerate(subs.values()):
                sub["computeRequest"]["windowWidth"] = {"seconds": 60 + i + 10 * round_, "nanos": 0}
            await ws.send(json.dumps({"type": "subscribe", "subscribe": subs}))
            await asyncio.sleep(1.0)
            await ws.send(json.dumps({"type": "unsubscribe", "unsubscribe": list(subs)}))
    return True


async def replays(url: str, rid: str) -> bool:
    """More replays than a connection may hold: one is refused TooManyReplays, none is a 5xx."""
    now = int(time.time())
    span = {"start": {"seconds": now - 30, "nanos": 0}, "end": {"seconds": now, "nanos": 0}, "speed": 5}
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send(
            json.dumps(
                {"type": "subscribe", "subscribe": {f"p{i}": _sub(rid, replay=span) for i in range(5)}}
            )
        )
        created = 0
        while created < 5:
            frame = orjson.loads(await asyncio.wait_for(ws.recv(), 60))
            created += frame["type"] == "subscriptionCreation"
        await asyncio.sleep(2)
    return True


async def tenant_reads(port: int) -> bool:
    series = await _http(port, b"GET /series HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", read_all=True)
    return series.startswith(b"HTTP/1.1 ") and not series.startswith(b"HTTP/1.1 5")


async def run(spec: Json) -> None:
    port, url, rid = spec["port"], spec["url"], spec["rid"]
    attacks = {
        "deep_json": lambda: deep_json(port, rid),
        "slow_headers": lambda: slow_headers(port),
        "big_upgrade_header": lambda: big_upgrade_header(port),
        "bad_messages": lambda: bad_messages(url, rid),
        "churn_resumable": lambda: churn_resumable(url, rid),
        "replays": lambda: replays(url, rid),
        "tenant_reads": lambda: tenant_reads(port),
    }
    ran: Counter[str] = Counter()
    unexpected: Counter[str] = Counter()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_reader(sys.stdin.fileno(), stop.set)
    print(json.dumps({"hostile": "ready"}), flush=True)
    names = list(attacks)
    i = 0
    while not stop.is_set():
        name = names[i % len(names)]
        i += 1
        ran[name] += 1
        try:
            if not await attacks[name]():
                unexpected[name] += 1
        except websockets.ConnectionClosed as closed:
            if closed.rcvd is None or not closed.rcvd.reason:
                unexpected[name] += 1
        except (OSError, TimeoutError, websockets.WebSocketException, asyncio.IncompleteReadError):
            unexpected[name] += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), spec["every_s"])
    print(json.dumps({"ran": dict(ran), "unexpected": dict(unexpected)}), flush=True)


if __name__ == "__main__":
    arg = sys.argv[1]
    asyncio.run(run(json.loads(Path(arg[1:]).read_text() if arg.startswith("@") else arg)))
