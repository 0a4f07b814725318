"""A payload many messages carry, deflated at most once (app/transport/deflate.py splices it).

Fan-out sends one computation's update to every subscriber in its own envelope; the frames module
builds each message as `head + shared + tail` (`spliced`), which the shared deflate recognises by
its parts. Pure bytes and zlib: no WebSocket library here, so the frames stay sans-I/O.
"""

from __future__ import annotations

import zlib

DEFLATE_LEVEL = 1  # docs/decisions/0010-deflate-level.md
MEM_LEVEL = 5


class SharedPayload:
    """Bytes that many messages carry, deflated at most once per window size."""

    __slots__ = ("_deflated", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._deflated: dict[int, bytes] = {}

    def deflated(self, window_bits: int) -> bytes:
        """A raw deflate stream of `data` that starts and ends on a byte boundary (sync flush) and
        refers to nothing before itself, so it may follow any other such blocks in a message."""
        out = self._deflated.get(window_bits)
        if out is None:
            compressor = zlib.compressobj(DEFLATE_LEVEL, zlib.DEFLATED, -window_bits, MEM_LEVEL)
            out = compressor.compress(self.data) + compressor.flush(zlib.Z_SYNC_FLUSH)
            self._deflated[window_bits] = out
        return out


class SplicedBytes(bytes):
    """A message's UTF-8 bytes, `head + shared.data + tail`, which still knows its three parts."""

    parts: tuple[bytes, SharedPayload, bytes]


class SplicedText(str):
    """A text message built as `head + shared + tail`. The server encodes it with `.encode()`
    (uvicorn), which keeps the parts for `SharedDeflate.encode`."""

    parts: tuple[bytes, SharedPayload, bytes]

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        if encoding.lower().replace("-", "").replace("_", "") != "utf8":
            return str.encode(self, encoding, errors)
        head, shared, tail = self.parts
        data = SplicedBytes(head + shared.data + tail)
        data.parts = self.parts
        return data


def spliced(head: bytes, shared: SharedPayload, tail: bytes) -> SplicedText:
    text = SplicedText((head + shared.data + tail).decode())
    text.parts = (head, shared, tail)
    return text
