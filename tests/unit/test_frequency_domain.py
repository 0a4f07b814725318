"""The frequency-domain roots Nominal only polls (compute/evaluation/nodes/frequency.py) against
references from the mathematics: a sine of amplitude A at a frequency on an FFT bin has a
single-sided amplitude spectrum of A there and nothing elsewhere, a constant c is c at 0 Hz,
sines add (the transform is linear), Parseval's theorem gives a PSD's integral as the series'
variance, and white noise of variance s^2 sampled at fs has the flat one-sided density 2 s^2 / fs.
Then what the compiler builds (only when polled) and what nominal-api's client decodes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
import pytest
from conjure_python_client import ConjureDecoder
from nominal_api import scout_compute_api as sc

from app.protocol import frames
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import EvalEnv
from compute.evaluation.nodes.frequency import (
    Bucketing,
    FrequencyDomainChart,
    PairFrequencyChart,
    PairTransform,
    SpectrogramChart,
    Stft,
    Transform,
    aligned,
    amplitude_spectrum,
    cross_spectrum,
    frequency_buckets,
    paired,
    samples,
    spectrogram_grid,
    welch_psd,
)
from compute.evaluation.nodes.inputs import ChannelInput
from compute.evaluation.results import NumericPoints
from compute.evaluation.spectra import FrequencyPlot, FrequencyPlotV2
from tests import node_json as n
from tests.server.test_compute_property import variables

pytestmark = pytest.mark.unit

S = 1_000_000_000
T0 = 1_700_000_000 * S
RID = "ri.frequency"


def sampled(fs: float, count: int, f: Any) -> tuple[np.ndarray, np.ndarray]:
    """`count` points at `fs` Hz from T0, valued f(t in seconds)."""
    ts = T0 + np.round(np.arange(count) * S / fs).astype(np.int64)
    return ts, np.asarray(f((ts - T0) / S), np.float64)


def spectrum(
    ts: np.ndarray, vs: np.ndarray, window: str = "RECT", nfft: int | None = None
) -> tuple[Any, Any]:
    x, fs, _ = samples(ts, vs)
    return amplitude_spectrum(x, fs, window, nfft)


def test_a_sine_peaks_at_its_frequency_with_its_amplitude() -> None:
    ts, vs = sampled(1000.0, 2000, lambda t: 3.0 * np.sin(2 * np.pi * 50.0 * t))
    f, a = spectrum(ts, vs)
    # fs = (n - 1) / span = 1999 / 1.999 s = 1000 Hz; n = 2000 bins of 0.5 Hz, 1001 single-sided
    assert len(f) == 1001 and f[1] == pytest.approx(0.5) and f[-1] == pytest.approx(500.0)
    peak = int(np.argmax(a))
    assert f[peak] == pytest.approx(50.0) and a[peak] == pytest.approx(3.0, rel=1e-9)
    assert np.delete(a, peak).max() < 1e-9


def test_two_sines_and_a_constant_each_keep_their_amplitude() -> None:
    ts, vs = sampled(
        200.0,
        400,
        lambda t: 1.5 + 2.0 * np.sin(2 * np.pi * 10.0 * t) + 0.5 * np.cos(2 * np.pi * 35.0 * t + 0.3),
    )
    f, a = spectrum(ts, vs)
    want = {0.0: 1.5, 10.0: 2.0, 35.0: 0.5}
    for freq, amplitude in want.items():
        assert a[int(np.argmin(np.abs(f - freq)))] == pytest.approx(amplitude, rel=1e-9)
    others = [i for i in range(len(f)) if not any(abs(f[i] - x) < 1e-9 for x in want)]
    assert a[others].max() < 1e-9


def test_a_constant_is_all_at_zero_hertz() -> None:
    ts, vs = sampled(10.0, 64, lambda t: np.full_like(t, -4.0))
    f, a = spectrum(ts, vs)
    assert f[0] == 0.0 and a[0] == pytest.approx(4.0) and a[1:].max() < 1e-12


def test_a_window_keeps_an_on_bin_sines_amplitude_and_nfft_sets_the_bins() -> None:
    ts, vs = sampled(1000.0, 1000, lambda t: 2.0 * np.sin(2 * np.pi * 100.0 * t))
    for window in ("HANN", "HAMMING", "BLACKMAN"):
        f, a = spectrum(ts, vs, window)
        peak = int(np.argmax(a))
        assert f[peak] == pytest.approx(100.0) and a[peak] == pytest.approx(2.0, rel=1e-9), window
    # nfft 4096 > 1000 points: zero-padded, nfft/2 + 1 bins spaced fs / nfft; the peak keeps A
    f, a = spectrum(ts, vs, "RECT", 4096)
    assert len(f) == 2049 and f[1] == pytest.approx(1000.0 / 4096)
    # the nearest bin to 100 Hz is 410 * fs / 4096; 1 s of a sine seen off its frequency by d Hz
    # has the Dirichlet kernel's gain, about |sinc(d * 1 s)| (the negative image's leakage is < 1e-3)
    peak = int(np.argmax(a))
    assert peak == 410
    assert a[peak] == pytest.approx(2.0 * abs(np.sinc(f[peak] - 100.0)), rel=1e-3)
    # nfft 500 < 1000 points: the first 500 only (25 cycles at 2 Hz bins)
    f, a = spectrum(ts, vs, "RECT", 500)
    assert len(f) == 251 and a[50] == pytest.approx(2.0, rel=1e-9)


def test_a_jittered_or_gapped_series_is_resampled_to_its_mean_rate() -> None:
    rng = np.random.default_rng(3)
    fs, count, f0, amp = 1000.0, 4000, 40.0, 5.0
    ideal = np.arange(count) * S / fs
    jitter = np.r_[0, rng.integers(-200_000, 200_000, count - 2), 0]  # +-0.2 ms, ends fixed
    ts = T0 + (ideal + jitter).astype(np.int64)
    vs = amp * np.sin(2 * np.pi * f0 * (ts - T0) / S)  # the sine at the true sample times
    f, a = spectrum(ts, vs)
    assert f[int(np.argmax(a))] == pytest.approx(f0) and a.max() == pytest.approx(amp, rel=0.02)
    # read as if evenly spaced (no resampling), the same points' peak would lose more than resampling does
    gapped = np.r_[ts[:1000], ts[1500:]]  # 0.5 s missing: still one sine of the same frequency
    f, a = spectrum(gapped, amp * np.sin(2 * np.pi * f0 * (gapped - T0) / S))
    assert f[int(np.argmax(a))] == pytest.approx(f0, abs=f[1]) and a.max() > 0.8 * amp


def test_non_finite_values_are_left_out_and_short_series_have_no_spectrum() -> None:
    ts, vs = sampled(100.0, 200, lambda t: 1.0 + np.sin(2 * np.pi * 5.0 * t))
    vs[[0, 7]] = np.nan  # the first point too: the rate is taken from the finite points
    x, _, t0 = samples(ts, vs)
    assert len(x) == 198 and t0 == int(ts[1])
    assert spectrum(ts[:1], vs[:1])[0].tolist() == []


def test_welch_psd_integrates_to_the_variance_and_is_flat_for_white_noise() -> None:
    ts, vs = sampled(1000.0, 20_000, lambda t: 3.0 * np.sin(2 * np.pi * 125.0 * t) + 7.0)
    x, fs, _ = samples(ts, vs)
    f, p = welch_psd(x, fs, Stft())
    assert f[int(np.argmax(p))] == pytest.approx(125.0)
    # Parseval: the one-sided density's integral is the variance of the (mean-removed) sine, A^2 / 2
    assert float(np.sum(p) * (f[1] - f[0])) == pytest.approx(4.5, rel=0.01)
    noise = np.random.default_rng(1).normal(0.0, 2.0, 200_000)
    f, p = welch_psd(noise, 500.0, Stft(window="RECT", nperseg=512))
    assert float(np.mean(p[1:-1])) == pytest.approx(2 * 4.0 / 500.0, rel=0.02)


def test_frequency_buckets_span_their_points() -> None:
    f = np.arange(10, dtype=np.float64)  # 0..9 Hz
    a = np.array([5.0, 1, 2, 3, 4, 9, 0, 1, 1, 1])
    b = frequency_buckets(f, a, 3, 1.0, 9.0)  # [1, 9): 8 points, ceil(8 / 3) = 3 per bucket
    assert b.start.tolist() == [1.0, 4.0, 7.0] and b.end.tolist() == [4.0, 7.0, 9.0]
    assert b.count.tolist() == [3, 3, 2]
    assert b.min.tolist() == [1.0, 0.0, 1.0] and b.max.tolist() == [3.0, 9.0, 1.0]
    assert b.mean.tolist() == pytest.approx([2.0, 13 / 3, 1.0])


def test_a_spectrogram_follows_a_chirp_of_two_tones() -> None:
    fs, f1, f2 = 1024.0, 64.0, 256.0  # on the 4 Hz bins of 256-point windows
    ts, vs = sampled(
        fs, 8192, lambda t: np.where(t < 4.0, 2.0 * np.sin(2 * np.pi * f1 * t), np.sin(2 * np.pi * f2 * t))
    )
    x, rate, t0 = samples(ts, vs)
    grid = spectrogram_grid(x, rate, t0, Stft(window="HANN"), "AMPLITUDE", "LINEAR", Bucketing())
    step = 256 - 32  # scipy.signal.spectrogram's default overlap, an eighth of 256 points
    windows = (8192 - 256) // step + 1
    assert grid.values.shape == (windows, 129) and len(grid.edges) == 130
    assert grid.row_start.tolist() == [T0 + round(j * step * S / fs) for j in range(windows)]
    assert grid.row_end.tolist() == [T0 + round((j * step + 256) * S / fs) for j in range(windows)]
    first, last = grid.values[0], grid.values[-1]
    assert grid.centers[int(np.argmax(first))] == pytest.approx(f1, abs=2.0) and first.max() == pytest.approx(
        2.0, rel=1e-6
    )
    assert grid.centers[int(np.argmax(last))] == pytest.approx(f2, abs=2.0) and last.max() == pytest.approx(
        1.0, rel=1e-6
    )
    # decibels by default: 20*log10 of an amplitude, 10*log10 of a PSD; rows x columns within the cap
    db = spectrogram_grid(
        x, rate, t0, Stft(window="HANN"), "AMPLITUDE", None, Bucketing(max_time=4, max_frequency=16)
    )
    assert db.values.shape[0] <= 4 and db.values.shape[1] <= 16
    # rows of ceil(36 / 4) = 9 windows (the first all before the switch), columns of ceil(129 / 16) = 9
    # bins: 64 Hz is bin 16, in column 1 (bins 9-17); an on-bin sine under a Hann window has A at its
    # bin, A / 2 at each neighbour, 0 elsewhere, so the column's mean is (2 + 1 + 1) / 9
    assert db.values.shape == (4, 15)
    assert db.values[0].max() == pytest.approx(20 * math.log10(4 / 9), rel=1e-6)
    assert int(np.argmax(db.values[0])) == 1 and db.edges[1] <= f1 < db.edges[2]


def wire(response: Any) -> Any:
    """A response as a client reads it: the JSON text the server writes, parsed."""
    return orjson.loads(orjson.dumps(response))


def _compile(node: dict[str, Any], polled: bool) -> Any:
    return compile_plan(node, 60 * S, variables(RID), Limits(), ResultOptions(), polled=polled)


def fft(**extra: Any) -> dict[str, Any]:
    return n.union("frequency", n.union("fft", {"input": n.num("a"), **extra}))


def test_live_subscriptions_keep_nominals_refusal_and_a_poll_builds_them() -> None:
    spectrogram = n.union("spectrogram", {"input": n.num("a")})
    psd = n.union("frequencyV2", n.union("psd", {"input": n.num("a"), "magnitudeScaling": "LINEAR"}))
    for node in (fft(), psd, spectrogram):
        with pytest.raises(ComputeError) as refused:
            _compile(node, polled=False)
        assert refused.value.name == "PollingOnlyComputation"
        assert refused.value.params["pollingOnlyTypes"] == "FREQUENCY_DOMAIN"
    assert isinstance(_compile(fft(window="HANN", nfft=1024), True).root, FrequencyDomainChart)
    assert isinstance(_compile(spectrogram, True).root, SpectrogramChart)
    bode = n.union("frequencyV2", n.union("bode", {"input": n.num("a"), "output": n.num("a")}))
    assert isinstance(_compile(bode, True).root, PairFrequencyChart)


def test_the_results_decode_as_nominal_apis_compute_node_responses() -> None:
    ts, vs = sampled(100.0, 400, lambda t: np.sin(2 * np.pi * 10.0 * t))
    x, fs, t0 = samples(ts, vs)
    f, a = amplitude_spectrum(x, fs)
    decoder = ConjureDecoder()
    plain = decoder.decode(wire(frames.response({(): FrequencyPlot(f, a)}, False)), sc.ComputeNodeResponse)
    assert plain.frequency_domain is not None and plain.frequency_domain.frequencies == f.tolist()
    v2 = decoder.decode(wire(frames.response({(): FrequencyPlotV2(f, a)}, False)), sc.ComputeNodeResponse)
    assert v2.frequency_domain_v2 is not None and v2.frequency_domain_v2.real.amplitudes == a.tolist()
    bucketed = decoder.decode(
        wire(frames.response({(): frequency_buckets(f, a, 10, None, None)}, False)), sc.ComputeNodeResponse
    )
    buckets = bucketed.bucketed_frequency_domain.buckets
    assert sum(b.count for b in buckets) == len(f) and max(b.max_amplitude for b in buckets) == pytest.approx(
        1.0
    )
    grid = spectrogram_grid(x, fs, t0, Stft(nperseg=64), "PSD", None, Bucketing())
    decoded = decoder.decode(wire(frames.response({(): grid}, False)), sc.ComputeNodeResponse).spectrogram
    assert len(decoded.frequency_edges) == len(decoded.frequency_centers) + 1 == 34
    assert decoded.rows[0].start.seconds == T0 // S and len(decoded.rows[0].values) == 33


# -- two series: a linear system's response is known at the frequency it is driven at ------------------
def driven(gain: float, shift: float, n_points: int = 8192) -> tuple[Any, Any, Any, Any]:
    """x = sin(2 pi 125 t), y = gain * sin(2 pi 125 t + shift): at 125 Hz the
    response from x to y is gain * e^(i shift)."""
    ts, x = sampled(1000.0, n_points, lambda t: np.sin(2 * np.pi * 125.0 * t))
    y = gain * np.sin(2 * np.pi * 125.0 * (ts - T0) / S + shift)
    return ts, x, ts, y


def wrapped(angle: float, turn: float) -> float:
    """An angle brought into [-turn / 2, turn / 2)."""
    return (angle + turn / 2) % turn - turn / 2


def pair_result(method: str, **options: Any) -> Any:
    tx, x, ty, y = driven(0.5, 0.7)
    chart = PairFrequencyChart(ChannelInput(0), ChannelInput(1), PairTransform(method, **options))
    env = EvalEnv({0: NumericPoints(tx, x), 1: NumericPoints(ty, y)}, int(tx[0]), int(tx[-1]) + 1)
    return chart.evaluate_groups({(): env})[()]


def test_bode_and_nyquist_give_the_response_at_the_driven_frequency() -> None:
    bode = pair_result("bode", scaling="MAGNITUDE_DB_20")
    k = int(np.argmin(np.abs(bode.frequencies - 125.0)))
    assert bode.frequencies[k] == pytest.approx(125.0)
    assert bode.magnitudes[k] == pytest.approx(20 * math.log10(0.5), abs=1e-6)
    # unwrapped (the default) the phase is the lag up to whole turns; wrapped it is the lag itself
    assert wrapped(bode.phases[k] - 0.7, 2 * math.pi) == pytest.approx(0.0, abs=1e-6)
    assert pair_result("bode", unwrap=False).phases[k] == pytest.approx(0.7, abs=1e-6)
    nyquist = pair_result("nyquist")
    assert nyquist.real[k] == pytest.approx(0.5 * math.cos(0.7), abs=1e-6)
    assert nyquist.imaginary[k] == pytest.approx(0.5 * math.sin(0.7), abs=1e-6)
    angular = pair_result("bode", scaling="LINEAR", frequency_type="ANGULAR", degrees=True)
    assert angular.frequencies[k] == pytest.approx(2 * math.pi * 125.0)
    assert angular.magnitudes[k] == pytest.approx(0.5, abs=1e-6)
    assert wrapped(angular.phases[k] - math.degrees(0.7), 360.0) == pytest.approx(0.0, abs=1e-4)


def test_cpsd_phase_is_the_lag_and_of_a_series_with_itself_is_its_psd() -> None:
    cpsd = pair_result("cpsd", scaling="LINEAR", unwrap=False)
    k = int(np.argmax(cpsd.magnitudes))
    assert cpsd.frequencies[k] == pytest.approx(125.0) and cpsd.phases[k] == pytest.approx(0.7, abs=1e-6)
    _, x = sampled(1000.0, 4096, lambda t: np.sin(2 * np.pi * 50.0 * t) + 0.1 * np.cos(2 * np.pi * 300.0 * t))
    _, pxy = cross_spectrum(x, x, 1000.0, Stft())
    _, pxx = welch_psd(x, 1000.0, Stft())
    assert np.allclose(pxy.real, pxx) and np.allclose(pxy.imag, 0.0)


def test_two_series_of_different_lengths_are_refused_and_cpsds_alignment_is_refused_by_name() -> None:
    ts, x = sampled(100.0, 10, lambda t: t)
    with pytest.raises(ComputeError) as refused:
        paired(ts, x, ts[:9], x[:9], "bode")
    assert refused.value.name == "InvalidComputation" and "10 and 9" in refused.value.message
    # nominal-api's Cpsd has no alignmentConfiguration (only Bode aligns)
    cpsd = {"x": n.num("a"), "y": n.num("a"), "alignmentConfiguration": {"driverSeries": "FIRST"}}
    with pytest.raises(ComputeError) as aligned:
        _compile(n.union("frequencyV2", n.union("cpsd", cpsd)), True)
    assert aligned.value.params.get("field") == "alignmentConfiguration"


def test_bodes_alignment_reads_the_other_series_by_forward_fill_within_the_radius() -> None:
    # input at 0, 10, 20, 30 s; output at 5, 12, 40 s; radius 6 s. FIRST (the input's instants): at 0
    # the output has no point yet (left out), at 10 its 5 s point (5 s old), at 20 its 12 s point
    # (8 s old: beyond the radius, left out), at 30 nothing within 6 s. SECOND (the output's): at 5 the
    # input's 0 s point (5 s old), at 12 its 10 s point, at 40 its 30 s point (10 s old: left out).
    s = 1_000_000_000
    tx, x = np.array([0, 10, 20, 30]) * s, np.array([1.0, 2.0, 3.0, 4.0])
    ty, y = np.array([5, 12, 40]) * s, np.array([10.0, 20.0, 30.0])
    ts, ax, ay = aligned(tx, x, ty, y, "FIRST", 6 * s)
    assert ts.tolist() == [10 * s] and ax.tolist() == [2.0] and ay.tolist() == [10.0]
    ts, ax, ay = aligned(tx, x, ty, y, "SECOND", 6 * s)
    assert ts.tolist() == [5 * s, 12 * s] and ax.tolist() == [1.0, 2.0] and ay.tolist() == [10.0, 20.0]


def test_the_two_series_results_decode_as_nominal_apis_plots() -> None:
    decoder = ConjureDecoder()
    bode = decoder.decode(wire(frames.response({(): pair_result("bode")}, False)), sc.ComputeNodeResponse)
    plot = bode.frequency_domain_v2.magnitude_and_phase
    assert plot is not None and len(plot.frequencies) == len(plot.magnitudes) == len(plot.phases) == 129
    nyquist = decoder.decode(
        wire(frames.response({(): pair_result("nyquist")}, False)), sc.ComputeNodeResponse
    )
    k = 32  # 125 Hz on the 256-point segments' bins of 1000 / 256 Hz
    assert nyquist.frequency_domain_v2.complex.frequencies[k] == pytest.approx(125.0)
    assert nyquist.frequency_domain_v2.complex.real[k] == pytest.approx(0.5 * math.cos(0.7), abs=1e-6)


def test_transforms_too_large_to_compute_or_answer_are_refused_as_too_many_points() -> None:
    ts, vs = sampled(100.0, 64, lambda t: np.sin(2 * np.pi * 5.0 * t))
    with pytest.raises(ComputeError) as fft_points:
        spectrum(ts, vs, "RECT", (1 << 24) + 1)
    assert fft_points.value.name == "TooManyPoints" and fft_points.value.params["limit"] == str(1 << 24)
    x, fs, t0 = samples(ts, vs)
    # 16 windows of 4 points, each transformed over 2^22 points: 16 x (2^21 + 1) cells > 2^23
    with pytest.raises(ComputeError) as cells:
        spectrogram_grid(x, fs, t0, Stft(nperseg=4, noverlap=0, nfft=1 << 22), "PSD", None, Bucketing())
    assert cells.value.name == "TooManyPoints"
    # an unbucketed spectrum longer than the result limit is refused; bucketed it is answered
    env = EvalEnv({0: NumericPoints(ts, vs)}, int(ts[0]), int(ts[-1]) + 1)
    with pytest.raises(ComputeError) as long:
        FrequencyDomainChart(ChannelInput(0), Transform("fft"), max_frequencies=32).evaluate_groups({(): env})
    assert long.value.name == "TooManyPoints" and long.value.params["limit"] == "32"
    bucketed = FrequencyDomainChart(
        ChannelInput(0), Transform("fft"), buckets=(8, None, None), max_frequencies=32
    )
    # 33 frequencies in runs of ceil(33 / 8) = 5: 7 buckets (the count asked for is a target)
    assert len(bucketed.evaluate_groups({(): env})[()]) == 7
