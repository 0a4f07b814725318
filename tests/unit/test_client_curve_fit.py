"""The client's curve fit (no server): `nodes.curve_fit` builds the `curveV2` node Nominal's classes
decode unchanged and the server's compiler builds when streamed, and the view reads a fit's
`curveFit` / `curveFitV2` FullResult (nominal-api's CurveFitResult fields, Conjure's "NaN" strings
included) as one row. The live path is in tests/server/test_streamed_polled.py."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from conjure_python_client import ConjureDecoder, ConjureEncoder
from nominal_api import api
from nominal_api import scout_compute_api as sc

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from sparkwire_client import nodes as n
from sparkwire_client.view import View
from tests.wire import without_nulls

pytestmark = pytest.mark.unit

NANOS = 1_000_000_000
y, x = n.numeric_channel("ri.x", "y"), n.numeric_channel("ri.x", "x")


def _stamp(ns: int) -> sc.TimestampConstant:
    return sc.TimestampConstant(literal=api.Timestamp(seconds=ns // NANOS, nanos=ns % NANOS))


def _series(node: n.NumericSeries) -> sc.NumericSeries:
    (name,) = node.variables
    return sc.NumericSeries(raw=sc.Reference(name=name))


def _nominal(details: sc.CurveFitV2Details) -> Any:
    fit = sc.CurveFitV2(
        target=sc.CurveFitTarget(numeric=sc.CurveFitSeriesVariable(series=_series(y))),
        fit_range=sc.CurveFitRange(start_time=_stamp(5 * NANOS), end_time=_stamp(9 * NANOS + 1)),
        curve_to_fit=details,
    )
    return without_nulls(ConjureEncoder.do_encode(sc.ComputableNode(curve_v2=fit)))


BUILT = {
    "polynomial": (
        n.curve_fit(y, 5 * NANOS, 9 * NANOS + 1, degree=2, intercept=1.5, time_unit="MILLISECONDS"),
        sc.CurveFitV2Details(
            polynomial=sc.PolynomialCurveFit(
                independent_variable=sc.CurveFitVariable(
                    time=sc.CurveFitTimeVariable(time_unit=api.TimeUnit.MILLISECONDS)
                ),
                degree=sc.IntegerConstant(literal=2),
                intercept=sc.DoubleConstant(literal=1.5),
            )
        ),
    ),
    "exponential-against-x": (
        n.curve_fit(y, 5 * NANOS, 9 * NANOS + 1, "exponential", x=x),
        sc.CurveFitV2Details(
            exponential=sc.BuiltInCurveFit(
                independent_variable=sc.CurveFitVariable(numeric=sc.CurveFitSeriesVariable(series=_series(x)))
            )
        ),
    ),
}


@pytest.mark.parametrize("key", sorted(BUILT))
def test_the_built_fit_is_nominals_node_and_compiles_when_streamed(key: str) -> None:
    built, details = BUILT[key]
    request = built.request(60)
    assert request["node"] == _nominal(details)  # as nominal-api's classes encode it
    decoded = ConjureDecoder().read_from_string(json.dumps(request["node"]), sc.ComputableNode)
    assert decoded.curve_v2 is not None
    plan = compile_plan(
        request["node"], 60 * NANOS, request["context"]["variables"], Limits(), ResultOptions(), streamed=True
    )
    assert plan.selectors


def test_arguments_that_do_not_apply_are_refused() -> None:
    with pytest.raises(ValueError, match="intercept"):
        n.curve_fit(y, 0, 1, "power", intercept=0.0)
    with pytest.raises(ValueError, match="time_unit"):
        n.curve_fit(y, 0, 1, x=x, time_unit="SECONDS")


def _full(kind: str, details: dict[str, Any], sample_count: int = 4, r2: Any = 0.75) -> dict[str, Any]:
    curve = details["type"]
    body = {
        "r2": r2,
        "mae": 0.5,
        "mse": 0.25,
        "rmse": 0.5,
        "maxAbsoluteError": "Infinity",
        "sampleCount": sample_count,
        "curveResultDetails": {"type": curve, curve: details[curve]},
    }
    return {"type": "full", "full": {"result": {"type": kind, kind: body}}}


def test_a_fit_is_one_row_with_its_curves_details() -> None:
    errors = {"r2": 0.75, "mae": 0.5, "mse": 0.25, "rmse": 0.5, "maxAbsoluteError": math.inf}
    view = View(60 * NANOS)
    view.apply(_full("curveFitV2", {"type": "polynomial", "polynomial": {"a": [2, 0.5, "NaN"]}}))
    (row,) = view.rows()
    coefficients = row.pop("coefficients")
    assert coefficients[:2] == [2.0, 0.5] and math.isnan(coefficients[2])
    assert row == {"curve": "polynomial", **errors, "sampleCount": 4}

    view.apply(_full("curveFit", {"type": "exponential", "exponential": {"a": 3.0, "b": -0.25}}, 7))
    assert view.kind == "curveFit"
    assert view.rows() == [{"curve": "exponential", **errors, "sampleCount": 7, "a": 3.0, "b": -0.25}]

    custom = {"parameters": {"k": 1.25, "c": "-Infinity"}, "converged": True, "iterations": 12}
    view.apply(_full("curveFitV2", {"type": "custom", "custom": custom}, 0, "NaN"))
    (row,) = view.rows()
    assert math.isnan(row.pop("r2"))
    assert row == {
        "curve": "custom",
        **{k: v for k, v in errors.items() if k != "r2"},
        "sampleCount": 0,
        "parameters": {"k": 1.25, "c": -math.inf},
        "converged": True,
        "iterations": 12,
    }


def test_an_append_of_a_fit_is_refused_by_name() -> None:
    view = View(60 * NANOS)
    view.apply(_full("curveFitV2", {"type": "power", "power": {"a": 1.0, "b": 2.0}}))
    append = {"start": {"seconds": 0, "nanos": 0}, "end": {"seconds": 1, "nanos": 0}}
    body = {"type": "curveFitV2", "curveFitV2": {}}
    with pytest.raises(ValueError, match="unsupported append type 'curveFitV2'"):
        view.apply({"type": "append", "append": {**append, "result": body}})
