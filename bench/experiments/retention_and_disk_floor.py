"""The embedded log's writer with and without retention pruning: an A/B of its acknowledgement latency.

Retention prunes expired blocks on the log's writer thread, between group commits, at most
PRUNE_BLOCKS blocks a step and a step every PRUNE_INTERVAL_S (every PRUNE_BACKLOG_INTERVAL_S while steps
come back full), each step ending with an incremental
vacuum and a WAL truncate (docs/decisions/0024-retention-and-disk-floor.md). A request queued while
a step runs waits for it, so the question is how much that adds to the latency ingest's 200 waits on.

Each run, in its own temporary directory:
- a backlog of `backlog_points` points `backlog_age_s` old, written in requests of
  `points_per_request` points over `series` series (as the server writes them) through a
  `DurableLog` that keeps everything, which is then closed;
- the log reopened as the server opens it (app/runtime/open_log.py): arm "pruning" with
  `Retention(seconds=retention_s, max_bytes=0)`, shorter than the backlog's age, so that it prunes
  the backlog all through the measurement; arm "no pruning" with `Retention(0, 0)` (keep forever);
- `rate` requests/s of fresh points for `duration_s`, submitted open loop from one thread; a
  request's latency is from `submit()` to its future resolving (the commit's fsync is behind it);
  the log's size (`size_bytes()`) is sampled every second and the prune stats (`pruned`) along.

The arms alternate (pruning, no pruning, pruning, ...) for `rounds` rounds, so that the machine's
noise hits both; the report gives each run, the median per arm and the ratio of the two.

Run: python -m bench.experiments.retention_and_disk_floor [backlog_points=3000000] [duration_s=30]
    [rounds=2] [NAME=VALUE ...]
Writes `out` (markdown, default data/bench-retention.md) and the raw numbers beside it (.json).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.machine import _cpu_model, _mem_gib
from bench.plan import with_overrides
from compute.storage.contract import SeriesWrite
from compute.storage.disk_space import Retention
from compute.storage.series import SeriesKey, SeriesKind
from compute.storage.sqlite.writer import PRUNE_BACKLOG_INTERVAL_S, PRUNE_BLOCKS, PRUNE_INTERVAL_S, DurableLog

Json = Any
ROOT = Path(__file__).resolve().parents[2]
NANOS = 1_000_000_000
RID = "ri.sparkwire.bench.dataset.retention"
PRUNING, KEEPING = "pruning", "no pruning"
MB = 1e6


@dataclass
class RetentionPlan:
    backlog_points: int = 3_000_000  # expired points in the log before the measurement
    backlog_age_s: float = 7200.0  # the backlog's newest point is this old
    retention_s: float = 3600.0  # arm "pruning": shorter than backlog_age_s, so all of it expires
    series: int = 20
    points_per_request: int = 1000  # over all series: blocks of points_per_request / series points
    rate: float = 100.0  # requests/s during the measurement (x points_per_request points/s)
    duration_s: float = 30.0
    rounds: int = 2  # each round runs both arms, pruning first
    in_flight: int = 4  # a feed's requests in flight at most (bench/feed.py), for "missed the rate"
    settle_s: float = 2.0  # pause between writing the backlog and reopening the log
    work_dir: str = ""  # parent of the runs' temporary directories (default: the system's)
    keep: int = 0  # 1: leave the runs' directories in place
    out: str = "data/bench-retention.md"

    @classmethod
    def parse(cls, args: list[str]) -> RetentionPlan:
        plan = with_overrides(cls(), args)
        if plan.retention_s >= plan.backlog_age_s:
            raise SystemExit("retention_s must be shorter than backlog_age_s, or nothing expires")
        if plan.points_per_request < plan.series:
            raise SystemExit("points_per_request must be at least series (one point a block)")
        return plan

    @property
    def per_series(self) -> int:
        return self.points_per_request // self.series

    @property
    def backlog_requests(self) -> int:
        return max(1, round(self.backlog_points / (self.per_series * self.series)))


def _keys(plan: RetentionPlan) -> list[SeriesKey]:
    return [SeriesKey.of(RID, f"ch{c:02d}", {"unit": "bench"}) for c in range(plan.series)]


def _request(keys: list[SeriesKey], ts: np.ndarray, values: np.ndarray) -> list[SeriesWrite]:
    """One request: the same timestamps on every series, as a feed sampling all channels writes."""
    return [SeriesWrite(key, SeriesKind.NUMERIC, ts, values + c) for c, key in enumerate(keys)]


# -- setup: the expired backlog ------------------------------------------------------------------------
def write_backlog(plan: RetentionPlan, path: Path) -> float:
    """The backlog, written through a log that keeps everything (no pruner running meanwhile), then
    closed; returns the seconds it took."""
    started = time.monotonic()
    keys, n = _keys(plan), plan.per_series
    tick = 1_000_000  # 1 ms between a series' points
    newest = time.time_ns() - int(plan.backlog_age_s * NANOS)
    first = newest - plan.backlog_requests * n * tick
    offsets = np.arange(n, dtype=np.int64) * tick
    values = np.sin(np.arange(n) / 50.0)
    log = DurableLog(path, retention=Retention(0, 0), min_free_bytes=0)
    try:
        pending: list[Future[int]] = []
        for r in range(plan.backlog_requests):
            pending.append(log.submit(_request(keys, first + r * n * tick + offsets, values)))
            if len(pending) >= 256:  # bounded, like a server's in-flight requests
                for fut in pending:
                    fut.result(timeout=120)
                pending.clear()
        for fut in pending:
            fut.result(timeout=120)
    finally:
        log.close()
    return time.monotonic() - started


# -- the measurement -----------------------------------------------------------------------------------
@dataclass
class Sample:
    t_s: float
    size_mb: float
    pruned_blocks: int
    pruned_points: int
    prune_steps: int


@dataclass
class Run:
    index: int
    arm: str
    retention: Json
    backlog_s: float  # writing the backlog
    backlog_blocks: int
    requests: int = 0
    errors: int = 0
    late_submits: int = 0  # the submitting thread behind its schedule by more than one interval
    missed: int = 0  # slots at which in_flight earlier requests were still unacknowledged
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    max_ms: float = float("nan")
    p99_while_pruning_ms: float = float("nan")  # requests submitted before the last prune step
    pruning_until_s: float = float("nan")  # the last sample in which pruned blocks grew
    prune: Json = field(default_factory=dict)  # the final PruneStats
    step_s: list[float] = field(default_factory=list)  # each prune step's duration, as observed
    samples: list[Sample] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def size_start_mb(self) -> float:
        return self.samples[0].size_mb if self.samples else float("nan")

    @property
    def size_end_mb(self) -> float:
        return self.samples[-1].size_mb if self.samples else float("nan")

    @property
    def size_min_mb(self) -> float:
        return min(s.size_mb for s in self.samples) if self.samples else float("nan")


class Sampler(threading.Thread):
    """The log's size and prune stats every second; the prune stats every 50 ms as well, to catch
    each step's duration (`last_step_s` of each `steps` value; a step is at most one a second)."""

    def __init__(self, log: DurableLog, began: float) -> None:
        super().__init__(name="retention-sampler", daemon=True)
        self.log, self.began = log, began
        self.samples: list[Sample] = []
        self.step_s: dict[int, float] = {}
        self.stop = threading.Event()

    def take(self) -> None:
        p = self.log.pruned
        self.samples.append(
            Sample(
                round(time.monotonic() - self.began, 2),
                round(self.log.size_bytes() / MB, 2),
                p.blocks,
                p.points,
                p.steps,
            )
        )

    def run(self) -> None:
        next_sample = self.began + 1.0
        while not self.stop.wait(0.05):
            p = self.log.pruned
            if p.steps:
                self.step_s[p.steps] = p.last_step_s  # later polls overwrite a torn read
            if time.monotonic() >= next_sample:
                self.take()
                next_sample += 1.0


