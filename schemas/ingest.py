"""`POST /storage/writer/v1`: Nominal's WriteBatchesRequestExternal, the subset Sparkwire stores.

TypedDicts, not models: pydantic-core validates them without building an object per point.
"""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import Field, TypeAdapter
from typing_extensions import TypedDict


class WireTimestamp(TypedDict):
    seconds: int
    nanos: Annotated[int, Field(ge=0, lt=1_000_000_000)]


class DoublePoint(TypedDict):
    timestamp: WireTimestamp
    value: float


class StringPoint(TypedDict):
    timestamp: WireTimestamp
    value: str


class DoublePoints(TypedDict):
    type: Literal["double"]
    double: list[DoublePoint]


class StringPoints(TypedDict):
    type: Literal["string"]
    string: list[StringPoint]


Points = Annotated[DoublePoints | StringPoints, Field(discriminator="type")]


class RecordsBatch(TypedDict):
    channel: Annotated[str, Field(min_length=1)]
    tags: NotRequired[dict[str, str]]
    points: Points


class WriteBatchesRequest(TypedDict):
    dataSourceRid: Annotated[str, Field(min_length=1)]
    batches: list[RecordsBatch]


write_request_adapter: TypeAdapter[WriteBatchesRequest] = TypeAdapter(WriteBatchesRequest)
