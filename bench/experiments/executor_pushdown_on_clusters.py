"""Executor pushdown on a Spark standalone cluster: what reaches the driver, and what that costs it.

Starts, all bound to 127.0.0.1: a throwaway redis-server, a Spark master with one worker (its own
executor JVM; the helpers of tests/infra.py), and a writer process appending points to the Redis
log at a steady rate through `RedisLog` (the server's write path). Then one driver process (one
Spark application for every run, as a server's driver is; its CPU is its own) runs arms
alternating over rounds (A B C, then C B A, ...), each run a fresh streaming query over the Redis
data source with the engine's 100 ms trigger, after every arm has run `--prime` s unmeasured:

- A, pre-filter in Spark (today's engine): `series_id IN (the series in use, half by default)` in
  the plan, the surviving points collected through Arrow (`collect_arrow`), bucketed with numpy on
  the driver;
- B, no pre-filter: every point collected, filtered with pyarrow and bucketed with numpy on the
  driver;
- C, pre-aggregate on executors: the same filter, then groupBy(series, 1 s bucket) with count, min,
  max, sum, sum of squares, first and last value (`min_by`/`max_by` of ts); the driver receives
  buckets.

Every arm ends in the same driver state: per (series in use, 1 s bucket) the count, min, max, sum,
sum of squares, first and last value, buckets of successive micro-batches combined.

Measured over `--seconds` after a `--warmup`, from /proc: CPU of the driver (its Python process,
its JVM, and the processes that JVM starts, such as the stream source's Python runner) and of the
executor (its JVM and its Python workers), per point ingested meanwhile (Redis' own point counts);
the driver JVM's CPU by kind of thread (JIT, GC, the stream's thread, ...); Spark's micro-batch
durations; rows reaching the driver per batch; the stream's backlog at both ends of the window,
so an arm that falls behind shows.

    .venv/bin/python -m bench.experiments.executor_pushdown_on_clusters [--seconds 20] [--warmup 10]
        [--prime 10] [--rounds 2] [--rate 100000] [--series 20] [--in-use 10] [--trigger-ms 100] [--arms ABC]
        [--spark-conf KEY=VALUE ...]
        [--out bench/results/cluster_pushdown.md]

About 5 minutes with the defaults. Writes bench/results/cluster_pushdown.md, and every run's raw
numbers to cluster_pushdown.json beside it (docs/decisions/0029-executor-pushdown-on-clusters.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.serverproc import stop_process
from compute.storage.contract import SeriesWrite
from compute.storage.records import POINT_SCHEMA
from compute.storage.redis import layout as rs
from compute.storage.redis.point_log import RedisLog, Retention
from compute.storage.series import SeriesKey, SeriesKind
from compute.storage.series_ids import series_id

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "cluster_pushdown.md"
PREFIX = "pushdown"
PARTITIONS = 2  # Redis partitions = the executor cores (decision 0007)
WORKER_CORES = 2
WORKER_MEMORY = "2g"
TRIGGER_MS = 100  # the engine's default (app/config.py)
TICK_S = 0.01  # the writer appends one request (every series) per tick
MAX_IN_FLIGHT = 20  # writer requests not yet acknowledged before it waits
RETENTION_S = 60.0  # the log is trimmed behind the streams (MINID), so Redis' memory stays flat
BUCKET_NS = 1_000_000_000
KEEP_NS = 120 * BUCKET_NS  # the driver's state: buckets of the last two minutes ...
MAX_BUCKETS = 10_000  # ... trimmed to that once it holds more
DATA_SOURCE_RID = "ri.sparkwire.bench.dataset.pushdown"

ARMS = {
    "A": "pre-filter in Spark (today)",
    "B": "no pre-filter, numpy filter on the driver",
    "C": "pre-aggregate on executors",
}

BUCKET_SCHEMA = pa.schema(
    [
        ("series_id", pa.int64()),
        ("bucket", pa.int64()),  # the bucket's start, ns
        ("n", pa.int64()),
        ("vmin", pa.float64()),
        ("vmax", pa.float64()),
        ("vsum", pa.float64()),
        ("vsq", pa.float64()),
        ("first", pa.float64()),
        ("first_ts", pa.int64()),
        ("last", pa.float64()),
        ("last_ts", pa.int64()),
    ]
)


# -- the data ---------------------------------------------------------------------------------------
def series_keys(count: int) -> list[SeriesKey]:
    return [SeriesKey.of(DATA_SOURCE_RID, f"ch{i:03d}", {"unit": "u1"}) for i in range(count)]


def series_in_use(count: int, in_use: int) -> list[int]:
    """The first `in_use` series: what the live computations read."""
    return [series_id(key) for key in series_keys(count)[:in_use]]


def points_ingested(conn: Any) -> int:
    """Points appended to the log so far, over every partition (Redis' own counters)."""
    return sum(n for _, n in rs.head(conn, rs.RedisLayout(PREFIX, PARTITIONS)).values())


# -- CPU from /proc -----------------------------------------------------------------------------------
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


Procs = dict[int, tuple[int, int, int]]  # pid -> (parent pid, own CPU ticks, reaped children's ticks)


def scan_procs() -> Procs:
    """Every process' parent and CPU (user + system, clock ticks), in one pass over /proc."""
    out: Procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        out[int(name)] = (
            int(fields[1]),
            int(fields[11]) + int(fields[12]),
            int(fields[13]) + int(fields[14]),
        )
    return out


def descendants(procs: Procs, root: int) -> list[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root] if root in procs else []
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


class TreeCpu:
    """CPU seconds a process tree spends over a window.

    Processes alive at both ends count what they spent in between, with what the children they
    reaped meanwhile spent (cutime, cstime: e.g. the driver JVM's `chmod` per checkpoint file).
    Processes that end inside the window count up to their last `sample()`: Spark kills idle Python
    workers (those that looked up and planned the data source at the query's start, a minute later)
    and nobody accounts for them, so a plain sum over the tree would lose their CPU and could even
    shrink. A process alive at the start and reaped by a process of the tree would count twice; on
    the driver and the executor here the ones that end inside a window are never reaped that way."""

    def __init__(self, root: int, procs: Procs) -> None:
        self.root = root
        self.start = self._readings(procs)
        self.last = dict(self.start)

    def _readings(self, procs: Procs) -> dict[int, tuple[int, int]]:
        return {pid: procs[pid][1:] for pid in descendants(procs, self.root)}

    def sample(self, procs: Procs) -> None:
        self.last.update(self._readings(procs))

    def seconds(self, procs: Procs) -> float:
        """CPU seconds from the start to this (the end) reading."""
        end = self._readings(procs)
        ticks = 0
        for pid, (own, reaped) in end.items():
            own_before, reaped_before = self.start.get(pid, (0, 0))
            ticks += own - own_before + reaped - reaped_before
        for pid, (own_before, _) in self.start.items():
            if pid not in end:
                ticks += self.last[pid][0] - own_before
        return ticks / _CLOCK_TICKS


class CpuWindow:
    """The driver's and the executor's CPU over a measured window (`sample()` now and then in it),
    and the driver JVM's by kind of thread (threads that end in the window count up to the last
    sample that saw them)."""

    def __init__(self, jvm_pid: int, executor_pid: int) -> None:
        self.python, self.jvm = os.getpid(), jvm_pid
        self.threads_start = thread_cpu(jvm_pid)
        self.threads_last = dict(self.threads_start)
        procs = scan_procs()
        self.own_start = {pid: procs[pid][1] for pid in (self.python, self.jvm)}
        self.driver = TreeCpu(self.python, procs)
        self.executor = TreeCpu(executor_pid, procs)

    def sample(self) -> None:
        procs = scan_procs()
        self.driver.sample(procs)
        self.executor.sample(procs)
        self.threads_last.update(thread_cpu(self.jvm))

    def end(self) -> tuple[dict[str, float], dict[str, float]]:
        """CPU seconds: the driver's Python process alone, its JVM alone, the driver's whole tree
        (Python, JVM, the processes the JVM starts), the executor (its JVM and Python workers);
        and the driver JVM's by kind of thread."""
        procs = scan_procs()
        threads = thread_cpu(self.jvm)
        python = (procs[self.python][1] - self.own_start[self.python]) / _CLOCK_TICKS
        jvm = (procs[self.jvm][1] - self.own_start[self.jvm]) / _CLOCK_TICKS
        cpu = {
            "python": python,
            "jvm": jvm,
            "driver": self.driver.seconds(procs),
            "executor": self.executor.seconds(procs),
        }
        ended = {tid: self.threads_last[tid] for tid in self.threads_start if tid not in threads}
        return cpu, thread_groups(self.threads_start, {**ended, **threads})


def executor_pids(worker_pid: int) -> list[int]:
    """The executor JVMs a standalone worker runs (its children running CoarseGrainedExecutorBackend)."""
    found = []
    for pid in descendants(scan_procs(), worker_pid)[1:]:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" in cmdline:
            found.append(pid)
    return found


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds of each thread of a process, with the thread's name."""
    out: dict[int, tuple[str, float]] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS)
    return out


