"""An FFT of 1,000,000 points through the polled path (issue 47's target: <= 500 ms): 1,000 s of a
1 kHz channel (a 50 Hz sine and noise) written into a log before its server starts, a server
started on it, then POST /compute/v2/compute of `frequency.fft` over those 1,000,000 points timed
end to end over HTTP, a few times; and, apart, the evaluator alone in process (the samples, the
window and numpy.fft.rfft of nodes/frequency.py) on the same points
(docs/decisions/0079-frequency-domain.md).

    .venv/bin/python -m bench.frequency_domain [--points 1000000] [--repeats 5]

`make bench` runs it through bench/polled.py (`measure`), its smoke mode over 20,000 points.
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
RID = "ri.sparkwire.bench.dataset.frequency-domain"
RATE_HZ = 1000
BLOCK = 1000


def signal(ts: np.ndarray, start: int, rng: np.random.Generator) -> np.ndarray:
    t = (ts - start) / NANOS
    return 3.0 * np.sin(2 * np.pi * 50.0 * t) + 0.1 * rng.standard_normal(len(ts))


def write_points(data_dir: Path, points: int) -> tuple[int, int]:
    """`points` of one 1 kHz channel ending a minute ago: (start, end) of the period written."""
    from compute.storage.contract import SeriesWrite
    from compute.storage.series import SeriesKey, SeriesKind

    tick = NANOS // RATE_HZ
    end = (time.time_ns() // NANOS - 60) * NANOS
    start = end - points * tick
    key = SeriesKey.of(RID, "vibration", {})
    rng = np.random.default_rng(7)

    def requests() -> Iterator[list[SeriesWrite]]:
        for k in range(0, points, BLOCK):
            ts = start + np.arange(k, min(k + BLOCK, points), dtype=np.int64) * tick
            yield [SeriesWrite(key, SeriesKind.NUMERIC, ts, signal(ts, start, rng))]

    seconds = write_blocks(data_dir, requests(), in_flight=4096)
    print(f"wrote {points:,} points in {seconds:.1f} s")
    return start, end


def in_process(points: int, repeats: int) -> list[float]:
    """The evaluator alone: samples() and amplitude_spectrum() over `points` (ms per run)."""
    from compute.evaluation.nodes.frequency import amplitude_spectrum, samples

    start = 1_700_000_000 * NANOS
    ts = start + np.arange(points, dtype=np.int64) * (NANOS // RATE_HZ)
    vs = signal(ts, start, np.random.default_rng(7))
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        x, fs, _ = samples(ts, vs)
        f, a = amplitude_spectrum(x, fs)
        times.append((time.perf_counter() - began) * 1000)
    assert abs(f[int(np.argmax(a))] - 50.0) < 1e-6
    return times


def measure(work: Path, points: int, repeats: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The evaluator alone, then `points` written under `work`, a server started on them and
    `repeats` polled FFTs timed (after a warm-up): the figures in ms."""
    alone = in_process(points, repeats)
    print(f"evaluator alone (samples + rfft, {points:,} points): median {statistics.median(alone):.0f} ms")
    start, end = write_points(work / "data", points)
    server = start_server(
        work / "data", work / "server.log", {"SPARKWIRE_LOG_LEVEL": "WARNING", **(env or {})}
    )
    try:
        channel = named_channel(RID, "vibration")
        body = {
            "node": {"type": "frequency", "frequency": {"type": "fft", "fft": {"input": channel}}},
            "start": {"seconds": start // NANOS, "nanos": 0},
            "end": {"seconds": end // NANOS, "nanos": 0},
            "context": {"variables": {}},
        }
        times = []
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            for i in range(repeats + 1):
                began = time.perf_counter()
                r = client.post("/compute/v2/compute", json=body)
                took = (time.perf_counter() - began) * 1000
                r.raise_for_status()
                plot = r.json()["frequencyDomain"]
                f, a = np.array(plot["frequencies"]), np.array(plot["amplitudes"])
                assert len(f) == points // 2 + 1, len(f)
                assert abs(f[int(np.argmax(a))] - 50.0) < 1e-6 and abs(a.max() - 3.0) < 0.01
                print(f"{'warm-up' if i == 0 else f'run {i}'}: {took:.0f} ms, {len(f):,} frequencies")
                if i:
                    times.append(took)
    finally:
        server.stop()
    return {
        "points": points,
        "alone_median_ms": round(statistics.median(alone), 1),
        "times_ms": [round(t, 1) for t in times],
        "median_ms": round(statistics.median(times), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sparkwire-fft-bench-") as tmp:
        out = measure(Path(tmp), args.points, args.repeats)
    times = out["times_ms"]
    print(
        f"polled FFT of {args.points:,} points over HTTP: median {out['median_ms']:.0f} ms, "
        f"min {min(times):.0f}, max {max(times):.0f} (target <= 500 ms)"
    )


if __name__ == "__main__":
    main()
