"""Long windows: how long a new bucketed computation over hours of history takes to its FullResult,
and what a live one holds.

    python -m bench.long_windows [--smoke] [--out BENCHMARKS.long-windows.md] [--work DIR] [NAME=VALUE ...]

The history is written before the server starts, into its data directory, by the log's own writer
(`DurableLog.submit`, one request per `block_points` of every channel: one block per channel per
request, as the ingest endpoints store them), so the write phase is not HTTP's; everything measured
after it goes through a real server (bench/serverproc.py) and a WebSocket client:
- single: a new computation (an unused extra variable makes each one distinct, so each is back-filled
  from the log) bucketing `hour_s` of one `hour_rate_hz` channel into `buckets` buckets, subscribe ->
  FullResult, `repeats` times on different channels, median and spread;
- concurrent: `concurrent` such computations on different channels subscribed in one message, the time
  until the last FullResult; they stay live for the memory figures: the server process's RSS before
  and after, per computation, and what each holds (`GET /computations`: points in its windows,
  buckets in its result);
- day: the same over `day_s` of one `day_rate_hz` channel, `day_repeats` times.
- written through the server: what a user meets when a test stand's backlog arrives just before a
  chart opens. `through_repeats` times each, a fresh channel's hour (`hour_s` x `hour_rate_hz`) and
  day (`day_s` x `day_rate_hz`) written through the running server's `POST /storage/writer/v1` in
  JSON requests of `through_request_points` points, one after another, and the same bucketed
  computation subscribed the moment the last write is acknowledged (nothing left to settle or
  merge): subscribe -> FullResult, and how long the writes took.
The server's CPU (its process tree, and its Python process alone) is measured over each phase's
subscribe -> FullResult waits, pauses excluded.

`measure(plan, work)` returns the figures as a dict: bench/run.py runs it as a workload of `make
bench` (`--only long_windows`, workload 3b); `render(results)` is its markdown section."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.clients import BenchClient
from bench.computations import bucketed
from bench.machine import describe_machine
from bench.prefilled_server import server_on, write_blocks
from bench.procstat import TreeSampler, cpu_seconds, tree
from bench.serverproc import ServerProcess
from bench.standalone import run_alone

Json = Any
NANOS = 1_000_000_000
RID = "ri.bench.long"


@dataclass(frozen=True)
class LongWindowsPlan:
    hour_channels: int = 20  # one per concurrent computation
    hour_rate_hz: int = 1000
    hour_s: int = 3600
    day_rate_hz: int = 100
    day_s: int = 86_400
    # Points per block (one series' points of one request): bench/feed.py's 10 ms requests at 1 kHz.
    block_points: int = 10
    # History written before the window (the window ends at the server's clock, so the newest part
    # of it misses the minutes the writing and the server's start took: the report says what it held).
    margin_s: int = 0
    buckets: int = 1000
    repeats: int = 7
    concurrent: int = 20
    day_repeats: int = 5
    settle_s: float = 20  # after the server is ready, before measuring (Spark's first batches)
    merge_timeout_s: float = 600  # waiting for the server to merge the history's small blocks
    deflate: bool = True
    # history written through the running server just before subscribing (0: not measured)
    through_repeats: int = 3
    through_request_points: int = 100_000


FULL = LongWindowsPlan()
SMOKE = LongWindowsPlan(
    hour_channels=3,
    hour_s=120,
    day_s=600,
    repeats=2,
    concurrent=3,
    day_repeats=1,
    settle_s=5,
    through_repeats=1,
    through_request_points=20_000,
)


def log(msg: str) -> None:
    print(f"[long-windows {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def hour_channel(i: int) -> int:
    return i


DAY_CHANNEL = 1000  # bench.feed.channel_name(1000): "ch1000"
THROUGH_HOUR_CHANNEL = 2000  # the channels written through the server: 2000 + repeat, 3000 + repeat
THROUGH_DAY_CHANNEL = 3000


# -- writing the history ----------------------------------------------------------------------------
def write_history(plan: LongWindowsPlan, data_dir: Path) -> Json:
    """Fill the server's log before it starts: `hour_channels` x `hour_rate_hz` over hour_s + margin,
    and one `day_rate_hz` channel over day_s + margin, ending now."""
    from bench.feed import channel_name
    from compute.storage.contract import SeriesWrite
    from compute.storage.series import SeriesKey, SeriesKind

    rng = np.random.default_rng(7)
    end = time.time_ns()
    counts = {"blocks": 0, "points": 0}

    def requests() -> Iterator[list[SeriesWrite]]:
        for channels, rate, span_s in (
            ([hour_channel(i) for i in range(plan.hour_channels)], plan.hour_rate_hz, plan.hour_s),
            ([DAY_CHANNEL], plan.day_rate_hz, plan.day_s),
        ):
            keys = [SeriesKey.of(RID, channel_name(c), {}) for c in channels]
            tick = NANOS // rate
            total = (span_s + plan.margin_s) * rate
            first = (end // tick - total) * tick
            step = plan.block_points
            for k in range(0, total, step):
                m = min(step, total - k)
                ts = first + np.arange(k, k + m, dtype=np.int64) * tick
                yield [SeriesWrite(key, SeriesKind.NUMERIC, ts, rng.standard_normal(m)) for key in keys]
            counts["blocks"] += len(keys) * -(-total // step)
            counts["points"] += len(keys) * total

    seconds = write_blocks(data_dir, requests(), in_flight=4096)
    blocks, points = counts["blocks"], counts["points"]
    log(f"wrote {points:,} points in {blocks:,} blocks in {seconds:.0f}s")
    return {"points": points, "blocks": blocks, "seconds": round(seconds, 1)}


def wait_merged(data_dir: Path, timeout: float) -> Json:
    """Wait until the server has merged the history's small blocks (docs/decisions/0032), if its log
    merges at all: how long it took after the server was ready, and how many rows the log then holds."""
    import sqlite3

    from compute.storage.sqlite.writer import COMPACT_MIN_BLOCKS

    conn = sqlite3.connect(f"file:{data_dir / 'log.db'}?mode=ro", uri=True)
    started = time.monotonic()
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
            return {"merges": False}
        written = int(conn.execute("SELECT MAX(seq) FROM blocks").fetchone()[0] or 0)
        while time.monotonic() - started < timeout:
            row = conn.execute("SELECT value FROM meta WHERE key = 'compacted_through'").fetchone()
            # a step waits for COMPACT_MIN_BLOCKS past the last one: the newest few stay as written
            if row and int(row[0]) > written - COMPACT_MIN_BLOCKS:
                break
            time.sleep(1)
        rows = int(conn.execute("SELECT COUNT(*) FROM blocks").fetchone()[0])
    finally:
        conn.close()
    seconds = round(time.monotonic() - started, 1)
    log(f"merged: {rows:,} rows after {seconds}s")
    return {"merges": True, "seconds": seconds, "rows": rows}


# -- measuring ----------------------------------------------------------------------------------------
def _fresh(sub: Json) -> Json:
    """The same computation made distinct (an unused variable), so it is back-filled from the log."""
    body = json.loads(json.dumps(sub))
    body["computeRequest"]["context"]["variables"][f"unused{uuid.uuid4().hex}"] = {
        "type": "double",
        "double": 1,
    }
    return body


class Busy:
    """CPU seconds of the server's process tree and of its Python process over some intervals."""

    def __init__(self, pid: int) -> None:
        self.pid, self.wall, self.tree_s, self.main_s = pid, 0.0, 0.0, 0.0

    def _now(self) -> tuple[float, float, float]:
        return time.monotonic(), sum(cpu_seconds(p) for p in tree(self.pid)), cpu_seconds(self.pid)

    async def subscribe_all(self, client: BenchClient, subs: list[Json]) -> tuple[list[str], list[float]]:
        t0, tree0, main0 = self._now()
        try:
            return await _subscribe_all(client, subs)
        finally:
            t1, tree1, main1 = self._now()
            self.wall += t1 - t0
            self.tree_s += tree1 - tree0
            self.main_s += main1 - main0

    def as_dict(self) -> Json:
        wall = max(self.wall, 1e-9)
        return {
            "seconds": round(self.wall, 2),
            "cpu_cores": round(self.tree_s / wall, 2),
            "main_cpu_cores": round(self.main_s / wall, 2),
        }


