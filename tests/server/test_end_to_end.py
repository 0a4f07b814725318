"""The whole path against a real server: HTTP writes -> SQLite log -> Spark stream -> frames."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from tests.client_view import ResultView
from tests.conftest import ServerProcess
from tests.reference import assert_bucket_matches, bucket_width, reference_buckets
from tests.wire import (
    NANOS,
    Client,
    channel_variable,
    full_entries,
    new_id,
    series_node,
    subscription,
    write_points,
)

WINDOW_S = 3600.0


def unique_rid(name: str) -> str:
    return f"ri.test.{name}.{time.time_ns()}"


async def subscribe_one(client: Client, sub: dict) -> tuple[str, dict]:
    sub_id = new_id()
    await client.subscribe({sub_id: sub})
    creation = await client.creation(sub_id)
    assert creation["type"] == "success", creation
    return sub_id, await client.update(sub_id)


async def fresh_full(server: ServerProcess, node: dict, rid: str, channel: str, **kw: object) -> dict:
    """A FullResult from a brand-new computation (an extra unused variable makes it distinct), so
    it is back-filled from the log rather than read from the live one."""
    client = await Client.connect(server.ws_url)
    try:
        variables = {
            "x": channel_variable(rid, channel),
            f"unused{time.time_ns()}": {"type": "double", "double": 1.0},
        }
        _, full = await subscribe_one(client, subscription(node, variables, WINDOW_S, **kw))  # type: ignore[arg-type]
        return full
    finally:
        await client.close()


async def test_full_result_holds_the_written_points_exactly(server: ServerProcess) -> None:
    rid = unique_rid("full")
    now = time.time_ns()
    points = [(now - 300 * NANOS + i * 7_000_000_123, round(random.uniform(-50, 50), 6)) for i in range(40)]
    await write_points(server.base_url, rid, "engine.temp", points, tags={"vehicle": "a1"})
    client = await Client.connect(server.ws_url)
    variables = {"x": channel_variable(rid, "engine.temp", tags={"vehicle": "a1"})}
    _, full = await subscribe_one(client, subscription(series_node(), variables, WINDOW_S))
    kind, entries = full_entries(full)
    assert kind == "numeric"
    assert entries == sorted(points)  # timestamps round-trip to the nanosecond
    await client.close()


async def test_subscription_to_an_unwritten_series_gets_an_empty_full_result(server: ServerProcess) -> None:
    client = await Client.connect(server.ws_url)
    variables = {"x": channel_variable(unique_rid("empty"), "nothing.here")}
    _, full = await subscribe_one(client, subscription(series_node(), variables, 60))
    assert full_entries(full) == ("numeric", [])
    await client.close()


@pytest.mark.parametrize("buckets", [None, 20], ids=["raw", "bucketed"])
async def test_full_result_merged_with_appends_equals_a_fresh_full_result(
    server: ServerProcess, buckets: int | None
) -> None:
    rid = unique_rid(f"merge{buckets}")
    now = time.time_ns()
    history = [(now - 600 * NANOS + i * 5 * NANOS, float(i % 17)) for i in range(100)]
    await write_points(server.base_url, rid, "p", history)
    node = series_node(buckets=buckets)
    client = await Client.connect(server.ws_url)
    sub = subscription(node, {"x": channel_variable(rid, "p")}, WINDOW_S, lateness_s=WINDOW_S)
    sub_id, full = await subscribe_one(client, sub)
    view = ResultView(int(WINDOW_S * NANOS))
    view.apply(full)
    assert view.ungrouped().kind == ("numeric" if buckets is None else "bucketedNumeric")

    written = list(history)
    rng = random.Random(7)
    for round_ in range(6):
        t = time.time_ns()
        fresh = [(t + i * 1_000_000, rng.uniform(0, 100)) for i in range(5)]
        # late points: older than the newest already written, some inside existing buckets
        late = [
            (now - rng.randint(1, 590) * NANOS - rng.randint(0, 999) * 1000, rng.uniform(-10, 10))
            for _ in range(3)
        ]
        batch = fresh + late
        await write_points(server.base_url, rid, "p", batch)
        written += batch
        await asyncio.sleep(0.3 if round_ % 2 else 0.05)
    updates = []
    while view.ungrouped().point_count() < len(written):  # until every written point is reflected
        update = await client.update(sub_id, timeout=60)
        updates.append(update)
        view.apply(update)
    assert all(u["type"] == "append" for u in updates), [u["type"] for u in updates]
    late_starts = [u["append"]["start"] for u in updates]
    assert min(s["seconds"] * NANOS + s["nanos"] for s in late_starts) < now, "no append reached back"

    fresh = ResultView(int(WINDOW_S * NANOS))
    fresh.apply(await fresh_full(server, node, rid, "p"))
    assert fresh.ungrouped().kind == view.ungrouped().kind
    merged, fresh_entries = view.ungrouped().normalized(), fresh.ungrouped().normalized()
    assert [t for t, _ in merged] == [t for t, _ in fresh_entries]
    assert [v for _, v in merged] == [v for _, v in fresh_entries]

    # ...and both equal a direct computation over every point written
    if buckets is None:
        assert merged == sorted(written)
    else:
        ref = reference_buckets(written, bucket_width(int(WINDOW_S * NANOS), buckets))
        assert [t for t, _ in merged] == [t for t, _ in ref]
        for (_, held), (_, expected) in zip(merged, ref, strict=True):
            assert_bucket_matches(held, expected)
    await client.close()


async def test_raw_result_turns_into_buckets_with_a_new_full_result(server: ServerProcess) -> None:
    rid = unique_rid("grow")
    now = time.time_ns()
    await write_points(
        server.base_url, rid, "p", [(now - 100 * NANOS + i * NANOS, float(i)) for i in range(8)]
    )
    client = await Client.connect(server.ws_url)
    sub_id, full = await subscribe_one(
        client, subscription(series_node(buckets=10), {"x": channel_variable(rid, "p")}, WINDOW_S)
    )
    assert full_entries(full)[0] == "numeric"
    await write_points(server.base_url, rid, "p", [(time.time_ns() + i * 1000, 1.0) for i in range(5)])
    update = await client.update(sub_id)
    assert update["type"] == "full"
    assert update["full"]["result"]["type"] == "bucketedNumeric"
    await client.close()


async def test_identical_subscriptions_share_one_computation_and_see_the_same_frames(
    server: ServerProcess,
) -> None:
    rid = unique_rid("shared")
    variables = {"x": channel_variable(rid, "p")}
    a, b = await Client.connect(server.ws_url), await Client.connect(server.ws_url)
    sub = subscription(series_node(), variables, WINDOW_S)
    a_id, _ = await subscribe_one(a, sub)
    b_id, _ = await subscribe_one(b, sub)
    await write_points(server.base_url, rid, "p", [(time.time_ns(), 42.0)])
    ua, ub = await a.update(a_id), await b.update(b_id)
    assert ua == ub
    await a.close()
    await b.close()
