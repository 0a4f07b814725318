"""Curve fits (`curve`, `curveV2`) and signal filters (`signalFilter`), which Nominal only polls,
compiled as the ComputeService compiles them (`polled=True`) and evaluated over a period, against
references from the mathematics: a line's slope and intercept with R^2 = 1, a quadratic, an
exponential, a logarithm and a power law recovered exactly; a noisy line's least squares from the
normal equations (slope cov(x, y) / var(x), R^2 the squared correlation); a zero-phase Butterworth
filter's gain |H(f)|^2 (the filter run forwards and backwards) from the bilinear transform's
prewarped frequency, 1 / (1 + (tan(pi f / fs) / tan(pi fc / fs))^(2N)) for a low-pass of order N,
which is 1/2 at each cutoff. nominal-api's docstrings define the results (docs/protocol.md)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Rows
from compute.evaluation.curve_fit_results import CurveFitOutput
from compute.evaluation.errors import ComputeError
from compute.evaluation.polled import evaluate_period
from compute.evaluation.results import NumericPoints
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests import node_json as n

pytestmark = pytest.mark.unit

S = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * S
RID = "ri.sparkwire.test.dataset.fits"
Json = dict[str, Any]


def ts_json(t: int) -> Json:
    return n.literal({"seconds": t // S, "nanos": t % S})


def polled(node: Json, channels: dict[str, list[tuple[int, float]]], start: int, end: int) -> Any:
    """`node` compiled as a poll compiles it over [start, end), evaluated over the channels' points."""
    plan = compile_plan(node, end - start, {}, Limits(), ResultOptions(), polled=True)
    known = [
        SeriesInfo(i, SeriesKey.of(RID, name, {}), SeriesKind.NUMERIC) for i, name in enumerate(channels)
    ]
    points = list(channels.values())

    def read(ids: list[int], lo: int, hi: int) -> dict[int, Rows]:
        out = {}
        for i in ids:
            kept = [(t, v) for t, v in points[i] if lo <= t <= hi]
            ts = np.array([t for t, _ in kept], np.int64)
            out[i] = Rows(
                np.arange(len(kept), dtype=np.int64), ts, np.array([v for _, v in kept], np.float64)
            )
        return out

    return evaluate_period(plan, known, read, end)[()]


def time_variable(unit: str | None = None) -> Json:
    return n.union("time", {} if unit is None else {"timeUnit": unit})


def series_variable(name: str, low: float | None = None, high: float | None = None) -> Json:
    body: Json = {"series": n.channel(RID, name)}
    if low is not None or high is not None:
        bounds: Json = {}
        if low is not None:
            bounds["min"] = n.literal(low)
        if high is not None:
            bounds["max"] = n.literal(high)
        body["boundsConfig"] = bounds
    return body


def curve_v2(target: Json, curve: Json, start: int, end: int) -> Json:
    return n.union(
        "curveV2",
        {
            "target": n.union("numeric", target),
            "fitRange": {"startTime": ts_json(start), "endTime": ts_json(end)},
            "curveToFit": curve,
        },
    )


def polynomial(x: Json, degree: int, intercept: float | None = None) -> Json:
    body: Json = {"independentVariable": x, "degree": n.literal(degree)}
    if intercept is not None:
        body["intercept"] = n.literal(intercept)
    return n.union("polynomial", body)


def built_in(kind: str, x: Json) -> Json:
    return n.union(kind, {"independentVariable": x})


def fit_of(node: Json, channels: dict[str, list[tuple[int, float]]], start: int, end: int) -> CurveFitOutput:
    out = polled(node, channels, start, end)
    assert isinstance(out, CurveFitOutput)
    return out


def assert_exact(out: CurveFitOutput, curve: str, coefficients: list[float], count: int) -> None:
    assert out.curve == curve
    assert list(out.coefficients) == pytest.approx(coefficients, rel=1e-9, abs=1e-9)
    assert out.r2 == pytest.approx(1.0, abs=1e-12)
    for error in (out.mae, out.mse, out.rmse, out.max_absolute_error):
        assert error == pytest.approx(0.0, abs=1e-9)
    assert out.sample_count == count


