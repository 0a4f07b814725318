"""The client's builders cover every node variant the server computes (no server).

One table maps each computing variant (union and name) to a client call that builds it. The set of
variants is derived from the compiler's own registries, so a node added to the server without a
client builder fails `test_the_table_covers_every_variant_the_server_compiles`. Each built request
decodes into nominal-api's classes and encodes back unchanged (the wire form is Nominal's: a
missing required field fails to decode, a misnamed one is dropped, an unknown enum value becomes
UNKNOWN), and compiles on the server's compiler without a refusal. The newer builders are also
compared with the same nodes written field by field with nominal-api's classes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conjure_python_client import ConjureDecoder, ConjureEncoder
from nominal_api import api, scout_run_api
from nominal_api import persistent_compute_api as pc
from nominal_api import scout_compute_api as sc

from compute.evaluation.compiler import plan as c
from compute.evaluation.compiler import registry
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.catalogs import Catalogs
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.errors import ComputeError
from compute.evaluation.nominal_variants import VARIANTS
from compute.storage.assets import Asset, DataScope
from compute.storage.modules import ModuleStore
from sparkwire_client import charts as ch
from sparkwire_client import nodes as n
from sparkwire_client import range_nodes as r
from sparkwire_client.modules import (
    derived_enum,
    derived_numeric,
    derived_ranges,
    enum_parameter,
    numeric_parameter,
)

pytestmark = pytest.mark.unit

RID = "ri.x"
ASSET = "ri.scout.main.asset.cover"
temp = n.numeric_channel(RID, "engine.temp")
rpm = n.numeric_channel(RID, "engine.rpm")
mode = n.enum_channel(RID, "drive.mode")
gear = n.enum_channel(RID, "gear")
grouped = n.numeric_channel(RID, "engine.temp", group_by=["vehicle"])
logs = n.log_channel(RID)
grouped_mode = n.enum_channel(RID, "drive.mode", group_by=["vehicle"])
hot = temp.above(90)
S, E, R, V, C = "NumericSeries", "EnumSeries", "RangeSeries", "SelectValue", "ComputableNode"

# Variants that are in the server's registries only to be refused by name (docs/protocol.md says why).
REFUSED = {(u, kind) for u in (S, E, R) for kind in registry.refused(u)}  # refused outright by the registry

# (union, variant) -> the client call that builds it, as a ComputableNode ready to subscribe.
COVERAGE: dict[tuple[str, str], n.Computable] = {
    # -- NumericSeries ----------------------------------------------------------------------------
    (S, "raw"): n.series(temp),
    (S, "channel"): n.series(n.inline_numeric_channel(RID, "engine.temp", {"vehicle": "a1"})),
    (S, "selectNumeric"): n.series(n.select_numeric("engine.temp", n.dataset_of("asset", ASSET))),
    (S, "selectNumericProperty"): n.series(temp * n.select_numeric_property("asset", ASSET, "gain")),
    (S, "constant"): n.series(temp + 1),
    (S, "abs"): n.series(abs(temp)),
    (S, "negate"): n.series(-temp),
    (S, "sqrt"): n.series(temp.sqrt()),
    (S, "ln"): n.series(temp.ln()),
    (S, "log10"): n.series(temp.log10()),
    (S, "sin"): n.series(temp.sin()),
    (S, "cos"): n.series(temp.cos()),
    (S, "tan"): n.series(temp.tan()),
    (S, "asin"): n.series(temp.asin()),
    (S, "acos"): n.series(temp.acos()),
    (S, "add"): n.series(temp + rpm),
    (S, "subtract"): n.series(temp - rpm),
    (S, "multiply"): n.series(temp * rpm),
    (S, "divide"): n.series(temp / rpm),
    (S, "floorDivide"): n.series(temp // 3),
    (S, "power"): n.series(temp**2),
    (S, "modulo"): n.series(temp % 7),
    (S, "atan2"): n.series(n.atan2(temp, rpm)),
    (S, "max"): n.series(n.across("max", temp, rpm)),
    (S, "min"): n.series(n.across("min", temp, rpm)),
    (S, "mean"): n.series(n.across("mean", temp, rpm)),
    (S, "sum"): n.series(n.across("sum", temp, rpm)),
    (S, "product"): n.series(n.across("product", temp, rpm)),
    (S, "union"): n.series(n.union_points(temp, rpm, operation="MAX")),
    (S, "selectNewestPoints"): n.series(temp.newest_points(10)),
    (S, "selectOldestPoints"): n.series(temp.oldest_points(10)),
    (S, "bitAnd"): n.series(temp.bits("bitAnd", 12)),
    (S, "bitOr"): n.series(temp.bits("bitOr", 1)),
    (S, "bitXor"): n.series(temp.bits("bitXor", 5)),
    (S, "bitShiftLeft"): n.series(temp.bits("bitShiftLeft", 2)),
    (S, "bitShiftRight"): n.series(temp.bits("bitShiftRight", 2)),
    (S, "bitTest"): n.series(temp.bits("bitTest", 3)),
    (S, "bitOperation"): n.series(temp.bit_operation("xor", 6)),
    (S, "ifElse"): n.series(n.if_else(temp.gt(90) & temp.lt(rpm), temp, 0)),
    (S, "numericAggregation"): n.series(
        temp.rolling(5, "max")
        + temp.rolling_points(4, "percentile", 0.9)
        + temp.group_by("sum", every_seconds=2)
    ),
    (S, "countDuplicate"): n.series(n.count_duplicates(mode, gear)),
    (S, "derivative"): n.series(temp.derivative("MINUTES")),
    (S, "valueDifference"): n.series(temp.value_difference()),
    (S, "timeShift"): n.series(temp.time_shift(1.5)),
    (S, "timeShiftV2"): n.series(temp.time_shift_v2(0.25)),
    (S, "timeRangeFilter"): n.series(temp.since(1_763_769_600_123_456_789)),
    (S, "timeDifference"): n.series(temp.time_difference("MILLISECONDS")),
    (S, "absoluteTimestamp"): n.series(temp.absolute_timestamp("MILLISECONDS")),
    (S, "resample"): n.series(temp.resample_v1(0.5)),
    (S, "resampleV2"): n.series(temp.resample(0.5)),
    (S, "nthPointDownsample"): n.series(r.every_nth(temp, 3)),
    (S, "toStartOfInterval"): n.series(r.to_start_of_interval(temp, 10)),
    (S, "unitOverride"): n.series(temp.in_unit("[degF]")),
    (S, "unitConversion"): n.series(temp.in_unit("[degF]").convert_to("Cel")),
    (S, "filterTransformation"): n.series(temp.within(hot)),
    (S, "filterWhere"): n.series(temp.filter_where(temp.ge(10) | temp.eq(0))),
    (S, "thresholdFilter"): n.series(temp.where("GREATER_THAN", 3)),
    (S, "approximateFilter"): n.series(temp.near(20, 0.5)),
    (S, "dropNan"): n.series(temp.drop_nan()),
    (S, "aggregateUnderRanges"): n.series(n.under_ranges(temp, hot, "MAX")),
    (S, "rangeDuration"): n.series(n.range_duration(hot, "drop", "MILLISECONDS")),
    (S, "groupWithinRangesV2"): n.series(n.within_ranges(temp, hot, "percentile", 0.5)),
    (S, "filterByExpression"): n.series(
        n.filter_by_expression("x", "x > 2 and y < 1", {"x": temp, "y": rpm})
    ),
    (S, "enumToNumeric"): n.series(n.enum_to_numeric(mode, {"PARK": 0, "DRIVE": 1}, default=-1)),
    (S, "contains"): n.series(
        logs.contains(
            n.log_any(n.log_all(n.log_token("err"), n.log_arg("host", "^a")), n.log_not(n.log_regex("ok$")))
        )
    ),
    (S, "refprop"): n.series(
        n.fluid_property("WATER", "MASS_DENSITY", {"TEMPERATURE": temp, "PRESSURE": rpm}, radius_seconds=2)
    ),
    (S, "refpropV2"): n.series(
        n.fluid_property("WATER", "MASS_DENSITY", {"TEMPERATURE": temp, "PRESSURE": rpm})
    ),
    (S, "zScore"): n.series(grouped.z_score("vehicle", radius_seconds=3)),
    (S, "filterByTag"): n.series(grouped.filter_by_tag("vehicle", ["a1"])),
    (S, "selectTags"): n.series(grouped.select_tags()),
    (S, "aggregate"): n.series(temp.aggregate_duplicates("MAX")),
    (S, "rollingOperation"): n.series(temp.rolling_operation(5, "average")),
    (S, "offset"): n.series(temp.offset(3)),
    (S, "scale"): n.series(temp.scale(2)),
    (S, "arithmetic"): n.series(n.expression("sin(x) * 2 + 1", {"x": temp})),
    (S, "unaryArithmetic"): n.series(temp.unary_arithmetic("LOG")),
    (S, "binaryArithmetic"): n.series(n.binary_arithmetic(temp, rpm)),
    (S, "derived"): n.series(derived_numeric("cover", "twice", "1", {"v": temp})),
    # -- EnumSeries -------------------------------------------------------------------------------
    (E, "raw"): n.series(mode),
    (E, "channel"): n.series(n.inline_enum_channel(RID, "drive.mode")),
    (E, "selectEnum"): n.series(n.select_enum("drive.mode", n.dataset_of("asset", ASSET))),
    (E, "selectCategoricalProperty"): n.ranges(
        r.all_equal(mode, n.select_categorical_property("asset", ASSET, "fluid"))
    ),
    (E, "timeShift"): n.series(mode.time_shift(2)),
    (E, "timeShiftV2"): n.series(mode.time_shift(2, v2=True)),
    (E, "resample"): n.series(r.resample(mode, 1, v1=True)),
    (E, "resampleV2"): n.series(r.resample(mode, 1)),
    (E, "union"): n.series(r.union([mode, gear], "MIN")),
    (E, "enumAggregation"): n.series(r.enum_aggregation(r.to_start_of_interval(mode, 5), "min")),
    (E, "eventAggregation"): n.ranges(
        r.all_equal(mode, n.event_aggregation(n.event_query(label="burn"), "phase"))
    ),
    (E, "aggregate"): n.series(r.aggregate(r.to_start_of_interval(mode, 5))),
    (E, "nthPointDownsample"): n.series(r.every_nth(mode, 2)),
    (E, "toStartOfInterval"): n.series(r.to_start_of_interval(mode, 5)),
    (E, "timeRangeFilter"): n.series(mode.since(1_763_769_600_123_456_789)),
    (E, "valueMap"): n.series(
        r.value_map(temp, [(None, 20, "cold"), (20, 80, "warm"), (80, None, "hot")], "?")
    ),
    (E, "filterTransformation"): n.series(r.within(mode, hot)),
    (E, "filterByTag"): n.series(grouped_mode.filter_by_tag("vehicle", ["a1"], exclude=True)),
    (E, "selectTags"): n.series(grouped_mode.select_tags("vehicle")),
    (E, "derived"): n.series(derived_enum("cover", "same", "1", {"m": mode})),
    # -- RangeSeries ------------------------------------------------------------------------------
    (R, "threshold"): n.ranges(temp.above(90)),
    (R, "thresholdRangesV2"): n.ranges(r.threshold_v2(temp, "eq", 20, tolerance=0.5)),
    (R, "minMaxThreshold"): n.ranges(temp.bounds(1, 2, "OUTSIDE_BOUNDS")),
    (R, "enumFilter"): n.ranges(mode.is_in(["PARK"])),
    (R, "categoryFilterRangesV2"): n.ranges(r.category_ranges(mode, ["PARK"], negate=True)),
    (R, "booleanRanges"): n.ranges(r.condition_ranges(temp.gt(20) & temp.le(80))),
    (R, "not"): n.ranges(~hot),
    (R, "intersectRange"): n.ranges(hot & temp.below(100)),
    (R, "unionRange"): n.ranges(hot | temp.below(0)),
    (R, "approximateThreshold"): n.ranges(r.approximately(temp, 20, 0.5)),
    (R, "durationFilter"): n.ranges(r.held_for(hot, 5, v1=True)),
    (R, "durationFilterV2"): n.ranges(r.held_for(hot, 5, "LESS_THAN", unbounded="WINDOW_BOUND")),
    (R, "paddedRanges"): n.ranges(r.padded(hot, 2, "start", v1=True)),
    (R, "paddedRangesV2"): n.ranges(r.padded(hot, 2)),
    (R, "numericEqualityRangesV2"): n.ranges(r.all_equal(temp, rpm, tolerance=0.1)),
    (R, "seriesEqualityRangesNode"): n.ranges(r.all_equal(temp, rpm, negate=True, v1=True)),
    (R, "categoricalEqualityRangesV2"): n.ranges(r.all_equal(mode, gear)),
    (R, "enumSeriesEqualityRangesNode"): n.ranges(r.all_equal(mode, gear, v1=True)),
    (R, "stabilityDetection"): n.ranges(r.stable_v1(temp, 10, 0.5)),
    (R, "stabilityDetectionV2"): n.ranges(r.stable(temp, 10, 5, percentage=True)),
    (R, "onChange"): n.ranges(r.on_change(temp)),
    (R, "eventsSearch"): n.ranges(hot & n.events_search(n.event_query(asset=ASSET, event_type="FLAG"))),
    (R, "categoricalOnChangeRangesV2"): n.ranges(r.label_changes(mode)),
    (R, "seriesCrossoverRangesNode"): n.ranges(r.crossovers(temp, rpm)),
    (R, "peak"): n.ranges(r.peaks(temp, "TROUGH")),
    (R, "extremaRangesV2"): n.ranges(r.extrema(temp, "BOTH")),
    (R, "rangeNumericAggregation"): n.ranges(r.range_aggregate(hot, temp, "all")),
    (R, "raw"): n.ranges(r.ranges_variable(hot) & temp.below(100)),
    (R, "derived"): n.ranges(derived_ranges("cover", "hot", "1", {"v": temp})),
    # -- SelectValue ------------------------------------------------------------------------------
    (V, "firstPoint"): n.first_point(temp),
    (V, "lastPoint"): n.last_point(mode),
    (V, "firstValuePoint"): r.first_value_point(temp),
    (V, "lastValuePoint"): r.last_value_point(mode),
    (V, "firstRange"): r.first_range(hot),
    (V, "lastRange"): r.last_range(hot),
    (V, "nthRange"): r.nth_range(hot, 1, from_latest=True),
    # -- ComputableNode ---------------------------------------------------------------------------
    (C, "series"): n.series(temp, buckets=100, arrow="ARROW_V3", fields=["MEAN", "MAX"]),
    (C, "ranges"): n.ranges(hot, max_ranges=10),
    (C, "value"): n.last_point(temp),
    (C, "histogram"): ch.histogram({"temp": temp}, bucket_count=20),
    (C, "cartesian"): ch.scatter(rpm, temp, max_points=500, temporal=("MEAN", "MAX")),
    (C, "cartesian3d"): ch.scatter3d(rpm, temp, temp * 2),
    (C, "multivariate"): ch.multivariate([(temp, ["MEAN", "MAX"]), (mode, ["MODE"])], bucket_count=10),
}


# Further forms of the variants above, checked the same way.
MORE: dict[str, n.Computable] = {
    "series-output-fields-v2": n.series(
        temp, buckets=100, arrow="ARROW_V4", fields_v2=["SUM", "STANDARD_DEVIATION", 0.95, ("median", 0.5)]
    ),
    "series-numeric-aggregations": n.series(temp, buckets=50, aggregations={"p90": 0.9, "top": "max"}),
    "series-arrow-aggregations": n.series(
        temp, arrow="ARROW_V3", fields=["MIN"], aggregations={"n": "count"}
    ),
    "group-by-tag-subset": n.series(grouped.group_by("average", tags=["vehicle"])),
    "enum-channel-through-variable-ranges": n.ranges(r.ranges_variable(mode.is_in(["PARK"]))),
    "derived-in-derived-argument": n.series(
        derived_numeric("cover", "twice", "1", {"v": derived_numeric("cover", "twice", "1", {"v": temp})})
    ),
    "held-for-window-bound-v1": n.ranges(r.held_for(hot, 1, "LESS_THAN", unbounded="WINDOW_BOUND", v1=True)),
    "padded-end": n.ranges(r.padded(hot, 0.5, "end")),
    "stable-absolute-v1-percentage": n.ranges(r.stable_v1(temp, 3, 10, percentage=True, min_points=3)),
    "if-else-of-two-channels": n.series(n.if_else(temp.ne(rpm) | temp.eq(1), rpm, temp)),
}
BUILT = {f"{u}.{v}": node for (u, v), node in COVERAGE.items()} | {
    f"more.{k}": node for k, node in MORE.items()
}


def server_variants() -> set[tuple[str, str]]:
    """Every variant the compiler builds, less those it builds only to refuse."""
    return (
        {(S, k) for k in registry.built(S)}
        | {(E, k) for k in registry.built(E)}
        | {(R, k) for k in registry.built(R)}
        | {(C, k) for k in registry.built(C)}
        | {(V, k) for k in VARIANTS["SelectValue"]}
    )


def test_the_table_covers_every_variant_the_server_compiles() -> None:
    computing = server_variants()
    missing = sorted(computing - set(COVERAGE))
    assert not missing, f"no client builder in the table for {missing}"
    assert set(COVERAGE) <= computing, sorted(set(COVERAGE) - computing)


@pytest.mark.parametrize("key", sorted(REFUSED), ids=lambda k: f"{k[0]}.{k[1]}")
def test_the_variants_left_out_are_refused_by_name_whatever_they_hold(key: tuple[str, str]) -> None:
    """A variant is left out of the table only while the server refuses it outright: its builder
    refuses before reading its body (one that computes would find the empty body malformed)."""
    with pytest.raises(ComputeError) as refusal:
        registry.builder(*key)(Builder({}), {})
    assert refusal.value.name in ("InvalidComputation", "PollingOnlyComputation")


def _variants(value: Any) -> Iterator[str]:
    """Every union variant named in a node's JSON (`{"type": k, k: ...}`)."""
    if isinstance(value, dict):
        if isinstance(value.get("type"), str) and value["type"] in value:
            yield value["type"]
        for v in value.values():
            yield from _variants(v)
    elif isinstance(value, list):
        for v in value:
            yield from _variants(v)


