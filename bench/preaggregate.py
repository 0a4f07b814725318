"""Pre-aggregation on and off, measured in one process with its own Spark session and the server's
own engine, log and computations (bench-only code, never part of the server):

- back-fill: a new bucketed computation (1000 buckets) grouped over 10 channels x 1 kHz x 120 s of
  history (1.2M points): time of `Engine.add` (the Spark job plus the driver), raw vs pre-aggregated,
  alternated, `backfill_runs` times each.
- live: a writer thread feeds the same 10 channels at `live_hz` each (one request per 10 ms) while a
  bucketed computation over them is live; per micro-batch: engine seconds, rows reaching the driver,
  points in the batch. One streaming run with pre-aggregation off, one with it on, `live_s` each.

Run: python -m bench.preaggregate [live_s=20] [live_hz=1000] [backfill_runs=3] [out=path.json]
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from compute.compiler import Limits, ResultOptions, compile_plan
from compute.computation import Computation
from compute.embedded_log import EmbeddedLog
from compute.engine import BatchStats, Engine
from compute.log import DurableLog, SeriesWrite
from compute.series import SeriesKey, SeriesKind
from compute.session import build_session

NANOS = 1_000_000_000
MS = 1_000_000
CHANNELS = 10
RID = "ri.bench.preaggregate"


def writes_for(t0: int, points: int, step: int) -> list[SeriesWrite]:
    out = []
    for c in range(CHANNELS):
        ts = [t0 + i * step for i in range(points)]
        values = [float((t // MS + c) % 1000) * 0.01 for t in ts]
        out.append(SeriesWrite(SeriesKey.of(RID, "sensor", {"ch": str(c)}), SeriesKind.NUMERIC, ts, values))
    return out


def fill_history(log: DurableLog, seconds: int, hz: int) -> int:
    """seconds x hz points per channel ending now, 10 ms per request; returns the end timestamp."""
    step = NANOS // hz
    per_request = max(1, hz // 100)
    end = time.time_ns() // MS * MS
    t = end - seconds * NANOS
    futures = []
    while t < end:
        futures.append(log.submit(writes_for(t, per_request, step)))
        t += per_request * step
    for f in futures:
        f.result()
    return end


def computation(key: str, window_s: float) -> Computation:
    node = {
        "type": "series",
        "series": {
            "input": {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": "x"}}},
            "numericAggregations": {},
            "buckets": 1000,
        },
    }
    lit = {"type": "literal", "literal": None}
    channel = {
        "type": "channel",
        "channel": {
            "type": "dataSource",
            "dataSource": {
                "dataSourceRid": {**lit, "literal": RID},
                "channel": {**lit, "literal": "sensor"},
                "tags": {},
                "tagsToGroupBy": [],
                "groupByTags": [{**lit, "literal": "ch"}],
            },
        },
    }
    window = int(window_s * NANOS)
    plan = compile_plan(node, window, {"x": channel}, Limits(), ResultOptions())
    return Computation(key, plan, allowed_lateness_ns=None)


class Writer:
    def __init__(self, log: DurableLog, hz: int) -> None:
        self.log, self.step, self.per_request = log, NANOS // hz, max(1, hz // 100)
        self.next_ts = time.time_ns() // MS * MS
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.points = 0

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            self.log.submit(writes_for(self.next_ts, self.per_request, self.step)).result()
            self.next_ts += self.per_request * self.step
            self.points += self.per_request * CHANNELS
            due += 0.01
            time.sleep(max(0.0, due - time.monotonic()))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def live_run(
    spark: Any, log: EmbeddedLog, durable: DurableLog, tmp: Path, min_points: int, cfg: dict
) -> dict:
    batches: list[BatchStats] = []
    engine = Engine(spark, log, tmp / f"ck-{min_points}", 100, lambda changes: None, min_points)
    engine.on_batch = batches.append
    writer = Writer(durable, cfg["live_hz"])
    writer.start()
    engine.start()
    engine.first_trigger_ran(timeout=120)
    engine.add(computation(f"live-{min_points}", cfg["live_window_s"]))
    time.sleep(cfg["warm_s"])
    first = len(batches)
    time.sleep(cfg["live_s"])
    measured = batches[first:]
    writer.stop()
    engine.stop()
    seconds = sorted(b.seconds for b in measured)
    return {
        "preaggregate_min_points": min_points,
        "batches": len(measured),
        "batch_s_p50": statistics.median(seconds),
        "batch_s_p90": seconds[int(0.9 * (len(seconds) - 1))],
        "driver_rows_per_batch": statistics.mean(b.rows for b in measured),
        "points_per_batch": statistics.mean(
            b.rows - b.aggregated_buckets + b.aggregated_points for b in measured
        ),
        "aggregated_share": sum(b.aggregated_points for b in measured)
        / max(1, sum(b.rows - b.aggregated_buckets + b.aggregated_points for b in measured)),
    }


def main(argv: list[str]) -> None:
    cfg: dict[str, Any] = {
        "live_s": 20.0,
        "warm_s": 8.0,
        "live_hz": 1000,
        "live_window_s": 10.0,
        "history_s": 120,
        "history_hz": 1000,
        "backfill_runs": 3,
        "out": "",
    }
    for arg in argv:
        name, value = arg.split("=", 1)
        cfg[name] = type(cfg[name])(value) if cfg[name] != "" else value
    tmp = Path(tempfile.mkdtemp(prefix="sparkwire-preagg-"))
    durable = DurableLog(tmp / "log.db")
    log = EmbeddedLog(durable, "bench")
    try:
        started = time.perf_counter()
        fill_history(durable, cfg["history_s"], cfg["history_hz"])
        print(f"history written in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        spark = build_session("local[2]", jvm_output=tmp / "spark.log")
        results: dict[str, Any] = {"config": cfg, "backfill": {"raw": [], "preaggregated": []}}
        engines = {
            "raw": Engine(spark, log, tmp / "ck-b0", 100, lambda changes: None, 0),
            "preaggregated": Engine(spark, log, tmp / "ck-b1", 100, lambda changes: None, 1),
        }
        engines["raw"].warm_up()
        for run in range(cfg["backfill_runs"] + 1):  # the first round warms both plans up
            for name, engine in engines.items():
                c = computation(f"backfill-{name}-{run}", cfg["history_s"])
                t = time.perf_counter()
                engine.add(c)
                elapsed = time.perf_counter() - t
                if run:
                    results["backfill"][name].append(elapsed)
                print(f"back-fill {name}: {elapsed:.2f} s, bucketed={c.bucketed}", file=sys.stderr)
                engine.remove(c)
        for min_points in (0, 2):
            results[f"live_{min_points}"] = live_run(spark, log, durable, tmp, min_points, cfg)
            print(json.dumps(results[f"live_{min_points}"]), file=sys.stderr)
        report(results)
        if cfg["out"]:
            Path(cfg["out"]).write_text(json.dumps(results, indent=2))
    finally:
        durable.close()
        shutil.rmtree(tmp, ignore_errors=True)


def report(r: dict[str, Any]) -> None:
    raw, agg = r["backfill"]["raw"], r["backfill"]["preaggregated"]
    cfg = r["config"]
    points = CHANNELS * cfg["history_s"] * cfg["history_hz"]
    print(f"## Back-fill: 1000 buckets over {cfg['history_s']} s of {CHANNELS} channels ({points} points)")
    print("| path | median s | runs |")
    print("|---|---|---|")
    print(
        f"| raw points to the driver | {statistics.median(raw):.2f} | {', '.join(f'{x:.2f}' for x in raw)} |"
    )
    print(f"| pre-aggregated | {statistics.median(agg):.2f} | {', '.join(f'{x:.2f}' for x in agg)} |")
    print()
    hz, window = cfg["live_hz"], cfg["live_window_s"]
    print(f"## Live: {CHANNELS} channels x {hz} Hz, 1000 buckets over {window} s")
    print("| pre-aggregation | batches | batch s p50 | p90 | driver rows / batch | points / batch |", end="")
    print(" aggregated |")
    print("|---|---|---|---|---|---|---|")
    for key, label in (("live_0", "off"), ("live_2", "on")):
        x = r[key]
        print(
            f"| {label} | {x['batches']} | {x['batch_s_p50']:.3f} | {x['batch_s_p90']:.3f} | "
            f"{x['driver_rows_per_batch']:.0f} | {x['points_per_batch']:.0f} | {x['aggregated_share']:.0%} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
