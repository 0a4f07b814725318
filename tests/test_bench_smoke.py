"""The benchmark harness at a tiny load, so it never rots: `python -m bench.run --smoke` starts its own
server and baselines, drives every workload from separate processes and writes the report.

Speed is not asserted here (the machine may be busy); the harness's measurements are: every
workload yields samples, the report says what each target came to, and the idle crowd was served.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(1200)
def test_smoke_benchmark_measures_every_workload_and_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "BENCHMARKS.md"
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--smoke", "--out", str(out), "--work", str(tmp_path / "work")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads(out.with_suffix(".json").read_text())

    assert results["latency"]["n"] > 0
    assert results["latency"]["p50_ms"] > 0
    assert results["latency"]["batch"]["per_s"] > 0 and results["latency"]["batch"]["callback_ms"] > 0
    assert results["fanout"]["n"] > 0
    assert results["fanout"]["measured_subscriptions"] > 0
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
    assert "x Sparkwire's p50" in report
    assert f"5 ping -> pong, all {idle['count']:,} connections at once" in report
