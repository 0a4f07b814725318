"""Workload 3c's evaluation cost, in process: what a live computation costs per micro-batch with an
hour-long window against the same computation over 60 s.

    python -m bench.live_eval [--smoke] [--mix2b] [--out FILE.json] [NAME=VALUE ...]

No server and no Spark: the engine's own `Computation`s (compute/evaluation), back-filled with a
window's worth of a 1 kHz feed of x and y, then fed `batches` micro-batches of `batch_ms` of new
points, as the stream's driver does. For each arm (`long_s`, `short_s`) `per_kind` computations of
each kind of workload 3c: `x + y`, `derivative(x)`, a 10 s rolling mean of x (each bucketed to
`buckets`), and the ranges where x > 0.5. Reported per arm: the evaluation CPU per micro-batch of
all of them (this thread's CPU time, mean / p50 / p95 / max over the batches) and per kind, and the
back-fill's. Windows are not shared between computations here (each copies the back-fill), so the
full plan's hour arm holds ~2 GB.

`--mix2b` measures workload 2b's 1,000 computations instead (bench/computations.py's mix over 10
channels of 1 kHz, back-filled with 70 s, then 100 ms micro-batches of all 10 channels).

Only the compute/evaluation API that existed before the incremental contract is used, so the same
script measures an older tree (PYTHONPATH=<an extracted older tree>)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind

NANOS = 1_000_000_000
MS = 1_000_000
RID = "ri.bench.live"
X, Y = 1, 2


@dataclass(frozen=True)
class LiveEvalPlan:
    rate_hz: int = 1000
    long_s: int = 3600
    short_s: int = 60
    per_kind: int = 5
    buckets: int = 1000
    batch_ms: int = 100
    batches: int = 60
    kinds: tuple[str, ...] = ("sum", "derivative", "rolling_mean", "threshold_ranges")
    # workload 2b's evaluations, measured beside 3c's arms (0: not measured)
    mix2b_computations: int = 1000
    mix2b_batches: int = 20


FULL = LiveEvalPlan()
SMOKE = LiveEvalPlan(long_s=300, per_kind=1, batches=10, mix2b_computations=100, mix2b_batches=5)


def _raw(name: str) -> dict[str, Any]:
    return {"type": "raw", "raw": {"name": name}}


def _series(node: dict[str, Any], buckets: int) -> dict[str, Any]:
    return {"type": "series", "series": {"input": {"type": "numeric", "numeric": node}, "buckets": buckets}}


def node_of(kind: str, buckets: int) -> dict[str, Any]:
    if kind == "sum":
        return _series({"type": "add", "add": {"left": _raw("x"), "right": _raw("y")}}, buckets)
    if kind == "derivative":
        return _series({"type": "derivative", "derivative": {"input": _raw("x")}}, buckets)
    if kind == "rolling_mean":
        rolling = {
            "type": "rollingTime",
            "rollingTime": {
                "input": {"type": "numeric", "numeric": _raw("x")},
                "window": {"type": "seconds", "seconds": {"seconds": {"type": "literal", "literal": 10}}},
            },
        }
        aggregation = {"input": rolling, "operator": {"type": "average", "average": {}}}
        return _series({"type": "numericAggregation", "numericAggregation": aggregation}, buckets)
    if kind == "threshold_ranges":
        threshold = {
            "input": _raw("x"),
            "threshold": {"type": "literal", "literal": 0.5},
            "operator": "GREATER_THAN",
        }
        return {"type": "ranges", "ranges": {"input": {"type": "threshold", "threshold": threshold}}}
    raise ValueError(kind)


def _context() -> dict[str, Any]:
    def channel(name: str) -> dict[str, Any]:
        source = {
            "dataSourceRid": {"type": "literal", "literal": RID},
            "channel": {"type": "literal", "literal": name},
            "tags": {},
        }
        return {"type": "channel", "channel": {"type": "dataSource", "dataSource": source}}

    return {"x": channel("x"), "y": channel("y")}


def feed(start: int, count: int, rate_hz: int, seq0: int) -> dict[int, Rows]:
    """x: a 10 s sine (its ranges above 0.5 last ~3.3 s), y: a slower cosine, at `rate_hz`."""
    i = np.arange(count, dtype=np.int64)
    ts = start + i * (NANOS // rate_hz)
    seconds = (ts - ts[0]) / NANOS if count else ts.astype(np.float64)
    phase = (start // (NANOS // rate_hz)) / rate_hz
    x = np.sin(2 * np.pi * (seconds + phase) / 10)
    y = np.cos(2 * np.pi * (seconds + phase) / 37)
    seq = seq0 + i
    return {X: Rows(seq, ts, x), Y: Rows(seq, ts.copy(), y)}


def _computation(kind: str, index: int, window_s: int, plan: LiveEvalPlan) -> Computation:
    node = node_of(kind, plan.buckets)
    compiled = compile_plan(node, window_s * NANOS, _context(), Limits(), ResultOptions())
    computation = Computation(f"{kind}-{index}", compiled, allowed_lateness_ns=None)
    for sid, name in ((X, "x"), (Y, "y")):
        computation.route(SeriesInfo(sid, SeriesKey.of(RID, name, {}), SeriesKind.NUMERIC))
    return computation


def ms_summary(ms: list[float]) -> dict[str, float]:
    """Mean, p50, p95 and max of per-batch milliseconds (the experiments in process report these)."""
    ordered = sorted(ms)
    return {
        "mean_ms": round(statistics.fmean(ordered), 3),
        "p50_ms": round(ordered[len(ordered) // 2], 3),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
        "max_ms": round(ordered[-1], 3),
    }


def measure_arm(plan: LiveEvalPlan, window_s: int) -> dict[str, Any]:
    step = NANOS // plan.rate_hz
    now = 1_800_000_000 * NANOS
    history = (window_s + 20) * plan.rate_hz  # the window, its lookback (10 s rolling) and a margin
    start = now - history * step
    computations = {k: [_computation(k, i, window_s, plan) for i in range(plan.per_kind)] for k in plan.kinds}
    backfill_ms: dict[str, float] = {}
    for kind, comps in computations.items():
        began = time.thread_time()
        for c in comps:
            rows = feed(start, history, plan.rate_hz, 1)
            c.backfill_seq = history
            c.load_backfill(rows, now)
        backfill_ms[kind] = (time.thread_time() - began) * 1000 / len(comps)
    per_batch = plan.rate_hz * plan.batch_ms // 1000
    t, seq = now, history + 1
    totals: list[float] = []
    by_kind: dict[str, list[float]] = {k: [] for k in plan.kinds}
    changes = 0
    for _ in range(plan.batches):
        rows = feed(t + step, per_batch, plan.rate_hz, seq)
        t += per_batch * step
        seq += per_batch
        total = 0.0
        for kind, comps in computations.items():
            began = time.thread_time()
            for c in comps:
                changes += c.apply_batch(rows, t) is not None
            spent = (time.thread_time() - began) * 1000
            by_kind[kind].append(spent)
            total += spent
        totals.append(total)
    held = {k: comps[0].points_held() for k, comps in computations.items()}
    return {
        "window_s": window_s,
        "computations": sum(len(c) for c in computations.values()),
        "points_per_batch": per_batch,
        "batches": plan.batches,
        "changes": changes,
        "all": ms_summary(totals),
        "by_kind": {k: ms_summary(v) for k, v in by_kind.items()},
        "backfill_ms_per_computation": {k: round(v, 1) for k, v in backfill_ms.items()},
        "held_points_window_output": held,
    }


@dataclass
class Mix2b:
    """Workload 2b's computations, back-filled, and the micro-batches that follow (`next_batch`)."""

    built: list[tuple[str, Computation]]  # (kind, computation)
    infos: list[SeriesInfo]
    t: int  # the clock: the newest point written
    seq: int

    rate_hz = 1000
    batch_ms = 100
    history_s = 70

    @classmethod
    def setup(cls, computations: int = 1000, channels: int = 10) -> Mix2b:
        from bench.computations import KINDS, mix
        from bench.feed import channel_name

        infos = [
            SeriesInfo(100 + c, SeriesKey.of(RID, channel_name(c), {}), SeriesKind.NUMERIC)
            for c in range(channels)
        ]
        built: list[tuple[str, Computation]] = []
        for i, sub in enumerate(mix(RID, computations, list(KINDS), channels)):
            request = sub.body["computeRequest"]
            width = request["windowWidth"]
            plan = compile_plan(
                request["node"],
                width["seconds"] * NANOS + width["nanos"],
                request["context"]["variables"],
                Limits(),
                ResultOptions(),
            )
            c = Computation(f"mix-{i}", plan, allowed_lateness_ns=None)
            for info in infos:
                c.route(info)
            built.append((sub.kind, c))
        now = 1_800_000_000 * NANOS
        history = cls.history_s * cls.rate_hz
        mix2b = cls(built, infos, now, history + 1)
        start = now - history * mix2b.step
        for _, c in built:
            c.backfill_seq = history
            c.load_backfill(
                {sid: r for sid, r in mix2b.rows(start, history, 1).items() if sid in c.routes}, now
            )
        return mix2b

    @property
    def step(self) -> int:
        return NANOS // self.rate_hz

    def rows(self, start: int, count: int, seq0: int) -> dict[int, Rows]:
        i = np.arange(count, dtype=np.int64)
        ts = start + i * self.step
        return {
            info.id: Rows(seq0 + i, ts.copy(), np.sin(ts / NANOS + c) * 2 + c)
            for c, info in enumerate(self.infos)
        }

    def next_batch(self) -> dict[int, Rows]:
        """The next `batch_ms` of every channel; the clock moves to its newest point."""
        per_batch = self.rate_hz * self.batch_ms // 1000
        batch = self.rows(self.t + self.step, per_batch, self.seq)
        self.t += per_batch * self.step
        self.seq += per_batch
        return batch


