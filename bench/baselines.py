"""The two baselines, measured on the same machine in the same run, in one process with its own
Spark session (bench-only code, never part of the server):

- floor: the server's source (the SQLite log through the Python data source) and trigger, with a
  `foreachBatch` that does nothing. Latency = commit of a write -> the callback of the batch that
  holds it. The stream reader reads the log while Spark plans a batch (decision record 0009), so
  the floor includes reading every point. Run with the checkpoint in the data dir and on tmpfs, at
  the run's trigger, and once more at a shorter one (a phase's own `trigger_ms`; docs/decisions/0035).
- floor_collect: the floor whose callback collects the subscribed series' rows of the batch to Python
  as the server's does (the `series_id IN` filter, `collect_arrow`, the blocks unpacked): the one
  Spark job any consumer of a micro-batch's rows runs, which the empty callback never starts.
- naive: one streaming query per subscription, each filtering its own series and collecting it in
  its own callback. Latency = commit -> that query's callback has collected the write. The queries
  start one at a time; one that dies on its first trigger is started again (counted in the report).

The writer thread uses the server's own DurableLog (group commit, fsync before acknowledging).
Run: python -m bench.baselines @spec.json
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.feed import channel_name, value_at
from bench.procstat import TreeSampler
from bench.stats import summarize
from compute.storage import records
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesKey, SeriesKind
from compute.storage.sqlite import blocks
from compute.storage.sqlite.connection import connect_reader
from compute.storage.sqlite.writer import DurableLog

Json = Any
DIED = "streaming queries died"  # the report tells a design that failed under load by this
START_ATTEMPTS = 3  # per query, as the server's own start (app/runtime/server.py)


class LogWriter:
    """Writes the feed straight into a DurableLog, recording (commit ns, last seq) per request."""

    def __init__(self, log: DurableLog, channels: int, rate_hz: int, request_ms: float) -> None:
        self.log, self.channels, self.request_s = log, channels, request_ms / 1000
        self.tick = 1_000_000_000 // rate_hz
        self.rows: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._reader = connect_reader(log.path)
        self._thread = threading.Thread(target=self._run, name="bench-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last_k = time.time_ns() // self.tick
        keys = [SeriesKey.of("ri.bench.baseline", channel_name(c), {}) for c in range(self.channels)]
        next_due = time.monotonic()
        while not self._stop.is_set():
            next_due += self.request_s
            self._stop.wait(max(0.0, next_due - time.monotonic()))
            now_k = time.time_ns() // self.tick
            if now_k <= last_k:
                continue
            ks = range(last_k + 1, now_k + 1)
            writes = [
                SeriesWrite(
                    key, SeriesKind.NUMERIC, [k * self.tick for k in ks], [value_at(k, c) for k in ks]
                )
                for c, key in enumerate(keys)
            ]
            self.log.submit(writes).result()
            committed = time.time_ns()
            self.rows.append((committed, blocks.max_seq(self._reader)))
            last_k = now_k

    def series_ids(self) -> list[int]:
        by_channel = {info.key.channel: info.id for info in self.log.series()}
        return [by_channel[channel_name(c)] for c in range(self.channels)]


def _batch_end_seq(checkpoint: Path, batch_id: int) -> int:
    """The source offset a micro-batch ended at, from the checkpoint's offset log."""
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    return int(json.loads(lines[-1])["seq"])


def _latencies(writes: np.ndarray, callbacks: list[tuple[int, int]], t_from: int, t_to: int) -> np.ndarray:
    """writes: (commit ns, last seq); callbacks: (done ns, batch end seq) in order."""
    if not callbacks:
        return np.empty(0)
    cb = np.array(callbacks, dtype=np.int64)
    reach = np.maximum.accumulate(cb[:, 1])
    w = writes[(writes[:, 0] >= t_from) & (writes[:, 0] <= t_to)]
    idx = np.searchsorted(reach, w[:, 1], side="left")
    seen = idx < len(cb)
    return (cb[idx[seen], 0] - w[seen, 0]) / 1e6


