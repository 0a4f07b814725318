"""A bystander: a client of another tenant that writes one point every 250 ms and follows it live,
measuring its own latency while an attack runs (issue 44: no client's work may stall another's).

    async with Bystander(server.base_url, server.ws_url, token=tok, rid=rid) as b:
        ... the attack ...
    b.assert_unharmed()

Each point's value is its sequence number, so an update that carries it tells when it arrived:
the update latency of a point is its arrival minus the moment its write was sent. A point written
but never seen live counts as an update latency of infinity (so a stall cannot hide as a gap).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.wire import Client, channel_variable, series_node, subscription, ts

PERIOD_S = 0.25
WRITE_BUDGET_S = 2.0
UPDATE_P90_BUDGET_S = 2.0
LATENESS_S = 30.0


def rss_bytes(pid: int) -> int:
    """Resident memory of one process (VmRSS), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _values(update: dict[str, Any]) -> list[float]:
    """Every numeric value an update carries (a FullResult or an AppendResult of raw points)."""
    if update["type"] == "full":
        result = update["full"]["result"]
    elif update["type"] == "append":
        result = update["append"]["result"]
    else:
        return []
    kind = result["type"]
    if kind != "numeric":
        return []
    return [float(v) for v in result[kind]["values"]]


@dataclass
class Bystander:
    base_url: str
    ws_url: str
    token: str | None = None
    rid: str = field(default_factory=lambda: f"ri.test.bystander.{uuid.uuid4().hex[:12]}")
    channel: str = "heartbeat"
    write_latencies: list[float] = field(default_factory=list)
    write_failures: list[str] = field(default_factory=list)
    sent_at: dict[int, float] = field(default_factory=dict)
    seen_at: dict[int, float] = field(default_factory=dict)

    async def __aenter__(self) -> Bystander:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=60)
        kwargs: dict[str, Any] = {"additional_headers": headers} if headers else {}
        self._client = await Client.connect(self.ws_url, **kwargs)
        await self._write(0)  # the channel exists before the subscription reads it
        # Its writes are concurrent, so under load one can be stored after the next: with the default
        # lateness (100 ms behind the series' newest point) it was dropped as late and counted as
        # never seen. The bystander measures latency, so it allows what any reordering can take.
        variables = {"x": channel_variable(self.rid, self.channel)}
        sub = subscription(series_node(), variables, 60, lateness_s=LATENESS_S)
        await self._client.subscribe({"bystander": sub})
        creation = await self._client.creation("bystander", 60)
        assert creation["type"] == "success", creation
        self._stop = asyncio.Event()
        self._writes: set[asyncio.Task[None]] = set()
        self._tasks = [asyncio.create_task(self._write_loop()), asyncio.create_task(self._read_loop())]
        # Measure from a live subscription: wait until the first point is seen.
        deadline = time.monotonic() + 60
        while 0 not in self.seen_at:
            assert time.monotonic() < deadline, "the bystander's first point never arrived"
            await asyncio.sleep(0.05)
        self.write_latencies.clear()
        self._measured_from = 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        # One more second so the last points written during the attack can arrive.
        await asyncio.sleep(1.0 + PERIOD_S)
        self._stop.set()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._last_sent = max(self.sent_at, default=0)
        await self._client.close()
        await self._http.aclose()

    async def _write(self, seq: int) -> None:
        now = time.time_ns()
        body = {
            "dataSourceRid": self.rid,
            "batches": [
                {
                    "channel": self.channel,
                    "tags": {},
                    "points": {"type": "double", "double": [{"timestamp": ts(now), "value": float(seq)}]},
                }
            ],
        }
        started = time.monotonic()
        self.sent_at[seq] = started
        try:
            r = await self._http.post("/storage/writer/v1", json=body)
        except httpx.HTTPError as exc:
            self.write_failures.append(f"point {seq}: {exc!r}")
            return
        self.write_latencies.append(time.monotonic() - started)
        if r.status_code != 200:
            self.write_failures.append(f"point {seq}: {r.status_code} {r.text[:200]}")

    async def _write_loop(self) -> None:
        seq = 1
        next_at = time.monotonic()
        while not self._stop.is_set():
            # Writes are not awaited one after another: a stalled write must not hide later ones.
            self._writes.add(task := asyncio.create_task(self._write(seq)))
            task.add_done_callback(self._writes.discard)
            seq += 1
            next_at += PERIOD_S
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def _read_loop(self) -> None:
        while True:
            update = await self._client.update("bystander", timeout=3600)
            arrived = time.monotonic()
            for value in _values(update):
                self.seen_at.setdefault(int(value), arrived)

    def update_latencies(self) -> list[float]:
        """Per point written after the start (but the last second's), its write-to-frame latency;
        infinity for a point never seen live."""
        last = getattr(self, "_last_sent", max(self.sent_at, default=0))
        cutoff = time.monotonic() if last == 0 else self.sent_at[last] - 1.0
        out = []
        for seq, sent in self.sent_at.items():
            if seq < self._measured_from or sent > cutoff:
                continue
            seen = self.seen_at.get(seq)
            out.append(math.inf if seen is None else max(0.0, seen - sent))
        return sorted(out)

    def summary(self) -> str:
        lat = self.update_latencies()
        writes = sorted(self.write_latencies)
        worst = lat[-1] if lat else math.nan
        return (
            f"bystander: {len(writes)} writes (max {writes[-1] if writes else math.nan:.3f} s, "
            f"{len(self.write_failures)} failed {self.write_failures[:3]}), {len(lat)} points followed "
            f"(p50 {_pct(lat, 0.5):.3f} s, p90 {_pct(lat, 0.9):.3f} s, max {worst:.3f} s)"
        )

    def assert_unharmed(
        self, write_budget_s: float = WRITE_BUDGET_S, update_p90_budget_s: float = UPDATE_P90_BUDGET_S
    ) -> None:
        """Every write answered 200 within `write_budget_s`, the live updates' p90 under its budget."""
        lat = self.update_latencies()
        assert lat, "the bystander followed no point: the attack ran for less than a period"
        assert not self.write_failures, self.summary()
        assert max(self.write_latencies) < write_budget_s, self.summary()
        assert _pct(lat, 0.9) < update_p90_budget_s, self.summary()


def _pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    return values[min(len(values) - 1, int(q * len(values)))]
