"""A data dir belongs to one server process. Two on one dir break each other's streaming query
(they share its checkpoint) and each serves points the other cannot see, so the second refuses
before it starts anything.

The lock is the kernel's (flock(2) on DATA_DIR/sparkwire.lock): it goes with the process however
that ends, kill -9 included, so a stale lock file never blocks a restart. The file holds the
holder's pid, for the refusal to name it."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_NAME = "sparkwire.lock"


class DataDirUnavailable(Exception):
    """Another process holds the data dir (the message names it), or it cannot be used at all."""


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise DataDirUnavailable at once (no waiting). The descriptor is not inherited
        by the processes the server starts (Python opens files close-on-exec), so none of them can
        keep the lock after the server has gone."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # not writable, not a directory, ...
            raise DataDirUnavailable(
                f"cannot use data dir {self.path.parent}: {exc.strerror or exc}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirUnavailable(
                f"data dir {self.path.parent} is in use by another Sparkwire server (pid {holder}); "
                "stop that one first, or give this one another --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None
