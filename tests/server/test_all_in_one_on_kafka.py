"""Two `--role all` servers on one Kafka topic, given the same Redis: each runs its own Spark and
its own copy of every computation, and they share the points (Kafka) and the asset catalog
(Redis, `Settings.shared_catalog`). An asset made through A
resolves on B; a subscription on B over it holds points written through A; an edit through A
reaches that subscription as one FullResult of the new resolution."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import ServerProcess, start_server
from tests.infra import start_redis
from tests.kafka_broker import KafkaBroker
from tests.server import test_nominal_datasets as ds
from tests.server.test_two_tier import asset_channel_variables
from tests.wire import NANOS, Client, write_points

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, kafka_log: KafkaBroker
) -> Iterator[list[ServerProcess]]:
    workdir = tmp_path_factory.mktemp("all-in-one-on-kafka")
    redis_server = start_redis(workdir / "redis")
    env = {
        "SPARKWIRE_SOURCE": "kafka",
        "SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS": kafka_log.bootstrap,
        "SPARKWIRE_KAFKA_TOPIC": f"{workdir.name}-points",
        "SPARKWIRE_REDIS_URL": redis_server.url,
    }

    def one(name: str) -> ServerProcess:
        return start_server(workdir / name, workdir / f"{name}.log", env=env, ready_timeout=600)

    started: list[ServerProcess] = []
    try:
        with ThreadPoolExecutor(2) as pool:  # the two Spark drivers start side by side
            started.extend(pool.map(one, ["a", "b"]))
        yield started
    finally:
        for process in started:
            process.stop()
        redis_server.daemon.stop()


async def test_two_servers_on_one_kafka_log_share_points_and_the_asset_catalog(
    servers: list[ServerProcess],
) -> None:
    a, b = servers
    r1, r2, t0 = ds.rid(), ds.rid(), time.time_ns() - 60 * NANOS
    first = [(t0, 1.0), (t0 + NANOS, 2.0)]
    second = [(t0 + 2 * NANOS, 50.0)]
    await write_points(a.base_url, r1, "speed", first)
    await write_points(a.base_url, r2, "speed", second)
    scope = {"dataScopeName": "main", "dataSourceRid": r1, "seriesTags": {}}
    asset = await ds.create(a.base_url, "assets", {"title": "car", "dataScopes": [scope]})
    path = f"assets/{asset['rid']}"
    assert httpx.get(f"{b.base_url}/assets/v1/{path}", timeout=10).json() == asset
    client = await Client.connect(b.ws_url)
    try:
        view = await ds.subscribe(
            client, "car", ds.numeric_node(ds.ref("s")), asset_channel_variables(asset["rid"])
        )
        assert ds.points(view) == {(): first}  # written through A, computed by B's own Spark
        await ds.put(a.base_url, path, {"dataScopes": [{**scope, "dataSourceRid": r2}]})
        assert ds.points(await ds.next_full(client, "car")) == {(): second}
    finally:
        await client.close()
