"""Computations sharded across compute processes (docs/decisions/0089): a Kafka broker (the point
log, `source=kafka`, and the consumer group `compute-slots` that shares the live computations), a
redis-server (results and heartbeats between the tiers), two `--role compute` processes, one edge,
real WebSocket clients. One compute process is killed with SIGKILL: its computations move to the
other, and every subscriber gets a correct FullResult again on the same connection, with nothing
acknowledged lost and no frame going back in time. Then one is added while points are being
written: it takes its share of the slots, and the same holds. Then the broker is stopped for longer
than a group session and started again: writes meanwhile are refused whole (503), the computations
go on once it is back, and the same holds."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest
import redis
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from app.tiers.shards import Shards
from tests.conftest import ServerProcess
from tests.hostile import write_body
from tests.kafka_broker import KafkaBroker, start_kafka
from tests.server.test_end_to_end import unique_rid
from tests.server.test_two_tier import gauge, wait_for
from tests.wire import NANOS, Client, channel_variable, new_id, series_node, subscription, write_points

pytestmark = pytest.mark.timeout(900)

SLOTS = 16
TOPIC = "sharded-points"  # the slots' topic is TOPIC-compute, the consumer group's name too
# A liveness bound, not issue 45's 10 s target: that is a benchmark's to measure on a quiet machine
# (decision 0089 has each run's figure, 6.3-8.6 s in most). Past this bound the hand-over is stuck.
FAILOVER_BOUND_S = 45.0


@dataclass
class Shared:
    edge: ServerProcess
    computes: list[ServerProcess]
    redis_url: str
    start_compute: Callable[[str], ServerProcess]  # one more compute process, stopped with the rest
    kafka: KafkaBroker


def sharded_env(redis_url: str, bootstrap: str) -> dict[str, str]:
    """The settings of every process here (deploy/docker-compose.yml's compute services set the same
    ones, tests/unit/test_compose_file.py checks)."""
    return {
        "SPARKWIRE_SOURCE": "kafka",
        "SPARKWIRE_REDIS_URL": redis_url,
        "SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "SPARKWIRE_KAFKA_TOPIC": TOPIC,
        "SPARKWIRE_COMPUTE_SLOTS": str(SLOTS),
    }


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    from tests.infra import RoleStarter, start_redis

    workdir = tmp_path_factory.mktemp("sharded")
    kafka = start_kafka(workdir / "kafka")
    redis_server = start_redis(workdir / "redis")
    env = sharded_env(redis_server.url, kafka.bootstrap)
    start = RoleStarter(workdir, env, [])
    try:
        with ThreadPoolExecutor(2) as pool:  # the two Spark drivers start side by side
            computes = list(pool.map(lambda n: start(n, "compute", 300), ["compute-a", "compute-b"]))
        edge = start("edge", "edge", 120)
        yield Shared(edge, computes, redis_server.url, lambda name: start(name, "compute", 300), kafka)
    finally:
        for process in start.processes:
            process.stop(signal.SIGKILL)
        redis_server.daemon.stop()
        kafka.stop()


def slots_per_member(bootstrap: str) -> list[int]:
    """Kafka's own view of the group: how many slots each live member holds (none while the group
    is being formed)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    group = f"{TOPIC}-compute"
    try:
        (description,) = [f.result(timeout=10) for f in admin.describe_consumer_groups([group]).values()]
    except KafkaException:
        return []
    return sorted(len(m.assignment.topic_partitions) for m in description.members)


