"""uvicorn's HTTP protocol with a deadline for the request headers (app/protocol/limits.py lists
the limit)."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol


def http_protocol_with_header_deadline(deadline: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol, except that a connection which has not sent complete request
    headers within `deadline` seconds of connecting is closed (uvicorn itself waits forever, so
    slow-header clients could pin sockets). Upgraded WebSockets are then bounded by the first
    message deadline in app/api/ws.py."""

    base: Any = AutoHTTPProtocol

    class HeaderDeadlineProtocol(base):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._header_timer = self.loop.call_later(deadline, self._header_deadline_passed)

        def connection_lost(self, exc: Exception | None) -> None:
            self._header_timer.cancel()
            super().connection_lost(exc)

        def _header_deadline_passed(self) -> None:
            transport = self.transport
            upgraded = transport.get_protocol() is not self
            # `cycle` is set once a request's headers are complete (both uvicorn HTTP protocols).
            if not upgraded and self.cycle is None and not transport.is_closing():
                transport.close()

    return HeaderDeadlineProtocol
