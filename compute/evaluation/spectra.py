"""The results of the frequency-domain roots Nominal only polls (`ComputableNode` `frequency`,
`frequencyV2`, `spectrogram`; evaluators in nodes/frequency.py), each one of nominal-api's
`ComputeNodeResponse` variants (encoded by app/protocol/frames.py). None has an append form:
they are answered whole, to a poll."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _same(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> bool:
    return all(x.shape == y.shape and np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b, strict=True))


@dataclass
class FrequencyPlot:
    """`frequencyDomain` (FrequencyDomainPlot): per frequency in Hz, ascending, its amplitude (an
    FFT's single-sided amplitude, a periodogram's spectral density)."""

    frequencies: np.ndarray  # float64
    amplitudes: np.ndarray  # float64
    kind = "frequencyDomain"
    appendable = False

    def first_change(self, old: FrequencyPlot) -> int | None:
        return None if _same((self.frequencies, self.amplitudes), (old.frequencies, old.amplitudes)) else 0

    def since(self, start: int) -> FrequencyPlot:
        return self

    def __len__(self) -> int:
        return len(self.frequencies)


@dataclass
class FrequencyPlotV2(FrequencyPlot):
    """`frequencyDomainV2`'s `real` (FrequencyDomainPlotV2): the same columns, from `frequencyV2`."""

    kind = "frequencyDomainV2"


@dataclass
class FrequencyBuckets:
    """`bucketedFrequencyDomain` (BucketedFrequencyDomainPlot): consecutive frequency points
    combined, per bucket its frequency span [start, end), centre, min / max / mean amplitude, count,
    and its first and last point (no last point when it holds one)."""

    start: np.ndarray  # float64, inclusive
    end: np.ndarray  # float64, exclusive
    min: np.ndarray
    max: np.ndarray
    mean: np.ndarray
    count: np.ndarray  # int64
    first: np.ndarray  # index of the bucket's first point in `frequencies` / `amplitudes`
    frequencies: np.ndarray  # the points bucketed
    amplitudes: np.ndarray
    kind = "bucketedFrequencyDomain"
    appendable = False

    def first_change(self, old: FrequencyBuckets) -> int | None:
        same = _same(
            (self.frequencies, self.amplitudes, self.first), (old.frequencies, old.amplitudes, old.first)
        )
        return None if same else 0

    def since(self, start: int) -> FrequencyBuckets:
        return self

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class SpectrogramGrid:
    """`spectrogram` (SpectrogramPlot): rows of time buckets [row_start, row_end] in ascending time,
    columns of frequency buckets [edges[c], edges[c + 1]) with their centres, one value per cell."""

    centers: np.ndarray  # float64, Hz
    edges: np.ndarray  # float64, Hz, len(centers) + 1
    row_start: np.ndarray  # int64, ns
    row_end: np.ndarray  # int64, ns
    values: np.ndarray  # float64, rows x columns
    kind = "spectrogram"
    appendable = False

    def first_change(self, old: SpectrogramGrid) -> int | None:
        same = _same(
            (self.edges, self.row_start, self.row_end, self.values),
            (old.edges, old.row_start, old.row_end, old.values),
        )
        return None if same else 0

    def since(self, start: int) -> SpectrogramGrid:
        return self

    def __len__(self) -> int:
        return len(self.row_start)


@dataclass
class FrequencyMagnitudePhase:
    """`frequencyDomainV2`'s `magnitudeAndPhase` (FrequencyDomainPlotMagnitudeAndPhase): per
    frequency, a magnitude and a phase (cpsd, bode)."""

    frequencies: np.ndarray
    magnitudes: np.ndarray
    phases: np.ndarray
    kind = "frequencyDomainV2"
    appendable = False

    def first_change(self, old: FrequencyMagnitudePhase) -> int | None:
        same = _same(
            (self.frequencies, self.magnitudes, self.phases), (old.frequencies, old.magnitudes, old.phases)
        )
        return None if same else 0

    def since(self, start: int) -> FrequencyMagnitudePhase:
        return self

    def __len__(self) -> int:
        return len(self.frequencies)


@dataclass
class FrequencyComplex:
    """`frequencyDomainV2`'s `complex` (FrequencyDomainPlotComplex): per frequency, a complex value's
    real and imaginary parts (nyquist)."""

    frequencies: np.ndarray
    real: np.ndarray
    imaginary: np.ndarray
    kind = "frequencyDomainV2"
    appendable = False

    def first_change(self, old: FrequencyComplex) -> int | None:
        same = _same(
            (self.frequencies, self.real, self.imaginary), (old.frequencies, old.real, old.imaginary)
        )
        return None if same else 0

    def since(self, start: int) -> FrequencyComplex:
        return self

    def __len__(self) -> int:
        return len(self.frequencies)


# every frequency-domain result (app/protocol/frames.py encodes them)
Spectrum = FrequencyPlot | FrequencyBuckets | SpectrogramGrid | FrequencyMagnitudePhase | FrequencyComplex