def measure_mix2b(computations: int = 1000, channels: int = 10, batches: int = 20) -> dict[str, Any]:
    """Workload 2b's evaluations: CPU per micro-batch of all `computations`, per kind."""
    mix2b = Mix2b.setup(computations, channels)
    totals: list[float] = []
    by_kind: dict[str, list[float]] = {}
    for _ in range(batches):
        batch = mix2b.next_batch()
        spent: dict[str, float] = {}
        for kind, c in mix2b.built:
            own = {sid: r for sid, r in batch.items() if sid in c.routes}  # as the driver hands them
            began = time.thread_time()
            c.apply_batch(own, mix2b.t)
            spent[kind] = spent.get(kind, 0.0) + (time.thread_time() - began) * 1000
        for kind, ms in spent.items():
            by_kind.setdefault(kind, []).append(ms)
        totals.append(sum(spent.values()))
    return {
        "computations": computations,
        "batches": batches,
        "all": ms_summary(totals),
        "by_kind": {k: ms_summary(v) for k, v in by_kind.items()},
    }


def measure(plan: LiveEvalPlan) -> dict[str, Any]:
    short = measure_arm(plan, plan.short_s)
    long = measure_arm(plan, plan.long_s)
    ratio = long["all"]["mean_ms"] / short["all"]["mean_ms"] if short["all"]["mean_ms"] else None
    results = {
        "plan": dataclasses.asdict(plan),
        "short": short,
        "long": long,
        "cpu_ratio_long_to_short": ratio,
    }
    if plan.mix2b_computations:
        results["mix2b"] = measure_mix2b(plan.mix2b_computations, batches=plan.mix2b_batches)
    return results