@pytest.mark.parametrize("key", sorted(COVERAGE), ids=lambda k: f"{k[0]}.{k[1]}")
def test_each_built_node_holds_its_variant(key: tuple[str, str]) -> None:
    node = COVERAGE[key]
    variants = set(_variants(node.json))
    for value in node.variables.values():  # a ranges variable holds its node in the context
        variants |= set(_variants(value))
    assert key[1] in variants


def _drop_empty(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _drop_empty(v) for k, v in x.items() if v not in (None, [], {})}
    if isinstance(x, list):
        return [_drop_empty(v) for v in x]
    return x


@pytest.mark.parametrize("key", sorted(BUILT))
def test_each_built_request_is_what_nominal_api_encodes(key: str) -> None:
    request = BUILT[key].request(60)
    decoded = ConjureDecoder().read_from_string(json.dumps(request), pc.StreamingComputeNodeRequest)
    again = ConjureEncoder.do_encode(decoded)
    assert _drop_empty(again["node"]) == _drop_empty(request["node"])  # nothing lost or renamed
    assert _drop_empty(again["context"]["variables"]) == _drop_empty(request["context"]["variables"])
    # and the node as nominal-api's own class, built from its parts, encodes to the same JSON
    node = ConjureDecoder().read_from_string(json.dumps(request["node"]), sc.ComputableNode)
    assert _drop_empty(ConjureEncoder.do_encode(node)) == _drop_empty(request["node"])


