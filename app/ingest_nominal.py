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

The messages are decoded by protobuf's upb runtime; each point's fields are read once into Python
lists and turned into numpy columns, which the log stores as they are (~1.5 million points/s of
decode on one core of the benchmark machine).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from fastapi import Request
from fastapi.responses import Response
from google.protobuf.message import DecodeError
from nominal.protos.write.nominal_write_pb2 import WriteRequestNominal

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
        points = getattr(series.points, kind).points
        stamps = [p.timestamp for p in points]
        ts = _timestamps([t.seconds for t in stamps], [t.nanos for t in stamps], f"{where}.points.{kind}")
        key = SeriesKey.of(rid, channel, dict(series.tags))
        if kind == "string_points":
            writes.append(SeriesWrite(key, SeriesKind.ENUM, ts, [p.value for p in points]))
        else:
            values = _numeric([p.value for p in points], NUMERIC_KINDS[kind], f"{where}.points.{kind}")
            writes.append(SeriesWrite(key, SeriesKind.NUMERIC, ts, values))
    return writes


def _timestamps(seconds: Sequence[int], nanos: Sequence[int], where: str) -> np.ndarray:
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


def _numeric(values: list[Any], dtype: type, where: str) -> np.ndarray:
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