def render(results: dict[str, Any]) -> str:
    lines = [
        "### 3c, live long windows: evaluation CPU per micro-batch, in process (bench/live_eval.py)",
        "",
        "| arm | computations | mean ms | p50 ms | p95 ms | max ms | "
        + " | ".join(f"{k} mean ms" for k in results["plan"]["kinds"])
        + " |",
        "|---|---|---|---|---|---|" + "---|" * len(results["plan"]["kinds"]),
    ]
    for name in ("short", "long"):
        arm = results[name]
        a = arm["all"]
        kinds = " | ".join(str(arm["by_kind"][k]["mean_ms"]) for k in results["plan"]["kinds"])
        lines.append(
            f"| {arm['window_s']} s | {arm['computations']} | {a['mean_ms']} | {a['p50_ms']} | "
            f"{a['p95_ms']} | {a['max_ms']} | {kinds} |"
        )
    ratio = results["cpu_ratio_long_to_short"]
    lines += ["", f"Hour arm / 60 s arm, mean evaluation CPU per micro-batch: {ratio:.2f}x (target <= 1.5x)."]
    mix = results.get("mix2b")
    if mix:
        a = mix["all"]
        kinds = ", ".join(f"{k} {v['mean_ms']}" for k, v in mix["by_kind"].items())
        lines += [
            "",
            f"Workload 2b's {mix['computations']:,} computations (`--mix2b`), evaluation CPU per "
            f"micro-batch of all of them over {mix['batches']} batches: mean {a['mean_ms']} ms, "
            f"p50 {a['p50_ms']}, p95 {a['p95_ms']}, max {a['max_ms']} (target <= 50 ms); "
            f"mean ms by kind: {kinds}.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--mix2b", action="store_true", help="workload 2b's 1,000 computations instead")
    parser.add_argument("--out")
    parser.add_argument("overrides", nargs="*", help="NAME=VALUE for LiveEvalPlan")
    args = parser.parse_args(argv)
    plan = SMOKE if args.smoke else FULL
    changes: dict[str, Any] = {}
    for item in args.overrides:
        name, _, value = item.partition("=")
        current = getattr(plan, name)
        changes[name] = tuple(value.split(",")) if isinstance(current, tuple) else type(current)(value)
    plan = dataclasses.replace(plan, **changes)
    if args.mix2b:
        mixed = measure_mix2b(batches=plan.batches)
        if args.out:
            with open(args.out, "w") as f:
                f.write(json.dumps(mixed, indent=2) + "\n")
        sys.stdout.write(json.dumps(mixed, indent=2) + "\n")
        return
    results = measure(plan)
    text = json.dumps(results, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    sys.stdout.write(render(results))


if __name__ == "__main__":
    main()
