"""One WebSocket connection: an outbound queue drained by its own task, so a slow client never
blocks the event loop's fan-out, and liveness by ping/pong."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from starlette.websockets import WebSocket, WebSocketState

log = logging.getLogger(__name__)


class Connection:
    def __init__(self, websocket: WebSocket, conn_id: int) -> None:
        self.websocket = websocket
        self.id = conn_id
        self._outbox: asyncio.Queue[str | None] = asyncio.Queue()
        self.last_heard = time.monotonic()
        self.awaiting_pong_since: float | None = None
        self.closed = asyncio.Event()
        self._sender = asyncio.create_task(self._send_loop(), name=f"ws-send-{conn_id}")

    def send(self, text: str) -> None:
        """Queue a frame (never blocks)."""
        if not self.closed.is_set():
            self._outbox.put_nowait(text)

    async def _send_loop(self) -> None:
        try:
            while (text := await self._outbox.get()) is not None:
                await self.websocket.send_text(text)
        except Exception:  # the peer went away; the receive loop notices and cleans up
            log.debug("connection %d: send failed", self.id, exc_info=True)
        finally:
            self.closed.set()

    async def close(self, code: int, reason: str = "") -> None:
        """Flush what is queued, then close with `code`."""
        self._outbox.put_nowait(None)
        with contextlib.suppress(asyncio.TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(self._sender), timeout=5)
        self.closed.set()
        if self.websocket.application_state is WebSocketState.CONNECTED:
            with contextlib.suppress(Exception):
                await self.websocket.close(code=code, reason=reason)

    def heard(self) -> None:
        self.last_heard = time.monotonic()
        self.awaiting_pong_since = None
