"""Compute once, serve from many: one `--role compute` process (Spark) and two `--role edge`
processes (no JVM) on the Kafka log (the test session's broker) and one redis-server between them,
all real processes on 127.0.0.1, with real WebSocket clients. The end-to-end checks of
tests/server/test_end_to_end.py run again here through an edge."""

from __future__ import annotations

import asyncio
import re
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml
from nominal_api import module as nm
from nominal_api import scout_compute_api as sc

from tests.client_view import ResultView
from tests.conftest import ROOT, ServerProcess, start_server
from tests.infra import RedisServer, start_redis
from tests.kafka_broker import KafkaBroker
from tests.server import test_end_to_end
from tests.server import test_modules as modules
from tests.server import test_nominal_datasets as ds
from tests.server.test_directory import directory_until
from tests.server.test_end_to_end import unique_rid
from tests.server.test_late_reports import ReportClient, late_counter, late_subscription, until_holds
from tests.wire import NANOS, Client, channel_variable, new_id, series_node, subscription, write_points

pytestmark = pytest.mark.timeout(600)

WINDOW_S = 3600.0


COMPOSE = ROOT / "deploy" / "docker-compose.yml"
# What every process of the compose file sets: the point log and Redis between the tiers.
SHARED_LOG_SETTINGS = (
    "SPARKWIRE_SOURCE",
    "SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS",
    "SPARKWIRE_KAFKA_TOPIC",
    "SPARKWIRE_REDIS_URL",
)
# What the compose file's compute services set besides, to share the computations.
SHARDING_SETTINGS = ("SPARKWIRE_COMPUTE_SLOTS",)


def compose_service(name: str) -> dict[str, Any]:
    """A service of the docker-compose file README.md's "Running at scale" gives."""
    return dict(yaml.safe_load(COMPOSE.read_text())["services"][name])


@dataclass
class Tier:
    """The processes of this module; the tests that restart one replace it here. Each starts with
    the command and shared-log settings of its service in deploy/docker-compose.yml, with this
    module's redis-server, port and data directory, and the broker given on a topic of this
    module's own."""

    workdir: Path
    redis: RedisServer
    kafka: KafkaBroker
    compute: ServerProcess
    edges: list[ServerProcess]

    def start(self, service: str, name: str, ready_timeout: float) -> ServerProcess:
        spec = compose_service(service)
        command, env = list(spec["command"]), {k: str(v) for k, v in spec["environment"].items()}
        assert command[0] == "sparkwire"
        env = {k: v for k, v in env.items() if k.startswith("SPARKWIRE_")}  # not the Spark cluster's
        env.update(SPARKWIRE_REDIS_URL=self.redis.url)
        assert env["SPARKWIRE_SOURCE"] == "kafka", env
        env.update(
            SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS=self.kafka.bootstrap,
            SPARKWIRE_KAFKA_TOPIC=f"{self.workdir.name}-points",
        )
        env.pop("SPARKWIRE_SPARK_MASTER", None)  # local Spark here: this machine has no room for a cluster
        for key in SHARDING_SETTINGS:  # one compute process here (test_sharded_compute runs several)
            env.pop(key, None)
        env.update(SPARKWIRE_METRICS_TENANT_LABELS="true")  # the late counter per data source is asserted
        base = self.workdir / f"{name}-{time.monotonic_ns()}"
        return start_server(
            base / "data", base.with_suffix(".log"), env=env, ready_timeout=ready_timeout, command=command[1:]
        )

    def start_compute(self) -> ServerProcess:
        return self.start("compute-a", "compute", ready_timeout=300)

    def start_edge(self, name: str) -> ServerProcess:
        return self.start("edge-a", name, ready_timeout=120)


@contextmanager
def running_tier(workdir: Path, kafka: KafkaBroker, edges: list[str]) -> Iterator[Tier]:
    """A redis-server (append-only), one compute process and the named edges, stopped on the way
    out (those a test restarted included: it replaces them in the Tier)."""
    tier = Tier(workdir, start_redis(workdir / "redis", persistent=True), kafka, None, [])  # type: ignore[arg-type]
    try:
        tier.compute = tier.start_compute()
        tier.edges = [tier.start_edge(name) for name in edges]
        yield tier
    finally:
        for process in [*tier.edges, tier.compute]:
            if process is not None:
                process.stop()
        tier.redis.daemon.stop()


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory, kafka_log: KafkaBroker) -> Iterator[Tier]:
    with running_tier(tmp_path_factory.mktemp("two-tier"), kafka_log, ["edge-a", "edge-b"]) as tier:
        yield tier


