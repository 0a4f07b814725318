"""`POST /storage/writer/v1`: Nominal's WriteBatchesRequestExternal, the subset Sparkwire stores,
read two ways.

- `write_request_decoder` (msgspec) reads the common, well-formed body straight from its bytes. It is
  strict (exact JSON types, no coercion) and its point structs are not tracked by the garbage
  collector, so a 200,000-point/s feed neither builds a dict per point nor sets off collections
  (docs/decisions/0011-typed-ingest-decoder.md).
- `write_request_adapter` (pydantic, TypedDicts) is the lenient validator: it decides every body the
  strict decoder declines, and its errors are the ones clients see.
"""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

import msgspec
from pydantic import Field, TypeAdapter
from typing_extensions import TypedDict

from schemas.timestamps import MAX_SECONDS, NANOS_PER_SECOND


class WireTimestamp(TypedDict):
    seconds: int
    nanos: Annotated[int, Field(ge=0, lt=NANOS_PER_SECOND)]


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


class DoubleArrayPoint(TypedDict):
    timestamp: WireTimestamp
    value: list[float]


class StringArrayPoint(TypedDict):
    timestamp: WireTimestamp
    value: list[str]


class DoubleArrays(TypedDict):
    type: Literal["double"]
    double: list[DoubleArrayPoint]


class StringArrays(TypedDict):
    type: Literal["string"]
    string: list[StringArrayPoint]


class ArrayPoints(TypedDict):
    type: Literal["array"]
    array: Annotated[DoubleArrays | StringArrays, Field(discriminator="type")]


class StructPoint(TypedDict):
    timestamp: WireTimestamp
    jsonString: str


class StructPoints(TypedDict):
    type: Literal["struct"]
    struct: list[StructPoint]


# Arrays and structs are read by the validator only: the strict decoder declines them (rare, small)
Points = Annotated[DoublePoints | StringPoints | ArrayPoints | StructPoints, Field(discriminator="type")]


class RecordsBatch(TypedDict):
    channel: Annotated[str, Field(min_length=1)]
    tags: NotRequired[dict[str, str]]
    points: Points


class WriteBatchesRequest(TypedDict):
    dataSourceRid: Annotated[str, Field(min_length=1)]
    batches: list[RecordsBatch]


write_request_adapter: TypeAdapter[WriteBatchesRequest] = TypeAdapter(WriteBatchesRequest)


# The strict reader. Each constraint is one the validator also enforces, so whatever it accepts the
# validator accepts unchanged (tests/unit/test_ingest_parsing.py checks this property).
class StrictTimestamp(msgspec.Struct, gc=False):
    seconds: Annotated[int, msgspec.Meta(ge=0, le=MAX_SECONDS)]
    nanos: Annotated[int, msgspec.Meta(ge=0, lt=NANOS_PER_SECOND)]


class StrictDoublePoint(msgspec.Struct, gc=False):
    timestamp: StrictTimestamp
    value: float


class StrictStringPoint(msgspec.Struct, gc=False):
    timestamp: StrictTimestamp
    value: str


class StrictDoublePoints(msgspec.Struct, tag_field="type", tag="double"):
    double: list[StrictDoublePoint]


class StrictStringPoints(msgspec.Struct, tag_field="type", tag="string"):
    string: list[StrictStringPoint]


class StrictRecordsBatch(msgspec.Struct):
    channel: Annotated[str, msgspec.Meta(min_length=1)]
    points: StrictDoublePoints | StrictStringPoints
    tags: dict[str, str] = {}
    # Read so that a batch naming a unit is declined (app/ingest/writes.py refuses it by name);
    # nominal-api's encoder writes an unset one as null, which is no unit.
    unit: str | None = None


class StrictWriteBatchesRequest(msgspec.Struct):
    dataSourceRid: Annotated[str, msgspec.Meta(min_length=1)]
    batches: list[StrictRecordsBatch]


write_request_decoder = msgspec.json.Decoder(StrictWriteBatchesRequest)
