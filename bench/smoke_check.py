"""The checks a smoke run of the benchmark must pass (`make bench-smoke` runs them after
`python -m bench.run --smoke`): every workload yielded samples, the report says what each target came
to, the idle crowd was served, the baselines ran. Speed is not judged: the machine may be busy.

Run: python -m bench.smoke_check [data/bench-smoke/BENCHMARKS.md]
"""

from __future__ import annotations

import json
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
    baselines = results["baselines"]
    assert {"floor_disk", "floor_tmpfs", "naive_2"} <= baselines.keys()
    assert baselines["floor_disk"]["latency"]["n"] > 0 and baselines["floor_tmpfs"]["latency"]["n"] > 0
    # the naive design ran (a query dying on its first trigger is restarted) and is compared
    assert "error" not in baselines["naive_2"] and baselines["naive_2"]["latency"]["n"] > 0
    for usage in (results["latency"]["usage"], baselines["floor_disk"]["usage"]):
        assert usage["cpu_cores"] > 0 and usage["rss_max_mb"] > 100  # a JVM is in the tree

    report = out.read_text()
    for heading in (
        "## Targets",
        "## Workloads",
        "Workload 4: ingest ramp",
        "Workload 5: idle",
        "## Baselines",
    ):
        assert heading in report
    assert "Reproduce: `python -m bench.run --smoke" in report
    assert "1 latency p99" in report and "5 idle connection" in report
    assert "2b fan-out at 10x p99" in report and "2b worst subscriber's p99" in report
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
