"""The two tiers on the Kafka log (`--source kafka` with `--role compute` and `--role edge`): the test
session's broker and a throwaway redis-server, one compute process sharing its computations through
Kafka's group (compute-slots, a group of one: tests/server/test_two_tier.py runs none) and two
edges, all real processes on 127.0.0.1, on a topic of three partitions. Points go from an edge's
transactional producer to Kafka and reach the compute tier through Spark's Kafka source; results,
leases and the asset catalog go through Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import ServerProcess
from tests.infra import RedisServer, RoleStarter, start_redis
from tests.kafka_broker import KafkaBroker
from tests.server import test_nominal_datasets as ds
from tests.server.test_end_to_end import subscribe_one, unique_rid
from tests.server.test_two_tier import asset_channel_variables, values_of
from tests.wire import NANOS, Client, channel_variable, series_node, subscription, write_points

pytestmark = pytest.mark.timeout(900)

TOPIC = "tiers-points"
WINDOW_S = 3600.0


@dataclass
class KafkaTiers:
    kafka: KafkaBroker
    redis: RedisServer
    compute: ServerProcess
    edges: list[ServerProcess]


@pytest.fixture(scope="module")
def tiers(tmp_path_factory: pytest.TempPathFactory, kafka_log: KafkaBroker) -> Iterator[KafkaTiers]:
    workdir = tmp_path_factory.mktemp("tiers-on-kafka")
    kafka = kafka_log
    redis_server = start_redis(workdir / "redis")
    env = {
        "SPARKWIRE_SOURCE": "kafka",
        "SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap,
        "SPARKWIRE_KAFKA_TOPIC": TOPIC,
        "SPARKWIRE_KAFKA_PARTITIONS": "3",
        "SPARKWIRE_REDIS_URL": redis_server.url,
        "SPARKWIRE_COMPUTE_SLOTS": "4",
    }
    start = RoleStarter(workdir, env, [])
    try:
        compute = start("compute", "compute", 600)
        edges = [start("edge-a", "edge", 120), start("edge-b", "edge", 120)]
        yield KafkaTiers(kafka, redis_server, compute, edges)
    finally:
        for process in start.processes:
            process.stop()
        redis_server.daemon.stop()


async def test_points_written_through_one_edge_reach_subscribers_of_the_other(tiers: KafkaTiers) -> None:
    """History written through edge A is the FullResult on edge B (back-filled from Kafka by the
    compute tier's Spark job); a later write through B arrives on B as an append."""
    a, b = tiers.edges
    rid = unique_rid("kafka-tiers")
    now = time.time_ns()
    history = [(now - 30 * NANOS + i * NANOS, float(i)) for i in range(10)]
    await write_points(a.base_url, rid, "temp", history)
    client = await Client.connect(b.ws_url)
    try:
        sub = subscription(series_node(), {"x": channel_variable(rid, "temp")}, WINDOW_S)
        sub_id, full = await subscribe_one(client, sub)
        assert full["type"] == "full" and values_of(full) == [v for _, v in history]
        await write_points(b.base_url, rid, "temp", [(time.time_ns(), 99.0)])
        update = await client.update(sub_id, timeout=60)
        assert update["type"] == "append" and values_of(update) == [99.0]
    finally:
        await client.close()
    # each edge lists the series, written through the other after both started
    async with httpx.AsyncClient(timeout=30) as http:
        for edge in tiers.edges:
            listed = (await http.get(f"{edge.base_url}/series")).json()
            assert [s["channel"] for s in listed if s["dataSourceRid"] == rid] == ["temp"]


async def test_an_asset_made_through_an_edge_is_computed_by_the_compute_tier(tiers: KafkaTiers) -> None:
    """The asset catalog is in Redis (shared by every process of the tiers, whatever the point log):
    an asset made through edge A resolves on edge B and on the compute tier."""
    a, b = tiers.edges
    rid, t0 = ds.rid(), time.time_ns() - 60 * NANOS
    points = [(t0, 1.0), (t0 + NANOS, 2.0)]
    await write_points(a.base_url, rid, "speed", points)
    scope = {"dataScopeName": "main", "dataSourceRid": rid, "seriesTags": {}}
    asset = await ds.create(a.base_url, "assets", {"title": "car", "dataScopes": [scope]})
    assert httpx.get(f"{b.base_url}/assets/v1/assets/{asset['rid']}", timeout=10).json() == asset
    client = await Client.connect(b.ws_url)
    try:
        view = await ds.subscribe(
            client, "car", ds.numeric_node(ds.ref("s")), asset_channel_variables(asset["rid"])
        )
        assert ds.points(view) == {(): points}
    finally:
        await client.close()
