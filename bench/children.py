"""The harness's child processes (feed, clients, baselines): JSON lines out, commands in."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from bench.serverproc import ROOT

Json = Any


class Child:
    def __init__(self, module: str, args: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def read(self, timeout: float) -> Json:
        """The next JSON line the child printed."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.log_path.name}: no output in {timeout}s") from None
        if line is None:
            self.process.wait()
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{self.log_path.name} exited with {self.process.returncode}:\n{tail}")
        return json.loads(line)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def finish(self, timeout: float) -> Json:
        """Ask the child to stop, return its last line, and reap it."""
        with contextlib.suppress(BrokenPipeError, OSError):
            self.send("stop")
        out = self.read(timeout)
        self.process.wait(timeout)
        self._log.close()
        return out

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def write_spec(path: Path, spec: Json) -> str:
    path.write_text(json.dumps(spec))
    return f"@{path}"