@pytest.fixture(scope="module")
def server(tier: Tier) -> ServerProcess:
    """For the end-to-end checks collected below: they talk to an edge."""
    return tier.edges[0]


# The end-to-end checks of the all-in-one server, through an edge: writes, FullResults, appends,
# late points, unsubscribing, all with the computations on the compute tier.
for _name, _test in vars(test_end_to_end).items():
    if _name.startswith("test_"):
        globals()[_name] = _test


def gauge(process: ServerProcess, name: str) -> float:
    text = httpx.get(f"{process.base_url}/metrics", timeout=10).text
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match is not None, f"{name} not in /metrics"
    return float(match.group(1))


async def wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"not within {timeout}s: {what}")


def values_of(update: dict) -> list[float]:
    kind = update["type"]
    result = update[kind]["result"]
    return list(result["numeric"]["values"])


async def next_full(client: Client, sub_id: str, timeout: float = 120) -> dict:
    """The fresh FullResult after an outage; until then only `JobInvalidState` errors may come (one
    per outage the edge noticed: the link to Redis, the compute tier's query restarting)."""
    deadline = time.monotonic() + timeout
    while True:
        update = await client.update(sub_id, timeout=max(0.1, deadline - time.monotonic()))
        if update["type"] != "error":
            assert update["type"] == "full", update
            return update
        assert _error_name(update) == "PersistentCompute:JobInvalidState", update


async def test_subscribers_on_two_edges_share_one_computation_on_the_compute_tier(tier: Tier) -> None:
    rid = unique_rid("shared")
    now = time.time_ns()
    history = [(now - 30 * NANOS + i * NANOS, float(i)) for i in range(20)]
    await write_points(tier.edges[0].base_url, rid, "temp", history)
    sub = subscription(series_node(), {"x": channel_variable(rid, "temp")}, WINDOW_S)
    before = gauge(tier.compute, "sparkwire_computations")
    clients = [await Client.connect(edge.ws_url) for edge in [*tier.edges, tier.edges[0]]]
    try:
        ids = [new_id() for _ in clients]
        fulls, started, snapshots = [], [], []
        for client, sub_id in zip(clients, ids, strict=True):
            await client.subscribe({sub_id: sub})
            assert (await client.creation(sub_id))["type"] == "success"
            fulls.append(await client.update(sub_id))
            started.append(gauge(tier.compute, "sparkwire_tier_computations_started_total"))
            snapshots.append(gauge(tier.compute, "sparkwire_tier_snapshots_total"))
        assert fulls[0]["type"] == "full" and fulls[0] == fulls[1] == fulls[2]
        assert values_of(fulls[0]) == [v for _, v in history]
        # Started (back-filled) once; the second edge got a snapshot of the live computation, and
        # the third subscriber, on the first edge again, its FullResult from that edge's mirror.
        assert started[1] == started[2] == started[0]
        assert snapshots[1] == snapshots[0] + 1 and snapshots[2] == snapshots[1]
        # one computation on the compute tier for both edges, one mirror on each edge
        assert gauge(tier.compute, "sparkwire_computations") == before + 1
        assert all(gauge(edge, "sparkwire_computations") >= 1 for edge in tier.edges)
        # a write to the other edge reaches both subscribers as the same append
        await write_points(tier.edges[1].base_url, rid, "temp", [(time.time_ns(), 99.0)])
        appends = [await client.update(sub_id) for client, sub_id in zip(clients, ids, strict=True)]
        assert appends[0]["type"] == "append" and appends[0] == appends[1] == appends[2]
        assert values_of(appends[0]) == [99.0]
    finally:
        for client in clients:
            await client.close()
    # nobody wants it any more: the edges let go and the compute tier removes it
    await wait_for(lambda: gauge(tier.compute, "sparkwire_computations") == before, 30, "released")


