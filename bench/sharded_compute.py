"""Computations sharded across compute processes (issue 45, docs/decisions/0091): the same live
computations run by 1, then 2, then 3 `--role compute` processes sharing them through Kafka's
consumer group (`compute-slots`, decision 0089), behind one edge, on a throwaway Kafka broker and
redis-server, all on 127.0.0.1; then one of the 3 is killed with SIGKILL. Writes
BENCHMARKS.sharded.md and BENCHMARKS.sharded.json.

    python -m bench.sharded_compute [--smoke] [--out BENCHMARKS.sharded.md] [--work DIR] [NAME=VALUE ...]

Per arm, once the group has settled (every computation running on exactly one process): each
process's share of the computations and of the evaluation CPU (its micro-batch thread's CPU time
applying batches to its computations, `sparkwire_evaluation_cpu_seconds`), its whole tree's CPU, and
write-to-frame latency over every subscription. After the kill: the time until every subscriber
shows a point written after the kill (a subscriber of a moved computation first gets a fresh
FullResult from its new owner), and the acknowledged writes some subscriber never showed.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from bench import computations as comps
from bench import harness_main
from bench.children import Child, write_spec
from bench.feed import body as feed_body
from bench.machine import pyspark_line
from bench.run import BENCH_RESULT_POINTS
from bench.scale_out import Sampler, _f, metrics_of, stop_server_tree
from bench.serverproc import ServerProcess, start_server
from bench.stats import delivery_latency, summarize
from tests.infra import RedisServer, start_redis
from tests.kafka_broker import KafkaBroker, start_kafka

Json = Any
RID = "ri.bench.sharded"
TOPIC = "bench-sharded"  # the slots' topic and consumer group: TOPIC-compute


def log(msg: str) -> None:
    print(f"[sharded {time.strftime('%H:%M:%S')}] {msg}", flush=True)


@dataclass(frozen=True)
class ShardPlan:
    computations: int = 2000  # distinct (bench/computations.py's mix), one subscription each
    channels: int = 10
    rate_hz: int = 100  # per channel: 1,000 points/s in all (every process's query reads the whole log)
    request_ms: float = 10
    trigger_ms: int = 100
    connections: int = 20  # 100 subscriptions each (the per-connection cap is 128)
    # started one after the other, each once the last one's subscriptions are live: 2,000 new
    # computations at once wait for their back-fills past the edge's 120 s for a first snapshot
    client_processes: int = 4
    slots: int = 48  # divides evenly over 1, 2 and 3 processes
    processes: tuple[int, ...] = (1, 2, 3)
    settle_timeout_s: float = 240
    warmup_s: float = 20
    window_s: float = 45
    failover_s: float = 45  # the feed runs this long after the kill
    # then the subscribers' records run on with the feed stopped until the edge has sent no frame
    # for quiet_s (at most drain_s): at this load a write reaches its frames 1-4 minutes later, and
    # one counted as never shown must not be merely late
    quiet_s: float = 15
    drain_s: float = 600
    # A bucketed frame proves its points only up to the end of the bucket before its last (see
    # bench/frame_peek._newest): the feed's last write is proven once a later point opens a bucket
    # after its own. So closing_gap_s after the feed stops (more than the widest bucket: 60 s over
    # 100 buckets or more), one tick on every channel, not itself counted. Without it the feed's
    # last write counted as never shown by every bucketed subscription whose last bucket held it.
    # The tick is closing_ticks consecutive points (1.3 s at 100 Hz), more than two of the widest
    # buckets (60 s over 101): an append of one bucket proves nothing by that rule, and 88
    # subscriptions' closing frames were such appends in one run on the Kafka log.
    closing_gap_s: float = 1.0
    closing_ticks: int = 130
    retention_s: int = 900
    # targets (issue 45)
    even_tolerance: float = 0.20
    failover_target_s: float = 10


FULL = ShardPlan()
SMOKE = ShardPlan(
    computations=120,
    connections=4,
    slots=12,
    warmup_s=5,
    window_s=15,
    failover_s=25,
    drain_s=120,
)


class Sharded:
    def __init__(self, plan: ShardPlan, work: Path) -> None:
        self.plan, self.work = plan, work
        self.results: dict[str, Json] = {"plan": dataclasses.asdict(plan)}
        self.sampler = Sampler()
        self.kafka: KafkaBroker | None = None
        self.redis: RedisServer | None = None
        self.computes: list[ServerProcess] = []
        self.edge: ServerProcess | None = None
        self.children: list[Child] = []
        self.live_computations = 0  # the edge's, once subscribed: what the processes must run between them

    # -- processes ----------------------------------------------------------------------------------------
    def env(self, role: str) -> dict[str, str]:
        assert self.redis is not None and self.kafka is not None
        p = self.plan
        subscriptions = str(p.computations + 100)
        return {
            "SPARKWIRE_ROLE": role,
            "SPARKWIRE_SOURCE": "kafka",
            "SPARKWIRE_REDIS_URL": self.redis.url,
            "SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS": self.kafka.bootstrap,
            "SPARKWIRE_KAFKA_TOPIC": TOPIC,
            "SPARKWIRE_COMPUTE_SLOTS": str(p.slots),
            "SPARKWIRE_TRIGGER_MS": str(p.trigger_ms),
            "SPARKWIRE_RETENTION_SECONDS": str(p.retention_s),
            # one unauthenticated tenant stands for many users: the caps are not what is measured
            "SPARKWIRE_MAX_SUBSCRIPTIONS_PER_TENANT": subscriptions,
            "SPARKWIRE_MAX_SUBSCRIPTIONS": subscriptions,
            "SPARKWIRE_MAX_RESULT_POINTS_PER_TENANT": str(BENCH_RESULT_POINTS),
            "SPARKWIRE_MAX_RESULT_POINTS": str(BENCH_RESULT_POINTS),
            # the slots' claims and revocations, and each computation's start, in the process's log
            "SPARKWIRE_LOG_LEVEL": "INFO" if role == "compute" else "WARNING",
        }

    def start_compute(self) -> ServerProcess:
        n = len(self.computes) + 1
        base = self.work / f"compute{n}"
        started = time.monotonic()
        process = start_server(base / "data", base.with_suffix(".log"), self.env("compute"), 300)
        self.computes.append(process)
        self.sampler.track(f"compute{n}", process.pid, categorize=True)
        log(f"compute{n} ready in {time.monotonic() - started:.1f} s")
        return process

    def child(self, module: str, name: str, args: list[str]) -> Child:
        c = Child(module, args, self.work / f"{name}.log")
        self.children.append(c)
        return c

    def cleanup(self) -> None:
        for c in self.children:
            try:
                c.kill()
            except Exception as exc:  # (a child already gone)
                log(f"{c.log_path.name}: {exc}")
        for s in [*self.computes, *([self.edge] if self.edge else [])]:
            try:
                stop_server_tree(s)
            except Exception as exc:
                log(f"stopping a server: {exc}")
        if self.redis is not None:
            self.redis.daemon.stop()
        if self.kafka is not None:
            self.kafka.stop()
        self.sampler.stop()

    # -- the group ----------------------------------------------------------------------------------------
    def members(self) -> list[int]:
        """Kafka's own view: slots held by each member of the group (empty while it rebalances)."""
        assert self.kafka is not None
        admin = AdminClient({"bootstrap.servers": self.kafka.bootstrap, "log_level": 2})
        try:
            futures = admin.describe_consumer_groups([f"{TOPIC}-compute"]).values()
            (description,) = [f.result(timeout=10) for f in futures]
        except KafkaException:
            return []
        return sorted(len(m.assignment.topic_partitions) for m in description.members)

    def running(self) -> list[int]:
        return [int(metrics_of(c).get("sparkwire_computations", -1)) for c in self.live()]

    def live(self) -> list[ServerProcess]:
        return [c for c in self.computes if c.process.poll() is None]

    def settle(self, n: int) -> float:
        """Seconds until the group has n members holding every slot and the live processes run every
        computation exactly once, steady for 3 s."""
        started = time.monotonic()
        steady_since: float | None = None
        while time.monotonic() - started < self.plan.settle_timeout_s:
            members, counts = self.members(), self.running()
            ok = (
                len(members) == n
                and sum(members) == self.plan.slots
                and sum(counts) == self.live_computations
                and min(counts) > 0
            )
            if ok:
                steady_since = steady_since or time.monotonic()
                if time.monotonic() - steady_since >= 3:
                    return round(steady_since - started, 1)
            else:
                steady_since = None
            time.sleep(0.5)
        raise RuntimeError(f"{n} processes never settled: members {self.members()}, running {self.running()}")

    # -- the run --------------------------------------------------------------------------------------------
    def run(self) -> None:
        p = self.plan
        self.sampler.start()
        self.kafka = start_kafka(self.work / "kafka")
        self.redis = start_redis(self.work / "redis")
        log(f"kafka on {self.kafka.bootstrap}, redis on {self.redis.url}")
        self.start_compute()
        base = self.work / "edge"
        self.edge = start_server(base / "data", base.with_suffix(".log"), self.env("edge"), 180)
        self.sampler.track("edge", self.edge.pid)
        feed_spec = {
            "port": self.edge.port,
            "rid": RID,
            "channels": p.channels,
            "rate_hz": p.rate_hz,
            "request_ms": p.request_ms,
            "duration_s": 24 * 3600,
            "out": str(self.work / "feed.npy"),
        }
        feed = self.child("bench.feed", "feed", [json.dumps(feed_spec)])
        # (2,000 computations at the mix's 7 buckets more each would ask up to 14,093 buckets of a
        # 60 s window at 100 Hz, more than its points: the edge's snapshots then outgrew Redis's
        # subscriber buffer, 512 MB, at each re-sync)
        mix = comps.mix(RID, p.computations, list(comps.KINDS), p.channels, bucket_step=1)
        conns = [
            [{"sub": s.body, "measure": s.measure} for s in mix[i :: p.connections]]
            for i in range(p.connections)
        ]
        clients = []
        subscribed = time.monotonic()
        ready = []
        for k in range(p.client_processes):
            spec = {
                "url": self.edge.ws_url,
                "deflate": True,
                "out": str(self.work / f"clients{k}.npy"),
                "connections": conns[k :: p.client_processes],
                "ready_timeout": 600,
            }
            path = write_spec(self.work / f"clients{k}.json", spec)
            clients.append(self.child("bench.clients", f"clients{k}", ["stream", path]))
            ready.append(clients[-1].read(timeout=900))
        assert self.edge is not None
        self.results["subscribed"] = {
            "ready": sum(r["ready"] for r in ready),
            "errors": [e for r in ready for e in r["creation_errors"]],
            "seconds": round(time.monotonic() - subscribed, 1),
            "live": int(metrics_of(self.edge).get("sparkwire_subscriptions", 0)),
        }
        log(f"subscriptions live: {self.results['subscribed']}")
        self.live_computations = int(metrics_of(self.edge).get("sparkwire_computations", 0))
        self.results["arms"] = []
        for n in p.processes:
            while len(self.computes) < n:
                self.start_compute()
            self.results["arms"].append(self.arm(n))
        self.results["failover"] = self.failover()
        time.sleep(p.failover_s)
        self.results["feed"] = feed.finish(timeout=60)
        self.results["failover"]["feed_to"] = time.time_ns()
        self.close_feed()
        self.results["failover"]["drained_s"] = self.drain()
        fo = self.results["failover"]
        fo["edge_resyncs"] = _resyncs_since(fo["edge_resyncs_at_kill"], self.edge_resyncs())
        fo["records_to"] = time.time_ns()
        self.results["clients"] = [c.finish(timeout=120) for c in clients]
        self.figures(
            np.load(self.work / "feed.npy"),
            [np.load(self.work / f"clients{k}.npy") for k in range(len(clients))],
        )

    def close_feed(self) -> None:
        """A short run of ticks on every channel closing_gap_s after the feed's last (why:
        ShardPlan.closing_gap_s)."""
        p, edge = self.plan, self.edge
        assert edge is not None
        time.sleep(p.closing_gap_s)
        tick_ns = 1_000_000_000 // p.rate_hz
        k = time.time_ns() // tick_ns
        payload = feed_body(RID, p.channels, k, k + p.closing_ticks - 1, tick_ns)
        answer = httpx.post(
            f"{edge.base_url}/storage/writer/v1",
            content=payload,
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        answer.raise_for_status()

    def drain(self) -> float:
        """Wait until the edge has sent no frame for quiet_s (at most drain_s); the seconds taken."""
        p, edge = self.plan, self.edge
        assert edge is not None
        started = last_change = time.monotonic()
        sent = metrics_of(edge).get("sparkwire_frames_sent_total", 0.0)
        log(f"feed stopped; the subscribers catch up (until no frame for {p.quiet_s:.0f} s)")
        while time.monotonic() - last_change < p.quiet_s and time.monotonic() - started < p.drain_s:
            time.sleep(1)
            now_sent = metrics_of(edge).get("sparkwire_frames_sent_total", sent)
            if now_sent != sent:
                sent, last_change = now_sent, time.monotonic()
        took = round(time.monotonic() - started, 1)
        log(f"caught up after {took} s" if took < p.drain_s else f"still sending after {took} s")
        return took

    def edge_resyncs(self) -> dict[str, float]:
        """The edge's re-syncs of every mirror since it started, by cause (app/tiers/edge.py)."""
        assert self.edge is not None
        prefix = 'sparkwire_edge_resyncs_total{cause="'
        return {k[len(prefix) : -2]: v for k, v in metrics_of(self.edge).items() if k.startswith(prefix)}

    def arm(self, n: int) -> Json:
        p = self.plan
        resyncs_from = self.edge_resyncs()  # (the settling included: a process joined)
        settled = self.settle(n)
        log(f"{n} process(es) settled in {settled} s; warming up {p.warmup_s:.0f} s")
        time.sleep(p.warmup_s)
        live = self.live()
        before = [metrics_of(c) for c in live]
        t_from, s_from = time.time_ns(), self.sampler.now()
        time.sleep(p.window_s)
        t_to, s_to = time.time_ns(), self.sampler.now()
        after = [metrics_of(c) for c in live]
        processes = []
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            usage = self.sampler.usage(f"compute{self.computes.index(live[i]) + 1}", s_from, s_to)
            batches = _delta(b, a, "sparkwire_microbatch_duration_seconds_count")
            processes.append(
                {
                    "computations": a.get("sparkwire_computations"),
                    "evaluation_cpu_pct": round(
                        100 * _delta(b, a, "sparkwire_evaluation_cpu_seconds_total") / p.window_s, 1
                    ),
                    "batches_per_s": round(batches / p.window_s, 2),
                    "batch_ms": round(
                        1000 * _delta(b, a, "sparkwire_microbatch_duration_seconds_sum") / batches, 1
                    )
                    if batches
                    else None,
                    "usage": usage.as_dict() if usage else None,
                }
            )
        edge = self.sampler.usage("edge", s_from, s_to)
        result = {
            "processes": n,
            "settled_s": settled,
            "members": self.members(),
            "window": [t_from, t_to],
            "per_process": processes,
            "edge": edge.as_dict() if edge else None,
            "edge_resyncs": _resyncs_since(resyncs_from, self.edge_resyncs()),
            "machine_pct": round(self.sampler.machine_pct(s_from, s_to), 1),
        }
        log(
            f"{n} process(es): computations {[x['computations'] for x in processes]}, evaluation CPU "
            f"{[x['evaluation_cpu_pct'] for x in processes]}% of a core, machine {result['machine_pct']}%"
        )
        return result

    def failover(self) -> Json:
        """SIGKILL the second compute process (its JVM goes with it) while the feed runs."""
        victim = self.computes[1]
        held = int(metrics_of(victim).get("sparkwire_computations", 0))
        members = self.members()
        resyncs_at_kill = self.edge_resyncs()
        killed = time.time_ns()
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait()
        log(f"compute2 killed (it ran {held} computations); recording {self.plan.failover_s:.0f} s")
        self.settle(len(self.computes) - 1)  # (raises if it never does)
        return {
            "killed": killed,
            "victim_computations": held,
            "members_before": members,
            "settled_s_after_kill": round((time.time_ns() - killed) / 1e9, 1),
            "members_after": self.members(),
            "running_after": self.running(),
            "edge_resyncs_at_kill": resyncs_at_kill,
        }

    # -- figures from the records ---------------------------------------------------------------------------
    def figures(self, feed: np.ndarray, parts: list[np.ndarray]) -> None:
        # each client process numbers its subscriptions from 0: keep them apart
        frames = np.concatenate(
            [np.column_stack([f[:, 0] + 1_000_000 * k, f[:, 1:]]) for k, f in enumerate(parts)]
        )
        for arm in self.results["arms"]:
            t_from, t_to = arm["window"]
            d = delivery_latency(feed, frames, t_from, t_to)
            arm["latency"] = summarize(d.latencies_ms).as_dict()
            arm["writes_never_shown"] = d.missing
        fo = self.results["failover"]
        killed = fo["killed"]
        after = frames[frames[:, 1] > killed]
        recovery: dict[int, float] = {}
        moved: set[int] = set()
        for sub in np.unique(frames[:, 0]).tolist():
            mine = after[after[:, 0] == sub]
            if (mine[:, 3] == 1).any():
                moved.add(sub)
            showing = mine[mine[:, 2] >= killed]  # a point written after the kill
            if len(showing):
                recovery[sub] = (int(showing[:, 1].min()) - killed) / 1e9
            elif sub in moved:  # a ranges subscription: its new owner's FullResult
                recovery[sub] = (int(mine[mine[:, 3] == 1][:, 1].min()) - killed) / 1e9
        # a subscription whose frames show no point (ranges) and that did not move shows nothing new
        shown = set(np.unique(frames[frames[:, 2] >= 0][:, 0]).tolist())
        subs = [s for s in np.unique(frames[:, 0]).tolist() if s in shown or s in moved]
        moved_rec = [recovery[s] for s in moved if s in recovery]
        kept_rec = [recovery[s] for s in subs if s not in moved and s in recovery]
        # every write acknowledged from the kill to the feed's end, shown by every subscriber by the
        # end of the records (once the edge was quiet: drain)?
        d = delivery_latency(feed, frames, killed, fo["feed_to"])
        fo.update(
            {
                "subscriptions": len(subs),
                "moved": len(moved),
                "moved_recovered": len(moved_rec),
                "moved_recovery_s": _spread(moved_rec),
                "kept_recovery_s": _spread(kept_rec),
                "never_recovered": sum(1 for s in subs if s not in recovery),
                "writes_never_shown": d.missing,
                "latency_after": summarize(d.latencies_ms).as_dict(),
            }
        )
        errors = sum(c.get("update_error_count", 0) for c in self.results["clients"])
        fo["update_errors"] = errors
        fo["update_error_names"] = sorted(
            {e["error"] for c in self.results["clients"] for e in c.get("update_errors", [])}
        )
        acked = feed[feed[:, 4] == 200]
        fo["points_acked"] = int(acked[:, 3].sum())
        fo["writes_refused"] = int((feed[:, 4] != 200).sum())


def _delta(before: dict[str, float], after: dict[str, float], name: str) -> float:
    return after.get(name, 0.0) - before.get(name, 0.0)


def _resyncs_since(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    return {cause: int(after[cause] - before.get(cause, 0)) for cause in after}


def _resyncs(counts: dict[str, int] | None) -> str:
    """`subscription_closed 3, compute_lost 0, ...` (causes: app/tiers/edge.py's RESYNC_CAUSES)."""
    if counts is None:
        return "n/a"
    return ", ".join(f"{cause} {n}" for cause, n in counts.items()) or "none"


def _spread(xs: list[float]) -> Json:
    if not xs:
        return None
    a = np.asarray(xs)
    return {"n": len(xs), "p50": round(float(np.percentile(a, 50)), 2), "max": round(float(a.max()), 2)}


# -- the report ---------------------------------------------------------------------------------------------
def unevenness(shares: list[float]) -> float:
    """The largest departure of one process's share from an even split, relative to it."""
    n = len(shares)
    total = sum(shares)
    return max(abs(s * n / total - 1) for s in shares) if total else float("nan")


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _each(xs: list[Any], fmt: str) -> str:
    return " / ".join(_f(x, fmt) for x in xs)


def _tree(usage: Json | None) -> str:
    """A process tree's CPU and its parts: the Python process, the JVM, Spark's Python workers."""
    use = usage or {}
    cats = use.get("categories_pct", {})
    parts = [_f(cats.get(k), "{:.0f}") for k in ("python", "jvm", "spark workers")]
    return f"{_f(use.get('cpu_pct'), '{:.0f}%')} ({' / '.join(parts)})"


def render(r: Json) -> str:
    p, m = r["plan"], r["machine"]
    rate = p["channels"] * p["rate_hz"]
    lines = [
        "# Sparkwire sharded compute: 1, 2, 3 compute processes over the same computations",
        "",
        "Generated by `bench/sharded_compute.py` (`make bench-scale-out` runs it after "
        "`bench/scale_out.py`). Every figure comes from one run on this machine: a throwaway Kafka "
        "broker (KRaft) and redis-server, `sparkwire serve --role compute` processes sharing the live "
        f"computations through Kafka's consumer group ({p['slots']} slots, docs/decisions/0089), one "
        "`--role edge`, all on 127.0.0.1, driven by separate feed and client processes (bench/feed.py, "
        "bench/clients.py). What it means at scale: docs/decisions/0091.",
        "",
        f"- Date: {r['started']} (run took {r['duration_s']} s)",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Linux {m['kernel']}; "
        f"Python {m['python']}; {m['java']}; {pyspark_line(m)}",
        f"- Load average when the run started: {', '.join(str(x) for x in m['load_average_at_start'])}",
        f"- Reproduce: `{r['command']}`",
        f"- Code measured: app/, compute/, schemas/ with sha256 {r['code']['sha256']} over their .py files.",
        f"- Load: {p['computations']:,} distinct computations (raw, bucketed, arithmetic, ranges: "
        f"bench/computations.py), one subscription each on {p['connections']} connections; the feed "
        f"writes {p['channels']} channels x {p['rate_hz']} Hz ({rate:,} points/s) through the edge; "
        f"trigger {p['trigger_ms']} ms; the point log: Kafka. "
        f"Subscribed in {p['client_processes']} waves: "
        f"{r['subscribed']['ready']:,} answered, {r['subscribed']['live']:,} live on the edge, in "
        f"{r['subscribed']['seconds']} s (creation errors: {r['subscribed']['errors'][:3]}).",
        "- Each arm: the processes started join, the group settles (Kafka's group has them all, each "
        "holding slots, and they run every computation once between them, steady for 3 s), "
        f"{p['warmup_s']:.0f} s warm-up, then a {p['window_s']:.0f} s window.",
        "",
        "Evaluation CPU is each process's micro-batch thread's CPU time applying batches to its "
        "computations (`sparkwire_evaluation_cpu_seconds`), % of one core; its tree's CPU adds "
        "the JVM, where Spark's Kafka source reads the whole point topic in every process.",
        "",
        "## Targets",
        "",
        _row("target", "wanted", "measured", "verdict"),
        "|---|---|---|---|",
    ]
    tolerance = p["even_tolerance"]
    for arm in r["arms"]:
        if arm["processes"] < 2:
            continue
        for what, key, fmt in (
            ("computations", "computations", "{:,.0f}"),
            ("evaluation CPU", "evaluation_cpu_pct", "{:.1f}%"),
        ):
            shares = [x[key] or 0 for x in arm["per_process"]]
            u = unevenness(shares)
            lines.append(
                _row(
                    f"{arm['processes']} processes: each one's share of the {what}",
                    f"within {tolerance:.0%} of even",
                    f"{_each(shares, fmt)} (worst {u:+.0%})",
                    "met" if u <= tolerance else "missed",
                )
            )
    fo = r["failover"]
    mr, kr = fo.get("moved_recovery_s") or {}, fo.get("kept_recovery_s") or {}
    worst = mr.get("max")
    ok = worst is not None and worst <= p["failover_target_s"] and not fo["never_recovered"]
    lines += [
        _row(
            "failover: SIGKILL 1 of 3; every subscriber of a moved computation shows a point written "
            "after the kill",
            f"<= {p['failover_target_s']:.0f} s",
            f"{_f(worst, '{:.1f} s')} ({fo['moved_recovered']:,} of {fo['moved']:,} moved; "
            f"{fo['never_recovered']} subscribers never)",
            "met" if ok else "missed",
        ),
        _row(
            "failover: acknowledged writes some subscriber never showed",
            "0",
            f"{fo['writes_never_shown']:,}",
            "met" if fo["writes_never_shown"] == 0 else "missed",
        ),
        "",
        "## Per arm",
        "",
        _row(
            "processes",
            "settled in",
            "slots per member",
            "computations per process",
            "evaluation CPU per process",
            "tree CPU per process (Python / JVM / workers)",
            "batches/s per process",
            "p50 / p99 write -> frame",
            "machine busy",
            "edge re-syncs of every mirror, from the arm's start",
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in r["arms"]:
        pp, lat = arm["per_process"], arm["latency"]
        lines.append(
            _row(
                str(arm["processes"]),
                f"{arm['settled_s']} s",
                str(arm["members"]),
                _each([x["computations"] for x in pp], "{:,.0f}"),
                _each([x["evaluation_cpu_pct"] for x in pp], "{:.1f}%"),
                "; ".join(_tree(x["usage"]) for x in pp),
                _each([x["batches_per_s"] for x in pp], "{:.2f}"),
                f"{_each([lat['p50_ms'], lat['p99_ms']], '{:,.0f}')} ms",
                _f(arm["machine_pct"], "{:.0f}%"),
                _resyncs(arm.get("edge_resyncs")),
            )
        )
    after = fo["latency_after"]
    lines += [
        "",
        "## Failover",
        "",
        _row("what", "figure"),
        "|---|---|",
        _row(
            "the killed process ran",
            f"{fo['victim_computations']:,} computations (slots per member before: {fo['members_before']})",
        ),
        _row(
            "the group settled again (2 members, every computation running)",
            f"{_f(fo['settled_s_after_kill'], '{:.1f} s')} after the kill; slots per member "
            f"{fo['members_after']}, computations {fo['running_after']}",
        ),
        _row(
            "subscriptions that got a FullResult after the kill (their computation moved, or the edge "
            "re-synced every mirror)",
            f"{fo['moved']:,} of {fo['subscriptions']:,}",
        ),
        _row(
            "moved: seconds until each showed a point written after the kill, p50 / max",
            _each([mr.get("p50"), mr.get("max")], "{:.1f}"),
        ),
        _row("not moved: the same, p50 / max", _each([kr.get("p50"), kr.get("max")], "{:.1f}")),
        _row(
            "the edge's re-syncs of every mirror, from the kill to the end of the records",
            _resyncs(fo.get("edge_resyncs")),
        ),
        _row(
            "errors subscribers were told on the way", f"{fo['update_errors']:,} {fo['update_error_names']}"
        ),
        _row(
            "acknowledged writes after the kill never shown by some subscriber"
            + (
                ""
                if "drained_s" not in fo
                else f" ({fo['drained_s']:.0f} s after the feed stopped: no frame for {p['quiet_s']:.0f} s,"
                f" or {p['drain_s']:.0f} s at most; a closing run of {p.get('closing_ticks', 1)} ticks a"
                f" channel {p.get('closing_gap_s', 0):g} s after the feed's last, not counted, proves that"
                " last write in bucketed frames)"
            ),
            f"{fo['writes_never_shown']:,}",
        ),
        _row(
            "write -> frame after the kill, p50 / p99 (the hand-over included)",
            f"{_each([after['p50_ms'], after['p99_ms']], '{:,.0f}')} ms",
        ),
        _row(
            "points acknowledged in the run / requests refused",
            f"{fo['points_acked']:,} / {fo['writes_refused']:,}",
        ),
        "",
        f"Raw figures: {r['json_name']} beside this file.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    harness_main.main(
        argv,
        "sharded_compute",
        __doc__,
        (FULL, SMOKE),
        ("BENCHMARKS.sharded.md", "sharded.md"),
        Sharded,
        render,
        log,
    )


if __name__ == "__main__":
    main()
