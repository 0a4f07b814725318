"""`POST /storage/writer/v1/nominal/{dataSourceRid}`: ingest as Nominal's SDKs send it, a protobuf
`WriteRequestNominal` (package nominal-api-protos), through the same pipeline as the JSON endpoint
(app/ingest/writes.py: auth, size limits, zstd/gzip, limits, durable log, Conjure errors).

Point kinds (docs/decisions/0026-protobuf-ingest.md):
- double and string points: numeric and enum series, as the JSON endpoint stores them;
- integer (int64) and uint64 points: numeric series. A double holds every integer up to 2^53
  exactly and some beyond; a value it cannot hold exactly is refused (400, naming the series, the
  point and the value), never rounded, so what a subscriber sees is what was written;
- array points (double and string arrays) and struct points: series of kind `double-array`,
  `string-array` and `struct` (compute/storage/series.py), each point's value one JSON text in the
  string column, as compute/storage/composite_points.py writes it (a struct's `json_string` must be
  a JSON object, escaping no lone UTF-16 surrogate: anything else is refused, 400, naming the series
  and the point); read per point through upb's objects, not by ptars, which is given only the four
  kinds above.
`session_name` is accepted and not used: Sparkwire has no sessions.

The body is parsed by protobuf's upb runtime (a body it refuses is refused, 400), which gives what
is per series: channel, tags, which kind of points. Reading each point's fields through upb's Python
objects costs ~0.8 us a point (a wrapper per point and per timestamp), most of the server's CPU per
point; instead the points are decoded a second time, by ptars (a maintained Rust decoder of protobuf
into Arrow, docs/decisions/0036-protobuf-ingest-columns.md), into Arrow lists cut into numpy
columns per series (`_arrow_columns`, strings as Python lists). ptars is given a copy of the
messages' schema in which google.protobuf.Timestamp is a look-alike message of the same wire layout,
so seconds and nanos arrive as they were sent and are refused as on the per-point read. The per-point
read stays, as the reference (tests/unit/test_nominal_columns.py) and the fallback: for a series whose
point count differs between the two decoders and for a request ptars refuses.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
from fastapi import Request
from fastapi.responses import Response
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp
from nominal.protos.write.nominal_write_pb2 import WriteRequestNominal

from app.http.errors import error_response
from app.ingest.writes import InvalidWrite, accept_writes
from compute.storage.composite_points import double_array_text, string_array_text, struct_text
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesKey, SeriesKind
from schemas.timestamps import MAX_SECONDS, NANOS_PER_SECOND, to_nanos_array

if TYPE_CHECKING:
    import pyarrow as pa

# The content types Nominal's clients send for this body (the Rust client: application/x-protobuf).
PROTOBUF_TYPES = frozenset({"application/x-protobuf", "application/protobuf", "application/octet-stream"})
NUMERIC_KINDS = {
    "double_points": np.float64,
    "integer_points": np.int64,
    "uint64_points": np.uint64,
}
COLUMN_KINDS = frozenset({*NUMERIC_KINDS, "string_points"})
# Array and struct points, read per point: their kind and the stored text of a point's value, by
# the protobuf's member (an array's, inside array_points' `array_type` oneof)
COMPOSITE_KINDS: dict[str, tuple[SeriesKind, Callable[[Any], str]]] = {
    "double_array_points": (SeriesKind.DOUBLE_ARRAY, lambda p: double_array_text(p.value)),
    "string_array_points": (SeriesKind.STRING_ARRAY, lambda p: string_array_text(p.value)),
    "struct_points": (SeriesKind.STRUCT, lambda p: struct_text(p.json_string)),
}
Column = Sequence[Any] | np.ndarray
Columns = tuple[Column, Column, Column]  # a series' points: seconds, nanos, values


def refuse_content_type(request: Request, message: str, json_path: str) -> Response | None:
    """A 415 for a protobuf endpoint's request that is not protobuf (naming `message`, the protobuf
    it takes, and `json_path`, where its JSON twin is), else None."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in PROTOBUF_TYPES:
        return None
    shown = content_type or "none"
    return error_response(
        415,
        f"Content-Type {shown}: this endpoint takes a {message} protobuf (application/x-protobuf); "
        f"JSON goes to POST {json_path}",
        params={"contentType": shown},
    )


async def write_nominal(request: Request, dataSourceRid: str) -> Response:
    refused = refuse_content_type(request, "WriteRequestNominal", "/storage/writer/v1")
    if refused is not None:
        return refused

    async def decode(body: bytes) -> list[SeriesWrite]:  # on the event loop: Arrow's C++ does the work
        return nominal_writes(body, dataSourceRid)

    return await accept_writes(request, decode)


