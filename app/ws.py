"""`WS /persistent-compute/ws`: decode ClientMessages, create and drop subscriptions, answer pings,
ping idle peers and close dead ones."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import time
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from app import frames
from app.connection import Connection
from app.hub import DeliveryOptions, Hub, Subscriber
from app.state import ServerState
from compute.compiler import Limits, MalformedNode, ResultOptions, compile_plan, computation_key
from compute.computation import Computation
from compute.errors import ComputeError
from schemas.client import (
    ClientPing,
    ClientPong,
    ClientUpdateToken,
    StreamingComputeNodeSubscription,
    Subscribe,
    Unsubscribe,
    client_message_adapter,
)

log = logging.getLogger(__name__)
MAX_DEPTH = 64
_ids = itertools.count(1)


def _depth_ok(raw: str, limit: int = MAX_DEPTH) -> bool:
    """Refuse deep nesting before parsing it (a recursive parser would blow the stack)."""
    depth = 0
    in_string = escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


class Session:
    """The subscriptions of one connection."""

    def __init__(self, state: ServerState, connection: Connection) -> None:
        self.state = state
        self.hub: Hub = state.hub
        self.connection = connection
        self.subscriptions: dict[str, Subscriber] = {}
        self._starting: dict[str, asyncio.Task[None]] = {}  # subscriptions still being created

    async def handle(self, raw: str) -> None:
        if not _depth_ok(raw):
            self.connection.send(frames.client_message_error(f"JSON nested deeper than {MAX_DEPTH} levels"))
            return
        try:
            message = client_message_adapter.validate_python(orjson.loads(raw))
        except (orjson.JSONDecodeError, ValidationError, ValueError) as exc:
            self.connection.send(frames.client_message_error(_describe(exc)))
            return
        if isinstance(message, ClientPing):
            self.connection.send(frames.pong(_iso(message.ping.sent_at)))
        elif isinstance(message, ClientPong):
            pass  # liveness is recorded for every message received
        elif isinstance(message, Unsubscribe):
            for sub_id in message.unsubscribe:
                self._drop(str(sub_id))
        elif isinstance(message, Subscribe):
            self._subscribe(message)
        elif isinstance(message, ClientUpdateToken):
            pass  # tokens matter only when authentication is configured

    def _subscribe(self, message: Subscribe) -> None:
        settings = self.state.settings
        limits = Limits(int(settings.max_window_seconds * 1e9), settings.max_points)
        compiled: list[tuple[str, StreamingComputeNodeSubscription, Any]] = []
        for uuid_id, sub in message.subscribe.items():
            sub_id = str(uuid_id)
            request = sub.compute_request
            options = sub.subscription_options
            rc = options.result_configuration
            result_options = ResultOptions(
                append_only=rc is not None, decimate=rc.append_only.decimate_results if rc else True
            )
            context = {k: v.as_json() for k, v in request.context.variables.items()}
            try:
                outcome: Any = compile_plan(
                    request.node.as_json(), request.window_width.to_nanos(), context, limits, result_options
                )
            except MalformedNode as exc:  # one malformed subscription: the whole message is refused
                self.connection.send(frames.client_message_error(f"subscription {sub_id}: {exc}"))
                return
            except ComputeError as exc:
                outcome = exc
            compiled.append((sub_id, sub, outcome))
        for sub_id, sub, outcome in compiled:
            self._drop(sub_id)  # re-using a live id replaces that subscription
            if isinstance(outcome, ComputeError):
                self.connection.send(frames.creation_error(sub_id, outcome))
                continue
            self.connection.send(frames.creation_success(sub_id))
            task = asyncio.create_task(self._start(sub_id, sub, outcome))
            self._starting[sub_id] = task
            task.add_done_callback(functools.partial(self._started, sub_id))

    async def _start(self, sub_id: str, sub: StreamingComputeNodeSubscription, plan: Any) -> None:
        request, options = sub.compute_request, sub.subscription_options
        lateness = options.allowed_lateness.to_nanos() if options.allowed_lateness else None
        context = {k: v.as_json() for k, v in request.context.variables.items()}
        key = computation_key(request.node.as_json(), request.window_width.to_nanos(), context, lateness)
        delivery = DeliveryOptions(
            min_delay_s=options.min_delay / 1000.0,
            allow_appends=bool(options.allow_appends),
            append_only=options.result_configuration is not None,
        )
        try:
            await self.state.wait_ready()
            subscriber = await self.hub.subscribe(
                self.connection, sub_id, key, lambda: Computation(key, plan, lateness), delivery
            )
        except ComputeError as exc:
            self.connection.send(frames.subscription_update(sub_id, frames.error_update(exc)))
            return
        except Exception as exc:
            log.exception("subscription %s failed to start", sub_id)
            err = ComputeError("ComputeFailed", f"the computation could not start: {exc}", status_code=500)
            self.connection.send(frames.subscription_update(sub_id, frames.error_update(err)))
            return
        if self.connection.closed.is_set():
            self.hub.unsubscribe(subscriber)
            return
        self.subscriptions[sub_id] = subscriber

    def _started(self, sub_id: str, task: asyncio.Task[None]) -> None:
        if self._starting.get(sub_id) is task:
            del self._starting[sub_id]

    def _drop(self, sub_id: str) -> None:
        starting = self._starting.pop(sub_id, None)
        if starting is not None:
            starting.cancel()
        subscriber = self.subscriptions.pop(sub_id, None)
        if subscriber is not None:
            self.hub.unsubscribe(subscriber)

    def close(self) -> None:
        for task in list(self._starting.values()):
            task.cancel()
        for sub_id in list(self.subscriptions):
            self._drop(sub_id)


def _iso(value: Any) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"not a ClientMessage: {where}: {first['msg']} ({exc.error_count()} problem(s))"
    if isinstance(exc, orjson.JSONDecodeError | json.JSONDecodeError):
        return f"not JSON: {exc}"
    return f"not a ClientMessage: {exc}"


async def _heartbeat(state: ServerState, connection: Connection) -> None:
    """Ping a peer that has been silent for ping_interval; close it if no pong within ping_timeout."""
    interval, timeout = state.settings.ping_interval, state.settings.ping_timeout
    while not connection.closed.is_set():
        await asyncio.sleep(min(interval, timeout) / 2)
        now = time.monotonic()
        if connection.awaiting_pong_since is not None:
            if now - connection.awaiting_pong_since > timeout:
                log.info("connection %d: no pong in %.1fs, closing", connection.id, timeout)
                await connection.close(1001, "ping timeout")
                return
        elif now - connection.last_heard > interval:
            connection.awaiting_pong_since = now
            connection.send(frames.ping())


async def websocket_endpoint(websocket: WebSocket) -> None:
    state: ServerState = websocket.app.state.sparkwire
    await websocket.accept()
    connection = Connection(websocket, next(_ids))
    session = Session(state, connection)
    state.connections.add(connection)
    heartbeat = asyncio.create_task(_heartbeat(state, connection))
    if state.draining:
        connection.send(frames.shutdown_notice())
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            connection.heard()
            raw = message.get("text")
            if raw is None:
                data = message.get("bytes") or b""
                try:
                    raw = data.decode()
                except UnicodeDecodeError:
                    connection.send(frames.client_message_error("binary frame is not UTF-8 JSON"))
                    continue
            if len(raw.encode()) > state.settings.max_message_bytes:
                await connection.close(1009, "message too big")
                break
            await session.handle(raw)
    except WebSocketDisconnect:
        pass
    finally:
        heartbeat.cancel()
        session.close()
        state.connections.discard(connection)
        with contextlib.suppress(Exception):
            await connection.close(1000)
