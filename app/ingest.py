"""`POST /storage/writer/v1`: check who asks (Origin, bearer token), validate the whole request,
then make it durable; 200 only after fsync. A refused request stores nothing."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from app.auth import ANONYMOUS, AuthError, Principal, bearer_token
from app.errors import serializable_error
from compute.log import SeriesWrite, WriteRejected
from compute.series import SeriesKey, SeriesKind
from schemas.ingest import WriteBatchesRequest, write_request_adapter

log = logging.getLogger(__name__)

MAX_SECONDS = (2**63 - 1) // 1_000_000_000 - 1  # int64 nanoseconds


class InvalidWrite(ValueError):
    pass


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
        parsed = write_request_adapter.validate_python(orjson.loads(body))
        writes = to_writes(parsed)
    except orjson.JSONDecodeError as exc:
        return _bad(f"body is not JSON: {exc}")
    except ValidationError as exc:
        return _bad(_describe(exc))
    except InvalidWrite as exc:
        return _bad(str(exc))
    if denied := _denied(principal, parsed["dataSourceRid"]):
        return denied
    try:
        count = await asyncio.wrap_future(state.log.submit(writes))
    except WriteRejected as exc:
        return _bad(str(exc))
    state.points_ingested += count
    return Response(status_code=200)


def _denied(principal: Principal, rid: str) -> JSONResponse | None:
    if principal.allows(rid):
        return None
    return _refused(403, "Default:PermissionDenied", f"the token does not reach data source {rid}")


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
