"""ServerMessage: what Sparkwire sends on `WS /persistent-compute/ws` (Nominal persistent-compute,
Conjure JSON), limited to the variants Sparkwire emits.

The server encodes frames straight from numpy (app/protocol/frames.py, for speed); these models are the
published description of those frames: the AsyncAPI document is generated from them, and tests
check that real frames validate against them. Unknown keys are refused, so a frame that drifts from
this description fails its test instead of slipping through.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter

from schemas.client import Ping, Pong
from schemas.conjure import ConjureModel, SerializableError, Timestamp

# Conjure DOUBLE: a JSON number, or one of these strings (JSON has no NaN or infinities).
ConjureDouble = float | Literal["NaN", "Infinity", "-Infinity"]


class WireModel(ConjureModel):
    model_config = ConfigDict(extra="forbid")


# -- plots (scout.compute.api) ----------------------------------------------------------------------
class NumericPlot(WireModel):
    timestamps: list[Timestamp]
    values: list[ConjureDouble]


class NumericPoint(WireModel):
    timestamp: Timestamp
    value: ConjureDouble


class NumericBucket(WireModel):
    min: ConjureDouble | None = None
    max: ConjureDouble | None = None
    mean: ConjureDouble | None = None
    count: int | None = None
    variance: ConjureDouble | None = Field(None, description="population variance; 0 for one point")
    first_point: NumericPoint | None = None
    last_point: NumericPoint | None = Field(None, description="absent when the bucket holds one point")
    aggregations: dict[str, ConjureDouble] = Field(default_factory=dict)


class BucketedNumericPlot(WireModel):
    timestamps: list[Timestamp] = Field(description="each bucket's end, exclusive")
    buckets: list[NumericBucket]


class EnumPlot(WireModel):
    timestamps: list[Timestamp]
    values: list[int] = Field(description="indexes into categories")
    categories: list[str]


class EnumPoint(WireModel):
    timestamp: Timestamp
    value: str


class CompactEnumPoint(WireModel):
    timestamp: Timestamp
    value: int = Field(description="index into the plot's categories")


class EnumBucket(WireModel):
    histogram: dict[int, int] = Field(description="category index -> points in the bucket")
    first_point: CompactEnumPoint
    last_point: CompactEnumPoint | None = None


class BucketedEnumPlot(WireModel):
    timestamps: list[Timestamp] = Field(description="each bucket's end, exclusive")
    buckets: list[EnumBucket]
    categories: list[str]


class Range(WireModel):
    start: Timestamp | None = None
    end: Timestamp | None = Field(None, description="absent while the range is still open")
    value: dict[str, Any] | None = None


class RangeSummary(WireModel):
    range: Range
    sub_range_count: int


class RangesSummary(WireModel):
    ranges_summary: list[RangeSummary]


class HistogramChannelCount(WireModel):
    count: int


class NumericHistogramBucket(WireModel):
    lower_bound: ConjureDouble = Field(description="inclusive")
    upper_bound: ConjureDouble = Field(description="exclusive")
    counts_by_channel: dict[str, HistogramChannelCount] = Field(description="input variable name -> count")
    buckets: dict[str, HistogramChannelCount] = Field(
        description="deprecated by Nominal: countsByChannel again"
    )


class NumericHistogramPlot(WireModel):
    buckets: list[NumericHistogramBucket]


class EnumHistogramBucket(WireModel):
    value: str
    counts_by_channel: dict[str, HistogramChannelCount]


class EnumHistogramPlot(WireModel):
    buckets: list[EnumHistogramBucket]


class CartesianPlot(WireModel):
    timestamps: list[Timestamp]
    x_values: list[ConjureDouble]
    y_values: list[ConjureDouble]


class CartesianBucket(WireModel):
    min_x: ConjureDouble
    max_x: ConjureDouble
    min_y: ConjureDouble
    max_y: ConjureDouble
    min_timestamp: Timestamp
    max_timestamp: Timestamp
    count: int


class BucketedCartesianPlot(WireModel):
    buckets: list[CartesianBucket]


class Point3d(WireModel):
    x: ConjureDouble
    y: ConjureDouble
    z: ConjureDouble
    timestamp: Timestamp


class Cartesian3dBucket(WireModel):
    min_x: ConjureDouble | None = Field(None, description="deprecated by Nominal: minXPoint.x")
    max_x: ConjureDouble | None = None
    mean_x: ConjureDouble
    min_y: ConjureDouble | None = None
    max_y: ConjureDouble | None = None
    mean_y: ConjureDouble
    min_z: ConjureDouble | None = None
    max_z: ConjureDouble | None = None
    mean_z: ConjureDouble
    min_x_point: Point3d
    max_x_point: Point3d
    min_y_point: Point3d
    max_y_point: Point3d
    min_z_point: Point3d
    max_z_point: Point3d
    min_timestamp: Timestamp
    max_timestamp: Timestamp
    count: int


class BucketedCartesian3dPlot(WireModel):
    buckets: list[Cartesian3dBucket]


class Float64Value(WireModel):
    type: Literal["float64Value"]
    float64_value: ConjureDouble


class StringValue(WireModel):
    type: Literal["stringValue"]
    string_value: str


class MultivariateBucket(WireModel):
    timestamp: Timestamp = Field(description="the bucket's end, exclusive")
    values: list[Annotated[Float64Value | StringValue, Field(discriminator="type")]] = Field(
        description="one per (input, aggregation), in request order"
    )


class BucketedMultivariatePlot(WireModel):
    buckets: list[MultivariateBucket]
    group_by_keys: list[str] | None = None


class TagsGrouping(WireModel):
    type: Literal["tagsWithValues"]
    tags_with_values: dict[str, str]


# -- ComputeNodeResponse / ComputeNodeAppendResponse variants ---------------------------------------
class NumericResult(WireModel):
    type: Literal["numeric"]
    numeric: NumericPlot


class BucketedNumericResult(WireModel):
    type: Literal["bucketedNumeric"]
    bucketed_numeric: BucketedNumericPlot


class EnumResult(WireModel):
    type: Literal["enum"]
    enum: EnumPlot


class BucketedEnumResult(WireModel):
    type: Literal["bucketedEnum"]
    bucketed_enum: BucketedEnumPlot


class RangesResult(WireModel):
    type: Literal["range"]
    range: list[Range]


class RangesSummaryResult(WireModel):
    type: Literal["rangesSummary"]
    ranges_summary: RangesSummary


class NumericPointResult(WireModel):
    type: Literal["numericPoint"]
    numeric_point: NumericPoint | None = None


class EnumPointResult(WireModel):
    type: Literal["enumPoint"]
    enum_point: EnumPoint | None = None


class SinglePoint(WireModel):
    timestamp: Timestamp
    value: dict[str, Any] = Field(
        description='a Value union: {"type": "float64Value", ...} (numeric series) or "stringValue" (enum)'
    )
    precision_loss: bool


class SinglePointResult(WireModel):
    type: Literal["singlePoint"]
    single_point: SinglePoint | None = None


class RangeValueResult(WireModel):
    type: Literal["rangeValue"]
    range_value: Range | None = None


class ArrowPlot(WireModel):
    """A SummarizeSeries asked for outputFormat ARROW_V3 / ARROW_V4 (docs/protocol.md, "Arrow output")."""

    arrow_binary: str = Field(description="an Arrow IPC stream, base64 (Conjure binary)")
    group_by_keys: list[str] | None = Field(None, description="in a grouped response: the group's tag keys")


class ArrowNumericResult(WireModel):
    type: Literal["arrowNumeric"]
    arrow_numeric: ArrowPlot = Field(description="raw points: columns timestamp (int64 ns), value (float64)")


class ArrowBucketedNumericResult(WireModel):
    type: Literal["arrowBucketedNumeric"]
    arrow_bucketed_numeric: ArrowPlot = Field(
        description="buckets: end_bucket_timestamp (int64 ns), then the requested fields' columns"
    )


class NumericHistogramResult(WireModel):
    type: Literal["numericHistogram"]
    numeric_histogram: NumericHistogramPlot


class EnumHistogramResult(WireModel):
    type: Literal["enumHistogram"]
    enum_histogram: EnumHistogramPlot


class CartesianResult(WireModel):
    type: Literal["cartesian"]
    cartesian: CartesianPlot


class BucketedCartesianResult(WireModel):
    type: Literal["bucketedCartesian"]
    bucketed_cartesian: BucketedCartesianPlot


class BucketedCartesian3dResult(WireModel):
    type: Literal["bucketedCartesian3d"]
    bucketed_cartesian3d: BucketedCartesian3dPlot = Field(alias="bucketedCartesian3d")  # not "...3D"


class MultivariateResult(WireModel):
    type: Literal["multivariate"]
    multivariate: BucketedMultivariatePlot


_Plots = (
    NumericResult
    | BucketedNumericResult
    | EnumResult
    | BucketedEnumResult
    | RangesResult
    | RangesSummaryResult
    | NumericPointResult
    | EnumPointResult
    | SinglePointResult
    | RangeValueResult
    | ArrowNumericResult
    | ArrowBucketedNumericResult
    | NumericHistogramResult
    | EnumHistogramResult
    | CartesianResult
    | BucketedCartesianResult
    | BucketedCartesian3dResult
    | MultivariateResult
)
PlotResult = Annotated[_Plots, Field(discriminator="type")]


class GroupedResponse(WireModel):
    grouping: TagsGrouping
    response: PlotResult


class GroupedResponses(WireModel):
    responses: list[GroupedResponse]


class GroupedResult(WireModel):
    type: Literal["grouped"]
    grouped: GroupedResponses


ComputeNodeResponse = Annotated[_Plots | GroupedResult, Field(discriminator="type")]


# -- subscriptionUpdate -----------------------------------------------------------------------------
class FullResult(WireModel):
    result: ComputeNodeResponse


class AppendResult(WireModel):
    start: Timestamp = Field(description="the earliest changed time: replace what the client holds from here")
    end: Timestamp = Field(description="never goes backwards; the client trims older than end - windowWidth")
    result: ComputeNodeResponse


class ErrorBody(WireModel):
    serializable_error: SerializableError


class FullUpdate(WireModel):
    type: Literal["full"]
    full: FullResult


class AppendUpdate(WireModel):
    type: Literal["append"]
    append: AppendResult


class ErrorUpdate(WireModel):
    type: Literal["error"]
    error: ErrorBody


SubscriptionUpdate = Annotated[FullUpdate | AppendUpdate | ErrorUpdate, Field(discriminator="type")]


class ResumeOutcome(WireModel):
    """Extension (docs/extensions.md): how a subscription made with a resume token began."""

    outcome: Literal["resumed", "snapshot"] = Field(
        description="resumed: this update is an AppendResult of what changed since the token; "
        "snapshot: a FullResult, for `reason`"
    )
    reason: (
        Literal[
            "tokenInvalid",
            "serverRestarted",
            "computationGone",
            "computationRestarted",
            "tokenTooOld",
            "gapLongerThanWindow",
            "appendsNotAllowed",
            "computationFailed",
        ]
        | None
    ) = None


class SubscriptionUpdateBody(WireModel):
    subscription_id: str
    update: SubscriptionUpdate
    resume_token: str | None = Field(
        None, description="extension, only if the subscription asked for resume: the view after this update"
    )
    resume: ResumeOutcome | None = Field(
        None, description="extension: on the first update after subscribing with a resume token"
    )


# -- subscriptionCreation ---------------------------------------------------------------------------
class CreationSuccessBody(WireModel):
    unit_result: dict[str, Any] = Field(
        description="a ComputeUnitResult: single success (the unit of a unitOverride / unitConversion "
        "result), else noUnitAvailable"
    )


class CreationSuccess(WireModel):
    type: Literal["success"]
    success: CreationSuccessBody


class CreationError(WireModel):
    type: Literal["error"]
    error: ErrorBody


class SubscriptionCreationBody(WireModel):
    subscription_id: str
    creation: Annotated[CreationSuccess | CreationError, Field(discriminator="type")]


# -- health -----------------------------------------------------------------------------------------
class ShutdownNotice(WireModel):
    """The server is going away: open a new connection, re-subscribe, switch once it delivers."""


class ClientMessageErrorBody(WireModel):
    error: SerializableError


class HealthPing(WireModel):
    type: Literal["ping"]
    ping: Ping


class HealthPong(WireModel):
    type: Literal["pong"]
    pong: Pong


class HealthShutdownNotice(WireModel):
    type: Literal["shutdownNotice"]
    shutdown_notice: ShutdownNotice


class HealthClientMessageError(WireModel):
    type: Literal["clientMessageError"]
    client_message_error: ClientMessageErrorBody


HealthMessage = Annotated[
    HealthPing | HealthPong | HealthShutdownNotice | HealthClientMessageError, Field(discriminator="type")
]


# -- extensions (docs/extensions.md): only ever sent to subscriptions that asked --------------------
class LateReportBody(WireModel):
    subscription_id: str
    dropped_points: int = Field(description="points left out as late since the subscription started")
    newest_dropped_timestamp: Timestamp | None = Field(None, description="absent if not known")


class LateReportMessage(WireModel):
    """At most once a second, when the count changed (`sparkwire.lateReports`)."""

    type: Literal["lateReport"]
    late_report: LateReportBody


class ReplayEndedBody(WireModel):
    subscription_id: str
    then: Literal["stop", "live"]


class ReplayEndedMessage(WireModel):
    """The replayed period is over (`sparkwire.replay`): the subscription stops or follows live."""

    type: Literal["replayEnded"]
    replay_ended: ReplayEndedBody


# -- ServerMessage ----------------------------------------------------------------------------------
class SubscriptionUpdateMessage(WireModel):
    type: Literal["subscriptionUpdate"]
    subscription_update: SubscriptionUpdateBody


class SubscriptionCreationMessage(WireModel):
    type: Literal["subscriptionCreation"]
    subscription_creation: SubscriptionCreationBody


class HealthServerMessage(WireModel):
    type: Literal["health"]
    health: HealthMessage


ServerMessage = Annotated[
    SubscriptionUpdateMessage
    | SubscriptionCreationMessage
    | HealthServerMessage
    | LateReportMessage
    | ReplayEndedMessage,
    Field(discriminator="type"),
]
server_message_adapter: TypeAdapter[Any] = TypeAdapter(ServerMessage)
