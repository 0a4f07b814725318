"""permessage-deflate tuned for fan-out and idle connections.

Fan-out sends one computation's update to every subscriber, each in its own envelope (the
subscription id), often on different connections. The server therefore negotiates
`server_no_context_takeover`: every message it sends decodes on its own, so the update's deflated
bytes can be computed once (`SharedPayload`) and spliced between the envelope's two ends, which go
as stored (uncompressed) deflate blocks. Compressing each frame once per connection took 26-41% of
the server's samples in a fan-out profile (1,000 subscriptions on 200 connections,
docs/decisions/0013-shared-deflate.md).

It also asks for `client_no_context_takeover`: the client's messages decode on their own too, so
no inflater is kept between them and an idle connection holds no zlib state
(docs/decisions/0020-client-no-context-takeover.md).

Other messages are compressed per message at zlib level 1, twice as fast as the default level 6
for ~11% more bytes (docs/decisions/0010-deflate-level.md). Messages under 256 bytes (a pong, an
error) go uncompressed, which RFC 7692 allows. The window and memLevel stay uvicorn's (12 bits, 5).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence
from typing import Any

from websockets.extensions.base import Extension
from websockets.extensions.permessage_deflate import PerMessageDeflate, ServerPerMessageDeflateFactory
from websockets.frames import CONT, CTRL_OPCODES, TEXT, Frame
from websockets.typing import ExtensionParameter

from app.protocol.shared_payload import DEFLATE_LEVEL, MEM_LEVEL

WINDOW_BITS = 12
MIN_COMPRESSED_BYTES = 256  # below this, deflate saves a few bytes for the CPU it costs
MAX_STORED_BLOCK = 65_535


def _stored(data: bytes) -> bytes:
    """One stored (uncompressed) deflate block, not final, starting on a byte boundary (RFC 1951
    3.2.4): a header byte (BFINAL 0, BTYPE 00, padding), LEN, NLEN, the bytes."""
    return b"\x00" + struct.pack("<HH", len(data), len(data) ^ 0xFFFF) + data


class SharedDeflate(PerMessageDeflate):
    """permessage-deflate without server context takeover that splices shared payloads' deflated
    bytes, sends small messages as they are, and holds no zlib state between messages."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # without server context takeover it creates no compressor
        self._compressing = False  # whether the message being sent is compressed (fragments)

    def encode(self, frame: Frame) -> Frame:
        if frame.opcode in CTRL_OPCODES:
            return frame
        if frame.opcode is not CONT:
            self._compressing = not frame.fin or len(frame.data) >= MIN_COMPRESSED_BYTES
        if not self._compressing:
            return frame  # RSV1 unset: the peer reads it as an uncompressed message
        parts = getattr(frame.data, "parts", None)
        # Splicing needs the peer to decode each message on its own (always agreed: deflate_factory).
        if parts is not None and frame.opcode is TEXT and frame.fin and self.local_no_context_takeover:
            head, shared, tail = parts
            if len(head) <= MAX_STORED_BLOCK and len(tail) <= MAX_STORED_BLOCK:
                # The peer appends 00 00 ff ff (RFC 7692 7.2.2): the final 00 makes that an empty
                # stored block, as the sync flush that the sender strips would have been.
                body = shared.deflated(self.local_max_window_bits)
                data = _stored(head) + body + _stored(tail) + b"\x00"
                return dataclasses.replace(frame, data=data, rsv1=True)
        return super().encode(frame)


class SharedDeflateFactory(ServerPerMessageDeflateFactory):
    def process_request_params(
        self, params: Sequence[ExtensionParameter], accepted_extensions: Sequence[Extension]
    ) -> tuple[list[ExtensionParameter], PerMessageDeflate]:
        response, agreed = super().process_request_params(params, accepted_extensions)
        shared = SharedDeflate(
            agreed.remote_no_context_takeover,
            agreed.local_no_context_takeover,
            agreed.remote_max_window_bits,
            agreed.local_max_window_bits,
            self.compress_settings,
        )
        return response, shared


def deflate_factory() -> ServerPerMessageDeflateFactory:
    return SharedDeflateFactory(
        server_no_context_takeover=True,
        client_no_context_takeover=True,
        server_max_window_bits=WINDOW_BITS,
        client_max_window_bits=WINDOW_BITS,
        compress_settings={"memLevel": MEM_LEVEL, "level": DEFLATE_LEVEL},
    )
