"""An ingest request's body, read as a stream and decoded under a size limit.

The limit (`SPARKWIRE_MAX_REQUEST_BYTES`, default 64 MiB, for ingest;
`SPARKWIRE_MAX_JSON_BODY_BYTES`, default 1 MiB, for the JSON bodies of /assets/v1 and
/scout/v2/module: app/api/admitted_route.py) counts the bytes the decoder will see, after
`Content-Encoding` is undone. It is enforced while the body arrives: a `Content-Length` above it is
refused before a byte is read, the bytes received are counted chunk by chunk, and a compressed body
is decompressed as its chunks arrive, never producing more than the limit (plus one bounded step):
a small body that would inflate to gigabytes (a "zip bomb") is refused after at most ~limit bytes
were produced (docs/decisions/0021-request-body-limits.md).

Encodings: `zstd` (the `zstandard` package), `gzip` / `x-gzip` and `deflate` (zlib), `identity` or
none. Another one is refused with 415; a body that does not decode in its encoding (corrupt or
truncated) with 400; a body over the limit with 413. Every refusal is an `HttpError`.
"""

from __future__ import annotations

import zlib
from typing import Protocol

import zstandard
from fastapi import Request
from starlette.requests import ClientDisconnect

from app.http.errors import (
    INVALID_ARGUMENT,
    REQUEST_ENTITY_TOO_LARGE,
    UNSUPPORTED_CONTENT_ENCODING,
    HttpError,
)

ENCODINGS = ("zstd", "gzip", "x-gzip", "deflate", "identity")

# The largest zstd window the server decodes. RFC 8878 (3.1.1.1.2) recommends that encoders need no
# more than 8 MiB and that decoders support that much; zstd's own levels 1-19 stay within it. A
# frame asking for more (levels 20-22, --long) is refused instead of making the server allocate up
# to zstd's default limit of 128 MiB for one request.
ZSTD_MAX_WINDOW = 8 << 20
# One zstd block yields at most 128 KiB and costs at least 4 compressed bytes (a 3-byte block header
# and one byte of an RLE block): 4 input bytes never give more than 128 KiB of output, plus at most
# one block begun by earlier input. Feeding a piece of n bytes therefore produces at most
# (n // 4 + 1) * 128 KiB, which is how the decoder below keeps its output within the limit.
ZSTD_BLOCK = 128 << 10
# zlib's output per call is capped explicitly (max_length); this caps each step's allocation.
ZLIB_STEP = 1 << 20


class BodyTooLarge(HttpError):
    def __init__(self, limit: int, what: str, setting: str = "max_request_bytes") -> None:
        name = f"SPARKWIRE_{setting.upper()}"
        super().__init__(
            413,
            f"the request body {what} is larger than the limit of {limit} bytes "
            f"({name}; counted after Content-Encoding is undone)",
            REQUEST_ENTITY_TOO_LARGE,
            {"limit": str(limit), "setting": name},
        )


def _corrupt(encoding: str, detail: str) -> HttpError:
    return HttpError(400, f"the body is not valid {encoding} data: {detail}", INVALID_ARGUMENT)


class _Decoder(Protocol):
    def feed(self, data: bytes, budget: int) -> list[bytes]:
        """The decoded bytes of `data`; more than `budget` of them only if the limit is exceeded
        (the caller then refuses), and never more than `budget` plus one bounded step."""

    def finish(self) -> None:
        """Raise if the stream ended inside a frame or member."""


class _Identity:
    def feed(self, data: bytes, budget: int) -> list[bytes]:
        return [data]

    def finish(self) -> None:
        return None


