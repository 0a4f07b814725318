"""The frequency-domain nodes Nominal only polls, on a real server through nominal-api's generated
`ComputeService` client: a sine and a constant written over HTTP, then polled as `frequency`,
`frequencyV2` and `spectrogram`. References from the mathematics: 1,000 points a second of
2.5 sin(2 pi 50 t) + 1 over 4 s have a single-sided amplitude spectrum of 2.5 at 50 Hz, 1 at 0 Hz
and nothing else, on bins of 0.25 Hz; Welch's density of the sine integrates to 2.5^2 / 2. A
second channel 1.25 sin(2 pi 50 t + 0.7) at the same instants is the sine's response at 50 Hz of
gain 0.5 (-6.02 dB) and phase 0.7 rad (the constant 1 is at 0 Hz only)."""

from __future__ import annotations

import math
import time
import uuid

import httpx
import numpy as np
import pytest

from tests import node_json as n
from tests.server.test_compute_service import TOKEN, channel, ns, request, secured, service
from tests.wire import NANOS, write_points

__all__ = ["secured"]  # the module-scoped server with a tokens file, shared with test_compute_service

MS = 1_000_000
F0, AMPLITUDE, OFFSET, SECONDS = 50.0, 2.5, 1.0, 4
GAIN, LAG = 0.5, 0.7  # the echo: GAIN * AMPLITUDE * sin(2 pi F0 t + LAG), beside the sine


@pytest.fixture(scope="module")
async def sine(secured: object) -> dict[str, int | str]:
    base_url: str = secured.base_url  # type: ignore[attr-defined]
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 600) * NANOS
    points = [
        (t0 + i * MS, OFFSET + AMPLITUDE * math.sin(2 * math.pi * F0 * i / 1000))
        for i in range(SECONDS * 1000)
    ]
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": TOKEN}, timeout=120) as c:
        await write_points(base_url, rid, "sine", points, client=c)
        echo = [
            (t, GAIN * AMPLITUDE * math.sin(2 * math.pi * F0 * i / 1000 + LAG))
            for i, (t, _) in enumerate(points)
        ]
        await write_points(base_url, rid, "echo", echo, client=c)
    return {"rid": rid, "t0": t0}


def fft(rid: str, **extra: object) -> dict[str, object]:
    return n.union("fft", {"input": channel(rid, "sine"), **extra})


def test_a_polled_fft_peaks_at_the_sines_frequency(secured: object, sine: dict[str, int | str]) -> None:
    rid, t0 = str(sine["rid"]), int(sine["t0"])
    client = service(secured.base_url)  # type: ignore[attr-defined]
    got = client.compute(TOKEN, request(n.union("frequency", fft(rid)), t0, t0 + SECONDS * NANOS))
    plot = got.frequency_domain
    assert plot is not None
    f, a = np.array(plot.frequencies), np.array(plot.amplitudes)
    assert len(f) == SECONDS * 1000 // 2 + 1 and f[1] == pytest.approx(0.25)
    peak = int(np.argmax(a))
    assert f[peak] == pytest.approx(F0) and a[peak] == pytest.approx(AMPLITUDE, rel=1e-9)
    assert a[0] == pytest.approx(OFFSET, rel=1e-9)
    assert np.delete(a, [0, peak]).max() < 1e-9
    # frequencyV2, bucketed to 100 buckets below 100 Hz: the peak's bucket holds 2.5
    bucketed = n.union(
        "frequencyV2",
        fft(
            rid,
            window="HANN",
            summarizationStrategy=n.union("buckets", {"buckets": 100, "maxFrequency": 100.0}),
        ),
    )
    buckets = client.compute(TOKEN, request(bucketed, t0, t0 + SECONDS * NANOS)).bucketed_frequency_domain
    assert buckets is not None and len(buckets.buckets) == 100  # 400 points of [0, 100 Hz), 4 each
    top = max(buckets.buckets, key=lambda b: b.max_amplitude)
    assert top.frequency_start <= F0 < top.frequency_end and top.max_amplitude == pytest.approx(
        AMPLITUDE, rel=1e-9
    )


def test_a_polled_psd_and_spectrogram_of_the_sine(secured: object, sine: dict[str, int | str]) -> None:
    rid, t0 = str(sine["rid"]), int(sine["t0"])
    client = service(secured.base_url)  # type: ignore[attr-defined]
    series = channel(rid, "sine")
    psd = n.union("frequencyV2", n.union("psd", {"input": series, "magnitudeScaling": "LINEAR"}))
    plot = client.compute(TOKEN, request(psd, t0, t0 + SECONDS * NANOS)).frequency_domain_v2
    assert plot is not None and plot.real is not None
    f, p = np.array(plot.real.frequencies), np.array(plot.real.amplitudes)
    assert f[int(np.argmax(p))] == pytest.approx(F0, abs=f[1])
    assert float(np.sum(p) * f[1]) == pytest.approx(AMPLITUDE**2 / 2, rel=0.01)  # Parseval, mean removed
    node = n.union(
        "spectrogram",
        {
            "input": series,
            "quantity": "AMPLITUDE",
            "magnitudeScaling": "LINEAR",
            "stftOptions": {"window": "HANN", "nperseg": 200, "noverlap": 0},
        },
    )
    grid = client.compute(TOKEN, request(node, t0, t0 + SECONDS * NANOS)).spectrogram
    assert grid is not None and len(grid.rows) == 20  # 4,000 points in windows of 200, none shared
    assert [ns(r.start) for r in grid.rows] == [t0 + k * 200 * MS for k in range(20)]
    for row in grid.rows:  # 50 Hz is 10 cycles of each 0.2 s window: on its 5 Hz bin, amplitude 2.5
        assert grid.frequency_centers[int(np.argmax(row.values))] == pytest.approx(F0)
        assert max(row.values) == pytest.approx(AMPLITUDE, rel=1e-9)


def test_a_polled_bode_reads_the_echos_gain_and_lag(secured: object, sine: dict[str, int | str]) -> None:
    rid, t0 = str(sine["rid"]), int(sine["t0"])
    # 200-point segments: 50 Hz is bin 10 of 5 Hz bins, where a Hann window leaks into no other tone
    stft = {"window": "HANN", "nperseg": 200, "noverlap": 100}
    bode = {
        "input": channel(rid, "sine"),
        "output": channel(rid, "echo"),
        "stftOptions": stft,
        "unwrapPhase": False,
    }
    got = service(secured.base_url).compute(  # type: ignore[attr-defined]
        TOKEN, request(n.union("frequencyV2", n.union("bode", bode)), t0, t0 + SECONDS * NANOS)
    )
    plot = got.frequency_domain_v2
    assert plot is not None and plot.magnitude_and_phase is not None
    f = np.array(plot.magnitude_and_phase.frequencies)
    k = int(np.argmin(np.abs(f - F0)))
    assert f[k] == pytest.approx(F0) and len(f) == 101
    assert plot.magnitude_and_phase.magnitudes[k] == pytest.approx(20 * math.log10(GAIN), abs=1e-6)
    assert plot.magnitude_and_phase.phases[k] == pytest.approx(LAG, abs=1e-6)
