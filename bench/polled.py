"""Issue 47's polled targets in `make bench` (bench/run.py's workload `polled`): `compute` of a 1 h x
1 kHz channel summarized to 1,000 buckets (<= 250 ms: bench/compute_service.py), a polled FFT of
1,000,000 points (<= 500 ms: bench/frequency_domain.py), each over HTTP on a server of its own
started on a log filled before it, LTTB of 1,000,000 points to 1,000 in process
(bench/experiments/lttb_million.py; reported), and a live spectrum streamed under
`sparkwire.streamPolled`: its CPU per micro-batch of 100 new points against a recomputation of the
spectrum over the window (numpy's rfft alone) in the same run, in process
(bench/experiments/streamed_polled.py; reported: decision 0082 says why it follows the window).
SMOKE runs the same code at a tiny size (a minute of the channel, 20,000 points), so that the
harness never rots; its figures are not the targets'.
bench/run.py takes the fields below as `polled.NAME=VALUE`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import compute_service, frequency_domain
from bench.experiments import lttb_million, streamed_polled

Json = Any
COMPUTE_TARGET_MS = 250
FFT_TARGET_MS = 500
SPECTRUM = "spectrum (frequency fft)"  # bench/experiments/streamed_polled.py's node


@dataclass(frozen=True)
class PolledPlan:
    compute_span_s: int = 3600  # of a 1 kHz channel
    compute_repeats: int = 10
    fft_points: int = 1_000_000
    fft_repeats: int = 5
    lttb_points: int = 1_000_000
    lttb_runs: int = 7
    streamed_window_s: int = 300  # of a 1 kHz channel


FULL = PolledPlan()
SMOKE = PolledPlan(
    compute_span_s=60,
    compute_repeats=2,
    fft_points=20_000,
    fft_repeats=2,
    lttb_points=20_000,
    lttb_runs=2,
    streamed_window_s=10,
)


def measure(plan: PolledPlan, work: Path, env: dict[str, str]) -> Json:
    """Each part in turn (its own server, stopped before the next starts): figures in ms."""
    work.mkdir(parents=True, exist_ok=True)
    return {
        "plan": asdict(plan),
        "compute": compute_service.measure(
            work / "compute", repeats=plan.compute_repeats, span_s=plan.compute_span_s, env=env
        ),
        "fft": frequency_domain.measure(work / "fft", plan.fft_points, plan.fft_repeats, env=env),
        "lttb": lttb_million.measure(plan.lttb_points, 1000, plan.lttb_runs),
        "streamed": _streamed_spectrum(plan.streamed_window_s),
    }


def _streamed_spectrum(window_s: int) -> Json:
    batch_ms, encode_ms, frame_kib = streamed_polled.served(streamed_polled.NODES[SPECTRUM], window_s)
    recompute_ms, _, _ = streamed_polled.spectrum_designs(window_s)
    return {
        "window_points": window_s * 1000,
        "batch_points": streamed_polled.BATCH,
        "apply_batch_ms": batch_ms,
        "encode_ms": encode_ms,
        "frame_kib": frame_kib,
        "recompute_ms": recompute_ms,
    }


def _size(points: int) -> str:
    return f"{points:,} points"


def rows(p: Json, verdict: Any) -> list[tuple[str, str, str, str]]:
    """The Targets table's rows (`verdict`: bench/report.py's); names stable across plans."""
    if not p:
        return [
            ("47 compute to 1,000 buckets (polled, HTTP): median", "<= 250 ms", "n/a", "not measured"),
            ("47 FFT (polled, HTTP): median", "<= 500 ms", "n/a", "not measured"),
        ]
    c, f, lt = p["compute"], p["fft"], p["lttb"]
    hour = c["span_s"] == 3600 and c["rate_hz"] == 1000
    compute_what = f"{c['span_s']:,} s x {c['rate_hz']:,} Hz ({_size(c['points'])})"
    fft_what = _size(f["points"])
    return [
        (
            f"47 compute to 1,000 buckets (polled, HTTP): median, {compute_what}",
            f"<= {COMPUTE_TARGET_MS} ms (1 h x 1 kHz)",
            f"{c['median_ms']:.0f} ms (max {max(c['times_ms']):.0f})",
            verdict(c["median_ms"], COMPUTE_TARGET_MS) if hour else "smaller than the target's size",
        ),
        (
            f"47 FFT (polled, HTTP): median, {fft_what}",
            f"<= {FFT_TARGET_MS} ms (1,000,000 points)",
            f"{f['median_ms']:.0f} ms (max {max(f['times_ms']):.0f}; "
            f"evaluator alone {f['alone_median_ms']:.0f})",
            verdict(f["median_ms"], FFT_TARGET_MS)
            if f["points"] == 1_000_000
            else "smaller than the target's size",
        ),
        (
            f"47 LTTB {_size(lt['points'])} to 1,000 (in process): median",
            "reported",
            f"{lt['median_ms']:.1f} ms (min {lt['min_ms']:.1f}, max {lt['max_ms']:.1f})",
            "reported",
        ),
        *_streamed_rows(p.get("streamed")),
    ]


def _streamed_rows(s: Json) -> list[tuple[str, str, str, str]]:
    if not s:
        return []
    return [
        (
            "47 live spectrum streamed (streamPolled, in process): CPU per micro-batch, "
            f"{s['window_points']:,}-point window, {s['batch_points']} new points",
            "reported, against a recomputation over the window in the same run",
            f"{s['apply_batch_ms']:.1f} ms (+ {s['encode_ms']:.1f} ms encoding a "
            f"{s['frame_kib']:.0f} KiB frame) "
            f"against {s['recompute_ms']:.1f} ms for numpy's rfft over the window alone "
            f"({s['apply_batch_ms'] / s['recompute_ms']:.1f}x)",
            "reported",
        )
    ]
