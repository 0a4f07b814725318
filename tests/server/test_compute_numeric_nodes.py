"""The NumericSeries variants beyond the first subset over a real server, each node built with
nominal-compute or nominal-api's own classes and sent as Conjure JSON: trigonometry, power, modulo,
floor division, atan2, the bit operations, offset, scale, the deprecated arithmetic enums, if/else,
the cross-series reductions, union, the newest points, NaN and approximate filters, time
differences, absolute timestamps, enum-to-numeric and the deprecated rolling operation.

The scenario of tests/test_compute_nodes.py (history, late points, an overwrite, a tag combination
appearing mid-stream, points older than all others): every node's FullResult merged with its
AppendResults must equal a fresh FullResult and tests/reference_numeric.py's evaluation, written
from nominal-api's docs."""

from __future__ import annotations

import json
import time
from typing import Any

import nominal.compute as nc
import pytest
from conjure_python_client import ConjureEncoder
from nominal_api import api as api_types
from nominal_api import scout_compute_api as sc
from nominal_api import scout_run_api

from tests import node_json as n
from tests.conftest import ServerProcess
from tests.server.test_compute_nodes import (
    WINDOW_S,
    Outcome,
    context,
    merged_equals_reference_and_fresh,
    play_scenario,
    reached_by_an_append,
)
from tests.wire import DECODER, NANOS, Client, ns_of, subscription, write_points

A, B, G = (nc.NumericSeries.Reference(x) for x in ("a", "b", "g"))
Json = dict[str, Any]


def api(expr: nc.NumericSeries) -> sc.NumericSeries:
    """nominal-compute's JSON decoded by nominal-api (which refuses anything it does not know)."""
    decoded: sc.NumericSeries = DECODER.read_from_string(expr.to_json(), sc.NumericSeries)
    return decoded


def node(numeric: nc.NumericSeries | sc.NumericSeries) -> Json:
    x = numeric if isinstance(numeric, sc.NumericSeries) else api(numeric)
    summarize = sc.SummarizeSeries(input=sc.Series(numeric=x), numeric_aggregations={})
    return dict(ConjureEncoder.do_encode(sc.ComputableNode(series=summarize)))


def lit(x: float) -> sc.DoubleConstant:
    return sc.DoubleConstant(literal=x)


def radius(seconds: int) -> sc.InterpolationConfiguration:
    ffill = sc.ForwardFillInterpolation(interpolation_radius=sc.DurationConstant(literal=_duration(seconds)))
    return sc.InterpolationConfiguration(forward_fill_interpolation=ffill)


def _duration(seconds: int) -> Any:
    return scout_run_api.Duration(seconds=seconds, nanos=0)


E_ENUM = sc.EnumSeries(raw=sc.Reference(name="e"))
B_1MS_LATER = sc.NumericSeries(
    time_shift=sc.NumericTimeShiftSeries(
        input=api(B), duration=sc.DurationConstant(literal=scout_run_api.Duration(seconds=0, nanos=1_000_000))
    )
)
A_ABOVE_1: sc.RangeSeries = DECODER.read_from_string(
    json.dumps(n.threshold(n.num("a"), "GREATER_THAN", n.literal(1.0))), sc.RangeSeries
)
SINCE = time.time_ns() - 150 * NANOS  # timeRangeFilter's start: within the history written


def every(seconds: int) -> sc.Duration:
    return sc.Duration(seconds=sc.DurationSeconds(seconds=sc.IntegerConstant(literal=seconds)))


def aggregation(builder: sc.AggregationBuilder, operator: sc.NumericAggregationOperator) -> sc.NumericSeries:
    return sc.NumericSeries(numeric_aggregation=sc.NumericAggregation(input=builder, operator=operator))


def group_by(x: sc.NumericSeries, stamp: sc.GroupByTimestamp) -> sc.AggregationBuilder:
    current = sc.GroupByTags(current=api_types.Empty())
    return sc.AggregationBuilder(
        group_by=sc.GroupByAggregationBuilder(input=sc.Series(numeric=x), tags=current, timestamp=stamp)
    )


