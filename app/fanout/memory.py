"""Memory given back after a spike (issue 44: "memory taken by any spike is kept"). glibc keeps
what a large computation's windows and outputs, or a large FullResult's bytes, free for reuse by
this process; once enough has been let go, `malloc_trim` returns it to the system. The trim runs on
a thread (it walks the heap: milliseconds to a few hundred for gigabytes), one at a time, shortly
after the last large release, so a burst of releases costs one trim."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

TRIM_AFTER_BYTES = 64 << 20  # released since the last trim
TRIM_DELAY_S = 1.0  # after the last large release: a burst of releases is trimmed once
BYTES_PER_OUTPUT_ITEM = 64  # a rough size of one output point, bucket or range with its window's points


def released_bytes(computation: object) -> int:
    """About what a released computation held: its outputs' items (replaced whole, never changed
    in place, so read without its lock) at BYTES_PER_OUTPUT_ITEM."""
    outputs = getattr(computation, "outputs", None)
    if not isinstance(outputs, dict):
        return 0
    return BYTES_PER_OUTPUT_ITEM * sum(len(out) for out in list(outputs.values()))


def _malloc_trim() -> Callable[[int], int] | None:
    libc = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(libc), "malloc_trim", None) if libc else None  # glibc only
    return trim if callable(trim) else None


MALLOC_TRIM = _malloc_trim()


def give_back_freed_memory() -> None:
    """A replay's history and held outputs are the server's largest short-lived allocations, and
    glibc keeps what they free for reuse; once no replay runs, return it to the system
    (bench/results/replay-memory.md: without this the RSS after replays never came down)."""
    if MALLOC_TRIM is not None:
        MALLOC_TRIM(0)


class MemoryGiveBack:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._released = 0
        self._timer: asyncio.TimerHandle | None = None
        self._trimming = False

    def released(self, nbytes: int) -> None:
        """About `nbytes` were let go (on the loop)."""
        self._released += nbytes
        if self._released < TRIM_AFTER_BYTES:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(TRIM_DELAY_S, self._trim)

    def _trim(self) -> None:
        self._timer = None
        if self._trimming:  # one running: it gives back this too, or the next release triggers one
            return
        self._released = 0
        self._trimming = True
        future = self.loop.run_in_executor(None, give_back_freed_memory)
        future.add_done_callback(self._trimmed)

    def _trimmed(self, future: asyncio.Future[None]) -> None:
        self._trimming = False
        if future.exception() is not None:
            logger.warning("malloc_trim failed: %s", future.exception())
