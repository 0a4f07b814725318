"""The agents' writers' decode cost per point, beside the JSON row writer's, in one process: from the
body as received to the log's writes (what each endpoint runs on the event loop or a decode
process before the ingest limits and the log).

- json: `app.ingest.writes.json_writes`, bench/feed.py's body (WriteBatchesRequestExternal);
- columnar: `app.ingest.columnar.columnar_json_writes`, bench/feed.py's columnar body;
- telegraf: `app.ingest.telegraf.telegraf_writes`, Telegraf's batch form as its json serializer
  writes it: one metric per tick and measurement with `fields` fields each (a point per field);
- remote_write: `unsnappy` then `prometheus_writes` (app/ingest/prometheus.py) of bench/feed.py's
  snappy WriteRequest, a TimeSeries a channel with many samples (what a batching sender such as
  Vector sends);
- remote_write_scrape: the same decode of Prometheus' own shape, one sample per TimeSeries (a
  scrape's series, each with its labels: __name__, instance, job and two more).

Each arm decodes `points` points per body `rounds` times (median of the rounds reported, in
microseconds per point), the load average before and after (the machine may be shared).

Run: python -m bench.experiments.agent_writers_decode [points=10000] [rounds=15] [channels=10] [fields=5]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import cramjam
from nominal.protos.write import prometheus_remote_write_pb2 as pb

from app.ingest.columnar import columnar_json_writes
from app.ingest.prometheus import prometheus_writes, unsnappy
from app.ingest.telegraf import telegraf_writes
from app.ingest.writes import json_writes
from bench.feed import body, columnar_body, remote_write_body
from compute.storage.contract import SeriesWrite

RID = "ri.sparkwire.bench.dataset.agents"
LIMIT = 64 << 20


def telegraf_body(points: int, fields: int, tick: int, first_k: int) -> bytes:
    metrics = [
        {
            "fields": {f"f{j}": (k * 7 + j) / 8 for j in range(fields)},
            "name": "cpu",
            "tags": {"host": "h1", "cpu": "cpu-total"},
            "timestamp": k * tick,
        }
        for k in range(first_k, first_k + points // fields)
    ]
    return json.dumps({"metrics": metrics}).encode()


def scrape_body(points: int, t_ms: int) -> bytes:
    labels = {"instance": "127.0.0.1:9100", "job": "node", "mode": "idle", "device": "eth0"}
    series = [
        pb.TimeSeries(
            labels=[pb.Label(name="__name__", value=f"metric_{i % 500}"), pb.Label(name="cpu", value=str(i))]
            + [pb.Label(name=k, value=v) for k, v in labels.items()],
            samples=[pb.Sample(value=i / 3, timestamp=t_ms)],
        )
        for i in range(points)
    ]
    return bytes(cramjam.snappy.compress_raw(pb.WriteRequest(timeseries=series).SerializeToString()))


def arms(
    points: int, channels: int, fields: int
) -> dict[str, tuple[bytes, Callable[[bytes], list[SeriesWrite]]]]:
    tick = 1_000_000
    first_k = time.time_ns() // tick - points
    per_channel = points // channels
    last_k = first_k + per_channel - 1
    return {
        "json": (body(RID, channels, first_k, last_k, tick), json_writes),
        "columnar": (columnar_body(RID, channels, first_k, last_k, tick), columnar_json_writes),
        "telegraf": (telegraf_body(points, fields, tick, first_k), lambda b: telegraf_writes(b, RID)),
        "remote_write": (
            remote_write_body(first_k, last_k, tick, channels),
            lambda b: prometheus_writes(unsnappy(b, LIMIT), RID),
        ),
        "remote_write_scrape": (
            scrape_body(points, first_k),
            lambda b: prometheus_writes(unsnappy(b, LIMIT), RID),
        ),
    }


def main() -> None:
    opts = dict(a.split("=", 1) for a in sys.argv[1:])
    points, rounds = int(opts.get("points", 10_000)), int(opts.get("rounds", 15))
    channels, fields = int(opts.get("channels", 10)), int(opts.get("fields", 5))
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for name, (payload, decode) in arms(points, channels, fields).items():
        writes = decode(payload)
        n = sum(len(w.ts) for w in writes)
        times = []
        for _ in range(rounds):
            began = time.perf_counter()
            decode(payload)
            times.append(time.perf_counter() - began)
        us = statistics.median(times) / n * 1e6
        print(
            f"{name:>20}: {n:>7} points, {len(payload):>8} bytes, {us:.3f} us/point ({1 / us:.2f} M points/s)"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
