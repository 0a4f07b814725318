"""Builders of the curve fits (`ComputableNode` `curve`, deprecated, and `curveV2`; evaluator in
nodes/curve_fits.py), registered to be built only when polled (ComputeService): a live
subscription still gets Nominal's `PollingOnlyComputation` `CURVE_FITTING` (builders/refusals.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.helpers import one_of
from compute.evaluation.compiler.registry import polls
from compute.evaluation.errors import MalformedNode, refuse
from compute.evaluation.nodes import SeriesNode
from compute.evaluation.nodes.cross_group import crosses
from compute.evaluation.nodes.curve_fits import MAX_DEGREE, Bounds, Curve, CurveFitChart
from compute.evaluation.nodes.math import Pointwise
from compute.evaluation.nominal_variants import TIME_UNIT_NANOS

Json = Any
B = Builder


def _timestamp(b: B, value: Json) -> int:
    kind, inner = b.variant("TimestampConstant", value)
    if kind == "variable":
        _, inner = b.typed_variable(inner, ("timestamp",))
    t = b.obj(inner, "Timestamp")
    seconds, nanos = t.get("seconds"), t.get("nanos") or 0
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not isinstance(nanos, int):
        raise MalformedNode("a Timestamp needs integer 'seconds' and 'nanos'")
    return seconds * 1_000_000_000 + nanos


def _span(b: B, value: Json, what: str, variant: str) -> tuple[int, int]:
    o = b.obj(value, what)
    start, end = _timestamp(b, b.get(o, "startTime", what)), _timestamp(b, b.get(o, "endTime", what))
    if end < start:
        raise refuse(variant, what, f"{variant}: the fit range ends before it starts")
    return start, end


def _time_unit(b: B, o: dict[str, Json], what: str) -> int:
    unit = o.get("timeUnit")
    return TIME_UNIT_NANOS["SECONDS" if unit is None else b.enum_value("TimeUnit", unit, what)]


def _optional_double(b: B, o: dict[str, Json], key: str) -> float | None:
    return None if o.get(key) is None else b.double_constant(o[key])


def _bounds(b: B, value: Json, variant: str) -> Bounds:
    """A `CurveFitBoundsConfiguration` (absent: unbounded)."""
    if value is None:
        return Bounds()
    o = b.obj(value, "CurveFitBoundsConfiguration")
    bounds = Bounds(_optional_double(b, o, "min"), _optional_double(b, o, "max"))
    if bounds.low is not None and bounds.high is not None and not bounds.low <= bounds.high:
        raise refuse(variant, "boundsConfig", f"min {bounds.low} must be at most max {bounds.high}")
    return bounds


def _polynomial(b: B, o: dict[str, Json], variant: str) -> Curve:
    degree = b.integer_constant(b.get(o, "degree", "polynomial"))
    if not 0 <= degree <= MAX_DEGREE:
        raise refuse(variant, "degree", f"must be between 0 and {MAX_DEGREE}, got {degree}")
    return Curve("polynomial", degree, _optional_double(b, o, "intercept"))


def _aligned(variant: str, x: SeriesNode, y: SeriesNode) -> tuple[SeriesNode, SeriesNode]:
    """x and y as the two components of one alignment (forward fill, 1 s), as a scatter pairs them."""
    return Pointwise(variant, [x, y], _component(0)), Pointwise(variant, [x, y], _component(1))


def _component(i: int) -> Callable[[list[np.ndarray]], np.ndarray]:
    return lambda columns: columns[i]


def _plain(root: CurveFitChart, variant: str) -> CurveFitChart:
    if crosses(root.input):
        raise refuse(
            variant,
            "input",
            "a curve fit over a node that acts across groups (filterByTag, selectTags, zScore) is not built",
        )
    return root


@polls("ComputableNode", "curve")
def curve(b: B, value: Json) -> CurveFitChart:
    """`CurveFit` (deprecated): a time series or a scatter, one of four curves, a fit range."""
    variant = "curve"
    o = b.obj(value, "CurveFit")
    start, end = _span(b, b.get(o, "curveFitOptions", "CurveFit"), "curveFitOptions", variant)
    dkind, details = one_of(
        b.get(o, "curveFitDetails", "CurveFit"),
        "CurveFitDetails",
        ("polynomial", "exponential", "logarithmic", "power"),
    )
    fit = (
        _polynomial(b, b.obj(details, "PolynomialCurve"), variant) if dkind == "polynomial" else Curve(dkind)
    )
    pkind, plot = one_of(
        b.get(o, "curveFitPlotType", "CurveFit"), "CurveFitPlotType", ("timeSeries", "scatter")
    )
    po = b.obj(plot, f"{pkind}CurveFit")
    options = b.obj(po.get("options") or {}, "options")
    if pkind == "timeSeries":
        y = b.timed(b.numeric(b.get(po, "series", "TimeSeriesCurveFit")), variant)
        root = CurveFitChart(
            y, None, fit, start, end, _time_unit(b, options, "TimeSeriesFitOptions"), variant=variant
        )
        return _plain(root, variant)
    scatter = b.obj(b.get(po, "scatter", "ScatterCurveFit"), "Scatter")
    x = b.timed(b.numeric(b.get(scatter, "x", "Scatter")), variant)
    y = b.timed(b.numeric(b.get(scatter, "y", "Scatter")), variant)
    x_bounds = Bounds(_optional_double(b, options, "minX"), _optional_double(b, options, "maxX"))
    y_bounds = Bounds(_optional_double(b, options, "minY"), _optional_double(b, options, "maxY"))
    xs, ys = _aligned(variant, x, y)
    return _plain(
        CurveFitChart(ys, xs, fit, start, end, y_bounds=y_bounds, x_bounds=x_bounds, variant=variant), variant
    )


@polls("ComputableNode", "curveV2")
def curve_v2(b: B, value: Json) -> CurveFitChart:
    """`CurveFitV2`: a target series fit against time or another series, over `fitRange`."""
    variant = "curveV2"
    o = b.obj(value, "CurveFitV2")
    start, end = _span(b, b.get(o, "fitRange", "CurveFitV2"), "fitRange", variant)
    _, target = one_of(b.get(o, "target", "CurveFitV2"), "CurveFitTarget", ("numeric",))
    to = b.obj(target, "CurveFitSeriesVariable")
    y = b.timed(b.numeric(b.get(to, "series", "CurveFitSeriesVariable")), variant)
    y_bounds = _bounds(b, to.get("boundsConfig"), variant)
    kind, details = one_of(
        b.get(o, "curveToFit", "CurveFitV2"),
        "CurveFitV2Details",
        ("polynomial", "exponential", "logarithmic", "power", "custom"),
    )
    if kind == "custom":
        raise refuse(
            variant,
            "curveToFit",
            "a custom formula is not fit by Sparkwire; fit a polynomial, exponential, logarithmic "
            "or power curve",
        )
    do = b.obj(details, "PolynomialCurveFit" if kind == "polynomial" else "BuiltInCurveFit")
    fit = _polynomial(b, do, variant) if kind == "polynomial" else Curve(kind)
    xkind, xvar = one_of(b.get(do, "independentVariable", kind), "CurveFitVariable", ("numeric", "time"))
    xo = b.obj(xvar, "CurveFitVariable")
    if xkind == "time":
        root = CurveFitChart(
            y, None, fit, start, end, _time_unit(b, xo, "CurveFitTimeVariable"), y_bounds=y_bounds
        )
        return _plain(root, variant)
    x = b.timed(b.numeric(b.get(xo, "series", "CurveFitSeriesVariable")), variant)
    xs, ys = _aligned(variant, x, y)
    root = CurveFitChart(
        ys, xs, fit, start, end, y_bounds=y_bounds, x_bounds=_bounds(b, xo.get("boundsConfig"), variant)
    )
    return _plain(root, variant)
