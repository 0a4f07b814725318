"""Graceful drain on SIGTERM or SIGINT: not ready, shutdownNotice to everyone, updates keep flowing
for the grace period, then every connection still open closes with 1012 (service restart).

The grace period is for clients to move elsewhere, so it ends as soon as none is left: a server
without WebSocket clients stops at once, and one whose clients all left after the notice stops
then. A second signal ends it at once (`state.end_grace`): the clients get their 1012 and the
server still stops cleanly. The streaming query is no longer restarted from the moment the drain begins
(compute/spark/supervisor.py): a restart would outlive the process it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from app.api.state import ServerState
from app.protocol import frames
from app.protocol.close_codes import SERVICE_RESTART

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.1  # how often the drain looks for clients that have left


async def drain(state: ServerState) -> None:
    state.draining = True
    if state.supervisor is not None:
        state.supervisor.begin_shutdown()
    connections = list(state.connections)
    grace = state.settings.shutdown_grace
    logger.info("draining: shutdownNotice to %d connection(s), grace %.1fs", len(connections), grace)
    if not connections:
        logger.info("draining: no connections, stopping now")
        return
    for connection in connections:
        connection.send(frames.shutdown_notice())
    started = time.monotonic()
    deadline = started + grace
    while state.connections and time.monotonic() < deadline and not state.end_grace.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                state.end_grace.wait(), min(POLL_SECONDS, max(0.0, deadline - time.monotonic()))
            )
    remaining = list(state.connections)
    if not remaining:
        logger.info("draining: every client left after %.1fs, stopping now", time.monotonic() - started)
        return
    why = "a second signal" if state.end_grace.is_set() else "grace period over"
    logger.info("draining: %s, closing %d connection(s) with 1012", why, len(remaining))
    await asyncio.gather(
        *(c.close(SERVICE_RESTART, "server shutting down") for c in remaining),
        return_exceptions=True,
    )
