"""`POST /storage/writer/v1`: check who asks (Origin, bearer token), validate the whole request,
then make it durable; 200 only after fsync. A refused request stores nothing."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec
import orjson
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from app.auth import ANONYMOUS, AuthError, Principal, bearer_token
from app.errors import serializable_error
from compute.log import SeriesWrite, WriteRejected
from compute.series import SeriesKey, SeriesKind
from schemas.ingest import (
    MAX_SECONDS,
    StrictDoublePoint,
    StrictDoublePoints,
    StrictStringPoint,
    WriteBatchesRequest,
    write_request_adapter,
    write_request_decoder,
)

log = logging.getLogger(__name__)


class InvalidWrite(ValueError):
    pass


def fast_writes(body: bytes) -> list[SeriesWrite] | None:
    """The common, well-formed request, decoded strictly from its bytes (schemas/ingest.py); None when
    the strict decoder declines it, and the validator then accepts or explains. Both paths give the
    same writes for the same body, so the HTTP behaviour is the validator's alone."""
    try:
        request = write_request_decoder.decode(body)
    except msgspec.MsgspecError:
        return None
    rid = request.dataSourceRid
    writes: list[SeriesWrite] = []
    for batch in request.batches:
        points = batch.points
        plist: list[StrictDoublePoint] | list[StrictStringPoint]
        if isinstance(points, StrictDoublePoints):
            plist, kind = points.double, SeriesKind.NUMERIC
        else:
            plist, kind = points.string, SeriesKind.ENUM
        ts = [p.timestamp.seconds * 1_000_000_000 + p.timestamp.nanos for p in plist]
        values: list[Any] = [p.value for p in plist]
        writes.append(SeriesWrite(SeriesKey.of(rid, batch.channel, batch.tags), kind, ts, values))
    return writes


def to_writes(request: WriteBatchesRequest) -> list[SeriesWrite]:
    writes: list[SeriesWrite] = []
    rid = request["dataSourceRid"]
    for i, batch in enumerate(request["batches"]):
        points = batch["points"]
        key = SeriesKey.of(rid, batch["channel"], batch.get("tags", {}))
        plist: list[Any]
        if points["type"] == "double":
            plist, kind = list(points["double"]), SeriesKind.NUMERIC
        else:
            plist, kind = list(points["string"]), SeriesKind.ENUM
        ts: list[int] = []
        values: list[Any] = []
        for j, p in enumerate(plist):
            t = p["timestamp"]
            if not 0 <= t["seconds"] <= MAX_SECONDS:
                raise InvalidWrite(
                    f"batches.{i}.points.{points['type']}.{j}.timestamp.seconds: "
                    f"{t['seconds']} is outside 0..{MAX_SECONDS}"
                )
            ts.append(t["seconds"] * 1_000_000_000 + t["nanos"])
            values.append(p["value"])
        writes.append(SeriesWrite(key, kind, ts, values))
    return writes


async def write_points(request: Request) -> Response:
    state = request.app.state.sparkwire
    if not state.origins.permits(request.headers):
        return _refused(403, "Default:PermissionDenied", "this Origin may not write here")
    principal = ANONYMOUS
    if state.auth is not None:
        try:
            principal = state.auth.authenticate(bearer_token(request.headers))
        except AuthError as exc:
            return _refused(401, "Default:Unauthorized", str(exc))
    body = await request.body()
    try:
        # The validator costs ~10x the strict decoder per point: only bodies it declines meet it.
        writes = fast_writes(body)
        if writes is None:
            writes = to_writes(write_request_adapter.validate_python(orjson.loads(body)))
        if denied := _denied(principal, writes):
            return denied
        count = await asyncio.wrap_future(state.log.submit(writes))
    except orjson.JSONDecodeError as exc:
        problem = f"body is not JSON: {exc}"
    except ValidationError as exc:
        problem = _describe(exc)
    except (InvalidWrite, WriteRejected) as exc:
        problem = str(exc)
    else:
        state.points_ingested += count
        state.metrics.points_ingested.inc(count)
        return Response(status_code=200)
    state.metrics.reject_request(body)
    return _bad(problem)


def _denied(principal: Principal, writes: list[SeriesWrite]) -> JSONResponse | None:
    rids = principal.denied(w.key.data_source_rid for w in writes)
    if not rids:
        return None
    message = f"the token does not reach data source {', '.join(rids)}"
    return _refused(403, "Default:PermissionDenied", message)


def _refused(status: int, name: str, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(serializable_error(name, message, status), status_code=status, headers=headers)


def _bad(message: str) -> JSONResponse:
    return JSONResponse(serializable_error("Default:InvalidArgument", message, 400), status_code=400)


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        problems.append(f"{where}: {err['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(problems) + more
