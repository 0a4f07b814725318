"""Workload 3c's server arm: live long windows through a real server, the hour arm beside the 60 s arm.

    python -m bench.live_windows [--smoke] [--out FILE.md] [--work DIR] [NAME=VALUE ...]

`per_kind` live computations of each kind of workload 3c (bench/live_eval.py's: `x + y`,
`derivative(x)` and a 10 s rolling mean of x, each bucketed to `buckets`, and the ranges where
x > 0.5) over the last `long_s` (the hour arm), beside the same computations over the last `short_s`
(the 60 s arm), all live at once in one server while bench/feed.py writes x and y at `rate_hz`
through HTTP. The history the hour arm's windows start with (the window, the rolling lookback and
the held history's step, decision 0049) is written into the log before the server starts, by the
log's own writer, `block_points` per block. Each computation is made distinct by an unused variable,
so none is shared. Reported per arm over `measure_s` (after `warmup_s`): updates (frames) per
subscription per second, write-to-frame latency (bench/stats.py: from the feed's 200 to the first
frame showing the write; the ranges computations show no point, so they count in the updates only),
and the server's CPU and micro-batch callback over the same window.

The issue's targets: the hour arm's updates per subscription per second within 20% of the 60 s
arm's, and its write-to-frame p99 <= 300 ms. Its evaluation CPU per micro-batch (<= 1.5x the 60 s
arm's) is bench/live_eval.py's, measured in process.

`measure(plan, work, env)` returns the figures: bench/run.py runs it as a workload of `make bench`
(`--only live_windows`); `render(results)` is its markdown section."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import live_through
from bench.children import Child, write_spec
from bench.computations import BenchSubscription, _channel, _subscription
from bench.feed import TABLE, channel_name
from bench.live_eval import node_of
from bench.prefilled_server import batch_means, feed_child, round_robin, server_on, write_blocks
from bench.procstat import TreeSampler, cpu_seconds
from bench.serverproc import ServerProcess
from bench.standalone import run_alone
from bench.stats import delivery_latency, summarize

Json = Any
NANOS = 1_000_000_000
RID = "ri.bench.live-windows"
KINDS = ("sum", "derivative", "rolling_mean", "threshold_ranges")
UPDATES_RATIO_MIN = 0.8  # the hour arm's updates per subscription per second / the 60 s arm's
P99_MS = 300


@dataclass(frozen=True)
class LiveWindowsPlan:
    rate_hz: int = 1000
    long_s: int = 3600
    short_s: int = 60
    per_kind: int = 5
    buckets: int = 1000
    block_points: int = 1000  # points per block of the history written before the server starts
    request_ms: float = 10
    connections: int = 4
    settle_s: float = 15  # after the server is ready, before subscribing (Spark's first batches)
    warmup_s: float = 15
    measure_s: float = 60
    drain_s: float = 5  # after the window, for the frames of its last writes
    deflate: bool = True


FULL = LiveWindowsPlan()
SMOKE = LiveWindowsPlan(long_s=300, per_kind=1, settle_s=5, warmup_s=4, measure_s=8, drain_s=3)


def log(msg: str) -> None:
    print(f"[live-windows {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def history_s(plan: LiveWindowsPlan) -> int:
    """What the hour arm's back-fill reads: the window, the rolling mean's 10 s, and up to one step
    of held history (1/16 of the window, decision 0049), with a margin."""
    return plan.long_s + plan.long_s // 16 + 10 + 30


def write_history(plan: LiveWindowsPlan, data_dir: Path) -> Json:
    """x (ch00) and y (ch01) on the feed's tick grid and values, over `history_s` ending now."""
    from compute.storage.contract import SeriesWrite
    from compute.storage.series import SeriesKey, SeriesKind

    table = np.asarray(TABLE, np.float64)
    tick = NANOS // plan.rate_hz
    total = history_s(plan) * plan.rate_hz
    first_k = time.time_ns() // tick - total
    keys = [SeriesKey.of(RID, channel_name(c), {}) for c in (0, 1)]

    def requests() -> Iterator[list[SeriesWrite]]:
        for k in range(first_k, first_k + total, plan.block_points):
            ks = np.arange(k, min(k + plan.block_points, first_k + total), dtype=np.int64)
            yield [
                SeriesWrite(key, SeriesKind.NUMERIC, ks * tick, table[(ks + 97 * c) % 1000] + c)
                for c, key in enumerate(keys)
            ]

    seconds = write_blocks(data_dir, requests(), in_flight=512)
    log(f"wrote {2 * total:,} points in {seconds:.0f}s")
    return {"points": 2 * total, "seconds": round(seconds, 1)}


