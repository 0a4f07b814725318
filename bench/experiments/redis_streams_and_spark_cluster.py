"""Redis Streams source: partitions vs throughput, self-contained.

Starts its own redis-server on a free 127.0.0.1 port and, for each partition count:
- ingest: concurrent requests through `RedisLog.submit` (the server's write path: one Lua script
  per request, pipelined by the writer thread), points/s until every request is acknowledged;
- read: one Spark batch read of every point through the Redis data source (one input partition
  per Redis partition, local[2]), points/s.
Ratios are against partitions=1 measured in the same run.

    .venv/bin/python -m bench.experiments.redis_streams_and_spark_cluster [--points 400000]
        [--partitions 1,2,4,8]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import redis

from compute.spark.session import build_session
from compute.storage.contract import SeriesWrite
from compute.storage.redis.point_log import RedisLog
from compute.storage.redis.spark_source import SOURCE_NAME, RedisDataSource
from compute.storage.series import SeriesKey, SeriesKind

SERIES = 64
POINTS_PER_WRITE = 100  # per series
SERIES_PER_REQUEST = 8
CLIENTS = 8  # concurrent requests in flight


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis() -> tuple[subprocess.Popen[bytes], str]:
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="bench-redis-")
    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen([*argv, "--dir", workdir], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(200):
        try:
            redis.Redis.from_url(url).ping()
            return proc, url
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("redis-server did not start")


def requests_for(total_points: int) -> list[list[SeriesWrite]]:
    keys = [SeriesKey.of("ri.bench", f"ch{i}", {"unit": str(i % 4)}) for i in range(SERIES)]
    per_request = SERIES_PER_REQUEST * POINTS_PER_WRITE
    base = time.time_ns()
    out = []
    for r in range(total_points // per_request):
        writes = []
        for j in range(SERIES_PER_REQUEST):
            key = keys[(r * SERIES_PER_REQUEST + j) % SERIES]
            ts = [base + (r * POINTS_PER_WRITE + k) * 1000 for k in range(POINTS_PER_WRITE)]
            values = [float(k) for k in range(POINTS_PER_WRITE)]
            writes.append(SeriesWrite(key, SeriesKind.NUMERIC, ts, values))
        out.append(writes)
    return out


def ingest(log: RedisLog, requests: list[list[SeriesWrite]]) -> float:
    started = time.perf_counter()

    def run(chunk: list[list[SeriesWrite]]) -> None:
        for writes in chunk:
            log.submit(writes).result(60)

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(run, [requests[i::CLIENTS] for i in range(CLIENTS)]))
    return time.perf_counter() - started


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--points", type=int, default=400_000)
    parser.add_argument("--partitions", default="1,2,4,8")
    args = parser.parse_args()
    counts = [int(x) for x in args.partitions.split(",")]
    proc, url = start_redis()
    spark = build_session("local[2]")
    spark.dataSource.register(RedisDataSource)
    spark.range(1).toArrow()  # warm the JVM before anything is timed
    rows = []
    try:
        requests = requests_for(args.points)
        points = sum(len(w.ts) for r in requests for w in r)
        for n in counts:
            prefix = f"bench{n}"
            log = RedisLog(url, n, "bench", prefix=prefix)
            write_s = ingest(log, requests)
            ids = sorted(info.id for info in log.poll_new_series())
            options = log.backfill_options(ids, 0, log.end_offset())
            reads = []
            for _ in range(3):  # best of three: the machine is shared
                started = time.perf_counter()
                table = spark.read.format(SOURCE_NAME).options(**options).load().toArrow()
                reads.append(time.perf_counter() - started)
                assert table.num_rows == points, (table.num_rows, points)
            log.close()
            rows.append((n, points / write_s, points / min(reads)))
    finally:
        spark.stop()
        proc.terminate()
        proc.wait(10)
    base_write, base_read = rows[0][1], rows[0][2]
    print(f"{points} points, {SERIES} series, {SERIES_PER_REQUEST}x{POINTS_PER_WRITE} points per request")
    print("| partitions | ingest points/s | x | Spark read points/s (local[2]) | x |")
    print("|---|---|---|---|---|")
    for n, w, r in rows:
        print(f"| {n} | {w:,.0f} | {w / base_write:.2f} | {r:,.0f} | {r / base_read:.2f} |")


if __name__ == "__main__":
    main()
