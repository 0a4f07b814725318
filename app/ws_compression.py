"""permessage-deflate tuned for fan-out and idle connections.

Every frame is compressed once per connection (each keeps its own deflate context), so with
thousands of subscribers compression is the server's largest cost: 41% of its samples in a fan-out
profile (1,000 subscriptions on 200 connections). zlib level 1 compresses our JSON frames twice as
fast as the default level 6 for ~11% more bytes. A compressor holds ~30 KB from its creation, so it
is created at a connection's first message worth compressing: small messages (a pong, an error) go
uncompressed, which RFC 7692 allows, and an idle dashboard never pays for one
(docs/decisions/0010-deflate-level.md). The window and memLevel stay uvicorn's (12 bits, 5).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from websockets.extensions.base import Extension
from websockets.extensions.permessage_deflate import PerMessageDeflate, ServerPerMessageDeflateFactory
from websockets.frames import CONT, CTRL_OPCODES, Frame
from websockets.typing import ExtensionParameter

DEFLATE_LEVEL = 1
WINDOW_BITS = 12
MEM_LEVEL = 5
MIN_COMPRESSED_BYTES = 256  # below this, deflate saves a few bytes for the CPU and a compressor


class LazyPerMessageDeflate(PerMessageDeflate):
    """permessage-deflate that sends small messages as they are and creates its compressor on the
    first message it compresses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.__dict__.pop("encoder", None)  # created on the first message that needs it
        self._compressing = False  # whether the message being sent is compressed (fragments)

    def encode(self, frame: Frame) -> Frame:
        if frame.opcode in CTRL_OPCODES:
            return frame
        if frame.opcode is not CONT:
            self._compressing = not frame.fin or len(frame.data) >= MIN_COMPRESSED_BYTES
        if not self._compressing:
            return frame  # RSV1 unset: the peer reads it as an uncompressed message
        if not self.local_no_context_takeover and "encoder" not in self.__dict__:
            self.encoder = zlib.compressobj(wbits=-self.local_max_window_bits, **self.compress_settings)
        return super().encode(frame)


class LazyDeflateFactory(ServerPerMessageDeflateFactory):
    def process_request_params(
        self, params: Sequence[ExtensionParameter], accepted_extensions: Sequence[Extension]
    ) -> tuple[list[ExtensionParameter], PerMessageDeflate]:
        response, agreed = super().process_request_params(params, accepted_extensions)
        lazy = LazyPerMessageDeflate(
            agreed.remote_no_context_takeover,
            agreed.local_no_context_takeover,
            agreed.remote_max_window_bits,
            agreed.local_max_window_bits,
            self.compress_settings,
        )
        return response, lazy


def deflate_factory() -> ServerPerMessageDeflateFactory:
    return LazyDeflateFactory(
        server_max_window_bits=WINDOW_BITS,
        client_max_window_bits=WINDOW_BITS,
        compress_settings={"memLevel": MEM_LEVEL, "level": DEFLATE_LEVEL},
    )
