"""The range-on-range, equality, stability and enum-mapping nodes over a real server, built with
nominal-api's Conjure classes and serialized by conjure_python_client: subscribed before any point
is written, fed history, fresh points, late points, an overwrite, a new group and a new category
(the scenario of tests/test_compute_nodes.py), and then each merged FullResult + AppendResults
compared with (1) tests/reference_ranges.py's one-shot evaluation written from nominal-api's docs
and (2) a fresh FullResult of a brand-new computation. Refusals are checked by name."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Any

import numpy as np
import pytest
from conjure_python_client import ConjureEncoder
from nominal_api import api, scout_run_api
from nominal_api import persistent_compute_api as pc
from nominal_api import scout_compute_api as sc

from app.protocol.frames import output_body
from compute.evaluation import deltas
from compute.evaluation.results import OPEN_END, AggregatedRanges, Ranges, RangeValue, SinglePoint
from sparkwire_client import charts
from sparkwire_client import nodes as cn
from sparkwire_client import range_nodes as rn
from sparkwire_client.view import View
from tests import node_json as n
from tests.client_view import ResultView, clip_ranges, first_difference
from tests.conftest import ServerProcess
from tests.reference import evaluate
from tests.server.test_compute_errors import assert_nominal_types
from tests.server.test_compute_nodes import (
    Outcome,
    Writer,
    context,
    merged_equals_reference_and_fresh,
    play_scenario,
    reached_by_a_full_result,
    reached_by_an_append,
)
from tests.wire import DECODER, NANOS, Client, subscription, write_points

WINDOW_S = 3600.0
WINDOW_NS = int(WINDOW_S * NANOS)
REL = 1e-9
S = NANOS
SINCE = time.time_ns() - 150 * S  # timeRangeFilter's start: within the history the scenario writes
Json = dict[str, Any]


def encoded(value: Any) -> Json:
    return dict(ConjureEncoder.do_encode(value))


def num(name: str) -> sc.NumericSeries:
    return sc.NumericSeries(raw=sc.Reference(name=name))


def cat(name: str) -> sc.EnumSeries:
    return sc.EnumSeries(raw=sc.Reference(name=name))


def lit(x: float) -> sc.DoubleConstant:
    return sc.DoubleConstant(literal=x)


def seconds(x: int) -> sc.Duration:
    return sc.Duration(seconds=sc.DurationSeconds(seconds=sc.IntegerConstant(literal=x)))


def const_duration(ns: int) -> sc.DurationConstant:
    return sc.DurationConstant(literal=scout_run_api.Duration(seconds=ns // NANOS, nanos=ns % NANOS))


def above(x: sc.NumericSeries, c: float) -> sc.RangeSeries:
    return sc.RangeSeries(
        threshold=sc.ThresholdingRanges(input=x, threshold=lit(c), operator=sc.ThresholdOperator.GREATER_THAN)
    )


def states_of(x: sc.NumericSeries) -> sc.EnumSeries:
    """The numeric channel as the scenario's states: a valueMap with open outer bounds."""
    mapping = [
        sc.RangeMap(end=lit(-3.0), output=sc.StringConstant(literal="idle")),
        sc.RangeMap(start=lit(-3.0), output=sc.StringConstant(literal="run")),
        sc.RangeMap(start=lit(0.0), end=lit(3.0), output=sc.StringConstant(literal="fault")),
        sc.RangeMap(start=lit(3.0), output=sc.StringConstant(literal="stop")),
    ]
    return sc.EnumSeries(value_map=sc.ValueMapSeries(input=x, mapping=mapping))


def ranges_node(r: sc.RangeSeries) -> Json:
    return encoded(sc.ComputableNode(ranges=sc.SummarizeRanges(input=r)))


def enum_node(e: sc.EnumSeries) -> Json:
    return encoded(
        sc.ComputableNode(series=sc.SummarizeSeries(input=sc.Series(enum=e), numeric_aggregations={}))
    )


def value_node(v: sc.SelectValue) -> Json:
    return encoded(sc.ComputableNode(value=v))


def histogram_node(
    inputs: dict[str, sc.NumericSeries], strategy: sc.NumericHistogramBucketStrategy | None = None
) -> Json:
    return encoded(
        sc.ComputableNode(
            histogram=sc.Histogram(numeric=sc.NumericHistogramNode(inputs=inputs, bucket_strategy=strategy))
        )
    )


def enum_histogram_node(inputs: dict[str, sc.EnumSeries]) -> Json:
    return encoded(sc.ComputableNode(histogram=sc.Histogram(enum=sc.EnumHistogramNode(inputs=inputs))))


def scatter_node(
    x: sc.NumericSeries,
    y: sc.NumericSeries,
    max_points: int | None = None,
    bounds: sc.CartesianBounds | None = None,
    strategy: sc.ScatterSummarizationStrategy | None = None,
) -> Json:
    return encoded(
        sc.ComputableNode(
            cartesian=sc.SummarizeCartesian(
                input=sc.Cartesian(scatter=sc.Scatter(x=x, y=y)),
                bounds=bounds,
                max_points=max_points,
                summarization_strategy=strategy,
            )
        )
    )


