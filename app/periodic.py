"""One periodic task on the event loop: `tick` every `period` seconds between `start` and `stop`.
The server's three (late reports, the liveness checks, the request summary line) share it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)


class Periodic:
    def __init__(
        self, name: str, period: float, tick: Callable[[], None], keep_going: Callable[[], bool] | None = None
    ) -> None:
        """`keep_going`, checked before each wait: False ends the task (`start` may run it again)."""
        self.name = name
        self.period = period
        self._tick = tick
        self._keep_going = keep_going
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """On the event loop; nothing if it runs already."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Cancels the task and waits for it; a tick under way is not cut in half (ticks are synchronous)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while self._keep_going is None or self._keep_going():
            await asyncio.sleep(self.period)
            try:
                self._tick()
            except Exception:  # one bad tick must not end the task
                logger.exception("%s: a tick failed", self.name)
