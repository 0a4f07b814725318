"""`POST /storage/writer/v1/columnar`: nominal-api's WriteColumnBatchesRequest (Conjure JSON), read
strictly by msgspec (app/ingest/columnar.py). Unknown fields are refused, never ignored: a field this
server does not know could change what the request means. Arrays and structs are read as strictly:
an array's elements must all be strings (`strings1d`) or all doubles (`doubles1d`), a struct a
string (which app/ingest/columnar.py then requires to be a JSON object)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

# Conjure's JSON double: a number, or one of these strings (JSON has no NaN or infinities)
ConjureDouble = float | Literal["NaN", "Infinity", "-Infinity"]


class ColumnTimestamp(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    seconds: int
    nanos: int


class DoublesColumn(msgspec.Struct, tag_field="type", tag="doubles", forbid_unknown_fields=True):
    doubles: list[ConjureDouble]


class StringsColumn(msgspec.Struct, tag_field="type", tag="strings", forbid_unknown_fields=True):
    strings: list[str]


class IntsColumn(msgspec.Struct, tag_field="type", tag="ints", forbid_unknown_fields=True):
    ints: list[int]


class Uint64sColumn(msgspec.Struct, tag_field="type", tag="uint64s", forbid_unknown_fields=True):
    uint64s: list[Annotated[int, msgspec.Meta(ge=0)]]


# nominal-api's ArraysValues: "Each element within the outer list corresponds to an Array point.
# Subsequent inner lists contain the array values recorded for that point."
class Strings1d(msgspec.Struct, tag_field="type", tag="strings1d", forbid_unknown_fields=True):
    strings1d: list[list[str]]


class Doubles1d(msgspec.Struct, tag_field="type", tag="doubles1d", forbid_unknown_fields=True):
    doubles1d: list[list[ConjureDouble]]


class ArraysColumn(msgspec.Struct, tag_field="type", tag="arrays", forbid_unknown_fields=True):
    arrays: Strings1d | Doubles1d


class StructsColumn(msgspec.Struct, tag_field="type", tag="structs", forbid_unknown_fields=True):
    structs: list[str]  # each point a JSON object's text (nominal-api: `list<string>`)


ColumnValues = DoublesColumn | StringsColumn | IntsColumn | Uint64sColumn | ArraysColumn | StructsColumn


class ColumnBatch(msgspec.Struct, forbid_unknown_fields=True):
    channel: str
    timestamps: list[ColumnTimestamp]
    values: ColumnValues
    tags: dict[str, str] | None = None  # Conjure: a null member is an absent one


class WriteColumnBatchesRequest(msgspec.Struct, forbid_unknown_fields=True):
    dataSourceRid: str
    batches: list[ColumnBatch]
    sessionName: str | None = None  # accepted, not used: Sparkwire has no sessions


column_request_decoder = msgspec.json.Decoder(WriteColumnBatchesRequest)
