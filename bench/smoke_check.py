"""The checks a smoke run of the benchmark must pass (`make bench-smoke` runs them after
`python -m bench.run --smoke`): every workload yielded samples (long windows and both endpoints'
ingest ceilings too), the report names every target with a verdict, the idle crowd was served, the
baselines ran (both floors among them). Speed is not judged: the machine may be busy.

Run: python -m bench.smoke_check [data/bench-smoke/BENCHMARKS.md]
"""

from __future__ import annotations

import json
import shutil
import sys
import traceback
from pathlib import Path


def check(out: Path) -> None:
    """Raises AssertionError naming the first check a smoke run's report at `out` fails."""
    results = json.loads(out.with_suffix(".json").read_text())

    assert results["latency"]["n"] > 0
    assert results["latency"]["p50_ms"] > 0
    assert results["latency"]["batch"]["per_s"] > 0 and results["latency"]["batch"]["callback_ms"] > 0
    assert results["fanout"]["n"] > 0
    assert results["fanout"]["measured_subscriptions"] > 0
    f10 = results["fanout10x"]
    assert f10["n"] > 0 and f10["measured_subscriptions"] > 0 and f10["worst_sub_p99_ms"] > 0
    assert f10["usage"]["cpu_cores"] > 0 and f10["server_main_cpu_cores"] > 0 and f10["client_cpu_cores"]
    assert results["subscribe"]["new"]["n"] == results["plan"]["subscribe_new"]
    assert results["subscribe"]["live"]["n"] == results["plan"]["subscribe_live"]
    steps = results["ingest"]["steps"]
    assert steps and steps[0]["achieved"] > 0 and steps[0]["latency"]["n"] > 0
    idle = results["connections"]
    assert idle["count"] == idle["answered_ping"] == results["plan"]["idle_connections"]
    assert idle["kb_per_connection"] > 0
    assert idle["ping"]["n"] == idle["count"] and idle["ping"]["p50_ms"] > 0
    # workload 3b: long windows, on a server of its own
    lw, lwp = results["long_windows"], results["long_windows"]["plan"]
    assert lw["history"]["points"] > 0
    assert len(lw["single_ms"]) == lwp["repeats"] and min(lw["single_ms"]) > 0
    assert len(lw["concurrent_ms"]) == lwp["concurrent"] and min(lw["concurrent_ms"]) > 0
    assert len(lw["day_ms"]) == lwp["day_repeats"] and min(lw["day_ms"]) > 0
    assert lw["memory"]["computations"] == lwp["concurrent"] and lw["memory"]["window_points"]
    assert lw["cpu"]["single"]["cpu_cores"] > 0
    for name in ("hour", "day"):  # history written through the running server just before
        assert (
            len(lw["through"][f"{name}_ms"]) == lwp["through_repeats"]
            and min(lw["through"][f"{name}_ms"]) > 0
        )
    # workload 3c's evaluation arm, in process: both arms evaluated every micro-batch
    live, livep = results["live_eval"], results["live_eval"]["plan"]
    for arm in ("short", "long"):
        assert live[arm]["batches"] == livep["batches"] and live[arm]["all"]["mean_ms"] > 0, arm
        assert live[arm]["changes"] > 0, arm
    assert live["cpu_ratio_long_to_short"] is not None
    # workload 2b's evaluations beside it, in process
    mix = live["mix2b"]
    assert mix["computations"] == livep["mix2b_computations"] and mix["batches"] == livep["mix2b_batches"]
    assert mix["all"]["mean_ms"] > 0 and mix["by_kind"]
    # output formats: every arm framed and timed, both kinds
    formats = results["output_format"]
    assert {(r["kind"], r["arm"]) for r in formats["rows"]} >= {("bucketed", "LEGACY"), ("raw", "ARROW mean")}
    assert min(r["bytes"] for r in formats["rows"]) > 0 and min(r["encode_us"] for r in formats["rows"]) > 0
    # workload 3c's server arm: both arms updated and measured through a server of their own
    windows = results["live_windows"]
    for arm in ("long", "short"):
        assert windows[arm]["updates_per_sub_per_s"] > 0 and windows[arm]["latency"]["n"] > 0, arm
    assert windows["updates_ratio_long_to_short"] is not None and windows["usage"]["cpu_cores"] > 0
    through = windows["through"]  # and the arms one after the other over history written through it
    for arm in ("long", "short"):
        assert through[arm]["updates_per_sub_per_s"] > 0 and through[arm]["batch"]["per_s"] > 0, arm
    # the ingest ceiling: each endpoint ramped (tiny steps), its server's CPU split by thread
    ceiling = results["ingest_ceiling"]
    for endpoint in ("json", "protobuf"):
        steps = [s for s in ceiling["steps"] if s["endpoint"] == endpoint]
        assert steps and steps[0]["achieved"] > 0 and steps[0]["latency"]["n"] > 0, endpoint
        # past its listed rates (by step_up) unless the machine was too busy to hold the first one
        assert len(steps) >= 2 or not steps[0]["ok"], f"{endpoint}: the ramp stopped on a held step"
        cpu = steps[0]["server_cpu_cores"]
        assert cpu["server_python"] > 0 and cpu["event_loop"] > 0 and cpu["jvm"] >= 0
        assert ceiling[f"{endpoint}_stopped"] in ("failed", "bound")
    if shutil.which("py-spy") or Path(sys.executable).with_name("py-spy").exists():  # the bench extra
        assert ceiling["threads_named"], "py-spy named no log writer thread of the server"
    baselines = results["baselines"]
    fast = f"floor_{results['server_checkpoint']}_{results['plan']['floor_fast_trigger_ms']}ms"
    assert {"floor_disk", "floor_tmpfs", fast, "naive_2"} <= baselines.keys()
    collect = f"floor_collect_{results['server_checkpoint']}"
    for floor in ("floor_disk", "floor_tmpfs", fast, collect):
        assert baselines[floor]["latency"]["n"] > 0, floor
    assert baselines[fast]["trigger_ms"] == results["plan"]["floor_fast_trigger_ms"]
    # the naive design ran (a query dying on its first trigger is restarted) and is compared
    assert "error" not in baselines["naive_2"] and baselines["naive_2"]["latency"]["n"] > 0
    for usage in (results["latency"]["usage"], baselines["floor_disk"]["usage"]):
        assert usage["cpu_cores"] > 0 and usage["rss_max_mb"] > 100  # a JVM is in the tree

    # issue 47's polled targets (bench/polled.py): compute and FFT timed over HTTP, LTTB in process
    polled = results["polled"]
    assert len(polled["compute"]["times_ms"]) == polled["plan"]["compute_repeats"]
    assert min(polled["compute"]["times_ms"]) > 0
    assert len(polled["fft"]["times_ms"]) == polled["plan"]["fft_repeats"] and polled["fft"]["median_ms"] > 0
    assert polled["lttb"]["median_ms"] > 0
    streamed = polled["streamed"]
    assert streamed["apply_batch_ms"] > 0 and streamed["recompute_ms"] > 0
    assert streamed["window_points"] == polled["plan"]["streamed_window_s"] * 1000

    report = out.read_text()
    for heading in (
        "## Targets",
        "## Workloads",
        "Workload 3b: long windows",
        "3c, live long windows",
        "3c, live long windows: through a server",
        "Workload 4: ingest ramp",
        "Workload 4: ingest ceiling per endpoint",
        "<!-- ingest-ceiling:begin -->",
        "Workload 5: idle",
        "## Baselines",
    ):
        assert heading in report, heading
    assert "Reproduce: `python -m bench.run --smoke" in report
    # every target of the issue has its row in the first table, with a verdict
    table = report.split("## Targets", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| target")]
    for name in (
        "1 latency p50",
        "1 latency p99",
        "1 p50 vs Spark's floor",
        "1 p50 vs Spark's floor collecting the batch's rows",
        f"1 Spark's floor at a {results['plan']['floor_fast_trigger_ms']} ms trigger",
        "2 fan-out p99",
        "2b fan-out at 10x p99",
        "2b worst subscriber's p99",
        "3 new computation p50",
        "3 live computation p50",
        "3b hour window, new computation: FullResult p50",
        "hour windows at once: last FullResult",
        "3b day window, new computation: FullResult p50",
        "3b memory per live hour-window computation",
        "3b hour window written through the server just before: FullResult p50",
        "3b day window written through the server just before: FullResult p50",
        "3c updates per subscription per second, hour / 60 s (server)",
        "3c hour windows: write-to-frame p99 (server)",
        "3c written through the server: updates per subscription per second, hour / 60 s",
        "3c written through the server: CPU per computation per micro-batch, hour / 60 s",
        "4 ingest ceiling JSON",
        "4 ingest ceiling protobuf+zstd",
        "5 idle connection",
        "47 compute to 1,000 buckets (polled, HTTP): median",
        "47 FFT (polled, HTTP): median",
    ):
        row = next((r for r in rows if name in r), None)
        assert row is not None, f"no target row {name!r}"
        assert "not measured" not in row and "| n/a |" not in row, row
    assert "<= 1.25x" in table and "<= 30 KB" in table
    assert "x Sparkwire's p50" in report
    assert f"5 ping -> pong, all {idle['count']:,} connections at once" in report


if __name__ == "__main__":
    report_path = Path(sys.argv[1] if len(sys.argv) > 1 else "data/bench-smoke/BENCHMARKS.md")
    try:
        check(report_path)
    except AssertionError:
        traceback.print_exc()  # the failing line is the check that failed
        raise SystemExit(f"bench smoke check failed: {report_path}") from None
    print(f"bench smoke check passed: {report_path}")
