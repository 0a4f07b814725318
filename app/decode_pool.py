"""Big ingest bodies are decoded in a worker process. Reading a protobuf WriteRequestNominal's points
costs Python ~0.65 us a point (upb: an object per field read), so at a million points/s decoding
alone would take the event loop's whole core, and one request of a million points would stall every
connection for ~0.6 s. The worker has an interpreter and a GIL of its own: the event loop sends it
the body's bytes and gets numpy columns back. Small bodies stay inline, where the round trip
(~0.1 ms) would cost more than the decoding."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

OFFLOAD_BYTES = 64 << 10  # ~2,600 points of a protobuf body (~1.7 ms of decoding), decompressed


def _ignore_stop_signals() -> None:
    """The worker stops with the server (its pipe closes), never on a signal meant for the group:
    Ctrl+C or a supervisor's group SIGTERM must not print a worker's traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


class DecodePool:
    """One worker process, started at the first big body ("spawn": a fork of a server that already
    runs Spark's threads would copy their locks)."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    async def run(self, size: int, fn: Callable[..., T], *args: object) -> T:
        if size < OFFLOAD_BYTES:
            return fn(*args)
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(1, mp_context=context, initializer=_ignore_stop_signals)
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except BrokenProcessPool:
            log.warning("the decoding worker died; this body is decoded inline, the next starts a new one")
            self._pool = None
            return fn(*args)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
