"""uvicorn's HTTP protocol with one read deadline for every request of a connection
(app/protocol/limits.py and the settings list the limits; decision record 0044), and a limit on the
size and number of each request's header lines (`HeaderLimits`)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from app.http.errors import serializable_error

HEADER_END = b"\r\n\r\n"
REFUSED_LINGER_S = 1.0  # after a 431, how long the socket stays half-closed for the client to read it


@dataclass(frozen=True)
class HeaderLimits:
    """A request's line and headers, counted as their bytes arrive: past either limit the request is
    answered 431 and the connection closed. httptools (uvicorn's parser) has no limit of its own and
    joins a header's pieces by copying (issue 44: 8 KB header lines streamed by 20 connections held
    gigabytes until the read deadline). The WebSocket upgrade is a request like any other here."""

    max_bytes: int = 64 << 10
    max_count: int = 100


def _too_large_response(why: str, setting: str, limit: int) -> bytes:
    name = f"SPARKWIRE_{setting.upper()}"
    body = serializable_error(
        "Sparkwire:RequestHeaderFieldsTooLarge",
        f"the request's headers are too large: {why} (the limit is {limit}, {name})",
        431,
        {"limit": str(limit), "setting": name},
    )
    content = json.dumps(body).encode()
    head = (
        "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
        f"content-length: {len(content)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + content


def http_protocol_with_read_deadline(
    deadline: float, min_body_rate: float, headers: HeaderLimits | None = None
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with one read deadline for every request of a connection, the first
    and each one after it on a kept-alive connection: its headers must be complete within `deadline`
    seconds of the connection opening or of the previous answer, and its body by then plus a second
    for every `min_body_rate` bytes received (Apache's mod_reqtimeout rule: a slow but steady upload
    goes on, a byte dribbled now and then does not). A connection past it is closed. uvicorn itself
    waits forever, so slow clients could pin sockets. Time the server itself holds reading paused
    (its own backpressure) is not counted. Upgraded WebSockets are then bounded by the first message
    deadline in app/api/ws.py."""

    base: Any = AutoHTTPProtocol
    limits = headers or HeaderLimits()

    class ReadDeadlineProtocol(base):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._read_timer: asyncio.TimerHandle | None = None
            self._bytes_read = 0
            self._refused = False
            self._expect_headers()
            self._await_request()

        def data_received(self, data: bytes) -> None:
            if self._refused:  # answered 431: what the client still sends is dropped unread
                return
            self._bytes_read += len(data)
            if self._in_headers and not self._headers_within_limits(data):
                return
            super().data_received(data)

        # -- header limits --------------------------------------------------------------------
        def _expect_headers(self) -> None:
            """The next bytes are a request's line and headers (until the empty line)."""
            self._in_headers, self._header_bytes, self._header_lines, self._tail = True, 0, 0, b""

        def on_headers_complete(self) -> None:
            self._in_headers = False
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._expect_headers()

        def _headers_within_limits(self, data: bytes) -> bool:
            """Count `data` up to the headers' end; past a limit, answer 431 and close (False)."""
            seen = self._tail + data
            end = seen.find(HEADER_END)
            part = data if end < 0 else data[: max(0, end + len(HEADER_END) - len(self._tail))]
            self._tail = seen[-(len(HEADER_END) - 1) :]
            self._header_bytes += len(part)
            self._header_lines += part.count(b"\n")
            if self._header_bytes > limits.max_bytes:
                self._refuse(f"more than {limits.max_bytes} bytes", "max_header_bytes", limits.max_bytes)
                return False
            # the request line and the final empty line are lines too
            if self._header_lines - (2 if end >= 0 else 1) > limits.max_count:
                self._refuse(f"more than {limits.max_count} lines", "max_header_count", limits.max_count)
                return False
            return True

        def _refuse(self, why: str, setting: str, limit: int) -> None:
            """431, then a half-close, reading paused: the client has a moment to read the answer
            before the socket is closed (closing at once, with its bytes unread, resets the
            connection, which can destroy the answer on its way)."""
            self._refused = True
            transport = self.transport
            transport.write(_too_large_response(why, setting, limit))
            transport.pause_reading()
            if transport.can_write_eof():
                transport.write_eof()
            self.loop.call_later(REFUSED_LINGER_S, transport.close)

        def on_response_complete(self) -> None:
            # a pipelined request is in already, and is answered next: nothing to wait for
            pipelined = bool(getattr(self, "pipeline", None))
            super().on_response_complete()
            if not pipelined and not self.transport.is_closing():
                self._await_request()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
            super().connection_lost(exc)

        def opened_at(self, when: float) -> None:
            """The connection opened at `when` (the loop's time), before this protocol was given it
            (app/transport/preface.py): the first request's deadline counts from then."""
            self._started = when
            self._arm(when + deadline - self.loop.time())

        def _await_request(self) -> None:
            """The deadline of the next request starts now (a new `cycle` once its headers are in)."""
            self._waiting_for = self.cycle
            self._started, self._bytes_at_start = self.loop.time(), self._bytes_read
            self._arm(deadline)

        def _arm(self, delay: float) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
            self._read_timer = self.loop.call_later(max(0.0, delay), self._check)

        def _check(self) -> None:
            self._read_timer = None
            transport = self.transport
            if transport.is_closing() or transport.get_protocol() is not self:  # closed, or upgraded
                return
            cycle = self.cycle
            if cycle is not self._waiting_for and not cycle.more_body:
                return  # the whole request is in: the answer re-arms the deadline
            now = self.loop.time()
            if self.flow.read_paused:  # the server's own backpressure: the client is not late
                self._started += deadline
                self._arm(deadline)
                return
            if cycle is not self._waiting_for:  # headers in, the body still coming
                limit = self._started + deadline + (self._bytes_read - self._bytes_at_start) / min_body_rate
                if now < limit:
                    self._arm(limit - now)
                    return
            transport.close()

    return ReadDeadlineProtocol