class _Catalog:
    def __init__(self) -> None:
        self.one = Asset(ASSET, "rig", [DataScope("main", RID)], {}, {"gain": 2.5, "fluid": "LOX"})

    def asset(self, rid: str) -> Asset | None:
        return self.one if rid == ASSET else None

    def run(self, rid: str) -> None:
        return None

    def assets(self) -> list[Asset]:
        return [self.one]

    def runs(self) -> list[Any]:
        return []


@pytest.fixture
def server_state(tmp_path: Path) -> Catalogs:
    """The asset and the module the table's selections and derived nodes name."""
    modules = ModuleStore(tmp_path / "modules.sqlite")
    v, m = numeric_parameter("v"), enum_parameter("m")

    def function(name: str, parameters: dict[str, str], body: n.Node, kind: str) -> dict[str, Any]:
        return {
            "name": name,
            "description": "",
            "parameters": [{"name": k, "type": t} for k, t in parameters.items()],
            "functionNode": {"type": kind, kind: body.json},
            "isExported": True,
        }

    functions = [
        function("twice", {"v": "NUMERIC_SERIES"}, v * 2, "numeric"),
        function("same", {"m": "ENUM_SERIES"}, m, "enum"),
        function("hot", {"v": "NUMERIC_SERIES"}, v.above(90), "ranges"),
    ]
    modules.create("cover", "cover", "", {"functions": functions}, "u", 1)
    return Catalogs(assets=_Catalog(), modules=modules)


