"""One task checks every WebSocket connection, instead of two tasks per connection: each tick it
runs each session's heartbeat (ping a silent peer, close one that never answered) and each
connection's slow-consumer check. An idle connection then holds no task of its own besides its
receive loop, which is most of what it costs in memory (BENCHMARKS.md, idle connections)."""

from __future__ import annotations

import logging
from typing import Protocol

from app.periodic import Periodic

logger = logging.getLogger(__name__)


class Checked(Protocol):
    def check(self) -> None:
        """One tick's checks; never raises for one connection's trouble."""
        ...


class Liveness:
    def __init__(self, period: float) -> None:
        self.period = period
        self._checked: set[Checked] = set()
        # runs while there is a connection to check (started again by the next one)
        self._periodic = Periodic("ws-liveness", period, self._tick, keep_going=lambda: bool(self._checked))

    def add(self, item: Checked) -> None:
        self._checked.add(item)
        self._periodic.start()

    def discard(self, item: Checked) -> None:
        self._checked.discard(item)

    async def stop(self) -> None:
        await self._periodic.stop()

    def _tick(self) -> None:
        for item in list(self._checked):
            try:
                item.check()
            except Exception:  # one connection's failure must not stop the others' checks
                logger.exception("a connection's liveness check failed")
