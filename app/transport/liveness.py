"""One task checks every WebSocket connection, instead of two tasks per connection: each tick it
runs each session's heartbeat (ping a silent peer, close one that never answered) and each
connection's slow-consumer check. An idle connection then holds no task of its own besides its
receive loop, which is most of what it costs in memory (BENCHMARKS.md, idle connections)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

logger = logging.getLogger(__name__)


class Checked(Protocol):
    def check(self) -> None:
        """One tick's checks; never raises for one connection's trouble."""
        ...


class Liveness:
    def __init__(self, period: float) -> None:
        self.period = period
        self._checked: set[Checked] = set()
        self._task: asyncio.Task[None] | None = None

    def add(self, item: Checked) -> None:
        self._checked.add(item)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="ws-liveness")

    def discard(self, item: Checked) -> None:
        self._checked.discard(item)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while self._checked:
            await asyncio.sleep(self.period)
            for item in list(self._checked):
                try:
                    item.check()
                except Exception:  # one connection's failure must not stop the others' checks
                    logger.exception("a connection's liveness check failed")
