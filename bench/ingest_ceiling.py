"""The ingest ceiling of each write endpoint, from one run: a workload of `make bench`
(bench/run.py, `--only ingest_ceiling`), or alone: `python -m bench.ingest_ceiling [--smoke]`.

A fresh server, one subscriber to a raw window of the feed's first channel (as workload 1), then for
each endpoint a ramp of total rates, `step_s` seconds each, until a step fails to hold: fewer than
95% of the target points stored, an end-to-end p99 over 500 ms, a failed request, or (JSON) requests
answered in over 500 ms at p99 (`why_not_held`). The ramp runs
through the listed rates, then climbs by `step_up` until a step fails or `max_rate` (its bound, so
the run ends) was held. The ceiling is the highest rate held. The endpoints:
- json: bench/feed.py, `POST /storage/writer/v1`, one request every 10 ms from each of `json_feeds` processes
  (each its share of the channels), latency from each 200 of the one writing the subscribed channel;
- protobuf: Nominal's own client (`nominal-streaming`, its Rust core: protobuf + zstd to
  `POST /storage/writer/v1/nominal/{rid}`), fed `enqueue_batch` every 10 ms with its request delay
  at 10 ms too. The client answers nothing per request, so a point's latency runs from its enqueue
  (the client's own batching included) to the frame, and the points stored are the server's count
  (`sparkwire_points_ingested_total`);
- columnar: bench/feed.py's `columnar` format, the same points as WriteColumnBatchesRequests to
  `POST /storage/writer/v1/columnar` (a column of timestamps and one of values a channel);
- remote_write: bench/feed.py's `remote_write` format, Prometheus remote write (a snappy protobuf
  WriteRequest, a TimeSeries a channel, timestamps in whole milliseconds) to
  `POST /storage/writer/v1/prometheus/{rid}`.
The HTTP feeds (json, columnar, remote_write) run alike: latency from each 200, request round trips judged.
Both feeds run on the same two cores as the server; each step gives the feed's CPU beside the
server's, split by where the work runs: the server's event loop (its main thread: HTTP, the body's
decompression and decoding), its log writer threads (the log's commits, merges), its other threads
(the micro-batch callback: collecting each batch, evaluation), Spark's JVM and Spark's Python
runners (the stream's reads of the log). The server's threads are named by `py-spy dump` (the bench
extra); without it the log writer's share stays in "other".

`measure(plan, work)` returns the figures as a dict (bench/run.py's workload); run alone, it writes
its section into BENCHMARKS.md between the `ingest-ceiling` markers (bench/report.py keeps that
section when it rewrites the file from a run without this workload) and every figure to
BENCHMARKS.ingest.json.

    python -m bench.ingest_ceiling [--smoke] [step_s=20] [json_rates=...] [step_up=...] [max_rate=...]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import computations as comps
from bench.children import Child, write_spec
from bench.feed import TABLE, channel_name
from bench.plan import with_overrides
from bench.procstat import (
    cpu_seconds,
    machine_busy_seconds,
    python_thread_names,
    thread_cpu_seconds,
    tree,
)
from bench.serverproc import ROOT, ServerProcess, start_server
from bench.stats import delivery_latency, summarize

Json = Any
RID = "ri.bench.main.dataset.ingest"  # five parts: the Rust client refuses anything else
MARK_BEGIN = "<!-- ingest-ceiling:begin -->"
MARK_END = "<!-- ingest-ceiling:end -->"
TARGET = 1_000_000  # points/s held, on each endpoint
ENDPOINTS = ("json", "protobuf", "columnar", "remote_write")
# the endpoints bench/feed.py writes (its `format`), in `json_feeds` processes; protobuf's is Nominal's client
HTTP_FEEDS = ("json", "columnar", "remote_write")
NAMES = {
    "json": "JSON",
    "protobuf": "protobuf + zstd",
    "columnar": "columnar JSON",
    "remote_write": "Prometheus remote write",
}


@dataclass(frozen=True)
class CeilingPlan:
    channels: int = 10
    step_s: float = 20.0
    warmup_s: float = 4.0
    # total points/s, in order; then `step_up` more each step until one fails or `max_rate` held
    json_rates: tuple[int, ...] = (200_000, 400_000, 600_000, 800_000, 1_000_000)
    protobuf_rates: tuple[int, ...] = (200_000, 400_000, 600_000, 800_000, 1_000_000)
    step_up: int = 200_000
    # JSON feed processes, each writing its share of the channels: one Python process building JSON
    # text fell behind the clock at 1,000,000 points/s (0.65 of a core) before the server did
    json_feeds: int = 2
    max_rate: int = 2_000_000  # twice the target: the ramp's bound, so that a run ends
    endpoints: tuple[str, ...] = ENDPOINTS  # the ramps to run, in order (bench/log_ingest.py: JSON)
    # steps at the first endpoint's first rate before any ramp, recorded apart and never judged: a
    # fresh JVM's first 20 s put the first step's p99 near the 500 ms limit (396 and 659 ms)
    warmup_steps: int = 0
    # whether a step's end-to-end p99 decides it: bench/log_ingest.py measures what a log accepts
    # (stored, request round trips, failures) and gives the end-to-end p99 beside it
    judge_latency: bool = True

    def rates(self, endpoint: str) -> Iterator[int]:
        """The ramp's rates for one endpoint: the listed ones, then up by `step_up` to `max_rate`."""
        # the columnar and remote write ramps climb as the JSON one does
        listed = [r for r in (self.protobuf_rates if endpoint == "protobuf" else self.json_rates) if r]
        rate = 0
        for rate in listed:
            if rate > self.max_rate:
                return
            yield rate
        while self.step_up > 0 and rate + self.step_up <= self.max_rate:
            rate += self.step_up
            yield rate