def thread_group(name: str) -> str:
    """A JVM thread's kind, from its name (Linux keeps 15 characters of it)."""
    if name.startswith(("C1 CompilerThre", "C2 CompilerThre")):
        return "JIT compiler"
    if name.startswith(("GC Thread", "G1 ")):
        return "GC"
    if name.startswith("stream executio"):
        return "stream execution thread"
    return re.sub(r"[-#]?\d+$", "", name) or "?"


def thread_groups(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    """CPU seconds per kind of thread between two `thread_cpu` readings (a thread started in
    between counts from zero; one missing from `after` is left out)."""
    groups: dict[str, float] = {}
    for tid, (name, cpu) in after.items():
        group = thread_group(name)
        groups[group] = groups.get(group, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    return groups


# -- the writer process ---------------------------------------------------------------------------------
def run_writer(url: str, rate: int, series: int) -> None:
    """Append `rate` points/s over `series` series, one request of every series per 10 ms tick
    (timestamps spread over the tick, a random walk per series), until SIGTERM or SIGINT or the
    parent goes."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    parent = os.getppid()
    log = RedisLog(url, PARTITIONS, "bench-writer", Retention(seconds=RETENTION_S), prefix=PREFIX)
    keys = series_keys(series)
    per_series = max(1, round(rate * TICK_S / series))
    tick_ns = int(TICK_S * 1e9)
    spread = np.arange(per_series, dtype=np.int64) * (tick_ns // per_series)
    rng = np.random.default_rng(7)
    level = np.zeros(series)
    in_flight: deque[Future[int]] = deque()
    next_at = time.monotonic()
    fell_behind = 0
    try:
        while not stop.is_set() and os.getppid() == parent:
            ts = time.time_ns() - tick_ns + spread
            walk = rng.normal(0.0, 1.0, (series, per_series)).cumsum(axis=1) + level[:, None]
            level = walk[:, -1]
            writes = [SeriesWrite(key, SeriesKind.NUMERIC, ts, walk[i]) for i, key in enumerate(keys)]
            in_flight.append(log.submit(writes))
            while len(in_flight) > MAX_IN_FLIGHT:
                in_flight.popleft().result(60)
            next_at += TICK_S
            delay = next_at - time.monotonic()
            if delay > 0:
                stop.wait(delay)
            elif delay < -1.0:  # over a second behind: go on from now rather than burst
                fell_behind += 1
                next_at = time.monotonic()
    finally:
        for future in in_flight:
            with contextlib.suppress(Exception):
                future.result(10)
        log.close()
        print(
            f"writer: {per_series * series} points per {TICK_S * 1000:.0f} ms tick; "
            f"fell behind by over 1 s {fell_behind} times",
            file=sys.stderr,
        )


# -- the driver's work, the same end state in every arm ------------------------------------------------
def bucket_points(table: pa.Table) -> pa.Table:
    """POINT_SCHEMA rows -> one BUCKET_SCHEMA row per (series, 1 s bucket), with numpy."""
    if table.num_rows == 0:
        return BUCKET_SCHEMA.empty_table()
    sid = table.column("series_id").to_numpy()
    ts = table.column("ts").to_numpy()
    value = table.column("value").to_numpy(zero_copy_only=False)
    order = np.lexsort((ts, sid))  # by series, then time: buckets are contiguous, first/last at the ends
    sid, ts, value = sid[order], ts[order], value[order]
    bucket = ts - np.mod(ts, BUCKET_NS)  # floor, as pmod does in Spark
    cut = np.flatnonzero((sid[1:] != sid[:-1]) | (bucket[1:] != bucket[:-1])) + 1
    starts = np.concatenate(([0], cut))
    ends = np.concatenate((cut, [len(ts)]))
    columns = [
        sid[starts],
        bucket[starts],
        ends - starts,
        np.minimum.reduceat(value, starts),
        np.maximum.reduceat(value, starts),
        np.add.reduceat(value, starts),
        np.add.reduceat(value * value, starts),
        value[starts],
        ts[starts],
        value[ends - 1],
        ts[ends - 1],
    ]
    return pa.Table.from_arrays([pa.array(c) for c in columns], schema=BUCKET_SCHEMA)


@dataclass(slots=True)
class Bucket:
    n: int
    vmin: float
    vmax: float
    vsum: float
    vsq: float
    first: float
    first_ts: int
    last: float
    last_ts: int


class BucketState:
    """Per (series, bucket start) aggregates, combined across micro-batches (a bucket straddles
    several batches), buckets older than KEEP_NS behind the newest dropped."""

    def __init__(self) -> None:
        self.buckets: dict[tuple[int, int], Bucket] = {}
        self.newest = 0

    def combine(self, table: pa.Table) -> int:
        """Fold a batch's bucket rows in; returns the points they hold."""
        columns = [table.column(name).to_pylist() for name in BUCKET_SCHEMA.names]
        points = 0
        for sid, start, *agg in zip(*columns, strict=True):
            row = Bucket(*agg)
            points += row.n
            held = self.buckets.get((sid, start))
            if held is None:
                self.buckets[(sid, start)] = row
                self.newest = max(self.newest, start)
                continue
            held.n += row.n
            held.vmin = min(held.vmin, row.vmin)
            held.vmax = max(held.vmax, row.vmax)
            held.vsum += row.vsum
            held.vsq += row.vsq
            if row.first_ts < held.first_ts:
                held.first, held.first_ts = row.first, row.first_ts
            if row.last_ts >= held.last_ts:
                held.last, held.last_ts = row.last, row.last_ts
        if len(self.buckets) > MAX_BUCKETS:
            floor = self.newest - KEEP_NS
            self.buckets = {k: b for k, b in self.buckets.items() if k[1] >= floor}
        return points


@dataclass
class BatchRecord:
    batch_id: int
    started: float  # monotonic
    seconds: float  # the foreachBatch callback: the Spark job and the driver's numpy
    driver_rows: int  # rows reaching the driver's Python
    points_in_use: int  # points of the series in use the batch held


class BatchHandler:
    """The query's `foreachBatch`, in one of the three arms."""

    def __init__(self, arm: str, ids: Sequence[int]) -> None:
        from pyspark.sql import functions as F

        self.arm = arm
        # Columns are built once, as the engine builds its filter: each is a py4j round trip.
        self.in_use = F.col("series_id").isin(list(ids))
        self.group_by, self.aggregates = executor_aggregation()
        self.id_set = pa.array(list(ids), pa.int64())
        self.state = BucketState()
        self.records: list[BatchRecord] = []

    def __call__(self, batch: Any, batch_id: int) -> None:
        from compute.spark.arrow_collect import collect_arrow

        started = time.monotonic()
        if self.arm == "A":
            points = collect_arrow(batch.where(self.in_use).select(*POINT_SCHEMA.names), POINT_SCHEMA)
            rows, buckets = points.num_rows, bucket_points(points)
        elif self.arm == "B":
            points = collect_arrow(batch.select(*POINT_SCHEMA.names), POINT_SCHEMA)
            rows = points.num_rows
            points = points.filter(pc.is_in(points.column("series_id"), value_set=self.id_set))
            buckets = bucket_points(points)
        else:
            aggregated = batch.where(self.in_use).groupBy(*self.group_by).agg(*self.aggregates)
            buckets = collect_arrow(aggregated, BUCKET_SCHEMA)
            rows = buckets.num_rows
        in_use = self.state.combine(buckets)
        self.records.append(BatchRecord(batch_id, started, time.monotonic() - started, rows, in_use))


def executor_aggregation() -> tuple[list[Any], list[Any]]:
    """Arm C's grouping and aggregates: one row per (series, 1 s bucket), computed by the executors
    (a partial aggregation before the shuffle, the final one after it), BUCKET_SCHEMA's columns."""
    from pyspark.sql import functions as F

    ts, value = F.col("ts"), F.col("value")
    bucket = (ts - F.pmod(ts, F.lit(BUCKET_NS))).alias("bucket")  # integer floor: exact for ns
    return [F.col("series_id"), bucket], [
        F.count(F.lit(1)).alias("n"),
        F.min(value).alias("vmin"),
        F.max(value).alias("vmax"),
        F.sum(value).alias("vsum"),
        F.sum(value * value).alias("vsq"),
        F.min_by(value, ts).alias("first"),
        F.min(ts).alias("first_ts"),
        F.max_by(value, ts).alias("last"),
        F.max(ts).alias("last_ts"),
    ]


# -- the measured driver -----------------------------------------------------------------------------------
@dataclass
class ArmResult:
    arm: str
    round: int
    seconds: float
    points_ingested: int
    cpu: dict[str, float]  # CpuWindow.end(): CPU seconds over the window
    batches: int
    batch_ms: list[float]  # Spark's triggerExecution per micro-batch of the window
    callback_ms: list[float]
    driver_rows: list[int]
    input_points: list[int]  # points read per micro-batch (Spark's numInputRows)
    points_in_use: int  # of the series in use, reaching the driver's state in the window
    backlog_start: int
    backlog_end: int
    load_average: float
    jvm_threads: dict[str, float]  # the driver JVM's CPU seconds by kind of thread, over the window


def hold(query: Any, seconds: float, cpu: CpuWindow | None = None) -> None:
    """Let the query run for `seconds`, sampling `cpu` each second; raise if it stops meanwhile."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(1.0, left))
        if cpu is not None:
            cpu.sample()
        if not query.isActive:
            raise RuntimeError(f"the query stopped: {query.exception()}")


def run_driver(args: argparse.Namespace) -> None:
    """The measured driver: one application on the cluster for every run, as a server's driver
    lives for hours, and a fresh query per run. Each arm first runs `--prime` seconds unmeasured,
    so that the JVMs have compiled every arm's code before any run is measured."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    stop_on_signals()  # stop the query and the session on the way out
    import redis

    from compute.spark.session import build_session, jvm_process, stop_session
    from compute.storage.redis.spark_source import RedisDataSource

    # Ships compute/ and schemas/ to the executor as the server does on a cluster (cluster.py).
    spark = build_session(args.master, jvm_output=Path(args.jvm_log))
    conn = redis.Redis.from_url(args.redis_url)
    try:
        jvm = jvm_process(spark)
        executors = executor_pids(args.worker_pid)
        if jvm is None or len(executors) != 1:
            raise RuntimeError(f"expected the driver's JVM and one executor JVM, found {jvm}, {executors}")
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
        for setting in args.spark_conf:
            key, _, value = setting.partition("=")
            spark.conf.set(key, value)
        spark.dataSource.register(RedisDataSource)  # as Engine does
        priming = [(0, arm) for arm in args.arms] if args.prime > 0 else []
        for round_no, arm in [*priming, *arm_order(args.arms, args.rounds)]:
            if executor_pids(args.worker_pid) != executors:
                raise RuntimeError("the executor JVM changed: a run would not be comparable")
            print(
                f"{'priming' if round_no == 0 else f'round {round_no}'}, arm {arm}: {ARMS[arm]} ...",
                flush=True,
            )
            result = run_query(spark, conn, arm, round_no, jvm.pid, executors[0], args)
            if result is not None:
                with open(args.result, "a") as out:
                    out.write(json.dumps(asdict(result)) + "\n")
                print("  " + one_line(result), flush=True)
    finally:
        stop_session(spark)
        conn.close()


def run_query(
    spark: Any, conn: Any, arm: str, round_no: int, jvm_pid: int, executor_pid: int, args: argparse.Namespace
) -> ArmResult | None:
    """One arm's query: started at the log's end, warmed up, measured (not when priming), stopped."""
    from compute.spark.engine import first_trigger_ran
    from compute.storage.redis.spark_source import SOURCE_NAME

    log = RedisLog(args.redis_url, PARTITIONS, f"bench-{round_no}-{arm}", prefix=PREFIX)
    checkpoint = Path(tempfile.mkdtemp(prefix="bench-pushdown-checkpoint-"))
    query = None
    try:
        handler = BatchHandler(arm, series_in_use(args.series, args.in_use))
        stream = spark.readStream.format(SOURCE_NAME).options(**log.stream_options()).load()
        query = (
            stream.writeStream.foreachBatch(handler)
            .trigger(processingTime=f"{args.trigger_ms} milliseconds")
            .option("checkpointLocation", str(checkpoint))
            .queryName(f"pushdown-{round_no}-{arm}")
            .start()
        )
        if not first_trigger_ran(query, timeout=120):
            raise RuntimeError(f"the query did not get through its first trigger: {query.exception()}")
        if round_no == 0:
            hold(query, args.prime)
            return None
        hold(query, args.warmup)
        backlog_start = log.pending()
        ingested_start = points_ingested(conn)
        first_record = len(handler.records)
        started = time.monotonic()
        cpu_window = CpuWindow(jvm_pid, executor_pid)
        hold(query, args.seconds, cpu_window)
        cpu, threads = cpu_window.end()
        elapsed = time.monotonic() - started
        ingested = points_ingested(conn) - ingested_start
        backlog_end = log.pending()
        load = os.getloadavg()[0]
        window = [r for r in handler.records[first_record:] if started <= r.started < started + elapsed]
        query.stop()
        ids = {r.batch_id for r in window}
        progress = [p for p in query.recentProgress if p.batchId in ids]
        return ArmResult(
            arm=arm,
            round=round_no,
            seconds=elapsed,
            points_ingested=ingested,
            cpu=cpu,
            batches=len(window),
            batch_ms=[float(p.durationMs.get("triggerExecution", 0)) for p in progress],
            callback_ms=[r.seconds * 1000 for r in window],
            driver_rows=[r.driver_rows for r in window],
            input_points=[int(p.numInputRows) for p in progress],
            points_in_use=sum(r.points_in_use for r in window),
            backlog_start=backlog_start,
            backlog_end=backlog_end,
            load_average=load,
            jvm_threads=threads,
        )
    finally:
        if query is not None:
            with contextlib.suppress(Exception):
                query.stop()
        log.close()
        shutil.rmtree(checkpoint, ignore_errors=True)


# -- the orchestrator ------------------------------------------------------------------------------------
@dataclass
class Child:
    """A child process of this module: the writer (its output in a log file) or the driver (its
    output on ours, its JVM's in a log file)."""

    process: subprocess.Popen[bytes]
    log_path: Path

    @classmethod
    def start(
        cls, args: list[str], log_path: Path, own_output: bool = True, env: dict[str, str] | None = None
    ) -> Child:
        command = [sys.executable, "-m", "bench.experiments.executor_pushdown_on_clusters", *args]
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})}
        if not own_output:
            return cls(subprocess.Popen(command, cwd=ROOT, env=env), log_path)
        with log_path.open("wb") as sink:  # the child keeps its own copy of the descriptor
            process = subprocess.Popen(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env=env)
        return cls(process, log_path)

    def tail(self, chars: int = 4000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self, timeout: float = 60) -> None:
        stop_process(self.process, timeout)


