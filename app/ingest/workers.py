"""Large JSON write bodies decoded in a worker process, off the event loop and its GIL.

The strict JSON decoder (app/ingest/writes.py `fast_writes`) builds and frees Python objects for every
point, ~290 ns each, all of it holding the GIL: at a million points a second that is most of a core
on the thread that also answers HTTP and feeds WebSockets (docs/decisions/0041). A body of at least
`SPARKWIRE_INGEST_DECODE_MIN_BYTES` goes to a pool of `SPARKWIRE_INGEST_DECODE_WORKERS` processes,
which hand back numpy columns (pickled as their bytes, ~0.1 µs a point on our side). Small bodies
stay on the event loop, where a round trip to a worker would cost more than the decode.

A body the worker's strict decoder declines comes back as None and is decided on the event loop by
the validator, so a client sees the same answer, error text included, whichever path its body took.
A worker that dies (the OOM killer, a signal) is replaced, and the body it held is decoded here."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np
from prometheus_client import Counter

from app.ingest.writes import InvalidWrite, fast_writes, json_writes, validated_writes
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesKind

logger = logging.getLogger(__name__)


def column_writes(body: bytes) -> list[SeriesWrite] | None:
    """A worker's job: `fast_writes` with each numeric series as numpy columns (the log takes either,
    and arrays cross the process boundary as raw bytes, where lists of floats would be pickled one
    object at a time). None when the strict decoder declines the body."""
    writes = fast_writes(body)
    if writes is None:
        return None
    for write in writes:
        write.ts = np.array(write.ts, dtype=np.int64)
        if write.kind is SeriesKind.NUMERIC:
            write.values = np.array(write.values, dtype=np.float64)
    return writes


def _exit_with(parent: int) -> None:
    """A worker's initializer: leave when the server does, even when it is SIGKILLed (its pipes stay
    open in the worker, so nothing else would tell it). A Ctrl+C or SIGTERM sent to the server's
    process group is the server's to act on: it drains, then stops its workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="sparkwire-parent-watch", daemon=True).start()


class DecodeWorkers:
    """Where `POST /storage/writer/v1` decodes its bodies: the pool for large ones, the event loop
    for the rest (and for all of them when `processes` is 0)."""

    def __init__(self, processes: int, min_bytes: int, decoded: Counter) -> None:
        self.processes, self.min_bytes = processes, min_bytes
        self._in_worker, self._in_loop = decoded.labels("worker"), decoded.labels("event_loop")
        self._pool: ProcessPoolExecutor | None = self._new_pool() if processes > 0 else None

    def _new_pool(self) -> ProcessPoolExecutor:
        # spawn, not fork: the server has a JVM gateway and a dozen threads a fork would copy mid-step
        pool = ProcessPoolExecutor(
            self.processes,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_exit_with,
            initargs=(os.getpid(),),
        )
        pool.submit(int)  # start the workers now, not on the first large body
        return pool

    async def writes(self, body: bytes) -> list[SeriesWrite]:
        """The body's writes; raises InvalidWrite (app/ingest/writes.py) for a body it cannot accept."""
        pool = self._pool
        if pool is None or len(body) < self.min_bytes:
            self._in_loop.inc()
            return json_writes(body)
        try:
            writes = await asyncio.wrap_future(pool.submit(column_writes, body))
        except BrokenProcessPool:
            self._replace(pool)
            self._in_loop.inc()
            return json_writes(body)
        if writes is None:  # the worker's strict decoder declined it: the validator accepts or explains
            self._in_loop.inc()
            return validated_writes(body)
        self._in_worker.inc()
        return writes

    async def decoded(self, decode: Callable[[bytes], list[SeriesWrite]], body: bytes) -> list[SeriesWrite]:
        """`decode(body)` (a module-level function: it is pickled) where `writes` decodes a body of
        this size: the pool for a large one. Its InvalidWrite comes back as it was raised."""
        pool = self._pool
        if pool is None or len(body) < self.min_bytes:
            self._in_loop.inc()
            return decode(body)
        try:
            writes = await asyncio.wrap_future(pool.submit(decode, body))
        except BrokenProcessPool:
            self._replace(pool)
            self._in_loop.inc()
            return decode(body)
        except InvalidWrite:  # decided in the worker: refused there
            self._in_worker.inc()
            raise
        self._in_worker.inc()
        return writes

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        if self._pool is not broken:  # another request replaced it already
            return
        logger.warning("an ingest decode worker died; starting a new pool (this body decoded in-process)")
        broken.shutdown(wait=False, cancel_futures=True)
        self._pool = self._new_pool()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
