"""The Kafka log's back-fill trap, measured through real servers (decision 0101): the time from a
subscribe to its FullResult for a new computation over a series the server already follows, with the
followed series kept (`kafka-followed-points`, the default) and without (0: a Spark job reads the
series' partition from the window's start), in the same run, alternating.

A throwaway broker (deploy/kafka.sh), one topic of PARTITIONS partitions holding SERIES series of an
hour each; two all-in-one servers on it, one per arm. Each arm first subscribes one computation over
series s0 (both read Kafka then), then ROUNDS new computations over s0, each distinct (an unused
variable), one at a time; every FullResult's points are counted and must agree between the arms.

    python -m bench.followed_backfill [--rounds 5] [--rate 20] [--out BENCHMARKS.followed.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import websockets

from bench.kafka_log import start_broker
from bench.serverproc import ServerProcess, start_server, stop_process

NANOS = 1_000_000_000
SERIES = 20
PARTITIONS = 4
WINDOW_S = 3600


def _ts(ns: int) -> dict[str, int]:
    return {"seconds": ns // NANOS, "nanos": ns % NANOS}


def _subscription(rid: str, tag: str) -> dict[str, Any]:
    channel = {
        "type": "channel",
        "channel": {
            "type": "dataSource",
            "dataSource": {
                "dataSourceRid": {"type": "literal", "literal": rid},
                "channel": {"type": "literal", "literal": "s0"},
                "tags": {},
                "tagsToGroupBy": [],
                "groupByTags": [],
            },
        },
    }
    node = {
        "type": "series",
        "series": {"input": {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": "x"}}}},
    }
    return {
        "computeRequest": {
            "node": node,
            "windowWidth": {"seconds": WINDOW_S, "nanos": 0},
            "context": {
                "variables": {"x": channel, tag: {"type": "double", "double": 1.0}},
                "datasetReferences": {},
            },
        },
        "subscriptionOptions": {"minDelay": 0, "allowAppends": True},
    }


async def _subscribe(ws: Any, rid: str, tag: str) -> tuple[float, str, int]:
    """Seconds from subscribe to FullResult, its result type and its timestamps."""
    started = time.perf_counter()
    await ws.send(orjson.dumps({"type": "subscribe", "subscribe": {tag: _subscription(rid, tag)}}).decode())
    while True:
        msg = orjson.loads(await asyncio.wait_for(ws.recv(), 300))
        kind = msg["type"]
        if kind == "subscriptionCreation" and msg[kind]["creation"]["type"] != "success":
            raise RuntimeError(f"refused: {msg}")
        if (
            kind == "subscriptionUpdate"
            and msg[kind]["subscriptionId"] == tag
            and msg[kind]["update"]["type"] == "full"
        ):
            seconds = time.perf_counter() - started
            result = msg[kind]["update"]["full"]["result"]
            return seconds, result["type"], len(result[result["type"]]["timestamps"])


async def _full_result(server: ServerProcess, rid: str, tag: str) -> tuple[float, str, int]:
    """A new computation's FullResult on a connection of its own, which then closes."""
    async with websockets.connect(server.ws_url, max_size=None) as ws:
        return await _subscribe(ws, rid, tag)


async def _write_history(base_url: str, rid: str, rate: int) -> int:
    """SERIES series x one hour at `rate` points/s, ending now, in requests of every series."""
    end = time.time_ns() - NANOS
    step = NANOS // rate
    points = WINDOW_S * rate - rate * 60  # within the window with a minute to spare
    per_request = 2_000
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as http:
        for start in range(0, points, per_request):
            n = min(per_request, points - start)
            stamps = [end - (points - start - k) * step for k in range(n)]
            body = {
                "dataSourceRid": rid,
                "batches": [
                    {
                        "channel": f"s{s}",
                        "tags": {},
                        "points": {
                            "type": "double",
                            "double": [{"timestamp": _ts(t), "value": float(s)} for t in stamps],
                        },
                    }
                    for s in range(SERIES)
                ],
            }
            r = await http.post("/storage/writer/v1", json=body)
            r.raise_for_status()
    return points


