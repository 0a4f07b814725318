"""How the server process's C allocator keeps freed memory (docs/decisions/0039-keep-freed-memory.md).

A long window's back-fill allocates arrays of tens of MB (an hour of a 1 kHz channel is 29 MB per
column) and frees them once the computation is loaded. glibc's defaults give most of that back to the
kernel at once (an allocation over its mmap threshold is unmapped on free; other threads' arenas
drop whole heaps; the main heap is trimmed past 2x that threshold), so the next back-fill faults the
same amount in again, zero-filled page by page: ~10 ms per 29 MB here, a good part of each hour-long
back-fill. Kept in one heap and trimmed only past `TRIM_THRESHOLD`, the next back-fill reuses it.
"""

from __future__ import annotations

import ctypes
import logging
import platform

logger = logging.getLogger(__name__)

# mallopt(3) parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

# Blocks up to this size come from the heap (glibc's upper bound for the setting): an hour of a 1 kHz
# channel's column is 28.8 MB. Bigger ones (a day at 100 Hz: 69 MB) are still mapped and unmapped.
MMAP_THRESHOLD = 32 * 2**20
# Free memory at the heap's top kept for reuse: two hour-long back-fills' temporaries (one read
# ahead of the one loading, compute/spark/backfill.py), ~200 MB each.
TRIM_THRESHOLD = 512 * 2**20
# One arena: another thread's arena is made of 64 MB heaps that glibc unmaps as soon as one is free,
# whatever the trim threshold; the allocations that matter are made under the GIL anyway.
ARENA_MAX = 1


def keep_freed_memory() -> bool:
    """Set glibc's allocator to keep freed memory for reuse; call before the server starts its
    threads (a thread that has allocated already keeps its arena). False (and nothing changed)
    where the C library is not glibc."""
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        settings = (
            (_M_ARENA_MAX, ARENA_MAX),
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        )
        ok = all(libc.mallopt(param, value) == 1 for param, value in settings)
    except (OSError, AttributeError):  # no mallopt in this process's C library
        return False
    if not ok:
        logger.warning("the C allocator refused a setting: freed memory is returned as usual")
    return ok
