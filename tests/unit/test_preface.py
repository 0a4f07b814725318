"""app/transport/preface.py in-process: HTTP/2's preface, however the first bytes arrive split, goes
to the gRPC relay with every byte; anything else, HTTP/1.1 requests beginning with `P` or `PRI`
included, goes to the HTTP protocol with every byte, in order, as soon as a byte differs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.transport.preface import PREFACE, GrpcRelay, GrpcTarget, preface_sniffing

pytestmark = pytest.mark.unit


class Http(asyncio.Protocol):
    """Stands for uvicorn's protocol: records what it is given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.made = False
        self.received = b""
        self.opened: float | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made = True

    def data_received(self, data: bytes) -> None:
        self.received += data

    def opened_at(self, when: float) -> None:
        self.opened = when


class Transport:
    def __init__(self) -> None:
        self.protocol: Any = None
        self.closed = False
        self.paused = False

    def set_protocol(self, protocol: Any) -> None:
        self.protocol = protocol

    def get_protocol(self) -> Any:
        return self.protocol

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.closed = True


def _feed(chunks: list[bytes]) -> tuple[Any, Transport]:
    transport = Transport()
    sniffer = preface_sniffing(Http, 10.0, GrpcTarget())()
    transport.set_protocol(sniffer)
    sniffer.connection_made(transport)
    for chunk in chunks:
        transport.protocol.data_received(chunk)
    return sniffer, transport


def _splits(data: bytes) -> list[list[bytes]]:
    return [[data[:i], data[i:]] for i in range(1, len(data))] + [[bytes([b]) for b in data]]


async def test_the_preface_however_split_goes_to_the_grpc_relay_with_every_byte() -> None:
    data = PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # and the client's first SETTINGS frame
    for chunks in _splits(data):
        _, transport = _feed(chunks)
        relay = transport.protocol
        assert isinstance(relay, GrpcRelay), chunks
        assert b"".join(relay.pending) == data and transport.paused  # held until the socket connects
        relay._connecting.cancel()
        relay.connection_lost(None)


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /storage/writer/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        b"PRIX / HTTP/1.1\r\nHost: x\r\n\r\n",  # the preface's first 3 bytes, then not
    ],
)
async def test_anything_else_goes_to_the_http_protocol_with_every_byte(request_bytes: bytes) -> None:
    for chunks in _splits(request_bytes):
        sniffer, transport = _feed(chunks)
        http = transport.protocol
        assert isinstance(http, Http) and http.made, chunks
        assert http.received == request_bytes
        assert http.opened == sniffer._opened  # the read deadline counts from the opening
        assert sniffer._timer is None  # the sniffer's own deadline is cancelled: HTTP's applies


async def test_a_connection_that_sends_nothing_is_closed_at_the_deadline() -> None:
    transport = Transport()
    sniffer = preface_sniffing(Http, 0.05, GrpcTarget())()
    sniffer.connection_made(transport)
    sniffer.data_received(PREFACE[:5])
    await asyncio.sleep(0.2)
    assert transport.closed
