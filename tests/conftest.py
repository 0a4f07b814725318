"""One real Sparkwire server process (real Spark, real SQLite log) shared by the whole test run:
Spark takes ~10 s to start, so tests share it and isolate themselves by data source rid."""

from __future__ import annotations

import contextlib
import inspect
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill_all(self) -> None:
        """kill -9 the server and everything it started (the JVM, Python workers), as a machine
        or container crash would. Needs `start_server(..., own_process_group=True)`."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)


def start_server(
    data_dir: Path,
    log_path: Path,
    env: dict[str, str] | None = None,
    ready_timeout: float = 180,
    *,
    ready_path: str = "/readyz",
    own_process_group: bool = False,
    command: list[str] | None = None,
) -> ServerProcess:
    """`command`: what follows `sparkwire` (default `serve`); the port and data dir are added."""
    port = free_port()
    full_env = {**os.environ, "SPARKWIRE_SHUTDOWN_GRACE": "2", **(env or {})}
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            *(command or ["serve"]),
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ],
        cwd=ROOT,
        env=full_env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=own_process_group,
    )
    server = ServerProcess(process, port, data_dir, log_path)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{server.log_text()[-3000:]}")
        try:
            if httpx.get(f"{server.base_url}{ready_path}", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    if own_process_group:
        server.kill_all()
    else:
        server.stop(signal.SIGKILL)
    raise RuntimeError(f"server not ready in {ready_timeout}s:\n{server.log_text()[-3000:]}")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("sparkwire")
    # No computation outlives its last subscriber here (sparkwire_client asks for resume tokens,
    # which would keep one live for a minute): tests count live computations. tests/test_resume.py
    # starts its own server for resuming.
    # It opts in to data source labels in /metrics (tests/test_late_reports.py reads them per source).
    env = {"SPARKWIRE_RESUME_LINGER_SECONDS": "0", "SPARKWIRE_METRICS_TENANT_LABELS": "true"}
    proc = start_server(base / "data", base / "server.log", env=env)
    yield proc
    proc.stop()


CHROMIUM = "/usr/bin/chromium"  # Debian's package (.ci/run installs it); Playwright never downloads one


@pytest_asyncio.fixture(scope="session")
async def chromium() -> AsyncIterator[Browser]:
    """One headless Chromium for the browser tests."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        await browser.close()


@pytest_asyncio.fixture
async def page(chromium: Browser) -> AsyncIterator[Page]:
    """A fresh browser page (1100x700); the test fails if the page raised an uncaught error."""
    context = await chromium.new_context(viewport={"width": 1100, "height": 700})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    await context.close()
    assert not errors, f"the page raised: {errors}"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A Spark session in the test process, for tests of the engine's Spark calls on their own
    (Sparkwire's own settings; started only if such a test runs)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from compute.spark.session import build_session

    session = build_session("local[2]")
    yield session
    session.stop()


# -- test tiers --------------------------------------------------------------------------------------
# `pytest -m unit`: no server, no Spark, seconds. `pytest -m server`: the rest (a real server process,
# a redis-server, a Spark session or cluster, Chromium). A module or test that sets either marker
# itself keeps it; every other test is sorted here.

SERVER_FIXTURES = frozenset({"server", "spark", "chromium"})
# Names that, used by a test, a fixture or a helper they call, start a process that serves or Spark:
# this file's start_server, a Spark session, any Popen (tests/infra.py's redis-server and Spark
# cluster, uvicorn in a subprocess), and `python -m app.cli`.
_STARTERS = frozenset({"start_server", "build_session", "Popen", "app.cli"})


def _names(code: CodeType) -> set[str]:
    """The global and attribute names and the string constants of code and its nested functions."""
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        for const in c.co_consts:
            if isinstance(const, CodeType):
                stack.append(const)
            elif isinstance(const, str) and const in _STARTERS:
                names.add(const)
    return names


def _starts_a_server(func: Any, seen: set[CodeType]) -> bool:
    """Whether func, or a function of its module's globals that it calls (transitively), starts one."""
    func = inspect.unwrap(func)
    code = getattr(func, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    names = _names(code)
    if names & _STARTERS:
        return True
    scope = getattr(func, "__globals__", {})
    return any(inspect.isfunction(scope.get(name)) and _starts_a_server(scope[name], seen) for name in names)


def _needs_a_server(item: pytest.Function) -> bool:
    if SERVER_FIXTURES.intersection(item.fixturenames):
        return True
    seen: set[CodeType] = set()
    if _starts_a_server(item.function, seen):
        return True
    definitions = item._fixtureinfo.name2fixturedefs
    return any(
        _starts_a_server(fixturedef.func, seen)
        for name in item.fixturenames
        for fixturedef in definitions.get(name, ())
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function) or any(item.iter_markers("unit")):
            continue
        if not any(item.iter_markers("server")):
            item.add_marker(pytest.mark.server if _needs_a_server(item) else pytest.mark.unit)