async def _subscribe_all(client: BenchClient, subs: list[Json]) -> tuple[list[str], list[float]]:
    """Subscribe to all in one message; (their ids, ms from the send to each FullResult)."""
    ids = [str(uuid.uuid4()) for _ in subs]
    futures = [client.expect(i) for i in ids]
    started = time.time_ns()
    await client.subscribe(dict(zip(ids, subs, strict=True)))
    got = await asyncio.wait_for(asyncio.gather(*futures), 600)
    if min(got) < 0:
        raise RuntimeError(f"subscription refused: {list(client.creations.values())[:3]}")
    return ids, [(g - started) / 1e6 for g in got]


async def write_through(
    server: ServerProcess, channel: int, rate_hz: int, span_s: int, request_points: int
) -> float:
    """`span_s` of one channel at `rate_hz`, ending now, written through the server's JSON endpoint in
    requests of `request_points` points, one after another; the seconds until the last 200."""
    from bench.feed import body
    from bench.httpclient import HttpConnection

    tick = NANOS // rate_hz
    total = span_s * rate_hz
    first_k = time.time_ns() // tick - total
    conn = HttpConnection("127.0.0.1", server.port)
    started = time.perf_counter()
    try:
        for k in range(first_k, first_k + total, request_points):
            last_k = min(k + request_points, first_k + total) - 1
            status, reply = await conn.post("/storage/writer/v1", body(RID, 1, k, last_k, tick, channel))
            if status != 200:
                raise RuntimeError(f"write through the server answered {status}: {reply[:300]!r}")
    finally:
        conn.close()
    return time.perf_counter() - started


