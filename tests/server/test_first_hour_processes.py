"""The first hour's processes (issue 50, items 1-4 and 16), with real processes and real Spark: one
data dir one server, starts refused at once when they cannot succeed (before Spark starts), stops
that do not wait for Spark's start-up, boolean flags as switches, the demo's waiting line, and the
demo ending with `make run`'s server on Ctrl+C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from app.runtime.data_dir_lock import LOCK_NAME
from bench.serverproc import http_status
from tests.conftest import ROOT, ServerProcess, free_port, start_server
from tests.processes import alive, process_tree

# A refusal made before Spark starts costs the CLI's imports alone: a few seconds, up to 12 s
# measured on two shared cores at load 15. What proves that Spark never started is that the data dir
# (or its spark.log) is not there; this bound only says the refusal did not wait for anything.
QUICK_S = 30.0
# A SIGTERM while Spark starts: 1 s for the start-up thread, then the decode worker's shutdown
# (it may still be spawning); the issue measured 23-28 s before the process exited.
STOPPED_S = 15.0
JVM_GONE_S = 20.0  # the JVM sent SIGTERM while starting runs its shutdown hooks first

SERVE = [sys.executable, "-m", "app.runtime.cli", "serve"]
DEMO = [sys.executable, "-m", "app.runtime.cli", "demo"]


def run_cli(args: list[str], timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


@pytest.fixture(scope="module")
def holder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A running server, started with `--access-log` as a bare switch."""
    base = tmp_path_factory.mktemp("holder")
    proc = start_server(base / "data", base / "server.log", command=["serve", "--access-log"])
    yield proc
    proc.stop()


# -- 1. a data dir belongs to one process -----------------------------------------------------------
def test_a_second_server_on_the_same_data_dir_is_refused_at_once_naming_the_first(
    holder: ServerProcess,
) -> None:
    spark_log = holder.data_dir / "spark.log"
    spark_log_size = spark_log.stat().st_size
    done, took = run_cli([*SERVE, "--port", str(free_port()), "--data-dir", str(holder.data_dir)])
    assert done.returncode == 1, done.stderr
    assert took < QUICK_S
    said = lines(done.stderr)
    assert len(said) == 1, said
    assert f"data dir {holder.data_dir} is in use by another Sparkwire server (pid {holder.pid})" in said[0]
    assert "Traceback" not in done.stderr + done.stdout
    # The first is untouched: still ready, its Spark's output not joined by a second JVM's.
    assert http_status(f"{holder.base_url}/readyz") == 200
    assert spark_log.stat().st_size == spark_log_size


@pytest.mark.timeout(600)
def test_a_kill_9_never_blocks_the_restart_and_a_sigterm_during_start_up_stops_at_once(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    first = start_server(data_dir, tmp_path / "first.log", ready_path="/healthz", own_process_group=True)
    lock = data_dir / LOCK_NAME
    assert lock.read_text().strip() == str(first.pid)
    first.kill_all()
    assert lock.read_text().strip() == str(first.pid), "the stale lock file is what the restart meets"

    second = start_server(data_dir, tmp_path / "second.log", ready_path="/healthz", own_process_group=True)
    try:
        assert lock.read_text().strip() == str(second.pid)
        assert "in use" not in second.log_text()
        # Spark is still starting (it takes 25 s and more here): a SIGTERM now stops the process at once.
        assert http_status(f"{second.base_url}/readyz") == 503
        tree = process_tree(second.pid)
        started = time.monotonic()
        second.process.send_signal(signal.SIGTERM)
        second.process.wait(120)
        took = time.monotonic() - started
    finally:
        if second.process.poll() is None:
            second.kill_all()
    log = second.log_text()
    assert took < STOPPED_S, f"{took:.1f}s from SIGTERM to exit:\n{log[-3000:]}"
    assert "Spark was still starting: stopping without waiting for it" in log
    assert "Traceback" not in log
    assert wait_until(lambda: not any(alive(pid) for pid in tree), JVM_GONE_S), "a process outlived it"


# -- 3 and 4. values that cannot work are refused before anything starts ------------------------------
@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--port", "99999", "Input should be less than or equal to 65535"),
        ("--port", "-1", "Input should be greater than or equal to 1"),
        ("--log-level", "LOUD", "Input should be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'"),
    ],
)
def test_a_bad_port_or_log_level_is_a_usage_error(tmp_path: Path, flag: str, value: str, says: str) -> None:
    data_dir = tmp_path / "data"
    done, took = run_cli([*SERVE, "--data-dir", str(data_dir), flag, value])
    assert done.returncode == 2
    assert took < QUICK_S
    said = lines(done.stderr)
    assert len(said) == 2, said
    assert said[0].startswith("usage: sparkwire serve")
    assert said[1] == f"sparkwire serve: error: argument {flag}: {says} (got {value!r})"
    assert not data_dir.exists(), "nothing may start on a usage error"


