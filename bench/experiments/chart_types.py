"""Decision 0059 (the chart types): what a live micro-batch costs a chart root, in process, no Spark.

A 1 kHz feed of x and y (and an enum channel e) back-filled for the window, then micro-batches of
100 ms (100 new points per channel); per batch: the thread CPU of `Computation.apply_batch` (the
held inputs spliced, the chart recomputed over the window) and of encoding its FullResult.

    python -m bench.experiments.chart_types [window seconds ...]   (default: 60 600)
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import numpy as np

from app.protocol import frames
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind

NANOS = 1_000_000_000
MS = 1_000_000
RID = "ri.bench.charts"
BATCHES = 20


def _union(kind: str, value: Any) -> dict[str, Any]:
    return {"type": kind, kind: value}


def _channel(name: str) -> dict[str, Any]:
    ds = {
        "dataSourceRid": _union("literal", RID),
        "channel": _union("literal", name),
        "tags": {},
        "tagsToGroupBy": [],
        "groupByTags": [],
    }
    return _union("channel", _union("dataSource", ds))


X, Y = _union("raw", {"name": "x"}), _union("raw", {"name": "y"})
E = _union("raw", {"name": "e"})
NODES = {
    "histogram x, y (100 buckets)": _union(
        "histogram",
        _union(
            "numeric",
            {"inputs": {"x": X, "y": Y}, "bucketStrategy": _union("bucketCount", _union("literal", 100))},
        ),
    ),
    "enum histogram e": _union("histogram", _union("enum", {"inputs": {"e": E}})),
    "scatter x, y (spatial, 2,000)": _union("cartesian", {"input": _union("scatter", {"x": X, "y": Y})}),
    "scatter x, y (temporal, 2,000)": _union(
        "cartesian",
        {
            "input": _union("scatter", {"x": X, "y": Y}),
            "summarizationStrategy": _union("temporal", {"xAggregation": "MEAN", "yAggregation": "MEAN"}),
        },
    ),
    "scatter3d x, y, x (2,000)": _union(
        "cartesian3d", {"input": _union("scatter3d", {"x": X, "y": Y, "z": X})}
    ),
    "multivariate x, y, e (1,000)": _union(
        "multivariate",
        {
            "inputs": [
                _union("numeric", {"series": X, "aggregations": ["MEAN", "MAX"]}),
                _union("numeric", {"series": Y, "aggregations": ["LAST"]}),
                _union("enum", {"series": E, "aggregations": ["MODE"]}),
            ]
        },
    ),
}
STATES = np.array(["idle", "run", "fault", "stop"], dtype=object)


def _rows(first: int, count: int, base: int) -> dict[int, Rows]:
    i = np.arange(first, first + count, dtype=np.int64)
    ts, seq = base + i * MS, i + 1
    return {
        1: Rows(seq, ts, np.sin(i / 700.0) + np.random.default_rng(first).normal(0, 0.1, count)),
        2: Rows(seq, ts, np.cos(i / 900.0) * 3),
        3: Rows(seq, ts, STATES[(i // 2000) % 4]),
    }


def measure(name: str, node: dict[str, Any], window_s: int) -> tuple[float, float, float]:
    variables = {"x": _channel("x"), "y": _channel("y"), "e": _channel("e")}
    plan = compile_plan(node, window_s * NANOS, variables, Limits(), ResultOptions())
    c = Computation(name, plan, allowed_lateness_ns=None)
    for sid, channel in ((1, "x"), (2, "y"), (3, "e")):
        kind = SeriesKind.ENUM if channel == "e" else SeriesKind.NUMERIC
        c.route(SeriesInfo(sid, SeriesKey.of(RID, channel, {}), kind))
    base = time.time_ns() - (window_s + 5) * NANOS
    n = (window_s + 5) * 1000
    c.backfill_seq = n
    c.load_backfill(_rows(0, n, base), base + n * MS)
    evaluate, encode = [], []
    for b in range(BATCHES):
        first = n + b * 100
        now = base + (first + 100) * MS
        t0 = time.thread_time()
        c.apply_batch(_rows(first, 100, base), now)
        t1 = time.thread_time()
        frames.full_update(c.snapshot(None), plan.grouped)
        t2 = time.thread_time()
        evaluate.append((t1 - t0) * 1000)
        encode.append((t2 - t1) * 1000)
    size = len(frames.full_update(c.snapshot(None), plan.grouped))
    return statistics.median(evaluate), statistics.median(encode), size / 1024


def main() -> None:
    windows = [int(w) for w in sys.argv[1:]] or [60, 600]
    print("| chart | window | evaluate p50 ms | encode p50 ms | FullResult KiB |")
    print("|---|---|---|---|---|")
    for window in windows:
        for name, node in NODES.items():
            ev, en, kib = measure(name, node, window)
            print(f"| {name} | {window} s | {ev:.1f} | {en:.1f} | {kib:.0f} |", flush=True)


if __name__ == "__main__":
    main()