def measure(plan: RetentionPlan, index: int, arm: str, parent: Path | None) -> Run:
    work = Path(tempfile.mkdtemp(prefix=f"sparkwire-retention-{index}-", dir=parent))
    try:
        path = work / "log.db"
        backlog_s = write_backlog(plan, path)
        retention = Retention(plan.retention_s, 0) if arm == PRUNING else Retention(0, 0)
        run = Run(index, arm, asdict(retention), round(backlog_s, 1), plan.backlog_requests * plan.series)
        time.sleep(plan.settle_s)  # before reopening: the pruner starts with the log
        # As app/runtime/open_log.py opens it (no free-space floor here: not what is measured).
        log = DurableLog(path, retention=retention, min_free_bytes=0)
        try:
            _load(plan, log, run)
        finally:
            log.close()
        return run
    finally:
        if not plan.keep:
            shutil.rmtree(work, ignore_errors=True)


def _load(plan: RetentionPlan, log: DurableLog, run: Run) -> None:
    keys, n = _keys(plan), plan.per_series
    interval = 1.0 / plan.rate
    count = int(plan.duration_s * plan.rate)
    offsets = np.arange(n, dtype=np.int64) * (int(interval * NANOS) // n)
    values = np.cos(np.arange(n) / 50.0)
    submitted = np.zeros(count, dtype=np.int64)  # perf_counter_ns
    acked = np.zeros(count, dtype=np.int64)
    failed = np.zeros(count, dtype=bool)
    futures: list[Future[int]] = []

    def on_done(i: int) -> Any:
        def done(fut: Future[int]) -> None:
            acked[i] = time.perf_counter_ns()  # on the writer thread, right as it resolves the future
            failed[i] = fut.exception() is not None

        return done

    began = time.monotonic()
    sampler = Sampler(log, began)
    sampler.take()
    sampler.start()
    for i in range(count):
        slot = began + i * interval
        delay = slot - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif -delay > interval:
            run.late_submits += 1
        writes = _request(keys, time.time_ns() + offsets, values)
        submitted[i] = time.perf_counter_ns()
        fut = log.submit(writes)
        fut.add_done_callback(on_done(i))
        futures.append(fut)
    _, not_done = wait(futures, timeout=120)
    end_s = time.monotonic() - began
    sampler.stop.set()
    sampler.join()
    sampler.take()

    done = acked > 0
    latency_ms = (acked - submitted)[done] / 1e6
    run.requests = count
    run.errors = int(failed.sum()) + len(not_done)
    run.latencies_ms = [round(float(x), 3) for x in latency_ms]
    if len(latency_ms):
        run.p50_ms = round(float(np.percentile(latency_ms, 50)), 2)
        run.p99_ms = round(float(np.percentile(latency_ms, 99)), 2)
        run.max_ms = round(float(latency_ms.max()), 2)
    # At request i's slot, the requests before it still unacknowledged: i less those acked by then
    # (a later request is never acked before i is submitted). A feed holding `in_flight` requests
    # at most would have skipped a tick wherever that reaches in_flight.
    acks = np.sort(np.where(done, acked, np.iinfo(np.int64).max))
    outstanding = np.arange(count) - np.searchsorted(acks, submitted, side="right")
    run.missed = int((outstanding >= plan.in_flight).sum())
    run.samples = sampler.samples
    run.step_s = [round(sampler.step_s[k], 4) for k in sorted(sampler.step_s)]
    p = log.pruned
    run.prune = {
        "blocks": p.blocks,
        "points": p.points,
        "steps": p.steps,
        "last_step_s": round(p.last_step_s, 4),
    }
    grew = [
        s.t_s
        for prev, s in zip(run.samples, run.samples[1:], strict=False)
        if s.pruned_blocks > prev.pruned_blocks
    ]
    if grew:
        run.pruning_until_s = min(grew[-1], round(end_s, 2))
        until_ns = submitted[0] + int(run.pruning_until_s * NANOS)
        window = (acked - submitted)[done & (submitted <= until_ns)] / 1e6
        if len(window):
            run.p99_while_pruning_ms = round(float(np.percentile(window, 99)), 2)


# -- the report ----------------------------------------------------------------------------------------
def _median(runs: list[Run], attr: str) -> float:
    vals = [float(getattr(r, attr)) for r in runs]
    vals = [v for v in vals if np.isfinite(v)]
    return float(np.median(vals)) if vals else float("nan")


def _size_at(run: Run, t: float) -> float:
    """The log's size in the sample nearest t (within a second), in MB."""
    near = sorted(run.samples, key=lambda s: abs(s.t_s - t))[:1]
    return near[0].size_mb if near and abs(near[0].t_s - t) < 1 else float("nan")


def _fmt(x: float, digits: int = 1) -> str:
    return "-" if not np.isfinite(x) else f"{x:,.{digits}f}"


def report(plan: RetentionPlan, runs: list[Run], load: tuple[list[float], list[float]], started: str) -> str:
    blocks_per_s = plan.rate * plan.series
    prune_per_s = PRUNE_BLOCKS / PRUNE_BACKLOG_INTERVAL_S
    backlog_blocks = plan.backlog_requests * plan.series
    lines = [
        "## Retention: the log writer's ack latency with and without pruning",
        "",
        "Written by `python -m bench.experiments.retention_and_disk_floor` "
        f"(bench/experiments/retention_and_disk_floor.py) on {started} UTC, on "
        f"{_cpu_model()}, {os.cpu_count()} cores, {_mem_gib()} GiB; load average "
        f"{' / '.join(f'{x:.2f}' for x in load[0])} (1/5/15 min) at the start, "
        f"{' / '.join(f'{x:.2f}' for x in load[1])} at the end.",
        "",
        f"Each run in a fresh temporary directory: a backlog of {backlog_blocks * plan.per_series:,} "
        f"points ({plan.backlog_requests:,} requests of {plan.per_series * plan.series:,} points over "
        f"{plan.series} series, i.e. {backlog_blocks:,} blocks of {plan.per_series} points), "
        f"the newest {plan.backlog_age_s:,.0f} s old, written through a `DurableLog` that keeps everything; "
        "the log then reopened as app/runtime/open_log.py opens it, with "
        f"`Retention(seconds={plan.retention_s:g}, max_bytes=0)` (arm *pruning*: the whole backlog has "
        "expired) or `Retention(0, 0)` (arm *no pruning*), no free-space floor. "
        f"Then {plan.rate:g} requests/s x {plan.points_per_request:,} points "
        f"({plan.rate * plan.points_per_request:,.0f} points/s, {blocks_per_s:,.0f} blocks/s) of fresh "
        f"points for {plan.duration_s:g} s from the moment the log is reopened ({plan.settle_s:g} s after "
        "writing the backlog), submitted open loop from one thread; "
        "latency is from `submit()` to the future resolving (what ingest's 200 waits on: the group's "
        "commit and fsync). Arms alternate, pruning first in each round. Pruning: at most "
        f"{PRUNE_BLOCKS:,} blocks a step, a step every {PRUNE_INTERVAL_S:g} s "
        f"({PRUNE_BACKLOG_INTERVAL_S:g} s while steps come back full), each ending with "
        "`incremental_vacuum` and `wal_checkpoint(TRUNCATE)`.",
        "",
        f"*missed*: requests at whose slot {plan.in_flight} earlier ones were still unacknowledged, "
        f"where a feed holding {plan.in_flight} requests in flight (bench/feed.py) skips a tick; "
        "*late*: the submitting thread itself more than one interval behind (0 = the load was held). "
        "*p99 pruning*: requests submitted before the last prune step. Log size is the database plus "
        "its WAL (`size_bytes()`), in MB (10^6 bytes).",
        "",
        "| run | arm | p50 ms | p99 ms | max ms | p99 pruning ms | missed | late | errors | prune steps "
        "| blocks pruned | step s (median / max) | pruning until s | log MB start -> end (min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        steps = f"{np.median(r.step_s):.3f} / {max(r.step_s):.3f}" if r.step_s else "-"
        lines.append(
            f"| {r.index} | {r.arm} | {_fmt(r.p50_ms, 2)} | {_fmt(r.p99_ms, 2)} | {_fmt(r.max_ms, 2)} "
            f"| {_fmt(r.p99_while_pruning_ms, 2)} | {r.missed} | {r.late_submits} | {r.errors} "
            f"| {r.prune['steps']} | {r.prune['blocks']:,} / {r.backlog_blocks:,} | {steps} "
            f"| {_fmt(r.pruning_until_s)} | {_fmt(r.size_start_mb)} -> {_fmt(r.size_end_mb)} "
            f"({_fmt(r.size_min_mb)}) |"
        )
    arms = {arm: [r for r in runs if r.arm == arm] for arm in (PRUNING, KEEPING)}
    med = {
        arm: {a: _median(rs, a) for a in ("p50_ms", "p99_ms", "max_ms", "missed", "size_end_mb")}
        for arm, rs in arms.items()
    }
    lines += [
        "",
        "Median per arm:",
        "",
        "| arm | runs | p50 ms | p99 ms | max ms | missed | log MB at the end |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, m in med.items():
        lines.append(
            f"| {arm} | {len(arms[arm])} | {_fmt(m['p50_ms'], 2)} | {_fmt(m['p99_ms'], 2)} "
            f"| {_fmt(m['max_ms'], 2)} | {_fmt(m['missed'], 0)} | {_fmt(m['size_end_mb'])} |"
        )
    ratio = {a: med[PRUNING][a] / med[KEEPING][a] if med[KEEPING][a] else float("nan") for a in med[PRUNING]}
    lines.append(
        f"| pruning / no pruning | | x{_fmt(ratio['p50_ms'], 2)} | x{_fmt(ratio['p99_ms'], 2)} "
        f"| x{_fmt(ratio['max_ms'], 2)} | | x{_fmt(ratio['size_end_mb'], 2)} |"
    )
    lines += ["", "Log size, MB, every 5 s of the measurement:", ""]
    lines.append("| t s | " + " | ".join(f"run {r.index} ({r.arm})" for r in runs) + " |")
    lines.append("|---" * (len(runs) + 1) + "|")
    for t in range(0, int(plan.duration_s) + 1, 5):
        lines.append(f"| {t} | " + " | ".join(_fmt(_size_at(r, t)) for r in runs) + " |")
    lines += [
        "",
        f"Pruning's ceiling is {prune_per_s:,.0f} blocks/s (PRUNE_BLOCKS / PRUNE_BACKLOG_INTERVAL_S); this "
        f"load appends {blocks_per_s:,.0f} blocks/s (a block per series per request).",
    ]
    return "\n".join(lines) + "\n"


def _finite(x: Json) -> Json:
    """NaN (nothing to measure) as null: strict JSON."""
    if isinstance(x, float):
        return x if np.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def main(argv: list[str]) -> int:
    plan = RetentionPlan.parse(argv)
    parent = Path(plan.work_dir) if plan.work_dir else None
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    started = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
    load_start = [round(x, 2) for x in os.getloadavg()]
    runs: list[Run] = []
    for rnd in range(plan.rounds):
        for arm in (PRUNING, KEEPING):
            index = len(runs) + 1
            print(f"run {index} (round {rnd + 1}, {arm}) ...", file=sys.stderr, flush=True)
            run = measure(plan, index, arm, parent)
            print(
                f"  backlog {run.backlog_s} s; p50 {run.p50_ms} ms p99 {run.p99_ms} ms max {run.max_ms} ms, "
                f"missed {run.missed}, pruned {run.prune}, log {run.size_start_mb} -> {run.size_end_mb} MB",
                file=sys.stderr,
                flush=True,
            )
            runs.append(run)
    load_end = [round(x, 2) for x in os.getloadavg()]
    text = report(plan, runs, (load_start, load_end), started)
    out = Path(plan.out)
    out = out if out.is_absolute() else ROOT / out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    raw = {
        "plan": asdict(plan),
        "started_utc": started,
        "load_average": {"start": load_start, "end": load_end},
        "prune_blocks": PRUNE_BLOCKS,
        "prune_interval_s": PRUNE_INTERVAL_S,
        "prune_backlog_interval_s": PRUNE_BACKLOG_INTERVAL_S,
        "runs": [
            {
                **asdict(r),
                "size_start_mb": r.size_start_mb,
                "size_end_mb": r.size_end_mb,
                "size_min_mb": r.size_min_mb,
            }
            for r in runs
        ],
    }
    out.with_suffix(".json").write_text(json.dumps(_finite(raw), indent=1, allow_nan=False))
    print(text)
    print(f"written: {out} and {out.with_suffix('.json')}", file=sys.stderr)
    return 0 if all(r.errors == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
