"""`WS /persistent-compute/ws`: refuse foreign origins and bad tokens before the upgrade, decode
ClientMessages within the limits (app/limits.py), create and drop subscriptions the token allows,
answer pings, ping idle peers and close dead ones."""

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
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from app import frames
from app.auth import ANONYMOUS, BEARER_SUBPROTOCOL, AuthError, Principal, bearer_token
from app.connection import Connection
from app.errors import serializable_error
from app.hub import DeliveryOptions, Hub, Subscriber
from app.limits import MAX_JSON_DEPTH, POLICY_VIOLATION, TRY_AGAIN_LATER, MessageRate, json_depth
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
_ids = itertools.count(1)


class Session:
    """The subscriptions of one connection, and the token they were made with."""

    def __init__(self, state: ServerState, connection: Connection, principal: Principal) -> None:
        self.state = state
        self.hub: Hub = state.hub
        self.connection = connection
        self.principal = principal
        self.subscriptions: dict[str, Subscriber] = {}
        self._starting: dict[str, asyncio.Task[None]] = {}  # subscriptions still being created
        self._rids: dict[str, list[str]] = {}  # subscription id -> data sources it reads
        self._expiry: asyncio.TimerHandle | None = None
        self._arm_expiry()

    async def handle(self, raw: str) -> None:
        if json_depth(raw.encode()) > MAX_JSON_DEPTH:
            self.connection.send(
                frames.client_message_error(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            )
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
                self._drop(sub_id)
        elif isinstance(message, Subscribe):
            self._subscribe(message)
        elif isinstance(message, ClientUpdateToken):
            self._update_token(message.update_token.token)

    # -- tokens --------------------------------------------------------------------------------------
    def _arm_expiry(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        expires_at = self.principal.expires_at
        if expires_at is not None:
            loop = asyncio.get_running_loop()
            self._expiry = loop.call_later(max(0.0, expires_at - time.time()), self._token_expired)

    def _token_expired(self) -> None:
        """Every subscription gets SubscriptionAuthExpired, then the connection closes (1008)."""
        self._expiry = None
        log.info("connection %d: token of %s expired", self.connection.id, self.principal.subject)
        err = _auth_expired()
        for sub_id in self._live_ids():
            self._drop(sub_id)
            self.connection.send(frames.subscription_update(sub_id, frames.error_update(err)))
        self.connection.close_soon(POLICY_VIOLATION, "token expired")

    def _update_token(self, token: str) -> None:
        """`updateToken` (extension): a fresh token replaces the old one before it expires."""
        if self.state.auth is None:
            return  # authentication is off: nothing to refresh
        try:
            principal = self.state.auth.authenticate(token)
        except AuthError as exc:
            log.info("connection %d: updateToken refused: %s", self.connection.id, exc)
            self.connection.close_soon(POLICY_VIOLATION, f"updateToken refused: {exc}"[:120])
            return
        self.principal = principal
        self._arm_expiry()
        for sub_id, rids in list(self._rids.items()):  # the new claim may reach less than the old
            denied = principal.denied(rids)
            if denied:
                self._drop(sub_id)
                update = frames.error_update(_permission_denied(denied))
                self.connection.send(frames.subscription_update(sub_id, update))

    # -- subscriptions -------------------------------------------------------------------------------
    def _live_ids(self) -> list[str]:
        return list(dict.fromkeys([*self.subscriptions, *self._starting]))

    def _subscribe(self, message: Subscribe) -> None:
        settings = self.state.settings
        limits = Limits(int(settings.max_window_seconds * 1e9), settings.max_points)
        compiled: list[tuple[str, StreamingComputeNodeSubscription, Any]] = []
        for sub_id, sub in message.subscribe.items():
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
        live = set(self._live_ids())
        for sub_id, sub, outcome in compiled:
            self._drop(sub_id)  # re-using a live id replaces that subscription
            live.discard(sub_id)
            if not isinstance(outcome, ComputeError):
                outcome = self._refusal(outcome, len(live)) or outcome
            if isinstance(outcome, ComputeError):
                self.connection.send(frames.creation_error(sub_id, outcome))
                continue
            live.add(sub_id)
            self._rids[sub_id] = sorted({s.data_source_rid for s in outcome.selectors})
            self.connection.send(frames.creation_success(sub_id))
            task = asyncio.create_task(self._start(sub_id, sub, outcome))
            self._starting[sub_id] = task
            task.add_done_callback(functools.partial(self._started, sub_id))

    def _refusal(self, plan: Any, live: int) -> ComputeError | None:
        """Why this connection may not have this (valid) subscription, if it may not."""
        if self.principal.expired():
            return _auth_expired()
        denied = self.principal.denied(s.data_source_rid for s in plan.selectors)
        if denied:
            return _permission_denied(denied)
        limit = self.state.settings.max_subscriptions_per_connection
        if live >= limit:
            return ComputeError(
                "TooManySubscriptions",
                f"a connection may hold at most {limit} subscriptions",
                {"limit": str(limit)},
            )
        return None

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
            starting.cancel()  # only its wait: the computation's creation is shared (app/hub.py)
        self._rids.pop(sub_id, None)
        subscriber = self.subscriptions.pop(sub_id, None)
        if subscriber is not None:
            self.hub.unsubscribe(subscriber)

    def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        for sub_id in self._live_ids():
            self._drop(sub_id)


def _auth_expired() -> ComputeError:
    return ComputeError("SubscriptionAuthExpired", "the token expired; send updateToken", status_code=403)


def _permission_denied(rids: list[str]) -> ComputeError:
    return ComputeError(
        "PermissionDenied",
        "the token does not reach these data sources: " + ", ".join(rids),
        {"rids": ",".join(rids)},
        status_code=403,
    )


def _iso(value: Any) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(_short(str(p)) for p in first["loc"])  # a key may be an oversized id
        return f"not a ClientMessage: {where}: {first['msg']} ({exc.error_count()} problem(s))"
    if isinstance(exc, orjson.JSONDecodeError | json.JSONDecodeError):
        return f"not JSON: {exc}"
    return f"not a ClientMessage: {exc}"


def _short(text: str, keep: int = 40) -> str:
    return text if len(text) <= 2 * keep else f"{text[:keep]}...({len(text)} characters)"


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


async def _refuse(websocket: WebSocket, status: int, name: str, message: str) -> None:
    """An HTTP answer instead of the upgrade (ASGI "websocket.http.response"; a plain close, which
    servers turn into 403, where that extension is missing)."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    body = JSONResponse(serializable_error(name, message, status), status_code=status, headers=headers)
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(body)
    else:
        await websocket.close(POLICY_VIOLATION)


async def _admit(websocket: WebSocket, state: ServerState) -> tuple[Principal, str | None] | None:
    """Origin, then token, before the upgrade: (who, subprotocol to select), or None if refused."""
    if not state.origins.permits(websocket.headers):
        log.info("refused WebSocket from Origin %s", websocket.headers.get("origin"))
        await _refuse(websocket, 403, "Default:PermissionDenied", "this Origin may not open WebSockets here")
        return None
    offered = websocket.scope.get("subprotocols") or []
    subprotocol = BEARER_SUBPROTOCOL if BEARER_SUBPROTOCOL in offered else None
    if state.auth is None:
        return ANONYMOUS, subprotocol
    try:
        return state.auth.authenticate(bearer_token(websocket.headers, offered)), subprotocol
    except AuthError as exc:
        await _refuse(websocket, 401, "Default:Unauthorized", str(exc))
        return None


async def websocket_endpoint(websocket: WebSocket) -> None:
    state: ServerState = websocket.app.state.sparkwire
    settings = state.settings
    admitted = await _admit(websocket, state)
    if admitted is None:
        return
    principal, subprotocol = admitted
    if len(state.connections) >= settings.max_connections:
        await websocket.accept(subprotocol=subprotocol)
        await websocket.close(TRY_AGAIN_LATER, "server at its connection limit; try again later")
        return
    connection = Connection(
        websocket,
        next(_ids),
        queue_limit=settings.send_queue_limit,
        slow_consumer_timeout=settings.slow_consumer_timeout,
    )
    state.connections.add(connection)  # before any await: the limit above counts it at once
    heartbeat: asyncio.Task[None] | None = None
    session: Session | None = None
    rate = MessageRate(settings.max_messages_per_second)
    try:
        await websocket.accept(subprotocol=subprotocol)
        session = Session(state, connection, principal)
        heartbeat = asyncio.create_task(_heartbeat(state, connection))
        if state.draining:
            connection.send(frames.shutdown_notice())
        first = True
        while True:
            if first:  # the handshake deadline covers the first message too
                try:
                    message = await asyncio.wait_for(websocket.receive(), settings.handshake_timeout)
                except TimeoutError:
                    await connection.close(POLICY_VIOLATION, "no message within the handshake deadline")
                    break
                first = False
            else:
                message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            connection.heard()
            if not rate.allow():
                if rate.abusive:
                    await connection.close(POLICY_VIOLATION, "message rate limit exceeded")
                    break
                if rate.should_notify():
                    connection.send(
                        frames.client_message_error(
                            f"over {settings.max_messages_per_second:g} messages per second: message dropped"
                        )
                    )
                continue
            raw = message.get("text")
            if raw is None:
                data = message.get("bytes") or b""
                try:
                    raw = data.decode()
                except UnicodeDecodeError:
                    connection.send(frames.client_message_error("binary frame is not UTF-8 JSON"))
                    continue
            if len(raw.encode()) > settings.max_message_bytes:
                await connection.close(1009, "message too big")
                break
            await session.handle(raw)
    except WebSocketDisconnect:
        pass
    finally:
        if heartbeat is not None:
            heartbeat.cancel()
        if session is not None:
            session.close()
        state.connections.discard(connection)
        with contextlib.suppress(Exception):
            await connection.close(1000)
