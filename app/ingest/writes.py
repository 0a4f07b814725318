"""The ingest pipeline every write endpoint shares (`accept_writes`), and `POST /storage/writer/v1`.

In order: the Origin, the bearer token, the body (app/http/request_body.py: streamed, size-limited,
Content-Encoding undone), the endpoint's decoder, the ingest limits, the data sources the token
reaches, then the durable log; 200 only after fsync. A refused request stores nothing."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
import numpy as np
import orjson
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from app.config import Settings
from app.http.errors import (
    INSUFFICIENT_STORAGE,
    INVALID_ARGUMENT,
    LOG_UNAVAILABLE,
    REQUEST_ENTITY_TOO_LARGE,
    RETRY_AFTER_S,
    HttpError,
    error_response,
)
from app.http.request_body import read_body
from app.protocol.admission import Refused
from app.protocol.auth import Principal
from app.protocol.limits import MAX_JSON_DEPTH, json_depth
from compute.storage.composite_points import double_array_text, string_array_text, struct_text
from compute.storage.contract import InsufficientStorage, LogUnavailable, SeriesWrite, WriteRejected
from compute.storage.series import SeriesKey, SeriesKind
from schemas.conjure import absent_nulls
from schemas.ingest import (
    StrictDoublePoint,
    StrictDoublePoints,
    StrictStringPoint,
    WriteBatchesRequest,
    write_request_adapter,
    write_request_decoder,
)
from schemas.timestamps import MAX_SECONDS, NANOS_PER_SECOND, to_nanos

logger = logging.getLogger(__name__)


class InvalidWrite(ValueError):
    """A request body a decoder cannot turn into writes; its message says what is wrong and where
    (answered 400 `Default:InvalidArgument`)."""


def fast_writes(body: bytes) -> list[SeriesWrite] | None:
    """The common, well-formed request, decoded strictly from its bytes (schemas/ingest.py); None when
    the strict decoder declines it, and the validator then accepts or explains. Both paths give the
    same writes for the same body, so the HTTP behaviour is the validator's alone."""
    try:
        request = write_request_decoder.decode(body)
    except (msgspec.MsgspecError, RecursionError):  # msgspec recurses into unknown fields' objects
        return None
    rid = request.dataSourceRid
    writes: list[SeriesWrite] = []
    for batch in request.batches:
        if batch.unit is not None:
            return None  # refused by name on the validator's path (`refused_by_name`)
        points = batch.points
        plist: list[StrictDoublePoint] | list[StrictStringPoint]
        if isinstance(points, StrictDoublePoints):
            plist, kind = points.double, SeriesKind.NUMERIC
        else:
            plist, kind = points.string, SeriesKind.ENUM
        # to_nanos, inlined: a call per point would cost this decoder a tenth of its speed
        ts = [p.timestamp.seconds * NANOS_PER_SECOND + p.timestamp.nanos for p in plist]
        values: list[Any] = [p.value for p in plist]
        writes.append(SeriesWrite(SeriesKey.of(rid, batch.channel, batch.tags), kind, ts, values))
    return writes


def to_writes(request: WriteBatchesRequest) -> list[SeriesWrite]:
    writes: list[SeriesWrite] = []
    rid = request["dataSourceRid"]
    for i, batch in enumerate(request["batches"]):
        key = SeriesKey.of(rid, batch["channel"], batch.get("tags", {}))
        where, kind, plist, value_of = _points_of(batch["points"], i, batch["channel"])
        ts: list[int] = []
        values: list[Any] = []
        for j, p in enumerate(plist):
            t = p["timestamp"]
            if not 0 <= t["seconds"] <= MAX_SECONDS:
                raise InvalidWrite(
                    f"{where}.{j}.timestamp.seconds: {t['seconds']} is outside 0..{MAX_SECONDS}"
                )
            ts.append(to_nanos(t["seconds"], t["nanos"]))
            try:
                values.append(value_of(p))
            except ValueError as exc:
                raise InvalidWrite(f"{where}.{j}: {exc}; nothing of the request was stored") from None
        writes.append(SeriesWrite(key, kind, ts, values))
    return writes


def _points_of(points: Any, i: int, channel: str) -> tuple[str, SeriesKind, list[Any], Callable[[Any], Any]]:
    """A batch's points: where they are in the body, their series kind, the points, and each one's
    stored value (arrays and structs as composite_points' texts: decision 0104)."""
    kind = points["type"]
    if kind == "array":
        inner = points["array"]["type"]
        where = f"batches.{i}.points.array.{inner}"
        if inner == "double":
            return (
                where,
                SeriesKind.DOUBLE_ARRAY,
                points["array"]["double"],
                lambda p: double_array_text(p["value"]),
            )
        return (
            where,
            SeriesKind.STRING_ARRAY,
            points["array"]["string"],
            lambda p: string_array_text(p["value"]),
        )
    if kind == "struct":
        where = f"batches.{i}.points.struct (channel {channel!r})"
        return where, SeriesKind.STRUCT, points["struct"], lambda p: struct_text(p["jsonString"])
    stored = SeriesKind.NUMERIC if kind == "double" else SeriesKind.ENUM
    return f"batches.{i}.points.{kind}", stored, points[kind], lambda p: p["value"]