class _Zstd:
    """zstd frames, one after another (RFC 8878 allows concatenated frames), each with its own
    decompressobj so that a frame that ends is known to be complete."""

    def __init__(self) -> None:
        self.dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
        self.frame = self.dctx.decompressobj()
        self.in_frame = False  # bytes of an unfinished frame were fed

    def feed(self, data: bytes, budget: int) -> list[bytes]:
        out: list[bytes] = []
        view = memoryview(data)
        while view:
            # The largest piece whose worst-case output stays within what is left of the budget
            # (at least 4 bytes, so a full budget is exceeded by one bounded step, then refused).
            piece = max(4, 4 * ((budget - ZSTD_BLOCK) // ZSTD_BLOCK))
            chunk, view = view[:piece], view[piece:]
            try:
                produced = self.frame.decompress(chunk)
            except zstandard.ZstdError as exc:
                raise _corrupt("zstd", _zstd_problem(exc)) from None
            self.in_frame = True
            if produced:
                out.append(produced)
                budget -= len(produced)
                if budget < 0:
                    return out
            if self.frame.eof:  # a frame ended: what follows is the next frame
                rest = self.frame.unused_data
                self.frame = self.dctx.decompressobj()
                self.in_frame = False
                if rest:
                    view = memoryview(rest + bytes(view))
        return out

    def finish(self) -> None:
        if self.in_frame:
            raise _corrupt("zstd", "the body ends inside a frame (truncated)")


def _zstd_problem(exc: zstandard.ZstdError) -> str:
    text = str(exc).removeprefix("zstd decompressor error: ")
    if "too much memory" in text:
        return (
            f"a frame needs a window larger than {ZSTD_MAX_WINDOW >> 20} MiB "
            "(compress at a level of 19 or below, without long-distance matching)"
        )
    return text


class _Zlib:
    """gzip members one after another (RFC 1952), or one zlib stream (HTTP's `deflate`)."""

    def __init__(self, name: str, wbits: int) -> None:
        self.name = name
        self.wbits = wbits
        self.stream = zlib.decompressobj(wbits)
        self.in_stream = False

    def feed(self, data: bytes, budget: int) -> list[bytes]:
        out: list[bytes] = []
        pending = data
        while True:
            step = max(1, min(budget + 1, ZLIB_STEP))
            try:
                produced = self.stream.decompress(pending, step)
            except zlib.error as exc:
                raise _corrupt(self.name, str(exc)) from None
            self.in_stream = True
            if produced:
                out.append(produced)
                budget -= len(produced)
                if budget < 0:
                    return out
            if self.stream.eof:  # a member ended: what follows is the next member
                pending = self.stream.unused_data
                if pending and self.name == "deflate":
                    raise _corrupt(self.name, "data after the end of the zlib stream")
                self.stream = zlib.decompressobj(self.wbits)
                self.in_stream = False
                if not pending:
                    return out
            else:
                pending = self.stream.unconsumed_tail
                # A full step may leave output inside zlib even when all input was taken.
                if not pending and len(produced) < step:
                    return out

    def finish(self) -> None:
        if self.in_stream:
            raise _corrupt(self.name, "the body ends inside the compressed stream (truncated)")


def _decoder(header: str | None, passed: tuple[str, ...] = ()) -> _Decoder:
    codings = [c.strip().lower() for c in (header or "").split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return _Identity()
    if len(codings) == 1:
        if codings[0] in passed:  # the endpoint undoes it itself (Prometheus' snappy block format)
            return _Identity()
        if codings[0] == "zstd":
            return _Zstd()
        if codings[0] in ("gzip", "x-gzip"):
            return _Zlib("gzip", 16 + zlib.MAX_WBITS)
        if codings[0] == "deflate":
            return _Zlib("deflate", zlib.MAX_WBITS)
    raise HttpError(
        415,
        f"Content-Encoding {header!r} is not supported; send zstd, gzip, deflate or identity (one coding)",
        UNSUPPORTED_CONTENT_ENCODING,
        {"contentEncoding": (header or "")[:100], "supported": ", ".join(ENCODINGS)},
    )


async def read_body(
    request: Request, limit: int, setting: str = "max_request_bytes", passed: tuple[str, ...] = ()
) -> bytes:
    """The body, decoded per its Content-Encoding; raises HttpError (413, 415, 400) before more
    than the limit of it is held. `setting`: the limit's name in Settings, for the 413. `passed`:
    codings returned as sent, for the caller to undo (it then bounds what they produce)."""
    decoder = _decoder(request.headers.get("content-encoding"), passed)
    length = request.headers.get("content-length")
    if length is not None and length.strip().isdigit() and int(length) > limit:
        raise BodyTooLarge(limit, f"(Content-Length {int(length)})", setting)
    received = 0
    size = 0
    parts: list[bytes] = []
    try:
        async for chunk in request.stream():
            if not chunk:
                continue
            received += len(chunk)
            if received > limit:
                raise BodyTooLarge(limit, "as sent", setting)
            for part in decoder.feed(chunk, limit - size):
                size += len(part)
                parts.append(part)
            if size > limit:
                raise BodyTooLarge(limit, "decompressed", setting)
    except ClientDisconnect:
        raise HttpError(400, "the client disconnected before sending the whole body") from None
    decoder.finish()
    return b"".join(parts)