def _batch_phases(handles: list[Any], t_from: int) -> dict[str, float]:
    """Median time per micro-batch in each of Spark's phases (walCommit = offset log write,
    commitOffsets = commit log write, addBatch = the foreachBatch callback), from query progress."""
    samples: dict[str, list[float]] = {}
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t_from / 1e9))
    for h in handles:
        for progress in h.recentProgress:
            if progress.timestamp[:19] < since:
                continue
            for key, ms in (progress.durationMs or {}).items():
                samples.setdefault(key, []).append(float(ms))
    return {k: round(float(np.median(v)), 1) for k, v in sorted(samples.items())}


def _root_cause(exc: BaseException) -> str:
    """One line for the report: the JVM running out of heap if it did, else the first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    return next((line for line in lines if "OutOfMemoryError" in line), lines[0])


def run_phase(
    spark: Any, log: DurableLog, writer: LogWriter, phase: Json, work: Path, trigger_ms: int
) -> Json:
    """One phase's figures; a design that breaks once its queries are running raises with DIED."""
    handles: list[Any] = []
    try:
        return _measure(spark, log, writer, phase, work, trigger_ms, handles)
    except Exception as exc:
        if not handles:
            raise  # nothing of the design ran: a fault of the bench or the machine
        queries = int(phase.get("queries", 1))
        started = f"{len(handles)} of {queries} started"
        raise RuntimeError(f"{phase['name']}: {DIED} ({started}): {_root_cause(exc)}") from exc