async def _through_server(
    plan: LongWindowsPlan, server: ServerProcess, client: BenchClient, busy: Busy
) -> Json:
    """Each repeat: a fresh channel's history written through the server, then subscribed at once."""
    out: Json = {"hour_ms": [], "hour_write_s": [], "day_ms": [], "day_write_s": []}
    for r in range(plan.through_repeats):
        for name, channel, rate, span_s in (
            ("hour", THROUGH_HOUR_CHANNEL + r, plan.hour_rate_hz, plan.hour_s),
            ("day", THROUGH_DAY_CHANNEL + r, plan.day_rate_hz, plan.day_s),
        ):
            wrote = await write_through(server, channel, rate, span_s, plan.through_request_points)
            sub = bucketed(RID, channel, plan.buckets, span_s).body
            ids, [ms] = await busy.subscribe_all(client, [sub])
            await client.unsubscribe(ids)
            out[f"{name}_ms"].append(ms)
            out[f"{name}_write_s"].append(round(wrote, 1))
            await asyncio.sleep(1)
    hour, day = [round(x) for x in out["hour_ms"]], [round(x) for x in out["day_ms"]]
    log(f"through the server: hour {hour} ms, day {day} ms")
    return out


def _directory(server: ServerProcess) -> list[Json]:
    with urllib.request.urlopen(f"{server.base_url}/computations", timeout=30) as r:
        return list(json.loads(r.read()))


