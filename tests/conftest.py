"""One real Sparkwire server process (real Spark, real SQLite log) shared by the whole test run:
Spark takes ~10 s to start, so tests share it and isolate themselves by data source rid."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright

from bench.serverproc import ROOT, ServerProcess, free_port, launch

# What test modules import from here; the server process itself is bench/serverproc.py's.
__all__ = ["ROOT", "ServerProcess", "free_port", "start_secured_server", "start_server"]


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
    """A test's server (bench/serverproc.py starts it, as it does the benchmarks'): a drain of 2 s
    on the way out unless `env` says otherwise. `command`: what follows `sparkwire` (default
    `serve`); the port and data dir are added."""
    env = {"SPARKWIRE_SHUTDOWN_GRACE": "2", **(env or {})}
    return launch(
        data_dir,
        log_path,
        env,
        ready_timeout,
        ready_path=ready_path,
        own_process_group=own_process_group,
        command=command,
    )


def start_secured_server(base: Path, tokens: list[dict[str, object]]) -> ServerProcess:
    """A server in `base` whose tokens file holds `tokens` (auth on), used once /healthz answers:
    for tests of what needs no Spark (the polled and read endpoints read the log in the server's
    own process)."""
    tokens_file = base / "tokens.json"
    tokens_file.write_text(json.dumps({"tokens": tokens}))
    env = {"SPARKWIRE_TOKENS_FILE": str(tokens_file)}
    return start_server(base / "data", base / "server.log", env=env, ready_path="/healthz")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("sparkwire")
    # No computation outlives its last subscriber here (sparkwire_client asks for resume tokens,
    # which would keep one live for a minute): tests count live computations. tests/server/test_resume.py
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


@pytest.fixture(scope="session")
def kafka_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One throwaway Kafka broker for the modules that only use it as the point log, each on a
    topic of its own (a broker starts in ~10 s and holds ~400 MB). A module that stops its broker
    (an outage test) starts one of its own instead."""
    from tests.kafka_broker import start_kafka

    broker = start_kafka(tmp_path_factory.mktemp("kafka-log"))
    yield broker
    broker.stop()


KAFKA_LOG_SERVER_TOPIC = "kafka-log-server-points"  # its points topic (4 partitions, the default)


@pytest.fixture(scope="module")
def kafka_log_server(tmp_path_factory: pytest.TempPathFactory, kafka_log: object) -> Iterator[ServerProcess]:
    """An all-in-one server on the Kafka log (the session's broker, a topic of its own), for the
    reads that run as Spark batch jobs over a shared log: history with no index of which series
    hold points in a range. One per module: kept for the whole session, its stream (and the
    broker's answers to it) took ~20% of a core from every test after it."""
    from tests.infra import server_on_kafka_log

    base = tmp_path_factory.mktemp("kafka-log-server")
    with server_on_kafka_log(base, kafka_log, KAFKA_LOG_SERVER_TOPIC) as proc:  # type: ignore[arg-type]
        yield proc


# -- test tiers --------------------------------------------------------------------------------------
# The directory gives the marker: tests/unit/ never starts a server (`pytest -m unit`: no server, no
# Spark, seconds); tests/server/ holds the rest (a real server process, a redis-server, a Spark
# session or cluster, Chromium: `pytest -m server`). A unit test that asks for a server fixture, a
# test outside the two directories, or a marker that contradicts the directory is an error.

SERVER_FIXTURES = frozenset({"server", "spark", "chromium", "kafka_log", "kafka_log_server"})
TIERS = {"unit": pytest.mark.unit, "server": pytest.mark.server}
# tests/hostile/: the attack suite (docs/reliability-and-security.md), server tests that also carry
# the `hostile` marker, so `pytest -m hostile` replays every attack alone.
HOSTILE = "hostile"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = item.path.parent.name if item.path.parent.parent == Path(__file__).parent else None
        if tier == HOSTILE:
            item.add_marker(pytest.mark.hostile)
            tier = "server"
        if tier not in TIERS:
            raise pytest.UsageError(
                f"{item.nodeid}: a test lives in tests/unit/, tests/server/ or tests/hostile/"
            )
        other = "server" if tier == "unit" else "unit"
        if any(item.iter_markers(other)):
            raise pytest.UsageError(f"{item.nodeid}: marked {other} in tests/{tier}/")
        if tier == "unit" and isinstance(item, pytest.Function):
            used = SERVER_FIXTURES.intersection(item.fixturenames)
            if used:
                raise pytest.UsageError(
                    f"{item.nodeid}: a unit test uses {sorted(used)}; it goes in tests/server/"
                )
        item.add_marker(TIERS[tier])