# -- curve fits ------------------------------------------------------------------------------------
def test_a_line_against_time_returns_its_slope_and_intercept_with_r2_one() -> None:
    # y = 3 t - 2, t in seconds since the first point, a point every 500 ms
    line = [(T0 + i * 500 * MS, 3.0 * (i * 0.5) - 2.0) for i in range(40)]
    end = T0 + 20 * S
    out = fit_of(
        curve_v2({"series": n.channel(RID, "y")}, polynomial(time_variable(), 1), T0, end),
        {"y": line},
        T0,
        end,
    )
    assert_exact(out, "polynomial", [-2.0, 3.0], 40)
    assert out.v2
    # the same line in milliseconds: slope 3 / 1000 per ms
    ms = fit_of(
        curve_v2({"series": n.channel(RID, "y")}, polynomial(time_variable("MILLISECONDS"), 1), T0, end),
        {"y": line},
        T0,
        end,
    )
    assert_exact(ms, "polynomial", [-2.0, 0.003], 40)


def test_a_quadratic_against_another_series() -> None:
    # y = 1 + 2 x - 0.5 x^2 with x a second channel sampled at the same times
    xs = [(T0 + i * 100 * MS, -3.0 + 0.25 * i) for i in range(30)]
    ys = [(t, 1.0 + 2.0 * x - 0.5 * x * x) for t, x in xs]
    end = T0 + 3 * S
    node = curve_v2(
        {"series": n.channel(RID, "y")}, polynomial(n.union("numeric", series_variable("x")), 2), T0, end
    )
    assert_exact(fit_of(node, {"x": xs, "y": ys}, T0, end), "polynomial", [1.0, 2.0, -0.5], 30)


def test_an_exponential_a_logarithm_and_a_power_law_recovered() -> None:
    xs = [(T0 + i * 100 * MS, 0.5 + 0.2 * i) for i in range(25)]
    end = T0 + 3 * S
    x = n.union("numeric", series_variable("x"))
    cases = {
        "exponential": ([(t, 2.0 * math.exp(0.3 * v)) for t, v in xs], [2.0, 0.3]),  # y = a e^(b x)
        "logarithmic": ([(t, 4.0 * math.log(v) + 1.0) for t, v in xs], [4.0, 1.0]),  # y = a ln(x) + b
        "power": ([(t, 1.5 * v**2.5) for t, v in xs], [1.5, 2.5]),  # y = a x^b
    }
    for kind, (ys, want) in cases.items():
        node = curve_v2({"series": n.channel(RID, "y")}, built_in(kind, x), T0, end)
        assert_exact(fit_of(node, {"x": xs, "y": ys}, T0, end), kind, want, 25)


def test_a_noisy_line_is_the_least_squares_line_of_the_normal_equations() -> None:
    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 10.0, 200)
    y = 1.5 * x + 4.0 + rng.normal(0.0, 2.0, len(x))
    xs = [(T0 + i * 10 * MS, float(v)) for i, v in enumerate(x)]
    ys = [(T0 + i * 10 * MS, float(v)) for i, v in enumerate(y)]
    end = T0 + 2 * S
    node = curve_v2(
        {"series": n.channel(RID, "y")}, polynomial(n.union("numeric", series_variable("x")), 1), T0, end
    )
    out = fit_of(node, {"x": xs, "y": ys}, T0, end)
    slope = float(np.sum((x - x.mean()) * (y - y.mean())) / np.sum((x - x.mean()) ** 2))
    intercept = float(y.mean() - slope * x.mean())
    residuals = y - (intercept + slope * x)
    assert list(out.coefficients) == pytest.approx([intercept, slope], rel=1e-9)
    assert out.r2 == pytest.approx(float(np.corrcoef(x, y)[0, 1] ** 2), rel=1e-9)
    assert out.mae == pytest.approx(float(np.mean(np.abs(residuals))), rel=1e-9)
    assert out.mse == pytest.approx(float(np.mean(residuals**2)), rel=1e-9)
    assert out.rmse == pytest.approx(math.sqrt(float(np.mean(residuals**2))), rel=1e-9)
    assert out.max_absolute_error == pytest.approx(float(np.max(np.abs(residuals))), rel=1e-9)
    # a fixed intercept c: the slope minimizing sum (y - c - b x)^2 is sum x (y - c) / sum x^2
    fixed = curve_v2(
        {"series": n.channel(RID, "y")}, polynomial(n.union("numeric", series_variable("x")), 1, 0.0), T0, end
    )
    through_origin = fit_of(fixed, {"x": xs, "y": ys}, T0, end)
    assert list(through_origin.coefficients) == pytest.approx(
        [0.0, float(np.sum(x * y) / np.sum(x * x))], rel=1e-9
    )


