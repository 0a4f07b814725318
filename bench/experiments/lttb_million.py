"""Decision 0080 (LTTB and paging): the time of Largest-Triangle-Three-Buckets over 1,000,000 points
to 1,000 (`lttb` of compute/evaluation/nodes/lttb_paging.py, the evaluator a poll runs), in process,
on a 1 kHz random walk with jittered timestamps. Prints the median and the spread of a few runs.

    python -m bench.experiments.lttb_million [points] [out] [runs]   (default: 1000000 1000 7)
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from compute.evaluation.nodes.lttb_paging import lttb
from compute.evaluation.results import NumericPoints

NANOS = 1_000_000_000


def measure(n: int, out: int, runs: int) -> dict[str, float | int]:
    """LTTB of `n` points to `out`, `runs` times: the figures in ms (bench/polled.py reports them)."""
    rng = np.random.default_rng(0)
    t0 = 1_700_000_000 * NANOS
    ts = t0 + np.arange(n, dtype=np.int64) * 1_000_000 + rng.integers(0, 500_000, n)
    points = NumericPoints(ts, rng.normal(size=n).cumsum())
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        kept = lttb(points, out)
        times.append(time.perf_counter() - started)
    assert len(kept) == out
    ms = sorted(t * 1000 for t in times)
    return {
        "points": n,
        "out": out,
        "runs": runs,
        "median_ms": round(statistics.median(ms), 1),
        "min_ms": round(ms[0], 1),
        "max_ms": round(ms[-1], 1),
    }


def main() -> None:
    n, out, runs = (int(a) for a in (sys.argv[1:] + ["1000000", "1000", "7"][len(sys.argv) - 1 :])[:3])
    r = measure(n, out, runs)
    print(
        f"LTTB {n:,} -> {out:,} points: median {r['median_ms']:.1f} ms, "
        f"min {r['min_ms']:.1f}, max {r['max_ms']:.1f} ({runs} runs)"
    )


if __name__ == "__main__":
    main()
