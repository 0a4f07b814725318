"""Helpers for the reliability and security tests: raw WebSocket clients that read frame by frame
(so a test sees exactly what arrives and how the connection ends), tokens, log inspection."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import jwt
import websockets
from websockets.asyncio.client import ClientConnection

from tests.keepalive import iso_now
from tests.log_file import stored_rows
from tests.wire import decode_server_message, ts


def ping_message(sent_at: str | None = None) -> str:
    return json.dumps({"type": "ping", "ping": {"sentAt": sent_at or iso_now()}})


def pong_message(ping_frame: dict[str, Any]) -> str | None:
    """The answer a client owes a server ping (None if the frame is not one)."""
    if ping_frame.get("type") != "health" or ping_frame["health"].get("type") != "ping":
        return None
    sent_at = ping_frame["health"]["ping"]["sentAt"]
    return json.dumps({"type": "pong", "pong": {"pingOriginallySentAt": sent_at, "sentAt": iso_now()}})


async def connect(url: str, **kwargs: Any) -> ClientConnection:
    kwargs.setdefault("max_size", None)
    return await websockets.connect(url, **kwargs)


async def next_frame(ws: ClientConnection, timeout: float = 30) -> dict[str, Any]:
    """The next server frame, checked by nominal-api's decoder (raises if the server closed).
    Server pings are answered on the way, as a client library would."""
    text = await asyncio.wait_for(ws.recv(), timeout)
    assert isinstance(text, str), "server frames are text"
    decode_server_message(text)
    frame: dict[str, Any] = json.loads(text)
    if (pong := pong_message(frame)) is not None:
        await ws.send(pong)
    return frame


async def frames_until(
    ws: ClientConnection, predicate: Any, timeout: float = 60
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read until a frame matches; returns it and every frame read before it."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        frame = await next_frame(ws, max(0.1, deadline - time.monotonic()))
        if predicate(frame):
            return frame, seen
        seen.append(frame)


def is_pong_to(sent_at: str) -> Any:
    def check(frame: dict[str, Any]) -> bool:
        health = frame.get("health", {})
        return bool(
            frame["type"] == "health"
            and health.get("type") == "pong"
            and health["pong"]["pingOriginallySentAt"] == sent_at
        )

    return check


async def still_usable(ws: ClientConnection, timeout: float = 30) -> list[dict[str, Any]]:
    """A ping gets its pong: the connection is open and the server answers. Returns the frames
    that arrived before the pong."""
    sent_at = iso_now()
    await ws.send(ping_message(sent_at))
    _, before = await frames_until(ws, is_pong_to(sent_at), timeout)
    return before


def client_message_errors(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        f["health"]["clientMessageError"]["error"]
        for f in frames
        if f["type"] == "health" and f["health"]["type"] == "clientMessageError"
    ]


async def close_code(ws: ClientConnection, timeout: float = 60) -> int | None:
    """Read (and drop) frames until the server closes; the close code it sent (None: no close frame)."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))
    except websockets.ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd is not None else None
    raise AssertionError(f"the server did not close the connection within {timeout}s")


def make_jwt(
    secret: str, rids: list[str] | None, expires_in: float | None, sub: str = "test", admin: bool = False
) -> str:
    claims: dict[str, Any] = {"sub": sub}
    if admin:  # may change the catalog (assets, runs, modules, events)
        claims["admin"] = True
    if rids is not None:
        claims["dataSourceRids"] = rids
    if expires_in is not None:
        claims["exp"] = int(time.time() + expires_in)
    return jwt.encode(claims, secret, algorithm="HS256")


def unique_rid(name: str) -> str:
    return f"ri.test.{name}.{uuid.uuid4().hex[:12]}"


async def update_for(ws: ClientConnection, sub_id: str, timeout: float = 120) -> dict[str, Any]:
    """The next subscriptionUpdate of one subscription (frames of others are read and dropped)."""

    def mine(frame: dict[str, Any]) -> bool:
        return bool(
            frame["type"] == "subscriptionUpdate" and frame["subscriptionUpdate"]["subscriptionId"] == sub_id
        )

    frame, _ = await frames_until(ws, mine, timeout)
    update: dict[str, Any] = frame["subscriptionUpdate"]["update"]
    return update


def write_body(rid: str, points: list[tuple[int, float]], channel: str = "p") -> dict[str, Any]:
    doubles = [{"timestamp": ts(t), "value": v} for t, v in points]
    batch = {"channel": channel, "points": {"type": "double", "double": doubles}}
    return {"dataSourceRid": rid, "batches": [batch]}


def stored_points(data_dir: Path, rid: str) -> Counter[tuple[int, float | None]]:
    """(ts, double) -> how many times the server's log file holds it, for one data source."""
    return Counter((ts, value) for _, _, ts, value, _ in stored_rows(data_dir, rid))