def subscriptions(plan: LiveWindowsPlan) -> list[tuple[str, str, BenchSubscription]]:
    """(arm, kind, subscription): every kind `per_kind` times per arm, each one distinct."""
    variables = {"x": _channel(RID, 0), "y": _channel(RID, 1)}
    out = []
    n = 0
    for arm, window_s in (("long", plan.long_s), ("short", plan.short_s)):
        for kind in KINDS:
            for _ in range(plan.per_kind):
                distinct = {**variables, f"unused{n}": {"type": "double", "double": n}}
                body = _subscription(node_of(kind, plan.buckets), distinct, window_s * NANOS)
                measure = "none" if kind == "threshold_ranges" else "buckets"
                out.append((arm, kind, BenchSubscription(kind, body, measure)))
                n += 1
    return out


def _arm_figures(
    arm: str,
    subs: list[tuple[str, str, BenchSubscription]],
    frames: np.ndarray,
    feed: np.ndarray,
    window: list[int],
) -> Json:
    f0, f1 = window
    mine = [i for i, (a, _, _) in enumerate(subs) if a == arm]
    measured = [i for i in mine if subs[i][2].measure != "none"]
    in_window = frames[(frames[:, 1] >= f0) & (frames[:, 1] <= f1)]
    seconds = (f1 - f0) / NANOS
    counts = {i: int((in_window[:, 0] == i).sum()) for i in mine}
    by_kind: dict[str, float] = {}
    for kind in KINDS:
        ids = [i for i in mine if subs[i][1] == kind]
        by_kind[kind] = round(sum(counts[i] for i in ids) / max(1, len(ids)) / seconds, 2)
    lat = delivery_latency(feed, frames, f0, f1, subs=measured)
    return {
        "subscriptions": len(mine),
        "updates_per_sub_per_s": round(sum(counts.values()) / max(1, len(mine)) / seconds, 2),
        "updates_per_sub_per_s_by_kind": by_kind,
        "latency": summarize(lat.latencies_ms).as_dict(),
        "missing": lat.missing,
        "worst_sub_p99_ms": round(max(lat.p99_by_sub.values()), 1) if lat.p99_by_sub else None,
        "full_results_in_window": int(in_window[np.isin(in_window[:, 0], mine), 3].sum()),
    }


def _run(plan: LiveWindowsPlan, work: Path, server: ServerProcess, sampler: TreeSampler) -> Json:
    children: list[Child] = []
    try:
        feed = feed_child(
            server, RID, 2, plan.rate_hz, plan.request_ms, 24 * 3600, work / "feed.npy", work / "feed.log"
        )
        children.append(feed)
        subs = subscriptions(plan)
        # round-robin over the connections (both arms on each); the clients number the
        # subscriptions connection by connection, so the frames' numbers are put back in `subs` order
        conns = round_robin([{"sub": s.body, "measure": s.measure} for _, _, s in subs], plan.connections)
        numbered = [i for c in range(plan.connections) for i in range(c, len(subs), plan.connections)]
        spec = {
            "url": server.ws_url,
            "deflate": plan.deflate,
            "out": str(work / "frames.npy"),
            "connections": conns,
        }
        subscribed = time.monotonic()
        clients = Child(
            "bench.clients", ["stream", write_spec(work / "clients.json", spec)], work / "clients.log"
        )
        children.append(clients)
        ready = clients.read(timeout=900)
        ready_s = time.monotonic() - subscribed
        log(f"{ready['ready']} of {ready['subscriptions']} subscriptions ready in {ready_s:.1f}s")
        if ready["ready"] != ready["subscriptions"]:
            raise RuntimeError(f"subscriptions not ready: {ready}")
        time.sleep(plan.warmup_s)
        f_from, mark, before = time.time_ns(), sampler.mark(), server.metrics()
        main_from = cpu_seconds(server.pid)
        time.sleep(plan.measure_s)
        f_to, usage, after = time.time_ns(), sampler.usage_since(mark), server.metrics()
        main_cores = (cpu_seconds(server.pid) - main_from) / ((f_to - f_from) / NANOS)
        time.sleep(plan.drain_s)
        done = clients.finish(timeout=120)
        feed_done = feed.finish(timeout=60)
        children.clear()
        frames = np.load(work / "frames.npy")
        frames[:, 0] = np.asarray(numbered, np.int64)[frames[:, 0]]
        feed_rows = np.load(work / "feed.npy")
        window = [f_from, f_to]
        long, short = (_arm_figures(arm, subs, frames, feed_rows, window) for arm in ("long", "short"))
        s_rate = short["updates_per_sub_per_s"]
        return {
            "window": window,
            "subscribe_to_ready_s": round(ready_s, 1),
            "long": long,
            "short": short,
            "updates_ratio_long_to_short": round(long["updates_per_sub_per_s"] / s_rate, 3)
            if s_rate
            else None,
            "usage": usage.as_dict(),
            "server_main_cpu_cores": round(main_cores, 2),
            "batch": batch_means(before, after, plan.measure_s),
            "clients": done,
            "feed": feed_done,
        }
    finally:
        for c in children:
            c.kill()


