"""A stop while the server still starts (SIGTERM, Ctrl+C): what it ends instead of waiting for.

- Spark's JVM: one that runs ends with the server, as it reads its stdin (a pipe from this
  process) until EOF; one still starting reads it only once it has started, so it would run on
  its own for half a minute. The server's own children are found in /proc (Linux); where there is
  none this does nothing and the JVM ends as it would anyway.
- The ingest decode workers (app/ingest/workers.py): a worker still spawning takes its imports'
  time (up to 20 s on a busy machine) before it can be asked to stop, and the pool's shutdown
  waits for that. It holds nothing yet, so it is killed. Nor may a Ctrl+C reach it while it
  imports (the terminal signals the whole process group): it would print a KeyboardInterrupt
  traceback. Once started it ignores SIGINT and SIGTERM itself; before that, it ignores them from
  birth (`signals_ignored_by_new_processes`)."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
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


def end_worker_processes() -> int:
    """SIGKILL to this process's multiprocessing children (the ingest decode workers); how many."""
    children = multiprocessing.active_children()
    for child in children:
        child.kill()
    for child in children:
        child.join(5)
    return len(children)


@contextlib.contextmanager
def signals_ignored_by_new_processes() -> Iterator[None]:
    """Processes started inside begin with SIGINT and SIGTERM ignored (an ignored signal stays
    ignored across exec; a blocked one does not stay blocked: multiprocessing's spawn unblocks
    it). The server's own handlers are back as soon as the processes are started: a few ms, in
    which a signal to the server would be lost."""
    if threading.current_thread() is not threading.main_thread():  # signal.signal: main thread only
        yield
        return
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler is not None:  # None: not set from Python, cannot be put back from here
                signal.signal(sig, handler)
