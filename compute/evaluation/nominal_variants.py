"""Variant names of Nominal's compute unions and values of its enums (nominal-api 0.1505.0's
Conjure IR), and the one table of each kind of operator and unit name: the compiler and the
evaluators take their names from here, and tests/unit/test_nominal_names.py checks every table
against the IR.

The evaluators (compute/evaluation/nodes/) are keyed by these names: adding an operator is one
entry here plus its evaluator there, and tests/unit/test_nominal_names.py checks that every name has
one. sparkwire_client/nodes.py keeps its own copy (it must not import the server);
tests/unit/test_vocabulary.py checks that it names the same operators and units.

A variant listed here but not evaluated by Sparkwire gets an honest `InvalidComputation` or
`PollingOnlyComputation`; a variant not listed at all is a malformed message.
"""

from __future__ import annotations

from schemas.timestamps import NANOS_PER_SECOND

# `TimeUnit` (e.g. derivative's timeUnit), with its length in nanoseconds: the one table of unit lengths.
TIME_UNIT_NANOS: dict[str, int] = {
    "DAYS": 86_400 * NANOS_PER_SECOND,
    "HOURS": 3_600 * NANOS_PER_SECOND,
    "MINUTES": 60 * NANOS_PER_SECOND,
    "SECONDS": NANOS_PER_SECOND,
    "MILLISECONDS": 1_000_000,
    "MICROSECONDS": 1_000,
    "NANOSECONDS": 1,
}
# The unit variants of `scout.compute.api.Duration` (TimeUnit's names in lower case, less
# microseconds), with their length in nanoseconds.
DURATION_UNIT_NANOS: dict[str, int] = {
    unit: TIME_UNIT_NANOS[unit.upper()]
    for unit in ("nanoseconds", "milliseconds", "seconds", "minutes", "hours", "days")
}
# The `NumericSeries` arithmetic Sparkwire evaluates (compute/evaluation/nodes/arithmetic.py):
# unary variants carry `x`, binary ones `left` and `right`.
UNARY_OPERATORS: tuple[str, ...] = ("abs", "negate", "sqrt", "ln", "log10")
BINARY_OPERATORS: tuple[str, ...] = ("add", "subtract", "multiply", "divide")
# The `NumericAggregationOperator` variants a rolling-time window evaluates (nodes/rolling.py).
ROLLING_OPERATORS: tuple[str, ...] = (
    "sum",
    "average",
    "min",
    "max",
    "count",
    "standardDeviation",
    "rootMeanSquare",
)
# `ThresholdRangesV2.comparison` (a `ThresholdRangesComparison`) -> the `ThresholdOperator` it means.
THRESHOLD_COMPARISONS: dict[str, str] = {
    "gt": "GREATER_THAN",
    "ge": "GREATER_THAN_OR_EQUAL_TO",
    "lt": "LESS_THAN",
    "le": "LESS_THAN_OR_EQUAL_TO",
    "eq": "EQUAL_TO",
    "ne": "NOT_EQUAL_TO",
}
# `BooleanSeries`' comparisons (`left <op> right`, two numeric series) -> the `ThresholdOperator` it means.
BOOLEAN_COMPARISONS: dict[str, str] = {
    "greaterThan": "GREATER_THAN",
    "greaterThanOrEqualTo": "GREATER_THAN_OR_EQUAL_TO",
    "lessThan": "LESS_THAN",
    "lessThanOrEqualTo": "LESS_THAN_OR_EQUAL_TO",
    "equalTo": "EQUAL_TO",
    "notEqualTo": "NOT_EQUAL_TO",
}

# nominal-api 0.1505.0's Numeric1dArraySeries variants (Enum1dArraySeries': selectEnum1dArray instead)
_ARRAY_SERIES = [
    "channel",
    "raw",
    "derived",
    "extractFromStruct",
    "toStartOfInterval",
    "timeShift",
    "filterByTag",
    "selectTags",
]

