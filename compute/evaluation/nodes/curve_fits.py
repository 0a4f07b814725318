"""Curve fits (`ComputableNode` `curve` and `curveV2`), which Nominal computes only when polled:
a curve fit to a series against its own relative timestamps, or against another series (a scatter),
over the points inside a fit range and the variables' bounds. nominal-api defines the curves
(`PolynomialResultDetails` y = sum(a_i x^i), `ExponentialResultDetails` y = a e^(b x),
`LogarithmicResultDetails` y = a ln(x) + b, `PowerResultDetails` y = a x^b) and calls the three
built-in non-polynomial fits closed-form (`BuiltInCurveFit`); docs/decisions/0081-curve-fits-and-filters.md
says how each is fit and which points count.

- polynomial: least squares by numpy.polynomial.polynomial.polyfit; with a fixed `intercept`,
  a_0 is that value and a_1 ... a_n are the least-squares solution of y - a_0 (numpy.linalg.lstsq);
- logarithmic: least squares of y against ln(x) (exact, linear in a and b);
- exponential and power: the closed form, least squares of ln(y) against x (or ln(x));
- a custom formula (`CustomCurveFitChart`): scipy.optimize.least_squares from the given starting values.

R^2 is 1 - SS_res / SS_tot and the errors (MAE, MSE, RMSE, max absolute error) are of the fit curve's
values against the points' y, in the y units, as nominal-api's `CurveFitResult` documents them.

scipy.optimize is imported inside the functions that use it: every server imports this module (the
compile registry builds every node), an edge too, which never evaluates one."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import polynomial as P

from compute.evaluation.curve_fit_results import CurveFitOutput
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import EvalEnv, GroupKey, OutputNode, SeriesNode, numeric
from compute.evaluation.nodes.charts import ChartInputs, HeldInputs
from compute.evaluation.results import NumericPoints, Output

CURVES = ("polynomial", "exponential", "logarithmic", "power")
MAX_DEGREE = 20  # a polynomial of higher degree over float64 is no fit anyone can read


@dataclass(frozen=True)
class Curve:
    """What to fit: `curve` one of CURVES; a polynomial's `degree` and fixed `intercept` (a_0)."""

    curve: str
    degree: int = 1
    intercept: float | None = None


@dataclass(frozen=True)
class Bounds:
    """Inclusive bounds on a variable's values (None: unbounded)."""

    low: float | None = None
    high: float | None = None

    def mask(self, values: np.ndarray) -> np.ndarray:
        keep = np.ones(len(values), bool)
        if self.low is not None:
            keep &= values >= self.low
        if self.high is not None:
            keep &= values <= self.high
        return keep


class CannotFit(ComputeError):
    """The points cannot be fit (too few of them, or a custom formula not finite where it starts)."""


def cannot_fit(variant: str, why: str) -> CannotFit:
    return CannotFit("InvalidComputation", f"{variant}: {why}", {"invalidTypes": "", "variant": variant})


def no_fit(curve: str, v2: bool, coefficients: int, parameters: tuple[str, ...] = ()) -> CurveFitOutput:
    """A streamed fit's frame while the window's points cannot be fit (where a poll refuses the
    period): no sample fit, every coefficient, parameter and error NaN."""
    nan = math.nan
    return CurveFitOutput(
        v2=v2,
        curve=curve,
        coefficients=(nan,) * coefficients,
        r2=nan,
        mae=nan,
        mse=nan,
        rmse=nan,
        max_absolute_error=nan,
        sample_count=0,
        parameters=dict.fromkeys(parameters, nan),
        converged=False,
    )


def fit(curve: Curve, x: np.ndarray, y: np.ndarray, variant: str, v2: bool) -> CurveFitOutput:
    """The least-squares fit of `curve` to the points (x, y) where both are finite and the curve's
    transform is defined (x > 0 for logarithmic and power, y > 0 for exponential and power)."""
    keep = np.isfinite(x) & np.isfinite(y)
    if curve.curve in ("logarithmic", "power"):
        keep &= x > 0
    if curve.curve in ("exponential", "power"):
        keep &= y > 0
    x, y = x[keep], y[keep]
    needed = _parameters(curve)
    if len(x) < needed:
        raise cannot_fit(
            variant,
            f"{len(x)} point(s) to fit a {curve.curve} curve, which needs at least {needed}"
            + (" (x > 0 and y > 0 where its logarithm is taken)" if curve.curve != "polynomial" else ""),
        )
    if curve.curve == "polynomial":
        coefficients = _polynomial(x, y, curve.degree, curve.intercept)
        predicted = P.polyval(x, coefficients)
    elif curve.curve == "logarithmic":
        b, a = P.polyfit(np.log(x), y, 1)
        coefficients = np.array([a, b])
        predicted = a * np.log(x) + b
    elif curve.curve == "exponential":
        ln_a, b = P.polyfit(x, np.log(y), 1)
        coefficients = np.array([math.exp(ln_a), b])
        predicted = coefficients[0] * np.exp(b * x)
    else:  # power
        ln_a, b = P.polyfit(np.log(x), np.log(y), 1)
        coefficients = np.array([math.exp(ln_a), b])
        predicted = coefficients[0] * np.power(x, b)
    residuals = y - predicted
    mse = float(np.mean(residuals**2))
    return CurveFitOutput(
        v2=v2,
        curve=curve.curve,
        coefficients=tuple(float(c) for c in coefficients),
        r2=r_squared(y, residuals),
        mae=float(np.mean(np.abs(residuals))),
        mse=mse,
        rmse=math.sqrt(mse),
        max_absolute_error=float(np.max(np.abs(residuals))),
        sample_count=len(x),
    )


