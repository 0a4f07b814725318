"""The columnar writers: each series' timestamps and values sent as two columns, through the same
pipeline as the row writers (app/ingest/writes.py `accept_writes`: Origin, bearer token, the body
streamed under its limit with its Content-Encoding undone, the ingest limits, the data sources the
token reaches, the durable log before the 200, nothing stored on a refusal, Conjure errors).

- `POST /storage/writer/v1/columnar`: nominal-api's WriteColumnBatchesRequest as Conjure JSON.
- `POST /storage/writer/v1/nominal-columnar`: its protobuf twin, nominal-api-protos'
  `nominal.direct_channel_writer.v2.WriteBatchesRequest` (the data source named in the body).

What is stored, as on the protobuf row writer (app/ingest/nominal.py):
- doubles and strings: numeric and enum series;
- ints and uint64s: numeric series, as doubles. A value a double cannot hold exactly (beyond 2^53)
  is refused (400, naming the series, the point and the value), never rounded;
- arrays (`arrays`: `doubles1d` or `strings1d`, a list of values per point; the protobuf's
  `array_points`: `double_array_points` or `string_array_points`) and structs (`structs`, the
  protobuf's `struct_points`: a JSON object's text per point): series of kind `double-array`,
  `string-array` and `struct` (compute/storage/series.py), each point's value one JSON text in the
  string column, as compute/storage/composite_points.py writes it. A struct that is not a JSON
  object (or escapes a lone UTF-16 surrogate) is refused (400, naming the batch and the point), as
  is a JSON array element of the wrong type (msgspec names its path); nothing of the request is
  stored;
- the protobuf's log points and units: refused by name, 400, nothing stored.
`sessionName` is accepted and not used: Sparkwire has no sessions and it changes no answer.

The values go to numpy in one call per column (a JSON list of numbers, a packed protobuf repeated
field); arrays and structs are written out point by point. JSON timestamps are read per point by
msgspec; protobuf ones as Arrow columns by ptars (`_ptars_timestamps`). A JSON body of
SPARKWIRE_INGEST_DECODE_MIN_BYTES or more is decoded in a decode process (app/ingest/workers.py), as
the row JSON writer's is; the protobuf one, ~0.13 s a million points, on the event loop, as the row
protobuf writer's is."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
import numpy as np
from fastapi import Request
from fastapi.responses import Response
from google.protobuf.message import DecodeError
from nominal.protos.direct_channel_writer.v2.direct_nominal_channel_writer_pb2 import (
    WriteBatchesRequest as ColumnarProtobufRequest,
)

from app.ingest.nominal import (
    exact_doubles,
    refuse_content_type,
    timestamps_ns,
)
from app.ingest.writes import InvalidWrite, accept_writes
from compute.storage.composite_points import double_array_text, string_array_text, struct_text
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesKey, SeriesKind
from schemas.columnar import (
    ArraysColumn,
    Doubles1d,
    DoublesColumn,
    IntsColumn,
    StringsColumn,
    StructsColumn,
    column_request_decoder,
)

if TYPE_CHECKING:
    import pyarrow as pa

COLUMNAR_PATH = "/storage/writer/v1/columnar"
NOMINAL_COLUMNAR_PATH = "/storage/writer/v1/nominal-columnar"

UNSUPPORTED = "(doubles, strings, ints, uint64s, arrays and structs are); nothing of the request was stored"
# Array and struct columns, by the JSON union's names: their series kind and a value's stored text
COMPOSITE: dict[str, tuple[SeriesKind, Callable[[Any], str]]] = {
    "arrays.doubles1d": (SeriesKind.DOUBLE_ARRAY, double_array_text),
    "arrays.strings1d": (SeriesKind.STRING_ARRAY, string_array_text),
    "structs": (SeriesKind.STRUCT, struct_text),
}


async def write_columnar(request: Request) -> Response:
    """`POST /storage/writer/v1/columnar`: nominal-api's WriteColumnBatchesRequest (JSON)."""

    # a large body goes to a decode process (app/ingest/workers.py), as the row JSON writer's does
    decode = functools.partial(request.app.state.sparkwire.decoders.decoded, columnar_json_writes)
    return await accept_writes(request, decode)


async def write_nominal_columnar(request: Request) -> Response:
    """`POST /storage/writer/v1/nominal-columnar`: the columnar WriteBatchesRequest protobuf."""
    message = "nominal.direct_channel_writer.v2.WriteBatchesRequest"
    refused = refuse_content_type(request, message, COLUMNAR_PATH)
    if refused is not None:
        return refused

    async def decode(body: bytes) -> list[SeriesWrite]:
        return columnar_protobuf_writes(body)

    return await accept_writes(request, decode)


