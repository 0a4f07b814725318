"""`compute` of a 1 h x 1 kHz channel summarized to 1,000 buckets (issue 47's target: <= 250 ms): the
hour written into a log before its server starts (one block per `--block-points` points, as that many
points per write request would store it), a server started on it, then POST /compute/v2/compute
timed, end to end over HTTP, a few times (docs/decisions/0078-compute-service.md).

    .venv/bin/python -m bench.compute_service [--block-points 1000] [--repeats 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import numpy as np

from bench.prefilled_server import write_blocks
from bench.serverproc import start_server

if TYPE_CHECKING:
    from compute.storage.contract import SeriesWrite

NANOS = 1_000_000_000
RID = "ri.sparkwire.bench.dataset.compute-service"
RATE_HZ = 1000
SPAN_S = 3600


def write_hour(data_dir: Path, block_points: int) -> tuple[int, int]:
    """The hour of one 1 kHz channel, ending a minute ago: (start, end) of the period written."""
    from compute.storage.contract import SeriesWrite
    from compute.storage.series import SeriesKey, SeriesKind

    tick = NANOS // RATE_HZ
    end = (time.time_ns() // NANOS - 60) * NANOS
    start = end - SPAN_S * NANOS
    key = SeriesKey.of(RID, "vibration", {})
    rng = np.random.default_rng(7)
    total = SPAN_S * RATE_HZ

    def requests() -> Iterator[list[SeriesWrite]]:
        for k in range(0, total, block_points):
            m = min(block_points, total - k)
            ts = start + np.arange(k, k + m, dtype=np.int64) * tick
            yield [SeriesWrite(key, SeriesKind.NUMERIC, ts, rng.standard_normal(m))]

    seconds = write_blocks(data_dir, requests(), in_flight=4096)
    print(f"wrote {total:,} points in blocks of {block_points} in {seconds:.1f} s")
    return start, end


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--block-points", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sparkwire-compute-bench-") as tmp:
        work = Path(tmp)
        start, end = write_hour(work / "data", args.block_points)
        server = start_server(work / "data", work / "server.log", {"SPARKWIRE_LOG_LEVEL": "WARNING"})
        try:
            channel = {
                "type": "channel",
                "channel": {
                    "type": "dataSource",
                    "dataSource": {
                        "dataSourceRid": {"type": "literal", "literal": RID},
                        "channel": {"type": "literal", "literal": "vibration"},
                        "tags": {},
                    },
                },
            }
            body = {
                "node": {
                    "type": "series",
                    "series": {"input": {"type": "numeric", "numeric": channel}, "buckets": 1000},
                },
                "start": {"seconds": start // NANOS, "nanos": 0},
                "end": {"seconds": end // NANOS, "nanos": 0},
                "context": {"variables": {}},
            }
            times = []
            with httpx.Client(base_url=server.base_url, timeout=120) as client:
                for i in range(args.repeats + 1):
                    began = time.perf_counter()
                    r = client.post("/compute/v2/compute", json=body)
                    took = (time.perf_counter() - began) * 1000
                    r.raise_for_status()
                    result = r.json()
                    buckets = result["bucketedNumeric"]["buckets"]
                    counted = sum(b["count"] for b in buckets)
                    assert counted == SPAN_S * RATE_HZ, counted
                    print(f"{'warm-up' if i == 0 else f'run {i}'}: {took:.0f} ms, {len(buckets)} buckets")
                    if i:
                        times.append(took)
            print(
                f"compute of 1 h x 1 kHz to 1,000 buckets: median {statistics.median(times):.0f} ms, "
                f"min {min(times):.0f}, max {max(times):.0f} (target <= 250 ms)"
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
