"""What a node across groups costs per micro-batch, against the same computation without it
(docs/decisions/0057-nodes-across-groups.md).

In process, no server and no Spark: the engine's own `Computation`s (compute/evaluation), each
back-filled with a window of `groups` series of one channel (tag `vehicle`, each at `rate_hz`, their
timestamps offset so that no two groups share one), then fed `batches` micro-batches of `batch_ms`
of new points of every group, as the stream's driver hands them. Arms, each bucketed to `buckets`:
- `grouped`: the channel grouped by vehicle, no node (the baseline);
- `filterByTag`: the groups of half the vehicles;
- `selectTags`: every vehicle in one group (selectTags of no key);
- `zScore`: every group against the family of all of them (1 s forward fill);
- `zScore whole`: the same zScore re-evaluated over the whole window each micro-batch (what a node
  without an incremental form costs).
Reported per arm: this thread's CPU per micro-batch (mean / p50 / p95 / max ms) and the back-fill's.
The arms run one after another, `rounds` times alternating, so the machine's noise hits each.

Run: python -m bench.experiments.cross_group [groups=10] [rate_hz=100] [window_s=600] [batches=40]
    [rounds=2]
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from bench.live_eval import ms_summary
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind

NANOS = 1_000_000_000
MS = 1_000_000
RID = "ri.bench.cross_group"


@dataclass(frozen=True)
class Plan:
    groups: int = 10
    rate_hz: int = 100
    window_s: int = 600
    buckets: int = 1000
    batch_ms: int = 100
    batches: int = 40
    rounds: int = 2


def _lit(x: Any) -> dict[str, Any]:
    return {"type": "literal", "literal": x}


def _g() -> dict[str, Any]:
    return {"type": "raw", "raw": {"name": "g"}}


def node_of(arm: str, plan: Plan) -> dict[str, Any]:
    g = _g()
    if arm == "filterByTag":
        kept = [_lit(f"v{i}") for i in range(0, plan.groups, 2)]
        predicate = {
            "type": "in",
            "in": {"key": _lit("vehicle"), "values": {"type": "literal", "literal": kept}},
        }
        g = {"type": "filterByTag", "filterByTag": {"input": g, "predicate": predicate}}
    elif arm == "selectTags":
        g = {"type": "selectTags", "selectTags": {"input": g, "tagKeys": []}}
    elif arm.startswith("zScore"):
        g = {"type": "zScore", "zScore": {"input": g, "groupByTags": []}}
    body = {"input": {"type": "numeric", "numeric": g}, "numericAggregations": {}, "buckets": plan.buckets}
    return {"type": "series", "series": body}


def _context() -> dict[str, Any]:
    source = {
        "dataSourceRid": _lit(RID),
        "channel": _lit("g"),
        "tags": {},
        "groupByTags": [_lit("vehicle")],
    }
    return {"g": {"type": "channel", "channel": {"type": "dataSource", "dataSource": source}}}


def feed(plan: Plan, start: int, count: int, seq0: int) -> dict[int, Rows]:
    """`count` points of every group from `start`, group i offset by i ms, a sine of its own phase."""
    step = NANOS // plan.rate_hz
    i = np.arange(count, dtype=np.int64)
    out = {}
    for group in range(plan.groups):
        ts = start + i * step + group * MS
        values = np.sin(ts / NANOS / 7 + group) * (1 + group / 10)
        out[group + 1] = Rows(seq0 + i, ts, values)
    return out


def _computation(arm: str, plan: Plan) -> Computation:
    compiled = compile_plan(node_of(arm, plan), plan.window_s * NANOS, _context(), Limits(), ResultOptions())
    computation = Computation(arm, compiled, allowed_lateness_ns=None)
    for group in range(plan.groups):
        key = SeriesKey.of(RID, "g", {"vehicle": f"v{group}"})
        computation.route(SeriesInfo(group + 1, key, SeriesKind.NUMERIC))
    return computation


def measure_arm(arm: str, plan: Plan) -> dict[str, Any]:
    step = NANOS // plan.rate_hz
    now = 1_800_000_000 * NANOS
    history = (plan.window_s + 20) * plan.rate_hz
    start = now - history * step
    computation = _computation(arm, plan)
    began = time.thread_time()
    computation.backfill_seq = history
    computation.load_backfill(feed(plan, start, history, 1), now)
    backfill_ms = (time.thread_time() - began) * 1000
    per_batch = plan.rate_hz * plan.batch_ms // 1000
    t, seq = now, history + 1
    spent: list[float] = []
    for _ in range(plan.batches):
        rows = feed(plan, t + step, per_batch, seq)
        t += per_batch * step
        seq += per_batch
        began = time.thread_time()
        if arm.endswith("whole"):
            with computation.lock:  # as apply_batch, but the whole window evaluated
                computation._apply(rows, t, live=True)
                computation._evaluate(t, whole=True)
        else:
            computation.apply_batch(rows, t)
        spent.append((time.thread_time() - began) * 1000)
    groups = len(computation.outputs)
    return {"arm": arm, "groups_out": groups, "backfill_ms": round(backfill_ms, 1), **ms_summary(spent)}


ARMS = ("grouped", "filterByTag", "selectTags", "zScore", "zScore whole")


def main(argv: list[str]) -> None:
    plan = Plan()
    for arg in argv:
        name, _, value = arg.partition("=")
        if name not in {f.name for f in fields(Plan)}:
            raise SystemExit(f"unknown setting {name}")
        plan = replace(plan, **{name: int(value)})
    runs = [measure_arm(arm, plan) for _ in range(plan.rounds) for arm in ARMS]
    print(json.dumps({"plan": plan.__dict__, "runs": runs}, indent=1))
    print(
        f"| arm | groups out | CPU per micro-batch mean / p50 / p95 ms ({plan.groups} groups x "
        f"{plan.rate_hz} Hz, {plan.window_s} s window) | back-fill ms |"
    )
    print("|---|---|---|---|")
    for run in runs:
        print(
            f"| {run['arm']} | {run['groups_out']} | {run['mean_ms']} / {run['p50_ms']} / {run['p95_ms']} "
            f"| {run['backfill_ms']} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
