"""Builders of the frequency-domain roots Nominal only polls (`ComputableNode` `frequency`,
`frequencyV2`, `spectrogram`; evaluators in nodes/frequency.py). Registered with `polls`: built
when Nominal's ComputeService polls them; a live subscription keeps Nominal's refusal
(`PollingOnlyComputation` `FREQUENCY_DOMAIN`, builders/refusals.py) unless it asks
`sparkwire.streamPolled` (builders/streamed.py): the two-series transforms are then built `live`."""

from __future__ import annotations

import math
from typing import Any

from compute.evaluation.compiler.builder import Builder, double
from compute.evaluation.compiler.helpers import one_of, radius
from compute.evaluation.compiler.registry import polls
from compute.evaluation.errors import MalformedNode, refuse
from compute.evaluation.nodes.frequency import (
    WINDOWS,
    Bucketing,
    FrequencyDomainChart,
    PairFrequencyChart,
    PairTransform,
    SpectrogramChart,
    Stft,
    Transform,
)

Json = Any
B = Builder

PERIODOGRAM_WINDOWS = {f"WELCH_{name}": name for name in WINDOWS}  # PeriodogramMethod -> FftWindow
SCALINGS = ("LINEAR", "MAGNITUDE_DB_10", "MAGNITUDE_DB_20")
FREQUENCY_TYPES = ("LINEAR", "ANGULAR", "NORMALIZED_LINEAR", "NORMALIZED_ANGULAR")