FULL = CeilingPlan()
# a couple of tiny steps per endpoint, the second one reached by `step_up`, the ramp ending at its bound
SMOKE = CeilingPlan(
    channels=2, step_s=4, warmup_s=1, json_rates=(1000,), protobuf_rates=(1000,), step_up=1000, max_rate=2000
)


# -- the protobuf feed: Nominal's Rust client, run as a child process ------------------------------------
def protobuf_feed(spec: Json) -> None:
    """Enqueue every tick since the last one, every 10 ms, for `duration_s`; rows as bench/feed.py's
    (sent, "200" = enqueue time, newest point ts, points, 200), saved to `out` after close()."""
    from nominal_streaming import NominalDatasetStream, PyNominalStreamOpts

    tick = 1_000_000_000 // spec["rate_hz"]
    opts = PyNominalStreamOpts(max_request_delay_secs=0.01).with_api_base_url(spec["base_url"])
    table = np.asarray(TABLE)
    rows: list[tuple[int, int, int, int, int]] = []
    stop = threading.Event()

    def stop_on_stdin() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=stop_on_stdin, daemon=True).start()
    cpu_before, began = time.process_time(), time.monotonic()
    with NominalDatasetStream("bench", opts).with_core_consumer(spec["rid"]) as stream:
        last_k = time.time_ns() // tick
        i = 0
        while time.monotonic() - began < spec["duration_s"] and not stop.is_set():
            i += 1
            time.sleep(max(0.0, began + i * 0.01 - time.monotonic()))
            now_k = time.time_ns() // tick
            if now_k <= last_k:
                continue
            ks = np.arange(last_k + 1, now_k + 1, dtype=np.int64)
            stamps = ks * tick
            sent = time.time_ns()
            for c in range(spec["channels"]):
                values = table[(ks + 97 * c) % 1000] + c
                stream.enqueue_batch(channel_name(c), stamps, values)
            rows.append((sent, sent, int(stamps[-1]), len(ks) * spec["channels"], 200))
            last_k = now_k
    closed = time.monotonic()
    np.save(spec["out"], np.array(rows, dtype=np.int64).reshape(-1, 5))
    print(
        json.dumps(
            {
                "requests": len(rows),
                "points_sent": int(sum(r[3] for r in rows)),
                "seconds": round(closed - began, 2),
                "cpu_cores": round((time.process_time() - cpu_before) / max(1e-9, closed - began), 2),
            }
        ),
        flush=True,
    )