def columnar_json_writes(body: bytes) -> list[SeriesWrite]:
    """A WriteColumnBatchesRequest JSON body to the log's writes; InvalidWrite says what is wrong
    and where for anything the log would not store exactly."""
    # No depth scan first (app/protocol/limits.py json_depth: 3.6 s of 4.2 s for a 62 MB body): the
    # schema nests 7 levels, unknown fields are refused on their name, and what msgspec does recurse
    # into (a value it skips looking for a union's tag) ends in a RecursionError, not a crash.
    try:
        request = column_request_decoder.decode(body)
    except msgspec.DecodeError as exc:  # ValidationError included: msgspec names the path ($.batches[0]...)
        raise InvalidWrite(f"body is not a WriteColumnBatchesRequest: {exc}") from None
    except RecursionError:
        raise InvalidWrite("body: JSON nested too deeply for a WriteColumnBatchesRequest") from None
    rid = request.dataSourceRid
    if not rid:
        raise InvalidWrite("dataSourceRid: must not be empty")
    writes = []
    for i, batch in enumerate(request.batches):
        where = f"batches.{i} (channel {batch.channel!r})"
        if not batch.channel:
            raise InvalidWrite(f"batches.{i}.channel: must not be empty")
        values = batch.values
        stamps = batch.timestamps
        seconds = [t.seconds for t in stamps]
        nanos = [t.nanos for t in stamps]
        raw: list[Any]
        if isinstance(values, DoublesColumn):
            kind, raw = "doubles", values.doubles
        elif isinstance(values, StringsColumn):
            kind, raw = "strings", values.strings
        elif isinstance(values, IntsColumn):
            kind, raw = "ints", values.ints
        elif isinstance(values, ArraysColumn):
            arrays = values.arrays
            if isinstance(arrays, Doubles1d):
                kind, raw = "arrays.doubles1d", arrays.doubles1d
            else:
                kind, raw = "arrays.strings1d", arrays.strings1d
        elif isinstance(values, StructsColumn):
            kind, raw = "structs", values.structs
        else:
            kind, raw = "uint64s", values.uint64s
        key = SeriesKey.of(rid, batch.channel, batch.tags or {})
        writes.append(_write(key, kind, seconds, nanos, raw, where))
    return writes


# the protobuf's oneof members, by the JSON union's names (the messages the error texts name)
_PROTOBUF_KINDS = {
    "double_points": "doubles",
    "string_points": "strings",
    "int_points": "ints",
    "uint64_points": "uint64s",
    "struct_points": "structs",
}
_PROTOBUF_ARRAYS = {"double_array_points": "arrays.doubles1d", "string_array_points": "arrays.strings1d"}
_PROTOBUF_REFUSED = {"log_points": "log points"}


def columnar_protobuf_writes(body: bytes) -> list[SeriesWrite]:
    """A serialized nominal.direct_channel_writer.v2.WriteBatchesRequest to the log's writes."""
    request = ColumnarProtobufRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise InvalidWrite(f"body is not a WriteBatchesRequest protobuf: {exc}") from None
    rid = request.data_source_rid
    if not rid:
        raise InvalidWrite("data_source_rid: must not be empty")
    writes = []
    columns = _ptars_timestamps(body, len(request.batches))
    for i, batch in enumerate(request.batches):
        where = f"batches.{i} (channel {batch.channel!r})"
        if not batch.channel:
            raise InvalidWrite(f"batches.{i}.channel: must not be empty")
        if batch.HasField("unit"):
            # Sparkwire keeps no units: stored without it, a unit-aware reader would be told wrong
            raise InvalidWrite(
                f"{where}.unit: units are not supported (send the batch without a unit); "
                "nothing of the request was stored"
            )
        points = batch.points
        member = points.WhichOneof("points")
        if member is None:
            raise InvalidWrite(
                f"{where}.points: holds none of double, string, int, uint64, array or struct points"
            )
        if member in _PROTOBUF_REFUSED:
            raise InvalidWrite(f"{where}.points: {_PROTOBUF_REFUSED[member]} are not supported {UNSUPPORTED}")
        read: tuple[Any, Any] | None = columns.get(i)
        if read is None:  # ptars refused the body or counted otherwise: upb's objects, per point
            stamps = points.timestamps
            read = [t.seconds for t in stamps], [t.nanos for t in stamps]
        seconds, nanos = read
        key = SeriesKey.of(rid, batch.channel, dict(batch.tags))
        if member == "array_points":
            array_type = points.array_points.WhichOneof("array_type")
            if array_type is None:
                raise InvalidWrite(
                    f"{where}.points.array_points: holds neither double nor string array points"
                )
            arrays = getattr(points.array_points, array_type).points
            kind, raw = _PROTOBUF_ARRAYS[array_type], [a.value for a in arrays]
        else:  # a repeated field (numpy reads a packed one, of numbers, in one call)
            kind, raw = _PROTOBUF_KINDS[member], getattr(points, member).points
        writes.append(_write(key, kind, seconds, nanos, raw, where))
    return writes


