"""Nominal's names: every table of them equals nominal-api's IR, and the evaluators and the client
use exactly those (tests/server/test_nominal_compute.py computes with them)."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

import nominal_api
import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.arithmetic import BINARY_OPS, THRESHOLD_OPS, UNARY_OPS
from compute.evaluation.nodes.ranges import MIN_MAX_OPS
from compute.evaluation.nodes.rolling import rolling
from compute.evaluation.nominal_variants import (
    BINARY_OPERATORS,
    BOOLEAN_COMPARISONS,
    DURATION_UNIT_NANOS,
    ENUMS,
    ROLLING_OPERATORS,
    THRESHOLD_COMPARISONS,
    TIME_UNIT_NANOS,
    UNARY_OPERATORS,
    VARIANTS,
)
from sparkwire_client import nodes as client_nodes

Json = dict[str, Any]


def conjure_ir() -> dict[tuple[str, str], Json]:
    ir = json.loads((Path(nominal_api.__file__).parent / "nominal-api.conjure.json").read_text())
    out = {}
    for t in ir["types"]:
        body = t[t["type"]]
        out[(body["typeName"]["package"], body["typeName"]["name"])] = body
    return out


def ir_names(ir: dict[tuple[str, str], Json], name: str) -> frozenset[str]:
    """The variants of a union or the values of an enum, in scout.compute.api (else io.nominal.api,
    else scout.rids.api: the events' query, else persistent.compute.api: the streaming error params'
    enums)."""
    body = (
        ir.get(("io.nominal.scout.compute.api", name))
        or ir.get(("io.nominal.api", name))
        or ir.get(("io.nominal.scout.rids.api", name))  # ComputeEventQuery
        or ir[("io.nominal.persistent.compute.api", name)]
    )
    if "union" in body:
        return frozenset(f["fieldName"] for f in body["union"])
    return frozenset(v["value"] for v in body["values"])


def ir_variant_fields(ir: dict[tuple[str, str], Json], union: str, variant: str) -> frozenset[str]:
    """The field names of the object a union's variant carries."""
    members = ir[("io.nominal.scout.compute.api", union)]["union"]
    (reference,) = [f["type"]["reference"] for f in members if f["fieldName"] == variant]
    return frozenset(f["fieldName"] for f in ir[(reference["package"], reference["name"])]["fields"])


def test_every_table_of_nominal_names_equals_nominal_apis_ir() -> None:
    ir = conjure_ir()
    for union, variants in VARIANTS.items():
        assert variants == ir_names(ir, union), union
    for enum, values in ENUMS.items():
        assert values == ir_names(ir, enum), enum
    assert set(THRESHOLD_COMPARISONS) == ir_names(ir, "ThresholdRangesComparison")
    assert set(THRESHOLD_COMPARISONS.values()) == ir_names(ir, "ThresholdOperator")
    assert set(DURATION_UNIT_NANOS) | {"reference", "add", "subtract", "negate"} == ir_names(ir, "Duration")
    assert set(BOOLEAN_COMPARISONS) | {"and", "or"} == ir_names(ir, "BooleanSeries")
    for (
        comparison,
        operator,
    ) in BOOLEAN_COMPARISONS.items():  # greaterThanOrEqualTo -> GREATER_THAN_OR_EQUAL_TO
        assert re.sub("([A-Z])", r"_\1", comparison).upper() == operator, comparison
    assert set(BOOLEAN_COMPARISONS.values()) == ir_names(ir, "ThresholdOperator")
    assert set(TIME_UNIT_NANOS) == ir_names(ir, "TimeUnit")
    for unit in DURATION_UNIT_NANOS:  # {"seconds": {"seconds": <IntegerConstant>}}, as the compiler reads it
        assert ir_variant_fields(ir, "Duration", unit) == {unit}, unit
    for op in UNARY_OPERATORS:
        assert ir_variant_fields(ir, "NumericSeries", op) == {"x"}, op
    for op in BINARY_OPERATORS:
        assert ir_variant_fields(ir, "NumericSeries", op) == {"left", "right"}, op
    assert set(ROLLING_OPERATORS) <= ir_names(ir, "NumericAggregationOperator")


def test_the_evaluators_and_the_client_name_exactly_nominals_values() -> None:
    assert set(THRESHOLD_OPS) == ENUMS["ThresholdOperator"]
    assert set(MIN_MAX_OPS) == ENUMS["MinMaxThresholdOperator"]
    assert set(TIME_UNIT_NANOS) == ENUMS["TimeUnit"]
    assert set(ROLLING_OPERATORS) <= VARIANTS["NumericAggregationOperator"]
    for op in ROLLING_OPERATORS:  # rolling() raises ValueError for an operator it has no evaluator for
        rolling(op, np.ones(3), np.arange(3, dtype=np.int64), 2)
    assert set(UNARY_OPS) == set(UNARY_OPERATORS)
    assert set(BINARY_OPS) == set(BINARY_OPERATORS)
    assert set(typing.get_args(client_nodes.ThresholdOperator)) == ENUMS["ThresholdOperator"]
    assert set(typing.get_args(client_nodes.BoundsOperator)) == ENUMS["MinMaxThresholdOperator"]
    assert set(typing.get_args(client_nodes.TimeUnit)) == ENUMS["TimeUnit"]
    assert set(typing.get_args(client_nodes.Aggregation)) == set(ROLLING_OPERATORS)


def test_a_refusal_never_puts_a_node_name_in_nominals_enum_params() -> None:
    named = ComputeError("InvalidComputation", "m", {"invalidTypes": "histogram", "field": "input"})
    assert named.params == {"invalidTypes": "", "variant": "histogram", "field": "input"}
    enum_value = ComputeError("InvalidComputation", "m", {"invalidTypes": "CUMULATIVE_SUM"})
    assert enum_value.params == {"invalidTypes": "CUMULATIVE_SUM"}
    polling = ComputeError("PollingOnlyComputation", "m", {"pollingOnlyTypes": "lttb"})
    assert polling.params == {"pollingOnlyTypes": "", "variant": "lttb"}
    assert "CUMULATIVE_SUM" in ENUMS["InvalidComputationType"]
