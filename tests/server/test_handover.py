"""Clients and a server that goes away. One dedicated server process ("retiring": JSON logs, pings
after 1 s of silence) stands behind a test proxy in the place of a load balancer; the shared session
server is the one that takes over. The module's tests run in order: the last ones stop it."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page

from sparkwire_client import Client, Writer, numeric_channel, series
from tests.conftest import ServerProcess, start_server
from tests.proxy import Proxy
from tests.wire import NANOS
from tests.wire import Client as WireClient

GRACE_S = 60  # long enough that the hand-over must finish well inside it


def unique_rid(name: str) -> str:
    return f"ri.test.handover.{name}.{time.time_ns()}"


@pytest.fixture(scope="module")
def retiring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("retiring")
    env = {
        "SPARKWIRE_LOG_FORMAT": "json",
        "SPARKWIRE_ACCESS_LOG": "true",  # the JSON test checks the access log's records too
        "SPARKWIRE_PING_INTERVAL": "1",
        "SPARKWIRE_PING_TIMEOUT": "2",
        "SPARKWIRE_SHUTDOWN_GRACE": str(GRACE_S),
    }
    proc = start_server(base / "data", base / "server.log", env=env)
    yield proc
    proc.stop(signal.SIGKILL)


@pytest_asyncio.fixture(loop_scope="session")
async def proxy(retiring: ServerProcess) -> AsyncIterator[Proxy]:
    proxy = Proxy(retiring.port)
    await proxy.start()
    yield proxy
    await proxy.close()


async def test_the_client_answers_server_pings_and_keeps_its_connection(retiring: ServerProcess) -> None:
    rid = unique_rid("pings")
    silent = await WireClient.connect(retiring.ws_url, auto_pong=False)  # never answers pings
    async with Client(retiring.base_url, keepalive_interval=None) as client:
        sub = await client.subscribe(series(numeric_channel(rid, "p")), window=600)
        await sub.wait_for(lambda v: v.updates >= 1, timeout=120)
        await asyncio.wait_for(silent.ws.wait_closed(), timeout=120)  # the server drops a silent peer
        assert client.pings_answered >= 1
        async with Writer(retiring.base_url, rid) as writer:
            writer.add("p", time.time_ns(), 5.0)
        await sub.wait_for(lambda v: v.values == [5.0], timeout=120)
        assert client.connections_opened == 1 and client.state == "open"
    await silent.close()


async def test_clients_hand_over_to_another_server_on_shutdown_notice(
    retiring: ServerProcess, server: ServerProcess, proxy: Proxy, chromium: Browser
) -> None:
    rid = unique_rid("switch")
    history = [(time.time_ns() - (20 - i) * NANOS, float(i)) for i in range(20)]
    for target in (retiring, server):  # both servers hold the history, as replicas would
        async with Writer(target.base_url, rid) as writer:
            for t, v in history:
                writer.add("p", t, v)

    client = Client(proxy.base_url)
    await client.connect()
    context = await chromium.new_context()
    page = await context.new_page()
    try:
        sub = await client.subscribe(series(numeric_channel(rid, "p")), window=600)
        await sub.wait_for(lambda v: len(v.values) == 20, timeout=120)
        await page.goto(f"{proxy.base_url}/?rid={rid}&channels=p&groupBy=&window=600&mode=raw")
        await _page_until(page, "(window.sparkwire.series.p || {points: []}).points.length === 20")

        proxy.target_port = server.port  # new connections now reach the other server
        retiring.process.send_signal(signal.SIGTERM)  # -> shutdownNotice, then GRACE_S of service

        async with Writer(server.base_url, rid) as writer:  # only the other server has this point
            writer.add("p", time.time_ns(), 42.0)
        view = await sub.wait_for(lambda v: v.values[-1:] == [42.0], timeout=120)
        await _page_until(page, "window.sparkwire.series.p.points.slice(-1)[0][1] === 42")

        # The hand-over finished inside the grace period: the old server saw every client leave
        # (it then stops at once) rather than closing anyone with 1012.
        deadline = time.monotonic() + 60
        while "draining: every client left" not in retiring.log_text():
            assert "grace period over" not in retiring.log_text(), "a client was left for the 1012 close"
            assert time.monotonic() < deadline, "the old server never saw its clients leave"
            await asyncio.sleep(0.2)
        assert client.connections_opened == 2 and client.state == "open"
        assert view.values == [v for _, v in history] + [42.0]
        assert await page.evaluate("window.sparkwire.state") == "open"
    finally:
        await client.close()
        await context.close()


async def test_json_logs_hold_one_object_per_line_and_spark_output_goes_to_its_file(
    retiring: ServerProcess,
) -> None:
    if retiring.process.poll() is None:
        retiring.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        while "draining" not in retiring.log_text():
            assert time.monotonic() < deadline, "the server never started draining"
            await asyncio.sleep(0.2)
    assert retiring.stop(signal.SIGTERM) == 0  # exits by itself once no client is left, or on a 2nd signal
    lines = [line for line in retiring.log_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    messages = [r["message"] for r in records]
    assert f"ready: serving on {retiring.base_url} (role all); the readiness probe answers 200" in messages
    assert any(m.startswith("draining: shutdownNotice") for m in messages)
    assert any(r["logger"] == "uvicorn.access" for r in records)
    spark_log = Path(retiring.data_dir) / "spark.log"  # the JVM's own console output, kept apart
    assert spark_log.is_file()
    server_log = retiring.log_text()
    assert not [line for line in spark_log.read_text(errors="replace").splitlines() if line in server_log]


async def _page_until(page: Page, condition: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not await page.evaluate(f"() => {{ try {{ return {condition}; }} catch {{ return false; }} }}"):
        assert time.monotonic() < deadline, f"the page never met: {condition}"
        await asyncio.sleep(0.2)
