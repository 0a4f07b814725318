"""A Redis outage seen from an edge (item 8 of the attacks in docs/reliability-and-security.md):
writes meanwhile are refused 503 with Retry-After and a Conjure error, never a 500 nor a traceback;
after a kill -9 and a restart, a brand-new subscription works at the first try."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.hostile import unique_rid, write_body
from tests.infra import start_redis
from tests.server.test_two_tier import Tier, running_tier
from tests.wire import NANOS, Client, channel_variable, new_id, series_node, subscription, write_points

pytestmark = [pytest.mark.server, pytest.mark.timeout(600)]
OUTAGE_S = 8.0


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tier]:
    # the Redis Streams log (no broker): this outage takes the point log away with it
    with running_tier(tmp_path_factory.mktemp("hostile-redis"), None, ["edge"]) as tier:
        yield tier


async def test_a_redis_outage_answers_503_and_the_first_new_subscription_after_works(tier: Tier) -> None:
    edge = tier.edges[0]
    rid = unique_rid("redis-outage")
    sub = subscription(series_node(), {"x": channel_variable(rid, "temp")}, 3600)
    await write_points(edge.base_url, rid, "temp", [(time.time_ns() - NANOS, 1.0)])
    old = await Client.connect(edge.ws_url)
    old_id = new_id()
    await old.subscribe({old_id: sub})
    assert (await old.update(old_id))["type"] == "full"
    # several computations asked for at once: the edge's Redis pool holds several connections,
    # which the kill leaves dead in it
    others = await asyncio.gather(*(_subscribed(edge.ws_url, rid, 3000 + 10 * i) for i in range(4)))
    port = int(tier.redis.url.rsplit(":", 1)[1].split("/")[0])
    try:
        tier.redis.daemon.process.kill()  # kill -9: no goodbye to any client
        tier.redis.daemon.process.wait(10)
        assert (await old.update(old_id, timeout=30))["type"] == "error"  # JobInvalidState meanwhile
        for _ in range(5):
            response = httpx.post(
                f"{edge.base_url}/storage/writer/v1",
                json=write_body(rid, [(time.time_ns(), 2.0)]),
                timeout=30,
            )
            assert response.status_code == 503, response.text
            assert int(response.headers["Retry-After"]) > 0
            error = response.json()
            assert error["errorName"] == "Storage:LogUnavailable" and error["errorCode"] == "CUSTOM_SERVER"
        await asyncio.sleep(OUTAGE_S)  # the compute tier's restarts of its query fail meanwhile
        tier.redis = start_redis(tier.workdir / "redis", port=port, persistent=True)
        deadline = time.monotonic() + 120
        while (await old.update(old_id, timeout=120))["type"] != "full":  # every client re-synced
            assert time.monotonic() < deadline
        # new computations, asked for at once (each takes a pooled connection): each works at once
        news = await asyncio.gather(*(_subscribed(edge.ws_url, rid, 1800 + 10 * i) for i in range(4)))
        for client, _ in news:
            await client.close()
        await asyncio.sleep(0.5)
        write = await asyncio.to_thread(
            httpx.post, f"{edge.base_url}/storage/writer/v1", json=write_body(rid, [(time.time_ns(), 3.0)])
        )
        assert write.status_code == 200
    finally:
        await old.close()
        for client, _ in others:
            await client.close()
    log = edge.log_text()
    assert "Traceback" not in log, log[-4000:]
    assert " ERROR " not in log, [line for line in log.splitlines() if " ERROR " in line][:5]
    # The compute tier says the query stopped (one ERROR line) and each failed restart in one
    # WARNING line, no traceback (issue 44: 7 for an 8 s outage).
    assert tier.compute is not None
    log = tier.compute.log_text()
    assert "Traceback" not in log, [line for line in log.splitlines() if "Traceback" in line][:5]
    assert "restarting the streaming query failed (attempt 1)" in log, log[-4000:]


async def _subscribed(url: str, rid: str, window_s: int) -> tuple[Client, dict]:
    """A new client subscribed to a computation of its own, and its first update (a FullResult)."""
    client = await Client.connect(url)
    sub_id = new_id()
    await client.subscribe(
        {sub_id: subscription(series_node(), {"x": channel_variable(rid, "temp")}, window_s)}
    )
    first = await client.update(sub_id, timeout=120)
    assert first["type"] == "full", first
    return client, first