VARIANTS: dict[str, frozenset[str]] = {
    "ComputableNode": frozenset(
        [
            "ranges",
            "series",
            "value",
            "cartesian",
            "cartesian3d",
            "frequency",
            "frequencyV2",
            "spectrogram",
            "histogram",
            "curveV2",
            "curve",
            "multivariate",
        ]
    ),
    "Series": frozenset(["raw", "enum", "numeric", "log", "array", "struct", "video"]),
    "NumericSeries": frozenset(
        [
            "abs",
            "negate",
            "cos",
            "sin",
            "tan",
            "acos",
            "asin",
            "ln",
            "log10",
            "sqrt",
            "add",
            "subtract",
            "multiply",
            "divide",
            "floorDivide",
            "power",
            "modulo",
            "atan2",
            "max",
            "mean",
            "min",
            "sum",
            "union",
            "product",
            "constant",
            "selectNewestPoints",
            "selectNumeric",
            "selectNumericProperty",
            "selectOldestPoints",
            "bitAnd",
            "bitOr",
            "bitXor",
            "bitShiftRight",
            "bitShiftLeft",
            "bitTest",
            "ifElse",
            "numericAggregation",
            "countDuplicate",
            "cumulativeSum",
            "derivative",
            "integral",
            "zScore",
            "raw",
            "derived",
            "resample",
            "resampleV2",
            "nthPointDownsample",
            "largestTriangleThreeBuckets",
            "signalFilter",
            "timeDifference",
            "absoluteTimestamp",
            "timeRangeFilter",
            "timeShift",
            "timeShiftV2",
            "unitConversion",
            "unitOverride",
            "valueDifference",
            "filterTransformation",
            "filterWhere",
            "thresholdFilter",
            "approximateFilter",
            "dropNan",
            "select1dArrayIndex",
            "aggregateUnderRanges",
            "rangeDuration",
            "groupWithinRangesV2",
            "filterByExpression",
            "scalarUdf",
            "enumToNumeric",
            "contains",
            "refprop",
            "refpropV2",
            "extractFromStruct",
            "tagByIntervals",
            "filterByTag",
            "selectTags",
            "toStartOfInterval",
            "phaseUnwrap",
            "aggregate",
            "rollingOperation",
            "bitOperation",
            "channel",
            "offset",
            "scale",
            "arithmetic",
            "unaryArithmetic",
            "binaryArithmetic",
        ]
    ),
    "EnumSeries": frozenset(
        [
            "aggregate",
            "raw",
            "channel",
            "derived",
            "resample",
            "resampleV2",
            "nthPointDownsample",
            "timeRangeFilter",
            "timeShift",
            "timeShiftV2",
            "union",
            "filterTransformation",
            "valueMap",
            "select1dArrayIndex",
            "extractFromStruct",
            "eventAggregation",
            "enumAggregation",
            "selectEnum",
            "selectCategoricalProperty",
            "filterByTag",
            "selectTags",
            "scalarUdf",
            "toStartOfInterval",
        ]
    ),
    "RangeSeries": frozenset(
        [
            "approximateThreshold",
            "booleanRanges",
            "thresholdRangesV2",
            "durationFilter",
            "durationFilterV2",
            "enumFilter",
            "categoryFilterRangesV2",
            "categoricalOnChangeRangesV2",
            "categoricalStaleRangesV2",
            "categoricalEqualityRangesV2",
            "enumSeriesEqualityRangesNode",
            "eventsSearch",
            "intersectRange",
            "literalRanges",
            "minMaxThreshold",
            "not",
            "onChange",
            "peak",
            "extremaRangesV2",
            "rangeNumericAggregation",
            "raw",
            "derived",
            "seriesCrossoverRangesNode",
            "seriesEqualityRangesNode",
            "numericEqualityRangesV2",
            "stabilityDetection",
            "stabilityDetectionV2",
            "staleRange",
            "numericStaleRangesV2",
            "threshold",
            "unionRange",
            "paddedRanges",
            "paddedRangesV2",
        ]
    ),
    "BooleanSeries": frozenset([*BOOLEAN_COMPARISONS, "and", "or"]),
    "SelectValue": frozenset(
        [
            "firstPoint",
            "firstValuePoint",
            "firstRange",
            "lastPoint",
            "lastValuePoint",
            "lastRange",
            "nthRange",
        ]
    ),
    "VariableValue": frozenset(
        [
            "double",
            "computeNode",
            "duration",
            "integer",
            "channel",
            "derived",
            "series",
            "string",
            "stringSet",
            "timestamp",
        ]
    ),
    "ChannelSeries": frozenset(["dataSource", "asset", "run"]),
    # scout_rids_api's query of eventsSearch and eventAggregation (builders/events.py)
    "ComputeEventQuery": frozenset(
        [
            "searchText",
            "after",
            "before",
            "advancedTimeFilter",
            "asset",
            "template",
            "workbook",
            "dataReview",
            "originType",
            "dataReviewCheck",
            "dispositionStatus",
            "priority",
            "assignee",
            "eventType",
            "createdBy",
            "label",
            "property",
            "and",
            "or",
            "not",
            "workspace",
            "procedure",
            "procedureExecution",
            "stepId",
        ]
    ),
    "EventsEnumValueSource": frozenset(["property", "level"]),
    # `contains`' input and operator (builders/logs.py): LogSeries streams for contains' sake only
    # through `raw` and `channel`; its other variants are refused as Nominal does (LOG_SERIES).
    "LogSeries": frozenset(
        [
            "raw",
            "channel",
            "derived",
            "selectLogs",
            "union",
            "filter",
            "timeShift",
            "toStartOfInterval",
            "filterByTag",
            "selectTags",
        ]
    ),
    # the inputs of select1dArrayIndex and extractFromStruct (builders/composite.py): read from a
    # channel (`channel`, `raw`); their other variants are refused by name
    "Numeric1dArraySeries": frozenset([*_ARRAY_SERIES, "selectNumeric1dArray"]),
    "Enum1dArraySeries": frozenset([*_ARRAY_SERIES, "selectEnum1dArray"]),
    "StructSeries": frozenset(
        [
            "channel",
            "raw",
            "derived",
            "combine",
            "selectStruct",
            "extractFromStruct",
            "toStartOfInterval",
            "timeShift",
            "filterByTag",
            "selectTags",
        ]
    ),
    "LogFilterOperator": frozenset(
        ["regexFilter", "exactMatchCaseInsensitiveFilter", "arg", "and", "or", "not"]
    ),
    "AggregationBuilder": frozenset(["rollingTime", "rollingPoints", "groupBy"]),
    "NumericAggregationOperator": frozenset(
        ["sum", "average", "min", "max", "count", "standardDeviation", "rootMeanSquare", "percentile", "udf"]
    ),
    "NegativeValueConfiguration": frozenset(
        ["allowNegativeValues", "setNegativeValuesToZero", "excludeNegativeValues"]
    ),
    "ConstantNumericSeries": frozenset(["double"]),
    "DoubleConstant": frozenset(["literal", "variable", "builtin"]),
    "DurationConstant": frozenset(["literal", "variable"]),
    "IntegerConstant": frozenset(["literal", "variable"]),
    "Duration": frozenset(["reference", *DURATION_UNIT_NANOS, "add", "subtract", "negate"]),
    "StringConstant": frozenset(["literal", "variable"]),
    "StringSetConstant": frozenset(["literal", "variable"]),
    "SummarizationStrategy": frozenset(["decimate", "largestTriangleThreeBuckets", "page", "truncate"]),
    "OutputRangeStart": frozenset(["firstPointMatchingCondition", "afterPersistenceWindow"]),
    "ThresholdRangesComparison": frozenset(THRESHOLD_COMPARISONS),
    "InterpolationConfiguration": frozenset(["forwardFillInterpolation"]),
    "NumericResampleInterpolationConfiguration": frozenset(
        ["forwardFillResampleInterpolationConfiguration", "constantResampleInterpolationConfiguration"]
    ),
    "Window": frozenset(["duration"]),
    "TimestampConstant": frozenset(["literal", "variable"]),
    "GroupByTags": frozenset(["current", "subset"]),
    "GroupByTimestamp": frozenset(["current", "every"]),
    "UnboundedRangeBehavior": frozenset(["clampToWindow", "drop"]),
    "BitOperationFunction": frozenset(["and", "or", "xor", "shiftRight", "shiftLeft", "bitTest"]),
    "Dataset": frozenset(
        [
            "asset",
            "run",
            "saved",
            "search",
            "combine",
            "tag",
            "filter",
            "timeShift",
            "alignByAnchor",
            "withSeries",
            "dropSeries",
            "reference",
            "withDimensions",
        ]
    ),
}
ENUMS: dict[str, frozenset[str]] = {
    "ThresholdOperator": frozenset(THRESHOLD_COMPARISONS.values()),
    "MinMaxThresholdOperator": frozenset(
        ["OUTSIDE_BOUNDS", "OUTSIDE_OR_EQUAL_TO_BOUNDS", "INSIDE_BOUNDS", "INSIDE_OR_EQUAL_TO_BOUNDS"]
    ),
    "EnumFilterOperator": frozenset(["IS_IN", "IS_NOT_IN", "MATCHES_ANY_REGEX"]),
    "TimeUnit": frozenset(TIME_UNIT_NANOS),
    "RangeStart": frozenset(["CONDITION_START", "PERSISTENCE_START"]),
    "SeriesStorage": frozenset(["ICEBERG", "CLICKHOUSE"]),
    "NumericDataType": frozenset(["INT64", "FLOAT64", "UINT64"]),
    "NumericUnionOperation": frozenset(
        ["MIN", "MAX", "MEAN", "SUM", "COUNT", "STANDARD_DEVIATION", "ROOT_MEAN_SQUARE", "THROW"]
    ),
    "UnaryArithmeticOperation": frozenset(["COS", "SIN", "TAN", "ABS", "ASIN", "ACOS", "LOG", "LN", "SQRT"]),
    "BinaryArithmeticOperation": frozenset(["ATAN2"]),
    "ApproximateThresholdOperator": frozenset(["EQUAL_TO", "NOT_EQUAL_TO"]),
    "NumericAggregationFunction": frozenset(
        ["SUM", "MEAN", "MIN", "MAX", "COUNT", "STANDARD_DEVIATION", "ROOT_MEAN_SQUARE"]
    ),
    "RefpropProperty": frozenset(
        [
            "TEMPERATURE",
            "PRESSURE",
            "MASS_DENSITY",
            "MASS_SPECIFIC_ENTHALPY",
            "MASS_SPECIFIC_INTERNAL_ENERGY",
            "MASS_SPECIFIC_ENTROPY",
            "VISCOSITY",
        ]
    ),
    "RefpropSubstance": frozenset(
        [
            "NITROGEN",
            "OXYGEN",
            "HELIUM",
            "HYDROGEN",
            "METHANE",
            "PROPANE",
            "BUTANE",
            "WATER",
            "XENON",
            "AIR",
            "CARBON_DIOXIDE",
            "ARGON",
            "CARBON_MONOXIDE",
            "JET_A_4658",
            "JET_A_3638",
        ]
    ),
    # persistent_compute_api's: the only values an `invalidTypes` / `pollingOnlyTypes` param may hold
    "InvalidComputationType": frozenset(
        [
            "POINT_PERSISTENCE",
            "CUMULATIVE_SUM",
            "INTEGRAL",
            "SCALAR_UDF",
            "STALENESS_DETECTION",
            "LITERAL_RANGES",
            "LITERAL_ENUM_SERIES",
            "TAG_BY_INTERVALS",
            "NUMERIC_COMBINE_WITH_TAGS",
            "PHASE_UNWRAP",
            "RUN_WITH_FIXED_END",
            "TIME_RANGE_FILTER_WITH_FIXED_END",
        ]
    ),
    "PollingOnlyComputationType": frozenset(
        [
            "FREQUENCY_DOMAIN",
            "LTTB_SUMMARIZATION_STRATEGY",
            "PAGE_SUMMARIZATION_STRATEGY",
            "TRUNCATE_SUMMARIZATION_STRATEGY",
            "LARGEST_TRIANGLE_THREE_BUCKETS_SERIES",
            "LOG_SERIES",
            "CURVE_FITTING",
            "SIGNAL_FILTER",
            "SCALAR_UDF",
            "AGGREGATION_UDF",
            "ARRAY",
            "STRUCT",
        ]
    ),
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
    "udf": "AGGREGATION_UDF",
    "array": "ARRAY",
    "struct": "STRUCT",
}
STRATEGY_POLLING_ONLY: dict[str, str] = {
    "largestTriangleThreeBuckets": "LTTB_SUMMARIZATION_STRATEGY",
    "page": "PAGE_SUMMARIZATION_STRATEGY",
    "truncate": "TRUNCATE_SUMMARIZATION_STRATEGY",
}
