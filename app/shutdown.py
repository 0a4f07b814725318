"""Graceful drain on SIGTERM: not ready, shutdownNotice to everyone, updates keep flowing for the
grace period, then every connection closes with 1012 (service restart)."""

from __future__ import annotations

import asyncio
import logging

from app import frames
from app.state import ServerState

log = logging.getLogger(__name__)

SERVICE_RESTART = 1012


async def drain(state: ServerState) -> None:
    state.draining = True
    connections = list(state.connections)
    log.info(
        "draining: shutdownNotice to %d connection(s), grace %.1fs",
        len(connections),
        state.settings.shutdown_grace,
    )
    for connection in connections:
        connection.send(frames.shutdown_notice())
    await asyncio.sleep(state.settings.shutdown_grace)
    await asyncio.gather(
        *(c.close(SERVICE_RESTART, "server shutting down") for c in list(state.connections)),
        return_exceptions=True,
    )
