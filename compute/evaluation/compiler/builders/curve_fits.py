"""Builders of the curve fits (`ComputableNode` `curve`, deprecated, and `curveV2`; evaluator in
nodes/curve_fits.py), registered to be built only when polled (ComputeService): a live
subscription still gets Nominal's `PollingOnlyComputation` `CURVE_FITTING` (builders/refusals.py),
unless it asks `sparkwire.streamPolled` (builders/streamed.py): the fit is then built `live`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.helpers import one_of
from compute.evaluation.compiler.registry import polls
from compute.evaluation.errors import refuse
from compute.evaluation.nodes import SeriesNode
from compute.evaluation.nodes.cross_group import crosses
from compute.evaluation.nodes.curve_fits import (
    MAX_DEGREE,
    Bounds,
    Curve,
    CurveFitChart,
    CustomCurveFitChart,
    Variable,
)
from compute.evaluation.nodes.expression import InvalidExpression, compile_expression
from compute.evaluation.nodes.math import Pointwise
from compute.evaluation.nominal_variants import TIME_UNIT_NANOS

Json = Any
B = Builder
R = TypeVar("R", CurveFitChart, CustomCurveFitChart)


def _span(b: B, value: Json, what: str, variant: str) -> tuple[int, int]:
    o = b.obj(value, what)
    start = b.timestamp_constant(b.get(o, "startTime", what))
    end = b.timestamp_constant(b.get(o, "endTime", what))
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


def _plain(root: R, variant: str) -> R:
    if crosses(root.input):
        raise refuse(
            variant,
            "input",
            "a curve fit over a node that acts across groups (filterByTag, selectTags, zScore) is not built",
        )
    return root


def _custom(
    b: B, o: dict[str, Json], y: SeriesNode, y_bounds: Bounds, start: int, end: int
) -> CustomCurveFitChart:
    """A `CustomCurveFit`, its formula compiled as `arithmetic` compiles one (nodes/expression.py)."""
    variant = "curveV2"
    formula = b.string_constant(b.get(o, "formula", "CustomCurveFit"))
    raw_variables = b.obj(b.get(o, "variables", "CustomCurveFit"), "CustomCurveFit.variables")
    raw_parameters = b.obj(b.get(o, "parameters", "CustomCurveFit"), "CustomCurveFit.parameters")
    if not raw_parameters:
        raise refuse(variant, "parameters", "a custom formula needs at least one parameter to fit")
    clash = sorted(set(raw_variables) & set(raw_parameters))
    if clash:
        raise refuse(variant, "parameters", f"{', '.join(clash)} named both a variable and a parameter")
    variables: list[Variable] = []
    series: list[SeriesNode] = []
    for name, value in sorted(raw_variables.items()):
        xkind, xvar = one_of(value, "CurveFitVariable", ("numeric", "time"))
        xo = b.obj(xvar, "CurveFitVariable")
        if xkind == "time":
            variables.append(Variable(name, _time_unit(b, xo, "CurveFitTimeVariable")))
        else:
            series.append(b.timed(b.numeric(b.get(xo, "series", "CurveFitSeriesVariable")), variant))
            variables.append(Variable(name, None, _bounds(b, xo.get("boundsConfig"), variant)))
    parameters = tuple((name, b.double_constant(v)) for name, v in sorted(raw_parameters.items()))
    try:
        compiled = compile_expression(
            formula, [*raw_variables, *raw_parameters], boolean=False, charge=b.budget.charge_subtree
        )
    except InvalidExpression as e:
        raise refuse(variant, "formula", f"{formula!r}: {e}") from None
    if series:  # the target and the series variables paired by forward fill (1 s), as a scatter's x and y
        aligned = [y, *series]
        paired: list[SeriesNode] = [Pointwise(variant, aligned, _component(i)) for i in range(len(aligned))]
        y, series = paired[0], paired[1:]
    return CustomCurveFitChart(
        y, series, compiled, tuple(variables), parameters, start, end, y_bounds, live=b.streamed
    )


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
            y,
            None,
            fit,
            start,
            end,
            _time_unit(b, options, "TimeSeriesFitOptions"),
            variant=variant,
            live=b.streamed,
        )
        return _plain(root, variant)
    scatter = b.obj(b.get(po, "scatter", "ScatterCurveFit"), "Scatter")
    x = b.timed(b.numeric(b.get(scatter, "x", "Scatter")), variant)
    y = b.timed(b.numeric(b.get(scatter, "y", "Scatter")), variant)
    x_bounds = Bounds(_optional_double(b, options, "minX"), _optional_double(b, options, "maxX"))
    y_bounds = Bounds(_optional_double(b, options, "minY"), _optional_double(b, options, "maxY"))
    xs, ys = _aligned(variant, x, y)
    return _plain(
        CurveFitChart(
            ys, xs, fit, start, end, y_bounds=y_bounds, x_bounds=x_bounds, variant=variant, live=b.streamed
        ),
        variant,
    )


@polls("ComputableNode", "curveV2")
def curve_v2(b: B, value: Json) -> CurveFitChart | CustomCurveFitChart:
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
        return _plain(_custom(b, b.obj(details, "CustomCurveFit"), y, y_bounds, start, end), variant)
    do = b.obj(details, "PolynomialCurveFit" if kind == "polynomial" else "BuiltInCurveFit")
    fit = _polynomial(b, do, variant) if kind == "polynomial" else Curve(kind)
    xkind, xvar = one_of(b.get(do, "independentVariable", kind), "CurveFitVariable", ("numeric", "time"))
    xo = b.obj(xvar, "CurveFitVariable")
    if xkind == "time":
        unit = _time_unit(b, xo, "CurveFitTimeVariable")
        root = CurveFitChart(y, None, fit, start, end, unit, y_bounds=y_bounds, live=b.streamed)
        return _plain(root, variant)
    x = b.timed(b.numeric(b.get(xo, "series", "CurveFitSeriesVariable")), variant)
    xs, ys = _aligned(variant, x, y)
    x_bounds = _bounds(b, xo.get("boundsConfig"), variant)
    root = CurveFitChart(ys, xs, fit, start, end, y_bounds=y_bounds, x_bounds=x_bounds, live=b.streamed)
    return _plain(root, variant)