# -- the ramp -----------------------------------------------------------------------------------------
def _cpu_split(pid: int, threads: dict[int, str]) -> dict[str, float]:
    """CPU seconds so far: the server's Python process (`server_python`, all its threads), split
    into its event loop (the main thread: HTTP, decompression, decoding), its log writer threads
    (`threads` names them; none if py-spy could not) and the rest (micro-batch callback, evaluation);
    then its JSON decode processes (app/ingest/workers.py: multiprocessing's children), Spark's JVM
    and Spark's Python runners."""
    total, loop = cpu_seconds(pid), thread_cpu_seconds(pid, pid)
    log = sum(thread_cpu_seconds(pid, t) for t, name in threads.items() if name.startswith("sparkwire-log"))
    split = {
        "server_python": total,
        "event_loop": loop,
        "log_writer": log,
        "server_other": total - loop - log,
        "decode_workers": 0.0,
        "jvm": 0.0,
        "spark_python": 0.0,
    }
    for p in tree(pid)[1:]:
        try:
            comm = Path(f"/proc/{p}/comm").read_text().strip()
            cmdline = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if comm == "java":
            split["jvm"] += cpu_seconds(p)
        elif b"multiprocessing" in cmdline:  # a decode process or multiprocessing's resource tracker
            split["decode_workers"] += cpu_seconds(p)
        else:
            split["spark_python"] += cpu_seconds(p)
    return split


def server_cores(cpu: dict[str, float]) -> float:
    """The server's whole process tree, in cores (a run from before decode workers has no such key)."""
    return cpu["server_python"] + cpu.get("decode_workers", 0.0) + cpu["jvm"] + cpu["spark_python"]


def _points_ingested(server: ServerProcess) -> float:
    return server.metrics().get("sparkwire_points_ingested_total", 0.0)