async def test_late_reports_and_the_directory_through_an_edge(tier: Tier) -> None:
    """Late drops cross from the compute tier to the edge's mirror even when nothing else changed
    (a write of late points only): the edge's subscriber is told, and both directories show them."""
    rid = unique_rid("late-edge")
    edge = tier.edges[0]
    client = await ReportClient.connect(edge)
    try:
        sub_id, _ = await client.subscribe(late_subscription(rid, asks=True))
        on_time = time.time_ns()
        await write_points(edge.base_url, rid, "p", [(on_time, 1.0)])
        await until_holds(client, sub_id, {on_time})
        late = [(time.time_ns() - 120 * NANOS + i, 2.0) for i in range(3)]
        await write_points(tier.edges[1].base_url, rid, "p", late)  # through the other edge
        _, report = await client.report(sub_id)
        newest = {"seconds": late[-1][0] // NANOS, "nanos": late[-1][0] % NANOS}
        assert report == {"subscriptionId": sub_id, "droppedPoints": 3, "newestDroppedTimestamp": newest}

        (mirrored,) = await directory_until(edge.base_url, rid, lambda es: len(es) == 1)
        assert mirrored["state"] == "live" and (mirrored["subscribers"], mirrored["connections"]) == (1, 1)
        assert mirrored["pointsHeld"] == {"window": None, "output": 1}  # an edge holds outputs only
        late_told = {"droppedPoints": 3, "newestDroppedTimestamp": newest, "byDataSource": None}
        assert mirrored["late"] == late_told
        assert mirrored["lag"] == {"points": None, "appliedSeq": None}
        (running,) = await directory_until(tier.compute.base_url, rid, lambda es: len(es) == 1)
        assert running["id"] == mirrored["id"] and running["subscribers"] == 0  # they are the edges'
        assert running["late"]["byDataSource"] == {rid: 3} and running["pointsHeld"]["window"] == 1
        assert late_counter(tier.compute.base_url, rid) == 3.0
    finally:
        await client.close()


async def test_series_written_after_the_edges_started_are_listed_on_every_edge(tier: Tier) -> None:
    """An edge's catalog follows the shared log: a series written through one edge, after both
    started, is listed by each (GET /series, and the SDK's search-channels). Each kept the catalog
    it read at its start, and listed neither its own new series nor the other edge's."""
    rid = unique_rid("listed")
    await write_points(tier.edges[0].base_url, rid, "fresh", [(time.time_ns(), 1.0)])
    await write_points(tier.edges[1].base_url, rid, "fresher", [(time.time_ns(), 2.0)], tags={"unit": "b"})
    listed = [
        {"dataSourceRid": rid, "channel": "fresh", "tags": {}, "type": "double"},
        {"dataSourceRid": rid, "channel": "fresher", "tags": {"unit": "b"}, "type": "double"},
    ]
    async with httpx.AsyncClient(timeout=30) as http:
        for edge in tier.edges:
            r = await http.get(f"{edge.base_url}/series")
            assert r.status_code == 200, r.text
            assert [s for s in r.json() if s["dataSourceRid"] == rid] == listed, edge.base_url
            r = await http.post(
                f"{edge.base_url}/data-source/v1/data-sources/search-channels", json={"dataSources": [rid]}
            )
            assert r.status_code == 200, r.text
            assert [c["name"] for c in r.json()["results"]] == ["fresh", "fresher"], edge.base_url


def test_an_edge_runs_no_jvm(tier: Tier) -> None:
    for edge in tier.edges:
        pid = edge.process.pid
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert "libjvm" not in maps, "an edge loaded a JVM"
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        commands = [Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")[0] for c in children]
        assert not any(c.endswith(b"java") for c in commands), commands
    compute_children = Path(f"/proc/{tier.compute.process.pid}/task/{tier.compute.process.pid}/children")
    assert compute_children.read_text().split(), "the compute tier runs Spark's JVM as a child"


async def test_an_edge_that_dies_releases_its_computations(tier: Tier) -> None:
    doomed = tier.start_edge("edge-doomed")
    rid = unique_rid("doomed")
    await write_points(doomed.base_url, rid, "temp", [(time.time_ns(), 1.0)])
    before = gauge(tier.compute, "sparkwire_computations")
    client = await Client.connect(doomed.ws_url)
    sub_id = new_id()
    await client.subscribe(
        {sub_id: subscription(series_node(), {"x": channel_variable(rid, "temp")}, WINDOW_S)}
    )
    assert (await client.update(sub_id))["type"] == "full"
    assert gauge(tier.compute, "sparkwire_computations") == before + 1
    doomed.stop(signal.SIGKILL)  # no goodbye: only its lease expiring tells the compute tier
    await wait_for(
        lambda: gauge(tier.compute, "sparkwire_computations") == before, 30, "released after the lease"
    )
    with pytest.raises(Exception):  # noqa: B017 - the socket is gone, however the client words it
        await client.update(sub_id, timeout=5)


async def test_an_edge_let_go_while_alive_registers_again(tier: Tier) -> None:
    """The compute tier drops an edge whose lease lapsed (a loop busy for seconds once made it): the
    edge, still alive, sees it is no longer among the edges and writes its wants again, and its
    subscriber goes on receiving what is written, on the same connection. (Before, such an edge
    stayed dropped: it served nothing more while answering ready.)"""
    import redis

    from app.tiers.wire import Names

    names = Names(compose_service("edge-a")["environment"].get("SPARKWIRE_REDIS_PREFIX", "sparkwire"))
    link = redis.Redis.from_url(tier.redis.url)
    known = set(link.smembers(names.edges))
    edge = tier.start_edge("edge-let-go")
    client = None
    try:
        (edge_id,) = [m.decode() for m in set(link.smembers(names.edges)) - known]
        rid = unique_rid("let-go")
        await write_points(edge.base_url, rid, "temp", [(time.time_ns() - NANOS, 1.0)])
        client = await Client.connect(edge.ws_url)
        sub_id = new_id()
        await client.subscribe(
            {sub_id: subscription(series_node(), {"x": channel_variable(rid, "temp")}, WINDOW_S)}
        )
        assert values_of(await client.update(sub_id)) == [1.0]
        # what the compute tier's reconciler does with an edge whose lease it found expired
        link.srem(names.edges, edge_id)
        link.delete(names.wants(edge_id))
        await wait_for(
            lambda: link.sismember(names.edges, edge_id) and link.hlen(names.wants(edge_id)) == 1,
            30,
            "the edge registered again with its want",
        )
        assert resyncs(edge.base_url, "edge_dropped") == 1
        await write_points(edge.base_url, rid, "temp", [(time.time_ns(), 2.0)])
        held = [1.0]
        while held != [1.0, 2.0]:  # an append, or a FullResult if the computation was started again
            update = await client.update(sub_id, timeout=60)
            assert update["type"] in ("full", "append"), update
            held = values_of(update) if update["type"] == "full" else held + values_of(update)
            assert held in ([1.0], [1.0, 2.0]), held
    finally:
        if client is not None:
            await client.close()
        edge.stop()
        link.close()


async def _two_subscribers(tier: Tier, rid: str) -> tuple[list[Client], list[str]]:
    sub = subscription(series_node(), {"x": channel_variable(rid, "temp")}, WINDOW_S)
    clients = [await Client.connect(edge.ws_url) for edge in tier.edges]
    ids = [new_id() for _ in clients]
    for client, sub_id in zip(clients, ids, strict=True):
        await client.subscribe({sub_id: sub})
        assert (await client.update(sub_id))["type"] == "full"
    return clients, ids


def _error_name(update: dict) -> str:
    assert update["type"] == "error", update
    return str(update["error"]["serializableError"]["name"])


async def test_a_compute_restart_keeps_every_client_connected(tier: Tier) -> None:
    rid = unique_rid("restart")
    start = time.time_ns()
    await write_points(tier.edges[0].base_url, rid, "temp", [(start - NANOS, 1.0)])
    clients, ids = await _two_subscribers(tier, rid)
    before = {cause: edge_resyncs(tier, cause) for cause in ("compute_lost", "compute_restarted")}
    try:
        assert tier.compute.stop() == 0
        for client, sub_id in zip(clients, ids, strict=True):
            assert _error_name(await client.update(sub_id, timeout=30)) == "PersistentCompute:JobInvalidState"
        # ingest goes on at the edges while the compute tier is away
        await write_points(tier.edges[1].base_url, rid, "temp", [(time.time_ns(), 2.0)])
        tier.compute = await asyncio.to_thread(tier.start_compute)
        fulls = [
            await client.update(sub_id, timeout=120) for client, sub_id in zip(clients, ids, strict=True)
        ]
        assert fulls[0]["type"] == "full" and fulls[0] == fulls[1]
        assert values_of(fulls[0]) == [1.0, 2.0]  # the point written while it was down is there
        for cause, counts in before.items():  # each edge lost it, then saw a new one
            assert [a - b for a, b in zip(edge_resyncs(tier, cause), counts, strict=True)] == [1, 1], cause
        await write_points(tier.edges[0].base_url, rid, "temp", [(time.time_ns(), 3.0)])
        for client, sub_id in zip(clients, ids, strict=True):
            assert values_of(await client.update(sub_id)) == [3.0]
    finally:
        for client in clients:
            await client.close()


async def test_redis_unreachable_then_back_keeps_every_client_connected(tier: Tier) -> None:
    rid = unique_rid("redis-gone")
    await write_points(tier.edges[0].base_url, rid, "temp", [(time.time_ns() - NANOS, 1.0)])
    clients, ids = await _two_subscribers(tier, rid)
    port = int(tier.redis.url.rsplit(":", 1)[1].split("/")[0])
    lost_before = edge_resyncs(tier, "compute_lost")
    catalogs = {edge.port: httpx.get(f"{edge.base_url}/series", timeout=30).json() for edge in tier.edges}
    assert all(
        {"dataSourceRid": rid, "channel": "temp", "tags": {}, "type": "double"} in c
        for c in catalogs.values()
    )
    try:
        tier.redis.daemon.stop()  # SIGTERM: it writes its append-only file and exits
        for client, sub_id in zip(clients, ids, strict=True):
            assert _error_name(await client.update(sub_id, timeout=30)) == "PersistentCompute:JobInvalidState"
        for edge in tier.edges:
            assert httpx.get(f"{edge.base_url}/readyz", timeout=10).status_code == 503
            # the catalog as the edge last read it (below, before the outage)
            assert httpx.get(f"{edge.base_url}/series", timeout=30).json() == catalogs[edge.port]
        await asyncio.sleep(3)  # a few retries with backoff against nothing
        tier.redis = start_redis(tier.workdir / "redis", port=port, persistent=True)
        fulls = [
            await client.update(sub_id, timeout=120) for client, sub_id in zip(clients, ids, strict=True)
        ]
        assert [f["type"] for f in fulls] == ["full", "full"] and fulls[0] == fulls[1]
        assert values_of(fulls[0]) == [1.0]
        lost = [a - b for a, b in zip(edge_resyncs(tier, "compute_lost"), lost_before, strict=True)]
        assert min(lost) >= 1, lost  # (1 or 2: the heartbeats' silence and the lost link may each count it)
        await write_points(tier.edges[1].base_url, rid, "temp", [(time.time_ns(), 5.0)])
        for client, sub_id in zip(clients, ids, strict=True):
            assert values_of(await client.update(sub_id)) == [5.0]
    finally:
        for client in clients:
            await client.close()


def points_shown(view: ResultView) -> int:
    """The points a view shows: each raw point, or each bucket's count."""
    return sum(int(v["count"]) if isinstance(v, dict) else 1 for _, v in ds.points(view)[()])


async def test_a_subscription_redis_closes_loses_no_frame(tier: Tier) -> None:
    """Redis closes a subscriber whose unread output passes its pub/sub limit, dropping what it held,
    and redis-py subscribes again unseen (docs/decisions/0092: 7 times in 16 min of the sharded
    bench). Here a limit below one frame makes Redis close both edges' subscriptions on exactly the
    frame of a write spread over the window, which is lost with them: each edge must re-sync its
    mirror (a snapshot), so that each subscriber's merged frames equal a fresh subscription's, with no
    error and no outage announced on the way."""
    rid = unique_rid("pubsub-closed")
    t0 = time.time_ns() - 3000 * NANOS
    await write_points(tier.edges[0].base_url, rid, "temp", [(t0, 1.0)])
    sub = subscription(series_node(), {"x": channel_variable(rid, "temp")}, WINDOW_S)
    clients = [await Client.connect(edge.ws_url) for edge in tier.edges]
    ids, views = [new_id() for _ in clients], [ResultView(int(WINDOW_S * NANOS)) for _ in clients]
    for client, sub_id, view in zip(clients, ids, views, strict=True):
        await client.subscribe({sub_id: sub})
        view.apply(await client.update(sub_id))
    admin = redis.Redis.from_url(tier.redis.url)
    limit = admin.config_get("client-output-buffer-limit")["client-output-buffer-limit"]

    def subscribers() -> set[int]:
        return {int(c["id"]) for c in admin.client_list(_type="pubsub")}

    before = subscribers()  # the edges' subscriptions (and the compute tier's)
    closed_before = edge_resyncs(tier, "subscription_closed")
    lost_before = edge_resyncs(tier, "compute_lost")
    # 2,000 points 1.4 s apart over the hour's window: a change to most of its buckets, one frame of
    # tens of KB (a write within a few seconds changes one bucket: a frame of 0.5 KB)
    many = [(t0 + (i + 1) * 1_400_000_000, float(i % 97)) for i in range(2000)]
    fresh_client = await Client.connect(tier.edges[0].ws_url)
    try:
        # A reply past 16 KB goes to the client's reply list, which the limit counts; a smaller one
        # does not, so the heartbeats pass and the write's frame does not.
        admin.config_set("client-output-buffer-limit", "pubsub 1kb 1kb 0")
        await write_points(tier.edges[1].base_url, rid, "temp", many)
        await wait_for(
            lambda: len(before - subscribers()) >= 2,
            60,
            "Redis closing both edges' subscriptions on the write's frame",
        )
        admin.config_set("client-output-buffer-limit", limit)  # the re-sync's snapshots pass again
        for client, sub_id, view in zip(clients, ids, views, strict=True):
            deadline = time.monotonic() + 60
            while points_shown(view) < 1 + len(many):
                update = await client.update(sub_id, timeout=max(0.1, deadline - time.monotonic()))
                assert update["type"] != "error", update  # a closed subscription is no outage
                view.apply(update)
        # each edge says why it re-synced, for an operator's dashboard
        closed_after = edge_resyncs(tier, "subscription_closed")
        assert [a - b for a, b in zip(closed_after, closed_before, strict=True)] >= [1, 1], (
            closed_before,
            closed_after,
        )
        assert edge_resyncs(tier, "compute_lost") == lost_before  # no outage
        fresh_id, fresh = new_id(), ResultView(int(WINDOW_S * NANOS))
        await fresh_client.subscribe({fresh_id: sub})
        fresh.apply(await fresh_client.update(fresh_id))
        assert points_shown(fresh) == 1 + len(many)
        assert ds.points(views[0]) == ds.points(views[1]) == ds.points(fresh)
        await write_points(tier.edges[0].base_url, rid, "temp", [(time.time_ns(), 3.0)])
        fresh.apply(await fresh_client.update(fresh_id))
        for client, sub_id, view in zip(clients, ids, views, strict=True):
            view.apply(await client.update(sub_id))
            assert ds.points(view) == ds.points(fresh) and points_shown(view) == 2 + len(many)
    finally:
        admin.config_set("client-output-buffer-limit", limit)
        admin.close()
        for client in [*clients, fresh_client]:
            await client.close()


def edge_resyncs(tier: Tier, cause: str) -> list[float]:
    return [resyncs(edge.base_url, cause) for edge in tier.edges]


def resyncs(base_url: str, cause: str) -> float:
    """An edge's `sparkwire_edge_resyncs_total` for this cause (every cause is shown from the start)."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    match = re.search(rf'^sparkwire_edge_resyncs_total\{{cause="{cause}"\}} (\S+)$', text, re.MULTILINE)
    assert match is not None, text[-2000:]
    return float(match.group(1))


# -- catalog edits across edges (docs/decisions/0066-catalog-edits-across-processes.md) ------------


def asset_channel_variables(asset_rid: str) -> dict[str, Any]:
    channel = sc.ChannelSeries(
        asset=sc.AssetChannel(
            asset_rid=ds.lit(asset_rid),
            data_scope_name=ds.lit("main"),
            channel=ds.lit("speed"),
            additional_tags={},
            tags_to_group_by=[],
            group_by_tags=[],
        )
    )
    return {"s": dict(ds.enc(sc.VariableValue(channel=channel)))}


async def converged_full(client: Client, sub_id: str, want: dict[Any, Any]) -> None:
    """FullResults until one holds `want`: an outage's `JobInvalidState` and its re-sync's FullResult
    of what the subscription held before may come first."""
    deadline = time.monotonic() + 120
    while True:
        update = await client.update(sub_id, timeout=max(0.1, deadline - time.monotonic()))
        if update["type"] == "error":
            assert _error_name(update) == "PersistentCompute:JobInvalidState", update
            continue
        if update["type"] == "full":
            view = ResultView(ds.WINDOW_NS)
            view.apply(update)
            if ds.points(view) == want:
                return


async def error_past_outages(client: Client, sub_id: str) -> dict[str, Any]:
    """The subscription's error update, past data frames and the `JobInvalidState` of an outage (the
    compute tier may lose sight of Redis a little longer than the edge)."""
    while True:
        update = await client.update(sub_id, timeout=120)
        if update["type"] == "error" and _error_name(update) != "PersistentCompute:JobInvalidState":
            error: dict[str, Any] = update["error"]["serializableError"]
            return error


async def put_when_back(base_url: str, path: str, body: dict[str, Any]) -> None:
    """A change through an edge whose link to Redis may still be coming back (503 meanwhile)."""
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient() as http:
        while True:
            response = await http.put(f"{base_url}/assets/v1/{path}", json=body)
            if response.status_code != 503 or time.monotonic() > deadline:
                assert response.status_code == 200, response.text
                return
            await asyncio.sleep(0.5)


async def test_catalog_edits_through_one_edge_reach_subscriptions_on_every_edge(tier: Tier) -> None:
    """An asset created through edge A is read by edge B and the compute tier (one catalog, in
    Redis). Updated through A, the subscriptions over it on B and on A each get one FullResult of
    the new resolution; after a Redis restart an update through B still reaches both; deleted
    through B, both end with the error naming the asset."""
    a, b = tier.edges
    r1, r2, t0 = ds.rid(), ds.rid(), time.time_ns() - 60 * NANOS
    first = [(t0, 1.0), (t0 + NANOS, 2.0)]
    second = [(t0 + 2 * NANOS, 50.0), (t0 + 3 * NANOS, 51.0)]
    await write_points(a.base_url, r1, "speed", first, tags={"car": "a1"})
    await write_points(a.base_url, r1, "speed", [(t0 + ds.MS, 99.0)], tags={"car": "zz"})
    await write_points(a.base_url, r2, "speed", second)
    on_r1 = {"dataScopeName": "main", "dataSourceRid": r1, "seriesTags": {"car": "a1"}}
    on_r2 = {"dataScopeName": "main", "dataSourceRid": r2, "seriesTags": {}}
    asset = await ds.create(a.base_url, "assets", {"title": "car", "dataScopes": [on_r1]})
    path = f"assets/{asset['rid']}"
    assert httpx.get(f"{b.base_url}/assets/v1/{path}", timeout=10).json() == asset

    node = ds.numeric_node(ds.ref("s"))
    clients = [await Client.connect(edge.ws_url) for edge in (b, a)]
    try:
        for client in clients:
            view = await ds.subscribe(client, "car", node, asset_channel_variables(asset["rid"]))
            assert ds.points(view) == {(): first}

        await ds.put(a.base_url, path, {"dataScopes": [on_r2]})
        for client in clients:
            assert ds.points(await ds.next_full(client, "car")) == {(): second}
        for client in clients:  # one edit, one FullResult: nothing more comes for it
            with pytest.raises(TimeoutError):
                await client.update("car", timeout=3)
        # and the new resolution is live on both: a point of r2 arrives as an append
        await write_points(b.base_url, r2, "speed", [(t0 + 4 * NANOS, 52.0)])
        for client in clients:
            assert (await client.update("car", timeout=60))["type"] == "append"

        # Redis restarts between two edits; the next edit, through the other edge, still converges
        port = int(tier.redis.url.rsplit(":", 1)[1].split("/")[0])
        tier.redis.daemon.stop()
        async with httpx.AsyncClient() as http:  # meanwhile nothing can change: a 503, and it did not
            refused = await http.put(f"{a.base_url}/assets/v1/{path}", json={"dataScopes": [on_r1]})
        assert refused.status_code == 503, refused.text
        assert refused.json()["errorName"] == "Sparkwire:ServiceUnavailable", refused.text
        tier.redis = start_redis(tier.workdir / "redis", port=port, persistent=True)
        await put_when_back(b.base_url, path, {"dataScopes": [on_r1]})
        for client in clients:
            await converged_full(client, "car", {(): first})

        async with httpx.AsyncClient() as http:
            assert (await http.delete(f"{b.base_url}/assets/v1/{path}")).status_code == 204
        for client in clients:
            error = await error_past_outages(client, "car")
            assert error["name"] == "PersistentCompute:InvalidComputation", error
            assert error["params"] == {"invalidTypes": "", "variant": "asset", "rid": asset["rid"]}, error
    finally:
        for client in clients:
            await client.close()


async def post_when_back(url: str, body: Any) -> httpx.Response:
    """A change through an edge whose link to Redis may still be coming back (503 meanwhile)."""
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(timeout=60) as http:
        while True:
            response = await http.post(url, json=body)
            if response.status_code != 503 or time.monotonic() > deadline:
                assert response.status_code == 200, response.text
                return response
            await asyncio.sleep(0.5)


async def readable_again(base_url: str, rid: str) -> None:
    """Once the edge reads the module catalog again after Redis came back."""
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(timeout=60) as http:
        while (await http.get(f"{base_url}/scout/v2/module/{rid}")).status_code == 503:
            assert time.monotonic() < deadline, "the module catalog did not come back"
            await asyncio.sleep(0.5)


async def test_a_module_made_through_one_edge_is_computed_and_archived_on_every_edge(tier: Tier) -> None:
    """A module created through edge A is found through edge B and by the compute tier (one set of
    modules, in Redis): a derived subscription through B computes it. Updated through B, version 2
    is A's latest too while version 1's subscriptions go on; with Redis away the module routes answer
    503 and nothing changes; archived through A once it is back, the subscriptions on B and on A end
    with the error naming the module."""
    a, b = tier.edges
    r, t0, name = unique_rid("modules"), time.time_ns() - 60 * NANOS, f"m_{uuid.uuid4().hex}"
    xs = [(t0, 1.0), (t0 + NANOS, 2.0)]
    await write_points(a.base_url, r, "x", xs)
    created = await modules.create_module(
        a.base_url,
        nm.CreateModuleRequest(
            api_name=name, title="Physics", description="", definition=modules.definition()
        ),
    )
    rid = created.metadata.rid
    [found] = await modules.batch_get(b.base_url, name, "1")
    assert found.metadata.rid == rid and found.definition == created.definition

    args = {"x": modules.variable("c"), "k": modules.double(2.0)}
    node = modules.numeric_node(sc.NumericSeries(derived=modules.derived(name, "scaled", "1", args)))
    variables = {"c": modules.channel(r, "x")}
    clients = [await Client.connect(edge.ws_url) for edge in (b, a)]
    try:
        for client in clients:
            view = await modules.subscribe(client, "scaled", node, variables)
            assert modules.snapshot(view) == {(): [(t, 2 * v) for t, v in xs]}

        update = nm.UpdateModuleRequest(
            title="Physics 2", description="", definition=modules.definition(plus=10)
        )
        response = await modules.http_call("PUT", f"{b.base_url}/scout/v2/module/{rid}", modules.enc(update))
        assert response.status_code == 200, response.text
        [newest] = await modules.batch_get(a.base_url, name, None)
        assert (newest.version_metadata.version, newest.metadata.title) == ("2", "Physics 2")
        await write_points(b.base_url, r, "x", [(t0 + 2 * NANOS, 5.0)])
        for client in clients:  # version 1 is unchanged: its subscriptions go on, an append comes
            assert (await client.update("scaled", timeout=60))["type"] == "append"

        port = int(tier.redis.url.rsplit(":", 1)[1].split("/")[0])
        tier.redis.daemon.stop()
        archive = modules.enc(nm.BatchArchiveModulesRequest(requests=[rid]))
        async with httpx.AsyncClient(timeout=60) as http:  # meanwhile nothing can change or be read
            for response in (
                await http.post(f"{a.base_url}/scout/v2/module/archive", json=archive),
                await http.get(f"{b.base_url}/scout/v2/module/{rid}"),
            ):
                assert response.status_code == 503, response.text
                assert response.json()["errorName"] == "Sparkwire:ServiceUnavailable", response.text
        tier.redis = start_redis(tier.workdir / "redis", port=port, persistent=True)
        await readable_again(b.base_url, rid)
        [kept] = await modules.batch_get(b.base_url, name, None)
        assert kept.metadata.archived_at is None  # the refused archive changed nothing

        response = await post_when_back(f"{a.base_url}/scout/v2/module/archive", archive)
        assert response.json() == {"archivedModuleRids": [rid]}
        for client in clients:
            error = await error_past_outages(client, "scaled")
            assert error["name"] == "PersistentCompute:InvalidComputation", error
            assert error["params"] == {
                "invalidTypes": "",
                "variant": "derived",
                "field": "moduleName",
                "moduleName": name,
                "moduleRid": rid,
            }, error
    finally:
        for client in clients:
            await client.close()
