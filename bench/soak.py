"""`make soak`: a server left running under a realistic load, sampled every 10 s, to show that its
memory, descriptors, threads, log size and latency stay flat. Writes SOAK.md and SOAK.json.

The load, all on 127.0.0.1 and stopping by itself after `duration_s`:
- the feed (bench/feed.py): `channels` x `rate_hz` points/s over HTTP;
- a crowd (a child process, `python -m bench.soak crowd`): `connections` WebSockets, each with a few
  subscriptions over the feed's channels; every second some connections unsubscribe and subscribe
  again (churn), every 10 s some close and reconnect, and one connection never reads (a slow client
  the server must close with 4008; it then reconnects and stalls again);
- a probe: one point per `probe_ms` on its own channel, and one subscriber to it; a probe's latency is
  from its write's 200 to the first frame that shows it (end-to-end, like bench/stats.py);
- retention short enough (`retention_s`) that the log prunes all along;
- with `hostile=1` (the default), hostile clients (bench/hostile.py, a child process): the attacks
  of docs/reliability-and-security.md in turn, one every `hostile_every_s`, each checked for its
  answer; their counts (ran, unexpected) are in the report.

Targets (the issue's): RSS and open descriptors flat, growth < 5% from the first `window_s` after
warm-up to the last; p99 of the last `window_s` within 20% of the first. Thread count and log size
are reported with their slopes too.

Run: python -m bench.soak [duration_s=1800] [warmup_s=180] [window_s=300] [NAME=VALUE ...]
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import random
import socket
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import websockets

from bench.children import Child, write_spec
from bench.clients import BenchClient
from bench.computations import bucketed, included_through, ranges, raw
from bench.feed import FeedSpec
from bench.httpclient import HttpConnection
from bench.plan import with_overrides
from bench.procstat import rss_bytes, tree
from bench.serverproc import ROOT, ServerProcess, start_server

Json = Any
NANOS = 1_000_000_000
PROBE_CHANNEL = "soak.probe"


@dataclass
class SoakPlan:
    duration_s: float = 1800.0
    warmup_s: float = 180.0
    window_s: float = 300.0  # the "first" and "last" windows compared
    sample_s: float = 10.0
    channels: int = 10
    rate_hz: int = 1000  # per channel: 10,000 points/s in all
    connections: int = 200
    subs_per_connection: int = 2
    churn_per_s: int = 5  # connections that unsubscribe and subscribe again each second
    reconnects_per_10s: int = 5
    probe_ms: int = 100
    retention_s: int = 120  # short, so pruning runs all along
    hostile: int = 1  # 1: hostile clients (bench/hostile.py) mixed into the load, one attack at a time
    hostile_every_s: float = 2.0

    @classmethod
    def parse(cls, args: list[str]) -> SoakPlan:
        return with_overrides(cls(), args)


# -- the crowd: churning subscribers, reconnects and one slow reader ----------------------------------
def _crowd_subscriptions(rid: str, channels: int, i: int, per_connection: int) -> dict[str, Json]:
    subs: dict[str, Json] = {}
    for j in range(per_connection):
        c = (i + j) % channels
        kind = (i + j) % 3
        s = bucketed(rid, c, 100, 60) if kind == 0 else ranges(rid, c, c) if kind == 1 else raw(rid, c, 2000)
        body = {**s.body, "subscriptionOptions": {"minDelay": 500, "allowAppends": True}}
        subs[str(uuid.uuid4())] = body
    return subs


async def _drain(ws: websockets.ClientConnection) -> None:
    """Read and drop frames, answering pings: a dashboard that renders them is out of scope here."""
    with contextlib.suppress(websockets.ConnectionClosed):
        async for raw_frame in ws:
            if b'"ping"' in (raw_frame if isinstance(raw_frame, bytes) else raw_frame.encode()):
                msg = orjson.loads(raw_frame)
                if msg.get("type") == "health" and msg["health"]["type"] == "ping":
                    sent_at = msg["health"]["ping"]["sentAt"]
                    pong = {"pingOriginallySentAt": sent_at, "sentAt": _iso_now()}
                    await ws.send(orjson.dumps({"type": "pong", "pong": pong}).decode())


def _iso_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


class CrowdMember:
    def __init__(self, url: str, subs: dict[str, Json]) -> None:
        self.url, self.subs = url, subs
        self.ws: websockets.ClientConnection | None = None
        self.reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self.ws = await websockets.connect(self.url, max_size=None, ping_interval=None, open_timeout=60)
        self.reader = asyncio.create_task(_drain(self.ws))
        await self.ws.send(orjson.dumps({"type": "subscribe", "subscribe": self.subs}).decode())

    async def churn(self) -> None:
        assert self.ws is not None
        await self.ws.send(orjson.dumps({"type": "unsubscribe", "unsubscribe": list(self.subs)}).decode())
        self.subs = {str(uuid.uuid4()): body for body in self.subs.values()}
        await self.ws.send(orjson.dumps({"type": "subscribe", "subscribe": self.subs}).decode())

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.reader is not None:
            await asyncio.gather(self.reader, return_exceptions=True)


async def _slow_reader(url: str, subs: dict[str, Json], counts: dict[str, int]) -> None:
    """Subscribes, then stops reading for a minute: the server must give up on it (its pings go
    unanswered). Then it reads again to learn how it was closed, and starts over."""
    while True:
        try:
            async with websockets.connect(url, max_size=None, ping_interval=None, max_queue=1) as ws:
                # A small receive buffer, so that the server's side fills soon.
                ws.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                await ws.send(orjson.dumps({"type": "subscribe", "subscribe": subs}).decode())
                ws.transport.pause_reading()
                await asyncio.sleep(60)
                ws.transport.resume_reading()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_drain(ws), 30)
                key = f"slow_closed_{ws.close_code}"
                counts[key] = counts.get(key, 0) + 1
        except (OSError, websockets.WebSocketException):
            counts["slow_errors"] = counts.get("slow_errors", 0) + 1
        subs = {str(uuid.uuid4()): body for body in subs.values()}
        await asyncio.sleep(1)


async def crowd(spec: Json) -> None:
    url, rid = spec["url"], spec["rid"]
    rng = random.Random(7)
    members = [
        CrowdMember(url, _crowd_subscriptions(rid, spec["channels"], i, spec["subs_per_connection"]))
        for i in range(spec["connections"] - 1)
    ]
    gate = asyncio.Semaphore(32)

    async def open_one(m: CrowdMember) -> None:
        async with gate:
            await m.open()

    await asyncio.gather(*(open_one(m) for m in members))
    counts: dict[str, int] = {"churned": 0, "reconnected": 0}
    slow = asyncio.create_task(_slow_reader(url, _crowd_subscriptions(rid, spec["channels"], 0, 2), counts))
    print(json.dumps({"open": len(members) + 1}), flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), stop.set)
    tick = 0
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
        tick += 1
        for m in rng.sample(members, spec["churn_per_s"]):
            with contextlib.suppress(websockets.ConnectionClosed):
                await m.churn()
                counts["churned"] += 1
        if tick % 10 == 0:
            for m in rng.sample(members, spec["reconnects_per_10s"]):
                await m.close()
                await m.open()
                counts["reconnected"] += 1
    slow.cancel()
    await asyncio.gather(*(m.close() for m in members), return_exceptions=True)
    print(json.dumps(counts), flush=True)


# -- the probe: end-to-end latency, sampled all along --------------------------------------------------
class Probe:
    def __init__(self, server: ServerProcess, rid: str, every_ms: int) -> None:
        self.server, self.rid, self.every = server, rid, every_ms / 1000
        self.acked: dict[int, int] = {}  # point ts -> 200 received (ns)
        self.latencies: list[tuple[int, float]] = []  # (200 received ns, ms)
        self.failed = 0
        self._shown = -1

    def on_update(self, _sub: str, update: Json, recv_ns: int, _size: int) -> None:
        newest = included_through(update)
        if newest <= self._shown:
            return
        for ts in [t for t in self.acked if t <= newest]:
            acked = self.acked.pop(ts)
            self.latencies.append((acked, (recv_ns - acked) / 1e6))
        self._shown = newest

    async def run(self, stop: asyncio.Event) -> None:
        client = await BenchClient.connect(self.server.ws_url, True, on_update=self.on_update)
        series = raw(self.rid, 0, 10_000).body
        variables = series["computeRequest"]["context"]["variables"]
        variables["x"]["channel"]["dataSource"]["channel"]["literal"] = PROBE_CHANNEL
        await client.subscribe({str(uuid.uuid4()): series})
        http = HttpConnection("127.0.0.1", self.server.port)
        while not stop.is_set():
            ts = time.time_ns()
            body = {
                "dataSourceRid": self.rid,
                "batches": [
                    {
                        "channel": PROBE_CHANNEL,
                        "tags": {},
                        "points": {
                            "type": "double",
                            "double": [
                                {"timestamp": {"seconds": ts // NANOS, "nanos": ts % NANOS}, "value": 1}
                            ],
                        },
                    }
                ],
            }
            try:
                status, _ = await http.post("/storage/writer/v1", orjson.dumps(body))
            except (OSError, ConnectionError):
                status = 0
                http.close()
            if status == 200:
                self.acked[ts] = time.time_ns()
            else:
                self.failed += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.every)
        await client.close()

    def p99_between(self, t_from: int, t_to: int) -> float:
        window = [ms for acked, ms in self.latencies if t_from <= acked < t_to]
        return float(np.percentile(window, 99)) if window else float("nan")


def _stamp(ns: int) -> Json:
    return {"seconds": ns // NANOS, "nanos": ns % NANOS}


# -- sampling ----------------------------------------------------------------------------------------
def _proc_count(pid: int, what: str) -> int:
    try:
        if what == "fds":
            return len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _log_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("log.db*") if p.is_file())


@dataclass
class Sample:
    t_s: float
    rss_mb: float  # the whole tree: Python, JVM, Spark's workers
    rss_main_mb: float  # the server's Python process alone
    fds: int  # the whole tree
    threads: int  # the whole tree
    log_mb: float
    p99_ms: float  # probes acknowledged in this sample's interval


def sample(server: ServerProcess, data_dir: Path, probe: Probe, began: float, previous_ns: int) -> Sample:
    pids = tree(server.pid)
    now_ns = time.time_ns()
    return Sample(
        t_s=round(time.monotonic() - began, 1),
        rss_mb=round(sum(rss_bytes(p) for p in pids) / 2**20, 1),
        rss_main_mb=round(rss_bytes(server.pid) / 2**20, 1),
        fds=sum(_proc_count(p, "fds") for p in pids),
        threads=sum(_proc_count(p, "threads") for p in pids),
        log_mb=round(_log_bytes(data_dir) / 2**20, 2),
        p99_ms=round(probe.p99_between(previous_ns, now_ns), 1),
    )


# -- the report --------------------------------------------------------------------------------------
def slope_per_hour(samples: list[Sample], attr: str) -> float:
    t = np.array([s.t_s for s in samples]) / 3600
    y = np.array([getattr(s, attr) for s in samples], dtype=float)
    ok = np.isfinite(y)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(t[ok], y[ok], 1)[0])


def window_mean(samples: list[Sample], attr: str, t_from: float, t_to: float) -> float:
    vals = [getattr(s, attr) for s in samples if t_from <= s.t_s < t_to]
    vals = [v for v in vals if np.isfinite(v)]
    return float(np.mean(vals)) if vals else float("nan")


def verdicts(plan: SoakPlan, samples: list[Sample], probe: Probe, began_ns: int) -> list[Json]:
    first = (plan.warmup_s, plan.warmup_s + plan.window_s)
    end = samples[-1].t_s if samples else plan.duration_s
    last = (end - plan.window_s, end + 1)
    rows = []
    for attr, label in (("rss_mb", "RSS, MB"), ("fds", "open descriptors")):
        a, b = window_mean(samples, attr, *first), window_mean(samples, attr, *last)
        growth = (b - a) / a * 100 if a else float("nan")
        rows.append(
            {
                "what": label,
                "wanted": "growth < 5% after warm-up",
                "first": round(a, 1),
                "last": round(b, 1),
                "change_pct": round(growth, 1),
                "met": bool(growth < 5),
            }
        )
    p99 = [
        probe.p99_between(began_ns + int(lo * NANOS), began_ns + int(hi * NANOS)) for lo, hi in (first, last)
    ]
    change = (p99[1] - p99[0]) / p99[0] * 100 if p99[0] else float("nan")
    rows.append(
        {
            "what": "end-to-end p99, ms",
            "wanted": "last window within 20% of the first",
            "first": round(p99[0], 1),
            "last": round(p99[1], 1),
            "change_pct": round(change, 1),
            "met": bool(change <= 20),
        }
    )
    return rows


def write_report(plan: SoakPlan, samples: list[Sample], rows: list[Json], extra: Json) -> None:
    slopes = {a: slope_per_hour([s for s in samples if s.t_s >= plan.warmup_s], a) for a in _SLOPED}
    lines = [
        "# Soak run",
        "",
        f"Written by `make soak` (bench/soak.py) on {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} "
        "UTC: "
        f"{plan.duration_s / 60:.0f} minutes, warm-up {plan.warmup_s:.0f} s, windows of "
        f"{plan.window_s:.0f} s compared. Load: {plan.channels} channels x {plan.rate_hz} Hz "
        f"({plan.channels * plan.rate_hz:,} points/s), {plan.connections} connections with "
        f"{plan.subs_per_connection} subscriptions each, {plan.churn_per_s} re-subscriptions/s, "
        f"{plan.reconnects_per_10s} reconnects per 10 s, one client that never reads, a probe every "
        f"{plan.probe_ms} ms, retention {plan.retention_s} s"
        + (f", a hostile client's attack every {plan.hostile_every_s:g} s." if plan.hostile else "."),
        "",
        "| what | wanted | first window | last window | change | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        verdict = "met" if r["met"] else "MISSED"
        lines.append(
            f"| {r['what']} | {r['wanted']} | {r['first']} | {r['last']} | {r['change_pct']}% | {verdict} |"
        )
    lines += ["", "Slopes after warm-up (least squares over every sample), per hour:", ""]
    lines += [f"- {_SLOPED[a]}: {slopes[a]:+.2f}" for a in _SLOPED]
    lines += ["", "Load as run: " + json.dumps(extra), "", "## Samples (every 10th)", ""]
    lines += [
        "| t, s | RSS MB | RSS main MB | fds | threads | log MB | p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in samples[::10] + ([samples[-1]] if samples and len(samples) % 10 != 1 else []):
        lines.append(
            f"| {s.t_s} | {s.rss_mb} | {s.rss_main_mb} | {s.fds} | {s.threads} | {s.log_mb} | {s.p99_ms} |"
        )
    (ROOT / "SOAK.md").write_text("\n".join(lines) + "\n")
    (ROOT / "SOAK.json").write_text(
        json.dumps(
            {"plan": asdict(plan), "verdicts": rows, "samples": [asdict(s) for s in samples]}, indent=1
        )
    )


_SLOPED = {
    "rss_mb": "RSS (tree), MB",
    "rss_main_mb": "RSS (Python process), MB",
    "fds": "open descriptors",
    "threads": "threads",
    "log_mb": "log size, MB",
    "p99_ms": "p99 of each sample, ms",
}


async def soak(plan: SoakPlan) -> int:
    work = Path(tempfile.mkdtemp(prefix="sparkwire-soak-"))
    data_dir = work / "data"
    env = {"SPARKWIRE_RETENTION_SECONDS": str(plan.retention_s), "SPARKWIRE_LOG_LEVEL": "INFO"}
    server = start_server(data_dir, work / "server.log", env)
    rid = "ri.sparkwire.soak.dataset.main"
    print(f"server on {server.base_url}, work in {work}", flush=True)
    feed_spec = FeedSpec(
        server.port, rid, plan.channels, plan.rate_hz, 10, plan.duration_s + 60, str(work / "feed.npy")
    )
    feed = Child("bench.feed", [json.dumps(asdict(feed_spec))], work / "feed.log")
    crowd_spec = {
        "url": server.ws_url,
        "rid": rid,
        "channels": plan.channels,
        "connections": plan.connections,
        "subs_per_connection": plan.subs_per_connection,
        "churn_per_s": plan.churn_per_s,
        "reconnects_per_10s": plan.reconnects_per_10s,
    }
    crowd_child = Child(
        "bench.soak", ["crowd", write_spec(work / "crowd.json", crowd_spec)], work / "crowd.log"
    )
    crowd_child.read(timeout=300)
    hostile_child: Child | None = None
    if plan.hostile:
        hostile_spec = {
            "port": server.port,
            "url": server.ws_url,
            "rid": "ri.sparkwire.soak.dataset.hostile",
            "every_s": plan.hostile_every_s,
        }
        hostile_child = Child(
            "bench.hostile", [write_spec(work / "hostile.json", hostile_spec)], work / "hostile.log"
        )
        hostile_child.read(timeout=60)
    probe = Probe(server, rid, plan.probe_ms)
    stop = asyncio.Event()
    probing = asyncio.create_task(probe.run(stop))
    began, began_ns = time.monotonic(), time.time_ns()
    samples: list[Sample] = []
    previous_ns = began_ns
    try:
        while time.monotonic() - began < plan.duration_s:
            await asyncio.sleep(plan.sample_s)
            if server.process.poll() is not None:
                raise RuntimeError(f"the server exited with {server.process.returncode}")
            samples.append(sample(server, data_dir, probe, began, previous_ns))
            previous_ns = time.time_ns()
            s = samples[-1]
            print(
                f"t={s.t_s:6.0f}s rss={s.rss_mb}MB main={s.rss_main_mb}MB fds={s.fds} threads={s.threads} "
                f"log={s.log_mb}MB p99={s.p99_ms}ms",
                flush=True,
            )
    finally:
        stop.set()
        await asyncio.gather(probing, return_exceptions=True)
        crowd_counts = crowd_child.finish(timeout=120)
        hostile_counts = hostile_child.finish(timeout=120) if hostile_child is not None else None
        feed_summary = feed.finish(timeout=120)
        server.stop()
    rows = verdicts(plan, samples, probe, began_ns)
    extra = {
        "crowd": crowd_counts,
        "feed": {k: feed_summary[k] for k in ("requests", "failed", "points_acked")},
        "probes": {"acked": len(probe.latencies), "failed": probe.failed},
        "hostile": hostile_counts,
    }
    write_report(plan, samples, rows, extra)
    print((ROOT / "SOAK.md").read_text())
    return 0 if all(r["met"] for r in rows) else 1


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "crowd":
        arg = sys.argv[2]
        spec = json.loads(Path(arg[1:]).read_text() if arg.startswith("@") else arg)
        asyncio.run(crowd(spec))
        return
    sys.exit(asyncio.run(soak(SoakPlan.parse(sys.argv[1:]))))


if __name__ == "__main__":
    main()
