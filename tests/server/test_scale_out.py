"""Scale out: Sparkwire on a Spark standalone cluster fed by Redis Streams passes the same
end-to-end checks as with the embedded defaults, and several servers on one Redis serve the same
data. Everything runs here on 127.0.0.1: a redis-server, a Spark master and worker, two servers."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis

from compute.storage.contract import PointLog, SeriesWrite
from compute.storage.redis.layout import RedisLayout
from compute.storage.redis.point_log import RedisLog, Retention
from compute.storage.series import SeriesKey, SeriesKind
from compute.storage.sqlite.point_log import EmbeddedLog
from compute.storage.sqlite.writer import DurableLog
from tests.conftest import ServerProcess, start_server
from tests.infra import RedisServer, SparkCluster, start_redis, start_spark_cluster
from tests.server import test_end_to_end, test_ingest
from tests.server.test_end_to_end import subscribe_one, unique_rid
from tests.wire import NANOS, Client, channel_variable, series_node, subscription, write_points

# Cluster start-up (two JVMs) plus a server on it take minutes on a busy 2-core machine.
pytestmark = pytest.mark.timeout(900)

PARTITIONS = 3
WINDOW_S = 3600.0


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.daemon.stop()


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    cluster = start_spark_cluster(tmp_path_factory.mktemp("spark-cluster"))
    yield cluster
    cluster.stop()


def redis_env(redis_server: RedisServer) -> dict[str, str]:
    return {
        "SPARKWIRE_SOURCE": "redis",
        "SPARKWIRE_REDIS_URL": redis_server.url,
        "SPARKWIRE_REDIS_PARTITIONS": str(PARTITIONS),
    }


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer, spark_cluster: SparkCluster
) -> Iterator[ServerProcess]:
    """Overrides the session's embedded server for this module: the end-to-end checks imported
    below run against Sparkwire on the cluster, reading Redis."""
    base = tmp_path_factory.mktemp("on-cluster")
    env = {**redis_env(redis_server), "SPARKWIRE_SPARK_MASTER": spark_cluster.url}
    proc = start_server(base / "data", base / "server.log", env=env, ready_timeout=600)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def second_server(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer
) -> Iterator[ServerProcess]:
    """Another server on the same Redis, with its own local Spark (the cluster's cores are taken)."""
    base = tmp_path_factory.mktemp("second")
    proc = start_server(base / "data", base / "server.log", env=redis_env(redis_server), ready_timeout=600)
    yield proc
    proc.stop()


# The same end-to-end checks as with the embedded defaults, collected again in this module so that
# they use the `server` above: every test of tests/server/test_end_to_end.py, and the ingest tests that
# go through the stream (enum strings and NaN/infinities cross the Redis encoding).
for _name, _test in vars(test_end_to_end).items():
    if _name.startswith("test_"):
        globals()[_name] = _test
test_string_channel_streams_as_an_enum_series = test_ingest.test_string_channel_streams_as_an_enum_series
test_nan_and_infinities_round_trip_as_conjure_doubles = (
    test_ingest.test_nan_and_infinities_round_trip_as_conjure_doubles
)


def test_the_stream_runs_on_the_cluster_with_code_shipped_to_executors(
    server: ServerProcess, spark_cluster: SparkCluster
) -> None:
    apps = spark_cluster.state()["activeapps"]
    assert [app["name"] for app in apps] == ["sparkwire"]
    assert apps[0]["cores"] >= 1
    origin = [line for line in server.log_text().splitlines() if "executors import compute from" in line]
    assert origin, "the server did not report where executors load its code from"
    assert "sparkwire-code.zip" in origin[0], origin[0]  # the shipped zip, not the driver's checkout


async def test_points_written_to_one_server_reach_subscribers_on_the_other(
    server: ServerProcess, second_server: ServerProcess
) -> None:
    for writer, reader in [(server, second_server), (second_server, server)]:
        rid = unique_rid("cross")
        client = await Client.connect(reader.ws_url)
        # The series does not exist yet: the reader learns it from the shared catalog.
        sub = subscription(series_node(), {"x": channel_variable(rid, "p", tags={"unit": "a"})}, WINDOW_S)
        sub_id, full = await subscribe_one(client, sub)
        assert full["full"]["result"]["numeric"]["values"] == []
        now = time.time_ns()
        await write_points(writer.base_url, rid, "p", [(now, 1.25), (now + 1, 2.5)], tags={"unit": "a"})
        update = await client.update(sub_id)
        assert update["type"] == "append"
        assert update["append"]["result"]["numeric"]["values"] == [1.25, 2.5]
        await client.close()


async def test_a_new_subscription_is_back_filled_from_points_another_server_wrote(
    server: ServerProcess, second_server: ServerProcess
) -> None:
    rid = unique_rid("history")
    now = time.time_ns()
    history = [(now - 900 * NANOS + i * 3 * NANOS + i, float(i)) for i in range(50)]
    await write_points(server.base_url, rid, "p", history[:25])
    await write_points(second_server.base_url, rid, "p", history[25:])
    for reader in (server, second_server):
        client = await Client.connect(reader.ws_url)
        _, full = await subscribe_one(
            client, subscription(series_node(), {"x": channel_variable(rid, "p")}, WINDOW_S)
        )
        numeric = full["full"]["result"]["numeric"]
        stamps = [t["seconds"] * NANOS + t["nanos"] for t in numeric["timestamps"]]
        assert list(zip(stamps, numeric["values"], strict=True)) == history
        await client.close()


def test_a_series_keeps_its_kind_across_servers(server: ServerProcess, second_server: ServerProcess) -> None:
    rid = unique_rid("kind")
    t = NANOS * 1_700_000_000
    point = {"timestamp": {"seconds": t // NANOS, "nanos": 0}}
    double = {"channel": "c", "tags": {}, "points": {"type": "double", "double": [{**point, "value": 1.0}]}}
    string = {"channel": "c", "tags": {}, "points": {"type": "string", "string": [{**point, "value": "x"}]}}
    r = httpx.post(f"{server.base_url}/storage/writer/v1", json={"dataSourceRid": rid, "batches": [double]})
    assert r.status_code == 200
    r = httpx.post(
        f"{second_server.base_url}/storage/writer/v1", json={"dataSourceRid": rid, "batches": [string]}
    )
    assert r.status_code == 400
    assert "holds double points" in r.json()["message"]


async def test_the_stream_commits_a_batch_only_after_publishing_it(
    server: ServerProcess, redis_server: RedisServer
) -> None:
    """Spark commits a micro-batch's offsets to the source when it plans the next batch, after the
    first one's `foreachBatch` has published; so once the second point's append arrives, the first
    point is committed and only the second one is pending for this server's consumer."""
    rid = unique_rid("lag")
    client = await Client.connect(server.ws_url)
    sub_id, _ = await subscribe_one(
        client, subscription(series_node(), {"x": channel_variable(rid, "p")}, WINDOW_S)
    )
    for value in (3.0, 4.0):
        await write_points(server.base_url, rid, "p", [(time.time_ns(), value)])
        assert (await client.update(sub_id))["append"]["result"]["numeric"]["values"] == [value]
    await client.close()
    consumer = (
        f"{socket.gethostname()}-{server.port}-{server.process.pid}"  # as app/runtime/open_log.py names it
    )
    log = RedisLog(redis_server.url, PARTITIONS, consumer)
    try:
        deadline = time.monotonic() + 30
        while (lag := log.pending()) != 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert lag == 1
    finally:
        log.close()


# -- the log contract, on each implementation ------------------------------------------------------
def _embedded(tmp_path: Path, _: RedisServer) -> PointLog:
    return EmbeddedLog(DurableLog(tmp_path / "log.db"), "reader")


def _redis(tmp_path: Path, redis_server: RedisServer) -> PointLog:
    return RedisLog(redis_server.url, PARTITIONS, "reader", prefix=f"contract{time.time_ns()}")


@pytest.mark.parametrize("make_log", [_embedded, _redis], ids=["embedded", "redis"])
def test_the_log_contract_read_commit_pending(
    make_log: Callable[[Path, RedisServer], PointLog], tmp_path: Path, redis_server: RedisServer
) -> None:
    log = make_log(tmp_path, redis_server)
    try:
        assert log.ready()
        assert log.partitions() and len(set(log.partitions())) == len(log.partitions())
        assert log.read(100, 0).points.num_rows == 0
        keys = [SeriesKey.of("ri.c", f"ch{i}", {}) for i in range(6)]
        for i, key in enumerate(keys):
            log.submit(
                [SeriesWrite(key, SeriesKind.NUMERIC, [NANOS * i, NANOS * i + 1], [float(i), -1.0])]
            ).result(10)
        assert sorted(info.key.channel for info in log.poll_new_series()) == [f"ch{i}" for i in range(6)]
        assert log.poll_new_series() == []
        assert log.pending() == 12

        first = log.read(1, 1000)  # a limit of one record
        assert 1 <= first.points.num_rows <= 2
        rest = log.read(1000, 1000)
        rows = first.points.to_pylist() + rest.points.to_pylist()
        assert sorted((r["ts"], r["value"]) for r in rows) == sorted(
            (NANOS * i + d, v) for i in range(6) for d, v in ((0, float(i)), (1, -1.0))
        )
        assert log.read(1000, 200).points.num_rows == 0  # waited, nothing new

        log.commit(first.offsets)
        assert 0 < log.pending() < 12
        log.commit(rest.offsets)
        assert log.pending() == 0
    finally:
        log.close()


def _stream_length(redis_server: RedisServer, prefix: str) -> int:
    return int(redis.Redis.from_url(redis_server.url).xlen(RedisLayout(prefix, 1).stream(0)))


def _append_many(log: RedisLog, count: int) -> None:
    key = SeriesKey.of("ri.retention", "p", {})
    futures = [log.submit([SeriesWrite(key, SeriesKind.NUMERIC, [i], [1.0])]) for i in range(count)]
    for f in futures:
        f.result(30)


def test_retention_by_length_keeps_about_maxlen_entries(redis_server: RedisServer) -> None:
    prefix = f"maxlen{time.time_ns()}"
    log = RedisLog(redis_server.url, 1, "w", Retention(seconds=0, max_entries=100), prefix=prefix)
    try:
        _append_many(log, 1000)
    finally:
        log.close()
    assert 100 <= _stream_length(redis_server, prefix) < 300  # `~`: whole nodes of 100 are trimmed


def test_retention_by_age_trims_entries_older_than_it(redis_server: RedisServer) -> None:
    prefix = f"minid{time.time_ns()}"
    log = RedisLog(redis_server.url, 1, "w", Retention(seconds=1.0), prefix=prefix)
    try:
        _append_many(log, 500)
        assert _stream_length(redis_server, prefix) == 500
        time.sleep(1.5)
        _append_many(log, 1)
    finally:
        log.close()
    assert _stream_length(redis_server, prefix) < 100


def test_servers_sharing_a_log_must_agree_on_its_partitions(redis_server: RedisServer) -> None:
    prefix = f"parts{time.time_ns()}"
    RedisLog(redis_server.url, 2, "a", prefix=prefix).close()
    with pytest.raises(ValueError, match="has 2 partitions; this server is configured with 3"):
        RedisLog(redis_server.url, 3, "b", prefix=prefix)
