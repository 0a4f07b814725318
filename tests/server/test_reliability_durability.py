"""Nothing acknowledged is lost: writers keep posting while the server (and the JVM and workers it
started) is killed with SIGKILL five times, at random moments (during Spark's start-up too). After
the last restart every point that got a 200 is there exactly once, counted through a subscription
and in the log file, and the stream goes on from the log without replaying what was published."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.conftest import ServerProcess, start_server
from tests.hostile import connect, stored_points, unique_rid, update_for, write_body
from tests.wire import NANOS, channel_variable, new_id, ns_of, series_node, subscribe_message, subscription

KILLS = 5
WRITERS = 4
POINTS_PER_REQUEST = 5


class Writers:
    """Concurrent writers that never resend a point: a request without an answer may or may not
    have been stored, a request answered 200 must have been."""

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.base_url: str | None = None
        self.acked: list[tuple[int, float]] = []
        self.unanswered: list[tuple[int, float]] = []
        self.refused = 0
        self.stop = asyncio.Event()
        self.origin = time.time_ns() - 1200 * NANOS

    def channel(self, w: int) -> str:
        return f"w{w}"

    async def run(self, w: int) -> None:
        n = 0
        async with httpx.AsyncClient(timeout=10) as http:
            while not self.stop.is_set():
                if self.base_url is None:
                    await asyncio.sleep(0.05)
                    continue
                # unique per writer and point: timestamps 1 ms apart, offset by the writer number
                points = [
                    (self.origin + (n + i) * 1_000_000 + w, float(w * 10_000_000 + n + i))
                    for i in range(POINTS_PER_REQUEST)
                ]
                n += POINTS_PER_REQUEST
                try:
                    response = await http.post(
                        f"{self.base_url}/storage/writer/v1",
                        json=write_body(self.rid, points, self.channel(w)),
                    )
                except httpx.HTTPError:
                    self.unanswered.extend(points)
                    await asyncio.sleep(0.05)
                    continue
                if response.status_code == 200:
                    self.acked.extend(points)
                else:
                    self.refused += 1
                await asyncio.sleep(0.01)


@pytest.mark.timeout(900)  # two Spark start-ups to readiness, five to their first seconds
async def test_kill_9_five_times_loses_no_acknowledged_point(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    rng = random.Random(20251122)
    writers = Writers(unique_rid("kill9"))
    tasks = [asyncio.create_task(writers.run(w)) for w in range(WRITERS)]
    for kill in range(KILLS):
        # HTTP is up within seconds and takes writes while Spark starts in the background: most
        # kills hit that start-up, the middle one a running stream with a live subscription.
        streaming = kill == KILLS // 2
        proc = await asyncio.to_thread(
            start_server,
            data_dir,
            tmp_path / f"server{kill}.log",
            ready_path="/readyz" if streaming else "/healthz",
            own_process_group=True,
        )
        writers.base_url = proc.base_url
        if streaming:
            ws = await connect(proc.ws_url)
            sub = subscription(series_node(), {"x": channel_variable(writers.rid, "w1")}, 60)
            await ws.send(subscribe_message({new_id(): sub}))
        await asyncio.sleep(rng.uniform(1.0, 8.0))
        await asyncio.to_thread(proc.kill_all)
        writers.base_url = None
    writers.stop.set()
    await asyncio.gather(*tasks)
    assert writers.refused == 0
    assert len(writers.acked) > 100, "too few writes were acknowledged for the test to mean anything"
    print(f"\n{len(writers.acked)} points acknowledged, {len(writers.unanswered)} sent without an answer")

    server = await asyncio.to_thread(start_server, data_dir, tmp_path / "final.log")
    try:
        await check_every_acked_point_is_there_once(server, writers)
        await check_the_stream_resumes_without_replay(server, writers)
    finally:
        server.stop()
    stored = stored_points(data_dir, writers.rid)
    assert all(stored[p] == 1 for p in writers.acked), "the log lost or doubled an acknowledged point"
    assert all(count == 1 for count in stored.values()), "the log holds a point twice"
    assert set(stored) <= set(writers.acked) | set(writers.unanswered), "the log holds points never sent"


async def check_every_acked_point_is_there_once(server: ServerProcess, writers: Writers) -> None:
    ws = await connect(server.ws_url)
    for w in range(WRITERS):
        sub_id = new_id()
        node = series_node(buckets=1_000_000)  # raw points, whatever their number
        sub = subscription(node, {"x": channel_variable(writers.rid, writers.channel(w))}, 3600)
        await ws.send(subscribe_message({sub_id: sub}))
        update = await update_for(ws, sub_id)
        body = update["full"]["result"]["numeric"]
        seen = Counter((ns_of(t), v) for t, v in zip(body["timestamps"], body["values"], strict=True))
        mine = [p for p in writers.acked if p[1] // 10_000_000 == w]
        assert mine
        assert all(seen[p] == 1 for p in mine), f"writer {w}: an acknowledged point is missing or doubled"
        sent = {p for p in writers.acked + writers.unanswered if p[1] // 10_000_000 == w}
        assert all(count == 1 for count in seen.values())
        assert set(seen) <= sent, f"writer {w}: points that were never sent"
    await ws.close()


async def check_the_stream_resumes_without_replay(server: ServerProcess, writers: Writers) -> None:
    """A live subscription gets nothing until something new is written, then only that."""
    ws = await connect(server.ws_url)
    sub_id = new_id()
    sub = subscription(series_node(buckets=1_000_000), {"x": channel_variable(writers.rid, "w0")}, 3600)
    await ws.send(subscribe_message({sub_id: sub}))
    assert (await update_for(ws, sub_id))["type"] == "full"
    try:
        extra = await update_for(ws, sub_id, timeout=5)
    except TimeoutError:
        extra = None
    assert extra is None, f"an update without new data: {str(extra)[:300]}"
    fresh = [(time.time_ns(), -1.0)]
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        response = await http.post("/storage/writer/v1", json=write_body(writers.rid, fresh, "w0"))
        assert response.status_code == 200
    writers.acked += fresh
    append = await update_for(ws, sub_id)
    assert append["type"] == "append"
    body = append["append"]["result"]["numeric"]
    assert [(ns_of(t), v) for t, v in zip(body["timestamps"], body["values"], strict=True)] == fresh
    await ws.close()
