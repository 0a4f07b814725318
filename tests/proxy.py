"""A TCP forwarder for tests, standing where a load balancer stands in front of Sparkwire servers:
new connections go to the current target port, which a test can switch; it can also cut every
open connection and refuse new ones for a while (a network blip, a restart)."""

from __future__ import annotations

import asyncio
import contextlib


class Proxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.refusing = False
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self.accepted += 1
        self._writers.update((writer, up_writer))
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(dst)
            with contextlib.suppress(Exception):
                dst.close()

    def cut(self) -> None:
        """Drop every open connection at once, as a crashed server or a broken network would."""
        for writer in list(self._writers):
            transport = writer.transport
            transport.abort()
        self._writers.clear()

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._pipes):
            task.cancel()
