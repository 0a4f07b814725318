"""One log line each time /readyz changes its answer: "ready: ..." when it turns 200 (the line an
operator waits for after start, long after uvicorn's "running on"), "not ready: <why>" when it
turns 503 again (the compute tier away, Spark's query restarting), until the server drains."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from app.api.health import not_ready_reason
from app.api.state import ServerState

logger = logging.getLogger("app.ready")
POLL_SECONDS = 0.25


class ReadinessLog:
    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="readiness-log")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        state, was_ready = self.state, False
        settings = state.settings
        while not state.draining:
            ready = state.ready
            if ready and not was_ready:
                logger.info(
                    "ready: serving on http://%s:%d (role %s); the readiness probe answers 200",
                    settings.host,
                    settings.port,
                    settings.role,
                )
            elif was_ready and not ready and not state.draining:
                logger.warning("not ready: %s (the readiness probe answers 503)", not_ready_reason(state))
            was_ready = ready
            await asyncio.sleep(POLL_SECONDS)
