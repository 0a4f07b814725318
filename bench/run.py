"""`make bench`: run every workload against a real Sparkwire server and the baselines, then write
BENCHMARKS.md and a JSON file of every figure.

    python -m bench.run [--smoke] [--out BENCHMARKS.md] [--work DIR] [--only W[,W...]] [NAME=VALUE ...]

In order: the baselines (the naive design, then Spark's floor in a fresh process, at the run's
trigger and at a shorter one), a server for workloads 1-4 (2b: fan-out at 10x), then workload 5,
idle connections (a fresh server), workload 3b, long windows (a server of its own on a log filled
before it starts: bench/long_windows.py), then the ingest ceiling per endpoint (a fresh server:
bench/ingest_ceiling.py), then workload 3c's evaluation cost in process (no server:
bench/live_eval.py) and through a server of its own (bench/live_windows.py), then the report.

NAME=VALUE overrides any field of bench/plan.py's Plan (durations, rates, sizes);
long_windows.NAME=VALUE, ingest_ceiling.NAME=VALUE, live_eval.NAME=VALUE and live_windows.NAME=VALUE
those of their own plans, polled.NAME=VALUE bench/polled.py's. `--only` runs some workloads alone
(latency, fanout, fanout10x, subscribe, ingest, idle, baselines, long_windows, ingest_ceiling,
live_eval, live_windows, output_format, polled: issue 47's compute and FFT targets; ingest
brings latency along), e.g. `--only fanout10x` measures fan-out at 10x in a few minutes; the
report then says "not measured" of the rest.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench import computations as comps
from bench import ingest_ceiling, live_eval, live_through, live_windows, long_windows, output_format, polled
from bench.children import Child, write_spec
from bench.machine import describe_machine
from bench.plan import FULL, SMOKE, Plan, with_overrides
from bench.prefilled_server import batch_means, feed_child, round_robin
from bench.procstat import TreeSampler, cpu_seconds
from bench.report import render
from bench.serverproc import ServerProcess, start_server
from bench.stats import delivery_latency, summarize

Json = Any
PROCESS_STRIDE = 1_000_000  # subscription numbers of one client process stay below this
RID = "ri.bench.feed"
BENCH_RESULT_POINTS = 10**10  # the server's caps on held result points, out of the benches' way
SERVER_WORKLOADS = ("latency", "fanout", "fanout10x", "subscribe", "ingest")  # one shared server
WORKLOADS = (
    *SERVER_WORKLOADS,
    "idle",
    "baselines",
    "long_windows",
    "ingest_ceiling",
    "live_eval",
    "live_windows",
    "output_format",
    "polled",
)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Run:
    def __init__(
        self,
        plan: Plan,
        work: Path,
        only: frozenset[str] = frozenset(WORKLOADS),
        lw_plan: long_windows.LongWindowsPlan = long_windows.FULL,
        ceiling_plan: ingest_ceiling.CeilingPlan = ingest_ceiling.FULL,
        live_plan: live_eval.LiveEvalPlan = live_eval.FULL,
        windows_plan: live_windows.LiveWindowsPlan = live_windows.FULL,
    ) -> None:
        self.plan, self.work = plan, work
        self.lw_plan, self.ceiling_plan, self.live_plan = lw_plan, ceiling_plan, live_plan
        self.windows_plan = windows_plan
        self.keep_records = False  # --work given: workload 3b's history stays there too
        self.only = only | {"latency"} if "ingest" in only else only
        self.tick = 1_000_000_000 // plan.rate_hz
        self._baseline_budget: dict[str, float] = {}
        self.results: dict[str, Json] = {"plan": dataclasses.asdict(plan)}
        self.results["server_checkpoint"] = self.server_placement

    # -- helpers -------------------------------------------------------------------------------------------
    def child(self, module: str, name: str, spec: Json, *extra: str) -> Child:
        return Child(
            module, [*extra, write_spec(self.work / f"{name}.json", spec)], self.work / f"{name}.log"
        )

    def feed(self, server: ServerProcess, name: str, rate_hz: int, duration_s: float) -> Child:
        out, log_path = self.work / f"{name}.npy", self.work / f"{name}.log"
        return feed_child(
            server, RID, self.plan.channels, rate_hz, self.plan.request_ms, duration_s, out, log_path
        )

    def stream_clients(
        self,
        server: ServerProcess,
        name: str,
        subs: list[comps.BenchSubscription],
        connections: int,
        processes: int,
    ) -> list[Child]:
        """`subs` spread round-robin over `connections`, the connections over `processes`."""
        conns = round_robin([{"sub": s.body, "measure": s.measure} for s in subs], connections)
        children = []
        for p in range(processes):
            spec = {
                "url": server.ws_url,
                "deflate": self.plan.deflate,
                "out": str(self.work / f"{name}{p}.npy"),
                "connections": conns[p::processes],
            }
            children.append(self.child("bench.clients", f"{name}{p}", spec, "stream"))
        started = 0
        for c in children:
            ready = c.read(timeout=900)
            started += ready["ready"]
            if ready["ready"] != ready["subscriptions"]:  # measured anyway; the report shows the count
                log(f"{name}: {ready['ready']} of {ready['subscriptions']} subscriptions started: {ready}")
        self.results.setdefault("started_subscriptions", {})[name] = [started, len(subs)]
        log(f"{name}: {started} of {len(subs)} subscriptions started")
        return children

    def catch_up(self, clients: list[Child], name: str, newest_ts: int, timeout: float = 120) -> np.ndarray:
        """Frames so far of these stream clients, once every measured subscription shows `newest_ts`
        (or `timeout` passed): on a slow machine the stream lags, and a write in the measured window
        must still get its latency rather than be dropped as never shown."""
        deadline = time.monotonic() + timeout
        while True:
            parts = []
            for i, c in enumerate(clients):
                path = self.work / f"{name}.dump{i}.npy"
                c.send(f"dump {path}")
                c.read(timeout=60)
                parts.append(np.load(path))
            frames = np.concatenate(parts)
            measured = frames[frames[:, 2] >= 0]
            subs = np.unique(measured[:, 0])
            behind = [s for s in subs.tolist() if measured[measured[:, 0] == s][:, 2].max() < newest_ts]
            if not behind or time.monotonic() > deadline:
                return frames
            time.sleep(1)

    # -- baselines -----------------------------------------------------------------------------------------
    def baseline_phases(self) -> list[Json]:
        """Spark's floor at the other checkpoint placement, at the shorter trigger, collecting the
        batch's rows, then at the run's trigger with the server's placement (right before the server,
        and next to the shorter trigger's, which it is compared with; neither is a fresh JVM's
        first); the naive design."""
        p = self.plan
        floor = {"kind": "floor", "warmup_s": p.floor_warmup_s, "duration_s": p.floor_s}
        other = "disk" if self.server_placement == "tmpfs" else "tmpfs"
        floors = [{**floor, "name": f"floor_{other}", "checkpoint": other}]
        fast = p.floor_fast_trigger_ms
        if fast and fast != p.trigger_ms:
            floors.append(
                {
                    **floor,
                    "name": f"floor_{self.server_placement}_{fast}ms",
                    "checkpoint": self.server_placement,
                    "trigger_ms": fast,
                }
            )
        # the floor whose callback collects the rows (the Spark job the empty callback never runs),
        # then the empty one, last, right before the server (docs/decisions/0019)
        floors += [
            {
                **floor,
                "kind": "floor_collect",
                "name": f"floor_collect_{self.server_placement}",
                "checkpoint": self.server_placement,
            },
            {**floor, "name": f"floor_{self.server_placement}", "checkpoint": self.server_placement},
        ]
        return floors + [
            {
                "name": f"naive_{n}",
                "kind": "naive",
                "queries": n,
                "checkpoint": "tmpfs",
                "warmup_s": p.naive_warmup_s,
                "duration_s": p.naive_s,
            }
            for n in p.naive_queries
        ]

    def start_baselines(self, name: str, phases: list[Json]) -> Child:
        """One baselines process (its own Spark session) running `phases` in order."""
        p = self.plan
        spec = {
            "work_dir": str(self.work / name),
            "out": str(self.work / f"{name}.out.json"),
            "channels": p.channels,
            "rate_hz": p.rate_hz,
            "request_ms": p.request_ms,
            "trigger_ms": p.trigger_ms,
            "phases": phases,
        }
        log(f"{name}: {', '.join(ph['name'] for ph in phases)}")
        # each query gets through its first trigger before the next starts (a few seconds each)
        self._baseline_budget[name] = 300 + sum(
            ph["warmup_s"] + ph["duration_s"] + 60 + 10 * ph.get("queries", 1) for ph in phases
        )
        return self.child("bench.baselines", name, spec)

    def finish_baselines(self, name: str, child: Child) -> None:
        child.process.wait(self._baseline_budget[name])
        if child.process.returncode != 0:
            raise RuntimeError(f"{name} failed:\n{child.log_path.read_text(errors='replace')[-3000:]}")
        results = json.loads((self.work / f"{name}.out.json").read_text())
        self.results.setdefault("baselines", {}).update((r["name"], r) for r in results)
        # A py4j error's first line rarely names the cause; the JVM's log does when its heap ran out.
        oom = next(
            (
                line.strip()
                for line in child.log_path.read_text(errors="replace").splitlines()
                if line.startswith("java.lang.OutOfMemoryError")
            ),
            None,
        )
        for r in results:
            if r.get("error") and oom and "OutOfMemoryError" not in r["error"]:
                r["error"] += f" (the JVM logged {oom})"

    @property
    def server_placement(self) -> str:
        return "tmpfs" if self.plan.server_checkpoint.startswith("/dev/shm") else "disk"

    # -- workload 3b and the ingest ceiling: servers of their own ---------------------------------------
    def server_env(self) -> dict[str, str]:
        env = {"SPARKWIRE_TRIGGER_MS": str(self.plan.trigger_ms)}
        if self.plan.server_checkpoint:
            env["SPARKWIRE_CHECKPOINT_DIR"] = self.plan.server_checkpoint
        return env

    def long_windows(self) -> None:
        """Workload 3b: long windows, on a server started over a log filled beforehand."""
        log("workload 3b: long windows (history written first, then a server of their own)")
        # its history is gigabytes at the full plan: kept only when asked to keep the records
        self._own_server(
            "long_windows",
            lambda: long_windows.measure(
                self.lw_plan, self.work / "long-windows", self.server_env(), keep_log=self.keep_records
            ),
        )

    def ingest_ceiling(self) -> None:
        """Each write endpoint's ramp until a step fails to hold, on a fresh server."""
        log("workload 4: ingest ceiling per endpoint (a fresh server)")
        self._own_server(
            "ingest_ceiling",
            lambda: ingest_ceiling.measure(
                self.ceiling_plan, self.work / "ingest-ceiling", self.server_env()
            ),
        )

    def live_eval(self) -> None:
        """Workload 3c's evaluation CPU per micro-batch, hour windows against 60 s, in this process."""
        log("workload 3c: live long windows, evaluation per micro-batch (in process, no server)")
        try:
            self.results["live_eval"] = live_eval.measure(self.live_plan)
        except Exception as exc:  # the report says so; the other workloads' figures stand
            self.results.setdefault("errors", {})["live_eval"] = repr(exc)

    def output_format(self, smoke: bool) -> None:
        """LEGACY against ArrowPlot frames: bytes and encode/decode CPU, in this process."""
        log("output formats: LEGACY against Arrow, frame bytes and encode/decode cost (in process)")
        try:
            sizes = (100, 1000) if smoke else (100, 1000, 10000)
            self.results["output_format"] = output_format.measure(sizes, rounds=2 if smoke else 5)
        except Exception as exc:  # the report says so; the other workloads' figures stand
            self.results.setdefault("errors", {})["output_format"] = repr(exc)

    def live_windows(self, through: live_through.LiveThroughPlan) -> None:
        """Workload 3c through a server: hour windows beside 60 s ones, live at once; then `through`,
        the arms one after the other over history written through a running server."""
        log("workload 3c: live long windows through a server (history written first)")
        self._own_server(
            "live_windows",
            lambda: live_windows.measure(
                self.windows_plan,
                self.work / "live-windows",
                self.server_env(),
                keep_log=self.keep_records,
                through=through,
            ),
        )

    def idle(self) -> None:
        self._own_server("connections", self._measure_idle)

    def _measure_idle(self) -> Json:
        """Workload 5 on a fresh server: one that served the fan-outs first has freed heap that
        new connections reuse, so its RSS grew by less than they hold (5.5 KB a connection
        measured there, against 20.5 on a server without workload 2b before them)."""
        p = self.plan
        log("workload 5: idle connections (a fresh server)")
        env = {**self.server_env(), "SPARKWIRE_MAX_CONNECTIONS": str(p.idle_connections + 100)}
        work = self.work / "idle"
        work.mkdir(parents=True, exist_ok=True)
        server = start_server(work / "server-data", work / "server.log", env)
        sampler = TreeSampler(server.pid).start()
        w5: Child | None = None
        try:
            time.sleep(max(p.idle_settle_s, 10.0))  # past the fresh server's first micro-batches
            before_main, before_tree = (
                sampler.rss_main_now(),
                sampler.usage_since(sampler.mark() - 3).rss_max_bytes,
            )
            mark = sampler.mark()
            w5 = self.child(
                "bench.clients",
                "w5",
                {"url": server.ws_url, "count": p.idle_connections, "deflate": p.deflate},
                "idle",
            )
            opened = w5.read(timeout=600)
            time.sleep(p.idle_settle_s)
            after_main = sampler.rss_main_now()
            after_tree = sampler.usage_since(sampler.mark() - 2).rss_max_bytes
            answered = w5.finish(timeout=180)
            w5 = None
            return {
                "count": opened["open"],
                "open_seconds": opened["seconds"],
                "answered_ping": answered["answered"],
                "ping": answered["ping_ms"],
                "usage": sampler.usage_since(mark).as_dict(),
                "server_rss_before_mb": round(before_main / 2**20, 1),
                "server_rss_after_mb": round(after_main / 2**20, 1),
                "kb_per_connection": round((after_main - before_main) / max(1, opened["open"]) / 1024, 1),
                "tree_kb_per_connection": round(
                    (after_tree - before_tree) / max(1, opened["open"]) / 1024, 1
                ),
            }
        finally:
            if w5 is not None:
                w5.kill()
            sampler.stop()
            server.stop()

    def _own_server(self, key: str, measure: Callable[[], Json]) -> None:
        """A workload late in a long run that fails is reported as failed (its rows say "not
        measured", the error is in the JSON) rather than losing the figures measured before it."""
        try:
            self.results[key] = measure()
        except Exception as exc:
            log(f"{key} failed: {exc}")
            self.results.setdefault("errors", {})[key] = str(exc)[-2000:]

    # -- the server's workloads ------------------------------------------------------------------------------
    def server_workloads(self) -> None:
        p = self.plan
        subscriptions = p.fanout_subscriptions + p.fanout10x_subscriptions + 1000  # + w1's and w3's
        env = {
            "SPARKWIRE_TRIGGER_MS": str(p.trigger_ms),
            # the default connection cap (1000) is below workload 2b's connections
            "SPARKWIRE_MAX_CONNECTIONS": str(p.fanout_connections + p.fanout10x_connections + 100),
            # The clients are one unauthenticated tenant standing for many users: the per-tenant and
            # server-wide caps on subscriptions (1,024 / 16,384) and on the result points they hold
            # (8M / 32M, counted per subscription even when computations are shared) refuse most of
            # workload 2b's 10,000 subscriptions, which this bench measures, not the caps.
            "SPARKWIRE_MAX_SUBSCRIPTIONS_PER_TENANT": str(subscriptions),
            "SPARKWIRE_MAX_SUBSCRIPTIONS": str(subscriptions),
            "SPARKWIRE_MAX_RESULT_POINTS_PER_TENANT": str(BENCH_RESULT_POINTS),
            "SPARKWIRE_MAX_RESULT_POINTS": str(BENCH_RESULT_POINTS),
        }
        if p.server_checkpoint:
            env["SPARKWIRE_CHECKPOINT_DIR"] = p.server_checkpoint
        self.results["server_checkpoint"] = self.server_placement
        log("starting the server")
        server = start_server(self.work / "server-data", self.work / "server.log", env)
        sampler = TreeSampler(server.pid).start()
        children: list[Child] = []
        try:
            self._workloads(server, sampler, children)
        finally:
            for c in children:
                c.kill()
            sampler.stop()
            server.stop()

    def _workloads(self, server: ServerProcess, sampler: TreeSampler, children: list[Child]) -> None:
        p = self.plan
        feed = self.feed(server, "feed", p.rate_hz, duration_s=24 * 3600)
        children.append(feed)
        feed_started = time.monotonic()
        supported = self._probe_kinds(server)

        # 1. latency: one subscription with appends
        latency_sub = comps.raw(RID, 0, p.latency_window_ms)
        w1: Child | None = None
        if "latency" in self.only:
            log("workload 1: latency")
            [w1] = self.stream_clients(server, "w1", [latency_sub], 1, 1)
            children.append(w1)
            time.sleep(p.warmup_s)
            t_from, mark, before = time.time_ns(), sampler.mark(), server.metrics()
            time.sleep(p.latency_s)
            t_to, usage, after = time.time_ns(), sampler.usage_since(mark), server.metrics()
            self.catch_up([w1], "w1", t_to // self.tick * self.tick)
            self.results["latency"] = {
                "window": [t_from, t_to],
                "usage": usage.as_dict(),
                "batch": batch_means(before, after, p.latency_s),
            }

        # 2. fan-out: many subscriptions over distinct computations
        if "fanout" in self.only:
            log("workload 2: fan-out")
            mix = comps.mix(RID, p.fanout_computations, supported, p.channels)
            subs = [mix[i % len(mix)] for i in range(p.fanout_subscriptions)]
            fan = self.stream_clients(server, "w2", subs, p.fanout_connections, p.fanout_processes)
            children.extend(fan)
            time.sleep(p.fanout_warmup_s)
            f_from, mark = time.time_ns(), sampler.mark()
            time.sleep(p.fanout_s)
            f_to, usage = time.time_ns(), sampler.usage_since(mark)
            self.catch_up(fan, "w2", f_to // self.tick * self.tick)
            fan_done = [c.finish(timeout=120) for c in fan]
            self.results["fanout"] = {
                "window": [f_from, f_to],
                "usage": usage.as_dict(),
                "kinds": {k: sum(1 for s in subs if s.kind == k) for k in comps.KINDS},
                "unsupported_kinds": [k for k in comps.KINDS if k not in supported],
                "clients": fan_done,
            }

        # 2b. fan-out at 10x: 10,000 subscriptions over 1,000 computations on 1,000 connections
        if "fanout10x" in self.only:
            self._fanout10x(server, sampler, children, supported)

        # 3. subscribe: a new computation over the feed's history, and an already-live one
        if "subscribe" in self.only:
            wait = p.history_s - (time.monotonic() - feed_started)
            if wait > 0:
                log(f"workload 3 waits {wait:.0f}s for {p.history_s:.0f}s of history")
                time.sleep(wait)
            log("workload 3: subscribe")
            history_window = max(1, int(p.history_s))
            new = [
                comps.bucketed(RID, i % p.channels, 1000 + i, window_s=history_window).body
                for i in range(p.subscribe_new)
            ]
            spec = {
                "url": server.ws_url,
                "deflate": p.deflate,
                "new": new,
                "live": latency_sub.body,
                "live_repeats": p.subscribe_live,
            }
            mark = sampler.mark()
            w3 = self.child("bench.clients", "w3", spec, "subscribe")
            children.append(w3)
            got = w3.read(timeout=600)
            self.results["subscribe"] = {
                "history_s": history_window,
                "new": summarize(got["new_ms"]).as_dict(),
                "live": summarize(got["live_ms"]).as_dict(),
                "usage": sampler.usage_since(mark).as_dict(),
            }
        self.results["feed"] = feed.finish(timeout=60)

        # 4. ingest: raise the rate until workload 1's p99 passes 500 ms or the rate cannot be held
        if "ingest" in self.only:
            assert w1 is not None
            log("workload 4: ingest ramp")
            steps = []
            for rate in p.ingest_rates:
                per_channel = max(1, rate // p.channels)
                name = f"w4_{rate}"
                mark = sampler.mark()
                step = self.feed(server, name, per_channel, p.ingest_step_s)
                children.append(step)
                started = time.time_ns()
                done = step.read(timeout=p.ingest_step_s + 120)
                usage = sampler.usage_since(mark)
                rows = np.load(self.work / f"{name}.npy")
                acked = rows[rows[:, 4] == 200]
                newest = int(acked[:, 2].max()) if len(acked) else 0
                frames = self.catch_up([w1], name, newest, timeout=60)
                lat = delivery_latency(rows, frames, started + int(p.ingest_warmup_s * 1e9), time.time_ns())
                covered = (done.get("span_s") or p.ingest_step_s) + done.get("behind_s", 0)
                achieved = done["points_acked"] / covered
                s = summarize(lat.latencies_ms)
                ok = bool(s.n) and s.p99 <= 500 and achieved >= 0.95 * rate and done["failed"] == 0
                steps.append(
                    {
                        "target": rate,
                        "achieved": round(achieved),
                        "latency": s.as_dict(),
                        "missing": lat.missing,
                        "ok": ok,
                        "feed": done,
                        "usage": usage.as_dict(),
                    }
                )
                verdict = "ok" if ok else "FAILED"
                log(f"  {rate} points/s: achieved {achieved:.0f}, p99 {s.p99:.0f} ms, {verdict}")
                if not ok:
                    break
            self.results["ingest"] = {
                "steps": steps,
                "best": max((s["achieved"] for s in steps if s["ok"]), default=0),
            }

        # workload 1's figures, now that its frames are all in
        feed_rows = np.load(self.work / "feed.npy")
        w1_frames = None
        if w1 is not None:
            w1.finish(timeout=60)
            w1_frames = np.load(self.work / "w10.npy")
            lat = delivery_latency(feed_rows, w1_frames, *self.results["latency"]["window"])
            self.results["latency"].update(summarize(lat.latencies_ms).as_dict(), missing=lat.missing)
        for key, name, processes in (
            ("fanout", "w2", p.fanout_processes),
            ("fanout10x", "w6", p.fanout10x_processes),
        ):
            if key in self.results:
                self._fanout_figures(self.results[key], feed_rows, w1_frames, name, processes)

    def _fanout10x(
        self, server: ServerProcess, sampler: TreeSampler, children: list[Child], supported: list[str]
    ) -> None:
        """Workload 2b: workload 2 at ten times the subscriptions, computations and connections. Besides
        the server's tree, the server's own Python process (event loop, batch thread) and the client
        processes, which share the machine's cores, are measured over the same window."""
        p = self.plan
        log("workload 2b: fan-out at 10x")
        mix = comps.mix(RID, p.fanout10x_computations, supported, p.channels)
        subs = [mix[i % len(mix)] for i in range(p.fanout10x_subscriptions)]
        clients = self.stream_clients(server, "w6", subs, p.fanout10x_connections, p.fanout10x_processes)
        children.extend(clients)
        client_samplers = [TreeSampler(c.pid).start() for c in clients]
        try:
            time.sleep(p.fanout10x_warmup_s)
            f_from, mark, before = time.time_ns(), sampler.mark(), _metrics(server)
            main_from = cpu_seconds(server.pid)
            time.sleep(p.fanout10x_s)
            f_to, usage, after = time.time_ns(), sampler.usage_since(mark), _metrics(server)
            main_cores = (cpu_seconds(server.pid) - main_from) / ((f_to - f_from) / 1e9)
            client_cores = [round(cs.usage_since(mark).cpu_cores, 2) for cs in client_samplers]
        finally:
            for cs in client_samplers:
                cs.stop()
        self.catch_up(clients, "w6", f_to // self.tick * self.tick)
        done = [c.finish(timeout=300) for c in clients]
        self.results["fanout10x"] = {
            "window": [f_from, f_to],
            "usage": usage.as_dict(),
            "server_main_cpu_cores": round(main_cores, 2),
            "client_cpu_cores": client_cores,
            "batch": batch_means(before, after, p.fanout10x_s),
            "kinds": {k: sum(1 for s in subs if s.kind == k) for k in comps.KINDS},
            "measurable": len({i for i, s in enumerate(subs) if s.measure != "none"}),
            "unsupported_kinds": [k for k in comps.KINDS if k not in supported],
            "clients": done,
        }

    def _fanout_figures(
        self, out: Json, feed_rows: np.ndarray, w1_frames: np.ndarray | None, name: str, processes: int
    ) -> None:
        """A fan-out workload's latency (all subscriptions, and the worst one's p99), frames/s, MB/s."""
        window = out["window"]
        if w1_frames is not None:
            during = delivery_latency(feed_rows, w1_frames, *window)
            out["latency_sub_during"] = summarize(during.latencies_ms).as_dict()
        # Each client process numbers its subscriptions from 0: set each process's apart.
        frames = np.concatenate(
            [
                np.load(self.work / f"{name}{i}.npy") + np.array([i * PROCESS_STRIDE, 0, 0, 0, 0])
                for i in range(processes)
            ]
        )
        fl = delivery_latency(feed_rows, frames, *window)
        f0, f1 = window
        in_window = frames[(frames[:, 1] >= f0) & (frames[:, 1] <= f1)]
        worst = max(fl.p99_by_sub.items(), key=lambda kv: kv[1], default=None)
        out.update(
            summarize(fl.latencies_ms).as_dict(),
            missing=fl.missing,
            measured_subscriptions=len(np.unique(frames[frames[:, 2] >= 0][:, 0])),
            worst_sub_p99_ms=round(worst[1], 1) if worst else None,
            sub_p99_median_ms=round(float(np.median(list(fl.p99_by_sub.values()))), 1) if worst else None,
            frames_per_s=round(len(in_window) / ((f1 - f0) / 1e9)),
            mb_per_s=round(float(in_window[:, 4].sum()) / ((f1 - f0) / 1e9) / 2**20, 2),
        )

    def _probe_kinds(self, server: ServerProcess) -> list[str]:
        """The computation kinds this server accepts (a build without ranges still gets measured)."""
        subs = [comps.example(k, RID) for k in comps.KINDS]
        spec = {
            "url": server.ws_url,
            "deflate": self.plan.deflate,
            "out": str(self.work / "probe.npy"),
            "connections": [[{"sub": s.body, "measure": s.measure}] for s in subs],
            "ready_timeout": 120,
        }
        child = self.child("bench.clients", "probe", spec, "stream")
        child.read(timeout=300)
        done = child.finish(timeout=60)
        frames = np.load(self.work / "probe.npy")
        refused = {e["sub"] for e in done["update_errors"]}
        ok = [k for i, k in enumerate(comps.KINDS) if i not in refused and (frames[:, 0] == i).any()]
        log(f"computation kinds this server runs: {ok}")
        return ok or ["raw"]


def _metrics(server: ServerProcess) -> dict[str, float]:
    """The server's metrics, or none if it cannot answer in time (its event loop saturated): the
    batch figures are then missing, the workload still measured."""
    try:
        return server.metrics()
    except OSError as exc:
        log(f"GET /metrics failed ({exc}): no micro-batch figures for this window")
        return {}


def split_overrides(
    overrides: list[str],
) -> tuple[list[str], list[str], list[str], list[str], list[str]]:
    """NAME=VALUE for the Plan, long_windows.NAME=VALUE, ingest_ceiling.NAME=VALUE,
    live_eval.NAME=VALUE, live_windows.NAME=VALUE (prefix dropped)."""
    own: list[str] = []
    lw: list[str] = []
    ceiling: list[str] = []
    live: list[str] = []
    windows: list[str] = []
    for item in overrides:
        prefix, dot, rest = item.partition(".")
        if dot and prefix == "long_windows" and "=" in rest:
            lw.append(rest)
        elif dot and prefix == "ingest_ceiling" and "=" in rest:
            ceiling.append(rest)
        elif dot and prefix == "live_eval" and "=" in rest:
            live.append(rest)
        elif dot and prefix == "live_windows" and "=" in rest:
            windows.append(rest)
        else:
            own.append(item)
    return own, lw, ceiling, live, windows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="seconds-long run at a tiny load")
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--work", type=Path, default=None, help="keep logs and raw records here")
    parser.add_argument(
        "--only",
        default=",".join(WORKLOADS),
        help=f"comma-separated workloads to run, of {', '.join(WORKLOADS)}",
    )
    parser.add_argument("overrides", nargs="*", metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    only = frozenset(w for w in args.only.split(",") if w)
    if not only <= set(WORKLOADS):
        parser.error(f"--only: unknown workload(s) {', '.join(sorted(only - set(WORKLOADS)))}")
    polled_over = [x.removeprefix("polled.") for x in args.overrides if x.startswith("polled.")]
    own, lw, ceiling, live, windows = split_overrides(
        [x for x in args.overrides if not x.startswith("polled.")]
    )
    polled_plan = with_overrides(polled.SMOKE if args.smoke else polled.FULL, polled_over)
    plan = with_overrides(SMOKE if args.smoke else FULL, own)
    lw_plan = with_overrides(long_windows.SMOKE if args.smoke else long_windows.FULL, lw)
    ceiling_plan = with_overrides(ingest_ceiling.SMOKE if args.smoke else ingest_ceiling.FULL, ceiling)
    live_plan = with_overrides(live_eval.SMOKE if args.smoke else live_eval.FULL, live)
    windows_plan = with_overrides(live_windows.SMOKE if args.smoke else live_windows.FULL, windows)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # children inherit: 5,000 sockets each side
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    work = args.work or Path(tempfile.mkdtemp(prefix="sparkwire-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    run = Run(plan, work, only, lw_plan, ceiling_plan, live_plan, windows_plan)
    run.keep_records = args.work is not None
    started = time.time()
    run.results["machine"] = describe_machine()
    run.results["started"] = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started))
    run.results["command"] = " ".join(
        [
            "python -m bench.run",
            *(["--smoke"] if args.smoke else []),
            *([f"--only {args.only}"] if only != set(WORKLOADS) else []),
            *args.overrides,
        ]
    )
    phases = run.baseline_phases() if plan.baselines and "baselines" in only else []
    if phases and not plan.baselines_alongside:
        # The naive design first, then the floor in a fresh process: the floor is measured right
        # before the server starts, so workload 1's ratio to it spans minutes, not the whole
        # baseline run, of this shared machine's drifting speed.
        for name, naive in (("baselines-naive", True), ("baselines-floor", False)):
            part = [ph for ph in phases if (ph["kind"] == "naive") == naive]
            if part:
                run.finish_baselines(name, run.start_baselines(name, part))
    alongside = run.start_baselines("baselines", phases) if phases and plan.baselines_alongside else None
    if only & set(SERVER_WORKLOADS):
        run.server_workloads()
    if alongside is not None:
        run.finish_baselines("baselines", alongside)
    # Servers of their own, after the shared one (the floor stays right before workload 1).
    if "idle" in only:
        run.idle()
    if "long_windows" in only:
        run.long_windows()
    if "ingest_ceiling" in only:
        run.ingest_ceiling()
    if "live_eval" in only:
        run.live_eval()
    if "live_windows" in only:
        run.live_windows(live_through.SMOKE if args.smoke else live_through.FULL)
    if "output_format" in only:
        run.output_format(args.smoke)
    if "polled" in only:  # issue 47: compute and FFT over HTTP (servers of their own), LTTB in process
        log("polled: compute of a channel to 1,000 buckets, an FFT, LTTB (bench/polled.py)")
        run._own_server("polled", lambda: polled.measure(polled_plan, work / "polled", run.server_env()))
    run.results["duration_s"] = round(time.time() - started)
    kept = ingest_ceiling.kept_section(args.out)  # a standalone ceiling's section, if this run has none
    args.out.parent.mkdir(parents=True, exist_ok=True)
    (args.out.with_suffix(".json")).write_text(json.dumps(run.results, indent=1, default=str))
    args.out.write_text(render(run.results, kept))
    log(f"wrote {args.out} in {run.results['duration_s']} s (records in {work})")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
