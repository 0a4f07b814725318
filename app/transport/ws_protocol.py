"""uvicorn's WebSocket protocol as Sparkwire serves it: the deflate offer of app/transport/deflate.py,
a connection refused for a broken or oversized message closed without a TCP reset, so the client
always reads the close code, control frames (ping, pong) rate-limited per connection, and a text
message that is not UTF-8 closed with 1007 without an ERROR in the log."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.exceptions import ProtocolError
from websockets.frames import CloseCode, Frame, Opcode

from app.protocol.limits import MessageRate
from app.transport.deflate import deflate_factory

logger = logging.getLogger(__name__)
CONTROL = (Opcode.PING, Opcode.PONG)


class ControlFlood(ProtocolError):
    """More control frames than the connection's rate allows: parsing stops at this frame."""


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
    # Control frames (pings and pongs: the server sends no protocol-level ping, so any pong is
    # unsolicited) a client may send per second, bursts 2x; `websocket_protocol` sets it from
    # SPARKWIRE_MAX_PINGS_PER_SECOND. Every ping is otherwise answered, however many arrive
    # (issue 44: 1.84M in 10 s took 9.6 s of the event loop's CPU).
    max_pings_per_second = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _lean(self.queue, self.writable)
        self._discarding = False  # a broken message was refused: read and drop until the peer closes
        self._control_rate: MessageRate | None = None  # made at the first control frame
        if self.config.ws_per_message_deflate:
            # Nothing is negotiated before the handshake, so swapping the offer here is safe.
            self.conn.available_extensions = [deflate_factory()]
        # Counted as each frame is parsed, so a flood stops at the frame over the limit instead of
        # after a whole read's worth of frames (a 256 KiB read holds ~40,000 empty pings).
        parsed = self.conn.recv_frame

        def recv_frame(frame: Frame) -> None:
            if frame.opcode in CONTROL:
                self._count_control_frame()
            parsed(frame)

        self.conn.recv_frame = recv_frame  # type: ignore[method-assign]

    def _count_control_frame(self) -> None:
        now = self.loop.time()
        if self._control_rate is None:
            self._control_rate = MessageRate(self.max_pings_per_second, now)
        if self._control_rate.allow(now):
            return
        logger.info(
            "%s: more than %g control frames a second, closing with %d",
            _peer(self.client),
            self.max_pings_per_second,
            CloseCode.POLICY_VIOLATION,
        )
        self.conn.writes.clear()  # the pongs of this read's pings are not sent
        self.conn.fail(CloseCode.POLICY_VIOLATION, "too many control frames (ping, pong)")
        raise ControlFlood("too many control frames")

    def send_receive_event_to_app(self) -> None:
        """uvicorn's, but a text message that is not UTF-8 is the client's error (close 1007, one
        INFO line), not a server ERROR with a traceback."""
        data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
        self.frames = []
        if self.close_sent:  # past `websocket.close`: dropped, reads stay active until the peer closes
            return
        if self.curr_msg_data_type == "text":
            try:
                text = data.decode()
            except UnicodeDecodeError as exc:
                logger.info(
                    "%s: a text message is not UTF-8 (%s), closing with 1007", _peer(self.client), exc
                )
                self.conn.send_close(CloseCode.INVALID_DATA, "text message is not valid UTF-8")
                self.handle_parser_exception()
                return
            self.queue.put_nowait({"type": "websocket.receive", "text": text})
        else:
            self.queue.put_nowait({"type": "websocket.receive", "bytes": data})
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

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


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "a client"


def websocket_protocol(max_pings_per_second: float) -> type[FanOutWebSocketProtocol]:
    """The protocol class uvicorn is given, with the control frame rate of the settings."""
    return type(
        "FanOutWebSocketProtocol",
        (FanOutWebSocketProtocol,),
        {"max_pings_per_second": max_pings_per_second},
    )
