"""Ending a Spark JVM that is still starting when the server stops.

A JVM that runs ends with the server: it reads its stdin (a pipe from this process) until EOF. One
still starting reads it only once it has started, so a stop during Spark's start-up would leave it
running on its own for half a minute. The server's own children are found in /proc (Linux); where
there is none this does nothing and the JVM ends as it would anyway."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path

logger = logging.getLogger(__name__)
SPARK_MAIN_CLASS = b"org.apache.spark.deploy.SparkSubmit"


def child_pids(parent: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ")" ends it
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent:
                pids.append(int(stat.parent.name))
    return pids


def end_starting_jvms() -> int:
    """SIGTERM to this process's Spark JVMs (spark-submit's); how many were sent one."""
    ended = 0
    for pid in child_pids(os.getpid()):
        with contextlib.suppress(OSError):
            if SPARK_MAIN_CLASS in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGTERM)
                ended += 1
    if ended:
        logger.info("Spark's JVM was still starting: ended it (SIGTERM)")
    return ended
