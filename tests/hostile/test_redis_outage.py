"""A Redis outage under the tiers (item 8 of the attacks in docs/reliability-and-security.md;
deploy/docker-compose.yml's shape): Redis carries results, heartbeats and catalogs, not the points
(Kafka does), so writes through an edge go on being acknowledged while it is away (kill -9);
subscribers are told `JobInvalidState` and stay connected, and once Redis is back each gets a
FullResult holding every point acknowledged meanwhile, and brand-new subscriptions work at the first
try although the edge's pooled Redis connections died with it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.hostile import unique_rid, write_body
from tests.infra import start_redis
from tests.kafka_broker import KafkaBroker
from tests.server.test_two_tier import Tier, running_tier, values_of
from tests.wire import NANOS, Client, channel_variable, new_id, series_node, subscription, write_points

pytestmark = [pytest.mark.server, pytest.mark.timeout(600)]
OUTAGE_S = 8.0


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory, kafka_log: KafkaBroker) -> Iterator[Tier]:
    with running_tier(tmp_path_factory.mktemp("hostile-redis"), kafka_log, ["edge"]) as tier:
        yield tier


async def test_writes_are_acknowledged_through_a_redis_outage_and_shown_after_it(tier: Tier) -> None:
    edge = tier.edges[0]
    rid = unique_rid("redis-outage-kafka")
    await write_points(edge.base_url, rid, "temp", [(time.time_ns() - NANOS, 1.0)])
    client = await Client.connect(edge.ws_url)
    sub_id = new_id()
    await client.subscribe({sub_id: subscription(series_node(), {"x": channel_variable(rid, "temp")}, 3600)})
    first = await client.update(sub_id, timeout=120)
    assert first["type"] == "full" and values_of(first) == [1.0], first
    # several computations asked for at once: the edge's Redis pool holds several connections,
    # which the kill leaves dead in it
    others = await asyncio.gather(*(_subscribed(edge.ws_url, rid, 3000 + 10 * i) for i in range(4)))
    port = int(tier.redis.url.rsplit(":", 1)[1].split("/")[0])
    acknowledged = [1.0]
    try:
        tier.redis.daemon.process.kill()  # kill -9: no goodbye to any client
        tier.redis.daemon.process.wait(10)
        error = await client.update(sub_id, timeout=30)
        assert error["type"] == "error", error
        assert error["error"]["serializableError"]["name"] == "PersistentCompute:JobInvalidState", error
        async with httpx.AsyncClient(base_url=edge.base_url, timeout=30) as http:
            for value in (2.0, 3.0, 4.0):
                response = await http.post(
                    "/storage/writer/v1", json=write_body(rid, [(time.time_ns(), value)], "temp")
                )
                assert response.status_code == 200, response.text  # Kafka has it: nothing to refuse
                acknowledged.append(value)
        time.sleep(OUTAGE_S - 3)
        tier.redis = start_redis(tier.workdir / "redis", port=port, persistent=True)
        deadline = time.monotonic() + 120
        while True:  # JobInvalidState until the tiers see each other again, then a FullResult
            update = await client.update(sub_id, timeout=max(1.0, deadline - time.monotonic()))
            if update["type"] == "full":
                break
            assert update["type"] == "error", update
        assert values_of(update) == acknowledged, update
        await write_points(edge.base_url, rid, "temp", [(time.time_ns(), 5.0)])
        live = await client.update(sub_id, timeout=60)
        assert live["type"] == "append" and values_of(live) == [5.0], live
        # new computations, asked for at once (each takes a pooled connection): each works at once
        news = await asyncio.gather(*(_subscribed(edge.ws_url, rid, 1800 + 10 * i) for i in range(4)))
        for new, _ in news:
            await new.close()
    finally:
        await client.close()
        for other, _ in others:
            await other.close()
    log = edge.log_text()
    assert "Traceback" not in log, [line for line in log.splitlines() if "Traceback" in line][:5]


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
