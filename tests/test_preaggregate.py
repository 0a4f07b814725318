"""Pre-aggregation against a real server with real Spark: a summarized high-rate channel whose series
reaches the driver as buckets (proved by /metrics) gives exactly what the raw path gives. After each
phase (back-fill, in-order points, late points and rewrites of timestamps inside aggregated buckets,
a timestamp twice in one batch, refused late points, a rate drop to raw output and back), the
FullResult merged with every AppendResult, a fresh FullResult of the same live computation and the
independent reference (tests/reference.py) agree.

The bucket cut by the window's start depends on the server's clock: the fresh FullResult's first
bucket is checked against the reference cut where its count says (the newest `count` points of that
bucket), and the merged view (which keeps the edge bucket as last announced) from the next bucket on."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from tests import node_json as n
from tests.client_view import ResultView, first_difference
from tests.conftest import ServerProcess, start_server
from tests.keepalive import keep_alive
from tests.reference import Store, evaluate
from tests.wire import NANOS, Client, new_id, ns_of, subscription, write_points

MS = 1_000_000
WINDOW_S = 20.0
WINDOW_NS = int(WINDOW_S * NANOS)
BUCKETS = 200  # width 100 ms; 1 kHz gives 100 points per bucket
WIDTH = 100 * MS
REL = 1e-9
SENTINEL: list[Sentinel] = []


@pytest.fixture(scope="module")
def agg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("preaggregate")
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_PREAGGREGATE_MIN_POINTS": "2"})
    try:
        asyncio.run(warm_up(proc))
        yield proc
    finally:
        proc.stop()


async def warm_up(server: ServerProcess) -> None:
    """One pre-aggregated back-fill first: the JVM's first shuffle job takes many seconds, longer than
    the test's window."""
    rid = f"ri.test.preagg.warm.{time.time_ns()}"
    now = time.time_ns()
    await write_points(server.base_url, rid, "w", [(now - i * MS, float(i)) for i in range(100)])
    client = await Client.connect(server.ws_url)
    try:
        sid = new_id()
        node = n.series(n.num("w"), buckets=1)
        await client.subscribe({sid: subscription(node, {"w": n.channel(rid, "w")}, WINDOW_S)})
        assert (await client.creation(sid, timeout=180))["type"] == "success"
        await client.update(sid, timeout=180)
    finally:
        await client.close()


