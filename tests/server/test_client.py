"""The Python client package against the real server: the merged view it keeps equals what the
server would send fresh and what was written; the writer batches; the client reconnects."""

from __future__ import annotations

import asyncio
import math
import random
import time
from typing import Any

import pandas as pd
import pytest

from sparkwire_client import (
    Client,
    SubscriptionError,
    View,
    WriteError,
    Writer,
    enum_channel,
    numeric_channel,
    series,
)
from tests.conftest import ServerProcess
from tests.proxy import Proxy
from tests.reference import bucket_width, reference_buckets
from tests.wire import NANOS, channel_variable, full_entries, new_id, subscription
from tests.wire import Client as WireClient

WINDOW_S = 3600.0


def unique_rid(name: str) -> str:
    return f"ri.test.client.{name}.{time.time_ns()}"


async def fresh_full(server: ServerProcess, rid: str, channel: str, buckets: int | None = None) -> dict:
    """A FullResult from a brand-new computation, read with the test-side protocol client (an
    unused extra variable makes the computation distinct, so it is back-filled from the log)."""
    node: dict[str, Any] = {
        "type": "series",
        "series": {"input": {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": "x"}}}},
    }
    if buckets is not None:
        node["series"]["buckets"] = buckets
    variables = {
        "x": channel_variable(rid, channel),
        f"unused{time.time_ns()}": {"type": "double", "double": 1},
    }
    client = await WireClient.connect(server.ws_url)
    try:
        sub_id = new_id()
        await client.subscribe({sub_id: subscription(node, variables, WINDOW_S)})
        assert (await client.creation(sub_id))["type"] == "success"
        return await client.update(sub_id)
    finally:
        await client.close()


def as_points(view: View) -> list[tuple[int, Any]]:
    return list(zip(view.timestamps, view.values, strict=True))


async def test_the_merged_view_equals_the_points_written_and_a_fresh_full_result(
    server: ServerProcess,
) -> None:
    rid = unique_rid("raw")
    now = time.time_ns()
    rng = random.Random(3)
    written = [(now - 300 * NANOS + i * 7_000_000_011, round(rng.uniform(-50, 50), 6)) for i in range(40)]
    async with Writer(server.base_url, rid) as writer:
        for t, v in written:
            writer.add("p", t, v)

    async with Client(server.base_url) as client:
        sub = await client.subscribe(
            series(numeric_channel(rid, "p")), window=WINDOW_S, allowed_lateness=WINDOW_S
        )
        view = await sub.wait_for(lambda v: v.updates >= 1, timeout=120)
        assert view.kind == "numeric"
        assert as_points(view) == sorted(written)  # nanoseconds round-trip

        async with Writer(server.base_url, rid) as writer:
            for round_ in range(5):
                t = time.time_ns()
                batch = [(t + i * 1_000_000, rng.uniform(0, 100)) for i in range(4)]
                batch += [
                    (now - rng.randint(1, 290) * NANOS - rng.randint(0, 999), rng.uniform(-9, 9))
                ]  # late
                for ts, v in batch:
                    writer.add("p", ts, v)
                await writer.flush()
                written += batch
                await asyncio.sleep(0.3 if round_ % 2 else 0.05)
        view = await sub.wait_for(lambda v: as_points(v) == sorted(written), timeout=120)
        assert view.updates > 1, "the view caught up through AppendResults"

    kind, entries = full_entries(await fresh_full(server, rid, "p"))
    assert (kind, entries) == ("numeric", as_points(view))

    frame = view.to_pandas()
    assert list(frame.columns) == ["timestamp", "value"]
    assert str(frame["timestamp"].dt.tz) == "UTC"
    assert frame["timestamp"].astype("int64").tolist() == [t for t, _ in sorted(written)]
    assert frame["value"].tolist() == [v for _, v in sorted(written)]


async def test_grouped_buckets_merge_per_group_to_the_reference_computation(server: ServerProcess) -> None:
    rid = unique_rid("grouped")
    now = time.time_ns()
    rng = random.Random(5)
    written: dict[str, list[tuple[int, float]]] = {"a1": [], "a2": []}
    async with Writer(server.base_url, rid) as writer:
        for vehicle, points in written.items():
            for i in range(60):
                t, v = now - 1200 * NANOS + i * 19 * NANOS + rng.randint(0, 10**9), rng.gauss(80, 5)
                points.append((t, v))
                writer.add("rpm", t, v, tags={"vehicle": vehicle})

    buckets = 12
    node = series(numeric_channel(rid, "rpm", group_by=["vehicle"]), buckets=buckets)
    async with Client(server.base_url) as client:
        sub = await client.subscribe(node, window=WINDOW_S, allowed_lateness=WINDOW_S)
        view = await sub.wait_for(lambda v: v.updates >= 1, timeout=120)
        assert view.grouped and view.kind == "bucketedNumeric"
        async with Writer(server.base_url, rid) as writer:
            for _ in range(3):
                for vehicle, points in written.items():
                    for t in (time.time_ns(), now - rng.randint(10, 1100) * NANOS):  # one fresh, one late
                        v = rng.gauss(80, 5)
                        points.append((t, v))
                        writer.add("rpm", t, v, tags={"vehicle": vehicle})
                await writer.flush()
                await asyncio.sleep(0.2)

        width = bucket_width(int(WINDOW_S * NANOS), buckets)
        expected = {
            (("vehicle", vehicle),): reference_buckets(points, width) for vehicle, points in written.items()
        }

        def matches(v: View) -> bool:
            got = {key: sorted(group.entries.items()) for key, group in v.groups.items()}
            if set(got) != set(expected):
                return False
            for key, ref in expected.items():
                if [t for t, _ in got[key]] != [t for t, _ in ref]:
                    return False
                for (_, bucket), (_, want) in zip(got[key], ref, strict=True):
                    if bucket["count"] != want["count"] or not all(
                        math.isclose(bucket[f], want[f], rel_tol=1e-9, abs_tol=1e-9)
                        for f in ("min", "max", "mean", "variance")
                    ):
                        return False
            return True

        view = await sub.wait_for(matches, timeout=120)
    rows = view.rows()
    assert {row["vehicle"] for row in rows} == {"a1", "a2"}
    assert set(rows[0]) == {"vehicle", "timestamp", "min", "max", "mean", "count", "variance"}
    assert sum(row["count"] for row in rows) == sum(len(p) for p in written.values())


async def test_a_string_channel_reads_as_strings_in_lists_and_frames(server: ServerProcess) -> None:
    rid = unique_rid("enum")
    now = time.time_ns()
    modes = [(now - (30 - i) * NANOS, ["PARK", "DRIVE", "NEUTRAL"][i % 3]) for i in range(30)]
    async with Writer(server.base_url, rid) as writer:
        for t, mode in modes:
            writer.add("drive.mode", t, mode, tags={"vehicle": "a1"})
    async with Client(server.base_url) as client:
        sub = await client.subscribe(
            series(enum_channel(rid, "drive.mode", tags={"vehicle": "a1"})), window=600
        )
        view = await sub.wait_for(lambda v: len(v.timestamps) == len(modes), timeout=120)
        assert view.kind == "enum"
        assert as_points(view) == modes
        async with Writer(server.base_url, rid) as writer:
            writer.add("drive.mode", time.time_ns(), "REVERSE", tags={"vehicle": "a1"})
        view = await sub.wait_for(lambda v: bool(v.values) and v.values[-1] == "REVERSE", timeout=120)
    frame = view.to_pandas()
    assert frame["value"].tolist() == [m for _, m in modes] + ["REVERSE"]
    assert isinstance(frame["timestamp"].iloc[0], pd.Timestamp)


async def test_the_writer_batches_and_reports_a_refused_request(server: ServerProcess) -> None:
    rid = unique_rid("writer")
    now = time.time_ns()
    writer = Writer(server.base_url, rid, max_points=100, max_delay=10)
    for i in range(250):
        writer.add("p", now - (250 - i) * 1_000_000, float(i))
    await writer.close()
    assert writer.points_written == 250
    assert writer.requests_sent == 3  # two full batches of 100, then the rest at close

    async with Client(server.base_url) as client:
        sub = await client.subscribe(series(numeric_channel(rid, "p")), window=600)
        view = await sub.wait_for(lambda v: v.updates >= 1, timeout=120)
        assert view.values == [float(i) for i in range(250)]
        assert await client.ping() > 0

    async with Writer(server.base_url, rid) as bad:
        bad.add("p", now, "not a number")  # a string point on a double series: refused whole
        bad.add("q", now, 1.0)
        with pytest.raises(WriteError) as refused:
            await bad.flush()
    assert refused.value.status == 400
    assert "double" in refused.value.body


async def test_an_unsupported_computation_surfaces_as_a_subscription_error(server: ServerProcess) -> None:
    rid = unique_rid("refused")
    async with Client(server.base_url) as client:
        node = series(numeric_channel(rid, "p"), resolution_seconds=0.0000001)  # below 1 ms
        sub = await client.subscribe(node, window=60)
        with pytest.raises(SubscriptionError) as refused:
            await sub.next(timeout=60)
    assert refused.value.name == "PersistentCompute:UnsupportedGranularity"


async def test_the_client_reconnects_with_backoff_and_resubscribes(server: ServerProcess) -> None:
    rid = unique_rid("reconnect")
    now = time.time_ns()
    async with Writer(server.base_url, rid) as writer:
        writer.add("p", now - NANOS, 1.0)
    proxy = Proxy(server.port)
    await proxy.start()
    try:
        async with Client(proxy.base_url, backoff_initial=0.1, backoff_max=0.5) as client:
            sub = await client.subscribe(series(numeric_channel(rid, "p")), window=600)
            await sub.wait_for(lambda v: v.values == [1.0], timeout=120)

            proxy.refusing = True
            proxy.cut()  # the connection drops, and for a while no new one gets through
            await _until(lambda: client.state == "reconnecting")
            async with Writer(server.base_url, rid) as writer:
                writer.add("p", time.time_ns(), 2.0)  # written while the client is away
            await asyncio.sleep(1.0)
            assert client.state == "reconnecting"
            proxy.refusing = False

            view = await sub.wait_for(lambda v: v.values == [1.0, 2.0], timeout=120)
            assert client.state == "open"
            assert client.connections_opened == 2
            assert view.updates >= 2
    finally:
        await proxy.close()


async def _until(condition: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_the_client_keeps_the_servers_late_reports(server: ServerProcess) -> None:
    """`Subscription.late`: points the server left out as later than the allowed lateness."""
    rid = unique_rid("late")
    now = time.time_ns()
    async with Writer(server.base_url, rid) as writer:
        writer.add("p", now, 1.0)
    async with Client(server.base_url) as client:
        sub = await client.subscribe(series(numeric_channel(rid, "p")), window=WINDOW_S, allowed_lateness=5)
        await sub.wait_for(lambda v: v.values == [1.0], timeout=60)
        late = [now - 60 * NANOS, now - 30 * NANOS]  # behind the newest point by more than 5 s
        async with Writer(server.base_url, rid) as writer:
            for t in late:
                writer.add("p", t, -1.0)
        deadline = time.monotonic() + 30
        while (sub.late is None or sub.late.dropped_points < 2) and time.monotonic() < deadline:
            await sub.next(timeout=max(0.1, deadline - time.monotonic()))
        assert sub.late is not None
        assert (sub.late.dropped_points, sub.late.newest_dropped_ns) == (2, late[1])
        assert sub.view.values == [1.0]  # kept in the log, left out of the live result


async def test_the_client_replays_a_past_period_then_follows_live(server: ServerProcess) -> None:
    from sparkwire_client import Replay

    rid = unique_rid("replay")
    start = time.time_ns() - 600 * NANOS
    recorded = [(start + i * NANOS, float(i)) for i in range(20)]
    async with Writer(server.base_url, rid) as writer:
        for t, v in recorded:
            writer.add("p", t, v)
    async with Client(server.base_url) as client:
        # (Unix seconds as floats hold about a microsecond: no point sits on the period's ends.)
        # In real time (speed 1): the first append follows the FullResult by 0.5 s. As fast as the
        # server goes, the appends arrived with it and the first view a reader saw already held them.
        replay = Replay(
            start=(start + 9.5 * NANOS) / 1e9, end=(start + 30.5 * NANOS) / 1e9, speed=1.0, then="live"
        )
        sub = await client.subscribe(series(numeric_channel(rid, "p")), window=60, replay=replay)
        first = await sub.next(timeout=60)
        assert first.values == [float(i) for i in range(10)]  # the window ending at the replay's start
        ended = await sub.wait_for(lambda v: sub.replay_ended is not None, timeout=60)
        assert sub.replay_ended == "live"
        assert ended.values == [float(i) for i in range(20)]  # the window ending at the replay's end
        # then live: a FullResult of the last 60 s (nothing there yet), and appends of new writes
        async with Writer(server.base_url, rid) as writer:
            writer.add("p", time.time_ns(), 99.0)
        live = await sub.wait_for(lambda v: v.values == [99.0], timeout=60)
        assert live.values == [99.0]