def test_a_port_in_use_stops_the_start_before_spark(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done, took = run_cli([*SERVE, "--port", str(port), "--data-dir", str(data_dir)])
    assert done.returncode == 1
    assert took < QUICK_S
    said = lines(done.stderr)
    assert len(said) == 1, said
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in said[0]
    assert not (data_dir / "spark.log").exists(), "Spark started"


def test_an_unreachable_redis_is_one_line(tmp_path: Path) -> None:
    """The Kafka log given a Redis keeps its catalogs there (Settings.shared_catalog): an unreachable
    one is found before the broker is asked anything and before Spark starts."""
    data_dir = tmp_path / "data"
    url = f"redis://:secret@127.0.0.1:{free_port()}/0"  # nothing listens there
    done, took = run_cli(
        [
            *SERVE,
            "--source",
            "kafka",
            "--redis-url",
            url,
            "--data-dir",
            str(data_dir),
            "--port",
            str(free_port()),
        ]
    )
    assert done.returncode == 1
    assert took < QUICK_S
    said = lines(done.stderr)
    assert len(said) == 1, said
    assert f"cannot reach Redis at {url.replace('secret', '***')} (--redis-url)" in said[0]
    assert "secret" not in done.stderr
    assert not (data_dir / "spark.log").exists(), "Spark started"


def test_a_boolean_flag_is_a_switch(holder: ServerProcess) -> None:
    probe = uuid.uuid4().hex
    assert httpx.get(f"{holder.base_url}/healthz?probe={probe}", timeout=10).status_code == 200
    assert wait_until(lambda: f'"GET /healthz?probe={probe} HTTP/1.1" 200' in holder.log_text(), 10)


def test_the_demo_says_it_is_waiting_for_the_server_then_gives_up_in_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    demo = subprocess.Popen([*DEMO, "--url", url, "--wait", "6"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert demo.stderr is not None
    first = demo.stderr.readline()
    assert time.monotonic() - started < QUICK_S
    assert f"demo feed: waiting for the Sparkwire server at {url}" in first
    rest = demo.stderr.read()
    assert demo.wait(60) == 1
    said = lines(rest)
    assert len(said) == 1, said
    assert f"no Sparkwire server answered at {url} within 6s" in said[0]
    assert "Traceback" not in first + rest


def test_the_demo_stops_with_the_process_it_was_given() -> None:
    other = subprocess.Popen(["sleep", "600"])
    demo = subprocess.Popen(
        [*DEMO, "--url", f"http://127.0.0.1:{free_port()}", "--stop-with", str(other.pid)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert demo.stderr is not None
    assert "waiting for the Sparkwire server" in demo.stderr.readline()  # it runs, and waits
    other.kill()
    other.wait()
    assert demo.wait(10) == 0
    rest = demo.stderr.read()
    assert f"process {other.pid} (the server) has ended; the demo stops too" in rest
    assert "Traceback" not in rest


def test_ctrl_c_ends_the_demo_quietly() -> None:
    demo = subprocess.Popen(
        [*DEMO, "--url", f"http://127.0.0.1:{free_port()}"], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    assert demo.stderr is not None
    assert "waiting for the Sparkwire server" in demo.stderr.readline()
    demo.send_signal(signal.SIGINT)
    assert demo.wait(30) == 0
    assert demo.stderr.read() == ""


# -- 2. Ctrl+C on `make run` ends the demo too ---------------------------------------------------------
@pytest.mark.timeout(600)
def test_ctrl_c_on_make_run_ends_the_server_and_the_demo(tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "make-run.log"
    with log_path.open("wb") as log:
        make = subprocess.Popen(
            # -o: never reinstall here, whatever the timestamps (the test runs from the installed .venv)
            ["make", "-o", ".venv/.installed-run", "run", f"PORT={port}", f"DATA_DIR={tmp_path / 'data'}"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's foreground group, which Ctrl+C signals whole
        )
    base = f"http://127.0.0.1:{port}"

    def demo_writes() -> bool:
        try:
            listed = httpx.get(f"{base}/series", timeout=5).json()
        except httpx.HTTPError:
            return False
        return any(s["dataSourceRid"] == "ri.sparkwire.main.dataset.demo" for s in listed)

    try:
        assert wait_until(demo_writes, 240, step=1.0), log_path.read_text()[-3000:]
        demos = [
            p for p in process_tree(make.pid) if b"--stop-with" in Path(f"/proc/{p}/cmdline").read_bytes()
        ]
        assert len(demos) == 1
        os.killpg(make.pid, signal.SIGINT)  # what Ctrl+C in the terminal does
        make.wait(120)
        assert wait_until(lambda: not alive(demos[0]), 10), "the demo outlived make run"
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait(30)
    text = log_path.read_text()
    assert "the demo stops too" in text
    assert "Traceback" not in text


# -- 16. what the log says between "running on" and "ready" ---------------------------------------------
def test_the_log_says_spark_is_warming_up_after_the_running_on_line(holder: ServerProcess) -> None:
    assert wait_until(lambda: "INFO app.ready: ready: serving on" in holder.log_text(), 10)
    said = lines(holder.log_text())
    running = next(i for i, line in enumerate(said) if "Uvicorn running on " + holder.base_url in line)
    assert "Spark is warming up" in said[running + 1]
    ready = next(i for i, line in enumerate(said) if "app.ready: ready: serving on" in line)
    assert ready > running + 1
