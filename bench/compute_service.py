"""`compute` of a 1 h x 1 kHz channel summarized to 1,000 buckets (issue 47's target: <= 250 ms): the
hour written into a log before its server starts (one block per `--block-points` points, as that many
points per write request would store it), a server started on it, then POST /compute/v2/compute
timed, end to end over HTTP, a few times (docs/decisions/0078-compute-service.md).

    .venv/bin/python -m bench.compute_service [--block-points 1000] [--repeats 10] [--span-s 3600]

`make bench` runs it through bench/polled.py (`measure`), its smoke mode over a minute.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from bench.computations import named_channel
from bench.prefilled_server import write_blocks
from bench.serverproc import start_server

if TYPE_CHECKING:
    from compute.storage.contract import SeriesWrite

NANOS = 1_000_000_000
RID = "ri.sparkwire.bench.dataset.compute-service"
RATE_HZ = 1000
SPAN_S = 3600


def write_hour(data_dir: Path, block_points: int, span_s: int = SPAN_S) -> tuple[int, int]:
    """`span_s` (an hour) of one 1 kHz channel, ending a minute ago: (start, end) of the period written."""
    from compute.storage.contract import SeriesWrite
    from compute.storage.series import SeriesKey, SeriesKind

    tick = NANOS // RATE_HZ
    end = (time.time_ns() // NANOS - 60) * NANOS
    start = end - span_s * NANOS
    key = SeriesKey.of(RID, "vibration", {})
    rng = np.random.default_rng(7)
    total = span_s * RATE_HZ

    def requests() -> Iterator[list[SeriesWrite]]:
        for k in range(0, total, block_points):
            m = min(block_points, total - k)
            ts = start + np.arange(k, k + m, dtype=np.int64) * tick
            yield [SeriesWrite(key, SeriesKind.NUMERIC, ts, rng.standard_normal(m))]

    seconds = write_blocks(data_dir, requests(), in_flight=4096)
    print(f"wrote {total:,} points in blocks of {block_points} in {seconds:.1f} s")
    return start, end


def measure(
    work: Path,
    block_points: int = 1000,
    repeats: int = 10,
    span_s: int = SPAN_S,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Write `span_s` of the channel under `work`, start a server on it and time `repeats` computes
    (after a warm-up): the figures in ms."""
    start, end = write_hour(work / "data", block_points, span_s)
    server = start_server(
        work / "data", work / "server.log", {"SPARKWIRE_LOG_LEVEL": "WARNING", **(env or {})}
    )
    try:
        channel = named_channel(RID, "vibration")
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
            for i in range(repeats + 1):
                began = time.perf_counter()
                r = client.post("/compute/v2/compute", json=body)
                took = (time.perf_counter() - began) * 1000
                r.raise_for_status()
                buckets = r.json()["bucketedNumeric"]["buckets"]
                counted = sum(b["count"] for b in buckets)
                assert counted == span_s * RATE_HZ, counted
                print(f"{'warm-up' if i == 0 else f'run {i}'}: {took:.0f} ms, {len(buckets)} buckets")
                if i:
                    times.append(took)
    finally:
        server.stop()
    return {
        "points": span_s * RATE_HZ,
        "span_s": span_s,
        "rate_hz": RATE_HZ,
        "buckets": 1000,
        "times_ms": [round(t, 1) for t in times],
        "median_ms": round(statistics.median(times), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--block-points", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--span-s", type=int, default=SPAN_S)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sparkwire-compute-bench-") as tmp:
        out = measure(Path(tmp), args.block_points, args.repeats, args.span_s)
    times = out["times_ms"]
    print(
        f"compute of {args.span_s} s x 1 kHz to 1,000 buckets: median {out['median_ms']:.0f} ms, "
        f"min {min(times):.0f}, max {max(times):.0f} (target for an hour: <= 250 ms)"
    )


if __name__ == "__main__":
    main()