def metric(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


async def scrape(server: ServerProcess) -> str:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        return (await http.get("/metrics")).text


class Feed:
    """One channel: what was written (the reference's store) and the newest timestamp."""

    def __init__(self, server: ServerProcess, http: httpx.AsyncClient, rid: str, channel: str) -> None:
        self.server, self.http, self.rid, self.channel = server, http, rid, channel
        self.store = Store()
        self.newest = 0
        self.values: dict[int, float] = {}

    async def write(self, points: list[tuple[int, float]], refused: bool = False) -> None:
        await write_points(self.server.base_url, self.rid, self.channel, points, client=self.http)
        if not refused:  # refused points are in the log, not in the live result
            self.store.write(self.rid, self.channel, points)
            for t, v in points:
                self.values[t] = v
        self.newest = max([self.newest, *(t for t, _ in points)])

    def ramp(self, start: int, count: int, step: int = MS) -> list[tuple[int, float]]:
        return [(start + i * step, float((start // MS + i) % 997) * 0.25 - 40.0) for i in range(count)]


async def live(feeds: list[Feed], seconds: float, per_tick: int, tick_s: float = 0.1) -> None:
    """Points at per_tick / tick_s Hz, stamped by the wall clock, in order."""
    end = time.monotonic() + seconds
    step = int(tick_s * NANOS) // per_tick
    while time.monotonic() < end:
        now = time.time_ns() // MS * MS
        await asyncio.gather(
            *(f.write(f.ramp(max(f.newest + step, now - int(tick_s * NANOS)), per_tick, step)) for f in feeds)
        )
        await asyncio.sleep(tick_s)


class Sub:
    def __init__(self, feed: Feed, lateness_s: float | None) -> None:
        self.feed = feed
        self.context = {"x": n.channel(feed.rid, feed.channel)}
        self.node = n.series(n.num("x"), buckets=BUCKETS)
        self.request = subscription(self.node, self.context, WINDOW_S, lateness_s=lateness_s)
        self.id = new_id()
        self.view = ResultView(WINDOW_NS)

    def drain(self, client: Client) -> None:
        q = client.updates.setdefault(self.id, asyncio.Queue())
        while not q.empty():
            self.view.apply(q.get_nowait())


async def fresh_full(server: ServerProcess, sub: Sub) -> ResultView:
    client = await Client.connect(server.ws_url)
    try:
        sid = new_id()
        await client.subscribe({sid: sub.request})
        assert (await client.creation(sid, timeout=120))["type"] == "success"
        view = ResultView(WINDOW_NS)
        view.apply(await client.update(sid, timeout=120))
        return view
    finally:
        await client.close()


class Sentinel:
    """A point written after everything else: once its update arrives, the stream has processed
    every earlier point (micro-batches follow the log's order), on a loaded machine too."""

    def __init__(self, feed: Feed) -> None:
        self.sub = Sub(feed, lateness_s=None)
        self.sub.node = n.series(n.num("x"), buckets=10_000)
        self.sub.request = subscription(self.sub.node, self.sub.context, WINDOW_S)

    async def start(self, client: Client) -> None:
        await client.subscribe({self.sub.id: self.sub.request})
        assert (await client.creation(self.sub.id, timeout=120))["type"] == "success"

    async def settle(self, client: Client) -> None:
        t = max(time.time_ns(), self.sub.feed.newest + MS)
        await self.sub.feed.write([(t, 0.0)])
        while True:
            update = await client.update(self.sub.id, timeout=120)
            body = update.get("full", {}).get("result") or update["append"]["result"]
            if any(ns_of(s) == t for s in body["numeric"]["timestamps"]):
                break
        await asyncio.sleep(0.5)  # frames of that batch for other subscriptions reach the client


async def check(server: ServerProcess, client: Client, sub: Sub, expect_kind: str) -> None:
    await SENTINEL[0].settle(client)
    sub.drain(client)
    fresh = await fresh_full(server, sub)
    ((fkind, fentries),) = fresh.snapshot().values()
    ((mkind, mentries),) = sub.view.snapshot().values()
    assert fkind == mkind == expect_kind, (fkind, mkind)
    if fkind == "bucketedNumeric":
        edge_end, edge = fentries[0]
        in_edge = sorted(t for t in sub.feed.values if edge_end - WIDTH <= t < edge_end)
        window_start = in_edge[-edge["count"]]  # the newest `count` points of the edge bucket
        tail_from = edge_end
    else:
        window_start = fentries[0][0]
        tail_from = window_start
    assert window_start >= sub.feed.newest - WINDOW_NS - 30 * NANOS  # a plausible server clock
    ((rkind, reference),) = evaluate(sub.node, sub.context, sub.feed.store, WINDOW_NS, window_start).values()
    assert rkind == fkind
    diff = first_difference(fentries, reference, REL)
    if diff is not None:
        bad = [(f, r) for f, r in zip(fentries, reference, strict=False) if first_difference(f, r, REL)]
        raise AssertionError(f"fresh FullResult differs from the reference at {diff}: {bad[:3]}")
    merged_tail = [e for e in mentries if e[0] > tail_from or (fkind == "numeric" and e[0] >= tail_from)]
    ref_tail = [e for e in reference if e[0] > tail_from or (fkind == "numeric" and e[0] >= tail_from)]
    diff = first_difference(merged_tail, ref_tail, REL)
    assert diff is None, f"merged Full + Appends differ from the reference at {diff}"


@pytest.mark.timeout(600)
async def test_preaggregated_results_equal_the_raw_reference(agg_server: ServerProcess) -> None:
    server = agg_server
    rid = f"ri.test.preagg.{time.time_ns()}"
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        x, y = Feed(server, http, rid, "x"), Feed(server, http, rid, "y")
        # history: 5 s at 1 kHz, back-filled pre-aggregated
        start = (time.time_ns() - 5 * NANOS) // WIDTH * WIDTH
        for feed in (x, y):
            for i in range(50):
                await feed.write(feed.ramp(start + i * WIDTH, 100))
        sentinel = Sentinel(Feed(server, http, rid, "s"))
        SENTINEL[:] = [sentinel]
        a = Sub(x, lateness_s=WINDOW_S)  # accepts every point inside the window
        c = Sub(y, lateness_s=None)  # Nominal's default: 100 ms behind the newest point
        client = await Client.connect(server.ws_url)
        keepalive = keep_alive(client)
        try:
            await sentinel.start(client)
            await client.subscribe({a.id: a.request, c.id: c.request})
            for sub in (a, c):
                assert (await client.creation(sub.id, timeout=120))["type"] == "success"
                sub.view.apply(await client.update(sub.id, timeout=120))
            await check(server, client, a, "bucketedNumeric")
            await check(server, client, c, "bucketedNumeric")

            # in-order points at 1 kHz: the series reach the driver as buckets
            before = await scrape(server)
            await live([x, y], 2.0, 100)
            deadline = time.monotonic() + 60
            while True:  # the stream may still be behind the writes
                after = await scrape(server)
                grown = metric(after, "sparkwire_preaggregated_points_total") - metric(
                    before, "sparkwire_preaggregated_points_total"
                )
                if grown >= 1000 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            assert grown >= 1000, f"micro-batches pre-aggregated {grown} points"
            await check(server, client, a, "bucketedNumeric")
            await check(server, client, c, "bucketedNumeric")

            # x: rewrites of timestamps inside aggregated buckets and late new points, then more live
            old = sorted(t for t in x.values if t >= x.newest - 3 * NANOS)
            rewrites = [(t, 1000.0 + i) for i, t in enumerate(old[::97][:20])]
            late_new = [(t + MS // 2, -500.0 - i) for i, t in enumerate(old[::151][:15])]
            await x.write(rewrites + late_new)
            # a timestamp twice in one request, and two requests rewriting each other's points
            t0 = x.newest + MS
            await x.write([(t0, 1.0), (t0 + MS, 2.0), (t0, 3.0), (t0 + 2 * MS, 4.0)])
            await x.write([(t0 + 3 * MS, 5.0), (t0 + 4 * MS, 6.0)])
            await x.write([(t0 + 3 * MS, 7.0), (t0 + 5 * MS, 8.0)])
            await live([x], 1.0, 100)
            await check(server, client, a, "bucketedNumeric")

            # y: a point refused as late (a rewrite of an existing timestamp) then an accepted rewrite
            # in the same bucket: recomputing that bucket from the log must leave the refused one out
            late_before = metric(await scrape(server), "sparkwire_points_rejected_total", '{reason="late"}')
            n_ms = y.newest // MS
            target = (n_ms // 100 + 1) * 100 + 30  # newest ends 30 ms into a bucket
            await y.write(y.ramp(y.newest + MS, target - n_ms))
            bucket = (y.newest // WIDTH - 1) * WIDTH
            refused = [(bucket + 20 * MS, 1e6), (bucket + 25 * MS + 1, 2e6)]
            await y.write(refused, refused=True)
            await y.write([(bucket + 50 * MS, 7.0), (y.newest + MS, 8.0)])
            await live([y], 1.0, 100)
            await check(server, client, c, "bucketedNumeric")
            late_after = metric(await scrape(server), "sparkwire_points_rejected_total", '{reason="late"}')
            assert late_after - late_before == len(refused)

            # the rate drops: the window soon holds B points or fewer and the output is raw again
            await live([x, y], WINDOW_S + 1.5, 1, tick_s=0.25)
            await check(server, client, a, "numeric")
            await check(server, client, c, "numeric")
            # and rises again: buckets again
            await live([x, y], 2.0, 100)
            await check(server, client, a, "bucketedNumeric")
            await check(server, client, c, "bucketedNumeric")
        finally:
            keepalive.cancel()
            await client.close()


def test_no_computation_failed(agg_server: ServerProcess) -> None:
    text = agg_server.log_text()
    assert "computation failed" not in text and "ComputeFailed" not in text, text[-3000:]
