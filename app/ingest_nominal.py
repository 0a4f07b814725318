"""`POST /storage/writer/v1/nominal/{dataSourceRid}`: ingest as Nominal's SDKs send it, a protobuf
`WriteRequestNominal` (package nominal-api-protos), through the same pipeline as the JSON endpoint
(app/ingest.py: auth, size limits, zstd/gzip, limits, durable log, Conjure errors).

Point kinds (docs/decisions/0026-protobuf-ingest.md):
- double and string points: numeric and enum series, as the JSON endpoint stores them;
- integer (int64) and uint64 points: numeric series. A double holds every integer up to 2^53
  exactly and some beyond; a value it cannot hold exactly is refused (400, naming the series, the
  point and the value), never rounded, so what a subscriber sees is what was written;
- array and struct points: refused (400, naming the kind and the series); nothing of the request
  is stored.
`session_name` is accepted and not used: Sparkwire has no sessions.

The messages are decoded by protobuf's upb runtime. Reading each point's fields through upb's Python
objects cost ~0.9 us a point (a wrapper per point and per timestamp), most of the server's CPU per
point: instead the numeric series' points are re-serialized by upb (canonical bytes, ~0.04 us a
point) and read from those bytes as numpy columns (`_wire_columns`). Anything in those bytes outside
what upb writes for these messages (unknown fields, say) sends the series back to the per-point
reading, so both give the same columns and the same refusals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from fastapi import Request
from fastapi.responses import Response
from google.protobuf.message import DecodeError
from nominal.protos.write.nominal_write_pb2 import WriteRequestNominal
from numpy.lib.stride_tricks import sliding_window_view

from app.errors import error_response
from app.ingest import InvalidWrite, accept_writes
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesKey, SeriesKind
from schemas.timestamps import MAX_SECONDS, NANOS_PER_SECOND, to_nanos_array

# The content types Nominal's clients send for this body (the Rust client: application/x-protobuf).
PROTOBUF_TYPES = frozenset({"application/x-protobuf", "application/protobuf", "application/octet-stream"})
NUMERIC_KINDS = {
    "double_points": np.float64,
    "integer_points": np.int64,
    "uint64_points": np.uint64,
}
UNSUPPORTED_KINDS = {"array_points": "array", "struct_points": "struct"}
Column = Sequence[Any] | np.ndarray
Columns = tuple[Column, Column, Column]  # a series' points: seconds, nanos, values


async def write_nominal(request: Request, dataSourceRid: str) -> Response:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in PROTOBUF_TYPES:
        shown = content_type or "none"
        return error_response(
            415,
            f"Content-Type {shown}: this endpoint takes a WriteRequestNominal protobuf "
            "(application/x-protobuf); JSON goes to POST /storage/writer/v1",
            params={"contentType": shown},
        )
    return await accept_writes(request, lambda body: nominal_writes(body, dataSourceRid))


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
    columns = _wire_columns(request)
    for i, series in enumerate(request.series):
        channel = series.channel.name
        where = f"series.{i} (channel {channel!r})"
        if not channel:
            raise InvalidWrite(f"series.{i}.channel.name: must not be empty")
        kind = series.points.WhichOneof("points_type")
        if kind is None:
            raise InvalidWrite(f"{where}.points: holds none of double, string, integer or uint64 points")
        if kind in UNSUPPORTED_KINDS:
            raise InvalidWrite(
                f"{where}.points: {UNSUPPORTED_KINDS[kind]} points are not supported "
                "(double, string, integer and uint64 points are); nothing of the request was stored"
            )
        read: Columns | None = columns.get(i)
        if read is None:
            points = getattr(series.points, kind).points
            stamps = [p.timestamp for p in points]
            read = [t.seconds for t in stamps], [t.nanos for t in stamps], [p.value for p in points]
        seconds, nanos, raw = read
        ts = _timestamps(seconds, nanos, f"{where}.points.{kind}")
        key = SeriesKey.of(rid, channel, dict(series.tags))
        if kind == "string_points":
            writes.append(SeriesWrite(key, SeriesKind.ENUM, ts, cast(list[str], raw)))  # read per point
        else:
            values = _numeric(raw, NUMERIC_KINDS[kind], f"{where}.points.{kind}")
            writes.append(SeriesWrite(key, SeriesKind.NUMERIC, ts, values))
    return writes


def _wire_columns(request: WriteRequestNominal) -> dict[int, Columns]:
    """The numeric series' points as columns, read from upb's serialization of each series' points
    (one pass over all series of a kind, so numpy's per-call cost is paid per request, not per
    series); by series index. A kind whose bytes hold anything else is left out (read per point)."""
    by_kind: dict[str, list[tuple[int, bytes, int]]] = {}
    for i, series in enumerate(request.series):
        kind = series.points.WhichOneof("points_type")
        if kind in NUMERIC_KINDS:
            held = getattr(series.points, kind)
            by_kind.setdefault(kind, []).append((i, held.SerializeToString(), len(held.points)))
    out: dict[int, Columns] = {}
    for kind, parts in by_kind.items():
        read = _read_points(b"".join(p[1] for p in parts), kind)
        if read is None or len(read[0]) != sum(p[2] for p in parts):
            continue
        seconds, nanos, values = read
        # Each series' bytes are whole records, so its points are the next len(points) records.
        at = 0
        for i, _, n in parts:
            out[i] = seconds[at : at + n], nanos[at : at + n], values[at : at + n]
            at += n
    return out


# Wire bytes (field number << 3 | wire type) of the fields these messages hold.
_RECORD = 0x0A  # XPoints.points (1, length-delimited); XPoint.timestamp (1, length-delimited)
_SECONDS = 0x08  # Timestamp.seconds (1, varint)
_NANOS = 0x10  # Timestamp.nanos (2, varint); IntegerPoint/Uint64Point.value (2, varint)
_DOUBLE = 0x11  # DoublePoint.value (2, 64-bit)
_PAD = 24  # zero bytes after the data, so that every 8-byte read (two for a varint) stays inside
_STOP_BITS = 0x8080808080808080
# The longest point upb writes: a timestamp of two 10-byte varints (24 bytes with its tag and
# length) and an 11-byte value field. Longer (unknown fields) is read per point.
_MAX_POINT = 35


def _read_points(data: bytes, kind: str) -> Columns | None:
    """Records `0a <len> <point>` as upb writes them (a point is at most _MAX_POINT bytes, so every
    length is one byte), fields in number order, zero values left out: seconds, nanos and values
    columns. None for anything else."""
    buf = np.frombuffer(data + bytes(_PAD), dtype=np.uint8)
    starts = _record_starts(data, buf)
    if starts is None:
        return None
    words = sliding_window_view(buf, 8)  # words[i]: the 8 bytes from i
    end = starts + 2 + buf[starts + 1]
    pos = starts + 2
    has_ts = (pos < end) & (buf[pos] == _RECORD)
    ts_end = np.where(has_ts, pos + 2 + buf[pos + 1], pos)
    pos = np.where(has_ts, pos + 2, pos)
    seconds, pos = _varint_field(buf, words, pos, ts_end, _SECONDS)
    nanos, pos = _varint_field(buf, words, pos, ts_end, _NANOS)
    if not np.array_equal(pos, ts_end):
        return None
    values: np.ndarray
    if kind == "double_points":
        has = (pos < end) & (buf[pos] == _DOUBLE)
        values = words[np.where(has, pos + 1, len(data))].view("<f8").ravel()  # absent: zero bytes
        pos = np.where(has, pos + 9, pos)
    else:
        values, pos = _varint_field(buf, words, pos, end, _NANOS)
        if kind == "integer_points":
            values = values.view(np.int64)
    if not np.array_equal(pos, end):
        return None
    # int32 nanos: the low 32 bits of the varint, as upb reads them
    return seconds.view(np.int64), nanos.astype(np.uint32).view(np.int32).astype(np.int64), values


def _record_starts(data: bytes, buf: np.ndarray) -> np.ndarray | None:
    """Where each record begins: found by shape (a record tag and length whose point opens with a
    timestamp tag and length) and kept if those records tile the bytes exactly; else (a value's
    bytes looking like a record, a point without a timestamp) by walking the lengths."""
    size = len(data)
    starts = np.flatnonzero(
        (buf[:size] == _RECORD)
        & (buf[1 : size + 1] <= _MAX_POINT)
        & (buf[2 : size + 2] == _RECORD)
        & (buf[3 : size + 3] <= _MAX_POINT)
    )
    if len(starts) and starts[0] == 0:
        ends = starts + 2 + buf[starts + 1]
        if ends[-1] == size and np.array_equal(ends[:-1], starts[1:]):
            return starts
    walk: list[int] = []
    at = 0
    while at < size:
        if data[at] != _RECORD or at + 1 == size or data[at + 1] > _MAX_POINT:
            return None
        walk.append(at)
        at += 2 + data[at + 1]
    return np.array(walk, dtype=np.int64) if at == size else None


def _varint_field(
    buf: np.ndarray, words: np.ndarray, pos: np.ndarray, end: np.ndarray, tag: int
) -> tuple[np.ndarray, np.ndarray]:
    """An optional varint field at each position: its values as uint64 (0 where absent) and the
    positions after it (past `end` if a varint overran its message: the caller's check refuses)."""
    has = (pos < end) & (buf[pos] == tag)
    values = np.zeros(len(pos), np.uint64)
    if not has.any():
        return values, pos
    read, lengths = _varints(words, pos[has] + 1)
    values[has] = read
    after = pos.copy()
    after[has] += 1 + lengths
    return values, after


def _varints(words: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints starting at `at` and their lengths in bytes, eight bytes at a time: the 7-bit
    groups up to the first byte without its top bit, packed together by three shift steps."""
    word = words[at].view("<u8").ravel()
    stop = ~word & _STOP_BITS
    last = stop & (~stop + 1)  # the first stop bit; none: 0, and then every byte is kept
    keep = (last - 1) | last
    x = word & keep & 0x7F7F7F7F7F7F7F7F
    x = (x & 0x007F007F007F007F) | ((x >> 1) & 0x3F803F803F803F80)
    x = (x & 0x00003FFF00003FFF) | ((x >> 2) & 0x0FFFC0000FFFC000)
    x = (x & 0x000000000FFFFFFF) | ((x >> 4) & 0x00FFFFFFF0000000)
    lengths = (np.bitwise_count(keep) >> 3).astype(np.int64)
    longer = last == 0
    if longer.any():  # 9 or 10 bytes (negative numbers): the rest from the next eight
        rest, more = _varints(words, at[longer] + 8)
        x[longer] |= rest << 56
        lengths[longer] += more
    return x, lengths


def _timestamps(seconds: Column, nanos: Column, where: str) -> np.ndarray:
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


def _numeric(values: Column, dtype: type, where: str) -> np.ndarray:
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