async def run(args: argparse.Namespace, servers: dict[str, ServerProcess]) -> dict[str, Any]:
    rid = f"ri.bench.followed.{time.time_ns()}"
    per_series = await _write_history(servers["kept"].base_url, rid, args.rate)
    result: dict[str, Any] = {"points_per_series": per_series, "points_in_log": per_series * SERIES}
    # The first computation over s0 (a Kafka read in both arms) stays subscribed: s0 is followed.
    first = {arm: await websockets.connect(server.ws_url, max_size=None) for arm, server in servers.items()}
    times: dict[str, list[float]] = {arm: [] for arm in servers}
    counts: dict[str, list[int]] = {arm: [] for arm in servers}
    try:
        for arm in servers:
            seconds, kind, points = await _subscribe(first[arm], rid, f"first{time.time_ns()}")
            result[f"{arm}_first"] = {"seconds": round(seconds, 3), "result": kind, "timestamps": points}
        for _ in range(args.rounds):
            for arm, server in servers.items():
                seconds, kind, points = await _full_result(server, rid, f"n{time.time_ns()}")
                times[arm].append(seconds)
                counts[arm].append(points)
    finally:
        for ws in first.values():
            await ws.close()
    for arm, server in servers.items():
        metrics = server.metrics()
        result[arm] = {
            "seconds": [round(s, 3) for s in times[arm]],
            "median_s": round(statistics.median(times[arm]), 3),
            "points": counts[arm],
            "served_from_followed": metrics.get("sparkwire_backfills_from_followed_series_total", 0.0),
            "followed_points": metrics.get("sparkwire_followed_series_points", 0.0),
        }
    assert counts["kept"] == counts["not_kept"], counts
    result["ratio_not_kept_over_kept"] = round(result["not_kept"]["median_s"] / result["kept"]["median_s"], 1)
    return result


def report(result: dict[str, Any]) -> str:
    kept, not_kept = result["kept"], result["not_kept"]
    return "\n".join(
        [
            "# The Kafka log's back-fill of a followed series (bench/followed_backfill.py)",
            "",
            f"- Date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; 2-core machine, one broker, "
            f"{PARTITIONS} partitions, {SERIES} series of {result['points_per_series']:,} points "
            f"({result['points_in_log']:,} in the log); window {WINDOW_S} s",
            "- Two all-in-one servers on the same topic, alternating: `kept` (kafka-followed-points default) "
            "and `not_kept` (0)",
            "",
            "| | first computation over s0 | each later new one over s0 (median) | all | timestamps each |",
            "|---|---|---|---|---|",
            f"| kept | {result['kept_first']['seconds']} s | {kept['median_s']} s | {kept['seconds']} | "
            f"{kept['points'][0]:,} |",
            f"| not kept | {result['not_kept_first']['seconds']} s | {not_kept['median_s']} s | "
            f"{not_kept['seconds']} | {not_kept['points'][0]:,} |",
            "",
            f"- Each FullResult is `{result['kept_first']['result']}`, the same in both arms.",
            f"- Not kept / kept: {result['ratio_not_kept_over_kept']}x. Served from the followed series: "
            f"{kept['served_from_followed']:.0f} (kept), {not_kept['served_from_followed']:.0f} (not kept); "
            f"points kept: {kept['followed_points']:,.0f}.",
            "",
            "```json",
            json.dumps(result, indent=2),
            "```",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rate", type=int, default=20, help="points/s of each series' hour")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="followed-bench-"))
    broker, bootstrap = start_broker(work)
    servers: dict[str, ServerProcess] = {}
    try:
        env = {
            "SPARKWIRE_SOURCE": "kafka",
            "SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "SPARKWIRE_KAFKA_TOPIC": "bench-followed",
            "SPARKWIRE_KAFKA_PARTITIONS": str(PARTITIONS),
        }
        for arm, kept in (("kept", None), ("not_kept", "0")):
            extra = {} if kept is None else {"SPARKWIRE_KAFKA_FOLLOWED_POINTS": kept}
            servers[arm] = start_server(work / arm, work / f"{arm}.log", {**env, **extra}, ready_timeout=600)
        result = asyncio.run(run(args, servers))
    finally:
        for server in servers.values():
            server.stop()
        stop_process(broker)
        shutil.rmtree(work, ignore_errors=True)
    text = report(result)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
