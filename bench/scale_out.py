"""The scale-out workload: one `--role compute` process (Spark, every computation) and 1, 2, then 3
`--role edge` processes (WebSockets, ingest, fan-out; no JVM) on a throwaway Kafka broker (the point
log) and redis-server (between the tiers),
then one `--role all` process on the same log, all on 127.0.0.1. Writes BENCHMARKS.scale-out.md and
BENCHMARKS.scale-out.json.

    python -m bench.scale_out [--smoke] [--out BENCHMARKS.scale-out.md] [--work DIR] [NAME=VALUE ...]

What runs (docs/decisions/0030-compute-tier-and-edges.md has the design it measures):
- redis-server on a free 127.0.0.1 port, no persistence; the compute process, started once and
  kept running through every arm (its JVM stays warm; between arms its computations are released,
  because the stopped edges delete their wants, and it waits until it runs none);
- per arm, fresh edges (stopped after the arm), the feed (bench/feed.py, workload 1's: `channels` x
  `rate_hz` points/s, one request every `request_ms`), which writes to the *first edge only* in
  every arm, so ingest costs the same in each arm and the other edges only fan out; and
  `client_processes` bench/clients.py stream processes holding `connections` WebSockets with
  `subscriptions` subscriptions over `computations` distinct computations (bench/computations.py's
  mix of raw, bucketed, arithmetic and ranges), `subscriptions / connections` per connection. The
  connections go to the edges in contiguous blocks, so each edge gets an equal share and every edge
  mirrors every computation: identical subscriptions on different edges are one computation on the
  compute tier;
- the arms: 1 edge at the full subscriptions (the reference), 1 edge at a third of them (same
  computations, a third of the subscribers), 2 edges, 3 edges, and (full plan) the reference again
  at the end: the compute tier's CPU is compared with the mean of the two reference arms, which
  bracket the others in time, so a drift of the machine's speed over the run cancels out;
- in each arm, after `warmup_s`, a steady window of `window_s`: CPU (% of one core) and peak RSS of
  every process tree (the compute process with its JVM and Spark's Python workers, each edge,
  redis-server, the feed, the clients, and the rest of the machine from /proc/stat), end-to-end
  write -> frame latency (bench/stats.py's method) and frames received;
- before the arms, a fresh edge's idle memory: its RSS once ready (no connection yet), then the
  growth per WebSocket connection with `idle_connections` idle ones (bench/clients.py's idle crowd),
  measured after a small warm-up crowd has come and gone (first-use allocations are not per
  connection).

- a throwaway single-node Kafka broker (tests/kafka_broker.py): the edges write points to Kafka and
  the compute process reads them with Spark's own Kafka source; redis-server carries results, wants
  and heartbeats between the tiers;
- last (`all_in_one_arm`), the compute process is stopped and one `--role all` process on the same
  log serves the same feed and subscriptions alone: the reference for the two tiers' latency.

Targets: the compute tier's CPU flat as subscribers (a third -> all) and edges (1 -> 2 -> 3) are
added: its CPU per micro-batch within +-`flat_tolerance` of the reference (its CPU per second is
reported beside it; on a busy 2-core machine the compute tier runs micro-batches back to back and
its CPU per second is the share of the cores it got, see the report); an edge's baseline RSS
< 150 MB; <= 25 KB per idle connection; the two tiers' write -> frame p99 (the 1-edge arms at the
full subscriptions) within `two_tier_p99_ratio` of the all-in-one arm's. Every process started
here is stopped at the end, also on failure, SIGTERM or Ctrl-C (`--work DIR` keeps the logs and raw records).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench import computations as comps
from bench import harness_main, procstat
from bench.children import Child, write_spec
from bench.machine import pyspark_line
from bench.procstat import cpu_seconds, rss_bytes
from bench.serverproc import ROOT, ServerProcess, start_server
from bench.stats import delivery_latency, summarize
from tests.infra import RedisServer, start_redis
from tests.kafka_broker import KafkaBroker, start_kafka

Json = Any
RID = "ri.bench.feed"
KAFKA_TOPIC = "bench-scale-out"  # the point topic
_TICKS = os.sysconf("SC_CLK_TCK")
MB = 2**20


def log(msg: str) -> None:
    print(f"[scale-out {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ScalePlan:
    channels: int = 10
    rate_hz: int = 1000  # per channel: workload 1's feed, 10,000 points/s
    request_ms: float = 10
    trigger_ms: int = 100
    deflate: bool = True  # clients offer permessage-deflate, as browsers do
    computations: int = 30
    subscriptions: int = 300
    connections: int = 60
    client_processes: int = 6  # the same in every arm (6 splits evenly over 1, 2 and 3 edges)
    edges: tuple[int, ...] = (1, 2, 3)
    reduced_arm: bool = True  # 1 edge at a third of the subscriptions and connections
    control_arm: bool = True  # the 1-edge reference arm again at the end
    # the first arm's (and the all-in-one's: a new JVM): the compute tier's JVM compiles the batch
    # path and the broker warms up; with 30 s the first arm's p99 was 1.32x and 1.75x all-in-one's
    # against 0.82x and 0.83x for the same arm at the end, with 90 s 0.90x (decision 0096)
    first_warmup_s: float = 90
    warmup_s: float = 15
    window_s: float = 60
    catch_up_s: float = 60
    idle_connections: int = 1000
    idle_warm_connections: int = 20
    idle_settle_s: float = 5
    retention_s: int = 600  # the topic's retention.ms when the compute process creates it
    all_in_one_arm: bool = True  # last: one `--role all` process on the same log, the same load
    # targets
    flat_tolerance: float = 0.15
    edge_rss_target_mb: float = 150
    idle_kb_target: float = 25
    p99_target_ms: float = 500  # bench's workload 2 (fan-out) target, for reference
    two_tier_p99_ratio: float = 1.3  # issue 45: the two tiers' p99 against all-in-one's


FULL = ScalePlan()
SMOKE = ScalePlan(
    channels=2,
    rate_hz=200,
    computations=6,
    subscriptions=30,
    connections=6,
    control_arm=False,
    first_warmup_s=5,
    warmup_s=3,
    window_s=15,
    catch_up_s=20,
    idle_connections=100,
    idle_warm_connections=5,
    idle_settle_s=2,
)


@dataclass(frozen=True)
class Arm:
    name: str
    edges: int
    subscriptions: int
    connections: int
    reference: bool = False  # one of the 1-edge full arms the others are compared with
    all_in_one: bool = False  # one `--role all` process instead of the compute process and edges


def arms_of(plan: ScalePlan) -> list[Arm]:
    full = [
        Arm(f"{n}-edge{'s' if n > 1 else ''}", n, plan.subscriptions, plan.connections, reference=n == 1)
        for n in plan.edges
    ]
    out = full[:1]
    if plan.reduced_arm:
        out.append(Arm("1-edge, a third", 1, plan.subscriptions // 3, max(1, plan.connections // 3)))
    out += full[1:]
    if plan.control_arm and full and full[0].reference:
        out.append(dataclasses.replace(full[0], name="1-edge again"))
    if plan.all_in_one_arm:
        out.append(Arm("all-in-one", 1, plan.subscriptions, plan.connections, all_in_one=True))
    return out


# -- process sampling ---------------------------------------------------------------------------------
def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / _TICKS


def _category(pid: int, root: int) -> str:
    """Which part of the compute process tree a process is."""
    if pid == root:
        return "python"
    argv = _cmdline(pid)
    if argv and argv[0].endswith("java"):
        return "jvm"
    if any("pyspark" in a for a in argv):
        return "spark workers"
    return "other"


@dataclass
class _Group:
    root: int
    tree: bool
    categorize: bool
    cpu_by_pid: dict[int, float] = field(default_factory=dict)
    category_of: dict[int, str] = field(default_factory=dict)


@dataclass
class Usage:
    seconds: float
    cpu_pct: float  # % of one core
    rss_max_mb: float
    rss_root_max_mb: float
    categories_pct: dict[str, float]

    def as_dict(self) -> Json:
        return {
            "seconds": round(self.seconds, 1),
            "cpu_pct": round(self.cpu_pct, 1),
            "rss_max_mb": round(self.rss_max_mb, 1),
            "rss_root_max_mb": round(self.rss_root_max_mb, 1),
            **({"categories_pct": self.categories_pct} if self.categories_pct else {}),
        }


class Sampler:
    """One thread samples every tracked process tree twice a second with one scan of /proc, and
    the whole machine's busy time, so a window's CPU can be attributed: ours, by process, and the
    rest of the machine. A process that exits keeps the CPU it was last seen with."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self._groups: dict[str, _Group] = {}
        self._lock = threading.Lock()
        # (time, machine busy s, {group: (cpu s, rss, root rss, {category: cpu s})})
        self._samples: list[tuple[float, float, dict[str, tuple[float, int, int, dict[str, float]]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scale-out-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def track(self, name: str, pid: int, tree: bool = True, categorize: bool = False) -> None:
        with self._lock:
            self._groups[name] = _Group(pid, tree, categorize)

    def forget(self, name: str) -> None:
        with self._lock:
            self._groups.pop(name, None)

    def _sample(self) -> None:
        with self._lock:
            groups = dict(self._groups)
        kids = procstat.children_map() if any(g.tree for g in groups.values()) else {}
        at, busy = time.monotonic(), _machine_busy_s()
        out: dict[str, tuple[float, int, int, dict[str, float]]] = {}
        for name, g in groups.items():
            pids = procstat.tree(g.root, kids) if g.tree else [g.root]
            for p in pids:
                g.cpu_by_pid[p] = max(g.cpu_by_pid.get(p, 0.0), cpu_seconds(p))
                if g.categorize and p not in g.category_of:
                    g.category_of[p] = _category(p, g.root)
            cats: dict[str, float] = {}
            if g.categorize:
                for p, c in g.cpu_by_pid.items():
                    cat = g.category_of.get(p, "other")
                    cats[cat] = cats.get(cat, 0.0) + c
            rss = sum(rss_bytes(p) for p in pids)
            out[name] = (sum(g.cpu_by_pid.values()), rss, rss_bytes(g.root), cats)
        self._samples.append((at, busy, out))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def now(self) -> float:
        self._sample()
        return self._samples[-1][0]

    def usage(self, name: str, since: float, until: float) -> Usage | None:
        window = [s for s in list(self._samples) if since <= s[0] <= until and name in s[2]]
        if len(window) < 2:
            return None
        (t0, _, g0), (t1, _, g1) = window[0], window[-1]
        dt = t1 - t0
        c0, c1 = g0[name], g1[name]
        cats = {k: round(100 * (v - c0[3].get(k, 0.0)) / dt, 1) for k, v in sorted(c1[3].items())}
        return Usage(
            seconds=dt,
            cpu_pct=100 * (c1[0] - c0[0]) / dt,
            rss_max_mb=max(s[2][name][1] for s in window) / MB,
            rss_root_max_mb=max(s[2][name][2] for s in window) / MB,
            categories_pct=cats,
        )

    def machine_pct(self, since: float, until: float) -> float:
        window = [s for s in list(self._samples) if since <= s[0] <= until]
        if len(window) < 2:
            return float("nan")
        return 100 * (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])


# -- memory of one process -----------------------------------------------------------------------------
def smaps(pid: int, top: int = 8) -> Json:
    """Resident memory of a process by mapping: anonymous (the Python heap, arenas, thread stacks) and
    file-backed (the interpreter and extension modules' code), and the largest files."""
    by_file: dict[str, int] = {}
    anon = 0
    current = "[anon]"
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split(maxsplit=5)
                if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                    path = head[5].strip() if len(head) > 5 else ""
                    current = path if path.startswith("/") else "[anon]"
                elif line.startswith("Rss:"):
                    kb = int(line.split()[1])
                    if current == "[anon]":
                        anon += kb
                    else:
                        name = current.rsplit("/site-packages/", 1)[-1]
                        by_file[name] = by_file.get(name, 0) + kb
    except OSError:
        return {}
    files = sorted(by_file.items(), key=lambda kv: -kv[1])
    return {
        "anon_mb": round(anon / 1024, 1),
        "file_mb": round(sum(by_file.values()) / 1024, 1),
        "largest_files_mb": [[name, round(kb / 1024, 1)] for name, kb in files[:top]],
    }


def pss_mb(root: int) -> float:
    """Proportional set size of a process tree: forked workers' shared pages counted once."""
    total = 0
    for p in procstat.tree(root, procstat.children_map()):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
        except OSError:
            continue
    return round(total / 1024, 1)


IMPORT_STEPS = (
    ("the interpreter", ""),
    ("+ FastAPI, uvicorn, redis", "fastapi, uvicorn, redis.asyncio"),
    ("+ app.runtime.server (what an edge runs)", "app.runtime.server"),
    ("+ app.runtime.cli (what `sparkwire serve` imports)", "app.runtime.cli"),
)


HEAVY = ("numpy", "pyarrow", "pandas", "pyspark", "confluent_kafka")


def import_rss(source: str) -> list[Json]:
    """RSS of a fresh interpreter after each step of what an edge process on `source` imports:
    where an edge's baseline comes from before it serves anything."""
    out: list[Json] = []
    imported: list[str] = []
    log_module = f"compute.storage.{source}.point_log"  # what open_point_log imports at start
    for label, mods in [*IMPORT_STEPS, (f"+ {log_module} (the {source} log)", log_module)]:
        imported += [m.strip() for m in mods.split(",") if m.strip()]
        code = (
            "import os, sys\n"
            + "".join(f"import {m}\n" for m in imported)
            + "rss = int(open(f'/proc/{os.getpid()}/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')\n"
            + f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
            + "print(rss, ','.join(heavy))\n"
        )
        try:
            done = subprocess.run(
                [sys.executable, "-c", code],
                cwd=ROOT,
                env={**os.environ, "SPARKWIRE_ROLE": "edge", "SPARKWIRE_SOURCE": source},
                capture_output=True,
                text=True,
                timeout=120,
            )
            rss, _, heavy = done.stdout.strip().partition(" ")
            out.append({"step": label, "rss_mb": round(int(rss) / MB, 1), "loaded": heavy})
        except (OSError, subprocess.SubprocessError, ValueError):
            out.append({"step": label, "rss_mb": None, "loaded": ""})
    return out


# -- the processes (redis-server: tests/infra.py's) ------------------------------------------------------
def stop_server_tree(server: ServerProcess) -> None:
    """SIGTERM the server, then SIGKILL any of its descendants (its JVM, Spark's workers) that
    outlived it, by the pids recorded before it stopped."""
    kids = procstat.children_map()
    rest = {p: _cmdline(p) for p in procstat.tree(server.pid, kids) if p != server.pid}
    server.stop(timeout=60)
    for p, argv in rest.items():
        if argv and _cmdline(p) == argv:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)


def metrics_of(server: ServerProcess) -> dict[str, float]:
    try:
        return server.metrics()
    except OSError:
        return {}


# -- the run ----------------------------------------------------------------------------------------------
class ScaleOut:
    def __init__(self, plan: ScalePlan, work: Path) -> None:
        self.plan, self.work = plan, work
        self.tick = 1_000_000_000 // plan.rate_hz
        self.results: dict[str, Json] = {"plan": dataclasses.asdict(plan)}
        self.sampler = Sampler()
        self.redis: RedisServer | None = None
        self.kafka: KafkaBroker | None = None
        self.compute: ServerProcess | None = None
        self.edges: list[ServerProcess] = []
        self.children: list[Child] = []
        self._serial = 0

    # -- start and stop ---------------------------------------------------------------------------------
    def env(self, role: str) -> dict[str, str]:
        assert self.redis is not None
        p = self.plan
        env = {
            "SPARKWIRE_ROLE": role,
            "SPARKWIRE_SOURCE": "kafka",
            "SPARKWIRE_REDIS_URL": self.redis.url,
            "SPARKWIRE_TRIGGER_MS": str(p.trigger_ms),
            "SPARKWIRE_RETENTION_SECONDS": str(p.retention_s),
            "SPARKWIRE_MAX_CONNECTIONS": str(max(1000, p.idle_connections + p.idle_warm_connections + 100)),
        }
        assert self.kafka is not None
        env["SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS"] = self.kafka.bootstrap
        env["SPARKWIRE_KAFKA_TOPIC"] = KAFKA_TOPIC
        return env

    def start_edges(self, n: int, tag: str) -> list[ServerProcess]:
        def one(i: int) -> ServerProcess:
            base = self.work / f"{tag}-edge{i + 1}"
            return start_server(base / "data", base.with_suffix(".log"), self.env("edge"), ready_timeout=180)

        with ThreadPoolExecutor(n) as pool:
            futures = [pool.submit(one, i) for i in range(n)]
        started, errors = [], []
        for f in futures:
            try:
                started.append(f.result())
            except Exception as exc:
                errors.append(exc)
        self.edges.extend(started)
        if errors:
            raise RuntimeError(f"an edge did not start: {errors[0]}")
        return started

    def stop_edges(self, edges: list[ServerProcess]) -> None:
        with ThreadPoolExecutor(max(1, len(edges))) as pool:
            list(pool.map(stop_server_tree, edges))
        for e in edges:
            if e in self.edges:
                self.edges.remove(e)

    def child(self, module: str, name: str, spec: Json, *extra: str) -> Child:
        c = Child(module, [*extra, write_spec(self.work / f"{name}.json", spec)], self.work / f"{name}.log")
        self.children.append(c)
        return c

    def feed(self, edge: ServerProcess, name: str) -> Child:
        p = self.plan
        spec = {
            "port": edge.port,
            "rid": RID,
            "channels": p.channels,
            "rate_hz": p.rate_hz,
            "request_ms": p.request_ms,
            "duration_s": 24 * 3600,
            "out": str(self.work / f"{name}.npy"),
        }
        c = Child("bench.feed", [json.dumps(spec)], self.work / f"{name}.log")
        self.children.append(c)
        return c

    def cleanup(self) -> None:
        """Every process this run started, stopped: on success, failure, SIGTERM or Ctrl-C."""
        for c in self.children:
            with contextlib.suppress(Exception):
                c.kill()
        for e in list(self.edges):
            with contextlib.suppress(Exception):
                stop_server_tree(e)
        self.edges.clear()
        if self.compute is not None:
            with contextlib.suppress(Exception):
                stop_server_tree(self.compute)
            self.compute = None
        if self.redis is not None:
            with contextlib.suppress(Exception):
                self.redis.daemon.stop()
            self.redis = None
        if self.kafka is not None:
            with contextlib.suppress(Exception):
                self.kafka.stop()
            self.kafka = None
        self.sampler.stop()

    # -- the whole run ------------------------------------------------------------------------------------
    def run(self) -> None:
        self.sampler.start()
        self.kafka = start_kafka(self.work / "kafka")
        assert self.kafka.daemon is not None
        self.sampler.track("kafka", self.kafka.daemon.process.pid)
        log(f"kafka on {self.kafka.bootstrap}")
        self.redis = start_redis(self.work / "redis")
        self.sampler.track("redis", self.redis.daemon.process.pid, tree=False)
        self.sampler.track("harness", os.getpid(), tree=False)
        self.results["redis"] = {"url": self.redis.url, "version": _redis_version()}
        log(f"redis-server on {self.redis.url}; starting the compute process")
        self.results["compute_start_s"] = self.start_compute("compute", "compute")
        log(f"compute ready in {self.results['compute_start_s']} s")
        self.results["idle"] = self.idle_memory()
        self.results["arms"] = []
        for i, arm in enumerate(arms_of(self.plan)):
            warmup = self.plan.first_warmup_s if i == 0 else self.plan.warmup_s
            if arm.all_in_one:
                self.become_all_in_one()
                warmup = self.plan.first_warmup_s  # a new JVM compiles the batch path again
            self.results["arms"].append(self.run_arm(arm, warmup))

    def become_all_in_one(self) -> None:
        """The compute process stopped, one `--role all` process started on the same log in its place."""
        assert self.compute is not None
        stop_server_tree(self.compute)
        self.sampler.forget("compute")
        log("all-in-one: the compute process stopped; starting one --role all process")
        self.results["all_in_one_start_s"] = self.start_compute("all", "all-in-one")

    def start_compute(self, role: str, name: str) -> float:
        """The process that runs Spark (`--role compute`, or `all`), sampled as "compute"; seconds
        until it was ready."""
        started = time.monotonic()
        base = self.work / name
        self.compute = start_server(base / "data", base.with_suffix(".log"), self.env(role), 300)
        self.sampler.track("compute", self.compute.pid, categorize=True)
        return round(time.monotonic() - started, 1)

    # -- idle connections on a fresh edge ---------------------------------------------------------------
    def idle_memory(self) -> Json:
        p = self.plan
        log("idle memory: a fresh edge")
        [edge] = self.start_edges(1, "idle")
        pid = edge.pid
        out: Json = {}
        try:
            time.sleep(p.idle_settle_s)
            out["baseline_mb"] = round(rss_bytes(pid) / MB, 1)
            out["baseline_smaps"] = smaps(pid)
            out["baseline_pss_mb"] = pss_mb(pid)
            out["threads_at_baseline"] = len(os.listdir(f"/proc/{pid}/task"))
            if p.idle_warm_connections:
                warm = self.child(
                    "bench.clients",
                    "idle-warm",
                    {"url": edge.ws_url, "count": p.idle_warm_connections, "deflate": p.deflate},
                    "idle",
                )
                warm.read(timeout=120)
                warm.finish(timeout=120)
                time.sleep(p.idle_settle_s)
            before = rss_bytes(pid)
            smaps_before = smaps(pid, top=0)
            crowd = self.child(
                "bench.clients",
                "idle-crowd",
                {"url": edge.ws_url, "count": p.idle_connections, "deflate": p.deflate},
                "idle",
            )
            opened = crowd.read(timeout=600)
            time.sleep(p.idle_settle_s)
            after = rss_bytes(pid)
            smaps_after = smaps(pid, top=0)
            connections = metrics_of(edge).get("sparkwire_connections")
            answered = crowd.finish(timeout=180)
            time.sleep(p.idle_settle_s)
            closed = rss_bytes(pid)
            n = max(1, int(opened["open"]))
            out.update(
                {
                    "connections": opened["open"],
                    "server_saw": connections,
                    "open_seconds": opened["seconds"],
                    "answered_ping": answered["answered"],
                    "ping": answered["ping_ms"],
                    "warm_connections": p.idle_warm_connections,
                    "before_mb": round(before / MB, 1),
                    "after_mb": round(after / MB, 1),
                    "after_close_mb": round(closed / MB, 1),
                    "kb_per_connection": round((after - before) / n / 1024, 1),
                    "kb_per_connection_from_baseline": round((after - out["baseline_mb"] * MB) / n / 1024, 1),
                    "anon_kb_per_connection": round(
                        (smaps_after.get("anon_mb", 0) - smaps_before.get("anon_mb", 0)) * 1024 / n, 1
                    ),
                    "file_kb_per_connection": round(
                        (smaps_after.get("file_mb", 0) - smaps_before.get("file_mb", 0)) * 1024 / n, 1
                    ),
                }
            )
            log(
                f"idle: baseline {out['baseline_mb']} MB, {out['kb_per_connection']} KB per connection "
                f"({opened['open']} connections)"
            )
        finally:
            self.stop_edges([edge])
        out["imports"] = import_rss("kafka")
        return out

    # -- one arm ----------------------------------------------------------------------------------------
    def layout(self, arm: Arm) -> list[tuple[int, list[list[Json]]]]:
        """(edge index, connections) per client process. Subscription i is computation i mod
        `computations`; connection j holds subscriptions [j*k, (j+1)*k) (k per connection); the
        connections, in contiguous blocks, go to the client processes, and the processes, in
        contiguous blocks, to the edges: each edge gets a contiguous run of subscriptions, so every
        computation on every edge."""
        p = self.plan
        mix = comps.mix(RID, p.computations, list(comps.KINDS), p.channels)  # distinct computations
        subs = [mix[i % len(mix)] for i in range(arm.subscriptions)]
        conns: list[list[Json]] = [
            [{"sub": s.body, "measure": s.measure} for s in chunk]
            for chunk in _blocks(subs, arm.connections)
            if chunk
        ]
        procs = [c for c in _blocks(conns, p.client_processes) if c]
        return [(i * arm.edges // len(procs), c) for i, c in enumerate(procs)]

    def run_arm(self, arm: Arm, warmup_s: float) -> Json:
        assert self.compute is not None
        p = self.plan
        self._serial += 1
        tag = f"arm{self._serial}"
        log(
            f"{arm.name}: {arm.edges} edge(s), {arm.subscriptions} subscriptions "
            f"on {arm.connections} connections"
        )
        # the all-in-one process is its own edge: the feed and the clients talk to it
        edges = [self.compute] if arm.all_in_one else self.start_edges(arm.edges, tag)
        try:
            if not arm.all_in_one:
                for i, e in enumerate(edges):
                    self.sampler.track(f"edge{i + 1}", e.pid)
            feed = self.feed(edges[0], f"{tag}-feed")
            self.sampler.track("feed", feed.pid, tree=False)
            layout = self.layout(arm)
            clients = []
            ready_at = time.monotonic()
            for k, (edge_i, conns) in enumerate(layout):
                spec = {
                    "url": edges[edge_i].ws_url,
                    "deflate": p.deflate,
                    "out": str(self.work / f"{tag}-clients{k}.npy"),
                    "connections": conns,
                    "ready_timeout": 300,
                }
                clients.append(self.child("bench.clients", f"{tag}-clients{k}", spec, "stream"))
                self.sampler.track(f"clients{k}", clients[-1].pid, tree=False)
            started = 0
            for c in clients:
                ready = c.read(timeout=600)
                started += ready["ready"]
                if ready["ready"] != ready["subscriptions"]:
                    log(f"{arm.name}: {ready['ready']} of {ready['subscriptions']} started: {ready}")
            subscribe_s = time.monotonic() - ready_at
            log(
                f"{arm.name}: {started} subscriptions live in {subscribe_s:.1f} s; "
                f"warming up {warmup_s:.0f} s"
            )
            time.sleep(warmup_s)
            m_before = [metrics_of(self.compute), *(metrics_of(e) for e in edges)]
            t_from, s_from = time.time_ns(), self.sampler.now()
            time.sleep(p.window_s)
            t_to, s_to = time.time_ns(), self.sampler.now()
            m_after = [metrics_of(self.compute), *(metrics_of(e) for e in edges)]
            usage = {
                name: u.as_dict()
                for name in [
                    "compute",
                    *(f"edge{i + 1}" for i in range(len(edges))),
                    "redis",
                    "kafka",
                    "feed",
                ]
                + [f"clients{k}" for k in range(len(clients))]
                + ["harness"]
                if (u := self.sampler.usage(name, s_from, s_to)) is not None
            }
            machine_pct = self.sampler.machine_pct(s_from, s_to)
            for name, pid in [
                ("compute", self.compute.pid),
                *((f"edge{i + 1}", e.pid) for i, e in enumerate(edges)),
            ]:
                if name in usage:
                    usage[name]["pss_end_mb"] = pss_mb(pid)
            newest = t_to // self.tick * self.tick
            self.catch_up(clients, tag, newest)
            done = [c.finish(timeout=120) for c in clients]
            feed_done = feed.finish(timeout=60)
            for k in range(len(clients)):
                self.sampler.forget(f"clients{k}")
            self.sampler.forget("feed")
            edge_smaps = [smaps(e.pid, top=5) for e in edges]
        finally:
            if not arm.all_in_one:
                for i in range(len(edges)):
                    self.sampler.forget(f"edge{i + 1}")
                self.stop_edges(edges)
        released = None if arm.all_in_one else self.wait_released()
        frames = [np.load(self.work / f"{tag}-clients{k}.npy") for k in range(len(layout))]
        feed_rows = np.load(self.work / f"{tag}-feed.npy")
        result = self.arm_figures(arm, layout, frames, feed_rows, t_from, t_to)
        ours = sum(u["cpu_pct"] for u in usage.values())
        result.update(
            {
                "subscriptions_started": started,
                "subscribe_s": round(subscribe_s, 1),
                "warmup_s": warmup_s,
                "window": [t_from, t_to],
                "usage": usage,
                "machine_pct": round(machine_pct, 1),
                "others_pct": round(machine_pct - ours, 1),
                "compute_metrics": _compute_metrics(m_before[0], m_after[0], p.window_s),
                "edge_metrics": [
                    _edge_metrics(b, a, p.window_s) for b, a in zip(m_before[1:], m_after[1:], strict=True)
                ],
                "edge_smaps": edge_smaps,
                "clients": done,
                "feed": feed_done,
                "released_s": released,
            }
        )
        c = usage.get("compute", {})
        log(
            f"{arm.name}: compute {c.get('cpu_pct', float('nan')):.0f}% of a core, "
            f"edges {[usage.get(f'edge{i + 1}', {}).get('cpu_pct') for i in range(arm.edges)]}%, "
            f"p50 {result['latency']['p50_ms']} ms, p99 {result['latency']['p99_ms']} ms, "
            f"{result['frames_per_s']} frames/s; others on the machine {result['others_pct']:.0f}%"
        )
        return result

    def catch_up(self, clients: list[Child], tag: str, newest_ts: int) -> list[np.ndarray]:
        """Wait (up to `catch_up_s`) until every measured subscription shows `newest_ts`, so a write
        late in the window gets its latency instead of counting as never shown."""
        deadline = time.monotonic() + self.plan.catch_up_s
        while True:
            parts = []
            for k, c in enumerate(clients):
                path = self.work / f"{tag}-dump{k}.npy"
                c.send(f"dump {path}")
                c.read(timeout=60)
                parts.append(np.load(path))
            behind = 0
            for f in parts:
                measured = f[f[:, 2] >= 0]
                for s in np.unique(measured[:, 0]).tolist():
                    if measured[measured[:, 0] == s][:, 2].max() < newest_ts:
                        behind += 1
            if not behind or time.monotonic() > deadline:
                return parts
            time.sleep(1)

    def wait_released(self, timeout: float = 60) -> float | None:
        """Seconds until the compute tier runs no computation (the arm's edges stopped)."""
        assert self.compute is not None
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if metrics_of(self.compute).get("sparkwire_computations", 1) == 0:
                return round(time.monotonic() - started, 1)
            time.sleep(0.5)
        log("the compute tier still runs computations after the edges stopped")
        return None

    def arm_figures(
        self,
        arm: Arm,
        layout: list[tuple[int, list[list[Json]]]],
        frames: list[np.ndarray],
        feed_rows: np.ndarray,
        t_from: int,
        t_to: int,
    ) -> Json:
        # Each client process numbers its subscriptions from 0: offset them so they stay apart.
        offset = 0
        shifted: list[np.ndarray] = []
        for f in frames:
            g = f.copy()
            g[:, 0] += offset
            offset += sum(len(c) for c in layout[len(shifted)][1])
            shifted.append(g)
        every = np.concatenate(shifted) if shifted else np.empty((0, 5), dtype=np.int64)
        lat = delivery_latency(feed_rows, every, t_from, t_to)
        in_window = every[(every[:, 1] >= t_from) & (every[:, 1] <= t_to)]
        seconds = (t_to - t_from) / 1e9
        per_edge = []
        for e in range(arm.edges):
            mine = [f for f, (edge_i, _) in zip(shifted, layout, strict=True) if edge_i == e]
            if mine:
                d = delivery_latency(feed_rows, np.concatenate(mine), t_from, t_to)
                per_edge.append(summarize(d.latencies_ms).as_dict())
        ok = feed_rows[(feed_rows[:, 4] == 200) & (feed_rows[:, 1] >= t_from) & (feed_rows[:, 1] <= t_to)]
        return {
            "name": arm.name,
            "edges": arm.edges,
            "subscriptions": arm.subscriptions,
            "connections": arm.connections,
            "reference": arm.reference,
            "all_in_one": arm.all_in_one,
            "latency": summarize(lat.latencies_ms).as_dict(),
            "missing": lat.missing,
            "latency_per_edge": per_edge,
            "measured_subscriptions": len(np.unique(every[every[:, 2] >= 0][:, 0])),
            "frames_total": len(every),
            "frames_in_window": len(in_window),
            "frames_per_s": round(len(in_window) / seconds),
            "mb_per_s": round(float(in_window[:, 4].sum()) / seconds / MB, 2),
            "points_per_s": round(float(ok[:, 3].sum()) / seconds),
        }


def _blocks(items: list[Any], n: int) -> list[list[Any]]:
    """`items` in `n` contiguous blocks whose sizes differ by at most one."""
    n = max(1, n)
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def _compute_metrics(before: dict[str, float], after: dict[str, float], seconds: float) -> Json:
    name = "sparkwire_microbatch_duration_seconds"
    count = after.get(f"{name}_count", 0.0) - before.get(f"{name}_count", 0.0)
    total = after.get(f"{name}_sum", 0.0) - before.get(f"{name}_sum", 0.0)
    rows = after.get("sparkwire_microbatch_rows_sum", 0.0) - before.get("sparkwire_microbatch_rows_sum", 0.0)
    return {
        "batches_per_s": round(count / seconds, 2),
        "callback_ms": round(1000 * total / count, 1) if count else None,
        "rows_per_batch": round(rows / count) if count else None,
        "computations": after.get("sparkwire_computations"),
    }


def _edge_metrics(before: dict[str, float], after: dict[str, float], seconds: float) -> Json:
    def rate(name: str) -> float:
        return round((after.get(name, 0.0) - before.get(name, 0.0)) / seconds, 1)

    return {
        "frames_sent_per_s": rate("sparkwire_frames_sent_total"),
        "frames_coalesced_per_s": rate("sparkwire_frames_coalesced_total"),
        "points_ingested_per_s": rate("sparkwire_points_ingested_total"),
        "connections": after.get("sparkwire_connections"),
        "subscriptions": after.get("sparkwire_subscriptions"),
        "mirrors": after.get("sparkwire_computations"),
    }


def code_state() -> Json:
    """What code the processes ran: a digest of the server's source (app/, compute/, schemas/) and
    its newest file, since the working tree may change between runs (or during one)."""
    import hashlib

    h = hashlib.sha256()
    newest, newest_name = 0.0, ""
    for top in ("app", "compute", "schemas"):
        for path in sorted((ROOT / top).rglob("*.py")):
            h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
            mtime = path.stat().st_mtime
            if mtime > newest:
                newest, newest_name = mtime, str(path.relative_to(ROOT))
    return {
        "sha256": h.hexdigest()[:16],
        "newest_file": newest_name,
        "newest_mtime": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(newest)),
    }


def _redis_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.split(" v=", 1)[1].split()[0] if " v=" in out.stdout else out.stdout.strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


# -- the report -------------------------------------------------------------------------------------------
def _f(x: Any, fmt: str = "{:,.0f}", none: str = "n/a") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return none
    return fmt.format(x)


def _cpu(arm: Json, name: str) -> float | None:
    u = arm["usage"].get(name)
    return None if u is None else float(u["cpu_pct"])


def _reference_cpu(r: Json) -> tuple[float | None, list[Json]]:
    refs = [a for a in r.get("arms", []) if a.get("reference") and _cpu(a, "compute") is not None]
    if not refs:
        return None, []
    return sum(_cpu(a, "compute") or 0.0 for a in refs) / len(refs), refs


def targets(r: Json) -> list[tuple[str, str, str, str, list[str]]]:
    """(target, wanted, measured, verdict, why) rows; `why` is filled for a miss."""
    plan = r["plan"]
    tol = plan["flat_tolerance"]
    rows: list[tuple[str, str, str, str, list[str]]] = []
    ref, refs = _reference_cpu(r)
    arms = r.get("arms", [])
    ref_batch = _mean([_per_batch(x) for x in refs])
    ref_txt = (
        f"{ref_batch:.0f} ms"
        + (", the mean of the 1-edge arms at the start and at the end" if len(refs) > 1 else "")
        if ref_batch is not None
        else "n/a"
    )
    tiers = [a for a in arms if not a.get("all_in_one")]
    for a in [a for a in tiers if not a.get("reference")]:
        cpu, per_batch = _cpu(a, "compute"), _per_batch(a)
        if a["edges"] == 1:
            what = (
                "compute CPU flat as subscribers are added: 1 edge, "
                f"{a['subscriptions']} vs {plan['subscriptions']} subscriptions"
            )
        else:
            what = f"compute CPU flat as edges are added: {a['edges']} edges vs 1"
        wanted = f"CPU per micro-batch within ±{tol:.0%} of the reference ({ref_txt})"
        if per_batch is None or not ref_batch or cpu is None or not ref:
            rows.append((what, wanted, "n/a", "not measured", []))
            continue
        delta = per_batch / ref_batch - 1
        measured = (
            f"{per_batch:.0f} ms ({delta:+.0%}); CPU {cpu:.0f}% of a core ({cpu / ref - 1:+.0%}) "
            f"at {a['compute_metrics']['batches_per_s']} micro-batches/s"
        )
        ok = abs(delta) <= tol
        rows.append(
            (
                what,
                wanted,
                measured,
                "met" if ok else f"missed by {abs(delta) - tol:.0%}",
                [] if ok else _why_compute(r, a, refs),
            )
        )
    idle = r.get("idle", {})
    base = idle.get("baseline_mb")
    rows.append(
        (
            "edge baseline RSS (fresh, ready, no connection)",
            f"< {plan['edge_rss_target_mb']:.0f} MB",
            _f(base, "{:.1f} MB"),
            "not measured" if base is None else "met" if base < plan["edge_rss_target_mb"] else "missed",
            [] if base is None or base < plan["edge_rss_target_mb"] else _why_baseline(idle),
        )
    )
    kb = idle.get("kb_per_connection")
    rows.append(
        (
            f"edge memory per idle connection ({_f(idle.get('connections'))} connections)",
            f"<= {plan['idle_kb_target']:.0f} KB",
            _f(kb, "{:.1f} KB"),
            "not measured" if kb is None else "met" if kb <= plan["idle_kb_target"] else "missed",
            [] if kb is None or kb <= plan["idle_kb_target"] else _why_idle(r, idle),
        )
    )
    p99s = [(a["latency"]["p99_ms"], a) for a in tiers if a["latency"]["n"]]
    if p99s:
        worst, arm = max(p99s, key=lambda x: x[0])
        ok = worst <= plan["p99_target_ms"]
        rows.append(
            (
                "write -> frame p99, worst arm (bench's fan-out target, for reference)",
                f"<= {plan['p99_target_ms']:.0f} ms",
                f"{worst:,.0f} ms ({arm['name']})",
                "met" if ok else "missed",
                [] if ok else _why_latency(r, arm),
            )
        )
    rows += _two_tier_rows(r)
    return rows


def _two_tier_rows(r: Json) -> list[tuple[str, str, str, str, list[str]]]:
    """Issue 45's target: the two tiers' p99 (the worst 1-edge arm at the full subscriptions) within
    `two_tier_p99_ratio` of one all-in-one process's, same log, same load, same run."""
    plan, arms = r["plan"], r.get("arms", [])
    alone = [a for a in arms if a.get("all_in_one") and a["latency"]["n"]]
    refs = [a for a in arms if a.get("reference") and a["latency"]["n"]]
    what = "two tiers' write -> frame p99 against all-in-one's, Kafka log"
    limit = plan.get("two_tier_p99_ratio", 1.3)
    wanted = f"<= {limit:g}x"
    if not alone or not refs:
        return [(what, wanted, "n/a", "not measured", [])] if plan.get("all_in_one_arm") else []
    worst = max(refs, key=lambda a: a["latency"]["p99_ms"])
    tiers_p99, alone_p99 = worst["latency"]["p99_ms"], alone[0]["latency"]["p99_ms"]
    ratio = tiers_p99 / alone_p99
    ok = ratio <= limit
    measured = f"{ratio:.2f}x ({tiers_p99:,.0f} ms, {worst['name']}, against {alone_p99:,.0f} ms)"
    why = [] if ok else _why_two_tiers(worst, alone[0], [a for a in refs if a is not worst])
    return [(what, wanted, measured, "met" if ok else "missed", why)]


def _why_two_tiers(tiers: Json, alone: Json, others: list[Json]) -> list[str]:
    def micro(a: Json) -> str:
        cm = a["compute_metrics"]
        return (
            f"micro-batches of {_f(cm['callback_ms'], '{:.0f}')} ms ({cm['batches_per_s']}/s), the "
            f"compute tree at {_f(_cpu(a, 'compute'))}% of a core, the machine {a['machine_pct']:.0f}% busy"
        )

    return [
        f"Two tiers ({tiers['name']}): p50 {_f(tiers['latency']['p50_ms'])} ms, {micro(tiers)}. "
        f"All-in-one: p50 {_f(alone['latency']['p50_ms'])} ms, {micro(alone)}. A write reaches a "
        "frame through the edge's ingest, the log, the compute tier's micro-batch, Redis pub/sub and "
        "the edge's fan-out, where all-in-one skips the last two."
    ] + [
        f"The same arm, {a['name']}: p99 {_f(a['latency']['p99_ms'])} ms, "
        f"{a['latency']['p99_ms'] / alone['latency']['p99_ms']:.2f}x, {micro(a)}."
        for a in others
    ]


def _per_batch(arm: Json) -> float | None:
    """The compute tree's CPU per micro-batch, ms: robust to a busy machine, which slows the
    micro-batches (fewer, bigger) and so lowers the CPU a second."""
    cpu, per_s = _cpu(arm, "compute"), arm["compute_metrics"]["batches_per_s"]
    return None if cpu is None or not per_s else 10 * cpu / per_s


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _why_compute(r: Json, arm: Json, refs: list[Json]) -> list[str]:
    ref = refs[0]
    cats = arm["usage"]["compute"].get("categories_pct", {})
    ref_cats = ref["usage"]["compute"].get("categories_pct", {})
    parts = ", ".join(
        f"{k} {ref_cats.get(k, 0):.0f}% -> {v:.0f}%"
        for k, v in cats.items()
        if abs(v - ref_cats.get(k, 0)) >= 1
    )
    cm, rm = arm["compute_metrics"], ref["compute_metrics"]
    per_batch = [
        10 * (_cpu(x, "compute") or 0.0) / x["compute_metrics"]["batches_per_s"]
        for x in (ref, arm)
        if x["compute_metrics"]["batches_per_s"]
    ]
    out = [
        f"By process ({ref['name']} -> {arm['name']}): {parts or 'no part moved by 1 point or more'}; "
        + (
            f"CPU per micro-batch {per_batch[0]:.0f} -> {per_batch[1]:.0f} ms; "
            if len(per_batch) == 2
            else ""
        )
        + f"micro-batches {rm['batches_per_s']} -> {cm['batches_per_s']}/s, callback "
        f"{_f(rm['callback_ms'], '{:.1f}')} -> {_f(cm['callback_ms'], '{:.1f}')} ms, "
        f"{_f(rm['rows_per_batch'])} -> {_f(cm['rows_per_batch'])} rows per batch."
    ]
    if len(refs) > 1:
        a, b = (_cpu(x, "compute") or 0.0 for x in refs[:2])
        out.append(
            f"The same 1-edge arm measured {a:.0f}% at the start and {b:.0f}% at the end ({b / a - 1:+.0%}): "
            "that is this machine's noise between identical arms."
        )
    others = arm.get("others_pct")
    if others is not None and others > 20:
        out.append(
            f"Other processes on the machine (not started here) used {others:.0f}% of a core during this "
            f"arm ({ref.get('others_pct', 0):.0f}% during {ref['name']}); the two cores were shared."
        )
    return out


def _why_baseline(idle: Json) -> list[str]:
    sm = idle.get("baseline_smaps", {})
    files = ", ".join(f"{n} {mb} MB" for n, mb in sm.get("largest_files_mb", [])[:6])
    return [
        f"Of its {idle['baseline_mb']} MB, {sm.get('anon_mb')} MB are anonymous (the Python heap: modules "
        f"imported, objects built at start-up) and {sm.get('file_mb')} MB file-backed code and data "
        f"of the interpreter and extension modules; the largest files: {files}.",
        *_import_steps(idle),
    ]


def _import_steps(idle: Json) -> list[str]:
    steps = [x for x in idle.get("imports", []) if x.get("rss_mb") is not None]
    if not steps:
        return []
    parts = [
        f"{x['step']} {x['rss_mb']} MB" + (f" (loaded: {x['loaded']})" if x["loaded"] else "") for x in steps
    ]
    return ["A fresh interpreter importing what an edge imports, step by step: " + "; ".join(parts) + "."]


def _all_in_one_kb() -> tuple[float, str] | None:
    """Workload 5 of the last full `make bench` (the all-in-one server) and when it ran."""
    try:
        r = json.loads((ROOT / "BENCHMARKS.json").read_text())
        return float(r["connections"]["kb_per_connection"]), str(r.get("started", "?"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _why_idle(r: Json, idle: Json) -> list[str]:
    return [
        f"RSS {idle['before_mb']} MB with no connection (after {idle['warm_connections']} warm-up "
        f"connections came and went) -> {idle['after_mb']} MB with {idle['connections']:,} idle ones; "
        f"of the growth per connection {idle['anon_kb_per_connection']} KB is anonymous memory (Python "
        f"objects, buffers) and {idle['file_kb_per_connection']} KB file-backed; after they closed: "
        f"{idle['after_close_mb']} MB."
        + (
            " An edge serves WebSockets with the all-in-one server's stack (app/api/ws.py, "
            f"app/transport/connection.py, uvicorn); BENCHMARKS.md's last full run ({kb[1]}) measured "
            f"{kb[0]} KB per idle connection on the all-in-one server, on the code of that day."
            if (kb := _all_in_one_kb()) is not None
            else ""
        )
    ]


def _why_latency(r: Json, arm: Json) -> list[str]:
    u = arm["usage"]
    ours = sum(x["cpu_pct"] for x in u.values())
    cats = u.get("compute", {}).get("categories_pct", {})
    best = min((a for a in r["arms"] if a["latency"]["n"]), key=lambda a: a["latency"]["p99_ms"])
    return [
        f"During {arm['name']} the machine's 2 cores were {arm['machine_pct']:.0f}% busy (of 200%): "
        f"this run's processes {ours:.0f}%, others {arm['others_pct']:.0f}%. A write waits for the "
        "compute tier's next micro-batch, which took "
        f"{_f(arm['compute_metrics']['callback_ms'], '{:.0f}')} ms "
        f"({arm['compute_metrics']['batches_per_s']} micro-batches/s; the compute tree used "
        f"{u.get('compute', {}).get('cpu_pct', 0):.0f}% of a core, of it Spark's Python workers"
        + f" {cats.get('spark workers', 0):.0f}%, the JVM {cats.get('jvm', 0):.0f}%, the "
        f"Python process with the computations and the publishing {cats.get('python', 0):.0f}%). "
        f"The best arm, {best['name']}, had p50 {_f(best['latency']['p50_ms'])} / p99 "
        f"{_f(best['latency']['p99_ms'])} ms with micro-batches of "
        f"{_f(best['compute_metrics']['callback_ms'], '{:.0f}')} ms."
    ]


def _code_lines(r: Json) -> list[str]:
    code, end = r.get("code"), r.get("code_at_end")
    if not code:
        return []
    line = (
        f"- Code measured: app/, compute/, schemas/ with sha256 {code['sha256']} over their .py files "
        f"(newest: {code['newest_file']}, {code['newest_mtime']})"
    )
    if end and end["sha256"] != code["sha256"]:
        line += (
            f"; **the source changed during the run** (at the end: {end['sha256']}, newest "
            f"{end['newest_file']}, {end['newest_mtime']}): processes started after that ran the newer code"
        )
    return [line + "."]


def _flat_note(r: Json) -> str:
    plan = r["plan"]
    refs = [a for a in r.get("arms", []) if a.get("reference")]
    text = (
        f'"Flat" means: the compute process tree\'s CPU per micro-batch (its CPU time in the window over '
        f"the micro-batches it ran) within ±{plan['flat_tolerance']:.0%} of the reference, the 1-edge arm at "
        "the full subscriptions"
        + (
            " (the mean of that arm at the start and again at the end of the run, so a drift of the "
            "machine over the run cancels)"
            if len(refs) > 1
            else ""
        )
        + ". The compute tier runs the same computations in every arm; only subscribers and edges change. "
        "Its CPU per second is shown beside it. When the compute tier keeps up with the trigger, the "
        "micro-batches per second are the trigger's and the two figures move together"
    )
    callbacks = [a["compute_metrics"]["callback_ms"] for a in refs if a["compute_metrics"]["callback_ms"]]
    if callbacks and min(callbacks) > plan["trigger_ms"]:
        text += (
            f"; in this run they did not: its micro-batches took {min(callbacks):,.0f} ms or more against a "
            f"{plan['trigger_ms']} ms trigger, so it ran them back to back, as many as its share of the "
            "2 cores allowed, and its CPU per second is the share it got, not the work it had"
        )
        if len(refs) > 1:
            a, b = refs[0], refs[-1]
            text += (
                f" (the two identical 1-edge arms: {_cpu(a, 'compute') or 0:.0f}% and "
                f"{_cpu(b, 'compute') or 0:.0f}% of a core, while processes not started here used "
                f"{a['others_pct']:.0f}% and {b['others_pct']:.0f}%; per micro-batch "
                f"{_per_batch(a) or 0:.0f} and {_per_batch(b) or 0:.0f} ms)"
            )
    return text + "."


def _edges(arm: Json) -> str:
    return "none (one --role all)" if arm.get("all_in_one") else str(arm["edges"])


def render(r: Json) -> str:
    plan, m = r["plan"], r["machine"]
    arms = r.get("arms", [])
    idle = r.get("idle", {})
    ref, _ = _reference_cpu(r)
    out = [
        "# Sparkwire scale-out: one compute process, 1 to 3 edges (Kafka log)",
        "",
        "Generated by `bench/scale_out.py` (`make bench-scale-out`). Every figure comes from one run on "
        "this machine: a throwaway redis-server and a single-node Kafka broker (KRaft), one "
        "`sparkwire serve --role compute` process (Spark) and "
        "`--role edge` processes (no JVM), all on 127.0.0.1, driven by separate feed and client "
        "processes (bench/feed.py, bench/clients.py). The point log: Kafka, read by Spark's own Kafka "
        "source; Redis carries results, wants and heartbeats."
        + (
            f" Last, one `--role all` process (started in {r.get('all_in_one_start_s')} s) on the same "
            "log takes the same feed and subscriptions alone, the all-in-one reference."
            if any(a.get("all_in_one") for a in arms)
            else ""
        ),
        "",
        f"- Date: {r['started']} (run took {r.get('duration_s', '?')} s)",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Linux {m['kernel']}; Python "
        f"{m['python']}; {m['java']}; {pyspark_line(m)}; redis-server {r['redis']['version']}",
        f"- Load average when the run started: {', '.join(str(x) for x in m['load_average_at_start'])}",
        f"- Reproduce: `{r['command']}`",
        *_code_lines(r),
        f"- Compute process: started once (ready in {r.get('compute_start_s')} s) and kept running "
        "through every arm; between arms the edges stop, their wants go with them, and the next arm "
        "starts once the compute tier runs no computation. Edges: started fresh for each arm, stopped "
        "after it.",
        f"- Feed: {plan['channels']} numeric channels x {plan['rate_hz']:,} Hz "
        f"({plan['channels'] * plan['rate_hz']:,} points/s), "
        f"one HTTP request every {plan['request_ms']:g} ms, "
        "all written to the first edge in every arm (the same ingest cost in each arm; the other edges "
        f"only fan out); trigger {plan['trigger_ms']} ms; the Kafka topic's retention "
        f"{plan['retention_s']} s (every window is shorter).",
        f"- Subscriptions: {plan['subscriptions']} over {plan['computations']} distinct computations "
        "(raw, bucketed, arithmetic, ranges: bench/computations.py), "
        f"{plan['subscriptions'] // max(1, plan['connections'])} per connection on {plan['connections']} "
        f"connections, in {plan['client_processes']} client processes in every arm; edges get equal, "
        "contiguous shares of the connections, so every edge mirrors every computation. Clients offer "
        f"permessage-deflate: {plan['deflate']}.",
        f"- Each arm: a warm-up ({plan['first_warmup_s']:g} s for the first arm, {plan['warmup_s']:g} s "
        f"for the others), then a steady window of {plan['window_s']:g} s in which everything below is "
        "measured.",
        "",
        "CPU is % of one core (the machine has 200%), the mean over the window; RSS is the peak in the "
        "window. The compute process's figure is its whole tree: the Python process, Spark's JVM and "
        "Spark's Python workers. Latency is from the moment the feed "
        "received a write's 200 to the first frame of each subscription that includes the write's "
        "newest point (bench/stats.py), over the subscriptions whose results show points or buckets.",
        "",
        "## Targets",
        "",
        "| target | wanted | measured | verdict |",
        "|---|---|---|---|",
    ]
    rows = targets(r)
    out += [f"| {t} | {w} | {mm} | {v} |" for t, w, mm, v, _ in rows]
    misses = [(t, why) for t, _, _, v, why in rows if v.startswith("missed")]
    if misses:
        out.append("")
        for t, why in misses:
            out.append(f"- **Why ({t})**: " + " ".join(why))
    out += ["", _flat_note(r), ""] if arms else []
    arm_sections = len(out)  # dropped below when the run had no arm (e.g. edges= reduced_arm=false)
    out += [
        "## Compute CPU against subscribers and edges",
        "",
        "| arm | edges | subscriptions | compute CPU (% of a core) | vs reference | Python / JVM / Spark "
        "workers | micro-batches/s | callback | rows/batch | CPU per micro-batch | computations | "
        "PSS at the window's end |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a in arms:
        cpu = _cpu(a, "compute")
        cats = a["usage"].get("compute", {}).get("categories_pct", {})
        cm = a["compute_metrics"]
        per_batch = None if cpu is None or not cm["batches_per_s"] else 10 * cpu / cm["batches_per_s"]
        out.append(
            f"| {a['name']} | {_edges(a)} | {a['subscriptions']} | {_f(cpu)}% | "
            f"{_f(None if cpu is None or not ref else cpu / ref - 1, '{:+.0%}')} | "
            f"{_f(cats.get('python'))} / {_f(cats.get('jvm'))} / {_f(cats.get('spark workers'))} | "
            f"{cm['batches_per_s']} | {_f(cm['callback_ms'], '{:.1f} ms')} | {_f(cm['rows_per_batch'])} | "
            f"{_f(per_batch, '{:.0f} ms')} | {_f(cm['computations'])} | "
            f"{_f(a['usage'].get('compute', {}).get('pss_end_mb'), '{:,.0f} MB')} |"
        )
    out += [
        "",
        "## Every process, per arm (CPU % of a core / peak RSS MB)",
        "",
        "| arm | compute tree | each edge | redis-server | Kafka broker | feed | clients (all) "
        "| this harness | rest of the machine | machine busy |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a in arms:
        u = a["usage"]

        def cell(x: Json | None) -> str:
            return "-" if x is None else f"{x['cpu_pct']:.0f}% / {x['rss_max_mb']:,.0f}"

        edges = "; ".join(cell(u.get(f"edge{i + 1}")) for i in range(a["edges"]))
        clients = [v for k, v in u.items() if k.startswith("clients")]
        client_cell = (
            f"{sum(c['cpu_pct'] for c in clients):.0f}% / {sum(c['rss_max_mb'] for c in clients):,.0f}"
            if clients
            else "-"
        )
        out.append(
            f"| {a['name']} | {cell(u.get('compute'))} | {edges} | {cell(u.get('redis'))} | "
            f"{cell(u.get('kafka'))} | {cell(u.get('feed'))} | {client_cell} | {cell(u.get('harness'))} | "
            f"{a['others_pct']:.0f}% | "
            f"{a['machine_pct']:.0f}% |"
        )
    out += [
        "",
        "## Latency and frames, per arm",
        "",
        "| arm | samples | p50 | p99 | max | p50 / p99 per edge | writes never shown | frames in window "
        "(per s) | MB/s | frames sent per edge (/s, edge metrics) | mirrors per edge | points/s acked |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a in arms:
        lat = a["latency"]
        per_edge = "; ".join(f"{_f(e['p50_ms'])} / {_f(e['p99_ms'])}" for e in a["latency_per_edge"])
        sent = "; ".join(_f(e["frames_sent_per_s"]) for e in a["edge_metrics"])
        mirrors = "; ".join(_f(e["mirrors"]) for e in a["edge_metrics"])
        out.append(
            f"| {a['name']} | {lat['n']:,} | {_f(lat['p50_ms'], '{:,.0f} ms')} | "
            f"{_f(lat['p99_ms'], '{:,.0f} ms')} | {_f(lat['max_ms'], '{:,.0f} ms')} | {per_edge} ms | "
            f"{a['missing']:,} | {a['frames_in_window']:,} ({a['frames_per_s']:,}) | "
            f"{a['mb_per_s']} | {sent} | "
            f"{mirrors} | {a['points_per_s']:,} |"
        )
    if not arms:
        del out[arm_sections:]
    if idle:
        bs = idle.get("baseline_smaps", {})
        out += [
            "",
            "## Idle connections on a fresh edge",
            "",
            "| what | figure |",
            "|---|---|",
            f"| RSS once ready, no connection | {_f(idle.get('baseline_mb'), '{:.1f} MB')} "
            f"({bs.get('anon_mb')} MB anonymous, {bs.get('file_mb')} MB file-backed; "
            f"{idle.get('threads_at_baseline')} threads) |",
            f"| RSS after {idle.get('warm_connections')} warm-up connections opened and closed | "
            f"{_f(idle.get('before_mb'), '{:.1f} MB')} |",
            f"| RSS with {_f(idle.get('connections'))} idle connections open (the edge counted "
            f"{_f(idle.get('server_saw'))}) | {_f(idle.get('after_mb'), '{:.1f} MB')} |",
            f"| growth per connection | {_f(idle.get('kb_per_connection'), '{:.1f} KB')} "
            f"(anonymous {idle.get('anon_kb_per_connection')} KB, file-backed "
            f"{idle.get('file_kb_per_connection')} KB); from the fresh baseline instead: "
            f"{_f(idle.get('kb_per_connection_from_baseline'), '{:.1f} KB')} |",
            f"| RSS after they closed | {_f(idle.get('after_close_mb'), '{:.1f} MB')} |",
            f"| opening them took | {idle.get('open_seconds')} s |",
            f"| all pinging at once: answered, round trip p50 / p99 | {_f(idle.get('answered_ping'))}, "
            f"{_f(idle.get('ping', {}).get('p50_ms'), '{:,.0f} ms')} / "
            f"{_f(idle.get('ping', {}).get('p99_ms'), '{:,.0f} ms')} |",
            "",
            "Largest resident files of the fresh edge: "
            + ", ".join(f"{n} {mb} MB" for n, mb in bs.get("largest_files_mb", []))
            + f". Its PSS once ready: {_f(idle.get('baseline_pss_mb'), '{:.1f} MB')}.",
        ]
        if idle.get("imports"):
            out += [
                "",
                "Where the baseline comes from: a fresh interpreter's RSS after importing, step by step, "
                "what an edge imports (with SPARKWIRE_ROLE=edge):",
                "",
                "| imported | RSS | heavy packages loaded |",
                "|---|---|---|",
                *(
                    f"| {x['step']} | {_f(x['rss_mb'], '{:.1f} MB')} | {x['loaded'] or '-'} |"
                    for x in idle["imports"]
                ),
            ]
    out += ["", f"Raw figures: the JSON file beside this one ({r.get('json_name', '')})."]
    return "\n".join(out) + "\n"


# -- main -------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    harness_main.main(
        argv,
        "scale_out",
        __doc__,
        (FULL, SMOKE),
        ("BENCHMARKS.scale-out.md", "scale-out.md"),
        ScaleOut,
        render,
        log,
    )


if __name__ == "__main__":
    main()