def _stop_on_signal(signum: int, frame: FrameType | None) -> None:
    """The first SIGINT or SIGTERM unwinds through every `finally` (every process started is
    stopped); later ones are ignored, so that they cannot cut the clean-up short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def stop_on_signals() -> None:
    signal.signal(signal.SIGINT, _stop_on_signal)
    signal.signal(signal.SIGTERM, _stop_on_signal)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not within {timeout:.0f} s")
        time.sleep(0.25)


def arm_order(arms: str, rounds: int) -> Iterator[tuple[int, str]]:
    """A B C, then C B A, ...: every arm runs early and late as often."""
    for r in range(rounds):
        for arm in arms if r % 2 == 0 else reversed(arms):
            yield r + 1, arm


def orchestrate(args: argparse.Namespace) -> None:
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed: apt-get install -y redis-server")
    import redis

    from bench.machine import describe_machine
    from tests.infra import start_redis, start_spark_cluster

    stop_on_signals()
    machine = describe_machine()
    workdir = Path(tempfile.mkdtemp(prefix="bench-pushdown-"))
    results: list[ArmResult] = []
    began = time.monotonic()
    ok = False
    with contextlib.ExitStack() as stack:
        print(f"work directory (logs): {workdir}", flush=True)
        redis_server = start_redis(workdir / "redis")
        stack.callback(redis_server.daemon.stop)
        cluster = start_spark_cluster(workdir / "spark", cores=WORKER_CORES, memory=WORKER_MEMORY)
        stack.callback(cluster.stop)
        print(f"redis at {redis_server.url}, Spark master at {cluster.url}", flush=True)
        writer_args = ["--writer", "--redis-url", redis_server.url]
        writer_args += ["--rate", str(args.rate), "--series", str(args.series)]
        writer = Child.start(writer_args, workdir / "writer.log")
        stack.callback(writer.stop)
        conn = redis.Redis.from_url(redis_server.url)
        stack.callback(conn.close)
        wait_until(lambda: points_ingested(conn) > 0, 60, "the writer's first points")
        result_path = workdir / "results.jsonl"
        driver_args = ["--driver", "--master", cluster.url, "--redis-url", redis_server.url]
        driver_args += ["--worker-pid", str(cluster.worker.process.pid), "--result", str(result_path)]
        driver_args += ["--jvm-log", str(workdir / "driver-jvm.log"), *forwarded(args)]
        # Its temporary files (the code zip shipped to the executor, checkpoints) go with the work directory.
        (workdir / "tmp").mkdir()
        driver = Child.start(
            driver_args, workdir / "driver-jvm.log", own_output=False, env={"TMPDIR": str(workdir / "tmp")}
        )
        stack.callback(driver.stop)
        runs = args.rounds * len(args.arms)
        timeout = 300 + len(args.arms) * (args.prime + 60) + runs * (args.warmup + args.seconds + 60)
        try:
            driver.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the driver did not finish in {timeout:.0f} s:\n{driver.tail()}") from None
        if driver.process.returncode != 0:
            raise RuntimeError(f"the driver failed ({driver.process.returncode}):\n{driver.tail()}")
        results = [ArmResult(**json.loads(line)) for line in result_path.read_text().splitlines()]
        ok = True
    if ok:
        shutil.rmtree(workdir, ignore_errors=True)
    report = render(results, args, machine, time.monotonic() - began)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report)
    raw = {"options": forwarded(args), "machine": machine, "runs": [asdict(r) for r in results]}
    out.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")
    print(report)
    print(f"written to {out} (every run's numbers: {out.with_suffix('.json').name})")


# -- the report ------------------------------------------------------------------------------------------
def forwarded(args: argparse.Namespace) -> list[str]:
    """The options that shape a run, as a command line (the driver's, and the report's)."""
    words = [f"--seconds={args.seconds:g}", f"--warmup={args.warmup:g}", f"--prime={args.prime:g}"]
    words += [f"--rounds={args.rounds}", f"--rate={args.rate}", f"--series={args.series}"]
    words += [f"--in-use={args.in_use}"]
    words += [f"--trigger-ms={args.trigger_ms}", f"--arms={args.arms}"]
    return words + [f"--spark-conf={setting}" for setting in args.spark_conf]


def per_point_us(result: ArmResult, key: str) -> float:
    return result.cpu[key] / max(result.points_ingested, 1) * 1e6


def p50(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def driver_rest_us(r: ArmResult) -> float:
    """Driver CPU per point outside its Python process and its JVM: the processes the JVM starts."""
    return per_point_us(r, "driver") - per_point_us(r, "python") - per_point_us(r, "jvm")


def without_jit_us(r: ArmResult) -> float:
    """Driver CPU per point less its JVM's JIT compiler threads."""
    return (r.cpu["driver"] - r.jvm_threads.get("JIT compiler", 0.0)) / max(r.points_ingested, 1) * 1e6


