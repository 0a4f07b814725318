"""Every size and duration of a benchmark run, so a run can be as short or as long as wanted.

`FULL` is what `make bench` runs (the issue's workloads, ~32 minutes on 2 cores: bench/README.md
breaks it down); `SMOKE` is the same harness at a tiny load, run by `make bench-smoke` and checked
by bench/smoke_check.py, so the harness never rots. Workloads 3b (long windows) and the ingest
ceiling have plans of their own (bench/long_windows.py's `LongWindowsPlan`, bench/ingest_ceiling.py's
`CeilingPlan`, each with FULL and SMOKE); bench/run.py takes their fields as
`long_windows.NAME=VALUE` and `ingest_ceiling.NAME=VALUE`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar


@dataclass(frozen=True)
class Plan:
    channels: int = 10
    rate_hz: int = 1000  # per channel
    request_ms: float = 10
    trigger_ms: int = 100
    server_checkpoint: str = ""  # "" = the server's default; or a directory for SPARKWIRE_CHECKPOINT_DIR
    deflate: bool = True  # clients offer permessage-deflate, as browsers do
    # workload 1: latency
    warmup_s: float = 20
    latency_s: float = 60
    latency_window_ms: int = 5000  # raw points (up to computations.RAW_POINTS)
    # workload 2: fan-out
    fanout_subscriptions: int = 1000
    fanout_computations: int = 100
    fanout_connections: int = 200
    fanout_processes: int = 2
    fanout_warmup_s: float = 10
    fanout_s: float = 60
    # workload 2b: fan-out at 10x (issue 20), fed as workload 1; four client processes, so that
    # decoding 10,000 subscriptions' frames is spread over both cores (their CPU is reported)
    fanout10x_subscriptions: int = 10_000
    fanout10x_computations: int = 1000
    fanout10x_connections: int = 1000
    fanout10x_processes: int = 4
    fanout10x_warmup_s: float = 15
    fanout10x_s: float = 60
    # workload 3: subscribe
    history_s: float = 120
    subscribe_new: int = 10
    subscribe_live: int = 20
    # workload 4: ingest in the shared server (total points/s, in order; the ramp stops at the first
    # step that fails); the ingest target is judged on the ceiling's ramps (bench/ingest_ceiling.py)
    ingest_rates: tuple[int, ...] = (20_000, 50_000, 100_000, 150_000, 200_000, 250_000, 300_000)
    ingest_step_s: float = 25
    ingest_warmup_s: float = 5
    # workload 5: idle connections
    idle_connections: int = 5000
    idle_settle_s: float = 5
    # baselines
    baselines: bool = True
    baselines_alongside: bool = False  # run them while the server runs (smoke only: figures then interfere)
    floor_warmup_s: float = 20
    floor_s: float = 60
    floor_fast_trigger_ms: int = 50  # a second floor at this trigger (0: none; docs/decisions/0035)
    naive_queries: tuple[int, ...] = (10, 50)
    naive_warmup_s: float = 30
    naive_s: float = 60


FULL = Plan()

SMOKE = Plan(
    channels=2,
    rate_hz=200,
    warmup_s=4,
    latency_s=4,
    fanout_subscriptions=16,
    fanout_computations=8,
    fanout_connections=4,
    fanout_processes=1,
    fanout_warmup_s=2,
    fanout_s=4,
    fanout10x_subscriptions=24,
    fanout10x_computations=12,
    fanout10x_connections=6,
    fanout10x_processes=2,
    fanout10x_warmup_s=2,
    fanout10x_s=4,
    history_s=0,
    subscribe_new=2,
    subscribe_live=2,
    ingest_rates=(1_000, 2_000),
    ingest_step_s=4,
    ingest_warmup_s=1,
    idle_connections=50,
    idle_settle_s=1,
    floor_warmup_s=15,  # a fresh JVM's first ~20 s show multi-second batches (docs/design.md)
    floor_s=6,
    naive_queries=(2,),
    baselines_alongside=True,
    naive_warmup_s=8,
    naive_s=4,
)


P = TypeVar("P")


def with_overrides(plan: P, overrides: list[str]) -> P:
    """Apply NAME=VALUE overrides (e.g. latency_s=30, ingest_rates=20000,50000) to any plan dataclass
    of bench/ (this one, the soak's, the ingest ceiling's, the retention A/B's)."""
    types = {f.name: f.type for f in fields(plan)}  # type: ignore[arg-type]
    changes: dict[str, Any] = {}
    for item in overrides:
        name, _, raw = item.partition("=")
        if name not in types:
            raise SystemExit(f"unknown plan field {name!r}; fields: {', '.join(types)}")
        current = getattr(plan, name)
        if isinstance(current, tuple):
            element = type(current[0]) if current else int  # rates are ints, endpoint names str
            changes[name] = tuple(element(x) for x in raw.split(",") if x)
        elif isinstance(current, bool):
            changes[name] = raw.lower() in ("1", "true", "yes")
        else:
            changes[name] = type(current)(raw)
    return replace(plan, **changes)  # type: ignore[type-var]