def json_writes(body: bytes) -> list[SeriesWrite]:
    """`POST /storage/writer/v1`'s decoder: a WriteBatchesRequestExternal JSON body to writes."""
    # The validator costs ~10x the strict decoder per point: only bodies it declines meet it.
    writes = fast_writes(body)
    return writes if writes is not None else validated_writes(body)


def validated_writes(body: bytes) -> list[SeriesWrite]:
    """A body the strict decoder declined, parsed and validated whole: its writes, or InvalidWrite
    saying what is wrong and where."""
    # The strict decoder's fixed schema declines deep nesting without recursing; the parser and the
    # validator here would recurse once per level (a RecursionError, a 500), so depth is bounded first.
    if json_depth(body) > MAX_JSON_DEPTH:
        raise InvalidWrite(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        # A null member is an absent field (Conjure's rule, schemas.conjure.absent_nulls).
        request = absent_nulls(orjson.loads(body))
        refuse_by_name(request)
        return to_writes(write_request_adapter.validate_python(request))
    except orjson.JSONDecodeError as exc:
        raise InvalidWrite(f"body is not JSON: {exc}") from None
    except ValidationError as exc:
        raise InvalidWrite(_describe(exc)) from None


def refuse_by_name(request: Any) -> None:
    """InvalidWrite naming what nominal-api's WriteBatchesRequestExternal may hold and this writer
    does not store, rather than silence: a batch's unit (Sparkwire's series carry none, so a
    unit-aware reader would be told wrong: the columnar writer refuses it alike)."""
    if not isinstance(request, dict) or not isinstance(request.get("batches"), list):
        return
    for i, batch in enumerate(request["batches"]):
        if not isinstance(batch, dict):
            continue
        where = f"batches.{i} (channel {batch.get('channel')!r})"
        if "unit" in batch:
            raise InvalidWrite(
                f"{where}.unit: units are not supported (send the batch without a unit); "
                "nothing of the request was stored"
            )


async def write_points(request: Request) -> Response:
    """`POST /storage/writer/v1`: Nominal's WriteBatchesRequestExternal as JSON, large bodies decoded
    in a worker process (app/ingest/workers.py)."""
    return await accept_writes(request, request.app.state.sparkwire.decoders.writes)


Decode = Callable[[bytes], Awaitable[list[SeriesWrite]]]


async def accept_writes(request: Request, decode: Decode, passed: tuple[str, ...] = ()) -> Response:
    """Every write endpoint's pipeline: Origin (403), bearer token (401), the body read under
    SPARKWIRE_MAX_REQUEST_BYTES with its Content-Encoding undone (413, 415, 400),
    `await decode(body)` (raises InvalidWrite: 400), the ingest limits (400, 413 for too many points),
    the data sources the token reaches (403), then the durable log (WriteRejected: 400,
    InsufficientStorage: 507, LogUnavailable: 503 with Retry-After). 200 once every point is
    durable; on any refusal nothing is stored.
    Every error body is a Conjure error (app/http/errors.py). `decode` must raise InvalidWrite for
    anything it cannot accept: any other exception is a bug (500). `passed`: Content-Encodings
    `decode` undoes itself, under the same limit (app/http/request_body.py)."""
    state = request.app.state.sparkwire
    try:
        principal = state.admission.admit(request.headers, "write here")
    except Refused as refused:
        return error_response(refused.status, refused.message)
    body = b""
    try:
        body = await read_body(request, state.settings.max_request_bytes, passed=passed)
        writes = await decode(body)
        check_limits(writes, state.settings)
        if denied := _denied(principal, writes):
            return denied
        count = await asyncio.wrap_future(state.log.submit(writes))
    except (InvalidWrite, WriteRejected) as exc:
        state.metrics.reject_request(body)
        return error_response(400, str(exc), INVALID_ARGUMENT)
    except HttpError as exc:
        if exc.status == 400:
            state.metrics.reject_request(body)
        return exc.response()
    except InsufficientStorage as exc:
        # Conjure has no code for 507: CUSTOM_SERVER (app/http/errors.py) is its code for a server error
        # the generic ones do not name. INTERNAL would tell a client the server failed, when it is
        # in fact refusing, on purpose, until disk space returns; the status and name say so.
        logger.warning("ingest refused, storage below its floor: %s", exc)
        return error_response(507, str(exc) or "the server is low on disk space", INSUFFICIENT_STORAGE)
    except LogUnavailable as exc:
        # An outage, not a failure of this request: 503 and when to try again, as the full disk's 507
        # (the log store logs the outage once, not a traceback per request).
        return error_response(503, str(exc), LOG_UNAVAILABLE, headers={"Retry-After": str(RETRY_AFTER_S)})
    state.metrics.points_ingested.inc(count)
    return Response(status_code=200)


def _shown(text: str, keep: int = 64) -> str:
    """A name for an error message: long ones shortened, so a refusal never echoes megabytes."""
    return repr(text) if len(text) <= keep else f"{text[:keep]!r}...({len(text)} characters)"


def _over(what: str, where: str, actual: int, limit: int, setting: str, status: int = 400) -> HttpError:
    return HttpError(
        status,
        f"{where}: {what} is {actual}, more than the limit of {limit} (SPARKWIRE_{setting.upper()})",
        INVALID_ARGUMENT if status == 400 else REQUEST_ENTITY_TOO_LARGE,
        {"limit": str(limit), "actual": str(actual), "setting": f"SPARKWIRE_{setting.upper()}"},
    )


def check_limits(writes: list[SeriesWrite], settings: Settings) -> None:
    """Raise HttpError if the decoded writes exceed an ingest limit. Costs O(series + tags), and
    one pass in C over each series' timestamps (`_newest`) for the points stamped too far ahead.

    Too many points is 413 REQUEST_ENTITY_TOO_LARGE: the request is valid, only too big, and a
    client splitting it into smaller requests succeeds (Nominal's writers split large batches). The
    other limits are 400 INVALID_ARGUMENT: the same series is refused however it is sent."""
    total = 0
    rids: set[str] = set()
    for i, write in enumerate(writes):
        key = write.key
        where = f"series {i} (channel {_shown(key.channel)})"
        if key.data_source_rid not in rids:
            if len(key.data_source_rid) > settings.max_data_source_rid_length:
                raise _over(
                    "the dataSourceRid's length",
                    f"dataSourceRid {_shown(key.data_source_rid)}",
                    len(key.data_source_rid),
                    settings.max_data_source_rid_length,
                    "max_data_source_rid_length",
                )
            rids.add(key.data_source_rid)
        if len(key.channel) > settings.max_channel_length:
            raise _over(
                "the channel name's length",
                where,
                len(key.channel),
                settings.max_channel_length,
                "max_channel_length",
            )
        if len(key.tags) > settings.max_tags_per_series:
            raise _over(
                "the number of tags",
                where,
                len(key.tags),
                settings.max_tags_per_series,
                "max_tags_per_series",
            )
        for name, value in key.tags:
            if len(name) > settings.max_tag_key_length:
                raise _over(
                    f"the length of tag key {_shown(name)}",
                    where,
                    len(name),
                    settings.max_tag_key_length,
                    "max_tag_key_length",
                )
            if len(value) > settings.max_tag_value_length:
                raise _over(
                    f"the length of tag {_shown(name)}'s value",
                    where,
                    len(value),
                    settings.max_tag_value_length,
                    "max_tag_value_length",
                )
        total += len(write.ts)
    if settings.max_future_seconds > 0:
        _check_future(writes, settings.max_future_seconds)
    if total > settings.max_points_per_request:
        raise _over(
            "the number of points",
            "the request",
            total,
            settings.max_points_per_request,
            "max_points_per_request",
            413,
        )


def _newest(ts: Sequence[int] | np.ndarray) -> int:
    if isinstance(ts, np.ndarray):
        return int(ts.max()) if len(ts) else -1
    return max(ts, default=-1)


def _check_future(writes: list[SeriesWrite], max_future_seconds: float) -> None:
    """A point stamped more than `max_future_seconds` after the server's clock is refused: stored,
    it would move its live windows' end years ahead, and every real point after it would then be
    late and never shown (issue 44). The bound leaves room for a writer's clock running ahead."""
    limit = time.time_ns() + int(max_future_seconds * NANOS_PER_SECOND)
    for i, write in enumerate(writes):
        newest = _newest(write.ts)
        if newest > limit:
            ahead = (newest - limit) / NANOS_PER_SECOND + max_future_seconds
            raise HttpError(
                400,
                f"series {i} (channel {_shown(write.key.channel)}): a point is stamped {ahead:.0f} s "
                f"ahead of the server's clock, more than the limit of {max_future_seconds:g} s "
                "(SPARKWIRE_MAX_FUTURE_SECONDS); nothing of the request was stored",
                INVALID_ARGUMENT,
                {
                    "limit": f"{max_future_seconds:g}",
                    "actual": f"{ahead:.0f}",
                    "setting": "SPARKWIRE_MAX_FUTURE_SECONDS",
                },
            )


def _denied(principal: Principal, writes: list[SeriesWrite]) -> JSONResponse | None:
    rids = principal.denied(w.key.data_source_rid for w in writes)
    if not rids:
        return None
    message = f"the token does not reach data source {', '.join(rids)}"
    return error_response(403, message)


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        problems.append(f"{where}: {err['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(problems) + more