def scatter3d_node(
    x: sc.NumericSeries,
    y: sc.NumericSeries,
    z: sc.NumericSeries,
    max_points: int | None = None,
    bounds: sc.Cartesian3dBounds | None = None,
    driver: sc.DriverSeries3d | None = None,
) -> Json:
    return encoded(
        sc.ComputableNode(
            cartesian3d=sc.SummarizeCartesian3d(
                input=sc.Cartesian3d(scatter3d=sc.Scatter3d(x=x, y=y, z=z, driver_series=driver)),
                bounds=bounds,
                max_points=max_points,
            )
        )
    )


def multivariate_node(
    inputs: list[tuple[sc.NumericSeries | sc.EnumSeries, list[str]]],
    bucket_count: int | None = None,
    output_format: sc.OutputFormat | None = None,
) -> Json:
    parts = [
        sc.MultivariateInput(
            enum=sc.MultivariateEnumInput(
                series=x, aggregations=[sc.EnumMultivariateAggregation[a] for a in how]
            )
        )
        if isinstance(x, sc.EnumSeries)
        else sc.MultivariateInput(
            numeric=sc.MultivariateNumericInput(
                series=x, aggregations=[sc.NumericMultivariateAggregation[a] for a in how]
            )
        )
        for x, how in inputs
    ]
    return encoded(
        sc.ComputableNode(
            multivariate=sc.SummarizeMultivariate(
                inputs=parts, bucket_count=bucket_count, output_format=output_format
            )
        )
    )


def bucket_count(n: int) -> sc.NumericHistogramBucketStrategy:
    return sc.NumericHistogramBucketStrategy(bucket_count=sc.IntegerConstant(literal=n))


A, B, E, G = num("a"), num("b"), cat("e"), num("g")
WITHIN_4S = sc.InterpolationConfiguration(
    forward_fill_interpolation=sc.ForwardFillInterpolation(
        interpolation_radius=sc.DurationConstant(literal=scout_run_api.Duration(seconds=4, nanos=0))
    )
)
ABSOLUTE = sc.Threshold(absolute=sc.AbsoluteThreshold(value=lit(8.0)))
INFINITY = sc.UnboundedBehavior.INFINITY