async def _measure(plan: LongWindowsPlan, server: ServerProcess, sampler: TreeSampler) -> Json:
    hour_window, day_window = plan.hour_s, plan.day_s
    hour = [bucketed(RID, hour_channel(i), plan.buckets, hour_window).body for i in range(plan.hour_channels)]
    day = bucketed(RID, DAY_CHANNEL, plan.buckets, day_window).body
    client = await BenchClient.connect(server.ws_url, plan.deflate)
    out: Json = {}
    try:
        # warm-up: the first back-fill pays imports and first-call costs
        ids, _ = await _subscribe_all(client, [_fresh(hour[-1])])
        await client.unsubscribe(ids)

        busy = {phase: Busy(server.pid) for phase in ("single", "concurrent", "day", "through")}
        single = []
        for r in range(plan.repeats):
            ids, [ms] = await busy["single"].subscribe_all(client, [_fresh(hour[r % len(hour)])])
            await client.unsubscribe(ids)
            single.append(ms)
            await asyncio.sleep(0.5)
        out["single_ms"] = single
        log(f"single: {[round(x) for x in single]} ms")

        await asyncio.sleep(2)
        rss_before = sampler.rss_main_now()
        subs = [_fresh(hour[i % len(hour)]) for i in range(plan.concurrent)]
        ids, each = await busy["concurrent"].subscribe_all(client, subs)
        out["concurrent_ms"] = each
        log(f"concurrent: last FullResult at {max(each):.0f} ms")
        await asyncio.sleep(3)
        rss_after = sampler.rss_main_now()
        ours = [e for e in _directory(server) if e.get("subscribers")] or _directory(server)
        held = [e.get("pointsHeld") or e.get("points_held") or {} for e in ours]
        out["memory"] = {
            "computations": plan.concurrent,
            "rss_before_mb": round(rss_before / 2**20, 1),
            "rss_after_mb": round(rss_after / 2**20, 1),
            "mb_per_computation": round((rss_after - rss_before) / plan.concurrent / 2**20, 1),
            "window_points": sorted(h.get("window") or 0 for h in held)[-plan.concurrent :],
            "output_buckets": sorted(h.get("output") or 0 for h in held)[-plan.concurrent :],
        }
        await client.unsubscribe(ids)
        await asyncio.sleep(2)

        days = []
        for _ in range(plan.day_repeats):
            ids, [ms] = await busy["day"].subscribe_all(client, [_fresh(day)])
            await client.unsubscribe(ids)
            days.append(ms)
            await asyncio.sleep(1)
        out["day_ms"] = days
        log(f"day: {[round(x) for x in days]} ms")
        if plan.through_repeats:
            out["through"] = await _through_server(plan, server, client, busy["through"])
        out["cpu"] = {phase: b.as_dict() for phase, b in busy.items()}
    finally:
        await client.close()
    return out


def measure(
    plan: LongWindowsPlan, work: Path, env: dict[str, str] | None = None, keep_log: bool = True
) -> Json:
    """Write the history, start a server on it, measure; the figures as a dict. Without `keep_log`
    the server's data directory (the history: gigabytes at the full plan) is removed afterwards."""
    results: Json = {"plan": dataclasses.asdict(plan), "machine": describe_machine()}
    results["history"] = write_history(plan, work / "server-data")
    log("starting the server")
    with server_on(work, env, plan.settle_s, keep_log) as (server, sampler):
        results["merged"] = wait_merged(work / "server-data", plan.merge_timeout_s)
        results.update(asyncio.run(_measure(plan, server, sampler)))
    return results


# -- the report ----------------------------------------------------------------------------------------
def _stats(ms: list[float]) -> str:
    if not ms:
        return "-"
    return f"{statistics.median(ms):,.0f} ms (min {min(ms):,.0f}, max {max(ms):,.0f}, n={len(ms)})"


