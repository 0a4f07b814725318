"""Start and stop a real Sparkwire server process for a benchmark."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent


def stop_process(process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_status(url: str, timeout: float = 2.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (OSError, urllib.error.URLError):
        return 0


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/persistent-compute/ws"

    @property
    def pid(self) -> int:
        return self.process.pid

    def metrics(self) -> dict[str, float]:
        """The server's unlabelled Prometheus samples (`GET /metrics`), by name."""
        with urllib.request.urlopen(f"{self.base_url}/metrics", timeout=10) as r:
            families = text_string_to_metric_families(r.read().decode())
        return {s.name: s.value for family in families for s in family.samples if not s.labels}

    def stop(self, timeout: float = 60) -> None:
        stop_process(self.process, timeout)


def start_server(data_dir: Path, log_path: Path, env: dict[str, str], ready_timeout: float = 240) -> Server:
    port = free_port()
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "app.runtime.cli", "serve", "--port", str(port), "--data-dir", str(data_dir)],
        cwd=ROOT,
        env={**os.environ, "SPARKWIRE_SHUTDOWN_GRACE": "0", "SPARKWIRE_LOG_LEVEL": "WARNING", **env},
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    server = Server(process, port, log_path)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"server exited with {process.returncode}:\n{tail}")
        if http_status(f"{server.base_url}/readyz") == 200:
            return server
        time.sleep(0.25)
    server.stop()
    raise RuntimeError(
        f"server not ready in {ready_timeout}s:\n{log_path.read_text(errors='replace')[-3000:]}"
    )
