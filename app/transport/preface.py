"""gRPC and HTTP/1.1 on one port: each new connection's first bytes say which it is. HTTP/2 begins
with its connection preface (RFC 9113 3.4, `PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n`), which no
HTTP/1.1 request begins with; Nominal's SDK speaks gRPC (HTTP/2 without TLS, "prior knowledge") to
the same base URL as its HTTP calls. A connection whose first bytes differ from the preface is handed
at once to uvicorn's HTTP protocol, which then owns the transport (this protocol is out of its path
from then on); one that sends the whole preface is relayed, bytes as they are, to the gRPC server on
a private unix socket (app/api/grpc_metadata.py). docs/decisions/0077-grpc-on-the-same-port.md has
what this costs an HTTP connection, measured.

A connection that sends nothing is closed after the same read deadline as a request's headers
(SPARKWIRE_HANDSHAKE_TIMEOUT), which then counts from the connection's opening, as before."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

logger = logging.getLogger(__name__)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
CONNECT_TIMEOUT_S = 10.0  # how long a gRPC connection waits for the gRPC server to be listening


class GrpcTarget:
    """Where gRPC connections are relayed: a unix socket path, set once the gRPC server listens."""

    def __init__(self) -> None:
        self.path: str | None = None
        self._ready: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._ready is None:
            self._ready = asyncio.Event()
        return self._ready

    def listening(self, path: str) -> None:
        self.path = path
        self._event().set()

    async def wait(self) -> str:
        if self.path is None:
            await asyncio.wait_for(self._event().wait(), CONNECT_TIMEOUT_S)
        assert self.path is not None
        return self.path


def preface_sniffing(http_class: type[asyncio.Protocol], deadline: float, grpc: GrpcTarget) -> type[Any]:
    """A protocol class for uvicorn (`Config(http=...)`): `http_class` for HTTP/1.1 connections,
    a relay to `grpc` for HTTP/2 ones."""

    class PrefaceSniffer(asyncio.Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._http = http_class(*args, **kwargs)  # uvicorn's (config, server_state, app_state)
            self._buffer = b""
            self._timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self._transport = cast(asyncio.Transport, transport)  # uvloop's too: no subclass of it
            loop = asyncio.get_running_loop()
            self._opened = loop.time()
            self._timer = loop.call_later(deadline, transport.close)

        def data_received(self, data: bytes) -> None:
            self._buffer += data
            seen = self._buffer[: len(PREFACE)]
            if seen != PREFACE[: len(seen)]:
                self._hand_over(self._http, http=True)
            elif len(seen) == len(PREFACE):
                self._hand_over(GrpcRelay(self._transport, grpc), http=False)
            # else: a prefix of the preface so far; wait for more

        def _hand_over(self, protocol: asyncio.Protocol, http: bool) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            transport, first = self._transport, self._buffer
            self._buffer = b""
            transport.set_protocol(protocol)
            protocol.connection_made(transport)
            backdate = getattr(protocol, "opened_at", None) if http else None
            if backdate is not None:  # its read deadline counts from the connection's opening
                backdate(self._opened)
            protocol.data_received(first)

        def eof_received(self) -> bool | None:
            return None  # nothing decided yet: the transport closes

        def connection_lost(self, exc: Exception | None) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    return PrefaceSniffer


class GrpcRelay(asyncio.Protocol):
    """The client's side of an HTTP/2 connection: its bytes to the gRPC server's socket and the
    answers back, each side paused while the other cannot take more (asyncio's write buffer limits)."""

    def __init__(self, client: asyncio.Transport, target: GrpcTarget) -> None:
        self.client = client
        self.target = target
        self.upstream: asyncio.Transport | None = None
        self.pending: list[bytes] = []
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.client.pause_reading()  # until the gRPC server's socket is connected
        self._connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            path = await self.target.wait()
            upstream, _ = await loop.create_unix_connection(lambda: _Upstream(self), path)
        except (OSError, TimeoutError) as exc:
            logger.warning("gRPC connection closed: the gRPC server cannot be reached (%s)", exc)
            self.client.close()
            return
        if self.closed:
            upstream.close()
            return
        self.upstream = cast(asyncio.Transport, upstream)
        upstream.write(b"".join(self.pending))
        self.pending = []
        self.client.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.upstream is None:
            self.pending.append(data)
        else:
            self.upstream.write(data)

    def eof_received(self) -> bool | None:
        return None  # the client is done: the transport closes, and connection_lost the upstream

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.upstream is not None:
            self.upstream.close()

    def pause_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.resume_reading()


class _Upstream(asyncio.Protocol):
    def __init__(self, relay: GrpcRelay) -> None:
        self.relay = relay

    def data_received(self, data: bytes) -> None:
        self.relay.client.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay.client.close()

    def pause_writing(self) -> None:
        self.relay.client.pause_reading()

    def resume_writing(self) -> None:
        self.relay.client.resume_reading()