def measure(
    plan: LiveWindowsPlan,
    work: Path,
    env: dict[str, str] | None = None,
    keep_log: bool = False,
    through: live_through.LiveThroughPlan | None = None,
) -> Json:
    """Write the history, start a server on it, run both arms at once; the figures as a dict. Then,
    given `through`, the arm whose history is written through a running server (bench/live_through.py)."""
    work.mkdir(parents=True, exist_ok=True)
    results: Json = {"plan": dataclasses.asdict(plan)}
    results["history"] = write_history(plan, work / "server-data")
    log("starting the server")
    with server_on(work, env, plan.settle_s, keep_log) as (server, sampler):
        results.update(_run(plan, work, server, sampler))
    if through is not None:
        results["through"] = live_through.measure(through, work / "through", env)
    return results


def render(r: Json) -> str:
    p = r["plan"]
    lines = [
        "### 3c, live long windows: through a server (bench/live_windows.py)",
        "",
        f"{p['per_kind']} each of `x + y`, `derivative(x)`, a 10 s rolling mean of x "
        f"({p['buckets']:,} buckets) and the ranges where x > 0.5, over the last {p['long_s']:,} s "
        f"beside the same over the last {p['short_s']} s, all live at once while x and y are written "
        f"at {p['rate_hz']:,} Hz "
        f"({r['history']['points']:,} points of history written before the server started; "
        f"subscribe to every FullResult {r['subscribe_to_ready_s']} s). Over {p['measure_s']:g} s:",
        "",
        "| arm | subscriptions | updates / subscription / s | by kind | write -> frame p50 / p99 / max ms | "
        "worst subscription's p99 | writes never shown |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, window_s in (("long", p["long_s"]), ("short", p["short_s"])):
        a = r[name]
        lat = a["latency"]
        kinds = ", ".join(f"{k} {v}" for k, v in a["updates_per_sub_per_s_by_kind"].items())
        lines.append(
            f"| {window_s:,} s | {a['subscriptions']} | {a['updates_per_sub_per_s']} | {kinds} | "
            f"{lat['p50_ms']} / {lat['p99_ms']} / {lat['max_ms']} | {a['worst_sub_p99_ms']} | "
            f"{a['missing']} |"
        )
    u, b = r["usage"], r["batch"]
    lines += [
        "",
        f"Server over the window: {u['cpu_cores']} cores (its Python process {r['server_main_cpu_cores']}), "
        f"{b['per_s']} micro-batches/s, mean callback {b['callback_ms']} ms. Clients: "
        f"{r['clients'].get('cpu_cores')} cores. Wall-clock latencies depend on what else the machine "
        "runs; the updates ratio compares arms measured together.",
    ]
    if r.get("through"):
        lines += ["", live_through.render(r["through"]).rstrip("\n")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    run_alone(
        __doc__,
        (FULL, SMOKE),
        measure,
        render,
        "Sparkwire: live long windows through a server",
        ("data/live-windows.md", "data/bench-smoke/live-windows.md"),
        log,
        argv,
    )


if __name__ == "__main__":
    main()
