"""One WebSocket connection: what is owed to the client, sent by the connection's own task so a slow
client never blocks the event loop's fan-out, and liveness by ping/pong.

Slow consumers. What a connection owes is bounded, whatever the client does:
- subscription updates are not queued as frames. A subscription with something new is *offered*
  once; its frame is built only when the socket can take it, from the computation's state at
  that moment, so any number of changes while the client lags coalesce into one frame
  (app/fanout/hub.py: newer state replaces older, appends merge, or become one FullResult);
- other frames (creations, pongs, errors, notices) queue, at most `send_queue_limit` of them;
- a client whose oldest owed item has waited `slow_consumer_timeout` seconds, or that lets the
  queue overflow, cannot keep up even so: it is closed with 4008 (and dropped outright if the
  close frame cannot get through either).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from typing import Protocol

from starlette.websockets import WebSocket, WebSocketState

from app.protocol.close_codes import NORMAL, SLOW_CONSUMER

logger = logging.getLogger(__name__)

CLOSE_TIMEOUT = 5.0  # seconds for flushing and the close frame before the socket is dropped


class UpdateSource(Protocol):
    """A subscription with an update to deliver; the frame is built when it can be sent."""

    def take_frame(self) -> str | None: ...


class Flag:
    """`asyncio.Event`'s is_set / set / wait, with the waiters' deque (760 bytes) made only when
    somebody waits: every connection has one, and almost nobody waits on it."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: asyncio.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        if self._set:
            return
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()