async def settled_move(shared: Shared, computes: list[ServerProcess], computations: int) -> list[int]:
    """Wait until the group holds one member per compute process, the slots all assigned, and the
    processes run every computation between them (none left between an old and a new owner); the
    slots per member then."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        members = await asyncio.to_thread(slots_per_member, shared.kafka.bootstrap)
        if len(members) == len(computes) and sum(members) == SLOTS:
            running = await asyncio.to_thread(
                lambda: sum(gauge(c, "sparkwire_computations") for c in computes)
            )
            if running == computations:
                return members
        await asyncio.sleep(0.5)
    raise AssertionError(f"not within 120 s: {len(computes)} members running {computations} computations")


def values(update: dict) -> list[float]:
    kind = update["type"]
    return list(update[kind]["result"]["numeric"]["values"])


async def until_holding(client: Client, sub_id: str, held: list[float], want: list[float]) -> tuple[int, int]:
    """Apply the subscriber's updates until it holds `want`; how many FullResults and errors came on
    the way. A subscriber whose computation's process died is told `JobInvalidState` until the
    computation has a new owner."""
    fulls = errors = 0
    while held != want:
        update = await client.update(sub_id, timeout=60)
        if update["type"] == "error":
            name = update["error"]["serializableError"]["name"]
            assert name == "PersistentCompute:JobInvalidState", update
            errors += 1
            continue
        if update["type"] == "full":
            fulls += 1
            new = values(update)
            # never back in time: a FullResult holds everything the subscriber held
            assert new[: len(held)] == held, (held, new)
            held[:] = new
        else:
            assert update["type"] == "append", update
            held.extend(values(update))
        assert len(held) <= len(want) and held == want[: len(held)], (held, want)
    return fulls, errors


async def subscribed_series(
    client: Client, edge: ServerProcess, prefix: str, count: int, points: int
) -> tuple[dict[str, str], dict[str, list[float]], dict[str, list[float]]]:
    """`count` channels of their own with `points` points each (0.0, 1.0, ...; the last a second
    ago), each subscribed as a series over the last hour; per subscription id: its data source,
    what its FullResult held, and the points acknowledged (the same, for now)."""
    now = time.time_ns()
    rids: dict[str, str] = {}
    held: dict[str, list[float]] = {}
    acked: dict[str, list[float]] = {}
    written = [float(i) for i in range(points)]
    for _ in range(count):
        rid, sub_id = unique_rid(prefix), new_id()
        await write_points(
            edge.base_url, rid, "temp", [(now - (points - i) * NANOS, v) for i, v in enumerate(written)]
        )
        await client.subscribe(
            {sub_id: subscription(series_node(), {"x": channel_variable(rid, "temp")}, 3600.0)}
        )
        first = await client.update(sub_id, timeout=120)
        assert first["type"] == "full" and values(first) == written, first
        rids[sub_id], held[sub_id], acked[sub_id] = rid, values(first), list(written)
    return rids, held, acked


async def test_a_killed_compute_process_hands_its_computations_over(shared: Shared) -> None:
    await wait_for(lambda: slots_per_member(shared.kafka.bootstrap) == [SLOTS // 2] * 2, 60, "slots split")
    edge, computes = shared.edge, shared.computes
    now = time.time_ns()
    # each opened when first used: a connection silent past the handshake deadline (10 s) is closed,
    # and the first computation's FullResult took longer than that on a loaded CI machine
    clients: list[Client] = []
    subs: list[tuple[Client, str, str]] = []  # (client, subscription id, data source)
    held: dict[str, list[float]] = {}  # what each subscriber holds, frame by frame
    try:
        # computations until both processes run some (a key's slot is a hash: at least 6 of them)
        while len(subs) < 6 or min(gauge(c, "sparkwire_computations") for c in computes) == 0:
            assert len(subs) < 24, "every computation landed on one process"
            rid = unique_rid("sharded")
            await write_points(
                edge.base_url, rid, "temp", [(now - (5 - i) * NANOS, float(i)) for i in range(5)]
            )
            if len(clients) < 2:
                clients.append(await Client.connect(edge.ws_url))
            client, sub_id = clients[len(subs) % 2], new_id()
            await client.subscribe(
                {sub_id: subscription(series_node(), {"x": channel_variable(rid, "temp")}, 3600.0)}
            )
            first = await client.update(sub_id, timeout=120)
            assert first["type"] == "full" and values(first) == [0.0, 1.0, 2.0, 3.0, 4.0]
            subs.append((client, sub_id, rid))
            held[sub_id] = values(first)
        counts = [gauge(c, "sparkwire_computations") for c in computes]
        assert sum(counts) == len(subs) and min(counts) > 0, counts

        victim = computes[counts.index(max(counts))]
        killed_at = time.monotonic()
        victim.stop(signal.SIGKILL)
        # written (and acknowledged) right after the kill: every subscriber must end up holding it
        for i, (_, _, rid) in enumerate(subs):
            await write_points(edge.base_url, rid, "temp", [(time.time_ns(), 100.0 + i)])

        async def until_whole(client: Client, sub_id: str, want: list[float]) -> tuple[float, int]:
            """Seconds from the kill until the subscriber holds `want`, and FullResults on the way."""
            fulls, _ = await until_holding(client, sub_id, held[sub_id], want)
            return time.monotonic() - killed_at, fulls

        outcomes = await asyncio.gather(
            *(
                until_whole(client, sub_id, [0.0, 1.0, 2.0, 3.0, 4.0, 100.0 + i])
                for i, (client, sub_id, _) in enumerate(subs)
            )
        )
        moved = [seconds for seconds, fulls in outcomes if fulls > 0]
        assert len(moved) >= max(counts), outcomes  # every computation of the victim came back whole
        slowest = max(seconds for seconds, _ in outcomes)
        print(f"failover: {len(moved)} moved of {len(subs)}; whole again after {sorted(moved)} s")
        assert slowest <= FAILOVER_BOUND_S, outcomes
        survivor = next(c for c in computes if c is not victim)
        assert gauge(survivor, "sparkwire_computations") == len(subs)
        assert slots_per_member(shared.kafka.bootstrap) == [SLOTS]
        # and they stay live on the survivor: a later point arrives as an append everywhere
        for i, (_, _, rid) in enumerate(subs):
            await write_points(edge.base_url, rid, "temp", [(time.time_ns(), 200.0 + i)])
        for i, (client, sub_id, _) in enumerate(subs):
            update = await client.update(sub_id, timeout=60)
            assert update["type"] == "append" and values(update) == [200.0 + i], update
    finally:
        for client in clients:
            await client.close()


async def test_a_compute_process_added_under_load_takes_its_share(shared: Shared) -> None:
    """A third compute process joins while every computation's channel is being written: the
    cooperative rebalance hands it some of the slots (from whichever processes still live, so this
    holds with or without the kill above), the computations of those slots move to it, and every
    subscriber ends up holding every acknowledged point, no frame going back in time."""
    edge = shared.edge
    live = [c for c in shared.computes if c.process.poll() is None]
    client = await Client.connect(edge.ws_url)
    try:
        # 16 computations: the newcomer's share of the slots holds none of them with p < 1e-4
        rids, held, acked = await subscribed_series(client, edge, "added", 16, 5)
        assert sum(gauge(c, "sparkwire_computations") for c in live) == len(rids)

        writing = True

        async def write_all_the_while() -> None:
            value = 1000.0
            while writing:
                for sub_id, rid in rids.items():
                    await write_points(edge.base_url, rid, "temp", [(time.time_ns(), value)])
                    acked[sub_id].append(value)  # acknowledged: the subscriber must end up with it
                value += 1
                await asyncio.sleep(0.1)

        writer = asyncio.create_task(write_all_the_while())
        newcomer = await asyncio.to_thread(shared.start_compute, "compute-c")
        shared.computes.append(newcomer)  # a live compute process for the tests after this one
        await wait_for(lambda: gauge(newcomer, "sparkwire_computations") > 0, 120, "the newcomer computes")
        # Points keep coming until every moved computation has its new owner, and for 3 s after: a
        # new owner whose first snapshot equals what the subscribers hold sends no second FullResult
        # (app/tiers/mirror.py), so a move finished after the last write could go unseen below.
        members = await settled_move(shared, [*live, newcomer], len(rids))
        await asyncio.sleep(3)
        writing = False
        await writer

        assert max(members) - min(members) <= 1, members  # an even share, the newcomer's included
        outcomes = await asyncio.gather(
            *(until_holding(client, sub_id, held[sub_id], acked[sub_id]) for sub_id in rids)
        )
        moved = gauge(newcomer, "sparkwire_computations")
        print(f"added: slots {members}, {moved:g} of {len(rids)} computations moved, fulls {outcomes}")
        assert sum(gauge(c, "sparkwire_computations") for c in [*live, newcomer]) == len(rids)
        # A moved computation's subscribers get a FullResult, or go on with appends when the new
        # owner's first window equals what they hold (issue 45: "a fresh FullResult (or a resumed
        # append)"): one in 13 did so in a run. The points written after the move were the new
        # owner's to send, and every subscriber holds them (until_holding).
        # The others were left alone: only a moved computation's subscribers may see a FullResult.
        assert sum(1 for fulls, _ in outcomes if fulls > 0) <= moved, outcomes
        # a graceful move needs no error: the old owner hands the slot over, the new one publishes
        assert all(errors == 0 for _, errors in outcomes), outcomes
    finally:
        await client.close()


async def test_with_the_broker_stopped_and_started_every_subscriber_ends_whole(shared: Shared) -> None:
    """The broker away for longer than a group session (6 s) while points are written: it is the
    point log, so those writes are refused whole (503 `Storage:LogUnavailable`, nothing stored); the
    compute processes cannot heartbeat, so Kafka's client calls their slots lost and they drop those
    computations. Once the broker is back writes succeed again, the group forms again, the slots are
    claimed with new tokens, and every subscriber ends holding every acknowledged point and nothing
    refused, no frame going back in time."""
    edge = shared.edge
    live = [c for c in shared.computes if c.process.poll() is None]
    client = await Client.connect(edge.ws_url)
    try:
        rids, held, acked = await subscribed_series(client, edge, "outage", 6, 3)
        refused: list[str] = []

        async def write_round(value: float) -> None:
            """One point per channel; acknowledged points are the subscribers' to hold, refused
            ones never appear (they are not in `acked`, and until_holding fails on a stranger)."""
            async with httpx.AsyncClient(base_url=edge.base_url, timeout=60) as http:
                for sub_id, rid in rids.items():
                    response = await http.post(
                        "/storage/writer/v1", json=write_body(rid, [(time.time_ns(), value)], "temp")
                    )
                    if response.status_code == 200:
                        acked[sub_id].append(value)
                        continue
                    assert response.status_code == 503, response.text
                    assert response.json()["errorName"] == "Storage:LogUnavailable", response.text
                    refused.append(rid)

        shared.kafka.stop()
        stopped_at = time.monotonic()
        value = 100.0
        while time.monotonic() - stopped_at < 10:  # past the 6 s session: the slots are lost
            await write_round(value)
            value += 1
            await asyncio.sleep(0.5)
        assert refused, "no write was refused while the point log's broker was away"
        await asyncio.to_thread(shared.kafka.start)
        deadline = time.monotonic() + 120
        while True:  # the writer makes a new producer once the broker is back
            before = len(refused)
            await write_round(value)
            value += 1
            if len(refused) == before:
                break
            assert time.monotonic() < deadline, "writes were still refused 120 s after the broker's return"
            await asyncio.sleep(1)

        outcomes = await asyncio.gather(
            *(until_holding(client, sub_id, held[sub_id], acked[sub_id]) for sub_id in rids)
        )
        print(
            f"broker outage: {len(refused)} writes refused; (FullResults, errors) per subscriber {outcomes}"
        )
        await wait_for(
            lambda: sum(slots_per_member(shared.kafka.bootstrap)) == SLOTS, 60, "the group formed again"
        )
        assert sum(gauge(c, "sparkwire_computations") for c in live) == len(rids)
        # and live again: a later point arrives as an append everywhere
        await write_round(value)
        for sub_id in rids:
            update = await client.update(sub_id, timeout=60)
            assert update["type"] == "append" and values(update) == [value], update
    finally:
        await client.close()


async def test_a_process_that_lost_a_slot_can_never_publish_it_again(shared: Shared) -> None:
    """The membership and the fence alone, on the module's broker and redis-server (a group of its
    own): a second member takes half the slots from the first, and the first's publishes under its
    old token are refused while the new owner's go through."""
    client = redis.Redis.from_url(shared.redis_url)
    listener = client.pubsub(ignore_subscribe_messages=True)
    listener.subscribe("fence-test")
    first, second = (
        Shards(shared.kafka.bootstrap, "fence-test-compute", 4, client, "fence-test", name, lambda: None)
        for name in ("first", "second")
    )
    try:
        first.start()
        await wait_for(lambda: len(first.owned()) == 4, 30, "the first member owns every slot")
        before = first.owned()
        second.start()
        await wait_for(lambda: len(second.owned()) == 2 and len(first.owned()) == 2, 60, "split")
        (slot, token), *_ = second.owned().items()
        assert slot not in first.owned() and token > before[slot]
        pipe = client.pipeline(transaction=False)
        first.publish(pipe, (slot, before[slot]), "fence-test", b"stale")
        second.publish(pipe, (slot, token), "fence-test", b"fresh")
        assert pipe.execute() == [-1, 1]  # refused; delivered to the one listener
        heard = [listener.get_message(timeout=2) for _ in range(2)]
        assert [m["data"] for m in heard if m is not None] == [b"fresh"]
    finally:
        first.stop()
        second.stop()
        listener.close()
        client.close()