CASES: dict[str, Json] = {
    "sin": node(nc.sin(A)),
    "cos": node(nc.cos(A)),
    "tan": node(nc.tan(A)),
    "asin_with_nan": node(nc.asin(A)),
    "acos_scaled": node(nc.acos(A * 0.2)),
    "power_zero_to_negative": node(B**A),
    "square": node(A**2.0),
    "modulo": node(A % B),
    "floor_divide_by_zero": node(A // B),
    "atan2": node(nc.atan2(A, B)),
    "bit_and": node((A * 10.0).bit_and(5)),
    "bit_or_negative": node(A.bit_or(-8)),
    "bit_xor": node(A.bit_xor(3)),
    "bit_shift_left_wraps": node((A * 100.0).bit_shift_left(60)),
    "bit_shift_right": node((A * 100.0).bit_shift_right(2)),
    "bit_test_of_nan_drops": node(nc.sqrt(A * 10.0).bit_test(1)),
    "bit_operation": node(
        sc.NumericSeries(
            bit_operation=sc.BitOperationSeries(
                input=api(A * 16.0), function=sc.BitOperationFunction(xor=sc.BitXorFunction(operand=9))
            )
        )
    ),
    "offset": node(sc.NumericSeries(offset=sc.OffsetSeries(input=api(A), scalar=lit(1.5)))),
    "scale": node(sc.NumericSeries(scale=sc.ScaleSeries(input=api(B), scalar=lit(-2.0)))),
    "unary_arithmetic_log": node(
        sc.NumericSeries(
            unary_arithmetic=sc.UnaryArithmeticSeries(input=api(B), operation=sc.UnaryArithmeticOperation.LOG)
        )
    ),
    "binary_arithmetic_atan2": node(
        sc.NumericSeries(
            binary_arithmetic=sc.BinaryArithmeticSeries(
                input1=api(A), input2=api(B), operation=sc.BinaryArithmeticOperation.ATAN2
            )
        )
    ),
    "if_else_two_series": node(nc.numeric_if_else((A > B) | (A < -3.0), A, B)),
    "if_else_constant_branch": node(nc.numeric_if_else(A > 1.0, A, 0.0)),
    "max": node(nc.max([A, B, A * -1.0])),
    "min": node(nc.min([A, B])),
    "mean_radius_3s": node(
        sc.NumericSeries(mean=sc.MeanSeries(inputs=[api(A), api(B)], interpolation_configuration=radius(3)))
    ),
    "sum": node(nc.sum([A, B, 1.0])),
    "product": node(nc.product([A, B])),
    # b shifted by 1 ms: the channels' first points share a timestamp, and a client's view keeps one
    # point per timestamp, so duplicates kept by a plain union are checked elsewhere
    "union": node(sc.NumericSeries(union=sc.NumericUnionSeries(input=[api(A), B_1MS_LATER]))),
    "union_max_of_duplicates": node(
        sc.NumericSeries(
            union=sc.NumericUnionSeries(input=[api(A), api(A * -1.0)], operation=sc.NumericUnionOperation.MAX)
        )
    ),
    "select_newest_points": node(
        sc.NumericSeries(
            select_newest_points=sc.SelectNewestPointsSeries(
                input=api(A), num_points=sc.IntegerConstant(literal=7)
            )
        )
    ),
    # a: round 4 writes a point older than all others, which must reach the oldest nine live
    "select_oldest_points": node(
        sc.NumericSeries(
            select_oldest_points=sc.SelectOldestPointsSeries(
                input=api(A), num_points=sc.IntegerConstant(literal=9)
            )
        )
    ),
    "nth_point_downsample": node(A.nth_point_downsample(4)),
    "drop_nan": node(nc.sqrt(A).drop_nan()),
    "approximate_filter": node(
        sc.NumericSeries(
            approximate_filter=sc.NumericApproximateFilterSeries(
                input=api(A),
                threshold=lit(1.0),
                tolerance=lit(2.0),
                operator=sc.ApproximateThresholdOperator.EQUAL_TO,
            )
        )
    ),
    "time_difference_ms": node(
        sc.NumericSeries(
            time_difference=sc.TimeDifferenceSeries(
                input=sc.Series(numeric=api(B)), time_unit=api_types.TimeUnit.MILLISECONDS
            )
        )
    ),
    "absolute_timestamp_of_enum": node(
        sc.NumericSeries(
            absolute_timestamp=sc.AbsoluteTimestampSeries(
                input=sc.Series(enum=E_ENUM), time_unit=api_types.TimeUnit.SECONDS
            )
        )
    ),
    "enum_to_numeric": node(
        sc.NumericSeries(
            enum_to_numeric=sc.EnumToNumericSeries(input=E_ENUM, mapping={"run": lit(1.0), "fault": lit(2.0)})
        )
    ),
    "enum_to_numeric_default": node(
        sc.NumericSeries(
            enum_to_numeric=sc.EnumToNumericSeries(
                input=E_ENUM, mapping={"run": lit(1.0)}, default_value=lit(-1.0)
            )
        )
    ),
    "rolling_operation": node(
        sc.NumericSeries(
            rolling_operation=sc.RollingOperationSeries(
                input=api(A),
                window=sc.Window(duration=sc.DurationConstant(literal=_duration(10))),
                operator=sc.NumericAggregationOperator(max=sc.Maximum()),
            )
        )
    ),
    "unit_override": node(sc.NumericSeries(unit_override=sc.UnitOverrideSeries(input=api(A), unit="[psi]"))),
    "unit_conversion_psi_to_kpa": node(
        api(A).__class__(
            unit_conversion=sc.UnitConversionSeries(
                input=sc.NumericSeries(unit_override=sc.UnitOverrideSeries(input=api(A), unit="[psi]")),
                output_unit="kPa",
            )
        )
    ),
    "unit_conversion_celsius_to_fahrenheit": node(
        sc.NumericSeries(
            unit_conversion=sc.UnitConversionSeries(
                input=sc.NumericSeries(unit_override=sc.UnitOverrideSeries(input=api(B), unit="Cel")),
                output_unit="[degF]",
            )
        )
    ),
    "unit_conversion_speed": node(
        sc.NumericSeries(
            unit_conversion=sc.UnitConversionSeries(
                input=sc.NumericSeries(unit_override=sc.UnitOverrideSeries(input=api(B), unit="km/h")),
                output_unit="m/s",
            )
        )
    ),
    "arithmetic_expression": node(
        sc.NumericSeries(
            arithmetic=sc.ArithmeticSeries(
                inputs={"a": api(A), "b": api(B)}, expression="a * 2 + b^2 - sqrt(abs(a))"
            )
        )
    ),
    "arithmetic_division_by_zero": node(
        sc.NumericSeries(
            arithmetic=sc.ArithmeticSeries(
                inputs={"a": api(A), "b": api(A * -1.0)},
                expression="(a - b) / (a + b)",
                interpolation_configuration=radius(2),
            )
        )
    ),
    "filter_by_expression": node(
        sc.NumericSeries(
            filter_by_expression=sc.FilterByExpressionSeries(
                base="a", inputs={"a": api(A), "b": api(B)}, expression="a > 1 && b < 10"
            )
        )
    ),
    "filter_by_expression_chained": node(
        sc.NumericSeries(
            filter_by_expression=sc.FilterByExpressionSeries(
                base="b", inputs={"a": api(A), "b": api(B)}, expression="-3 <= a <= 3 or not (b > 5)"
            )
        )
    ),
    "rolling_points_percentile": node(A.rolling_points(5).percentile(0.9)),
    "rolling_time_percentile": node(A.rolling_time(nc.Duration.Seconds(10)).percentile(0.25)),
    "rolling_points_std": node(A.rolling_points(4).std()),
    "group_by_every_10s_mean": node(
        aggregation(
            group_by(api(A), sc.GroupByTimestamp(every=every(10))),
            sc.NumericAggregationOperator(average=sc.Average()),
        )
    ),
    "to_start_of_interval_then_group_by_max": node(
        aggregation(
            group_by(
                api(A.to_start_of_interval(nc.Duration.Seconds(10))),
                sc.GroupByTimestamp(current=api_types.Empty()),
            ),
            sc.NumericAggregationOperator(max=sc.Maximum()),
        )
    ),
    "aggregate_duplicates_max": node(
        sc.NumericSeries(
            aggregate=sc.AggregateNumericSeries(
                input=sc.NumericSeries(union=sc.NumericUnionSeries(input=[api(A), api(A * -1.0)])),
                function=sc.NumericAggregationFunction.MAX,
                group_by_tags=[],
            )
        )
    ),
    "filter_transformation": node(
        sc.NumericSeries(
            filter_transformation=sc.NumericFilterTransformationSeries(input=api(B), filter=A_ABOVE_1)
        )
    ),
    "aggregate_under_ranges": node(
        sc.NumericSeries(
            aggregate_under_ranges=sc.AggregateUnderRangesSeries(
                input=api(B), ranges=A_ABOVE_1, operation=sc.NumericAggregationFunction.MEAN
            )
        )
    ),
    "group_within_ranges_percentile": node(
        sc.NumericSeries(
            group_within_ranges_v2=sc.GroupWithinRangesSeriesV2(
                input=api(B),
                ranges=A_ABOVE_1,
                aggregation=sc.NumericAggregationOperator(percentile=sc.Percentile(percentile=lit(0.5))),
            )
        )
    ),
    "range_duration_ms": node(
        sc.NumericSeries(
            range_duration=sc.RangeDurationSeries(
                input=A_ABOVE_1,
                unbounded_range_behavior=sc.UnboundedRangeBehavior(drop=api_types.Empty()),
                time_unit=api_types.TimeUnit.MILLISECONDS,
            )
        )
    ),
    "count_duplicate": node(
        sc.NumericSeries(count_duplicate=sc.EnumCountDuplicateSeries(inputs=[E_ENUM, E_ENUM]))
    ),
    "resample_v2": node(A.resample(nc.Duration.Seconds(5))),
    "resample_v1_default_forward_fill": node(
        sc.NumericSeries(
            resample=sc.NumericResampleSeries(
                input=api(A),
                resample_configuration=sc.NumericResampleConfiguration(
                    interval=sc.DurationConstant(literal=_duration(3))
                ),
            )
        )
    ),
    "resample_v1_forward_fill_of_b": node(
        sc.NumericSeries(
            resample=sc.NumericResampleSeries(
                input=api(B),
                resample_configuration=sc.NumericResampleConfiguration(
                    interval=sc.DurationConstant(literal=_duration(7)),
                    interpolation=sc.NumericResampleInterpolationConfiguration(
                        forward_fill_resample_interpolation_configuration=(
                            sc.ForwardFillResampleInterpolationConfiguration()
                        )
                    ),
                ),
            )
        )
    ),
    "time_range_filter_since": node(
        sc.NumericSeries(
            time_range_filter=sc.NumericTimeRangeFilterSeries(
                input=api(A),
                start_time=sc.TimestampConstant(
                    literal=api_types.Timestamp(seconds=SINCE // NANOS, nanos=SINCE % NANOS)
                ),
            )
        )
    ),
    "grouped_max_with_shared_channel": node(nc.max([G, A])),
    "grouped_bit_test": node((G * 10.0).bit_test(0)),
    "grouped_if_else": node(nc.numeric_if_else(G > 0.0, G, A)),
}


# -- across groups: filterByTag, selectTags, zScore -----------------------------------------------
# gs: channel g grouped by site (which no series carries: "") and vehicle; gu: channel g not grouped
GS = sc.NumericSeries(raw=sc.Reference(name="gs"))
GU = sc.NumericSeries(raw=sc.Reference(name="gu"))
# nominal-api's SelectSeries without a name: every channel of the scenario's data source (its rid as
# the variable `rid`), narrowed by filterByTag on NOMINAL_CHANNEL
EVERY_CHANNEL = sc.NumericSeries(
    select_numeric=sc.SelectSeries(
        dataset=sc.Dataset(saved=sc.SavedDataset(rid=sc.StringConstant(variable="rid")))
    )
)


def tags_in(key: str, *values: str, negate: bool = False) -> sc.TagPredicate:
    strings = sc.StringSetConstantV2(literal=[sc.StringConstant(literal=v) for v in values])
    name = sc.StringConstant(literal=key)
    if negate:
        return sc.TagPredicate(not_in=sc.TagNotIn(key=name, values=strings))
    return sc.TagPredicate(in_=sc.TagIn(key=name, values=strings))


def tag_filter(x: sc.NumericSeries, predicate: sc.TagPredicate) -> sc.NumericSeries:
    return sc.NumericSeries(filter_by_tag=sc.NumericTagFilterSeries(input=x, predicate=predicate))


def select_tags(x: sc.NumericSeries, *keys: str) -> sc.NumericSeries:
    return sc.NumericSeries(
        select_tags=sc.NumericSelectTagsSeries(input=x, tag_keys=[sc.StringConstant(literal=k) for k in keys])
    )


def z_score(x: sc.NumericSeries, *family: str, within: int | None = None) -> sc.NumericSeries:
    return sc.NumericSeries(
        z_score=sc.ZscoreSeries(
            input=x,
            group_by_tags=[sc.StringConstant(literal=k) for k in family],
            interpolation_configuration=None if within is None else radius(within),
        )
    )


def bucketed(x: sc.NumericSeries, buckets: int) -> Json:
    summarize = sc.SummarizeSeries(input=sc.Series(numeric=x), numeric_aggregations={}, buckets=buckets)
    return dict(ConjureEncoder.do_encode(sc.ComputableNode(series=summarize)))


CROSS_GROUP_CASES: dict[str, Json] = {
    "tag_filter_in": node(tag_filter(api(G), tags_in("vehicle", "v1", "v3"))),
    "tag_filter_not_in_and": node(
        tag_filter(
            api(G),
            sc.TagPredicate(
                and_=sc.TagAnd(
                    left=tags_in("vehicle", "v2", negate=True), right=tags_in("vehicle", "v1", "v2", "v3")
                )
            ),
        )
    ),
    "grouped_select_tags_drops_a_tag": node(select_tags(GS, "vehicle")),
    # a tag the input is not grouped by: the series the channel read takes, by their own tags
    "tag_filter_on_an_ungrouped_channel": node(tag_filter(GU, tags_in("vehicle", "v1", "v3"))),
    "tag_filter_not_in_on_an_ungrouped_channel_times_a": node(
        sc.NumericSeries(
            product=sc.ProductSeries(inputs=[tag_filter(GU, tags_in("vehicle", "v2", negate=True)), api(A)])
        )
    ),
    "grouped_select_tags_of_an_ungrouped_channel": node(select_tags(GU, "vehicle")),
    "select_tags_beyond_the_grouping": node(select_tags(api(G), "vehicle", "site")),
    "channels_named_by_nominal_channel_merged": node(
        tag_filter(EVERY_CHANNEL, tags_in("NOMINAL_CHANNEL", "a", "b"))
    ),
    "channels_named_by_nominal_channel_kept_apart": node(
        select_tags(tag_filter(EVERY_CHANNEL, tags_in("NOMINAL_CHANNEL", "a", "b")), "NOMINAL_CHANNEL")
    ),
    # every vehicle in one group: their points at shared timestamps all counted in the buckets
    "select_tags_every_vehicle_as_one_bucketed": bucketed(select_tags(api(G)), 20),
    "grouped_z_score_within_4s": node(z_score(api(G), within=4)),
    "z_score_by_site_plus_shared_a": node(
        sc.NumericSeries(sum=sc.SumSeries(inputs=[z_score(GS, "site"), api(A)]))
    ),
    "grouped_z_score_of_selected_tags": node(z_score(select_tags(GS, "vehicle"), within=3)),
    # groupBy with a subset of the tags: every vehicle's points in 10 s buckets, one mean per bucket
    "group_by_no_tag_every_10s_mean": node(
        aggregation(
            sc.AggregationBuilder(
                group_by=sc.GroupByAggregationBuilder(
                    input=sc.Series(numeric=api(G)),
                    tags=sc.GroupByTags(subset=sc.GroupBySubsetTags(tags=[])),
                    timestamp=sc.GroupByTimestamp(every=every(10)),
                )
            ),
            sc.NumericAggregationOperator(average=sc.Average()),
        )
    ),
    "grouped_group_by_vehicle_max_at_each_timestamp": node(
        aggregation(
            sc.AggregationBuilder(
                group_by=sc.GroupByAggregationBuilder(
                    input=sc.Series(numeric=GS),
                    tags=sc.GroupByTags(
                        subset=sc.GroupBySubsetTags(tags=[sc.StringConstant(literal="vehicle")])
                    ),
                    timestamp=sc.GroupByTimestamp(current=api_types.Empty()),
                )
            ),
            sc.NumericAggregationOperator(max=sc.Maximum()),
        )
    ),
}
CASES.update(CROSS_GROUP_CASES)
GROUPED = {name for name in CASES if name.startswith("grouped_")}


def variables_of(rid: str) -> dict[str, Any]:
    """tests/test_compute_nodes.py's context, and channel g grouped by two tags and by none."""
    return {
        **context(rid),
        "gs": n.channel(rid, "g", group_by=["site", "vehicle"]),
        "gu": n.channel(rid, "g"),
    }


@pytest.fixture(scope="module")
async def outcome(server: ServerProcess) -> Outcome:
    rid = f"ri.test.numeric.{time.time_ns()}"
    return await play_scenario(server, CASES, rid, variables_of(rid), seed=20261126)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", list(CASES))
async def test_merged_result_equals_reference_and_a_fresh_full_result(outcome: Outcome, name: str) -> None:
    merged = merged_equals_reference_and_fresh(outcome, name)
    assert any(points for _, points in merged.values()), f"{name}: every group is empty"
    reached_by_an_append(outcome, name)


@pytest.mark.parametrize("name", sorted(GROUPED))
async def test_grouped_nodes_follow_a_tag_combination_appearing_mid_stream(
    outcome: Outcome, name: str
) -> None:
    view = outcome.views[name]
    assert set(view.snapshot()) == {(("vehicle", v),) for v in ("v1", "v2", "v3")}
    assert view.fulls >= 2, "the new group came with a FullResult"


async def test_a_plain_union_keeps_points_that_share_a_timestamp(server: ServerProcess) -> None:
    """Nominal's union is SQL UNION ALL: both points of a shared timestamp reach the client, in the
    inputs' order, and a later point of either input appends after them."""
    rid = f"ri.test.union.{time.time_ns()}"
    t0 = time.time_ns() - 30 * NANOS
    await write_points(server.base_url, rid, "p", [(t0, 1.0), (t0 + NANOS, 2.0)])
    await write_points(server.base_url, rid, "q", [(t0, 5.0)])
    p, q = (nc.NumericSeries.SelectNumeric(c, nc.Dataset.Saved(rid)) for c in ("p", "q"))
    union = node(sc.NumericSeries(union=sc.NumericUnionSeries(input=[api(p), api(q)])))
    client = await Client.connect(server.ws_url)
    try:
        await client.subscribe({"u": subscription(union, {}, WINDOW_S, lateness_s=WINDOW_S)})
        assert (await client.creation("u", timeout=120))["type"] == "success"
        full = await client.update("u", timeout=300)
        assert full["type"] == "full", full
        body = full["full"]["result"]["numeric"]
        assert [ns_of(t) for t in body["timestamps"]] == [t0, t0, t0 + NANOS]
        assert body["values"] == [1.0, 5.0, 2.0]
        t1 = time.time_ns()
        await write_points(server.base_url, rid, "q", [(t1, 7.0)])
        deadline = time.monotonic() + 240
        while True:
            update = await client.update("u", timeout=max(1.0, deadline - time.monotonic()))
            assert update["type"] == "append", update
            appended = update["append"]["result"]["numeric"]
            if appended["values"]:
                break
        assert [ns_of(t) for t in appended["timestamps"]] == [t1]
        assert appended["values"] == [7.0]
    finally:
        await client.close()


def _vehicles(*names: str) -> set[tuple[tuple[str, str], ...]]:
    return {(("vehicle", v),) for v in names}


async def test_tag_filters_and_selections_keep_the_groups_they_name(outcome: Outcome) -> None:
    keys = {name: set(outcome.views[name].snapshot()) for name in CROSS_GROUP_CASES}
    assert keys["tag_filter_in"] == _vehicles("v1", "v3")
    assert keys["tag_filter_not_in_and"] == _vehicles("v1", "v3")
    assert keys["select_tags_every_vehicle_as_one_bucketed"] == {()}
    assert keys["group_by_no_tag_every_10s_mean"] == {()}
    assert keys["z_score_by_site_plus_shared_a"] == {(("site", ""), *v) for v in _vehicles("v1", "v2", "v3")}
    assert keys["tag_filter_on_an_ungrouped_channel"] == {()}
    assert keys["tag_filter_not_in_on_an_ungrouped_channel_times_a"] == {()}
    assert keys["select_tags_beyond_the_grouping"] == {
        (("site", ""), *v) for v in _vehicles("v1", "v2", "v3")
    }
    assert keys["channels_named_by_nominal_channel_merged"] == {()}
    assert keys["channels_named_by_nominal_channel_kept_apart"] == {
        (("NOMINAL_CHANNEL", "a"),),
        (("NOMINAL_CHANNEL", "b"),),
    }
    assert outcome.views["tag_filter_in"].fulls >= 2, "v3 appearing mid-stream came with a FullResult"


async def test_selected_tags_keep_every_point_of_the_groups_they_join(server: ServerProcess) -> None:
    """selectTags keeps the points of groups that come to share their tags ("points that share the
    selected keys but differ on dropped keys remain distinct"): two points at one timestamp are two
    points of the joined group, in the order of the groups' tags, and a later point of either
    appends after them. zScore over two groups is -1 and +1 where both have a value."""
    rid = f"ri.test.select_tags.{time.time_ns()}"
    t0 = time.time_ns() - 30 * NANOS
    for site, vehicle, points in (
        ("north", "v1", [(t0, 1.0), (t0 + NANOS, 2.0)]),
        ("south", "v1", [(t0, 5.0)]),
        ("north", "v2", [(t0 + NANOS // 2, 9.0)]),
    ):
        await write_points(server.base_url, rid, "p", points, tags={"site": site, "vehicle": vehicle})
    p = sc.NumericSeries(raw=sc.Reference(name="p"))
    variables = {"p": n.channel(rid, "p", group_by=["site", "vehicle"])}
    client = await Client.connect(server.ws_url)
    try:
        await client.subscribe(
            {
                "by_vehicle": subscription(
                    node(select_tags(p, "vehicle")), variables, WINDOW_S, lateness_s=60
                ),
                "z": subscription(
                    node(z_score(select_tags(p, "vehicle"), within=2)), variables, WINDOW_S, lateness_s=60
                ),
            }
        )
        for sub in ("by_vehicle", "z"):
            assert (await client.creation(sub, timeout=120))["type"] == "success"
        full = await client.update("by_vehicle", timeout=300)
        assert full["type"] == "full", full
        groups = {
            json.dumps(r["grouping"]["tagsWithValues"]): r["response"]["numeric"]
            for r in full["full"]["result"]["grouped"]["responses"]
        }
        assert set(groups) == {'{"vehicle": "v1"}', '{"vehicle": "v2"}'}
        v1 = groups['{"vehicle": "v1"}']
        assert [ns_of(t) for t in v1["timestamps"]] == [t0, t0, t0 + NANOS]
        assert v1["values"] == [1.0, 5.0, 2.0]  # north's point, then south's, at t0
        z = await client.update("z", timeout=300)
        scores = {
            json.dumps(r["grouping"]["tagsWithValues"]): r["response"]["numeric"]
            for r in z["full"]["result"]["grouped"]["responses"]
        }
        # at t0 + 0.5 s: v1's newest is south's 5.0 (the later of t0's two points), v2 has 9.0
        assert [ns_of(t) for t in scores['{"vehicle": "v1"}']["timestamps"]] == [t0 + NANOS // 2, t0 + NANOS]
        assert scores['{"vehicle": "v1"}']["values"] == [-1.0, -1.0]
        assert scores['{"vehicle": "v2"}']["values"] == [1.0, 1.0]
        t1 = time.time_ns()
        await write_points(server.base_url, rid, "p", [(t1, 7.0)], tags={"site": "south", "vehicle": "v1"})
        deadline = time.monotonic() + 240
        while True:
            update = await client.update("by_vehicle", timeout=max(1.0, deadline - time.monotonic()))
            assert update["type"] == "append", update
            appended = {
                json.dumps(r["grouping"]["tagsWithValues"]): r["response"]["numeric"]
                for r in update["append"]["result"]["grouped"]["responses"]
            }
            if appended.get('{"vehicle": "v1"}', {}).get("values"):
                break
        assert [ns_of(t) for t in appended['{"vehicle": "v1"}']["timestamps"]] == [t1]
        assert appended['{"vehicle": "v1"}']["values"] == [7.0]
    finally:
        await client.close()


CROSS_GROUP_REFUSALS: dict[str, tuple[Json, dict[str, str]]] = {
    # below a node across groups, a tag it dropped is gone
    "tag_filter_on_a_tag_select_tags_dropped": (
        node(tag_filter(select_tags(GS, "vehicle"), tags_in("site", ""))),
        {"invalidTypes": "", "variant": "filterByTag", "field": "predicate"},
    ),
    # nominal-api: "Providing both name and a NOMINAL_CHANNEL filter is rejected as an invalid request"
    "nominal_channel_on_a_named_channel": (
        node(tag_filter(api(A), tags_in("NOMINAL_CHANNEL", "a"))),
        {"invalidTypes": "", "variant": "filterByTag", "field": "predicate"},
    ),
    "nominal_channel_not_in_over_every_channel": (
        node(tag_filter(EVERY_CHANNEL, tags_in("NOMINAL_CHANNEL", "a", negate=True))),
        {"invalidTypes": "", "variant": "filterByTag", "field": "predicate"},
    ),
    "z_score_family_beyond_the_grouping": (
        node(z_score(api(G), "site")),
        {"invalidTypes": "", "variant": "zScore", "field": "groupByTags"},
    ),
    "select_tags_beside_a_channel_grouped_by_what_it_dropped": (
        node(sc.NumericSeries(sum=sc.SumSeries(inputs=[select_tags(GS, "vehicle"), GS]))),
        {"invalidTypes": "", "variant": "selectTags", "field": "tagKeys"},
    ),
    "numeric_property_of_a_saved_dataset": (
        node(
            sc.NumericSeries(
                select_numeric_property=sc.SelectProperty(
                    property_name="mass",
                    dataset=sc.Dataset(saved=sc.SavedDataset(rid=sc.StringConstant(literal="x"))),
                )
            )
        ),
        {"invalidTypes": "", "variant": "selectNumericProperty", "field": "dataset"},  # a saved dataset
    ),
    "categorical_property_of_a_saved_dataset": (
        dict(
            ConjureEncoder.do_encode(
                sc.ComputableNode(
                    series=sc.SummarizeSeries(
                        input=sc.Series(
                            enum=sc.EnumSeries(
                                select_categorical_property=sc.SelectProperty(
                                    property_name="team",
                                    dataset=sc.Dataset(
                                        saved=sc.SavedDataset(rid=sc.StringConstant(literal="x"))
                                    ),
                                )
                            )
                        ),
                        numeric_aggregations={},
                    )
                )
            )
        ),
        {"invalidTypes": "", "variant": "selectCategoricalProperty", "field": "dataset"},
    ),
}


async def test_what_cannot_be_known_per_group_is_refused_by_name(server: ServerProcess) -> None:
    client = await Client.connect(server.ws_url)
    try:
        variables = variables_of("ri.test.cross_group.refused")
        await client.subscribe(
            {
                name: subscription(case, variables, WINDOW_S)
                for name, (case, _) in CROSS_GROUP_REFUSALS.items()
            }
        )
        for name, (_, params) in CROSS_GROUP_REFUSALS.items():
            creation = await client.creation(name)
            assert creation["type"] == "error", (name, creation)
            error = creation["error"]["serializableError"]
            assert error["name"] == "PersistentCompute:InvalidComputation", (name, error)
            assert error["params"].items() >= params.items(), (name, error["params"])
    finally:
        await client.close()