class Connection:
    def __init__(
        self,
        websocket: WebSocket,
        conn_id: int,
        *,
        queue_limit: int = 1000,
        slow_consumer_timeout: float = 30.0,
    ) -> None:
        self.websocket = websocket
        self.id = conn_id
        self.queue_limit = queue_limit
        self.slow_consumer_timeout = slow_consumer_timeout
        # (queued at, frame); a list, not a deque: an empty deque takes 760 bytes, and most
        # connections have nothing queued most of the time (a queue is short: `queue_limit`).
        self._queue: list[tuple[float, str]] = []
        self._offers: dict[UpdateSource, float] = {}  # insertion order = turn; value: offered at
        self._in_flight_since: float | None = None
        self._closing = False
        self.closed = Flag()
        self.close_code: int | None = None
        self._closer: asyncio.Task[None] | None = None
        # Started when there is something to send and gone when there is not: an idle connection
        # holds no task of its own (memory per idle connection; app/transport/liveness.py checks them all).
        self._sender: asyncio.Task[None] | None = None

    # -- what the server owes the client ------------------------------------------------------------
    def send(self, text: str) -> None:
        """Queue a frame (never blocks)."""
        if self._closing or self.closed.is_set():
            return
        if len(self._queue) >= self.queue_limit:
            self._give_up(f"{len(self._queue)} frames queued")
            return
        self._queue.append((time.monotonic(), text))
        self._kick()

    def offer(self, source: UpdateSource) -> None:
        """A subscription has an update; asking again before it is taken changes nothing."""
        if self._closing or self.closed.is_set():
            return
        self._offers.setdefault(source, time.monotonic())
        self._kick()

    def _kick(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(
                self._send_loop(), name=f"ws-send-{self.id}"
            )

    def withdraw(self, source: UpdateSource) -> None:
        self._offers.pop(source, None)

    def backlog_age(self, now: float | None = None) -> float:
        """How long the oldest thing owed to this client has waited (0 when caught up)."""
        now = time.monotonic() if now is None else now
        since = [t for t in (self._in_flight_since,) if t is not None]
        if self._queue:
            since.append(self._queue[0][0])
        if self._offers:
            since.append(min(self._offers.values()))
        return now - min(since) if since else 0.0

    def _next(self) -> str | None:
        while self._queue or self._offers:
            if self._queue:
                return self._queue.pop(0)[1]
            source = next(iter(self._offers))
            del self._offers[source]
            try:
                frame = source.take_frame()
            except Exception:  # one subscription's broken frame must not stop the connection's others
                logger.exception("connection %d: building a frame failed", self.id)
                continue
            if frame is not None:
                return frame
        return None

    async def _send_loop(self) -> None:
        """Send until nothing is owed, then end (the next thing owed starts another)."""
        try:
            while (text := self._next()) is not None:
                self._in_flight_since = time.monotonic()
                await self.websocket.send_text(text)
                self._in_flight_since = None
        except asyncio.CancelledError:
            raise
        except Exception:  # the peer went away; the receive loop notices and cleans up
            logger.debug("connection %d: send failed", self.id, exc_info=True)
            self.closed.set()
        finally:
            self._in_flight_since = None

    # -- slow consumers -----------------------------------------------------------------------------
    def check_backlog(self, now: float | None = None) -> None:
        """Called periodically (app/transport/liveness.py): a client that let what it is owed wait too long
        cannot keep up."""
        if self.closed.is_set() or self._closing:
            return
        age = self.backlog_age(now)
        if age > self.slow_consumer_timeout:
            self._give_up(f"nothing delivered for {age:.1f}s")

    def _give_up(self, why: str) -> None:
        if self._closing:
            return
        logger.warning("connection %d: slow consumer (%s), closing with %d", self.id, why, SLOW_CONSUMER)
        self._closing = True
        self.close_soon(SLOW_CONSUMER, "client cannot keep up", flush=False)

    # -- closing ------------------------------------------------------------------------------------
    def close_soon(self, code: int, reason: str = "", flush: bool = True) -> None:
        """`close` from code that cannot wait for it (the task is kept until it is done)."""
        if self._closer is None:
            self._closer = asyncio.get_running_loop().create_task(self._close(code, reason, flush))

    async def close(self, code: int, reason: str = "") -> None:
        """Deliver what is owed (bounded in time), then close with `code`."""
        await self._close(code, reason, flush=True)

    async def _close(self, code: int, reason: str, flush: bool) -> None:
        if self.close_code is not None:
            await self.closed.wait()
            return
        self.close_code = code
        self._closing = True
        if code != NORMAL:
            logger.info("connection %d: closing with %d (%s)", self.id, code, reason)
        sender = self._sender
        if flush and sender is not None:
            with contextlib.suppress(Exception):  # TimeoutError included
                await asyncio.wait_for(asyncio.shield(sender), timeout=CLOSE_TIMEOUT)
        if sender is not None:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
        self._queue.clear()
        self._offers.clear()
        self.closed.set()
        if self.websocket.client_state is WebSocketState.DISCONNECTED:
            # The protocol layer ended the WebSocket (the peer's close, or its own 1009) and closes
            # the socket itself: a reset now could destroy a close frame the client has not read.
            return
        if self.websocket.application_state is WebSocketState.CONNECTED:
            try:
                await asyncio.wait_for(self.websocket.close(code=code, reason=reason), CLOSE_TIMEOUT)
            except TimeoutError:
                # The close frame cannot get through (the client stopped reading): drop the socket.
                _abort(self.websocket)
            except Exception as exc:  # the protocol layer closed first; its close stands
                logger.debug("connection %d: close not sent (%s)", self.id, exc)


def _abort(websocket: WebSocket) -> None:
    """Reset the TCP connection under an ASGI WebSocket, dropping what the kernel still holds for
    it. ASGI has no way to say "abort", so this reaches the server's protocol object through its
    bound `receive` (uvicorn's protocols keep the transport there); without one, the socket waits
    for the peer or the server's own timeouts."""
    protocol = getattr(getattr(websocket, "_receive", None), "__self__", None)
    transport = getattr(protocol, "transport", None)
    if transport is None or not hasattr(transport, "abort"):
        logger.warning("cannot abort the socket of a stalled WebSocket")
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:  # linger 0: close() resets instead of keeping unsent data for the peer
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
