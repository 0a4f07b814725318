"""Start and stop a real Sparkwire server process: the one helper the benchmarks and the tests
(tests/conftest.py) share."""

from __future__ import annotations

import contextlib
import os
import random
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


def stop_process(process: subprocess.Popen[bytes], timeout: float = 60, sig: int = signal.SIGTERM) -> int:
    """`sig` (SIGTERM), then SIGKILL if it has not exited within `timeout` seconds; its exit code."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(10)


def free_port() -> int:
    """A free port below the kernel's ephemeral range (ip_local_port_range starts at 32768). A port
    from that range (what binding port 0 gives) can be taken as the source port of any outgoing
    connection on the machine before the server binds it: CI lost a run to exactly that."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


def http_status(url: str, timeout: float = 2.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (OSError, urllib.error.URLError):
        return 0


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    port: int
    data_dir: Path
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

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> dict[str, float]:
        """The server's Prometheus samples (`GET /metrics`), by name; a labelled one by
        `name{label="value",...}`, its labels sorted."""
        with urllib.request.urlopen(f"{self.base_url}/metrics", timeout=10) as r:
            families = text_string_to_metric_families(r.read().decode())
        return {_sample_key(s.name, s.labels): s.value for family in families for s in family.samples}

    def kill_all(self) -> None:
        """kill -9 the server and everything it started (the JVM, Python workers), as a machine
        or container crash would. Needs `launch(..., own_process_group=True)`."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        return stop_process(self.process, timeout, sig)


def _sample_key(name: str, labels: dict[str, str]) -> str:
    if not labels:
        return name
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def launch(
    data_dir: Path,
    log_path: Path,
    env: dict[str, str],
    ready_timeout: float,
    *,
    ready_path: str = "/readyz",
    own_process_group: bool = False,
    command: list[str] | None = None,
) -> ServerProcess:
    """`python -m app.runtime.cli` on a free port, once `ready_path` answers 200. `command`: what
    follows `sparkwire` (default `serve`); the port and data dir are added. `env` over os.environ."""
    port = free_port()
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.runtime.cli",
            *(command or ["serve"]),
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=own_process_group,
    )
    server = ServerProcess(process, port, data_dir, log_path)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{server.log_text()[-3000:]}")
        if http_status(f"{server.base_url}{ready_path}", timeout=1.0) == 200:
            return server
        time.sleep(0.25)
    if own_process_group:
        server.kill_all()
    else:
        server.stop(signal.SIGKILL)
    raise RuntimeError(f"server not ready in {ready_timeout}s:\n{server.log_text()[-3000:]}")


def start_server(
    data_dir: Path, log_path: Path, env: dict[str, str], ready_timeout: float = 240
) -> ServerProcess:
    """A benchmark's server: no drain on the way out, warnings only in its log."""
    defaults = {"SPARKWIRE_SHUTDOWN_GRACE": "0", "SPARKWIRE_LOG_LEVEL": "WARNING"}
    return launch(data_dir, log_path, {**defaults, **env}, ready_timeout)
