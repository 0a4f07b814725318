"""How much a point log may hold and how much disk it must leave free: the retention policy and the
free-space floor, both read by the SQLite log's writer (compute/log.py) before it commits."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

GIB = 1 << 30
DEFAULT_FLOOR_SHARE = 0.05  # of the file system, when that is less than 1 GiB


@dataclass(frozen=True)
class Retention:
    seconds: float  # points whose timestamp is older than now - seconds go (0 = keep forever)
    max_bytes: int  # the log's live size it prunes down to, oldest blocks first (0 = no cap)

    @property
    def prunes(self) -> bool:
        return self.seconds > 0 or self.max_bytes > 0


def default_min_free_bytes(path: Path) -> int:
    """1 GiB, or 5% of the file system when that is smaller (a small disk keeps a usable share)."""
    st = os.statvfs(path)
    return min(GIB, int(st.f_blocks * st.f_frsize * DEFAULT_FLOOR_SHARE))


class FreeSpaceFloor:
    """Whether the file system under `path` has fallen below `min_bytes` free (for unprivileged
    writers, as SQLite is). statvfs costs ~1 us but is asked once per group commit, so a reading is
    reused for `max_age` seconds."""

    def __init__(self, path: Path, min_bytes: int, max_age: float = 0.1) -> None:
        self.path, self.min_bytes, self.max_age = path, min_bytes, max_age
        self._read_at = -1.0
        self._free = 0

    def free_bytes(self) -> int:
        now = time.monotonic()
        if now - self._read_at > self.max_age:
            st = os.statvfs(self.path)
            self._free, self._read_at = st.f_bavail * st.f_frsize, now
        return self._free

    def below(self) -> bool:
        return self.min_bytes > 0 and self.free_bytes() < self.min_bytes

    def describe(self) -> str:
        return (
            f"free space under {self.path} is {self.free_bytes():,} bytes, below "
            f"SPARKWIRE_MIN_FREE_BYTES ({self.min_bytes:,}): writes are refused until space returns"
        )
