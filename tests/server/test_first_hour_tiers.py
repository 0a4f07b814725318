"""The first hour with two tiers (one `--role compute`, one `--role edge`, on the Kafka log and a
redis-server, started as tests/server/test_two_tier.py starts them): the compute server's `/`
points to the edges; a clean SIGTERM of the compute server logs no traceback; meanwhile the Python
client's loop goes on (`healthy` False) and recovers with the next FullResult, the edge logs "not
ready" then "ready" again, and the dashboard on the edge says "waiting" instead of a green
"open"."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator

import httpx
import pytest
from playwright.async_api import Page, expect

from sparkwire_client import Client, View, numeric_channel, series
from tests.kafka_broker import KafkaBroker
from tests.server.test_dashboard import open_dashboard, until
from tests.server.test_two_tier import Tier, running_tier
from tests.wire import NANOS, write_points

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory, kafka_log: KafkaBroker) -> Iterator[Tier]:
    with running_tier(tmp_path_factory.mktemp("first-hour-tiers"), kafka_log, ["edge"]) as tier:
        yield tier


def test_a_compute_server_points_to_the_edges(tier: Tier) -> None:
    answer = httpx.get(f"{tier.compute.base_url}/", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert "<code>--role compute</code>" in answer.text
    assert "sparkwire serve --role edge" in answer.text
    assert httpx.get(f"{tier.compute.base_url}/favicon.ico", timeout=10).status_code == 200


async def wait_log(text: str, read: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in read():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never logged: {text}"
        await asyncio.sleep(0.2)


async def test_a_compute_outage_keeps_the_clients_loop_and_the_stop_logs_no_traceback(
    tier: Tier, page: Page
) -> None:
    edge = tier.edges[0]
    rid = f"ri.test.first.outage.{time.time_ns()}"
    await write_points(edge.base_url, rid, "temp", [(time.time_ns() - NANOS, 1.0)])
    seen: list[tuple[bool, list[float]]] = []
    async with Client(edge.base_url) as client:
        sub = await client.subscribe(series(numeric_channel(rid, "temp")), window=3600)

        async def follow() -> None:
            view: View
            async for view in sub:
                seen.append((sub.healthy, list(view.values)))

        loop = asyncio.create_task(follow())
        try:
            await sub.wait_for(lambda v: v.values == [1.0], timeout=120)
            # points keep arriving while the compute tier stops: a micro-batch may be under way
            feeding = asyncio.create_task(feed(edge.base_url, rid))
            await asyncio.sleep(1)
            compute = tier.compute
            assert compute.stop(signal.SIGTERM) == 0
            feeding.cancel()
            log = compute.log_text()
            assert "Traceback" not in log, log[-5000:]
            assert " ERROR " not in log, log[-5000:]
            assert "SPARK_JOB_CANCELLED" not in log.replace(
                "cancelled by the query's stop (SPARK_JOB_CANCELLED), as expected", ""
            )
            assert log.count("cancelled by the query's stop (SPARK_JOB_CANCELLED)") <= 1

            # the client: one view marked unhealthy, the loop still running
            await asyncio.wait_for(sub.healthy_changed.wait(), 60)
            sub.healthy_changed.clear()
            assert not sub.healthy and sub.outage is not None
            assert sub.outage.name == "PersistentCompute:JobInvalidState"
            assert sub.error is None and not loop.done()
            await until_true(lambda: seen and seen[-1][0] is False, 10)
            await wait_log("not ready: compute tier unreachable", edge.log_text, 30)

            # the dashboard on the edge: "waiting", and why, not a green "open"
            await open_dashboard(page, edge.base_url, rid=rid, channels="temp", window="3600")
            data = await until(page, lambda d: d["state"] == "waiting", timeout=30)
            assert data["stateDetail"].startswith("(server not ready: compute tier")
            await expect(page.locator("#state")).to_have_attribute("data-state", "waiting")

            await write_points(edge.base_url, rid, "temp", [(time.time_ns(), 2.0)])
            tier.compute = await asyncio.to_thread(tier.start_compute)
            await asyncio.wait_for(sub.healthy_changed.wait(), 180)
            assert sub.healthy and sub.outage is None
            view = await sub.wait_for(lambda v: 2.0 in v.values, timeout=120)
            assert view.values[0] == 1.0 and view.values[-1] == 2.0
            await until_true(lambda: seen[-1][0] is True and 2.0 in seen[-1][1], 30)
            assert not loop.done()
            ready_lines = edge.log_text().count("INFO app.ready: ready: serving on")
            assert ready_lines == 2  # at start, and again after the outage
            data = await until(page, lambda d: d["state"] == "open", timeout=60)
        finally:
            loop.cancel()


async def feed(base_url: str, rid: str) -> None:
    value = 100.0
    while True:
        await write_points(base_url, rid, "load", [(time.time_ns(), value)])
        value += 1
        await asyncio.sleep(0.05)


async def until_true(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not in time"
        await asyncio.sleep(0.1)
