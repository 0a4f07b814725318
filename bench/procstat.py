"""CPU and memory of a process and all its descendants (the server's JVM and Python workers are
children of the server process), read from /proc so the harness needs no extra dependency."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

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


def _stat_cpu(path: str) -> float:
    try:
        with open(path, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of one process, all its threads (0 if it is gone)."""
    return _stat_cpu(f"/proc/{pid}/stat")


def thread_cpu_seconds(pid: int, tid: int) -> float:
    """user + system CPU seconds of one thread of `pid` (0 if it is gone)."""
    return _stat_cpu(f"/proc/{pid}/task/{tid}/stat")


def machine_busy_seconds() -> float:
    """CPU seconds all cores have been busy since boot, whatever ran (/proc/stat: all but idle and
    iowait): over an interval, with this harness's own figures, what other processes took."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    return (sum(fields[:8]) - fields[3] - fields[4]) / _TICKS  # user..steal, less idle and iowait


def python_thread_names(pid: int, timeout: float = 30) -> dict[int, str]:
    """{native thread id: Python thread name} of a live Python process, from `py-spy dump` (the
    bench extra); {} if py-spy is missing or cannot attach. Python 3.11 names no OS thread, so
    /proc cannot tell the log writer from the event loop; py-spy reads the interpreter's own."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    try:
        out = subprocess.run(
            [exe, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=timeout
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {int(m[1]): m[2] for m in re.finditer(r'^Thread (\d+) \(\w+\): "(.*)"$', out, re.MULTILINE)}


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