def _measure(
    spark: Any,
    log: DurableLog,
    writer: LogWriter,
    phase: Json,
    work: Path,
    trigger_ms: int,
    handles: list[Any],
) -> Json:
    from pyspark.sql import functions as F

    from compute.spark.arrow_collect import collect_arrow
    from compute.spark.engine import first_trigger_ran
    from compute.storage.sqlite.spark_source import SOURCE_NAME

    kind, queries = phase["kind"], int(phase.get("queries", 1))
    base = Path(tempfile.mkdtemp(dir="/dev/shm")) if phase.get("checkpoint") == "tmpfs" else work / "ckpt"
    base = base / phase["name"]
    shutil.rmtree(base, ignore_errors=True)
    start_seq = blocks.max_seq(writer._reader)
    sids = writer.series_ids()
    callbacks: list[list[tuple[int, int]]] = [[] for _ in range(queries)]
    # built once, as the server builds its filter once per change of the series in use
    in_use = F.col("series_id").isin([sids[0]])
    start_retries = 0
    for q in range(queries):

        def callback(df: Any, batch_id: int, q: int = q) -> None:
            if kind == "naive":
                records.points_of_blocks(df.filter(f"series_id = {sids[q % len(sids)]}").toArrow())
            elif kind == "floor_collect":  # the server's collect (compute/spark/engine.py _on_batch)
                records.points_of_blocks(collect_arrow(df.where(in_use), records.BLOCK_SCHEMA))
            done = time.time_ns()
            # read now: Spark purges offset files of old batches (it keeps the last 100)
            callbacks[q].append((done, _batch_end_seq(base / f"q{q}", batch_id)))

        # One query at a time, each through its first trigger before the next starts, restarted if it
        # dies there, as the server restarts its own (app/runtime/server.py): that trigger starts the query's
        # Python runner, which Spark gives a fixed 10 s to connect back, and dozens starting together on
        # 2 cores miss it. Start-up is not what this baseline measures; a query dying later still fails it.
        for attempt in range(1, START_ATTEMPTS + 1):
            shutil.rmtree(base / f"q{q}", ignore_errors=True)
            handle = (
                spark.readStream.format(SOURCE_NAME)
                .option("path", str(log.path))
                .option("start_seq", str(start_seq))
                .load()
                .writeStream.foreachBatch(callback)
                .trigger(processingTime=f"{trigger_ms} milliseconds")
                .option("checkpointLocation", str(base / f"q{q}"))
                .queryName(f"{phase['name']}_{q}")
                .start()
            )
            if first_trigger_ran(handle, timeout=120):
                handles.append(handle)
                break
            reason = _root_cause(handle.exception() or RuntimeError("no first trigger in 120 s"))
            with contextlib.suppress(Exception):
                handle.stop()
            if attempt == START_ATTEMPTS:
                raise RuntimeError(f"query {q} did not start in {START_ATTEMPTS} attempts: {reason}")
            start_retries += 1
            print(f"{phase['name']}: query {q} died on its first trigger ({reason})", file=sys.stderr)
            callbacks[q].clear()
    sampler = TreeSampler(os.getpid()).start()
    time.sleep(phase["warmup_s"])
    t_from, mark = time.time_ns(), sampler.mark()
    time.sleep(phase["duration_s"])
    usage = sampler.usage_since(mark)
    t_to = time.time_ns() - 2_000_000_000  # later writes may not have reached a callback yet
    failed = [h.exception() for h in handles if not h.isActive]
    phases_ms = _batch_phases(handles, t_from)
    for h in handles:
        h.stop()
    sampler.stop()
    if failed:
        oom = next((e for e in failed if "OutOfMemoryError" in str(e)), failed[0])
        raise RuntimeError(f"{len(failed)} died; {_root_cause(oom)}")
    writes = np.array(writer.rows, dtype=np.int64)
    lat = np.concatenate(
        [_latencies(writes, callbacks[q], t_from, t_to) for q in range(queries)] or [np.empty(0)]
    )
    batches = [len([c for c in cbs if c[0] >= t_from]) for cbs in callbacks]
    if phase.get("checkpoint") == "tmpfs":
        shutil.rmtree(base.parent, ignore_errors=True)
    return {
        "name": phase["name"],
        "kind": kind,
        "queries": queries,
        "checkpoint": phase.get("checkpoint", "disk"),
        "trigger_ms": trigger_ms,
        "latency": summarize(lat).as_dict(),
        "batches_per_query": round(float(np.mean(batches)) / phase["duration_s"], 2),
        "start_retries": start_retries,
        "batch_phases_ms": phases_ms,
        "usage": usage.as_dict(),
    }


def main() -> None:
    arg = sys.argv[1]
    spec = json.loads(Path(arg[1:]).read_text() if arg.startswith("@") else arg)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from compute.spark.session import build_session
    from compute.storage.sqlite.spark_source import LogDataSource

    work = Path(spec["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    spark = build_session("local[2]")
    spark.dataSource.register(LogDataSource)
    spark.range(1).toArrow()
    log = DurableLog(work / "log.db")
    writer = LogWriter(log, spec["channels"], spec["rate_hz"], spec["request_ms"])
    writer.start()
    while not writer.rows:  # the series exist once the first request committed
        time.sleep(0.05)
    results = []
    try:
        for phase in spec["phases"]:
            try:
                trigger_ms = int(phase.get("trigger_ms", spec["trigger_ms"]))
                results.append(run_phase(spark, log, writer, phase, work, trigger_ms))
            except Exception as exc:  # a design that cannot run here is a result too
                # The failure may have taken the SparkContext with it (e.g. the JVM's heap ran out).
                with contextlib.suppress(Exception):
                    for query in spark.streams.active:
                        query.stop()
                error = _root_cause(exc)[:400]
                results.append({**phase, "queries": phase.get("queries", 1), "error": error})
            print(json.dumps(results[-1]), flush=True)
    finally:
        writer.stop()
        log.close()
        Path(spec["out"]).write_text(json.dumps(results, indent=1))
        with contextlib.suppress(Exception):
            spark.stop()


if __name__ == "__main__":
    main()