def test_only_the_points_in_the_fit_range_and_the_bounds_are_fit() -> None:
    # a line y = 2 t between 2 s and 6 s, nonsense outside it and above y = 11
    pts = [(T0 + i * 100 * MS, 2.0 * (i * 0.1 - 2.0) if 20 <= i <= 60 else 1e6) for i in range(100)]
    end = T0 + 10 * S
    node = curve_v2(
        {"series": n.channel(RID, "y"), "boundsConfig": {"max": n.literal(11.0)}},
        polynomial(time_variable(), 1),
        T0 + 2 * S,
        T0 + 6 * S,
    )
    # 41 points from 2 s to 6 s inclusive; y <= 11 keeps all of them (y = 0 ... 8), x from the first
    assert_exact(fit_of(node, {"y": pts}, T0, end), "polynomial", [0.0, 2.0], 41)
    node["curveV2"]["target"]["numeric"]["boundsConfig"] = {"max": n.literal(4.0)}  # y <= 4: 2 s ... 4 s
    assert_exact(fit_of(node, {"y": pts}, T0, end), "polynomial", [0.0, 2.0], 21)


def test_the_deprecated_curve_fits_a_time_series_and_a_scatter() -> None:
    line = [(T0 + i * S, 5.0 - 0.5 * i) for i in range(10)]
    end = T0 + 10 * S
    options = {"startTime": ts_json(T0), "endTime": ts_json(end)}
    node = n.union(
        "curve",
        {
            "curveFitPlotType": n.union("timeSeries", {"series": n.channel(RID, "y"), "options": {}}),
            "curveFitDetails": n.union("polynomial", {"degree": n.literal(1)}),
            "curveFitOptions": options,
        },
    )
    out = fit_of(node, {"y": line}, T0, end)
    assert_exact(out, "polynomial", [5.0, -0.5], 10)
    assert not out.v2
    xs = [(T0 + i * S, 1.0 + i) for i in range(10)]
    ys = [(t, 3.0 * math.exp(-0.2 * x)) for t, x in xs]
    scatter = n.union(
        "curve",
        {
            "curveFitPlotType": n.union(
                "scatter",
                {
                    "scatter": {"x": n.channel(RID, "x"), "y": n.channel(RID, "y")},
                    "options": {"maxX": n.literal(5.0)},
                },
            ),
            "curveFitDetails": n.union("exponential", {}),
            "curveFitOptions": options,
        },
    )
    assert_exact(fit_of(scatter, {"x": xs, "y": ys}, T0, end), "exponential", [3.0, -0.2], 5)


def custom(formula: str, variables: Json, parameters: dict[str, float]) -> Json:
    return n.union(
        "custom",
        {
            "formula": n.literal(formula),
            "variables": variables,
            "parameters": {k: n.literal(v) for k, v in parameters.items()},
        },
    )


def test_a_custom_formula_recovers_its_parameters() -> None:
    # linear in its parameters: y = 2 x + 3 sin(x) exactly, from a = b = 1
    xs = [(T0 + i * 100 * MS, 0.3 * i) for i in range(40)]
    ys = [(t, 2.0 * x + 3.0 * math.sin(x)) for t, x in xs]
    end = T0 + 4 * S
    x = n.union("numeric", series_variable("x"))
    node = curve_v2(
        {"series": n.channel(RID, "y")}, custom("a * x + b * sin(x)", {"x": x}, {"a": 1.0, "b": 1.0}), T0, end
    )
    out = fit_of(node, {"x": xs, "y": ys}, T0, end)
    assert out.curve == "custom" and out.converged and out.iterations >= 1
    assert out.parameters == pytest.approx({"a": 2.0, "b": 3.0}, rel=1e-7)
    assert out.r2 == pytest.approx(1.0, abs=1e-12) and out.sample_count == 40
    # nonlinear: y = 5 e^(-t / 2) + 1 against relative time, from A = 1, tau = 1, c = 0
    decay = [(T0 + i * 100 * MS, 5.0 * math.exp(-(i * 0.1) / 2.0) + 1.0) for i in range(60)]
    formula = custom("A * exp(-t / tau) + c", {"t": time_variable()}, {"A": 1.0, "tau": 1.0, "c": 0.0})
    out = fit_of(
        curve_v2({"series": n.channel(RID, "y")}, formula, T0, T0 + 6 * S), {"y": decay}, T0, T0 + 6 * S
    )
    assert out.converged
    assert out.parameters == pytest.approx({"A": 5.0, "tau": 2.0, "c": 1.0}, rel=1e-6)