@pytest.mark.parametrize("key", sorted(BUILT))
def test_each_built_request_compiles_on_the_server(key: str, server_state: Catalogs) -> None:
    request = BUILT[key].request(60)
    variables = request["context"]["variables"]
    plan = c.compile_plan(
        request["node"], 60 * 10**9, variables, Limits(), ResultOptions(), catalogs=server_state
    )
    assert plan.selectors, "the plan reads no channel"


# -- the same nodes built with nominal-api's own classes, field by field -------------------------------
def _ref(x: n.Node) -> sc.Reference:
    (name,) = x.variables
    return sc.Reference(name=name)


def _num(x: n.Node) -> sc.NumericSeries:
    return sc.NumericSeries(raw=_ref(x))


def _lit(v: float) -> sc.DoubleConstant:
    return sc.DoubleConstant(literal=v)


def _const(v: float) -> sc.NumericSeries:
    return sc.NumericSeries(constant=sc.ConstantNumericSeries(double=_lit(v)))


def _seconds(s: int) -> sc.Duration:
    return sc.Duration(seconds=sc.DurationSeconds(seconds=sc.IntegerConstant(literal=s)))


T, P, M = _num(temp), _num(rpm), sc.EnumSeries(raw=_ref(mode))
HOT = sc.RangeSeries(
    threshold=sc.ThresholdingRanges(input=T, threshold=_lit(90.0), operator=sc.ThresholdOperator.GREATER_THAN)
)
NOMINAL: dict[str, tuple[n.Node, Any]] = {
    "contains": (
        logs.contains(
            n.log_any(n.log_all(n.log_token("err"), n.log_arg("host", "^a")), n.log_not(n.log_regex("ok$")))
        ),
        sc.NumericSeries(
            contains=sc.ContainsSeries(
                input=sc.LogSeries(raw=_ref(logs)),
                operator=sc.LogFilterOperator(
                    or_=[
                        sc.LogFilterOperator(
                            and_=[
                                sc.LogFilterOperator(
                                    exact_match_case_insensitive_filter=sc.LogExactMatchCaseInsensitiveFilter(
                                        token="err"
                                    )
                                ),
                                sc.LogFilterOperator(
                                    arg=sc.LogArgFilterOperator(
                                        key=sc.StringConstant(literal="host"),
                                        operator=sc.LogRegexFilterOperator(regex="^a"),
                                    )
                                ),
                            ]
                        ),
                        sc.LogFilterOperator(
                            not_=sc.LogFilterOperator(regex_filter=sc.LogRegexFilterOperator(regex="ok$"))
                        ),
                    ]
                ),
            )
        ),
    ),
    "ifElse": (
        n.if_else(temp.gt(90), temp, 0),
        sc.NumericSeries(
            if_else=sc.NumericIfElseSeries(
                condition=sc.BooleanSeries(greater_than=sc.GreaterThanSeries(left=T, right=_const(90.0))),
                true_value=T,
                false_value=_const(0.0),
            )
        ),
    ),
    "arithmetic": (
        n.expression("sin(x) * 2 + 1", {"x": temp}),
        sc.NumericSeries(arithmetic=sc.ArithmeticSeries(inputs={"x": T}, expression="sin(x) * 2 + 1")),
    ),
    "filterByExpression": (
        n.filter_by_expression("x", "x > y", {"x": temp, "y": rpm}),
        sc.NumericSeries(
            filter_by_expression=sc.FilterByExpressionSeries(
                base="x", inputs={"x": T, "y": P}, expression="x > y"
            )
        ),
    ),
    "union": (
        n.union_points(temp, rpm, operation="MEAN"),
        sc.NumericSeries(union=sc.NumericUnionSeries(input=[T, P], operation=sc.NumericUnionOperation.MEAN)),
    ),
    "selectNewestPoints": (
        temp.newest_points(5),
        sc.NumericSeries(
            select_newest_points=sc.SelectNewestPointsSeries(
                input=T, num_points=sc.IntegerConstant(literal=5)
            )
        ),
    ),
    "approximateFilter": (
        temp.near(20, 0.5, equal=False),
        sc.NumericSeries(
            approximate_filter=sc.NumericApproximateFilterSeries(
                input=T,
                threshold=_lit(20.0),
                tolerance=_lit(0.5),
                operator=sc.ApproximateThresholdOperator.NOT_EQUAL_TO,
            )
        ),
    ),
    "rollingPoints-percentile": (
        temp.rolling_points(4, "percentile", 0.9),
        sc.NumericSeries(
            numeric_aggregation=sc.NumericAggregation(
                input=sc.AggregationBuilder(
                    rolling_points=sc.RollingPointsAggregationBuilder(
                        input=sc.Series(numeric=T), points=sc.IntegerConstant(literal=4)
                    )
                ),
                operator=sc.NumericAggregationOperator(percentile=sc.Percentile(percentile=_lit(0.9))),
            )
        ),
    ),
    "groupBy-every": (
        temp.group_by("sum", every_seconds=2),
        sc.NumericSeries(
            numeric_aggregation=sc.NumericAggregation(
                input=sc.AggregationBuilder(
                    group_by=sc.GroupByAggregationBuilder(
                        input=sc.Series(numeric=T),
                        tags=sc.GroupByTags(current=api.Empty()),
                        timestamp=sc.GroupByTimestamp(every=_seconds(2)),
                    )
                ),
                operator=sc.NumericAggregationOperator(sum=sc.Summation()),
            )
        ),
    ),
    "aggregateUnderRanges": (
        n.under_ranges(temp, hot, "MAX"),
        sc.NumericSeries(
            aggregate_under_ranges=sc.AggregateUnderRangesSeries(
                input=T, ranges=HOT, operation=sc.NumericAggregationFunction.MAX
            )
        ),
    ),
    "rangeDuration": (
        n.range_duration(hot, "drop"),
        sc.NumericSeries(
            range_duration=sc.RangeDurationSeries(
                input=HOT, unbounded_range_behavior=sc.UnboundedRangeBehavior(drop=api.Empty())
            )
        ),
    ),
    "enumToNumeric": (
        n.enum_to_numeric(mode, {"PARK": 0}, default=-1),
        sc.NumericSeries(
            enum_to_numeric=sc.EnumToNumericSeries(
                input=M, mapping={"PARK": _lit(0.0)}, default_value=_lit(-1.0)
            )
        ),
    ),
    "offset": (temp.offset(3), sc.NumericSeries(offset=sc.OffsetSeries(input=T, scalar=_lit(3.0)))),
    "durationFilter": (
        r.held_for(hot, 5, v1=True),
        sc.RangeSeries(
            duration_filter=sc.DurationFilterRanges(
                input=HOT,
                threshold=sc.DurationConstant(literal=scout_run_api.Duration(seconds=5, nanos=0)),
                operator=sc.ThresholdOperator.GREATER_THAN,
                unbounded_behavior=sc.UnboundedBehavior.INFINITY,
            )
        ),
    ),
    "booleanRanges": (
        r.condition_ranges(temp.gt(20) & temp.le(80)),
        sc.RangeSeries(
            boolean_ranges=sc.BooleanRanges(
                input=sc.BooleanSeries(
                    and_=sc.AndSeries(
                        left=sc.BooleanSeries(greater_than=sc.GreaterThanSeries(left=T, right=_const(20.0))),
                        right=sc.BooleanSeries(
                            less_than_or_equal_to=sc.LessThanOrEqualToSeries(left=T, right=_const(80.0))
                        ),
                    )
                )
            )
        ),
    ),
    "peak": (
        r.peaks(temp, "TROUGH"),
        sc.RangeSeries(peak=sc.PeakRanges(input=T, return_type=sc.PeakType.TROUGH)),
    ),
    "categoricalOnChangeRangesV2": (
        r.label_changes(mode),
        sc.RangeSeries(categorical_on_change_ranges_v2=sc.CategoricalOnChangeRangesV2(input=M)),
    ),
    "enumAggregation": (
        r.enum_aggregation(mode, "min"),
        sc.EnumSeries(
            enum_aggregation=sc.EnumAggregation(
                input=sc.AggregationBuilder(
                    group_by=sc.GroupByAggregationBuilder(
                        input=sc.Series(enum=M),
                        tags=sc.GroupByTags(current=api.Empty()),
                        timestamp=sc.GroupByTimestamp(current=api.Empty()),
                    )
                ),
                operator=sc.EnumAggregationOperator(min=api.Empty()),
            )
        ),
    ),
    "enum timeShiftV2": (
        mode.time_shift(2, v2=True),
        sc.EnumSeries(time_shift_v2=sc.EnumTimeShiftSeriesV2(input=M, duration=_seconds(2))),
    ),
}


@pytest.mark.parametrize("key", sorted(NOMINAL))
def test_the_builders_equal_nodes_built_with_nominal_api_classes(key: str) -> None:
    built, nominal = NOMINAL[key]
    assert _drop_empty(built.json) == _drop_empty(ConjureEncoder.do_encode(nominal))
