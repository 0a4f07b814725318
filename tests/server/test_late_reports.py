"""Late points, counted and told (docs/extensions.md), against the real server: a writer sends
points older than the subscription's allowed lateness on purpose; they stay in the log (a fresh
computation back-fills them) but not in the live result, a subscription that asked
(`sparkwire.lateReports`) is told how many since it started and the newest timestamp, at most once
a second, one that did not ask is told nothing, and /metrics counts them per data source."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from typing import Any

import httpx
import websockets

from tests.conftest import ServerProcess
from tests.server.test_end_to_end import fresh_full, unique_rid
from tests.wire import (
    NANOS,
    channel_variable,
    decode_strictly,
    full_entries,
    new_id,
    ns_of,
    series_node,
    subscription,
    write_points,
)

WINDOW_S = 3600.0
LATENESS_S = 5.0


class ReportClient:
    """A WebSocket client that files subscription updates, creations and lateReports; `nominal`:
    every frame must decode as a strict Nominal client decodes it (one that never asked)."""

    def __init__(self, ws: websockets.ClientConnection, nominal: bool) -> None:
        self.ws = ws
        self.nominal = nominal
        self.kinds: list[str] = []
        self.updates: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self.creations: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self.reports: dict[str, asyncio.Queue[tuple[float, dict[str, Any]]]] = {}
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, server: ServerProcess, nominal: bool = False) -> ReportClient:
        return cls(await websockets.connect(server.ws_url, max_size=None), nominal)

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for text in self.ws:
                assert isinstance(text, str)
                if self.nominal:
                    decode_strictly(text)
                frame = json.loads(text)
                kind = frame["type"]
                self.kinds.append(kind)
                if kind == "lateReport":
                    body = frame["lateReport"]
                    self._queue(self.reports, body["subscriptionId"]).put_nowait((time.monotonic(), body))
                elif kind == "subscriptionUpdate":
                    body = frame["subscriptionUpdate"]
                    self._queue(self.updates, body["subscriptionId"]).put_nowait(body["update"])
                elif kind == "subscriptionCreation":
                    body = frame["subscriptionCreation"]
                    self._queue(self.creations, body["subscriptionId"]).put_nowait(body["creation"])

    @staticmethod
    def _queue(queues: dict[str, asyncio.Queue[Any]], key: str) -> asyncio.Queue[Any]:
        return queues.setdefault(key, asyncio.Queue())

    async def subscribe(self, sub: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Subscribe (the raw JSON: a `sparkwire` object is not in nominal-api's model) and return
        the id and the first (full) result."""
        sub_id = new_id()
        await self.ws.send(json.dumps({"type": "subscribe", "subscribe": {sub_id: sub}}))
        creation = await asyncio.wait_for(self._queue(self.creations, sub_id).get(), 60)
        assert creation["type"] == "success", creation
        return sub_id, await self.update(sub_id)

    async def update(self, sub_id: str, timeout: float = 60) -> dict[str, Any]:
        return await asyncio.wait_for(self._queue(self.updates, sub_id).get(), timeout)

    async def report(self, sub_id: str, timeout: float = 30) -> tuple[float, dict[str, Any]]:
        return await asyncio.wait_for(self._queue(self.reports, sub_id).get(), timeout)

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()


def late_subscription(rid: str, asks: bool) -> dict[str, Any]:
    sub = subscription(
        series_node(), {"x": channel_variable(rid, "p")}, WINDOW_S, allow_appends=False, lateness_s=LATENESS_S
    )
    if asks:
        sub["sparkwire"] = {"lateReports": True}
    return sub


async def until_holds(client: ReportClient, sub_id: str, timestamps: set[int]) -> list[tuple[int, Any]]:
    """The live result's points, from the first (full) update holding all of `timestamps`."""
    while True:
        update = await client.update(sub_id)
        assert update["type"] == "full", update
        _, entries = full_entries(update)
        if timestamps <= {t for t, _ in entries}:
            return entries


def late_counter(base_url: str, rid: str) -> float | None:
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    pattern = rf'^sparkwire_late_points_dropped_total\{{data_source="{re.escape(rid)}"\}} (\S+)$'
    match = re.search(pattern, text, re.MULTILINE)
    return None if match is None else float(match.group(1))


