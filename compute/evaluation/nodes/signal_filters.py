"""`NumericSeries.signalFilter`, which Nominal computes only when polled. nominal-api's
`SignalFilterSeries`: "IIR-based signal filtering ... low-pass, high-pass, band-pass, and band-stop
filters. Currently supports variable-order bidirectional Butterworth filters, with fixed-size
padding based on SciPy output"; its `order` "is effectively doubled for bidirectional filters".

So: scipy.signal.butter(order, cutoffs, btype, fs=fs, output="sos") applied forwards and backwards
by scipy.signal.sosfiltfilt with SciPy's default padding (odd extension of
3 * (2 * sections + 1 - ...) points, SciPy's fixed-size rule): zero phase, the squared magnitude
response of the Butterworth filter. The points are taken as equally spaced at `fs` (the series'
median sampling rate when `samplingFrequency` is absent); the output has the input's timestamps.

scipy.signal is imported inside the functions that use it: every server imports this module (the
compile registry builds every node), an edge too, which never evaluates one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import EvalEnv, SeriesNode, empty_numeric, numeric
from compute.evaluation.results import NumericPoints

BTYPES = {"lowPass": "lowpass", "highPass": "highpass", "bandPass": "bandpass", "bandStop": "bandstop"}
MAX_ORDER = 32  # a Butterworth filter of higher order is numerically no better, even in sections


def filter_error(why: str) -> ComputeError:
    return ComputeError(
        "InvalidComputation", f"signalFilter: {why}", {"invalidTypes": "", "variant": "signalFilter"}
    )


def sampling_frequency(ts: np.ndarray) -> float:
    """The series' sampling rate in Hz: one over its median interval between points."""
    if len(ts) < 2:
        raise filter_error("a sampling frequency needs at least 2 points; set samplingFrequency")
    median = float(np.median(np.diff(ts)))
    if median <= 0:
        raise filter_error("the points' median interval is 0; set samplingFrequency")
    return 1e9 / median


def butterworth(btype: str, cutoffs: tuple[float, ...], order: int, fs: float) -> np.ndarray:
    """The filter's second-order sections (`btype` scipy's name), each cutoff inside (0, fs / 2)."""
    from scipy import signal

    nyquist = fs / 2
    for f in cutoffs:
        if not 0 < f < nyquist:
            raise filter_error(
                f"cutoff frequency {f} Hz must lie strictly between 0 and the Nyquist frequency "
                f"{nyquist:g} Hz (sampling frequency {fs:g} Hz)"
            )
    if len(cutoffs) == 2 and not cutoffs[0] < cutoffs[1]:
        raise filter_error(f"the band's low frequency {cutoffs[0]} Hz must be below its high {cutoffs[1]} Hz")
    wn = cutoffs[0] if len(cutoffs) == 1 else list(cutoffs)
    sos: np.ndarray = signal.butter(order, wn, btype=btype, fs=fs, output="sos")
    return sos


def padding(sos: np.ndarray) -> int:
    """The points sosfiltfilt's default padding extends each side with (SciPy's rule)."""
    return 3 * (2 * len(sos) + 1 - min(int((sos[:, 2] == 0).sum()), int((sos[:, 5] == 0).sum())))


def filtfilt(sos: np.ndarray, values: np.ndarray) -> np.ndarray:
    """sosfiltfilt with SciPy's default padding, which needs more points than its pad."""
    from scipy import signal

    pad = padding(sos)
    if len(values) <= pad:
        raise filter_error(
            f"{len(values)} point(s) in the period; a filter of {len(sos)} second-order section(s) "
            f"pads {pad} points on each side and needs more than that"
        )
    out: np.ndarray = signal.sosfiltfilt(sos, values)
    return out


@dataclass
class SignalFilter(SeriesNode):
    """The input's finite points inside the window, filtered; built only by a poll (POLLED_ONLY):
    evaluated once, whole, over the period, so a filter never sees a part of its input."""

    POLLED_ONLY = True

    input: SeriesNode
    btype: str  # scipy.signal's: lowpass, highpass, bandpass, bandstop
    cutoffs: tuple[float, ...]  # Hz
    order: int
    fs: float | None = None  # samplingFrequency (Hz); None: the series' median rate
    # Streamed live (`sparkwire.streamPolled`): a window holding too few points to filter yet (no
    # median rate, no more points than the padding) is an empty series until enough arrive, where
    # a poll refuses it; with enough points the output is the poll's.
    live: bool = False

    def children(self) -> tuple[SeriesNode]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        x = numeric(self.input.evaluate(env), "signalFilter").since(env.window_start)
        finite = np.isfinite(x.values)
        ts, values = x.ts[finite], x.values[finite]
        if not len(ts):
            return empty_numeric()
        if self.live and self.fs is None and (len(ts) < 2 or np.median(np.diff(ts)) <= 0):
            return empty_numeric()  # no rate yet
        fs = self.fs if self.fs is not None else sampling_frequency(ts)
        sos = butterworth(self.btype, self.cutoffs, self.order, fs)
        if self.live and len(ts) <= padding(sos):
            return empty_numeric()  # fewer points than the padding yet
        return NumericPoints(ts, filtfilt(sos, values))