def nominal_writes(body: bytes, rid: str) -> list[SeriesWrite]:
    """A serialized WriteRequestNominal to the log's writes for data source `rid`; InvalidWrite
    names what is wrong and where for anything the log would not store exactly."""
    if not rid:
        raise InvalidWrite("dataSourceRid: must not be empty")
    request = WriteRequestNominal()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise InvalidWrite(f"body is not a WriteRequestNominal protobuf: {exc}") from None
    writes = []
    columns = _arrow_columns(body, request)
    for i, series in enumerate(request.series):
        channel = series.channel.name
        where = f"series.{i} (channel {channel!r})"
        if not channel:
            raise InvalidWrite(f"series.{i}.channel.name: must not be empty")
        kind = series.points.WhichOneof("points_type")
        if kind is None:
            raise InvalidWrite(
                f"{where}.points: holds none of double, string, integer, uint64, array or struct points"
            )
        key = SeriesKey.of(rid, channel, dict(series.tags))
        if kind == "array_points" or kind == "struct_points":
            writes.append(_composite_write(key, series.points, kind, where))
            continue
        read: Columns | None = columns.get(i)
        if read is None:
            points = getattr(series.points, kind).points
            stamps = [p.timestamp for p in points]
            read = [t.seconds for t in stamps], [t.nanos for t in stamps], [p.value for p in points]
        seconds, nanos, raw = read
        ts = timestamps_ns(seconds, nanos, f"{where}.points.{kind}")
        if kind == "string_points":
            writes.append(SeriesWrite(key, SeriesKind.ENUM, ts, cast(list[str], raw)))
        else:
            values = exact_doubles(raw, NUMERIC_KINDS[kind], f"{where}.points.{kind}")
            writes.append(SeriesWrite(key, SeriesKind.NUMERIC, ts, values))
    return writes


def _composite_write(key: SeriesKey, points: Any, kind: str, where: str) -> SeriesWrite:
    """A series of array or struct points, read per point: each value as its stored JSON text."""
    if kind == "array_points":
        member = points.array_points.WhichOneof("array_type")
        if member is None:
            raise InvalidWrite(f"{where}.points.array_points: holds neither double nor string array points")
        held, field = getattr(points.array_points, member).points, f"{where}.points.array_points.{member}"
    else:
        member, held, field = kind, points.struct_points.points, f"{where}.points.struct_points"
    stored, text_of = COMPOSITE_KINDS[member]
    stamps = [p.timestamp for p in held]
    ts = timestamps_ns([t.seconds for t in stamps], [t.nanos for t in stamps], field)
    texts = []
    for j, point in enumerate(held):
        try:
            texts.append(text_of(point))
        except ValueError as exc:  # struct_text's: the json_string is no JSON object
            raise InvalidWrite(f"{field}.{j}.json_string: {exc}; nothing of the request was stored") from None
    return SeriesWrite(key, stored, ts, texts)


def _arrow_columns(body: bytes, request: WriteRequestNominal) -> dict[int, Columns]:
    """The points of the double, integer, uint64 and string series as columns, by series index:
    ptars decodes `body` (which upb has parsed into `request`) to Arrow in one call, and each kind's
    columns are cut per series by the lists' offsets. A series whose point count differs from
    upb's is left out (read per point), and so is the whole request if ptars refuses it."""
    by_kind: dict[str, list[int]] = {}
    for i, series in enumerate(request.series):
        kind = series.points.WhichOneof("points_type")
        if kind in COLUMN_KINDS:
            by_kind.setdefault(kind, []).append(i)
    if not by_kind:
        return {}
    try:
        batch = _ptars_handler().list_to_record_batch([body])
    except Exception:  # ptars refuses what upb accepted: read per point (ptars raises ValueError)
        return {}
    listed = batch.column("series")
    first = listed.offsets[0].as_py()  # the request's series in listed.values
    if listed.offsets[1].as_py() - first != len(request.series):
        return {}
    points = listed.values.field("points")
    out: dict[int, Columns] = {}
    for kind, indices in by_kind.items():
        held = points.field(kind).field("points")  # per series: list<struct<timestamp, value>>
        offsets = held.offsets.to_numpy()
        point = held.values
        stamp = point.field("timestamp")
        read = stamp.field("seconds"), stamp.field("nanos"), point.field("value")
        if any(column.null_count for column in read):  # ptars declares them not null
            return {}
        seconds, nanos = read[0].to_numpy(), read[1].to_numpy()
        if stamp.null_count:  # points without a timestamp: upb reads seconds 0 and nanos 0
            missing = stamp.is_null().to_numpy(zero_copy_only=False)
            seconds, nanos = np.where(missing, 0, seconds), np.where(missing, 0, nanos)
        values: Column = read[2].to_pylist() if kind == "string_points" else read[2].to_numpy()
        for i in indices:
            a, b = int(offsets[first + i]), int(offsets[first + i + 1])
            # ptars keeps a oneof member's earlier points that upb dropped (another member came
            # between): the counts tell, and those series are read per point
            if b - a == len(getattr(request.series[i].points, kind).points):
                out[i] = seconds[a:b], nanos[a:b], values[a:b]
    return out


