"""CPU and memory of a process and all its descendants (the server's JVM and Python workers are
children of the server process), read from /proc so the harness needs no extra dependency."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def children_map() -> dict[int, list[int]]:
    """Every process's children, from /proc (one pass: several trees can share it)."""
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def tree(pid: int, kids: dict[int, list[int]] | None = None) -> list[int]:
    kids = children_map() if kids is None else kids
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of one process (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return 0


@dataclass
class Usage:
    """What a process tree used over an interval: mean cores busy, peak resident memory."""

    seconds: float
    cpu_cores: float
    rss_max_bytes: int
    rss_main_max_bytes: int  # the server's own Python process (no JVM, no workers)

    def as_dict(self) -> dict[str, float]:
        return {
            "seconds": round(self.seconds, 1),
            "cpu_cores": round(self.cpu_cores, 2),
            "rss_max_mb": round(self.rss_max_bytes / 2**20, 1),
            "rss_main_max_mb": round(self.rss_main_max_bytes / 2**20, 1),
        }


@dataclass
class TreeSampler:
    """Samples a process tree in a background thread; `mark()`/`usage_since()` bracket a workload.

    CPU is summed over the processes alive at each sample, so a worker that exits between samples
    loses at most one sample interval of its CPU.
    """

    pid: int
    interval: float = 0.5
    _samples: list[tuple[float, float, int, int]] = field(default_factory=list)
    _cpu_by_pid: dict[int, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TreeSampler:
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _sample(self) -> tuple[float, float, int, int]:
        pids = tree(self.pid)
        for p in pids:
            self._cpu_by_pid[p] = max(self._cpu_by_pid.get(p, 0.0), cpu_seconds(p))
        rss = sum(rss_bytes(p) for p in pids)
        return time.monotonic(), sum(self._cpu_by_pid.values()), rss, rss_bytes(self.pid)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._samples.append(self._sample())
            self._stop.wait(self.interval)

    def mark(self) -> float:
        return time.monotonic()

    def usage_since(self, since: float, until: float | None = None) -> Usage:
        until = time.monotonic() if until is None else until
        window = [s for s in list(self._samples) if since <= s[0] <= until]
        if len(window) < 2:
            window = [self._sample(), self._sample()] if not window else [*window, self._sample()]
        (t0, c0, _, _), (t1, c1, _, _) = window[0], window[-1]
        return Usage(
            seconds=t1 - t0,
            cpu_cores=(c1 - c0) / (t1 - t0) if t1 > t0 else 0.0,
            rss_max_bytes=max(s[2] for s in window),
            rss_main_max_bytes=max(s[3] for s in window),
        )

    def rss_main_now(self) -> int:
        return rss_bytes(self.pid)