async def test_late_points_are_counted_told_to_who_asked_and_kept_in_the_log(server: ServerProcess) -> None:
    rid = unique_rid("late")
    asking = await ReportClient.connect(server)
    silent = await ReportClient.connect(server, nominal=True)  # a Nominal client: never asks
    try:
        asks, _ = await asking.subscribe(late_subscription(rid, asks=True))
        quiet, _ = await silent.subscribe(late_subscription(rid, asks=False))  # the same computation

        on_time = [(time.time_ns() - i * 1_000_000, float(i)) for i in range(3)]
        await write_points(server.base_url, rid, "p", on_time)
        await until_holds(asking, asks, {t for t, _ in on_time})

        # Late on purpose: two minutes old, inside the window, far past the 5 s allowed lateness.
        old = time.time_ns() - 120 * NANOS
        late = [(old + i * 1_000_000, 100.0 + i) for i in range(4)]
        await write_points(server.base_url, rid, "p", late)
        _, report = await asking.report(asks)
        assert report == {
            "subscriptionId": asks,
            "droppedPoints": 4,
            "newestDroppedTimestamp": {"seconds": late[-1][0] // NANOS, "nanos": late[-1][0] % NANOS},
        }

        # Left out of the live result, kept in the log: a fresh computation back-fills them.
        marker = (time.time_ns(), 7.0)
        await write_points(server.base_url, rid, "p", [marker])
        live = await until_holds(asking, asks, {marker[0]})
        assert sorted(live) == sorted([*on_time, marker])
        _, backfilled = full_entries(await fresh_full(server, series_node(), rid, "p"))
        assert sorted(backfilled) == sorted([*on_time, *late, marker])

        # A subscription made now counts from now; the first one keeps counting from its start.
        later, _ = await asking.subscribe(late_subscription(rid, asks=True))
        more = [(time.time_ns() - 90 * NANOS + i * 1_000_000, 1.0) for i in range(3)]
        await write_points(server.base_url, rid, "p", more)
        _, first = await asking.report(asks)
        _, second = await asking.report(later)
        assert first["droppedPoints"] == 7
        assert second["droppedPoints"] == 3
        newest_more = {"seconds": more[-1][0] // NANOS, "nanos": more[-1][0] % NANOS}
        assert first["newestDroppedTimestamp"] == newest_more  # 90 s old is newer than 120 s old
        assert second["newestDroppedTimestamp"] == newest_more

        # The per data source counter: every point dropped, once (one computation reads the rid).
        deadline = time.monotonic() + 30
        while late_counter(server.base_url, rid) != 7.0:
            assert time.monotonic() < deadline, f"/metrics says {late_counter(server.base_url, rid)}"
            await asyncio.sleep(0.2)

        # The one that did not ask was told nothing, though its computation dropped the same points.
        assert "lateReport" not in silent.kinds
        assert quiet not in silent.reports
    finally:
        await asking.close()
        await silent.close()


async def test_late_reports_come_at_most_once_a_second(server: ServerProcess) -> None:
    rid = unique_rid("late-rate")
    client = await ReportClient.connect(server)
    try:
        sub_id, _ = await client.subscribe(late_subscription(rid, asks=True))
        first = time.time_ns()
        await write_points(server.base_url, rid, "p", [(first, 1.0)])
        await until_holds(client, sub_id, {first})

        # A late point every 100 ms for 3 s: 30 drops, which reports may only tell once a second.
        written: list[int] = []
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            for i in range(30):
                t = time.time_ns() - 60 * NANOS + i
                await write_points(server.base_url, rid, "p", [(t, float(i))], client=http)
                written.append(t)
                await asyncio.sleep(0.1)
        reports: list[tuple[float, dict[str, Any]]] = []
        while not reports or reports[-1][1]["droppedPoints"] < len(written):
            reports.append(await client.report(sub_id))
        counts = [r["droppedPoints"] for _, r in reports]
        assert counts == sorted(set(counts)), counts  # each report says something new
        assert counts[-1] == len(written)
        assert ns_of(reports[-1][1]["newestDroppedTimestamp"]) == written[-1]
        gaps = [b - a for (a, _), (b, _) in itertools.pairwise(reports)]
        assert len(reports) >= 3, counts  # 3 s of drops: several reports, each coalescing several
        assert all(gap >= 0.9 for gap in gaps), gaps  # sent a second apart (0.1 s for the network)
        await asyncio.sleep(1.5)  # no drop since: nothing more to tell
        assert client.reports[sub_id].empty()
    finally:
        await client.close()
