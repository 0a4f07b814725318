"""What an edge's forwarding of a read costs (docs/decisions/0103): the same ComputeService request
and export asked of the compute process directly and through an edge, alternating, on real
processes (a throwaway broker and redis-server, one `--role compute`, one `--role edge`, 127.0.0.1).

Per request kind: the median and max wall time of each path over ROUNDS, and whether every answer
through the edge was byte for byte the compute process's own.

`python -m bench.experiments.forwarded_reads [--rounds 20]` prints a Markdown table."""

from __future__ import annotations

import argparse
import asyncio
import gzip
import math
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from tests import node_json as n
from tests.infra import RoleStarter, start_redis
from tests.kafka_broker import start_kafka
from tests.server import test_compute_service as cs
from tests.server import test_sdk_reads as sdk
from tests.wire import NANOS, write_points

POINTS = 40_000  # 200 s of a 200 Hz sine


def _time(url: str, body: dict[str, object]) -> tuple[float, bytes]:
    started = time.perf_counter()
    r = httpx.post(url, json=body, timeout=300)
    r.raise_for_status()
    return time.perf_counter() - started, r.content


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="forwarded-reads-") as tmp:
        work = Path(tmp)
        kafka, redis_server = start_kafka(work / "kafka"), start_redis(work / "redis")
        env = {
            "SPARKWIRE_SOURCE": "kafka",
            "SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap,
            "SPARKWIRE_KAFKA_TOPIC": "forwarded-reads",
            "SPARKWIRE_REDIS_URL": redis_server.url,
            "SPARKWIRE_SHUTDOWN_GRACE": "0",
        }
        start = RoleStarter(work, env, [])
        try:
            compute, edge = start("compute", "compute", 600), start("edge", "edge", 120)
            rid = sdk.five_part_rid()
            t0 = (time.time_ns() // NANOS - 300) * NANOS
            wave = [(t0 + i * 5_000_000, 10.0 * math.sin(2 * math.pi * i / 400)) for i in range(POINTS)]
            for k in range(0, POINTS, 10_000):
                await write_points(edge.base_url, rid, "wave", wave[k : k + 10_000])
            start_ns, end_ns = t0, t0 + 200 * NANOS
            asks = {
                "compute, 1,000 buckets": (
                    "/compute/v2/compute",
                    cs.request_body(
                        n.series(n.numeric_series(n.channel(rid, "wave")), buckets=1000), start_ns, end_ns
                    ),
                ),
                "export, 40,000 points as CSV": (
                    "/export/v1/export",
                    sdk.export_request(rid, {"w": ("numeric", "wave", {})}, start_ns, end_ns),
                ),
            }
            rows = []
            for kind, (path, body) in asks.items():
                _time(compute.base_url + path, body)  # warm: the first Spark job of its kind
                direct, through, same = [], [], True
                for _ in range(rounds):
                    d, direct_answer = _time(compute.base_url + path, body)
                    t, edge_answer = _time(edge.base_url + path, body)
                    direct.append(d)
                    through.append(t)
                    if path.startswith("/export"):  # gzip stamps its own time: the CSV is compared
                        edge_answer, direct_answer = (
                            gzip.decompress(edge_answer),
                            gzip.decompress(direct_answer),
                        )
                    same = same and edge_answer == direct_answer
                rows.append((kind, direct, through, same))
        finally:
            for process in start.processes:
                process.stop()
            redis_server.daemon.stop()
            kafka.stop()
    print(f"{rounds} rounds, alternating; {POINTS:,} points written\n")
    print("| request | compute process, median (max) | through an edge, median (max) | added | same answer |")
    print("|---|---|---|---|---|")
    for kind, direct, through, same in rows:
        dm, tm = statistics.median(direct), statistics.median(through)
        print(
            f"| {kind} | {dm * 1000:.0f} ms ({max(direct) * 1000:.0f}) | {tm * 1000:.0f} ms "
            f"({max(through) * 1000:.0f}) | {(tm - dm) * 1000:+.0f} ms | {same} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    asyncio.run(main(parser.parse_args().rounds))
