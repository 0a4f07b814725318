"""uvicorn's WebSocket protocol as Sparkwire serves it: the deflate offer of app/transport/deflate.py,
and a connection refused for a broken or oversized message closed without a TCP reset, so the
client always reads the close code."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from app.transport.deflate import deflate_factory


class _ListDeque(list[Any]):
    """The deque methods asyncio's Queue and Event call, on a list. An empty `collections.deque`
    allocates a 64-slot block (760 bytes); uvicorn gives every connection a receive queue (three
    deques and an event) and a `writable` event, ~3.8 KB of mostly empty deques per idle
    connection (decision record 0031). They hold a message or two at most: uvicorn stops reading
    the socket while one is queued."""

    __slots__ = ()

    def popleft(self) -> Any:
        return self.pop(0)


def _lean(queue: asyncio.Queue[Any], *events: asyncio.Event) -> None:
    for name in ("_getters", "_putters", "_queue"):
        assert not getattr(queue, name), "only a fresh queue can be made lean"
        setattr(queue, name, _ListDeque())
    for event in (getattr(queue, "_finished", None), *events):
        if event is not None:
            event._waiters = _ListDeque()


class FanOutWebSocketProtocol(WebSocketsSansIOProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _lean(self.queue, self.writable)
        self._discarding = False  # a broken message was refused: read and drop until the peer closes
        if self.config.ws_per_message_deflate:
            # Nothing is negotiated before the handshake, so swapping the offer here is safe.
            self.conn.available_extensions = [deflate_factory()]

    async def send(self, message: ASGISendEvent) -> None:
        await super().send(message)
        if message["type"] == "websocket.accept" and self.handshake_complete:
            # The handshake's request and response, headers and all (~4.5 KB per connection,
            # measured with tracemalloc), are never read again once the response is sent.
            self.request = self.response = None  # type: ignore[assignment]
        elif message["type"] == "websocket.http.response.body" and not message.get("more_body", False):
            # A refusal (401, 403) sent in full answers the handshake: uvicorn would otherwise log
            # "ASGI callable returned without completing handshake" at ERROR for every refused client.
            self.handshake_complete = True

    def handle_parser_exception(self) -> None:
        """A message over the size limit (or a broken frame): send the close frame, then half-close.

        uvicorn closes the socket at once, and the rest of a message the client is still sending
        then makes the kernel answer with a reset, which can destroy the close frame (1009) before
        the client reads it. Reading and dropping until the client closes avoids the reset."""
        assert self.conn.close_sent is not None
        close = self.conn.close_sent
        self.queue.put_nowait({"type": "websocket.disconnect", "code": close.code, "reason": close.reason})
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = True
        self._discarding = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.close_timer = self.loop.call_later(self.close_timeout, self.transport.close)

    def data_received(self, data: bytes) -> None:
        if not self._discarding:
            super().data_received(data)
        refused = self.conn.handshake_exc is not None
        if refused and not self.handshake_complete and not self.transport.is_closing():
            # The handshake request was refused by the protocol layer (a 431 for an oversized header
            # line, a 414, a 400): uvicorn never sends that answer nor closes; send it, then close.
            self.handshake_complete = True
            self.close_sent = True
            self.transport.write(b"".join(self.conn.data_to_send()))
            self.transport.close()

    def eof_received(self) -> None:
        if self._discarding:  # everything the client sent has been read: no reset
            self.transport.close()