def kept_up(r: ArmResult) -> bool:
    """Whether the stream kept up: its backlog grew by at most a second of ingest in the window."""
    return r.backlog_end - r.backlog_start <= r.points_ingested / r.seconds


def one_line(r: ArmResult) -> str:
    return (
        f"{r.points_ingested / r.seconds:,.0f} points/s ingested; "
        f"driver {per_point_us(r, 'driver'):.2f} us/point, executor {per_point_us(r, 'executor'):.2f}; "
        f"{r.batches} batches, p50 {p50(r.batch_ms):.0f} ms; rows to the driver / batch p50 "
        f"{p50(r.driver_rows):,.0f}; backlog {r.backlog_start:,} -> {r.backlog_end:,}"
    )


def _spread(values: Sequence[float], digits: int = 2) -> str:
    """The median of the rounds and their range."""
    mid = statistics.median(values)
    if len(values) == 1:
        return f"{mid:.{digits}f}"
    return f"{mid:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def render(
    results: list[ArmResult], args: argparse.Namespace, machine: dict[str, object], wall: float
) -> str:
    lines = [
        "# Executor pushdown on a Spark standalone cluster",
        "",
        f"`python -m bench.experiments.executor_pushdown_on_clusters {' '.join(forwarded(args))}` "
        f"({time.strftime('%Y-%m-%d %H:%M')}, whole run {wall:.0f} s).",
        f"Machine: {machine['cores']} cores ({machine['cpu']}), Python {machine['python']}, "
        f"PySpark {machine['pyspark']}, {machine['java']}; load average at start "
        f"{machine['load_average_at_start']}.",
        f"Spark standalone master + one worker ({WORKER_CORES} cores, one executor JVM); one driver "
        f"process (one application) for every run, a fresh query per run, each arm primed "
        f"{args.prime:g} s before round 1; Redis log with {PARTITIONS} partitions; a writer process "
        f"appending {args.rate:,} points/s over {args.series} series (one request of every series per "
        f"{TICK_S * 1000:.0f} ms); the query reads every series and {args.in_use} are in use; "
        f"trigger {args.trigger_ms} ms; Spark settings beyond the server's: "
        f"{', '.join(args.spark_conf) or 'none'}; {args.warmup:g} s warm-up, then {args.seconds:g} s "
        f"measured per run; arms alternate ({' '.join(args.arms)}, then "
        f"{' '.join(reversed(args.arms))}, ...).",
        "",
        "CPU is user + system from /proc over the measured window, divided by the points ingested in it "
        "(Redis' counters). Driver = its Python process + its JVM + the processes the JVM starts (the "
        "stream source's Python runner, the data source's planners, `chmod` per checkpoint file); "
        "executor = its JVM + its Python workers (which read Redis). "
        "Cells: median of the rounds (min-max).",
        "",
        "| arm | driver CPU us/point | of it: Python / JVM / JVM's children | driver without JIT "
        "| executor CPU us/point | ingested points/s | batch p50 ms | batches/s "
        "| rows to the driver / batch (p50) | points read / batch (p50) | backlog at end (points) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, title in ARMS.items():
        runs = [r for r in results if r.arm == arm]
        if not runs:
            continue
        python = p50([per_point_us(r, "python") for r in runs])
        jvm = p50([per_point_us(r, "jvm") for r in runs])
        rest = p50([driver_rest_us(r) for r in runs])
        lines.append(
            f"| {arm}: {title} "
            f"| {_spread([per_point_us(r, 'driver') for r in runs])} "
            f"| {python:.2f} / {jvm:.2f} / {rest:.2f} "
            f"| {_spread([without_jit_us(r) for r in runs])} "
            f"| {_spread([per_point_us(r, 'executor') for r in runs])} "
            f"| {_spread([r.points_ingested / r.seconds for r in runs], 0)} "
            f"| {_spread([p50(r.batch_ms) for r in runs], 0)} "
            f"| {_spread([r.batches / r.seconds for r in runs], 2)} "
            f"| {_spread([p50(r.driver_rows) for r in runs], 0)} "
            f"| {_spread([p50(r.input_points) for r in runs], 0)} "
            f"| {_spread([float(r.backlog_end) for r in runs], 0)} |"
        )
    behind = [f"{r.round}{r.arm}" for r in results if not kept_up(r)]
    lines += [
        "",
        "Driver without JIT: the driver's CPU less its JVM's JIT compiler threads, which are still "
        "compiling minutes into a run and would settle in a server that runs for hours.",
        "Runs whose stream fell behind (backlog grew by more than a second of ingest in the window; "
        "their batches are larger and their CPU per point lower than the rate alone would give): "
        + (", ".join(behind) or "none")
        + ".",
        "",
        "Every run:",
        "",
        "| round | arm | driver us/point | Python | JVM | JVM's children | executor us/point | driver cores "
        "| executor cores | ingested points/s | batches | batch p50 / p90 ms | callback p50 ms "
        "| driver rows / batch p50 | in-use points in the window | backlog start -> end | kept up "
        "| load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: (r.round, r.arm)):
        p90 = float(np.percentile(r.batch_ms, 90)) if r.batch_ms else float("nan")
        rest = driver_rest_us(r)
        lines.append(
            f"| {r.round} | {r.arm} | {per_point_us(r, 'driver'):.2f} | {per_point_us(r, 'python'):.2f} "
            f"| {per_point_us(r, 'jvm'):.2f} | {rest:.2f} | {per_point_us(r, 'executor'):.2f} "
            f"| {r.cpu['driver'] / r.seconds:.2f} | {r.cpu['executor'] / r.seconds:.2f} "
            f"| {r.points_ingested / r.seconds:,.0f} | {r.batches} | {p50(r.batch_ms):.0f} / {p90:.0f} "
            f"| {p50(r.callback_ms):.0f} | {p50(r.driver_rows):,.0f} | {r.points_in_use:,} "
            f"| {r.backlog_start:,} -> {r.backlog_end:,} | {'yes' if kept_up(r) else 'no'} "
            f"| {r.load_average:.2f} |"
        )
    lines += jvm_thread_table(results)
    return "\n".join(lines) + "\n"


def jvm_thread_table(results: list[ArmResult], top: int = 8) -> list[str]:
    """Where the driver JVM's CPU goes: ms per micro-batch by kind of thread, medians of the rounds."""
    arms = [arm for arm in ARMS if any(r.arm == arm for r in results)]
    totals: dict[str, float] = {}
    for r in results:
        for group, cpu in r.jvm_threads.items():
            totals[group] = totals.get(group, 0.0) + cpu
    groups = sorted(totals, key=lambda g: -totals[g])[:top]

    def per_batch_ms(r: ArmResult, cpu: float) -> float:
        return cpu / max(r.batches, 1) * 1000

    lines = [
        "",
        "The driver JVM's CPU by kind of thread, ms per micro-batch (median of the rounds); "
        "`other` is the rest of the JVM's CPU (threads that lived less than a second among it):",
        "",
        "| thread | " + " | ".join(arms) + " |",
        "|---|" + "---|" * len(arms),
    ]
    rows = [*groups, "other", "the driver JVM in all"]
    for group in rows:
        cells = []
        for arm in arms:
            runs = [r for r in results if r.arm == arm]
            if group == "other":
                values = [
                    per_batch_ms(r, r.cpu["jvm"] - sum(v for g, v in r.jvm_threads.items() if g in groups))
                    for r in runs
                ]
            elif group == "the driver JVM in all":
                values = [per_batch_ms(r, r.cpu["jvm"]) for r in runs]
            else:
                values = [per_batch_ms(r, r.jvm_threads.get(group, 0.0)) for r in runs]
            cells.append(f"{statistics.median(values):.1f}")
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    return lines


# -- entry -----------------------------------------------------------------------------------------------
def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run (20)")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds per run before measuring (10)")
    parser.add_argument(
        "--prime", type=float, default=10.0, help="unmeasured seconds of each arm before round 1 (10)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three arms (2)")
    parser.add_argument("--rate", type=int, default=100_000, help="points/s the writer appends (100000)")
    parser.add_argument("--series", type=int, default=20, help="series written (20)")
    parser.add_argument("--in-use", type=int, help="series the computations read (half of --series)")
    parser.add_argument(
        "--trigger-ms", type=int, default=TRIGGER_MS, help="the query's trigger interval (100, the engine's)"
    )
    parser.add_argument("--arms", default="ABC", help="which arms, in round one's order (ABC)")
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a SQL setting for every arm's session (repeatable), e.g. spark.sql.adaptive.enabled=false",
    )
    parser.add_argument("--out", default=str(RESULTS), help="the report (bench/results/cluster_pushdown.md)")
    # Internal: the writer and the per-arm driver are this module run as child processes.
    hidden = argparse.SUPPRESS
    parser.add_argument("--writer", action="store_true", help=hidden)
    parser.add_argument("--driver", action="store_true", help=hidden)
    parser.add_argument("--jvm-log", help=hidden)
    parser.add_argument("--master", help=hidden)
    parser.add_argument("--redis-url", help=hidden)
    parser.add_argument("--worker-pid", type=int, help=hidden)
    parser.add_argument("--result", help=hidden)
    args = parser.parse_args()
    if args.in_use is None:
        args.in_use = args.series // 2
    if not 1 <= args.in_use <= args.series:
        parser.error("--in-use must be between 1 and --series")
    if not args.arms or set(args.arms) - set(ARMS):
        parser.error(f"--arms takes letters of {''.join(ARMS)}")
    if any("=" not in setting for setting in args.spark_conf):
        parser.error("--spark-conf takes KEY=VALUE")
    try:
        if args.writer:
            run_writer(args.redis_url, args.rate, args.series)
        elif args.driver:
            run_driver(args)
        else:
            orchestrate(args)
    except KeyboardInterrupt:
        if not (args.writer or args.driver):
            print("interrupted: every process the benchmark started is stopped", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
