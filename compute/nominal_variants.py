"""Variant names of Nominal's compute unions (nominal-api 0.1505.0's Conjure IR).

A variant listed here but not evaluated by Sparkwire gets an honest `InvalidComputation` or
`PollingOnlyComputation`; a variant not listed at all is a malformed message.
"""

from __future__ import annotations

VARIANTS: dict[str, frozenset[str]] = {
    "ComputableNode": frozenset(
        "ranges series value cartesian cartesian3d frequency frequencyV2 spectrogram histogram curveV2 curve "
        "multivariate".split()
    ),
    "Series": frozenset("raw enum numeric log array struct video".split()),
    "NumericSeries": frozenset(
        "abs negate cos sin tan acos asin ln log10 sqrt add subtract multiply divide floorDivide power modulo "
        "atan2 max mean min sum union product constant selectNewestPoints selectNumeric selectNumericProperty "
        "selectOldestPoints bitAnd bitOr bitXor bitShiftRight bitShiftLeft bitTest ifElse numericAggregation "
        "countDuplicate cumulativeSum derivative integral zScore raw derived resample resampleV2 "
        "nthPointDownsample largestTriangleThreeBuckets signalFilter timeDifference absoluteTimestamp "
        "timeRangeFilter timeShift timeShiftV2 unitConversion unitOverride valueDifference filterTransformation "
        "filterWhere thresholdFilter approximateFilter dropNan select1dArrayIndex aggregateUnderRanges "
        "rangeDuration groupWithinRangesV2 filterByExpression scalarUdf enumToNumeric contains refprop "
        "refpropV2 extractFromStruct tagByIntervals filterByTag selectTags toStartOfInterval phaseUnwrap "
        "aggregate rollingOperation bitOperation channel offset scale arithmetic unaryArithmetic "
        "binaryArithmetic".split()
    ),
    "EnumSeries": frozenset(
        "aggregate raw channel derived resample resampleV2 nthPointDownsample timeRangeFilter timeShift "
        "timeShiftV2 union filterTransformation valueMap select1dArrayIndex extractFromStruct eventAggregation "
        "enumAggregation selectEnum selectCategoricalProperty filterByTag selectTags scalarUdf "
        "toStartOfInterval".split()
    ),
    "RangeSeries": frozenset(
        "approximateThreshold booleanRanges thresholdRangesV2 durationFilter durationFilterV2 enumFilter "
        "categoryFilterRangesV2 categoricalOnChangeRangesV2 categoricalStaleRangesV2 "
        "categoricalEqualityRangesV2 enumSeriesEqualityRangesNode eventsSearch intersectRange literalRanges "
        "minMaxThreshold not onChange peak extremaRangesV2 rangeNumericAggregation raw derived "
        "seriesCrossoverRangesNode seriesEqualityRangesNode numericEqualityRangesV2 stabilityDetection "
        "stabilityDetectionV2 staleRange numericStaleRangesV2 threshold unionRange paddedRanges "
        "paddedRangesV2".split()
    ),
    "SelectValue": frozenset(
        "firstPoint firstValuePoint firstRange lastPoint lastValuePoint lastRange nthRange".split()
    ),
    "VariableValue": frozenset(
        "double computeNode duration integer channel derived series string stringSet timestamp".split()
    ),
    "ChannelSeries": frozenset("dataSource asset run".split()),
}

# Nominal's InvalidComputationType / PollingOnlyComputationType, keyed by the variant that carries them.
INVALID_TYPES: dict[str, str] = {
    "cumulativeSum": "CUMULATIVE_SUM",
    "integral": "INTEGRAL",
    "scalarUdf": "SCALAR_UDF",
    "staleRange": "STALENESS_DETECTION",
    "numericStaleRangesV2": "STALENESS_DETECTION",
    "categoricalStaleRangesV2": "STALENESS_DETECTION",
    "literalRanges": "LITERAL_RANGES",
    "tagByIntervals": "TAG_BY_INTERVALS",
    "phaseUnwrap": "PHASE_UNWRAP",
}
POLLING_ONLY_TYPES: dict[str, str] = {
    "frequency": "FREQUENCY_DOMAIN",
    "frequencyV2": "FREQUENCY_DOMAIN",
    "spectrogram": "FREQUENCY_DOMAIN",
    "largestTriangleThreeBuckets": "LARGEST_TRIANGLE_THREE_BUCKETS_SERIES",
    "log": "LOG_SERIES",
    "curve": "CURVE_FITTING",
    "curveV2": "CURVE_FITTING",
    "signalFilter": "SIGNAL_FILTER",
    "array": "ARRAY",
    "struct": "STRUCT",
}
STRATEGY_POLLING_ONLY: dict[str, str] = {
    "largestTriangleThreeBuckets": "LTTB_SUMMARIZATION_STRATEGY",
    "page": "PAGE_SUMMARIZATION_STRATEGY",
    "truncate": "TRUNCATE_SUMMARIZATION_STRATEGY",
}
