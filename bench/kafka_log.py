"""The Kafka log against the embedded log, in one run (issue 45, decision 0076): what a point costs
the stream to read, and how fast the Kafka writer ingests.

- Ingest: the same requests (SERIES series x BLOCK points each) submitted to each log, `--inflight`
  at a time as concurrent HTTP requests would be; points/s once every future resolved (Kafka:
  committed transactions, acks=all), and the latency of one request alone.
- Stream read: a streaming query from the start of each log over everything written, each batch
  handled as the engine's micro-batch is (the series filter, one Arrow collect to the driver, the
  blocks to numpy points); the cost is Spark's own triggerExecution time of the batches that
  carried rows, per point.
- The series catalog read to its end, as every micro-batch and every new computation reads it
  before routing (`poll_new_series`), on a quiet log.
- Back-fill of one series: the Spark batch job a new computation's history is (the Kafka source
  reads its whole partition from the window's start).

    python -m bench.kafka_log [--points 1000000] [--bootstrap HOST:PORT]

Without --bootstrap a throwaway broker is started from deploy/kafka.sh in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

from compute.storage import records
from compute.storage.contract import PointLog, SeriesWrite
from compute.storage.series import SeriesKey, SeriesKind

ROOT = Path(__file__).resolve().parents[1]
NANOS = 1_000_000_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    from confluent_kafka.admin import AdminClient

    port, controller = _free_port(), _free_port()
    log = (workdir / "kafka.log").open("wb")
    process = subprocess.Popen(
        [str(ROOT / "deploy" / "kafka.sh"), "run", str(port), str(workdir / "data")],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "KAFKA_CONTROLLER_PORT": str(controller)},
    )
    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the broker exited: {(workdir / 'kafka.log').read_text()[-2000:]}")
        try:
            if admin.list_topics(timeout=2).brokers:
                return process, bootstrap
        except Exception:
            time.sleep(0.5)
    raise RuntimeError("the broker did not start in 180 s")


def requests(points: int, series: int, block: int) -> list[list[SeriesWrite]]:
    """`points` in requests of `series` series x `block` points, timestamps in the last hour."""
    out = []
    start = time.time_ns() - 3600 * NANOS
    rng = np.random.default_rng(7)
    per_request = series * block
    for r in range(points // per_request):
        writes = []
        for s in range(series):
            ts = start + (r * block + np.arange(block, dtype=np.int64)) * 1_000_000
            key = SeriesKey.of("ri.bench.kafka", f"ch{s}", {"unit": "m"})
            writes.append(SeriesWrite(key, SeriesKind.NUMERIC, ts, rng.standard_normal(block)))
        out.append(writes)
    return out


def ingest(log: PointLog, batches: list[list[SeriesWrite]], inflight: int) -> dict[str, float]:
    points = sum(len(w.ts) for writes in batches for w in writes)
    log.submit(batches[0]).result(timeout=120)  # warm: the Kafka producer's init_transactions
    started = time.perf_counter()
    pending: list[Future[int]] = []
    for writes in batches:
        pending.append(log.submit(writes))
        if len(pending) >= inflight:
            pending.pop(0).result(timeout=120)
    for f in pending:
        f.result(timeout=120)
    seconds = time.perf_counter() - started
    alone = []
    for writes in batches[:20]:
        t = time.perf_counter()
        log.submit(writes).result(timeout=60)
        alone.append(time.perf_counter() - t)
    return {
        "points": points,
        "seconds": round(seconds, 3),
        "points_per_s": round(points / seconds),
        "one_request_p50_ms": round(statistics.median(alone) * 1000, 2),
        "written": points + sum(len(w.ts) for writes in batches[: len(alone) + 1] for w in writes),
    }


def catalog_polls(log: PointLog, n: int = 40, pause_s: float = 0.2) -> dict[str, float]:
    """What every micro-batch and every new computation waits for before it can route: the series
    catalog read to its end (`poll_new_series`), asked `n` times `pause_s` apart, as a quiet log is
    (the catalog consumer then holds a fetch open at the end of its partition)."""
    took = []
    for _ in range(n):
        time.sleep(pause_s)
        t = time.perf_counter()
        log.poll_new_series()
        took.append((time.perf_counter() - t) * 1000)
    return {
        "n": n,
        "p50_ms": round(statistics.median(took), 2),
        "max_ms": round(max(took), 2),
    }


def stream_read(spark: Any, stream: Any, decode: Callable[[Any], Any], schema: Any, expect: int) -> dict:
    """Run a streaming query over `stream` until `expect` points arrived; Spark's triggerExecution
    of the batches with rows, per point."""
    from compute.spark.arrow_collect import collect_arrow

    got = {"points": 0, "batch": -1}

    def on_batch(batch: Any, batch_id: int) -> None:
        table = decode(collect_arrow(batch.where("series_id is not null"), schema))
        got["points"] += table.num_rows
        got["batch"] = batch_id

    checkpoint = tempfile.mkdtemp(prefix="kafka-bench-ckpt-")
    query = (
        stream.writeStream.foreachBatch(on_batch)
        .trigger(processingTime="100 milliseconds")
        .option("checkpointLocation", checkpoint)
        .start()
    )
    deadline = time.monotonic() + 600
    try:
        while got["points"] < expect:
            if not query.isActive or time.monotonic() > deadline:
                raise RuntimeError(f"the stream stopped at {got} of {expect}: {query.exception()}")
            time.sleep(0.1)
        while not any(p["batchId"] == got["batch"] for p in query.recentProgress):  # its progress
            time.sleep(0.1)
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    trigger_ms = sum(p["durationMs"]["triggerExecution"] for p in progress)
    return {
        "points": got["points"],
        "batches": len(progress),
        "trigger_ms": trigger_ms,
        "us_per_point": round(trigger_ms * 1000 / got["points"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--series", type=int, default=20, help="series per request")
    parser.add_argument("--block", type=int, default=500, help="points per series per request")
    parser.add_argument("--inflight", type=int, default=16, help="requests in flight at once")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()

    from compute.spark.session import build_session, stop_session
    from compute.storage.disk_space import Retention as LogRetention
    from compute.storage.kafka.point_log import KafkaLog
    from compute.storage.kafka.spark_frames import KafkaFrames, connector_jars
    from compute.storage.sqlite.point_log import EmbeddedLog
    from compute.storage.sqlite.writer import DurableLog

    work = Path(tempfile.mkdtemp(prefix="kafka-bench-"))
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker, bootstrap = start_broker(work)
    result: dict[str, Any] = {"points": args.points, "request": f"{args.series} series x {args.block} points"}
    try:
        batches = requests(args.points, args.series, args.block)
        embedded = EmbeddedLog(
            DurableLog(work / "log.db", retention=LogRetention(0, 0), min_free_bytes=0), "bench"
        )
        kafka = KafkaLog(bootstrap, f"bench-{time.time_ns()}", args.partitions, "bench")
        result["ingest_embedded"] = ingest(embedded, batches, args.inflight)
        result["ingest_kafka"] = ingest(kafka, batches, args.inflight)
        result["catalog_poll_kafka"] = catalog_polls(kafka)
        total = result["ingest_kafka"]["written"]
        assert total == result["ingest_embedded"]["written"]

        spark = build_session("local[2]", jars=connector_jars())
        try:
            spark.dataSource.register(embedded.data_source)
            frames = KafkaFrames(bootstrap, kafka.layout)
            for round_ in range(2):  # alternating, so neither arm has the warm JVM to itself
                options = {**embedded.stream_options(), "start_seq": "0"}
                stream = spark.readStream.format(embedded.data_source.name()).options(**options).load()
                result[f"read_embedded_{round_}"] = stream_read(
                    spark, stream, records.points_of_blocks, records.BLOCK_SCHEMA, total
                )
                start = {"startingOffsets": "earliest"}
                result[f"read_kafka_{round_}"] = stream_read(
                    spark, frames.stream(spark, start), frames.points, frames.block_schema, total
                )
            sid = kafka.series()[0].id
            for round_ in range(2):
                t = time.perf_counter()
                upto = kafka.end_offset()
                snapshot_s = time.perf_counter() - t
                t = time.perf_counter()
                one = frames.history(spark, [sid], 0, upto).toArrow()
                result[f"backfill_one_series_kafka_{round_}"] = {
                    "points": one.num_rows,
                    "seconds": round(time.perf_counter() - t, 3),
                    "end_offset_ms": round(snapshot_s * 1000, 1),
                }
        finally:
            stop_session(spark)
        kafka.close()
        embedded.close()
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
