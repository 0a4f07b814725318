"""Decision 0082 (`sparkwire.streamPolled`): what a live micro-batch costs a streamed polling-only
node, in process, no Spark, against the designs whose cost would follow the new points.

A 1 kHz channel (a 50 Hz sine and noise) back-filled for the window, then micro-batches of 100 ms
(100 new points); per batch, median of the batches:

- `apply_batch`: the thread CPU of `Computation.apply_batch` for the streamed node (a spectrum, a
  low-pass, LTTB to 1,000 points, a line fit against time, a custom fit of the sine) as the server
  runs it (compiled with `streamed=True`: the
  polled node re-evaluated whole over the window), and of encoding its frame as a FullResult
  (`frames.full_update`; the frame's size in KiB);
- spectrum: `np.fft.rfft` over the window alone (the recomputation's core), against a sliding DFT
  of a window of fixed length (each new point updates every bin: X_k <- (X_k + x_new - x_old)
  e^{2 pi i k / N}), and the sliding DFT's largest error against the FFT after the batches;
- filter (4th-order Butterworth low-pass at 100 Hz, zero phase as Nominal's): scipy's
  `sosfiltfilt` over the window, against the forward pass carried with its state (`sosfilt`'s
  `zi`: only the new points and the right padding filtered forwards, then the backward pass over
  the whole padded window, which every new point changes), and whether that carried result is
  bit-identical to `sosfiltfilt`.

    python -m bench.experiments.streamed_polled [window seconds ...]   (default: 10 60 300)
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import signal

from app.protocol import frames
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.evaluation.nodes.signal_filters import padding
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind

NANOS = 1_000_000_000
MS = 1_000_000
RID = "ri.bench.streamed"
BATCH = 100
BATCHES = 20


def _union(kind: str, value: Any) -> dict[str, Any]:
    return {"type": kind, kind: value}


X = _union(
    "channel",
    _union(
        "dataSource",
        {
            "dataSourceRid": _union("literal", RID),
            "channel": _union("literal", "x"),
            "tags": {},
            "tagsToGroupBy": [],
            "groupByTags": [],
        },
    ),
)
LOW_PASS = _union(
    "signalFilter",
    {
        "input": X,
        "signalFilterConfiguration": _union("lowPass", {"cutoffFrequency": _union("literal", 100.0)}),
        "order": _union("literal", 4),
    },
)
ALL_TIME = {"startTime": _union("literal", {"seconds": 0, "nanos": 0})}
ALL_TIME["endTime"] = _union("literal", {"seconds": 4_000_000_000, "nanos": 0})
TARGET = _union("numeric", {"series": X})


def _fit(curve: dict[str, Any]) -> dict[str, Any]:
    return _union("curveV2", {"target": TARGET, "fitRange": ALL_TIME, "curveToFit": curve})


NODES = {
    "spectrum (frequency fft)": _union("frequency", _union("fft", {"input": X})),
    "low-pass (signalFilter)": _union(
        "series", {"input": _union("numeric", LOW_PASS), "numericAggregations": {}, "buckets": 1000}
    ),
    "LTTB to 1,000 (largestTriangleThreeBuckets)": _union(
        "series",
        {
            "input": _union(
                "numeric",
                _union(
                    "largestTriangleThreeBuckets", {"input": X, "maxPointsToReturn": _union("literal", 1000)}
                ),
            ),
            "numericAggregations": {},
        },
    ),
    "line fit (curveV2 polynomial, degree 1)": _fit(
        _union(
            "polynomial",
            {"independentVariable": _union("time", {}), "degree": _union("literal", 1)},
        )
    ),
    "custom fit (curveV2 a sin(2 pi 50 t) + c)": _fit(
        _union(
            "custom",
            {
                "formula": _union("literal", "a * sin(314.1592653589793 * t) + c"),
                "variables": {"t": _union("time", {})},
                "parameters": {"a": _union("literal", 0.5), "c": _union("literal", 0.0)},
            },
        )
    ),
}


def _values(i: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(int(i[0]) if len(i) else 0)
    return np.sin(2 * np.pi * 50 * i / 1000.0) + rng.normal(0, 0.1, len(i))


def _rows(first: int, count: int, base: int) -> dict[int, Rows]:
    i = np.arange(first, first + count, dtype=np.int64)
    return {1: Rows(i + 1, base + i * MS, _values(i))}


def _median_ms(fn: Callable[[], object], runs: int = BATCHES) -> float:
    times = []
    for _ in range(runs):
        t0 = time.thread_time()
        fn()
        times.append((time.thread_time() - t0) * 1000)
    return statistics.median(times)


def served(node: dict[str, Any], window_s: int) -> tuple[float, float, float]:
    """(apply_batch ms, encode ms, frame KiB), medians over the batches."""
    plan = compile_plan(node, window_s * NANOS, {}, Limits(), ResultOptions(), streamed=True)
    c = Computation("bench", plan, allowed_lateness_ns=None)
    c.route(SeriesInfo(1, SeriesKey.of(RID, "x", {}), SeriesKind.NUMERIC))
    n = window_s * 1000
    base = time.time_ns() - (window_s + 5) * NANOS
    c.backfill_seq = n
    c.load_backfill(_rows(0, n, base), base + n * MS)
    evaluate, encode, size = [], [], 0
    for b in range(BATCHES):
        first = n + b * BATCH
        t0 = time.thread_time()
        c.apply_batch(_rows(first, BATCH, base), base + (first + BATCH) * MS)
        t1 = time.thread_time()
        size = len(frames.full_update(c.snapshot(None), plan.grouped))
        evaluate.append((t1 - t0) * 1000)
        encode.append((time.thread_time() - t1) * 1000)
    return statistics.median(evaluate), statistics.median(encode), size / 1024


def spectrum_designs(window_s: int) -> tuple[float, float, float]:
    """(rfft over the window ms, sliding DFT per batch ms, sliding DFT's max error / peak)."""
    n = window_s * 1000
    x = _values(np.arange(n + BATCH * BATCHES, dtype=np.int64))
    recompute = _median_ms(lambda: np.fft.rfft(x[:n]))
    bins = n // 2 + 1
    twiddle = np.exp(2j * np.pi * np.arange(bins) / n)
    spectrum = np.fft.rfft(x[:n])
    times = []
    for b in range(BATCHES):
        t0 = time.thread_time()
        for j in range(n + b * BATCH, n + (b + 1) * BATCH):
            spectrum = (spectrum + (x[j] - x[j - n])) * twiddle
        times.append((time.thread_time() - t0) * 1000)
    exact = np.fft.rfft(x[BATCH * BATCHES :])
    error = float(np.max(np.abs(spectrum - exact)) / np.max(np.abs(exact)))
    return recompute, statistics.median(times), error


def filter_designs(window_s: int) -> tuple[float, float, bool]:
    """(sosfiltfilt over the window ms, forward pass carried + backward pass ms, bit-identical)."""
    n = window_s * 1000
    x = _values(np.arange(n + BATCH, dtype=np.int64))
    sos = signal.butter(4, 100.0, btype="lowpass", fs=1000.0, output="sos")
    pad = padding(sos)
    whole = _median_ms(lambda: signal.sosfiltfilt(sos, x))
    zi = signal.sosfilt_zi(sos)
    # the state after the left padding and the window's points but the batch's, kept from before
    left = 2 * x[0] - x[pad:0:-1]
    _, state = signal.sosfilt(sos, np.concatenate([left, x[:n]]), zi=zi * left[0])
    head, _ = signal.sosfilt(sos, np.concatenate([left, x[:n]]), zi=zi * left[0])

    def carried() -> np.ndarray:
        new, after = signal.sosfilt(sos, x[n:], zi=state)
        right = 2 * x[-1] - x[-2 : -pad - 2 : -1]
        tail, _ = signal.sosfilt(sos, right, zi=after)
        forward = np.concatenate([head, new, tail])
        back, _ = signal.sosfilt(sos, forward[::-1], zi=zi * forward[-1])
        out: np.ndarray = back[::-1][pad:-pad]
        return out

    return whole, _median_ms(carried), bool(np.array_equal(carried(), signal.sosfiltfilt(sos, x)))


def main() -> None:
    windows = [int(w) for w in sys.argv[1:]] or [10, 60, 300]
    print("| streamed node | window (points) | apply_batch p50 ms | encode p50 ms | frame KiB |")
    print("|---|---|---|---|---|")
    for window in windows:
        for name, node in NODES.items():
            ev, en, kib = served(node, window)
            row = f"| {name} | {window} s ({window * 1000:,}) | {ev:.2f} | {en:.2f} | {kib:.0f} |"
            print(row, flush=True)
    print()
    print("| window (points) | rfft over the window ms | sliding DFT per batch ms | its max error / peak |")
    print("|---|---|---|---|")
    for window in windows:
        recompute, sliding, error = spectrum_designs(window)
        print(f"| {window * 1000:,} | {recompute:.2f} | {sliding:.2f} | {error:.1e} |", flush=True)
    print()
    print("| window (points) | sosfiltfilt over the window ms | forward carried + backward ms | identical |")
    print("|---|---|---|---|")
    for window in windows:
        whole, carried, same = filter_designs(window)
        print(f"| {window * 1000:,} | {whole:.2f} | {carried:.2f} | {same} |", flush=True)


if __name__ == "__main__":
    main()