CASES: dict[str, Json] = {
    "approximate_threshold": ranges_node(
        sc.RangeSeries(
            approximate_threshold=sc.ApproximateThresholdRanges(
                input=A,
                threshold=lit(1.0),
                tolerance=lit(2.0),
                operator=sc.ApproximateThresholdOperator.EQUAL_TO,
            )
        )
    ),
    "approximate_threshold_not_equal": ranges_node(
        sc.RangeSeries(
            approximate_threshold=sc.ApproximateThresholdRanges(
                input=B,
                threshold=lit(10.0),
                tolerance=lit(5.0),
                operator=sc.ApproximateThresholdOperator.NOT_EQUAL_TO,
            )
        )
    ),
    "duration_filter_longer": ranges_node(
        sc.RangeSeries(
            duration_filter=sc.DurationFilterRanges(
                input=above(A, 0.0),
                threshold=const_duration(3 * S),
                operator=sc.ThresholdOperator.GREATER_THAN,
            )
        )
    ),
    "duration_filter_v2_shorter": ranges_node(
        sc.RangeSeries(
            duration_filter_v2=sc.DurationFilterRangesV2(
                input=above(A, 0.0),
                duration=seconds(2),
                comparison=sc.ThresholdOperator.LESS_THAN_OR_EQUAL_TO,
                unbounded_behavior=INFINITY,
            )
        )
    ),
    "padded": ranges_node(
        sc.RangeSeries(padded_ranges=sc.PaddedRanges(input=above(A, 4.0), padding=const_duration(S)))
    ),
    "padded_v2_end": ranges_node(
        sc.RangeSeries(
            padded_ranges_v2=sc.PaddedRangesV2(
                input=sc.RangeSeries(
                    enum_filter=sc.EnumFilterRanges(
                        input=E,
                        values=sc.StringSetConstant(literal=["fault"]),
                        operator=sc.EnumFilterOperator.IS_IN,
                    )
                ),
                duration=seconds(2),
                padding_configuration=sc.RangePaddingConfiguration.PAD_END,
            )
        )
    ),
    "numeric_equality_v2": ranges_node(
        sc.RangeSeries(
            numeric_equality_ranges_v2=sc.NumericEqualityRangesV2(
                inputs=[A, B], tolerance=lit(8.0), equality_operator=sc.EqualityOperator.ALL_EQUAL
            )
        )
    ),
    "series_equality_not_all": ranges_node(
        sc.RangeSeries(
            series_equality_ranges_node=sc.SeriesEqualityRanges(
                input=[A, B], tolerance=lit(5.0), equality_operator=sc.EqualityOperator.NOT_ALL_EQUAL
            )
        )
    ),
    "categorical_equality_v2": ranges_node(
        sc.RangeSeries(
            categorical_equality_ranges_v2=sc.CategoricalEqualityRangesV2(
                inputs=[E, states_of(A)], equality_operator=sc.EqualityOperator.ALL_EQUAL
            )
        )
    ),
    "enum_series_equality_not_all": ranges_node(
        sc.RangeSeries(
            enum_series_equality_ranges_node=sc.EnumSeriesEqualityRanges(
                input=[E, states_of(B)], equality_operator=sc.EqualityOperator.NOT_ALL_EQUAL
            )
        )
    ),
    "stability_v2": ranges_node(
        sc.RangeSeries(
            stability_detection_v2=sc.StabilityDetectionRangesV2(
                input=A, window=seconds(5), threshold=ABSOLUTE
            )
        )
    ),
    "stability_percentage": ranges_node(
        sc.RangeSeries(
            stability_detection=sc.StabilityDetectionRanges(
                input=B,
                window_configuration=sc.StabilityWindowConfiguration(
                    duration=const_duration(6 * S), min_points=sc.IntegerConstant(literal=3)
                ),
                threshold=sc.Threshold(percentage=sc.PercentageThreshold(value=lit(60.0))),
            )
        )
    ),
    "value_map": enum_node(states_of(A)),
    "value_map_with_default": enum_node(
        sc.EnumSeries(
            value_map=sc.ValueMapSeries(
                input=B,
                mapping=[
                    sc.RangeMap(start=lit(2.0), end=lit(5.0), output=sc.StringConstant(literal="low")),
                    sc.RangeMap(start=lit(10.0), end=lit(15.0), output=sc.StringConstant(literal="high")),
                ],
                default=sc.StringConstant(literal="other"),
            )
        )
    ),
    "filter_transformation": enum_node(
        sc.EnumSeries(filter_transformation=sc.EnumFilterTransformationSeries(input=E, filter=above(A, 0.0)))
    ),
    "aggregate": enum_node(
        sc.EnumSeries(aggregate=sc.AggregateEnumSeries(input=E, function=sc.EnumAggregationFunction.MAX))
    ),
    "on_change_numeric": ranges_node(sc.RangeSeries(on_change=sc.OnChangeRanges(input=sc.Series(numeric=A)))),
    "on_change_enum": ranges_node(sc.RangeSeries(on_change=sc.OnChangeRanges(input=sc.Series(enum=E)))),
    "categorical_on_change_v2_of_value_map": ranges_node(
        sc.RangeSeries(categorical_on_change_ranges_v2=sc.CategoricalOnChangeRangesV2(input=states_of(A)))
    ),
    "crossover": ranges_node(
        sc.RangeSeries(series_crossover_ranges_node=sc.SeriesCrossoverRanges(input_a=A, input_b=B))
    ),
    "crossover_of_a_fixed_level": ranges_node(  # a constant side stands at every point of the other
        sc.RangeSeries(
            series_crossover_ranges_node=sc.SeriesCrossoverRanges(
                input_a=sc.NumericSeries(constant=sc.ConstantNumericSeries(double=lit(1.0))), input_b=A
            )
        )
    ),
    "peak_default": ranges_node(sc.RangeSeries(peak=sc.PeakRanges(input=A))),
    "extrema_v2_both": ranges_node(
        sc.RangeSeries(extrema_ranges_v2=sc.ExtremaRangesV2(input=B, selection=sc.PeakType.BOTH))
    ),
    "padded_peaks_are_ranges": ranges_node(
        sc.RangeSeries(
            padded_ranges=sc.PaddedRanges(
                input=sc.RangeSeries(peak=sc.PeakRanges(input=A, return_type=sc.PeakType.TROUGH)),
                padding=const_duration(S // 4),
            )
        )
    ),
    # round 4 writes a negative point older than all others: the first range starts earlier
    "first_range": value_node(
        sc.SelectValue(
            first_range=sc.RangeSeries(
                threshold=sc.ThresholdingRanges(
                    input=A, threshold=lit(0.0), operator=sc.ThresholdOperator.LESS_THAN
                )
            )
        )
    ),
    "last_range_of_instants": value_node(
        sc.SelectValue(last_range=sc.RangeSeries(on_change=sc.OnChangeRanges(input=sc.Series(enum=E))))
    ),
    "nth_range_from_the_latest": value_node(
        sc.SelectValue(
            nth_range=sc.NthRange(
                input=above(B, 10.0), index=sc.IntegerConstant(literal=2), sort_order=sc.RangeSortOrder.DESC
            )
        )
    ),
    # below zero: every group has a range from its first round (a late -1.5), so no group appears
    # in the last phase (which would make a FullResult), and round 5's -3.0 opens a new last range
    "grouped_last_range": value_node(
        sc.SelectValue(
            last_range=sc.RangeSeries(
                threshold=sc.ThresholdingRanges(
                    input=G, threshold=lit(0.0), operator=sc.ThresholdOperator.LESS_THAN
                )
            )
        )
    ),
    "raw_ranges_from_a_variable": ranges_node(
        sc.RangeSeries(
            duration_filter=sc.DurationFilterRanges(
                input=sc.RangeSeries(raw=sc.Reference(name="held_ranges")),
                threshold=const_duration(S),
                operator=sc.ThresholdOperator.GREATER_THAN,
            )
        )
    ),
    "grouped_on_change": ranges_node(sc.RangeSeries(on_change=sc.OnChangeRanges(input=sc.Series(numeric=G)))),
    "resample_v2": enum_node(
        sc.EnumSeries(resample_v2=sc.EnumResampleSeriesV2(input=E, interval=seconds(2)))
    ),
    "resample_forward_fill": enum_node(
        sc.EnumSeries(
            resample=sc.EnumResampleSeries(
                input=states_of(A),
                resample_configuration=sc.EnumResampleConfiguration(
                    interval=const_duration(3 * S),
                    interpolation=sc.EnumResampleInterpolationConfiguration(
                        forward_fill_resample_interpolation_configuration=(
                            sc.ForwardFillResampleInterpolationConfiguration()
                        )
                    ),
                ),
            )
        )
    ),
    # snapped to 5 s, e's points (0.5-3 s apart) collide; aggregate keeps the label sorting last
    "to_start_of_interval_then_aggregate_max": enum_node(
        sc.EnumSeries(
            aggregate=sc.AggregateEnumSeries(
                input=sc.EnumSeries(
                    to_start_of_interval=sc.EnumToStartOfIntervalSeries(input=E, window=seconds(5))
                ),
                function=sc.EnumAggregationFunction.MAX,
            )
        )
    ),
    "to_start_of_interval_then_enum_aggregation_min": enum_node(
        sc.EnumSeries(
            enum_aggregation=sc.EnumAggregation(
                input=sc.AggregationBuilder(
                    group_by=sc.GroupByAggregationBuilder(
                        input=sc.Series(
                            enum=sc.EnumSeries(
                                to_start_of_interval=sc.EnumToStartOfIntervalSeries(
                                    input=states_of(A), window=seconds(4)
                                )
                            )
                        ),
                        tags=sc.GroupByTags(current=api.Empty()),
                        timestamp=sc.GroupByTimestamp(current=api.Empty()),
                    )
                ),
                operator=sc.EnumAggregationOperator(min=api.Empty()),
            )
        )
    ),
    "enum_aggregation_every_max": enum_node(
        sc.EnumSeries(
            enum_aggregation=sc.EnumAggregation(
                input=sc.AggregationBuilder(
                    group_by=sc.GroupByAggregationBuilder(
                        input=sc.Series(enum=E),
                        tags=sc.GroupByTags(current=api.Empty()),
                        timestamp=sc.GroupByTimestamp(every=seconds(5)),
                    )
                ),
                operator=sc.EnumAggregationOperator(max=api.Empty()),
            )
        )
    ),
    "time_range_filter_since": enum_node(
        sc.EnumSeries(
            time_range_filter=sc.EnumTimeRangeFilterSeries(
                input=E,
                start_time=sc.TimestampConstant(literal=api.Timestamp(seconds=SINCE // S, nanos=SINCE % S)),
            )
        )
    ),
    "nth_point_downsample": enum_node(
        sc.EnumSeries(
            nth_point_downsample=sc.EnumNthPointDownsampleSeries(input=E, n=sc.IntegerConstant(literal=3))
        )
    ),
    # round 4 writes points older than all others: the first point changes
    "first_value_point": value_node(sc.SelectValue(first_value_point=sc.Series(numeric=A))),
    "last_value_point_of_enum": value_node(sc.SelectValue(last_value_point=sc.Series(enum=E))),
    "grouped_last_value_point": value_node(sc.SelectValue(last_value_point=sc.Series(numeric=G))),
    # b is sparser than a: some ranges hold no point of b (noPointsInRange)
    "range_max_of_b_while_a_above_zero": ranges_node(
        sc.RangeSeries(
            range_numeric_aggregation=sc.RangesNumericAggregation(
                ranges=above(A, 0.0), input=B, operation=sc.RangeAggregationOperation(max=sc.Maximum())
            )
        )
    ),
    "range_all_aggregates_of_a_while_a_above_two": ranges_node(
        sc.RangeSeries(
            range_numeric_aggregation=sc.RangesNumericAggregation(
                ranges=above(A, 2.0), input=A, operation=sc.RangeAggregationOperation(all=api.Empty())
            )
        )
    ),
    "range_count_of_instants": ranges_node(
        sc.RangeSeries(
            range_numeric_aggregation=sc.RangesNumericAggregation(
                ranges=sc.RangeSeries(on_change=sc.OnChangeRanges(input=sc.Series(enum=E))),
                input=A,
                operation=sc.RangeAggregationOperation(count=sc.Count()),
            )
        )
    ),
    "grouped_range_mean": ranges_node(
        sc.RangeSeries(
            range_numeric_aggregation=sc.RangesNumericAggregation(
                ranges=above(G, 0.0), input=G, operation=sc.RangeAggregationOperation(average=sc.Average())
            )
        )
    ),
    "union_max_of_colliding_series": enum_node(
        sc.EnumSeries(union=sc.EnumUnionSeries(input=[states_of(A), E], operation=sc.EnumUnionOperation.MAX))
    ),
    "union_min_of_two_maps_of_one_channel": enum_node(
        sc.EnumSeries(
            union=sc.EnumUnionSeries(input=[states_of(A), states_of(B)], operation=sc.EnumUnionOperation.MIN)
        )
    ),
    "union_min_same_timestamps": enum_node(
        sc.EnumSeries(
            union=sc.EnumUnionSeries(
                input=[states_of(A), states_of(sc.NumericSeries(negate=sc.Negate(x=A)))],
                operation=sc.EnumUnionOperation.MIN,
            )
        )
    ),
    "enum_aggregation_max_of_current_groups": enum_node(
        sc.EnumSeries(
            enum_aggregation=sc.EnumAggregation(
                input=sc.AggregationBuilder(
                    group_by=sc.GroupByAggregationBuilder(
                        input=sc.Series(enum=E),
                        tags=sc.GroupByTags(current=api.Empty()),
                        timestamp=sc.GroupByTimestamp(current=api.Empty()),
                    )
                ),
                operator=sc.EnumAggregationOperator(max=api.Empty()),
            )
        )
    ),
    "grouped_stability": ranges_node(
        sc.RangeSeries(
            stability_detection_v2=sc.StabilityDetectionRangesV2(
                input=G, window=seconds(8), threshold=ABSOLUTE
            )
        )
    ),
    "grouped_padded": ranges_node(
        sc.RangeSeries(padded_ranges=sc.PaddedRanges(input=above(G, 0.0), padding=const_duration(S // 2)))
    ),
    "grouped_value_map": enum_node(states_of(G)),
    # the chart types (FullResults only: their result types have no append form)
    "histogram_bucket_count": histogram_node({"a": A, "b": B}, bucket_count(12)),
    "histogram_width_and_offset": histogram_node(
        {"a": A},
        sc.NumericHistogramBucketStrategy(
            bucket_width_and_offset=sc.NumericHistogramBucketWidthAndOffset(width=lit(1.5), offset=lit(0.25))
        ),
    ),
    "histogram_default_buckets": histogram_node({"b": B}),
    "histogram_enum": enum_histogram_node({"e": E, "level": states_of(A)}),
    "scatter": scatter_node(A, B),
    "scatter_bounded": scatter_node(
        A, B, bounds=sc.CartesianBounds(min_x=lit(-3.0), max_x=lit(3.0), min_y=lit(2.0), max_y=lit(15.0))
    ),
    "scatter_spatial_buckets": scatter_node(A, B, max_points=40),
    "scatter_temporal_buckets": scatter_node(
        A,
        B,
        max_points=30,
        strategy=sc.ScatterSummarizationStrategy(
            temporal=sc.TemporalDecimateStrategy(
                x_aggregation=sc.ScatterTemporalAggregation.MEAN,
                y_aggregation=sc.ScatterTemporalAggregation.LAST,
            )
        ),
    ),
    "scatter3d": scatter3d_node(A, B, sc.NumericSeries(derivative=sc.DerivativeSeries(input=A))),
    "scatter3d_octants": scatter3d_node(
        A,
        B,
        sc.NumericSeries(derivative=sc.DerivativeSeries(input=A)),
        max_points=20,
        bounds=sc.Cartesian3dBounds(
            min_x=lit(-6.0),
            max_x=lit(6.0),
            min_y=lit(0.0),
            max_y=lit(20.0),
            min_z=lit(-50.0),
            max_z=lit(50.0),
        ),
    ),
    "multivariate": multivariate_node(
        [(A, ["MEAN", "MAX"]), (B, ["FIRST", "LAST", "MIN"]), (E, ["MODE"])], 100
    ),
    "grouped_multivariate": multivariate_node([(A, ["LAST"]), (G, ["MEAN"])], 60),
    "grouped_histogram": histogram_node({"g": G}, bucket_count(8)),
    "grouped_scatter": scatter_node(G, A, max_points=25),
    # across groups (nodes/cross_group.py); gs: channel g grouped by site ("" on every series) and vehicle
    "grouped_threshold_of_z_score": ranges_node(
        above(
            sc.NumericSeries(
                z_score=sc.ZscoreSeries(input=G, group_by_tags=[], interpolation_configuration=WITHIN_4S)
            ),
            0.5,
        )
    ),
    "enum_tag_filter": enum_node(
        sc.EnumSeries(
            filter_by_tag=sc.EnumTagFilterSeries(
                input=states_of(G),
                predicate=sc.TagPredicate(
                    in_=sc.TagIn(
                        key=sc.StringConstant(literal="vehicle"),
                        values=sc.StringSetConstantV2(literal=[sc.StringConstant(literal="v2")]),
                    )
                ),
            )
        )
    ),
    # every vehicle's labels in one group: each label of each vehicle counted in the buckets
    "enum_select_tags_every_vehicle_as_one_bucketed": encoded(
        sc.ComputableNode(
            series=sc.SummarizeSeries(
                input=sc.Series(
                    enum=sc.EnumSeries(select_tags=sc.EnumSelectTagsSeries(input=states_of(G), tag_keys=[]))
                ),
                numeric_aggregations={},
                buckets=20,
            )
        )
    ),
    # gu: channel g not grouped; the tag reaches the series the channel read takes
    "enum_tag_filter_on_an_ungrouped_channel": enum_node(
        sc.EnumSeries(
            filter_by_tag=sc.EnumTagFilterSeries(
                input=states_of(num("gu")),
                predicate=sc.TagPredicate(
                    not_in=sc.TagNotIn(
                        key=sc.StringConstant(literal="vehicle"),
                        values=sc.StringSetConstantV2(literal=[sc.StringConstant(literal="v1")]),
                    )
                ),
            )
        )
    ),
    "grouped_enum_select_tags_of_an_ungrouped_channel": enum_node(
        sc.EnumSeries(
            select_tags=sc.EnumSelectTagsSeries(
                input=states_of(num("gu")), tag_keys=[sc.StringConstant(literal="vehicle")]
            )
        )
    ),
    "grouped_enum_select_tags": enum_node(
        sc.EnumSeries(
            select_tags=sc.EnumSelectTagsSeries(
                input=states_of(num("gs")), tag_keys=[sc.StringConstant(literal="vehicle")]
            )
        )
    ),
}
GROUPED = {name for name in CASES if name.startswith("grouped_")}
CHARTS = {
    name
    for name in CASES
    if name.startswith(("histogram_", "scatter", "grouped_histogram", "grouped_scatter"))
}


def variables_of(rid: str) -> dict[str, Any]:
    """tests/test_compute_nodes.py's context, a range series held in a variable with a nested
    context of its own (its channel `x` is that context's name for channel b), and channel g grouped
    by site and vehicle (`gs`) and by nothing (`gu`)."""
    held = sc.ComputeNodeWithContext(
        series_node=sc.ComputeNode(ranges=above(num("x"), 12.0)),
        context=sc.Context(variables={}, dataset_references={}),
    )
    nested = encoded(held)
    nested["context"]["variables"] = {"x": n.channel(rid, "b")}
    return {
        **context(rid),
        "held_ranges": {"type": "computeNode", "computeNode": nested},
        "gs": n.channel(rid, "g", group_by=["site", "vehicle"]),
        "gu": n.channel(rid, "g"),
    }


@pytest.fixture(scope="module")
async def outcome(server: ServerProcess) -> Outcome:
    rid = f"ri.test.ranges.{time.time_ns()}"
    return await play_scenario(server, CASES, rid, variables_of(rid), seed=20261126)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", list(CASES))
async def test_merged_result_equals_reference_and_a_fresh_full_result(outcome: Outcome, name: str) -> None:
    merged_equals_reference_and_fresh(outcome, name)
    expected = outcome.expected[name]
    assert any(result for _, result in expected.values()), f"{name}: the scenario never triggers it"
    if name in CHARTS:
        reached_by_a_full_result(outcome, name)
    else:
        reached_by_an_append(outcome, name)


async def test_the_scenario_makes_snapped_points_collide_and_ranges_without_points(outcome: Outcome) -> None:
    """The cases above meet what they are about: e's points snapped to 5 s collide (fewer points
    after aggregating them than e has), and some ranges where a > 0 hold no point of b."""
    every_e = outcome.expected["aggregate"][()][1]
    snapped = outcome.expected["to_start_of_interval_then_aggregate_max"][()][1]
    assert 0 < len(snapped) < len(every_e), (len(snapped), len(every_e))
    values = [r[2] for r in outcome.expected["range_max_of_b_while_a_above_zero"][()][1]]
    assert None in values and any(isinstance(v, float) for v in values), values


@pytest.mark.parametrize("name", sorted(GROUPED))
async def test_a_tag_combination_appearing_mid_stream_reaches_subscribers(
    outcome: Outcome, name: str
) -> None:
    keys = set(outcome.views[name].snapshot())
    assert keys == {(("vehicle", v),) for v in ("v1", "v2", "v3")}, keys


REFUSED: dict[str, tuple[Json, dict[str, str]]] = {
    "negative_padding": (
        ranges_node(
            sc.RangeSeries(
                padded_ranges_v2=sc.PaddedRangesV2(
                    input=above(A, 0.0),
                    duration=sc.Duration(negate=sc.DurationNegate(input=seconds(1))),
                    padding_configuration=sc.RangePaddingConfiguration.PAD_END,
                )
            )
        ),
        {"invalidTypes": "", "variant": "paddedRangesV2", "field": "padding"},
    ),
    "overlapping_value_map": (
        enum_node(
            sc.EnumSeries(
                value_map=sc.ValueMapSeries(
                    input=A,
                    mapping=[
                        sc.RangeMap(start=lit(0.0), end=lit(5.0), output=sc.StringConstant(literal="x")),
                        sc.RangeMap(start=lit(4.0), end=lit(9.0), output=sc.StringConstant(literal="y")),
                    ],
                )
            )
        ),
        {"invalidTypes": "", "variant": "valueMap", "field": "mapping"},
    ),
    "one_series_equality": (
        ranges_node(
            sc.RangeSeries(
                numeric_equality_ranges_v2=sc.NumericEqualityRangesV2(
                    inputs=[A], equality_operator=sc.EqualityOperator.ALL_EQUAL
                )
            )
        ),
        {"invalidTypes": "", "variant": "numericEqualityRangesV2", "field": "inputs"},
    ),
    "histogram_of_z_score": (  # a chart holds its inputs per computation group: no regrouping under it
        histogram_node({"z": sc.NumericSeries(z_score=sc.ZscoreSeries(input=G, group_by_tags=[]))}),
        {"invalidTypes": "", "variant": "histogram", "field": "input"},
    ),
    "cartesian3d_driver_series": (
        scatter3d_node(A, B, A, driver=sc.DriverSeries3d.X),
        {"invalidTypes": "", "variant": "cartesian3d", "field": "driverSeries"},
    ),
    "multivariate_arrow": (
        multivariate_node([(A, ["MEAN"])], output_format=sc.OutputFormat.ARROW_V4),
        {"invalidTypes": "", "variant": "multivariate", "field": "outputFormat"},
    ),
    "histogram_negative_offset": (
        histogram_node(
            {"a": A},
            sc.NumericHistogramBucketStrategy(
                bucket_width_and_offset=sc.NumericHistogramBucketWidthAndOffset(
                    width=lit(1.0), offset=lit(-0.5)
                )
            ),
        ),
        {"invalidTypes": "", "variant": "histogram", "field": "bucketStrategy.offset"},
    ),
    "scatter_bounds_inverted": (
        scatter_node(
            A, B, bounds=sc.CartesianBounds(min_x=lit(3.0), max_x=lit(-3.0), min_y=lit(0.0), max_y=lit(1.0))
        ),
        {"invalidTypes": "", "variant": "cartesian", "field": "bounds"},
    ),
    "peak_prominence": (
        ranges_node(sc.RangeSeries(peak=sc.PeakRanges(input=A, minimum_prominence=lit(1.0)))),
        {"invalidTypes": "", "variant": "peak", "field": "minimumProminence"},
    ),
}


async def test_what_these_nodes_cannot_do_is_refused_by_name(server: ServerProcess) -> None:
    client = await Client.connect(server.ws_url)
    try:
        variables = context("ri.test.refused")
        await client.subscribe(
            {name: subscription(node, variables, WINDOW_S) for name, (node, _) in REFUSED.items()}
        )
        for name, (_, params) in REFUSED.items():
            creation = await client.creation(name)
            assert creation["type"] == "error", (name, creation)
            error = creation["error"]["serializableError"]
            assert error["name"] == "PersistentCompute:InvalidComputation", (name, error)
            assert error["params"].items() >= params.items(), (name, error["params"])
            assert_nominal_types(error["params"])
    finally:
        await client.close()


async def test_a_union_that_throws_reports_an_error_once_two_inputs_share_a_timestamp(
    server: ServerProcess,
) -> None:
    """`union` with THROW: no error while the inputs' timestamps differ; a point of the second
    input at a timestamp of the first makes the computation an error update naming the field."""
    rid = f"ri.test.union.{time.time_ns()}"
    variables = context(rid)
    node = enum_node(
        sc.EnumSeries(
            union=sc.EnumUnionSeries(input=[E, states_of(A)], operation=sc.EnumUnionOperation.THROW)
        )
    )
    t = time.time_ns() - 10 * S
    await write_points(server.base_url, rid, "e", [(t, "run"), (t + S, "idle")])
    await write_points(server.base_url, rid, "a", [(t + S // 2, 5.0)])
    client = await Client.connect(server.ws_url)
    try:
        await client.subscribe({"u": subscription(node, variables, WINDOW_S, lateness_s=WINDOW_S)})
        assert (await client.creation("u", timeout=120))["type"] == "success"
        view = ResultView(WINDOW_NS)
        view.apply(await client.update("u", timeout=120))
        assert view.snapshot() == {(): ("enum", [(t, "run"), (t + S // 2, "stop"), (t + S, "idle")])}
        await write_points(server.base_url, rid, "a", [(t + S, -5.0)])  # collides with "idle"
        update = await client.update("u", timeout=120)
        assert update["type"] == "error", update
        error = update["error"]["serializableError"]
        assert error["name"] == "PersistentCompute:InvalidComputation", error
        assert (
            error["params"].items() >= {"invalidTypes": "", "variant": "union", "field": "operation"}.items()
        ), error
    finally:
        await client.close()


# -- the rangeValue result and instants, away from a server ----------------------------------------
def test_a_range_value_and_instants_survive_the_compute_tiers_transport_and_decode_as_nominal() -> None:
    """What an edge mirrors (compute/evaluation/deltas.py) and what a strict Nominal client decodes."""
    old = {(): RangeValue(5 * S, OPEN_END)}
    new = {(): RangeValue(5 * S, 9 * S)}
    payload = deltas.decode(deltas.encode({"p": deltas.diff(old, new)}))["p"]
    assert deltas.apply(old, payload) == new
    instants = Ranges(np.array([3 * S, 7 * S], np.int64), np.array([3 * S, 7 * S], np.int64))
    assert [r.tolist() for r in (instants.since(7 * S).starts, instants.clip(7 * S).ends)] == [
        [7 * S],
        [7 * S],
    ]
    for output, kind in ((new[()], "rangeValue"), (instants, "range")):
        text = json.dumps({"type": "full", "full": {"result": dict([("type", kind), output_body(output)])}})
        decoded = DECODER.read_from_string(text, pc.SubscriptionUpdate)
        assert decoded.full.result.type == kind


def test_single_points_and_valued_ranges_survive_the_compute_tiers_transport_and_decode_as_nominal() -> None:
    """A SinglePoint (a number, a label) and ranges with values (a double, every aggregate, no point)
    travel through an edge's mirror unchanged, and a strict Nominal client decodes their frames."""
    column = lambda *xs: np.array(xs, np.float64)  # noqa: E731
    valued = AggregatedRanges(
        np.array([1 * S, 5 * S, 9 * S], np.int64),
        np.array([3 * S, 6 * S, OPEN_END], np.int64),
        np.array([2, 0, 1], np.int64),
        *(column(1.0 + i, np.nan, 4.0) for i in range(6)),
        operation="all",
    )
    for old, new in (
        ({(): SinglePoint(5 * S, 1.5)}, {(): SinglePoint(7 * S, "run")}),
        ({(): valued}, {(): dataclasses.replace(valued, operation="max")}),
    ):
        payload = deltas.decode(deltas.encode({"p": deltas.diff(old, new)}))["p"]
        applied = deltas.apply(old, payload)
        assert type(applied[()]) is type(new[()]) and output_body(applied[()]) == output_body(new[()])
    decoded = []
    for output in (SinglePoint(7 * S, "run"), SinglePoint(7 * S, float("nan")), valued):
        kind, body = output_body(output)
        text = json.dumps({"type": "full", "full": {"result": {"type": kind, kind: body}}})
        decoded.append(DECODER.read_from_string(text, pc.SubscriptionUpdate).full.result)
        assert decoded[-1].type == kind
    label, nan = (d.single_point.value for d in decoded[:2])
    assert label.string_value == "run" and math.isnan(nan.float64_value)
    ranges = decoded[2].range
    assert [r.value.type for r in ranges] == ["aggregation", "noPointsInRange", "aggregation"]
    assert ranges[0].value.aggregation.max == 4.0 and ranges[2].value.aggregation.count == 1.0
    assert ranges[2].end is None


def test_the_client_packages_view_keeps_a_range_value_and_instants() -> None:
    def ts(ns: int) -> dict[str, int]:
        return {"seconds": ns // S, "nanos": ns % S}

    view = View(window_ns=1000 * S)
    view.apply(
        {"type": "full", "full": {"result": {"type": "rangeValue", "rangeValue": {"start": ts(10 * S)}}}}
    )
    assert view.rows() == [{"start": 10 * S, "end": None}]
    closed = {"type": "rangeValue", "rangeValue": {"start": ts(10 * S), "end": ts(12 * S)}}
    view.apply({"type": "append", "append": {"start": ts(10 * S), "end": ts(13 * S), "result": closed}})
    assert view.rows() == [{"start": 10 * S, "end": 12 * S}]
    points = View(window_ns=1000 * S)
    instant = [{"start": ts(20 * S), "end": ts(20 * S)}]
    points.apply({"type": "full", "full": {"result": {"type": "range", "range": instant}}})
    later = {"type": "range", "range": [{"start": ts(25 * S), "end": ts(25 * S)}]}
    points.apply({"type": "append", "append": {"start": ts(21 * S), "end": ts(26 * S), "result": later}})
    assert points.rows() == [{"start": 20 * S, "end": 20 * S}, {"start": 25 * S, "end": 25 * S}]


# -- the client package's builders, end to end -------------------------------------------------------
async def test_the_client_builders_make_nodes_the_server_computes_as_the_reference_does(
    server: ServerProcess,
) -> None:
    rid = f"ri.test.builders.{time.time_ns()}"
    w = Writer(server.base_url, rid)
    t0 = time.time_ns() - 60 * S
    values = [0.0, 3.0, 3.5, 3.2, 9.0, 9.5, 2.0, 2.0, 7.0, 1.0, 1.5, 8.0]
    await w.write("x", [(t0 + i * S // 2, v) for i, v in enumerate(values)])
    await w.write("y", [(t0 + i * S // 2 + 1, 5.0) for i in range(len(values))])
    await w.write("s", [(t0 + i * S, label) for i, label in enumerate(["a", "a", "b", "c", "c", "a"])])
    x, y, st = cn.numeric_channel(rid, "x"), cn.numeric_channel(rid, "y"), cn.enum_channel(rid, "s")
    level = rn.value_map(x, [(None, 2.0, "a"), (2.0, 5.0, "b"), (5.0, None, "c")])
    nodes: dict[str, cn.Computable] = {
        "approximately": cn.ranges(rn.approximately(x, 3.0, 0.5)),
        "held_for": cn.ranges(rn.held_for(x.above(2.5), 1.2)),
        "padded": cn.ranges(rn.padded(x.above(8.5), 0.2, side="end")),
        "all_equal": cn.ranges(rn.all_equal(st, level)),
        "not_all_equal": cn.ranges(rn.all_equal(x, y, tolerance=1.0, negate=True)),
        "stable": cn.ranges(rn.stable(x, 1.1, 1.0)),
        "on_change": cn.ranges(rn.on_change(st)),
        "crossovers": cn.ranges(rn.crossovers(x, y)),
        "extrema": cn.ranges(rn.extrema(x, "BOTH")),
        "value_map": cn.series(level),
        "within": cn.series(rn.within(st, x.above(2.5))),
        "resample": cn.series(rn.resample(st, 0.75)),
        "union": cn.series(rn.union([st, level], "MIN")),
        "first_range": rn.first_range(x.above(2.5)),
        "last_range": rn.last_range(x.above(2.5)),
        "nth_range": rn.nth_range(x.above(2.5), 1, from_latest=True),
        "histogram": charts.histogram({"x": x, "y": y}, bucket_count=4),
        "histogram_of_labels": charts.enum_histogram({"s": st, "level": level}),
        "scatter": charts.scatter(x, y, bounds=(0.0, 9.0, 0.0, 10.0)),
        "scatter3d": charts.scatter3d(x, y, x.derivative(), max_points=5),
        "multivariate": charts.multivariate([(x, ["MEAN", "MAX"]), (st, ["MODE"])], bucket_count=720),
        "to_start_of_interval": cn.series(rn.aggregate(rn.to_start_of_interval(st, 2.0), "MAX")),
        "every_nth": cn.series(rn.every_nth(st, 2)),
        "first_value_point": rn.first_value_point(x),
        "last_value_point": rn.last_value_point(st),
        "range_aggregate": cn.ranges(rn.range_aggregate(x.above(2.5), x, "max")),
        "range_aggregate_all": cn.ranges(rn.range_aggregate(x.above(2.5), y, "all")),
    }
    client = await Client.connect(server.ws_url)
    try:
        await client.subscribe(
            {k: subscription(v.json, dict(v.variables), WINDOW_S) for k, v in nodes.items()}
        )
        for name, node in nodes.items():
            assert (await client.creation(name, timeout=120))["type"] == "success", name
            view = ResultView(WINDOW_NS)
            view.apply(await client.update(name, timeout=300))
            cutoff = view.applied_at - WINDOW_NS
            expected = evaluate(node.json, dict(node.variables), w.store, WINDOW_NS, cutoff)
            assert any(result for _, result in expected.values()), f"{name}: the points never trigger it"
            diff = first_difference(clip_ranges(view.snapshot(), cutoff), expected, REL)
            assert diff is None, f"{name}: differs from the reference at {diff}"
    finally:
        await client.close()
