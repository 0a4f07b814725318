"""The frequency-domain roots Nominal only polls (`ComputableNode` `frequency`, `frequencyV2`,
`spectrogram`), computed once, whole, over a polled period (docs/decisions/0079-frequency-domain.md).

Every transform reads a series as samples at one rate. The rate is taken from the series' own
timestamps, fs = (n - 1) / (last - first) in Hz (or `StftOptions.samplingFrequency` when given);
points whose values are not finite are left out first. A series whose intervals are not all
equal is resampled before the transform, by linear interpolation onto n instants evenly spaced
from its first timestamp to its last, so a gap or jitter moves no energy to a wrong frequency.

- FFT (`Fft`): the single-sided amplitude spectrum of numpy.fft.rfft over the windowed series
  (first `nfft` samples, zero-padded up to `nfft`): |X[k]| / sum(w), doubled for 0 < k < nfft/2,
  at f[k] = k * fs / nfft. A sine of amplitude A at a bin's frequency peaks at A there; a constant
  c gives c at 0 Hz.
- Periodogram / PSD: Welch's estimate (scipy.signal.welch, density scaling, units^2/Hz).
- Spectrogram: scipy.signal.spectrogram's windows, as PSD or single-sided amplitude, bucketed.

scipy.signal is imported inside the functions that use it: every server imports this module (the
compile registry builds every node), an edge too, which never evaluates one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import EvalEnv, GroupKey, OutputNode, SeriesNode, numeric
from compute.evaluation.nodes.charts import ChartInputs
from compute.evaluation.nodes.outputs import HeldSeries
from compute.evaluation.results import NumericPoints, Output
from compute.evaluation.spectra import (
    FrequencyBuckets,
    FrequencyComplex,
    FrequencyMagnitudePhase,
    FrequencyPlot,
    FrequencyPlotV2,
    SpectrogramGrid,
)

NANOS = 1_000_000_000
# FftWindow -> scipy.signal.get_window's name
WINDOWS = {"RECT": "boxcar", "HANN": "hann", "HAMMING": "hamming", "BLACKMAN": "blackman"}
MAX_SPECTROGRAM_CELLS = 262_144  # SpectrogramBucketing.maxTimeBuckets: rows x columns at most this
# A short-time transform's windows x frequency bins before they are averaged or bucketed (complex
# doubles: 128 MiB), and the length of one FFT: beyond, a request is refused, not attempted.
MAX_STFT_CELLS = 1 << 23
MAX_FFT_POINTS = 1 << 24


def too_large(asked: int, what: str, limit: int) -> ComputeError:
    return ComputeError("TooManyPoints", f"{asked} {what} exceed the limit of {limit}", {"limit": str(limit)})


def samples(ts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, float, int]:
    """(values at one rate, that rate in Hz, the first sample's timestamp): the finite points,
    resampled by linear interpolation onto evenly spaced instants when their intervals differ.
    Fewer than two points (or no time between them) have no rate: (values, 0.0, first)."""
    keep = np.isfinite(values)
    if not keep.all():
        ts, values = ts[keep], values[keep]
    n = len(ts)
    if n < 2 or ts[-1] == ts[0]:
        return values.astype(np.float64), 0.0, int(ts[0]) if n else 0
    span = int(ts[-1] - ts[0])
    fs = (n - 1) * NANOS / span
    steps = np.diff(ts)
    if steps.min() == steps.max():
        return values.astype(np.float64), fs, int(ts[0])
    offsets = (ts - ts[0]).astype(np.float64)
    grid = np.linspace(0.0, float(span), n)
    return np.interp(grid, offsets, values), fs, int(ts[0])


def window(name: str, length: int, symmetric: bool = False) -> np.ndarray:
    """An FftWindow's values (`DFT_EVEN`, periodic, unless `symmetric`)."""
    from scipy import signal

    return np.asarray(signal.get_window(WINDOWS[name], length, fftbins=not symmetric), dtype=np.float64)


def amplitude_spectrum(
    x: np.ndarray, fs: float, window_name: str = "RECT", nfft: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(frequencies in Hz, single-sided amplitudes): see the module's docstring."""
    size = nfft if nfft is not None else len(x)
    if size > MAX_FFT_POINTS:
        raise too_large(size, "FFT points", MAX_FFT_POINTS)
    seg = x[: min(len(x), size)]
    if size < 1 or not len(seg) or fs <= 0:
        empty = np.empty(0, np.float64)
        return empty, empty
    w = window(window_name, len(seg))
    amplitudes = np.abs(np.fft.rfft(seg * w, size)) / w.sum()
    amplitudes[1 : (size + 1) // 2] *= 2.0  # every bin but 0 Hz and (nfft even) the Nyquist bin
    return np.fft.rfftfreq(size, 1.0 / fs), amplitudes


@dataclass(frozen=True)
class Stft:
    """StftOptions, each None when absent (the defaults are those of the scipy.signal function that
    computes the result: Welch's hann, 256 points, half overlapping; the spectrogram's Tukey(0.25),
    256 points, an eighth overlapping; both detrend by removing the mean)."""

    window: str | None = None
    symmetric: bool = False
    sampling_frequency: float | None = None
    nperseg: int | None = None
    noverlap: int | None = None
    nfft: int | None = None
    detrend: str | None = None  # CONSTANT, LINEAR, NO_OP

    def args(self, n: int, default_window: str | tuple[str, float], overlap_div: int) -> dict[str, Any]:
        from scipy import signal

        nperseg = min(self.nperseg or 256, n)
        if self.window is not None:
            win: object = window(self.window, nperseg, self.symmetric)
        else:
            win = signal.get_window(default_window, nperseg, fftbins=not self.symmetric)
        noverlap = self.noverlap if self.noverlap is not None else nperseg // overlap_div
        detrend: object = {"CONSTANT": "constant", "LINEAR": "linear", "NO_OP": False}.get(
            self.detrend or "CONSTANT"
        )
        nfft = max(self.nfft, nperseg) if self.nfft is not None else None
        step = max(nperseg - min(noverlap, nperseg - 1), 1)
        cells = ((n - nperseg) // step + 1) * ((nfft or nperseg) // 2 + 1)
        if cells > MAX_STFT_CELLS:
            raise too_large(
                cells, "short-time Fourier transform cells (windows x frequency bins)", MAX_STFT_CELLS
            )
        return {
            "window": win,
            "nperseg": nperseg,
            "noverlap": min(noverlap, nperseg - 1),
            "nfft": nfft,
            "detrend": detrend,
        }


def welch_psd(x: np.ndarray, fs: float, stft: Stft) -> tuple[np.ndarray, np.ndarray]:
    """(frequencies in Hz, Welch's power spectral density in units^2/Hz)."""
    from scipy import signal

    if len(x) < 2 or fs <= 0:
        empty = np.empty(0, np.float64)
        return empty, empty
    f, p = signal.welch(x, fs=fs, scaling="density", **stft.args(len(x), "hann", 2))
    return np.asarray(f, np.float64), np.asarray(p, np.float64)


def scaled(values: np.ndarray, scaling: str) -> np.ndarray:
    """MagnitudeScaling: LINEAR as is, MAGNITUDE_DB_10 10*log10, MAGNITUDE_DB_20 20*log10 (0 gives -inf)."""
    if scaling == "LINEAR":
        return values
    with np.errstate(divide="ignore", invalid="ignore"):
        return (10.0 if scaling == "MAGNITUDE_DB_10" else 20.0) * np.log10(values)


def frequency_type(f: np.ndarray, density: np.ndarray, fs: float, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """OutputFrequencyType: LINEAR Hz; ANGULAR rad/s; NORMALIZED_LINEAR cycles/sample;
    NORMALIZED_ANGULAR rad/sample. A density is rescaled so that its integral over the new axis is
    unchanged (divided by the axis' factor over Hz)."""
    factor = {
        "LINEAR": 1.0,
        "ANGULAR": 2 * math.pi,
        "NORMALIZED_LINEAR": 1 / fs,
        "NORMALIZED_ANGULAR": 2 * math.pi / fs,
    }[kind]
    return f * factor, density / factor


def frequency_buckets(
    f: np.ndarray, a: np.ndarray, buckets: int, low: float | None, high: float | None
) -> FrequencyBuckets:
    """FrequencyDecimateWithBuckets: the points in [low, high) split into at most `buckets` runs of
    ceil(n / buckets) consecutive points. A bucket spans from its first frequency (inclusive) to the
    next bucket's first (exclusive); the last to its last frequency plus one bin's spacing."""
    keep = np.ones(len(f), bool)
    if low is not None:
        keep &= f >= low
    if high is not None:
        keep &= f < high
    f, a = f[keep], a[keep]
    n = len(f)
    per = max(1, math.ceil(n / max(buckets, 1)))
    first = np.arange(0, n, per, dtype=np.int64)
    count = np.diff(np.r_[first, n]).astype(np.int64)
    spacing = float(f[1] - f[0]) if n > 1 else 0.0
    start = f[first] if n else np.empty(0, np.float64)
    end = np.r_[start[1:], f[-1] + spacing] if n else np.empty(0, np.float64)
    if not n:
        e = np.empty(0, np.float64)
        return FrequencyBuckets(e, e, e, e, e, count, first, f, a)
    return FrequencyBuckets(
        start,
        end,
        np.minimum.reduceat(a, first),
        np.maximum.reduceat(a, first),
        np.add.reduceat(a, first) / count,
        count,
        first,
        f,
        a,
    )


@dataclass(frozen=True)
class Transform:
    """What `frequency` / `frequencyV2` computes of one group's samples: `fft` (the amplitude
    spectrum), `periodogram` (Welch, Nominal's method naming the window, linear density), `psd`
    (Welch with StftOptions, then the frequency type and the magnitude scaling)."""

    method: str  # fft, periodogram, psd
    window: str = "RECT"
    nfft: int | None = None
    stft: Stft = Stft()
    scaling: str = "MAGNITUDE_DB_10"
    frequency_type: str = "LINEAR"

    def apply(self, x: np.ndarray, fs: float) -> tuple[np.ndarray, np.ndarray]:
        if self.method == "fft":
            return amplitude_spectrum(x, fs, self.window, self.nfft)
        if self.method == "periodogram":
            return welch_psd(x, fs, Stft(window=self.window))
        f, p = welch_psd(x, fs, self.stft)
        if not len(f):
            return f, p
        f, p = frequency_type(f, p, fs, self.frequency_type)
        return f, scaled(p, self.scaling)


def _group_series(
    node: SeriesNode, held: HeldSeries, envs: Mapping[GroupKey, EvalEnv], what: str
) -> dict[GroupKey, NumericPoints]:
    return {k: numeric(s, what) for k, s in held.whole(node, envs).items()}


@dataclass
class FrequencyDomainChart(OutputNode):
    """`frequency` / `frequencyV2`: per group, the transform of its series over the period, as a
    FrequencyDomainPlot (`v2`: FrequencyDomainPlotV2's `real`), or bucketed when the node asks."""

    POLLED_ONLY = True

    series: SeriesNode
    transform: Transform
    v2: bool = False
    buckets: tuple[int, float | None, float | None] | None = None  # (buckets, min, max frequency)
    max_frequencies: int = 1_000_000  # unbucketed: more frequencies than this (Limits.max_points) refused

    def __post_init__(self) -> None:
        self.held = HeldSeries()

    @property
    def input(self) -> SeriesNode:
        return self.series

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        out: dict[GroupKey, Output] = {}
        what = "frequencyV2" if self.v2 else "frequency"
        for key, s in _group_series(self.series, self.held, envs, what).items():
            x, fs, _ = samples(s.ts, s.values)
            sampling = self.transform.stft.sampling_frequency
            f, a = self.transform.apply(x, sampling if sampling is not None else fs)
            if self.buckets is not None:
                out[key] = frequency_buckets(f, a, *self.buckets)
            elif len(f) > self.max_frequencies:
                raise ComputeError(
                    "TooManyPoints",
                    f"{len(f)} frequencies exceed the limit of {self.max_frequencies}; "
                    "ask for fewer with nfft or summarizationStrategy buckets",
                    {"limit": str(self.max_frequencies)},
                )
            else:
                out[key] = (FrequencyPlotV2 if self.v2 else FrequencyPlot)(f, a)
        return out


@dataclass(frozen=True)
class Bucketing:
    """SpectrogramBucketing, with nominal-api's defaults."""

    max_time: int = 256
    max_frequency: int = 512
    low: float = 0.0
    high: float | None = None  # exclusive; None: up to and including the Nyquist frequency
    time_reduction: str = "MEAN"
    frequency_reduction: str = "MEAN"


def reduce_runs(values: np.ndarray, starts: np.ndarray, how: str, axis: int) -> np.ndarray:
    """Each run of `values` along `axis` beginning at `starts` combined by SpectrogramReduction."""
    counts = np.diff(np.r_[starts, values.shape[axis]])
    shape = [1, 1]
    shape[axis] = len(counts)
    if how == "MAX":
        return np.maximum.reduceat(values, starts, axis=axis)
    if how == "GEOMETRIC_MEAN":
        with np.errstate(divide="ignore"):
            return np.exp(np.add.reduceat(np.log(values), starts, axis=axis) / counts.reshape(shape))
    return np.add.reduceat(values, starts, axis=axis) / counts.reshape(shape)


def spectrogram_grid(
    x: np.ndarray, fs: float, t0: int, stft: Stft, quantity: str, scaling: str | None, bucketing: Bucketing
) -> SpectrogramGrid:
    """See docs/protocol.md: scipy.signal.spectrogram's windows (PSD: density; AMPLITUDE: the
    single-sided amplitude of each window, |X| / sum(w) doubled off 0 Hz and Nyquist), rows of
    consecutive windows and columns of consecutive bins in the band combined (rows first), then
    scaled (default: 10*log10 of a PSD, 20*log10 of an amplitude)."""
    from scipy import signal

    empty = np.empty(0, np.float64)
    if len(x) < 2 or fs <= 0:
        return SpectrogramGrid(empty, empty, np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, 0)))
    args = stft.args(len(x), ("tukey", 0.25), 8)
    nperseg, noverlap = int(args["nperseg"]), int(args["noverlap"])
    if quantity == "AMPLITUDE":
        f, seg_t, sxx = signal.spectrogram(x, fs=fs, scaling="spectrum", mode="magnitude", **args)
        size = int(args["nfft"] or nperseg)
        sxx[1 : (size + 1) // 2, :] *= 2.0
    else:
        f, seg_t, sxx = signal.spectrogram(x, fs=fs, scaling="density", mode="psd", **args)
    f = np.asarray(f, np.float64)
    spacing = float(f[1] - f[0]) if len(f) > 1 else fs
    band = f >= bucketing.low
    if bucketing.high is not None:
        band &= f < bucketing.high
    f, sxx = f[band], np.asarray(sxx, np.float64)[band, :].T  # windows x bins
    if not len(f) or not sxx.shape[0]:
        return SpectrogramGrid(empty, empty, np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, 0)))
    columns = min(bucketing.max_frequency, len(f))
    per_col = math.ceil(len(f) / columns)
    col_starts = np.arange(0, len(f), per_col)
    rows_max = max(1, min(bucketing.max_time, MAX_SPECTROGRAM_CELLS // len(col_starts)))
    windows = sxx.shape[0]
    per_row = math.ceil(windows / rows_max)
    row_starts = np.arange(0, windows, per_row)
    values = reduce_runs(sxx, row_starts, bucketing.time_reduction, 0)
    values = reduce_runs(values, col_starts, bucketing.frequency_reduction, 1)
    scale = scaling or ("MAGNITUDE_DB_20" if quantity == "AMPLITUDE" else "MAGNITUDE_DB_10")
    values = scaled(values, scale)
    # bin k spans [f_k - df/2, f_k + df/2), clipped to [0, fs/2]; a column its bins' span
    lower = np.maximum(f - spacing / 2, 0.0)
    upper = np.minimum(f + spacing / 2, fs / 2)
    col_last = np.r_[col_starts[1:], len(f)] - 1
    edges = np.r_[lower[col_starts], upper[col_last[-1]]]
    centers = (edges[:-1] + edges[1:]) / 2
    step = nperseg - noverlap
    win_first = np.arange(windows) * step  # each window's first sample
    row_last = np.r_[row_starts[1:], windows] - 1
    row_start = t0 + np.round(win_first[row_starts] * NANOS / fs).astype(np.int64)
    row_end = t0 + np.round((win_first[row_last] + nperseg) * NANOS / fs).astype(np.int64)
    del seg_t
    return SpectrogramGrid(centers, edges, row_start, row_end, values)


@dataclass
class SpectrogramChart(OutputNode):
    """`spectrogram`: per group, its series' spectrogram over the period."""

    POLLED_ONLY = True

    series: SeriesNode
    stft: Stft
    quantity: str = "PSD"
    scaling: str | None = None
    bucketing: Bucketing = Bucketing()

    def __post_init__(self) -> None:
        self.held = HeldSeries()

    @property
    def input(self) -> SeriesNode:
        return self.series

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        out: dict[GroupKey, Output] = {}
        for key, s in _group_series(self.series, self.held, envs, "spectrogram").items():
            x, fs, t0 = samples(s.ts, s.values)
            if self.stft.sampling_frequency is not None:
                fs = self.stft.sampling_frequency
            out[key] = spectrogram_grid(x, fs, t0, self.stft, self.quantity, self.scaling, self.bucketing)
        return out


# -- two series: cpsd, nyquist, bode ------------------------------------------------------------------
def paired(
    tx: np.ndarray, x: np.ndarray, ty: np.ndarray, y: np.ndarray, what: str
) -> tuple[np.ndarray, np.ndarray, float]:
    """(x, y, fs): x as `samples` makes it, and y at x's instants by linear interpolation over its own
    timestamps. nominal-api requires "the input and output value arrays to have equal length"
    (Bode without alignment): a pair of different lengths is refused."""
    if len(tx) != len(ty):
        raise ComputeError(
            "InvalidComputation",
            f"'{what}' needs its two series to hold as many points in the period: {len(tx)} and {len(ty)}",
            {"invalidTypes": "", "variant": what},
        )
    keep = np.isfinite(x) & np.isfinite(y)
    tx, x, ty, y = tx[keep], x[keep], ty[keep], y[keep]
    xs, fs, t0 = samples(tx, x)
    if fs <= 0:
        return xs, y.astype(np.float64), fs
    grid = np.linspace(0.0, float(tx[-1] - t0), len(tx)) + float(t0 - ty[0])
    ys = np.interp(grid, (ty - ty[0]).astype(np.float64), y)
    return xs, ys, fs


def aligned(
    tx: np.ndarray, x: np.ndarray, ty: np.ndarray, y: np.ndarray, driver: str, radius_ns: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bode's `alignmentConfiguration`: (the driver's timestamps, x and y at them). The driver is x
    (FIRST, the input) or y (SECOND, the output); the other series is read at each driver timestamp by
    forward fill: its last point at or before it, if no older than the radius. A driver timestamp
    where the other has no such point is left out."""
    td, vd, to, vo = (tx, x, ty, y) if driver == "FIRST" else (ty, y, tx, x)
    if not len(to):
        empty = np.empty(0, np.float64)
        return td[:0], empty, empty
    idx = np.searchsorted(to, td, side="right") - 1
    ok = idx >= 0
    idx = np.where(ok, idx, 0)
    ok &= td - to[idx] <= radius_ns
    driven, other = vd[ok].astype(np.float64), vo[idx[ok]].astype(np.float64)
    return (td[ok], driven, other) if driver == "FIRST" else (td[ok], other, driven)


def cross_spectrum(x: np.ndarray, y: np.ndarray, fs: float, stft: Stft) -> tuple[np.ndarray, np.ndarray]:
    """(frequencies in Hz, Welch's one-sided cross-spectral density of x and y, conj(X) Y)."""
    from scipy import signal

    if len(x) < 2 or fs <= 0:
        return np.empty(0, np.float64), np.empty(0, np.complex128)
    f, pxy = signal.csd(x, y, fs=fs, scaling="density", **stft.args(len(x), "hann", 2))
    return np.asarray(f, np.float64), np.asarray(pxy, np.complex128)


def response_h1(x: np.ndarray, y: np.ndarray, fs: float, stft: Stft) -> tuple[np.ndarray, np.ndarray]:
    """(frequencies in Hz, H(f) = Pxy / Pxx): the frequency response from x (input) to y (output),
    the H1 estimate; a bin where x has no power is NaN."""
    f, pxy = cross_spectrum(x, y, fs, stft)
    if not len(f):
        return f, pxy
    _, pxx = welch_psd(x, fs, stft)
    with np.errstate(divide="ignore", invalid="ignore"):
        return f, np.where(pxx > 0, pxy / pxx, np.nan)


def phase(z: np.ndarray, unwrap: bool, degrees: bool) -> np.ndarray:
    angle = np.angle(z)
    if unwrap:
        finite = np.isfinite(angle)
        angle = angle.copy()
        angle[finite] = np.unwrap(angle[finite])
    return np.degrees(angle) if degrees else angle


@dataclass(frozen=True)
class PairTransform:
    """`frequencyV2` `cpsd` (magnitude and phase of the CSD: a density, rescaled with the frequency
    type), `nyquist` (H(f), real and imaginary, in Hz) or `bode` (|H| and its phase)."""

    method: str  # cpsd, nyquist, bode
    stft: Stft = Stft()
    scaling: str = "MAGNITUDE_DB_10"
    frequency_type: str = "LINEAR"
    unwrap: bool = True
    degrees: bool = False
    alignment: tuple[str, int] | None = None  # Bode's (driver FIRST / SECOND, forward fill radius in ns)


def common(
    tx: np.ndarray, x: np.ndarray, ty: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pairs that are complete: (timestamps, x, timestamps, y), as `paired` takes them, at the
    timestamps both series hold (the first point of each at a timestamp it holds twice)."""
    ts, ix, iy = np.intersect1d(tx, ty, return_indices=True)
    return ts, x[ix], ts, y[iy]


@dataclass
class PairFrequencyChart(OutputNode):
    """`frequencyV2` over two series: per group, FrequencyDomainPlotV2's `magnitudeAndPhase`
    (cpsd, bode) or `complex` (nyquist)."""

    POLLED_ONLY = True

    x: SeriesNode
    y: SeriesNode
    transform: PairTransform
    # Streamed live (`sparkwire.streamPolled`, decision 0082): while the two series hold different
    # counts (between two writes, one channel's points in and the other's not yet), where a poll
    # refuses the period, the transform of the pairs that are complete (the timestamps both hold);
    # once the counts agree, the poll's answer over the same points.
    live: bool = False

    def __post_init__(self) -> None:
        self.bundle = ChartInputs([self.x, self.y])
        self.held = (HeldSeries(), HeldSeries())

    @property
    def input(self) -> ChartInputs:
        return self.bundle

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        t = self.transform
        what = t.method
        xs = _group_series(self.x, self.held[0], envs, what)
        ys = _group_series(self.y, self.held[1], envs, what)
        out: dict[GroupKey, Output] = {}
        for key, sx in xs.items():
            sy = ys[key]
            if t.alignment is None:
                pair = (sx.ts, sx.values, sy.ts, sy.values)
                if self.live and len(sx.ts) != len(sy.ts):
                    pair = common(*pair)
                x, y, fs = paired(*pair, what)
            else:
                ts, ax, ay = aligned(sx.ts, sx.values, sy.ts, sy.values, *t.alignment)
                x, y, fs = paired(ts, ax, ts, ay, what)
            if t.stft.sampling_frequency is not None:
                fs = t.stft.sampling_frequency
            if t.method == "cpsd":
                f, z = cross_spectrum(x, y, fs, t.stft)
                if len(f):
                    f, magnitude = frequency_type(f, np.abs(z), fs, t.frequency_type)
                else:
                    magnitude = np.empty(0, np.float64)
                out[key] = FrequencyMagnitudePhase(
                    f, scaled(magnitude, t.scaling), phase(z, t.unwrap, t.degrees)
                )
                continue
            f, h = response_h1(x, y, fs, t.stft)
            if t.method == "nyquist":
                out[key] = FrequencyComplex(f, h.real.copy(), h.imag.copy())
                continue
            if len(f):  # |H| is a ratio, not a density: only the axis changes
                f = frequency_type(f, np.ones(len(f)), fs, t.frequency_type)[0]
            out[key] = FrequencyMagnitudePhase(f, scaled(np.abs(h), t.scaling), phase(h, t.unwrap, t.degrees))
        return out
