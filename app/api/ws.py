"""`WS /persistent-compute/ws`: the I/O around a connection's protocol (app/protocol/ws_session.py).

Refuses foreign origins and bad tokens before the upgrade, accepts, then feeds every message, the
heartbeat's ticks, the token's expiry and the outcome of each subscription's start to the session,
and carries out what it answers: frames through the connection (app/transport/connection.py), subscriptions
started and stopped through the hub (app/fanout/hub.py), the expiry timer, the close."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope
from starlette.types import Send as ASGISend
from starlette.websockets import WebSocket, WebSocketDisconnect

from app.api.state import ServerState
from app.config import Settings
from app.fanout.hub import Subscriber
from app.fanout.replay import ReplayRun
from app.http.errors import default_name, serializable_error
from app.protocol import frames
from app.protocol.admission import Refused
from app.protocol.auth import BEARER_SUBPROTOCOL, Principal
from app.protocol.close_codes import NORMAL, POLICY_VIOLATION, TRY_AGAIN_LATER
from app.protocol.ws_session import (
    Action,
    ArmExpiry,
    Close,
    DisarmExpiry,
    Instant,
    Prepared,
    Send,
    Session,
    SessionConfig,
    StartSubscription,
    StopSubscription,
)
from app.transport.connection import Connection
from compute.evaluation.compiler.catalogs import NO_CATALOGS, Catalogs
from compute.evaluation.errors import ComputeError

logger = logging.getLogger(__name__)
_ids = itertools.count(1)


def _now() -> Instant:
    return Instant(time.monotonic(), time.time())


def session_config(settings: Settings, catalogs: Catalogs = NO_CATALOGS) -> SessionConfig:
    return SessionConfig(
        catalogs=catalogs,
        max_subscriptions=settings.max_subscriptions_per_connection,
        limits=settings.compute_limits,
        max_messages_per_second=settings.max_messages_per_second,
        max_message_bytes=settings.max_message_bytes,
        ping_interval=settings.ping_interval,
        ping_timeout=settings.ping_timeout,
        replay_available=settings.role == "all",  # replay reads the log with this process's Spark
        retention_s=settings.retention,
        max_replays=settings.max_replays_per_connection,
        budget=settings.evaluation_budget,
    )


class SessionDriver:
    """Carries out one session's actions on its connection, and reports back to it what became of
    the subscriptions it started."""

    def __init__(self, state: ServerState, connection: Connection, session: Session) -> None:
        self.state = state
        self.connection = connection
        self.session = session
        self._starting: dict[str, asyncio.Task[None]] = {}
        # A replay (docs/extensions.md) is its own run: its private subscriber, then the live one.
        self._subscribers: dict[str, Subscriber | ReplayRun] = {}
        self._expiry: asyncio.TimerHandle | None = None

    def perform(self, actions: list[Action]) -> Close | None:
        """Everything but the close, which is returned for the caller to carry out (awaited by the
        receive loop and the heartbeat; scheduled with `act` elsewhere)."""
        close: Close | None = None
        for action in actions:
            if isinstance(action, Send):
                self.connection.send(action.frame)
            elif isinstance(action, Close):
                close = close or action
            elif isinstance(action, StartSubscription):
                task = asyncio.create_task(self._start(action))
                self._starting[action.subscription_id] = task
            elif isinstance(action, StopSubscription):
                self._stop(action.subscription_id)
            elif isinstance(action, ArmExpiry):
                self._disarm()
                delay = max(0.0, action.at - time.time())
                self._expiry = asyncio.get_running_loop().call_later(delay, self._token_expired)
            elif isinstance(action, DisarmExpiry):
                self._disarm()
        return close

    def act(self, actions: list[Action]) -> None:
        """`perform`, from code that cannot wait for a close."""
        close = self.perform(actions)
        if close is not None:
            self.connection.close_soon(close.code, close.reason)

    async def _start(self, action: StartSubscription) -> None:
        sub_id = action.subscription_id
        current = False
        try:
            outcome: Subscriber | ReplayRun | Exception = await self._attach(action)
        except Exception as exc:
            outcome = exc
        finally:
            current = self._starting.get(sub_id) is asyncio.current_task()
            if current:
                del self._starting[sub_id]  # what follows is synchronous: nothing left to cancel
        if not current:
            # Stopped (or its id subscribed again) while it attached, and the cancellation did not
            # land (asyncio.wait_for can swallow one that races its result): what it attached
            # belongs to nobody, so it goes now, or it would hold its computation forever.
            if not isinstance(outcome, Exception):
                self._release(outcome)
            return
        if isinstance(outcome, Exception):
            if not isinstance(outcome, ComputeError):
                logger.exception("subscription %s failed to start", sub_id, exc_info=outcome)
            replaced = self._subscribers.pop(sub_id, None)  # a re-resolution's old attachment
            if replaced is not None:
                self._release(replaced)
            self.act(self.session.subscription_failed(sub_id, outcome))
        elif self.connection.closed.is_set():
            self._release(outcome)
        else:
            replaced = self._subscribers.pop(sub_id, None)
            if replaced is not None:  # never two attachments under one id: the older is let go
                self._release(replaced)
            self._subscribers[sub_id] = outcome
            self.act(self.session.subscription_started(sub_id))

    async def _attach(self, action: StartSubscription) -> Subscriber | ReplayRun:
        await self.state.wait_ready()
        if action.replay is None:
            return await self._subscribe(action)
        sub_id = action.subscription_id
        state = self.state
        run = ReplayRun(
            state.engine,
            state.log,
            state.metrics,
            self.connection,
            action,
            join_live=lambda: self._subscribe(action),
            on_failed=lambda exc: self._replay_failed(sub_id, run, exc),
            running=state.replays,
            max_replays=state.settings.max_replays,
        )
        try:
            await run.start()
        except BaseException:  # refused, failed, or abandoned (cancelled): nothing of it stays
            run.stop()
            raise
        return run

    async def _subscribe(self, action: StartSubscription) -> Subscriber:
        """Attach to the shared computation of the request (a replay's `then: "live"` too)."""
        return await self.state.hub.subscribe(
            self.connection,
            action.subscription_id,
            action.request,
            action.plan,
            action.delivery,
            action.resume_token,
        )

    def _stop(self, sub_id: str) -> None:
        starting = self._starting.pop(sub_id, None)
        if starting is not None:
            starting.cancel()  # only its wait: the computation's creation is shared (app/fanout/hub.py)
        subscriber = self._subscribers.pop(sub_id, None)
        if subscriber is not None:
            self._release(subscriber)

    def _release(self, attached: Subscriber | ReplayRun) -> None:
        if isinstance(attached, ReplayRun):
            attached.stop()  # its clock stops at once
        else:
            self.state.hub.unsubscribe(attached)

    def _replay_failed(self, sub_id: str, run: ReplayRun, error: Exception) -> None:
        """A started replay could not go on (an evaluation error, or joining live failed)."""
        if self._subscribers.get(sub_id) is run:
            del self._subscribers[sub_id]
            run.stop()
            self.act(self.session.subscription_failed(sub_id, error))

    def catalog_affected(self, kind: str | None, rids: Collection[str]) -> list[str]:
        """A catalog was edited (app/fanout/catalog_edits.py): which subscriptions it can move."""
        if self.connection.closed.is_set():
            return []
        return self.session.catalog_affected(kind, rids)

    def re_resolve(self, sub_id: str) -> None:
        """The session compiles it again; one re-resolved keeps its old attachment until the new
        one is made."""
        if not self.connection.closed.is_set():
            self.act(self.session.re_resolve(sub_id, _now()))

    def _token_expired(self) -> None:
        self._expiry = None
        self.act(self.session.token_expired())

    def _disarm(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    def check(self) -> None:
        """A tick of app/transport/liveness.py: the session's heartbeat, the connection's backlog."""
        if self.connection.closed.is_set():
            return
        self.act(self.session.heartbeat(_now()))
        self.connection.check_backlog()

    def close(self) -> None:
        """The connection is over: every subscription and the timer go."""
        self.perform(self.session.close())


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
    offered = websocket.scope.get("subprotocols") or []
    subprotocol = BEARER_SUBPROTOCOL if BEARER_SUBPROTOCOL in offered else None
    try:
        return state.admission.admit(websocket.headers, "open WebSockets here", offered), subprotocol
    except Refused as refused:
        if refused.status == 403:
            logger.info("refused WebSocket from Origin %s", websocket.headers.get("origin"))
        await _refuse(websocket, refused.status, default_name(refused.status), refused.message)
        return None


# Decoding a message and compiling its subscriptions (`Session.prepare`) runs here, never on the
# event loop: two threads, so that at most two compilations compete with the loop for the GIL
# (each bounded by the compile budget, compute/evaluation/compiler/limits.py `CompileBudget`).
PREPARING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="prepare-message")
# The share of a core one connection's messages may take to prepare: after a message that took t
# seconds of CPU (beyond PREPARE_FREE_S), the connection's next message is read t * (1 / share - 1)
# later. A client sending costly requests back to back (each refused by the compile budget, or not)
# slows itself, not the others, whose updates wait on the same GIL.
PREPARE_SHARE = 0.25
PREPARE_FREE_S = 0.01


def _prepare(session: Session, text: str) -> tuple[Prepared, float]:
    """`Session.prepare`, and the CPU time it took (this thread's)."""
    started = time.thread_time()
    return session.prepare(text), time.thread_time() - started


async def _receive(session: Session, data: str | bytes) -> tuple[list[Action], float]:
    """The session's answer to one message, its decoding and compiling done off the event loop,
    and how long to wait before reading the connection's next message (PREPARE_SHARE). A message
    it fails on is a bug of ours, logged as one; the client is told its message was not handled
    and keeps its connection and subscriptions."""
    try:
        text = session.admit(data, _now())
        if isinstance(text, list):
            return text, 0.0
        loop = asyncio.get_running_loop()
        prepared, cpu_s = await loop.run_in_executor(PREPARING, _prepare, session, text)
        pause_s = (cpu_s - PREPARE_FREE_S) * (1 / PREPARE_SHARE - 1) if cpu_s > PREPARE_FREE_S else 0.0
        return session.handle(prepared, _now()), pause_s
    except Exception:
        logger.exception("%s: a client message could not be handled", session.label)
        return [Send(frames.client_message_error("the server could not handle this message"))], 0.0


WS_PATH = "/persistent-compute/ws"


class WebSocketFastPath:
    """ASGI middleware, outermost: `WS /persistent-compute/ws` goes straight to its endpoint.
    FastAPI's routing, dependency machinery and exception middleware each keep frames and objects
    alive for as long as a WebSocket is open (~10 KB per idle connection, measured with
    tracemalloc), and this endpoint uses none of them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        if scope["type"] == "websocket" and scope["path"] == WS_PATH:
            await websocket_endpoint(WebSocket(scope, receive, send))
        else:
            await self.app(scope, receive, send)


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
    driver: SessionDriver | None = None
    try:
        await websocket.accept(subprotocol=subprotocol)
        state.metrics.websocket_connections_opened.inc()
        session = Session(
            principal,
            session_config(settings, state.catalogs),
            _now(),
            authenticate=state.admission.auth.authenticate if state.admission.auth is not None else None,
            label=f"connection {connection.id}",
            ledger=state.ledger,
        )
        driver = SessionDriver(state, connection, session)
        driver.act(session.start())
        state.liveness.add(driver)
        state.catalog_edits.add(driver)
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
            data = message.get("text")
            if data is None:
                data = message.get("bytes") or b""
            actions, pause_s = await _receive(session, data)
            close = driver.perform(actions)
            if close is not None:
                await connection.close(close.code, close.reason)
                break
            if pause_s:  # its answer is sent; its next message waits (PREPARE_SHARE)
                await asyncio.sleep(pause_s)
    except WebSocketDisconnect:
        pass
    finally:
        if driver is not None:
            state.liveness.discard(driver)
            state.catalog_edits.discard(driver)
            driver.close()
        state.connections.discard(connection)
        with contextlib.suppress(Exception):
            await connection.close(NORMAL)
