"""The ingest ceiling of each point log, side by side in one run (issue 45: Kafka replaced Redis
Streams because it measured at least as well on every count, the ingest ceiling among them; the
Redis arm's last figures are in decision 0097).

For each log in `sources` (embedded, kafka by default), one after the other on the same machine: a
fresh all-in-one server on that log (a throwaway broker and redis-server beside it, as
bench/scale_out.py starts them), one subscriber, and bench/ingest_ceiling.py's ramp on the JSON
endpoint (`endpoints`) after one unjudged warm-up step at its first rate. A step holds when the
log accepts the rate: >= 95% of it stored, the requests' p99 under 500 ms, no request failed. The
end-to-end p99 (write -> frame) is given beside it, not judged: on a shared log it holds the log's
round trip and its stream's trigger, and under ingest_ceiling.py's 500 ms rule the first run
stopped both shared logs at their first step (200,000 points/s stored in full, p99 1.3-1.5 s on
Kafka, 2.4-3.3 s on Redis). On Kafka a 200 means every point of the request is acknowledged by the
log (`acks=all`, one transaction), so the ramp measures the log's write path as a client sees it.
The log's own process is measured too: the broker's resident memory at the end of the ramp.

    python -m bench.log_ingest [--smoke] [sources=embedded,kafka] [step_s=20] [json_rates=...]

Writes BENCHMARKS.log-ingest.md and its JSON (data/bench-smoke/ with --smoke).
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench import ingest_ceiling as ic
from bench.plan import with_overrides
from bench.serverproc import ROOT
from tests.infra import start_redis
from tests.kafka_broker import start_kafka

Json = Any
SOURCES = ("embedded", "kafka")
KAFKA_TOPIC = "bench-log-ingest"
JSON_RAMP = replace(ic.FULL, endpoints=("json",), warmup_steps=1, judge_latency=False)


@dataclass(frozen=True)
class LogIngestPlan:
    sources: tuple[str, ...] = SOURCES
    ramp: ic.CeilingPlan = JSON_RAMP


SMOKE = LogIngestPlan(ramp=replace(ic.SMOKE, endpoints=("json",), warmup_steps=1, judge_latency=False))


def rss_mb(pid: int) -> float:
    """Resident memory of one process and its children (the broker's JVM is a child of its launcher)."""
    total = 0.0
    for p in [pid, *_descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except FileNotFoundError:
            continue
    return round(total, 1)


def _descendants(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return []
    out = [int(c) for c in children]
    return out + [d for c in out for d in _descendants(c)]


def measure_source(source: str, ramp: ic.CeilingPlan, work: Path) -> Json:
    """One log's JSON ramp on a fresh all-in-one server; its figures and the log process's memory."""
    env = {"SPARKWIRE_SOURCE": source}
    redis = kafka = None
    try:
        if source == "kafka":  # with its Redis, as the recipes give it (its catalog there)
            redis = start_redis(work / "redis")
            env["SPARKWIRE_REDIS_URL"] = redis.url
            kafka = start_kafka(work / "kafka")
            env["SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS"] = kafka.bootstrap
            env["SPARKWIRE_KAFKA_TOPIC"] = KAFKA_TOPIC
        results: Json = ic.measure(ramp, work / "ramp", env)
        log_pid = None
        if kafka is not None and kafka.daemon is not None:
            log_pid = kafka.daemon.process.pid
        results["log_process_rss_mb"] = rss_mb(log_pid) if log_pid else None
        return results
    finally:
        if kafka is not None:
            kafka.stop()
        if redis is not None:
            redis.daemon.stop()


def run(plan: LogIngestPlan) -> Json:
    work = Path(tempfile.mkdtemp(prefix="sparkwire-log-ingest-"))
    out: Json = {"plan": asdict(plan), "sources": {}}
    for source in plan.sources:
        print(f"[log_ingest] {source}: the JSON ramp", flush=True)
        out["sources"][source] = measure_source(source, plan.ramp, work / source)
    return out


def render(results: Json) -> str:
    ramp = results["plan"]["ramp"]
    lines = [
        "# The point logs' ingest ceilings, side by side",
        "",
        "`python -m bench.log_ingest` (issue 45, decision 0096): for each log one after the other, a "
        "fresh all-in-one server on it, one subscriber, and the JSON endpoint's ramp of "
        f"bench/ingest_ceiling.py ({ramp['step_s']:g} s steps from {ramp['json_rates'][0]:,} points/s, "
        f"{ramp['channels']} channels, after {ramp.get('warmup_steps', 0)} unjudged warm-up step(s) at "
        "the first rate). A step holds when the log accepts the rate: >= 95% of it stored, the "
        "requests' p99 under 500 ms, no request failed. The end-to-end p99 (write -> frame) is "
        "given, not judged. The ceiling is the most points/s stored in a step that held. CPU in "
        "cores at the ceiling; memory: the log's own process at the end of its ramp.",
        "",
        "| log | JSON ceiling (points/s) | first step not held | end-to-end p99 ms at the first rate | "
        "end-to-end p99 ms at the ceiling | request p99 ms at the ceiling | server Python | JVM | "
        "Spark Python | log process MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for source, r in results["sources"].items():
        held = ic.held_steps(r, "json")
        top = max(held, key=lambda s: s["achieved"]) if held else None
        failing = ic.failing_step(r, "json")
        why = f"{failing['target']:,}: " + ", ".join(ic.why_not_held(failing)) if failing else "none"
        first = r["steps"][0]["latency"].get("p99_ms", "-") if r["steps"] else "-"
        cells = ["-"] * 5
        if top is not None:
            trips = top.get("request_ms") or {}
            cpu = top["server_cpu_cores"]
            cells = [
                str(top["latency"].get("p99_ms", "-")),
                str(trips.get("p99", "-")),
                str(cpu["server_python"]),
                str(cpu["jvm"]),
                str(cpu["spark_python"]),
            ]
        rss = r.get("log_process_rss_mb")
        lines.append(
            f"| {source} | {ic.ceiling(r, 'json'):,} | {why} | {first} | {' | '.join(cells)} | "
            f"{'-' if rss is None else f'{rss:,.0f}'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = sys.argv[1:]
    smoke = "--smoke" in args
    plan = SMOKE if smoke else LogIngestPlan()
    overrides = [a for a in args if a != "--smoke"]
    sources = [a for a in overrides if a.startswith("sources=")]
    if sources:
        plan = replace(plan, sources=tuple(x for x in sources[-1].split("=", 1)[1].split(",") if x))
    plan = replace(
        plan, ramp=with_overrides(plan.ramp, [a for a in overrides if not a.startswith("sources=")])
    )
    unknown = set(plan.sources) - set(SOURCES)
    if unknown:
        raise SystemExit(f"sources: {sorted(unknown)} are not logs; the logs are {', '.join(SOURCES)}")
    results = run(plan)
    folder = ROOT / "data" / "bench-smoke" if smoke else ROOT
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "BENCHMARKS.log-ingest.json").write_text(json.dumps(results, indent=1))
    (folder / "BENCHMARKS.log-ingest.md").write_text(render(results))
    print(render(results))


if __name__ == "__main__":
    main()