def _parameters(curve: Curve) -> int:
    if curve.curve == "polynomial":
        return curve.degree + (1 if curve.intercept is None else 0)
    return 2


def _polynomial(x: np.ndarray, y: np.ndarray, degree: int, intercept: float | None) -> np.ndarray:
    if intercept is None:
        return np.asarray(P.polyfit(x, y, degree), np.float64)
    if degree == 0:
        return np.array([intercept])
    powers = np.vander(x, degree + 1, increasing=True)[:, 1:]  # x^1 ... x^n
    scale = np.linalg.norm(powers, axis=0)
    scale[scale == 0] = 1.0  # columns scaled to unit length: the same conditioning polyfit uses
    solution = np.linalg.lstsq(powers / scale, y - intercept, rcond=None)[0] / scale
    return np.concatenate([[intercept], solution])


def r_squared(y: np.ndarray, residuals: np.ndarray) -> float:
    """1 - SS_res / SS_tot; for points whose y are all equal (SS_tot = 0): 1 if the curve passes
    through every point, else 0."""
    ss_res = float(np.sum(residuals**2))
    ss_tot = float(np.sum((y - np.mean(y)) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else 0.0
    return 1.0 - ss_res / ss_tot


@dataclass
class CurveFitChart(OutputNode):
    """The root of `curve` / `curveV2`: per group, the points of `y` (and `x`, aligned with it, when
    fit against a series) from `start` to `end` inclusive whose values lie within the bounds, and
    the fit of `curve` to them. Against time, x is the time since the earliest of those points in
    `time_unit_ns`. Built only by a poll (POLLED_ONLY): evaluated once, whole, over the period, or
    re-evaluated whole over the window at each micro-batch when streamed (`sparkwire.streamPolled`)."""

    POLLED_ONLY = True

    y: SeriesNode
    x: SeriesNode | None  # None: fit against the points' relative timestamps
    curve: Curve
    start: int
    end: int
    time_unit_ns: int = 1_000_000_000
    y_bounds: Bounds = Bounds()
    x_bounds: Bounds = Bounds()
    variant: str = "curveV2"
    # Streamed live (`sparkwire.streamPolled`): a window whose points cannot be fit yet is `no_fit`
    # until they can, where a poll refuses it; once they can, the output is the poll's.
    live: bool = False

    def __post_init__(self) -> None:
        inputs = [self.y] if self.x is None else [self.x, self.y]
        self.bundle = ChartInputs(inputs)
        self.held = HeldInputs(len(inputs))

    @property
    def input(self) -> ChartInputs:
        return self.bundle

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        out: dict[GroupKey, Output] = {}
        for key, series in self.held.whole(self.bundle.inputs, envs).items():
            columns = [numeric(s, self.variant) for s in series]
            out[key] = self._fit(columns)
        return out

    def _fit(self, columns: list[NumericPoints]) -> CurveFitOutput:
        y = columns[-1]
        keep = (y.ts >= self.start) & (y.ts <= self.end) & self.y_bounds.mask(y.values)
        if self.x is None:
            ts = y.ts[keep]
            origin = int(ts[0]) if len(ts) else 0
            x = (ts - origin).astype(np.float64) / self.time_unit_ns
        else:
            xs = columns[0]  # aligned with y: the same timestamps (ChartInputs of two Pointwise)
            keep &= self.x_bounds.mask(xs.values)
            x = xs.values[keep]
        v2 = self.variant == "curveV2"
        try:
            return fit(self.curve, x, y.values[keep], self.variant, v2=v2)
        except CannotFit:
            if not self.live:
                raise
            count = self.curve.degree + 1 if self.curve.curve == "polynomial" else 2
            return no_fit(self.curve.curve, v2, count)


@dataclass(frozen=True)
class Variable:
    """A custom formula's input: the next series of the root's inputs (`time_unit_ns` None), or the
    target's relative sample time in `time_unit_ns`; samples outside `bounds` are not fit."""

    name: str
    time_unit_ns: int | None = None
    bounds: Bounds = Bounds()


@dataclass
class CustomCurveFitChart(OutputNode):
    """The root of `curveV2` with a `custom` curve: the parameters of `formula` (a compiled
    expression, nodes/expression.py) that minimize the sum of squared differences to the target's
    points, by scipy.optimize.least_squares (trust region reflective) from the given starting
    values. The target `y` and the variables read from series are paired by forward fill (1 s);
    points are selected as `CurveFitChart` selects them."""

    POLLED_ONLY = True

    y: SeriesNode
    series: list[SeriesNode]  # the variables read from series, in `variables` order
    formula: Callable[[dict[str, np.ndarray]], np.ndarray]
    variables: tuple[Variable, ...]
    parameters: tuple[tuple[str, float], ...]  # name, starting value
    start: int
    end: int
    y_bounds: Bounds = Bounds()
    live: bool = False  # streamed: `no_fit` while the window's points cannot be fit (CurveFitChart)

    def __post_init__(self) -> None:
        self.bundle = ChartInputs([self.y, *self.series])
        self.held = HeldInputs(1 + len(self.series))

    @property
    def input(self) -> ChartInputs:
        return self.bundle

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        out: dict[GroupKey, Output] = {}
        for key, series in self.held.whole(self.bundle.inputs, envs).items():
            out[key] = self._fit([numeric(s, "curveV2") for s in series])
        return out

    def _fit(self, columns: list[NumericPoints]) -> CurveFitOutput:
        y = columns[0]
        keep = (y.ts >= self.start) & (y.ts <= self.end) & self.y_bounds.mask(y.values)
        read = iter(columns[1:])  # aligned with y: the same timestamps
        values: dict[str, np.ndarray] = {}
        for v in self.variables:
            if v.time_unit_ns is None:
                values[v.name] = next(read).values
                keep &= v.bounds.mask(values[v.name])
        ts = y.ts[keep]
        origin = int(ts[0]) if len(ts) else 0
        for v in self.variables:
            if v.time_unit_ns is not None:
                values[v.name] = (y.ts - origin).astype(np.float64) / v.time_unit_ns
                keep &= v.bounds.mask(values[v.name])
        target = y.values[keep]
        inputs = {name: column[keep] for name, column in values.items()}
        finite = np.isfinite(target)
        for column in inputs.values():
            finite &= np.isfinite(column)
        target = target[finite]
        inputs = {name: column[finite] for name, column in inputs.items()}
        try:
            return fit_formula(self.formula, inputs, self.parameters, target)
        except CannotFit:
            if not self.live:
                raise
            return no_fit("custom", True, 0, tuple(name for name, _ in self.parameters))


def fit_formula(
    formula: Callable[[dict[str, np.ndarray]], np.ndarray],
    inputs: dict[str, np.ndarray],
    parameters: tuple[tuple[str, float], ...],
    y: np.ndarray,
) -> CurveFitOutput:
    """scipy.optimize.least_squares of formula(inputs, parameters) - y from the starting values."""
    from scipy import optimize

    names = [name for name, _ in parameters]
    if len(y) < len(names):
        raise cannot_fit("curveV2", f"{len(y)} point(s) to fit {len(names)} parameter(s) of a custom formula")

    def curve(p: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            out = formula({**inputs, **dict(zip(names, (np.asarray(x, np.float64) for x in p), strict=True))})
        return np.broadcast_to(np.asarray(out, np.float64), y.shape)

    try:
        solution = optimize.least_squares(
            lambda p: curve(p) - y, np.array([v for _, v in parameters], np.float64)
        )
    except ValueError as e:  # e.g. residuals not finite at the starting values
        raise cannot_fit("curveV2", f"the custom formula cannot be fit: {e}") from None
    residuals = y - curve(solution.x)
    mse = float(np.mean(residuals**2))
    return CurveFitOutput(
        v2=True,
        curve="custom",
        coefficients=(),
        r2=r_squared(y, residuals),
        mae=float(np.mean(np.abs(residuals))),
        mse=mse,
        rmse=math.sqrt(mse),
        max_absolute_error=float(np.max(np.abs(residuals))),
        sample_count=len(y),
        parameters={name: float(x) for name, x in zip(names, solution.x, strict=True)},
        converged=bool(solution.status > 0),
        iterations=int(solution.njev or solution.nfev),
    )
