"""The two tiers on the Kafka log (`--source kafka` with `--role compute` and `--role edge`): the test
session's broker and a throwaway redis-server, one compute process sharing its computations through
Kafka's group (compute-slots, a group of one: tests/server/test_two_tier.py runs none) and two
edges, all real processes on 127.0.0.1, on a topic of three partitions. Points go from an edge's
transactional producer to Kafka and reach the compute tier through Spark's Kafka source; results,
leases and the asset catalog go through Redis."""

from __future__ import annotations

import csv
import gzip
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests import node_json as n
from tests.conftest import ServerProcess, start_server
from tests.infra import RedisServer, RoleStarter, start_redis
from tests.kafka_broker import KafkaBroker
from tests.server import test_compute_service as cs
from tests.server import test_nominal_datasets as ds
from tests.server import test_sdk_reads as sdk
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
    env: dict[str, str]  # the environment every process of the tiers was started with


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
        yield KafkaTiers(kafka, redis_server, compute, edges, env)
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


# -- an edge's reads of the log's points, answered by the compute tier (app/api/forwarded_reads.py) ----
async def test_an_edge_has_the_compute_tier_answer_compute_export_and_ranged_counts(
    tiers: KafkaTiers,
) -> None:
    """An edge runs no Spark to read the Kafka log: its ComputeService, export and time-ranged series
    counts are answered by the compute process, exactly as that process answers them itself."""
    a, b = tiers.edges
    rid = sdk.five_part_rid()
    t0 = (time.time_ns() // NANOS - 120) * NANOS
    wave = [(t0 + i * 5 * cs.MS, 10.0 * math.sin(2 * math.pi * i / 400)) for i in range(4000)]
    await write_points(a.base_url, rid, "wave", wave)
    start, end = t0 + NANOS, t0 + 19 * NANOS
    node = n.series(n.numeric_series(n.channel(rid, "wave")), buckets=90)
    body = cs.request_body(node, start, end)
    via_edge, via_compute = (
        httpx.post(f"{p.base_url}/compute/v2/compute", json=body, timeout=120) for p in (b, tiers.compute)
    )
    assert (via_edge.status_code, via_compute.status_code) == (200, 200), via_edge.text
    assert via_edge.json() == via_compute.json()
    got = cs.service(b.base_url).compute("", cs.request(node, start, end)).bucketed_numeric
    assert got is not None
    cs.assert_buckets(cs.buckets_of(got), cs.reference_buckets(wave, start, end, 90))

    export = sdk.export_request(rid, {"w": ("numeric", "wave", {})}, wave[10][0], wave[30][0])
    r = httpx.post(f"{b.base_url}/export/v1/export", json=export, timeout=120)
    assert r.status_code == 200, r.text
    rows = list(csv.reader(gzip.decompress(r.content).decode().splitlines()))
    assert rows[0] == ["timestamp", "w"] and [float(v) for _, v in rows[1:]] == [v for _, v in wave[10:30]]

    ranges = ((start, end), (t0 - 100 * NANOS, t0 - 50 * NANOS))  # the second holds no point
    counts = {
        "requests": [
            {
                "dataSourceRid": rid,
                "channel": "wave",
                "range": {"start": sdk.enc(sdk.ts(lo)), "end": sdk.enc(sdk.ts(hi))},
            }
            for lo, hi in ranges
        ]
    }
    r = httpx.post(
        f"{b.base_url}/data-source/v1/data-sources/batch-get-series-count", json=counts, timeout=120
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"responses": [{"seriesCount": 1}, {"seriesCount": 0}]}


def test_an_edge_that_hears_no_compute_process_says_so_by_name(tiers: KafkaTiers, tmp_path: Path) -> None:
    """An edge whose Redis prefix no compute process shares hears none: a read it would forward is
    a 503 naming the compute tier, at once."""
    env = {**tiers.env, "SPARKWIRE_REDIS_PREFIX": f"alone-{time.time_ns()}"}
    edge = start_server(
        tmp_path / "data",
        tmp_path / "edge.log",
        env,
        120,
        ready_path="/healthz",
        command=["serve", "--role", "edge"],
    )
    try:
        body = cs.request_body(n.series(n.numeric_series(n.channel(sdk.five_part_rid(), "w"))), 0, NANOS)
        r = httpx.post(f"{edge.base_url}/compute/v2/compute", json=body, timeout=60)
        assert r.status_code == 503, r.text
        assert r.json()["errorName"] == "Sparkwire:ComputeTierUnreachable"
        assert "no compute process is heard from" in r.json()["message"]
    finally:
        edge.stop()