def _enum(value: Json, allowed: tuple[str, ...] | dict[str, str], what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise MalformedNode(f"{what}: expected one of {', '.join(allowed)}, got {value!r}")
    return value


def _positive(value: Json, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedNode(f"{what} must be an integer")
    if value < 1:
        raise refuse(what.split(".")[0], what, f"must be at least 1, got {value}")
    return value


def _stft(value: Json, what: str) -> Stft:
    if value is None:
        return Stft()
    o = Builder.obj(value, f"{what}.stftOptions")
    window = o.get("window")
    symmetry = o.get("windowSymmetry")
    fs = o.get("samplingFrequency")
    nperseg = None if o.get("nperseg") is None else _positive(o["nperseg"], f"{what}.stftOptions.nperseg")
    noverlap = o.get("noverlap")
    if noverlap is not None and (not isinstance(noverlap, int) or isinstance(noverlap, bool) or noverlap < 0):
        raise MalformedNode(f"{what}.stftOptions.noverlap must be a non-negative integer")
    if noverlap is not None and nperseg is not None and noverlap >= nperseg:
        raise refuse(what, "stftOptions.noverlap", f"must be less than nperseg ({nperseg}), got {noverlap}")
    nfft = None if o.get("nfft") is None else _positive(o["nfft"], f"{what}.stftOptions.nfft")
    if nfft is not None and nperseg is not None and nfft < nperseg:
        raise refuse(what, "stftOptions.nfft", f"must be at least nperseg ({nperseg}), got {nfft}")
    sampling = None
    if fs is not None:
        sampling = double(fs)
        if not (sampling > 0 and math.isfinite(sampling)):
            raise refuse(what, "stftOptions.samplingFrequency", f"must be a positive number, got {fs}")
    return Stft(
        window=None if window is None else _enum(window, WINDOWS, f"{what}.stftOptions.window"),
        symmetric=symmetry is not None
        and _enum(symmetry, ("DFT_EVEN", "SYMMETRIC"), f"{what}.stftOptions.windowSymmetry") == "SYMMETRIC",
        sampling_frequency=sampling,
        nperseg=nperseg,
        noverlap=noverlap,
        nfft=nfft,
        detrend=None
        if o.get("detrend") is None
        else _enum(o["detrend"], ("CONSTANT", "LINEAR", "NO_OP"), f"{what}.stftOptions.detrend"),
    )


def _summarization(value: Json, what: str) -> tuple[int, float | None, float | None] | None:
    """FrequencySummarizationStrategy `buckets`: (count, min frequency, max frequency)."""
    if value is None:
        return None
    _, body = one_of(value, "FrequencySummarizationStrategy", ("buckets",))
    o = Builder.obj(body, "FrequencyDecimateWithBuckets")
    count = _positive(
        Builder.get(o, "buckets", "FrequencyDecimateWithBuckets"), f"{what}.summarizationStrategy.buckets"
    )
    low = None if o.get("minFrequency") is None else double(o["minFrequency"])
    high = None if o.get("maxFrequency") is None else double(o["maxFrequency"])
    return count, low, high


def _fft(b: B, value: Json, v2: bool) -> FrequencyDomainChart:
    what = "frequencyV2.fft" if v2 else "frequency.fft"
    o = b.obj(value, "Fft")
    series = b.timed(b.numeric(b.get(o, "input", "Fft")), what)
    window = "RECT" if o.get("window") is None else _enum(o["window"], WINDOWS, f"{what}.window")
    nfft = None if o.get("nfft") is None else _positive(o["nfft"], f"{what}.nfft")
    strategy = _summarization(o.get("summarizationStrategy"), what)
    transform = Transform("fft", window=window, nfft=nfft)
    return FrequencyDomainChart(series, transform, v2, strategy, b.limits.max_points)


@polls("ComputableNode", "frequency")
def frequency(b: B, value: Json) -> FrequencyDomainChart:
    kind, inner = one_of(value, "FrequencyDomain", ("fft", "periodogram"))
    if kind == "fft":
        return _fft(b, inner, v2=False)
    o = b.obj(inner, "Periodogram")
    series = b.timed(b.numeric(b.get(o, "input", "Periodogram")), "frequency.periodogram")
    method = _enum(b.get(o, "method", "Periodogram"), PERIODOGRAM_WINDOWS, "frequency.periodogram.method")
    transform = Transform("periodogram", window=PERIODOGRAM_WINDOWS[method])
    return FrequencyDomainChart(series, transform, max_frequencies=b.limits.max_points)


@polls("ComputableNode", "frequencyV2")
def frequency_v2(b: B, value: Json) -> FrequencyDomainChart | PairFrequencyChart:
    kind, inner = one_of(value, "FrequencyDomainV2", ("fft", "psd", "cpsd", "nyquist", "bode"))
    if kind == "fft":
        return _fft(b, inner, v2=True)
    if kind in ("cpsd", "nyquist", "bode"):
        return _pair(b, kind, inner)
    o = b.obj(inner, "Psd")
    series = b.timed(b.numeric(b.get(o, "input", "Psd")), "frequencyV2.psd")
    scaling = (
        "MAGNITUDE_DB_10"
        if o.get("magnitudeScaling") is None
        else _enum(o["magnitudeScaling"], SCALINGS, "psd.magnitudeScaling")
    )
    ftype = (
        "LINEAR"
        if o.get("outputFrequencyType") is None
        else _enum(o["outputFrequencyType"], FREQUENCY_TYPES, "psd.outputFrequencyType")
    )
    transform = Transform(
        "psd", stft=_stft(o.get("stftOptions"), "psd"), scaling=scaling, frequency_type=ftype
    )
    strategy = _summarization(o.get("summarizationStrategy"), "psd")
    return FrequencyDomainChart(series, transform, True, strategy, b.limits.max_points)


def _pair(b: B, kind: str, value: Json) -> PairFrequencyChart:
    """cpsd (`x`, `y`), nyquist and bode (`input`, `output`): the second series read at the first's
    instants (nodes/frequency.py `paired`)."""
    what = f"frequencyV2.{kind}"
    o = b.obj(value, kind)
    first, second = ("x", "y") if kind == "cpsd" else ("input", "output")
    x = b.timed(b.numeric(b.get(o, first, kind)), what)
    y = b.timed(b.numeric(b.get(o, second, kind)), what)
    alignment = None
    if o.get("alignmentConfiguration") is not None:
        if kind != "bode":  # nominal-api's Cpsd and Nyquist have no such field
            raise refuse(
                what,
                "alignmentConfiguration",
                f"nominal-api's {kind} has no alignmentConfiguration (only bode aligns); without it "
                "the two series must hold as many points",
            )
        ac = b.obj(o["alignmentConfiguration"], "AlignmentConfiguration")
        driver = _enum(
            b.get(ac, "driverSeries", "AlignmentConfiguration"),
            ("FIRST", "SECOND"),
            f"{what}.alignmentConfiguration.driverSeries",
        )
        b.get(ac, "interpolationConfiguration", "AlignmentConfiguration")
        alignment = (driver, radius(b, ac, what))
    default_scaling = "MAGNITUDE_DB_20" if kind == "bode" else "MAGNITUDE_DB_10"
    scaling = default_scaling
    if o.get("magnitudeScaling") is not None:
        scaling = _enum(o["magnitudeScaling"], SCALINGS, f"{what}.magnitudeScaling")
    ftype = "LINEAR"
    if o.get("outputFrequencyType") is not None:
        ftype = _enum(o["outputFrequencyType"], FREQUENCY_TYPES, f"{what}.outputFrequencyType")
    unwrap = o.get("unwrapPhase")
    if unwrap is not None and not isinstance(unwrap, bool):
        raise MalformedNode(f"{what}.unwrapPhase must be a boolean")
    degrees = o.get("outputPhaseUnit") is not None and (
        _enum(o["outputPhaseUnit"], ("RADIANS", "DEGREES"), f"{what}.outputPhaseUnit") == "DEGREES"
    )
    transform = PairTransform(
        kind,
        stft=_stft(o.get("stftOptions"), what),
        scaling=scaling,
        frequency_type=ftype,
        unwrap=True if unwrap is None else unwrap,
        degrees=degrees,
        alignment=alignment,
    )
    return PairFrequencyChart(x, y, transform, live=b.streamed)


REDUCTIONS = ("MEAN", "MAX", "GEOMETRIC_MEAN")


@polls("ComputableNode", "spectrogram")
def spectrogram(b: B, value: Json) -> SpectrogramChart:
    o = b.obj(value, "Spectrogram")
    series = b.timed(b.numeric(b.get(o, "input", "Spectrogram")), "spectrogram")
    quantity = (
        "PSD"
        if o.get("quantity") is None
        else _enum(o["quantity"], ("PSD", "AMPLITUDE"), "spectrogram.quantity")
    )
    scaling = (
        None
        if o.get("magnitudeScaling") is None
        else _enum(o["magnitudeScaling"], SCALINGS, "spectrogram.magnitudeScaling")
    )
    bucketing = Bucketing()
    if o.get("bucketing") is not None:
        bo = b.obj(o["bucketing"], "SpectrogramBucketing")
        defaults = Bucketing()
        low = 0.0 if bo.get("minFrequency") is None else double(bo["minFrequency"])
        high = None if bo.get("maxFrequency") is None else double(bo["maxFrequency"])
        if not (low >= 0 and math.isfinite(low)) or (high is not None and not high > low):
            # "Invalid values fail with `InvalidExpression`" (SpectrogramBucketing)
            raise refuse("spectrogram", "bucketing", f"the band [{low}, {high}) is not a band of frequencies")
        bucketing = Bucketing(
            max_time=defaults.max_time
            if bo.get("maxTimeBuckets") is None
            else _positive(bo["maxTimeBuckets"], "spectrogram.bucketing.maxTimeBuckets"),
            max_frequency=defaults.max_frequency
            if bo.get("maxFrequencyBuckets") is None
            else _positive(bo["maxFrequencyBuckets"], "spectrogram.bucketing.maxFrequencyBuckets"),
            low=low,
            high=high,
            time_reduction="MEAN"
            if bo.get("timeReduction") is None
            else _enum(bo["timeReduction"], REDUCTIONS, "spectrogram.bucketing.timeReduction"),
            frequency_reduction="MEAN"
            if bo.get("frequencyReduction") is None
            else _enum(bo["frequencyReduction"], REDUCTIONS, "spectrogram.bucketing.frequencyReduction"),
        )
    return SpectrogramChart(series, _stft(o.get("stftOptions"), "spectrogram"), quantity, scaling, bucketing)