class Ramp:
    def __init__(
        self, plan: CeilingPlan, server: ServerProcess, work: Path, latency: Child, threads: dict[int, str]
    ) -> None:
        self.plan, self.server, self.work, self.latency = plan, server, work, latency
        self.threads = threads

    def step(self, endpoint: str, rate: int) -> Json:
        per_channel = max(1, rate // self.plan.channels)
        name = f"{endpoint}_{rate}"
        spec = {
            "port": self.server.port,
            "base_url": self.server.base_url,
            "rid": RID,
            "channels": self.plan.channels,
            "rate_hz": per_channel,
            "request_ms": 10,
            "duration_s": self.plan.step_s,
            "out": str(self.work / f"{name}.npy"),
        }
        before_points = _points_ingested(self.server)
        before_cpu = _cpu_split(self.server.pid, self.threads)
        before_machine = machine_busy_seconds()
        started, wall = time.time_ns(), time.monotonic()
        feeds = (
            self._json_feeds({**spec, "format": endpoint}, name)
            if endpoint in HTTP_FEEDS
            else [
                Child(
                    "bench.ingest_ceiling",
                    ["feed", write_spec(self.work / f"{name}.json", spec)],
                    self.work / f"{name}.log",
                )
            ]
        )
        dones = [feed.read(timeout=self.plan.step_s + 180) for feed in feeds]
        for feed in feeds:
            feed.process.wait(60)
        done = {
            "failed": sum(d.get("failed", 0) for d in dones),
            # the step's length: what each feed's sent points cover plus the ticks it never sent
            "span_s": max((d.get("span_s") or d.get("seconds") or 0) + d.get("behind_s", 0) for d in dones)
            or None,
            "behind_s": 0,
            "feed_behind_s": max(d.get("behind_s", 0) for d in dones),
            "cpu_cores": round(sum(d.get("cpu_cores") or 0 for d in dones), 2),
        }
        seconds = time.monotonic() - wall
        after_cpu = _cpu_split(self.server.pid, self.threads)
        machine = (machine_busy_seconds() - before_machine) / seconds
        stored = _points_ingested(self.server) - before_points
        rows = np.load(self.work / f"{name}.npy")
        # HTTP feeds: each request's round trip, over every feed process (the protobuf client reports none)
        feeds_out = [self.work / f"{name}.npy", *sorted(self.work.glob(f"{name}-*.npy"))]
        sent = [np.load(p) for p in feeds_out if endpoint in HTTP_FEEDS]
        trips = np.concatenate([(r[:, 1] - r[:, 0]) / 1e6 for r in sent if len(r)]) if sent else np.empty(0)
        newest = int(rows[:, 2].max()) if len(rows) else 0
        frames = self._frames_through(name, newest)
        lat = delivery_latency(rows, frames, started + int(self.plan.warmup_s * 1e9), time.time_ns())
        s = summarize(lat.latencies_ms)
        # the time the sent points cover, and the ticks a feed behind the clock never sent
        span = (done.get("span_s") or done.get("seconds") or self.plan.step_s) + done.get("behind_s", 0)
        achieved = stored / span
        failed = int(done.get("failed", 0))
        cpu = {k: round((after_cpu[k] - before_cpu[k]) / seconds, 2) for k in after_cpu}
        result = {
            "endpoint": endpoint,
            "target": rate,
            "achieved": round(achieved),
            "latency": s.as_dict(),
            "missing": lat.missing,
            "failed_requests": failed,
            # send -> 200: a server behind its load answers late, and the feed's next request carries more
            "request_ms": (
                {
                    "p50": round(float(np.percentile(trips, 50)), 1),
                    "p99": round(float(np.percentile(trips, 99)), 1),
                }
                if len(trips)
                else None
            ),
            "server_cpu_cores": cpu,
            "feed_cpu_cores": done.get("cpu_cores"),  # all feed processes
            "feed_behind_s": done["feed_behind_s"],  # the most any feed fell behind the clock
            "machine_cpu_cores": round(machine, 2),  # every process's, this harness's and others'
        }
        result["latency_judged"] = self.plan.judge_latency
        result["why_not"] = why_not_held(result)  # for readers of the JSON; the report judges anew
        result["ok"] = ok = not result["why_not"]
        server = server_cores(cpu)
        print(
            f"[ingest] {endpoint} {rate:>9,} points/s: stored {achieved:>11,.0f}/s, p99 {s.p99:7.1f} ms, "
            f"server {server:.2f} cores {cpu}, feed {done.get('cpu_cores')} "
            f"-> {'held' if ok else 'NOT held'}",
            file=sys.stderr,
            flush=True,
        )
        return result

    def _json_feeds(self, spec: Json, name: str) -> list[Child]:
        """The JSON feed processes, each with its share of the channels; the first one (channel 0,
        the subscriber's) writes `name`.npy, from which the latency is measured."""
        n = max(1, min(self.plan.json_feeds, self.plan.channels))
        shares = [self.plan.channels // n + (1 if i < self.plan.channels % n else 0) for i in range(n)]
        feeds, first = [], 0
        for i, share in enumerate(shares):
            suffix = "" if i == 0 else f"-{i}"
            feed_spec = {k: v for k, v in spec.items() if k != "base_url"}
            feed_spec.update(channels=share, first_channel=first, out=str(self.work / f"{name}{suffix}.npy"))
            feeds.append(Child("bench.feed", [json.dumps(feed_spec)], self.work / f"{name}{suffix}.log"))
            first += share
        return feeds

    def _frames_through(self, name: str, newest: int, timeout: float = 60) -> np.ndarray:
        """The latency subscriber's frames, once they include the step's newest point (or timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            path = self.work / f"frames_{name}.npy"
            self.latency.send(f"dump {path}")
            self.latency.read(timeout=60)
            frames = np.load(path)
            if (len(frames) and frames[:, 2].max() >= newest) or time.monotonic() > deadline:
                return frames
            time.sleep(0.5)


def measure(plan: CeilingPlan, work: Path, env: dict[str, str] | None = None) -> Json:
    """A fresh server in `work`, both endpoints' ramps; the figures as a dict."""
    work.mkdir(parents=True, exist_ok=True)
    results: Json = {
        "plan": asdict(plan),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "steps": [],
    }
    server = start_server(work / "data", work / "server.log", env or {})
    try:
        sub = comps.raw(RID, 0, 5000)
        spec = {
            "url": server.ws_url,
            "deflate": True,
            "out": str(work / "latency.npy"),
            "connections": [[{"sub": sub.body, "measure": sub.measure}]],
        }
        latency = Child(
            "bench.clients", ["stream", write_spec(work / "latency.json", spec)], work / "latency.log"
        )
        latency.read(timeout=300)
        threads = python_thread_names(server.pid)
        results["threads_named"] = sorted({n for n in threads.values() if n.startswith("sparkwire-log")})
        ramp = Ramp(plan, server, work, latency, threads)
        first = plan.endpoints[0]
        results["warmup"] = [ramp.step(first, next(plan.rates(first))) for _ in range(plan.warmup_steps)]
        for endpoint in plan.endpoints:
            for rate in plan.rates(endpoint):
                step = ramp.step(endpoint, rate)
                results["steps"].append(step)
                if not step["ok"]:
                    break
        latency.finish(timeout=60)
    finally:
        server.stop()
    for endpoint in plan.endpoints:
        results[f"{endpoint}_ceiling"] = ceiling(results, endpoint)
        # "failed" at the first step not held, else the ramp held every step to its bound
        results[f"{endpoint}_stopped"] = "failed" if failing_step(results, endpoint) else "bound"
    return results


def run(plan: CeilingPlan) -> Json:
    return measure(plan, Path(tempfile.mkdtemp(prefix="sparkwire-ingest-")))


MAX_P99_MS = 500


def why_not_held(step: Json) -> list[str]:
    """What kept a step from holding (nothing: it held), judged from its record, so that a report
    rendered again from an older run applies this rule. A JSON point's latency runs from its 200, so
    requests answered late would hide a server behind its load: their round trip is judged too."""
    lat, target, achieved = step["latency"], step["target"], step["achieved"]
    trips, failed = step.get("request_ms"), step.get("failed_requests", 0)
    late = not lat.get("n") or lat["p99_ms"] > MAX_P99_MS
    return [
        *([f"p99 over {MAX_P99_MS} ms"] if late and step.get("latency_judged", True) else []),
        *([f"{achieved / target:.0%} of the rate stored"] if achieved < 0.95 * target else []),
        *([f"{failed} requests failed"] if failed else []),
        *(
            [f"requests answered in {trips['p99']:,.0f} ms at p99"]
            if trips and trips["p99"] > MAX_P99_MS
            else []
        ),
    ]


def ramp(results: Json, endpoint: str) -> list[Json]:
    """An endpoint's steps up to the first that did not hold, where its ramp stops."""
    out = []
    for step in results.get("steps", []):
        if step["endpoint"] == endpoint:
            out.append(step)
            if why_not_held(step):
                break
    return out


def held_steps(results: Json, endpoint: str) -> list[Json]:
    """The steps of an endpoint's ramp that held: all but a failing last one."""
    steps = ramp(results, endpoint)
    return steps[:-1] if steps and why_not_held(steps[-1]) else steps


def ceiling(results: Json, endpoint: str) -> int:
    """The most points/s stored in a step that held."""
    return max((s["achieved"] for s in held_steps(results, endpoint)), default=0)


def rate_held(results: Json, endpoint: str) -> int:
    """The highest target rate of a step that held (what "N points/s held" is judged on)."""
    return max((s["target"] for s in held_steps(results, endpoint)), default=0)


def failing_step(results: Json, endpoint: str) -> Json | None:
    """The step that ended an endpoint's ramp (None if it held every step to the bound)."""
    steps = ramp(results, endpoint)
    return steps[-1] if steps and why_not_held(steps[-1]) else None


TITLE = "## Ingest ceiling per endpoint (`python -m bench.ingest_ceiling`)"


def render(results: Json, title: str = TITLE) -> str:
    plan = results["plan"]
    named = results.get("threads_named")
    lines = [
        MARK_BEGIN,
        title,
        "",
        f"Written {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC. A fresh server, one raw subscriber; "
        f"each step {plan['step_s']:.0f} s over {plan['channels']} channels, the rates listed in the plan, "
        f"then {plan['step_up']:,} points/s more each step until one fails or {plan['max_rate']:,} "
        "(the ramp's bound) was held; a step is held when at least 95% of its points are stored, "
        "end-to-end p99 <= 500 ms, no request fails and (JSON) requests are answered within 500 ms at "
        "p99. JSON: bench/feed.py, latency from each 200 (a request's own round trip, send to 200, is "
        "its own column: a server behind its load answers late, the feed's next request carries every "
        "point due since, and a point can reach the subscriber before its request's 200, a negative "
        "latency). "
        "Protobuf: Nominal's nominal-streaming client (Rust, protobuf + zstd), latency from each "
        "enqueue. Columnar and Prometheus remote write: bench/feed.py as JSON, the same points in "
        "their formats (remote write's timestamps in milliseconds). CPU in cores: the server's "
        "Python process, split into its event loop (HTTP, "
        "decompression, decoding), its log writer threads (commits, merges) and its other threads "
        "(the micro-batch callback: collecting each batch, evaluation); its JSON decode processes "
        "(large bodies, app/ingest/workers.py); Spark's JVM and Python runners (the stream's reads of "
        "the log); the feed's own. "
        + (
            f"Threads named by py-spy: {', '.join(named)}."
            if named
            else "py-spy could not name the server's threads: the log writer's CPU is in 'other'."
        ),
        "",
        "**Ceilings: "
        + ", ".join(
            f"{NAMES[e]} {ceiling(results, e):,} points/s" + _ended(results, e)
            for e in ENDPOINTS
            if any(s["endpoint"] == e for s in results["steps"])
        )
        + f"** (target: {TARGET:,} points/s held on each).",
        "",
        "| endpoint | target/s | stored/s | p50 ms | p99 ms | request p50 / p99 ms | server Python (all) "
        "| event loop | log writer | other threads | decode processes | JVM | Spark Python | feed | held |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in results["steps"]:
        cpu = s["server_cpu_cores"]
        why_not = why_not_held(s)
        held = "no: " + ", ".join(why_not) if why_not else "yes"
        lines.append(
            f"| {s['endpoint']} | {s['target']:,} | {s['achieved']:,} | {s['latency']['p50_ms']} | "
            f"{s['latency']['p99_ms']} | {_trips(s)} | {cpu['server_python']} | "
            f"{cpu.get('event_loop', '-')} | "
            f"{cpu.get('log_writer', '-')} | {cpu.get('server_other', '-')} | "
            f"{cpu.get('decode_workers', '-')} | {cpu['jvm']} | "
            f"{cpu['spark_python']} | {s['feed_cpu_cores']} | {held} |"
        )
    past = [s for e in ENDPOINTS for s in _after_stop(results, e)]
    if past:
        lines += [
            "",
            f"The {len(past)} step(s) after a ramp's first step not held ran under an older rule, which "
            "did not judge the requests' round trips; they are judged by this one above.",
        ]
    lines.append(MARK_END)
    return "\n".join(lines) + "\n"


def _after_stop(results: Json, endpoint: str) -> list[Json]:
    steps = [s for s in results.get("steps", []) if s["endpoint"] == endpoint]
    return steps[len(ramp(results, endpoint)) :]


def _trips(step: Json) -> str:
    trips = step.get("request_ms")
    return f"{trips['p50']} / {trips['p99']}" if trips else "-"


def _ended(results: Json, endpoint: str) -> str:
    step = failing_step(results, endpoint)
    if step is not None:
        return f" ({step['target']:,} not held)"
    return f" (every step held, {ramp_end(results, endpoint)})"


def ramp_end(results: Json, endpoint: str) -> str:
    """Where an endpoint's ramp ended without a failing step: at its bound, or its listed rates' end."""
    last = max(s["target"] for s in results["steps"] if s["endpoint"] == endpoint)
    bound, step_up = results["plan"].get("max_rate"), results["plan"].get("step_up", 0)
    end = "the ramp's bound" if bound and (not step_up or last + step_up > bound) else "where its rates ended"
    return f"up to {last:,} points/s, {end}"


def write_section(section: str, path: Path = ROOT / "BENCHMARKS.md") -> None:
    text = path.read_text() if path.exists() else ""
    if MARK_BEGIN in text and MARK_END in text:
        head, rest = text.split(MARK_BEGIN, 1)
        tail = rest.split(MARK_END, 1)[1].lstrip("\n")
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def kept_section(path: Path = ROOT / "BENCHMARKS.md") -> str:
    """The ingest-ceiling section of an existing report, for bench/report.py to carry over."""
    text = path.read_text() if path.exists() else ""
    if MARK_BEGIN not in text or MARK_END not in text:
        return ""
    return MARK_BEGIN + text.split(MARK_BEGIN, 1)[1].split(MARK_END, 1)[0] + MARK_END + "\n"


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "feed":
        arg = sys.argv[2]
        protobuf_feed(json.loads(Path(arg[1:]).read_text() if arg.startswith("@") else arg))
        return
    args = sys.argv[1:]
    smoke = "--smoke" in args
    plan = with_overrides(SMOKE if smoke else FULL, [a for a in args if a != "--smoke"])
    results = run(plan)
    if smoke:  # never over the full run's figures
        out = ROOT / "data" / "bench-smoke" / "ingest.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1))
    else:
        (ROOT / "BENCHMARKS.ingest.json").write_text(json.dumps(results, indent=1))
        write_section(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
