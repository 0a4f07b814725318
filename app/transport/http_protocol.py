"""uvicorn's HTTP protocol with one read deadline for every request of a connection
(app/protocol/limits.py and the settings list the limits; decision record 0044)."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol


def http_protocol_with_read_deadline(deadline: float, min_body_rate: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with one read deadline for every request of a connection, the first
    and each one after it on a kept-alive connection: its headers must be complete within `deadline`
    seconds of the connection opening or of the previous answer, and its body by then plus a second
    for every `min_body_rate` bytes received (Apache's mod_reqtimeout rule: a slow but steady upload
    goes on, a byte dribbled now and then does not). A connection past it is closed. uvicorn itself
    waits forever, so slow clients could pin sockets. Time the server itself holds reading paused
    (its own backpressure) is not counted. Upgraded WebSockets are then bounded by the first message
    deadline in app/api/ws.py."""

    base: Any = AutoHTTPProtocol

    class ReadDeadlineProtocol(base):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._read_timer: asyncio.TimerHandle | None = None
            self._bytes_read = 0
            self._await_request()

        def data_received(self, data: bytes) -> None:
            self._bytes_read += len(data)
            super().data_received(data)

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
