"""A minimal keep-alive HTTP/1.1 POST client on asyncio streams.

The feed must cost the 2-core machine as little CPU as possible, so it avoids a general-purpose
client's per-request overhead; it only ever talks to the server it started on 127.0.0.1.
"""

from __future__ import annotations

import asyncio


class HttpConnection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
        """The open connection, or a new one; True when it is new."""
        if self._reader is None or self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
            return self._reader, self._writer, True
        return self._reader, self._writer, False

    async def post(
        self, path: str, body: bytes, headers: str = "Content-Type: application/json\r\n"
    ) -> tuple[int, bytes]:
        """`headers`: the request's own header lines, each ending in CRLF."""
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"{headers}Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        while True:  # at most twice: the second try is on a new connection
            reader, writer, new = await self._connect()
            try:
                return await self._exchange(reader, writer, head + body)
            except _Stale:
                self.close()
                if new:
                    raise ConnectionError("server closed the connection") from None
            # The server closes a keep-alive connection left idle (uvicorn: 5 s) without reading
            # from it, so a request sent on it just before was never seen: send it again on a new
            # one, as HTTP clients do for pooled connections.

    async def _exchange(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
    ) -> tuple[int, bytes]:
        try:
            writer.write(request)
            await writer.drain()
            status_line = await reader.readline()
        except ConnectionResetError:
            raise _Stale from None
        if not status_line:
            raise _Stale
        status = int(status_line.split()[1])
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        payload = await reader.readexactly(length) if length else b""
        return status, payload

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


class _Stale(Exception):
    """The connection ended before any byte of a response."""