def test_a_custom_line_through_noise_is_the_normal_equations_least_squares() -> None:
    rng = np.random.default_rng(11)
    x = np.linspace(-5.0, 5.0, 150)
    y = -0.7 * x + 2.0 + rng.normal(0.0, 0.5, len(x))
    xs = [(T0 + i * 10 * MS, float(v)) for i, v in enumerate(x)]
    ys = [(T0 + i * 10 * MS, float(v)) for i, v in enumerate(y)]
    end = T0 + 2 * S
    node = curve_v2(
        {"series": n.channel(RID, "y")},
        custom("m * x + q", {"x": n.union("numeric", series_variable("x"))}, {"m": 0.0, "q": 0.0}),
        T0,
        end,
    )
    out = fit_of(node, {"x": xs, "y": ys}, T0, end)
    slope = float(np.sum((x - x.mean()) * (y - y.mean())) / np.sum((x - x.mean()) ** 2))
    assert out.parameters == pytest.approx({"m": slope, "q": float(y.mean() - slope * x.mean())}, rel=1e-6)
    assert out.r2 == pytest.approx(float(np.corrcoef(x, y)[0, 1] ** 2), rel=1e-6)


def test_a_formula_outside_the_expression_language_is_refused_by_name() -> None:
    end = T0 + 10 * S
    node = curve_v2(
        {"series": n.channel(RID, "y")}, custom("a * gamma(t)", {"t": time_variable()}, {"a": 1.0}), T0, end
    )
    with pytest.raises(ComputeError) as err:
        polled(node, {"y": [(T0, 1.0), (T0 + S, 2.0)]}, T0, end)
    assert err.value.params.get("field") == "formula"


def test_a_fit_without_enough_points_is_refused_by_name() -> None:
    end = T0 + 10 * S
    node = curve_v2({"series": n.channel(RID, "y")}, polynomial(time_variable(), 2), T0, end)
    with pytest.raises(ComputeError) as err:
        polled(node, {"y": [(T0, 1.0), (T0 + S, 2.0)]}, T0, end)
    assert err.value.name == "InvalidComputation" and "needs at least 3" in err.value.message


def test_curve_fits_and_filters_are_refused_live_with_nominals_type() -> None:
    end = T0 + 10 * S
    fit = curve_v2({"series": n.channel(RID, "y")}, polynomial(time_variable(), 1), T0, end)
    flt = n.series(n.numeric_series(low_pass(n.channel(RID, "y"), 4, 50.0)))
    for node, kind in ((fit, "CURVE_FITTING"), (flt, "SIGNAL_FILTER")):
        with pytest.raises(ComputeError) as err:
            compile_plan(node, 10 * S, {}, Limits(), ResultOptions())
        assert err.value.name == "PollingOnlyComputation"
        assert err.value.params["pollingOnlyTypes"] == kind


# -- signal filters --------------------------------------------------------------------------------
def low_pass(x: Json, order: int, cutoff: float, fs: float | None = None) -> Json:
    return configured(x, order, n.union("lowPass", {"cutoffFrequency": n.literal(cutoff)}), fs)


def configured(x: Json, order: int, configuration: Json, fs: float | None = None) -> Json:
    body: Json = {"input": x, "signalFilterConfiguration": configuration, "order": n.literal(order)}
    if fs is not None:
        body["samplingFrequency"] = n.literal(fs)
    return n.union("signalFilter", body)


def zero_phase_gain(f: float, fc: float, fs: float, order: int, high: bool = False) -> float:
    """|H(f)|^2 of a digital Butterworth filter (bilinear transform, prewarped at fc)."""
    ratio = math.tan(math.pi * f / fs) / math.tan(math.pi * fc / fs)
    return 1.0 / (1.0 + (1.0 / ratio if high else ratio) ** (2 * order))


FS = 1000.0  # Hz: a point every ms


def sines(*components: tuple[float, float]) -> list[tuple[int, float]]:
    """2 s of sum(amplitude * sin(2 pi f t)) sampled at FS."""
    t = np.arange(2000) / FS
    y = sum(a * np.sin(2 * np.pi * f * t) for f, a in components)
    return [(T0 + i * MS, float(v)) for i, v in enumerate(np.asarray(y))]


