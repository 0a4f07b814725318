"""ClientMessage: what a client sends on `WS /persistent-compute/ws`."""

from __future__ import annotations

import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, StringConstraints, TypeAdapter

from schemas.conjure import ConjureModel, ConjureUnion, Duration, Timestamp

# Nominal's IR declares SubscriptionId a UUID, but its generated Python type is a plain `str` that
# the Conjure decoder never checks, so clients send names such as "my-sub-1". Any non-empty string
# of at most 256 characters is an id (UUIDs, 36 characters, included): far above any name a client
# picks, while every update frame repeats the id and each connection keeps one per subscription.
SUBSCRIPTION_ID_MAX_LENGTH = 256
SubscriptionId = Annotated[
    str,
    StringConstraints(strict=True, min_length=1, max_length=SUBSCRIPTION_ID_MAX_LENGTH),
    Field(description="A subscription id: any non-empty string of at most 256 characters, UUIDs included"),
]


class Context(ConjureModel):
    variables: dict[str, ConjureUnion] = Field(default_factory=dict)
    dataset_references: dict[str, JsonValue] | None = Field(default_factory=dict)
    function_variables: dict[str, JsonValue] | None = None
    # Read so that the compiler can honour or refuse them by name (they change the answer).
    default_fill_strategy: JsonValue | None = None
    default_alignment_strategy: JsonValue | None = None
    apply_data_scope_offsets: bool | None = None
    resolve_assets_through_datasets: bool | None = None


class StreamingComputeNodeRequest(ConjureModel):
    node: ConjureUnion
    window_width: Duration
    context: Context = Field(default_factory=Context)
    source_rid: str | None = None


class AppendOnlyConfig(ConjureModel):
    decimate_results: bool


class ResultConfiguration(ConjureModel):
    type: Literal["appendOnly"]
    append_only: AppendOnlyConfig


class SubscriptionOptions(ConjureModel):
    min_delay: int = Field(ge=0)
    allow_appends: bool | None = None
    result_configuration: ResultConfiguration | None = None
    use_flink: bool | None = None
    allowed_lateness: Duration | None = None


class Replay(ConjureModel):
    """Sparkwire extension: re-watch `[start, end)` of the subscription's series from the log."""

    start: Timestamp
    end: Timestamp
    speed: float | None = Field(default=None, gt=0, description="1 is real time; absent: as fast as possible")
    then: Literal["stop", "live"] = "stop"


class SubscriptionExtensions(ConjureModel):
    """What a subscription opts into beyond Nominal's protocol (docs/extensions.md). A Nominal
    client never sends it, so it never receives a field or message its decoder does not know."""

    resume: bool = Field(default=False, description="a resume token with each update")
    resume_token: str | None = Field(default=None, max_length=512, description="resume from this token")
    late_reports: bool = Field(default=False, description="lateReport messages, at most one a second")
    replay: Replay | None = None
    stream_polled: bool = Field(
        default=False,
        description="stream the polling-only nodes Sparkwire can keep exact live (a signal filter, a "
        "frequency-domain spectrum, an LTTB series) instead of refusing them with PollingOnlyComputation",
    )


class StreamingComputeNodeSubscription(ConjureModel):
    compute_request: StreamingComputeNodeRequest
    subscription_options: SubscriptionOptions
    sparkwire: SubscriptionExtensions | None = None


def _iso_string(value: Any) -> Any:
    # Conjure DATETIME is an ISO-8601 string; pydantic alone would also take a number (unix time).
    if not isinstance(value, str | datetime.datetime):
        raise ValueError("a Conjure datetime must be an ISO-8601 string")
    return value


DateTime = Annotated[datetime.datetime, BeforeValidator(_iso_string)]


class Ping(ConjureModel):
    sent_at: DateTime


class Pong(ConjureModel):
    ping_originally_sent_at: DateTime
    sent_at: DateTime


class UpdateToken(ConjureModel):
    """Sparkwire extension (as YDB's read sessions refresh auth): a fresh bearer token."""

    token: str


_Strict = ConfigDict(extra="forbid", frozen=True)


class Subscribe(BaseModel):
    model_config = _Strict
    type: Literal["subscribe"]
    subscribe: dict[SubscriptionId, StreamingComputeNodeSubscription]


class Unsubscribe(BaseModel):
    model_config = _Strict
    type: Literal["unsubscribe"]
    unsubscribe: list[SubscriptionId]


class ClientPing(BaseModel):
    model_config = _Strict
    type: Literal["ping"]
    ping: Ping


class ClientPong(BaseModel):
    model_config = _Strict
    type: Literal["pong"]
    pong: Pong


class ClientUpdateToken(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    type: Literal["updateToken"]
    update_token: UpdateToken = Field(alias="updateToken")


ClientMessage = Annotated[
    Subscribe | Unsubscribe | ClientPing | ClientPong | ClientUpdateToken, Field(discriminator="type")
]
client_message_adapter: TypeAdapter[Any] = TypeAdapter(ClientMessage)