def render(r: Json, title: str = "## Long windows (`python -m bench.long_windows`)") -> str:
    p = r["plan"]
    h = r["history"]
    m = r.get("memory", {})
    hour_points = p["hour_s"] * p["hour_rate_hz"]
    day_points = p["day_s"] * p["day_rate_hz"]
    single, conc, day = r.get("single_ms", []), r.get("concurrent_ms", []), r.get("day_ms", [])
    lines = [
        title,
        "",
        f"History written before the server started: {h['points']:,} points in {h['blocks']:,} blocks "
        f"({p['block_points']} points per block) in {h['seconds']} s. Each computation is new (an "
        f"unused variable makes it distinct) and buckets its window into {p['buckets']:,} buckets; "
        "time is from sending the subscribe to receiving the FullResult.",
        "",
        "| what | wanted | measured | verdict |",
        "|---|---|---|---|",
    ]

    def row(what: str, wanted: float, got: float | None, text: str) -> None:
        verdict = "-" if got is None else ("met" if got <= wanted else "NOT met")
        lines.append(f"| {what} | <= {wanted:,.0f} ms | {text} | {verdict} |")

    row(
        f"new computation, {p['hour_s']:,} s x {p['hour_rate_hz']:,} Hz ({hour_points:,} points), p50",
        250,
        statistics.median(single) if single else None,
        _stats(single),
    )
    row(
        f"{p['concurrent']} at once on different channels, last FullResult",
        3000,
        max(conc) if conc else None,
        f"{max(conc):,.0f} ms (first {min(conc):,.0f})" if conc else "-",
    )
    row(
        f"new computation, {p['day_s']:,} s x {p['day_rate_hz']:,} Hz ({day_points:,} points), p50",
        1000,
        statistics.median(day) if day else None,
        _stats(day),
    )
    through = r.get("through") or {}
    for name, wanted, size in (
        ("hour", 250, f"{hour_points:,} points"),
        ("day", 1000, f"{day_points:,} points"),
    ):
        got = through.get(f"{name}_ms") or []
        written = through.get(f"{name}_write_s") or []
        row(
            f"new computation, {size} written through the server just before "
            f"({p['through_request_points']:,}-point JSON writes, {_seconds(written)}), p50",
            wanted,
            statistics.median(got) if got else None,
            _stats(got),
        )
    merged = r.get("merged") or {}
    if merged.get("merges"):
        lines += [
            "",
            f"The server merged the history's small blocks (decision 0032) within {merged['seconds']} s "
            f"of the measurement's start (after a {p['settle_s']} s settle): {merged['rows']:,} rows left.",
        ]
    cpu = r.get("cpu") or {}
    if cpu:
        parts = [
            f"{what} {c['cpu_cores']:.2f} cores (its Python process {c['main_cpu_cores']:.2f}) over "
            f"{c['seconds']:g} s"
            for what, c in (
                ("one at a time", cpu.get("single")),
                (f"{p['concurrent']} at once", cpu.get("concurrent")),
                ("the day", cpu.get("day")),
                ("written through the server", cpu.get("through") if r.get("through") else None),
            )
            if c
        ]
        lines += ["", "Server CPU while waiting for the FullResults: " + "; ".join(parts) + "."]
    if m:
        lines += [
            "",
            f"Memory, {m['computations']} live computations of the hour: server process RSS "
            f"{m['rss_before_mb']:,} MB -> {m['rss_after_mb']:,} MB, **{m['mb_per_computation']} MB per "
            f"computation**; each holds {_span(m['window_points'])} points in its window and sends "
            f"{_span(m['output_buckets'])} buckets.",
        ]
    return "\n".join(lines) + "\n"


def _seconds(values: list[float]) -> str:
    if not values:
        return "not measured"
    return (
        f"written in {min(values):g}-{max(values):g} s" if len(values) > 1 else f"written in {values[0]:g} s"
    )


def _span(values: list[int]) -> str:
    if not values:
        return "?"
    lo, hi = min(values), max(values)
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


def main(argv: list[str] | None = None) -> None:
    run_alone(
        __doc__,
        (FULL, SMOKE),
        measure,
        render,
        "Sparkwire: long windows",
        ("BENCHMARKS.long-windows.md", "data/bench-smoke/long-windows.md"),
        log,
        argv,
    )


if __name__ == "__main__":
    main()