def amplitude_and_phase(out: NumericPoints, f: float) -> tuple[float, float]:
    """The least-squares amplitude and phase of the f Hz sine in the middle second (whole periods)."""
    t = (out.ts - T0) / 1e9
    middle = (t >= 0.5) & (t < 1.5)
    basis = np.column_stack([np.sin(2 * np.pi * f * t[middle]), np.cos(2 * np.pi * f * t[middle])])
    (s, c), *_ = np.linalg.lstsq(basis, out.values[middle], rcond=None)
    return math.hypot(s, c), math.atan2(c, s)


def filtered(node: Json, pts: list[tuple[int, float]]) -> NumericPoints:
    out = polled(n.series(n.numeric_series(node), buckets=5000), {"x": pts}, T0, T0 + 2 * S)
    assert isinstance(out, NumericPoints)
    assert out.ts.tolist() == [t for t, _ in pts]  # the input's timestamps
    return out


def test_a_low_pass_attenuates_a_high_sine_by_its_gain_and_passes_a_low_one() -> None:
    pts = sines((10.0, 1.0), (80.0, 1.0))
    for fs in (FS, None):  # given, or the series' own rate (1 / median interval)
        out = filtered(low_pass(n.channel(RID, "x"), 4, 50.0, fs), pts)
        low, low_phase = amplitude_and_phase(out, 10.0)
        high, _ = amplitude_and_phase(out, 80.0)
        assert low == pytest.approx(zero_phase_gain(10.0, 50.0, FS, 4), abs=1e-3)
        assert abs(low_phase) < 1e-3  # bidirectional: zero phase
        assert high == pytest.approx(zero_phase_gain(80.0, 50.0, FS, 4), abs=1e-3)
        assert 0.015 < high < 0.025  # about 0.0206: attenuated 48 times


def test_a_cutoff_frequency_passes_half_and_a_high_pass_and_band_stop_their_gains() -> None:
    at_cutoff = filtered(low_pass(n.channel(RID, "x"), 2, 50.0, FS), sines((50.0, 2.0)))
    assert amplitude_and_phase(at_cutoff, 50.0)[0] == pytest.approx(2.0 * 0.5, abs=2e-3)
    high = configured(n.channel(RID, "x"), 3, n.union("highPass", {"cutoffFrequency": n.literal(100.0)}), FS)
    out = filtered(high, sines((20.0, 1.0), (300.0, 1.0)))
    assert amplitude_and_phase(out, 20.0)[0] == pytest.approx(
        zero_phase_gain(20.0, 100.0, FS, 3, True), abs=1e-3
    )
    assert amplitude_and_phase(out, 300.0)[0] == pytest.approx(
        zero_phase_gain(300.0, 100.0, FS, 3, True), abs=1e-3
    )
    band = n.union(
        "bandStop", {"lowStopbandFrequency": n.literal(40.0), "highStopbandFrequency": n.literal(60.0)}
    )
    stopped = filtered(
        configured(n.channel(RID, "x"), 2, band, FS), sines((5.0, 1.0), (50.0, 1.0), (40.0, 1.0))
    )
    for f in (5.0, 50.0, 40.0):
        want = band_stop_gain(f, 40.0, 60.0, FS, 2)
        assert amplitude_and_phase(stopped, f)[0] == pytest.approx(want, abs=1e-3)
    assert band_stop_gain(40.0, 40.0, 60.0, FS, 2) == pytest.approx(0.5)  # an edge: half
    assert band_stop_gain(50.0, 40.0, 60.0, FS, 2) < 0.01  # inside the band


def band_stop_gain(f: float, f1: float, f2: float, fs: float, order: int) -> float:
    """|H(f)|^2 of a digital Butterworth band-stop: the low-pass prototype at
    w (w2 - w1) / (w1 w2 - w^2), each w = tan(pi f / fs) prewarped."""
    w, w1, w2 = (math.tan(math.pi * x / fs) for x in (f, f1, f2))
    return 1.0 / (1.0 + (w * (w2 - w1) / (w1 * w2 - w * w)) ** (2 * order))


def test_a_cutoff_above_nyquist_is_refused() -> None:
    with pytest.raises(ComputeError) as err:
        filtered(low_pass(n.channel(RID, "x"), 4, 600.0, FS), sines((10.0, 1.0)))
    assert "Nyquist" in err.value.message