class _Decoder(Protocol):  # what is used of ptars' MessageHandler (its Rust module has no stubs)
    def list_to_record_batch(self, payloads: list[bytes]) -> pa.RecordBatch: ...


@functools.cache
def _ptars_handler() -> _Decoder:
    from ptars import HandlerPool  # it imports Arrow (~35 MB): only once a protobuf body comes

    handler: _Decoder = HandlerPool([ColumnarProtobufRequest.DESCRIPTOR.file]).get_for_message(
        ColumnarProtobufRequest.DESCRIPTOR
    )
    return handler


def _ptars_timestamps(body: bytes, batches: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each batch's timestamps as (seconds, nanos) int64 columns, decoded by ptars (protobuf to Arrow
    in Rust, docs/decisions/0036-protobuf-ingest-columns.md) from the body upb parsed: reading them
    through upb's objects costs ~0.67 s a million points, ptars ~0.1 s. {} when ptars refuses the
    body or sees another number of batches; the caller then reads them per point. An unset seconds
    or nanos (proto3 optional) is 0, as upb reads it."""
    try:
        listed = _ptars_handler().list_to_record_batch([body]).column("batches")
    except Exception:  # ptars refuses what upb accepted (it raises ValueError): read per point
        return {}
    first = listed.offsets[0].as_py()
    if listed.offsets[1].as_py() - first != batches:
        return {}
    stamps = listed.values.field("points").field("timestamps")  # per batch: list<struct<seconds, nanos>>
    offsets = stamps.offsets.to_numpy()
    seconds = stamps.values.field("seconds").fill_null(0).to_numpy()
    nanos = stamps.values.field("nanos").fill_null(0).to_numpy()
    return {
        i: (
            seconds[offsets[first + i] : offsets[first + i + 1]],
            nanos[offsets[first + i] : offsets[first + i + 1]],
        )
        for i in range(batches)
    }


def _write(key: SeriesKey, kind: str, seconds: Any, nanos: Any, raw: Any, where: str) -> SeriesWrite:
    """One series' write, its columns checked: as many values as timestamps, timestamps in range,
    integers exact as doubles, structs JSON objects."""
    if len(raw) != len(seconds):
        raise InvalidWrite(
            f"{where}: {len(seconds)} timestamps and {len(raw)} values; a batch needs one value per timestamp"
        )
    ts = timestamps_ns(seconds, nanos, f"{where}.timestamps")
    if kind == "strings":
        return SeriesWrite(key, SeriesKind.ENUM, ts, list(raw))
    if kind in COMPOSITE:
        stored, text_of = COMPOSITE[kind]
        texts = []
        for j, value in enumerate(raw):
            try:
                texts.append(text_of(value))
            except ValueError as exc:  # composite_points' refusal: no JSON object, no Unicode text
                raise InvalidWrite(
                    f"{where}.values.{kind}.{j}: {exc}; nothing of the request was stored"
                ) from None
        return SeriesWrite(key, stored, ts, texts)
    if kind == "doubles":
        # np.asarray takes "NaN", "Infinity" and "-Infinity" (the decoder admits only those strings)
        return SeriesWrite(key, SeriesKind.NUMERIC, ts, np.asarray(raw, dtype=np.float64))
    dtype = np.int64 if kind == "ints" else np.uint64
    try:
        exact = np.asarray(raw, dtype=dtype)
    except OverflowError:
        raise InvalidWrite(
            f"{where}.values.{kind}: a value is outside the {np.dtype(dtype).name} range"
        ) from None
    return SeriesWrite(key, SeriesKind.NUMERIC, ts, exact_doubles(exact, dtype, f"{where}.values.{kind}"))