class _Decoder(Protocol):  # what is used of ptars' MessageHandler (its Rust module has no stubs)
    def list_to_record_batch(self, payloads: list[bytes]) -> pa.RecordBatch: ...


_PTARS_FIELDS = {"WriteRequestNominal": {"series"}, "Series": {"points"}, "Points": COLUMN_KINDS}


@functools.cache
def _ptars_handler() -> _Decoder:
    """ptars' decoder of WriteRequestNominal, seeing every google.protobuf.Timestamp as a message of
    the same wire layout (int64 seconds = 1; int32 nanos = 2): ptars then gives seconds and nanos
    as they are on the wire (its Timestamp conversion to timestamp[ns] would merge them, and map
    invalid stamps such as seconds 1, nanos -1 onto valid ones), and `_timestamps` refuses exactly
    what it refuses on the per-point read. Schema only: the bytes are decoded by ptars."""
    stamp = descriptor_pb2.FileDescriptorProto()
    Timestamp.DESCRIPTOR.file.CopyToProto(stamp)
    stamp.name, stamp.package = "sparkwire/ingest_nominal_stamp.proto", "sparkwire.ingest"
    stamp.ClearField("options")
    (message,) = stamp.message_type
    message.name = "Stamp"
    nominal = descriptor_pb2.FileDescriptorProto()
    WriteRequestNominal.DESCRIPTOR.file.CopyToProto(nominal)
    timestamp_file = Timestamp.DESCRIPTOR.file.name
    nominal.dependency[:] = [stamp.name if d == timestamp_file else d for d in nominal.dependency]
    messages = list(nominal.message_type)
    while messages:
        m = messages.pop()
        messages.extend(m.nested_type)
        for field in m.field:
            if field.type_name == f".{Timestamp.DESCRIPTOR.full_name}":
                field.type_name = f".{stamp.package}.{message.name}"
    # Only what is read from ptars' output (~0.08 ms less a request to build and free): ptars skips
    # the other fields as unknown ones; upb reads the channel and tags, and array and struct points
    for m in nominal.message_type:
        if m.name in _PTARS_FIELDS:
            kept = [field for field in m.field if field.name in _PTARS_FIELDS[m.name]]
            del m.field[:]
            m.field.extend(kept)
            if not any(field.HasField("oneof_index") for field in kept):
                del m.oneof_decl[:]  # session_name's (proto3 optional)
    pool = descriptor_pool.DescriptorPool()  # our own: nothing here clashes with the real messages
    for file in (stamp, nominal):
        pool.Add(file)
    from ptars import HandlerPool  # it imports Arrow (~35 MB): only once a protobuf body comes

    handler: _Decoder = HandlerPool([pool.FindFileByName(nominal.name)]).get_for_message(
        pool.FindMessageTypeByName(WriteRequestNominal.DESCRIPTOR.full_name)
    )
    return handler


def timestamps_ns(seconds: Column, nanos: Column, where: str) -> np.ndarray:
    """int64 nanoseconds since the epoch, refusing what the JSON endpoint refuses."""
    s = np.asarray(seconds, dtype=np.int64)
    n = np.asarray(nanos, dtype=np.int64)
    bad = (s < 0) | (s > MAX_SECONDS) | (n < 0) | (n >= NANOS_PER_SECOND)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise InvalidWrite(
            f"{where}.{j}.timestamp: seconds {int(s[j])}, nanos {int(n[j])} is outside "
            f"seconds 0..{MAX_SECONDS}, nanos 0..{NANOS_PER_SECOND - 1}"
        )
    return to_nanos_array(s, n)


def exact_doubles(values: Column, dtype: type, where: str) -> np.ndarray:
    """Values as float64; integers a double cannot hold exactly are refused rather than rounded."""
    if dtype is np.float64:
        return np.asarray(values, dtype=np.float64)
    exact: np.ndarray = np.asarray(values, dtype=dtype)
    as_double = exact.astype(np.float64)
    with np.errstate(invalid="ignore"):  # 2^63 and 2^64 do not convert back: they compare unequal
        lossy = as_double.astype(dtype) != exact
    if lossy.any():
        j = int(np.flatnonzero(lossy)[0])
        raise InvalidWrite(
            f"{where}.{j}.value: {int(exact[j])} has no exact double (the nearest is "
            f"{int(as_double[j])}); integers up to 2^53 are always exact"
        )
    return as_double
