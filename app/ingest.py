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


def fast_writes(raw: Any) -> list[SeriesWrite] | None:
    """The common, well-formed request in one pass over the parsed JSON, building no object per point.

    It accepts only what the validator certainly accepts unchanged (exact types: int seconds and
    nanos, float or int values, str strings); anything else returns None and goes through the
    validator, which decides and explains. So both paths give the same writes for the same body.
    """
    if type(raw) is not dict:
        return None
    rid, batches = raw.get("dataSourceRid"), raw.get("batches")
    if type(rid) is not str or not rid or type(batches) is not list:
        return None
    writes: list[SeriesWrite] = []
    for batch in batches:
        if type(batch) is not dict:
            return None
        channel, tags, points = batch.get("channel"), batch.get("tags", {}), batch.get("points")
        if type(channel) is not str or not channel or type(tags) is not dict or type(points) is not dict:
            return None
        if not all(type(k) is str and type(v) is str for k, v in tags.items()):
            return None
        variant = points.get("type")
        plist = points.get(variant) if variant in ("double", "string") else None
        if type(plist) is not list:
            return None
        numeric = variant == "double"
        ts: list[int] = []
        values: list[Any] = []
        for p in plist:
            if type(p) is not dict:
                return None
            t, v = p.get("timestamp"), p.get("value")
            if type(t) is not dict:
                return None
            sec, nanos = t.get("seconds"), t.get("nanos")
            if type(sec) is not int or type(nanos) is not int or not 0 <= nanos < 1_000_000_000:
                return None
            if not 0 <= sec <= MAX_SECONDS:
                return None
            if numeric:
                if type(v) is float:
                    values.append(v)
                elif type(v) is int:
                    values.append(float(v))
                else:
                    return None
            elif type(v) is str:
                values.append(v)
            else:
                return None
            ts.append(sec * 1_000_000_000 + nanos)
        kind = SeriesKind.NUMERIC if numeric else SeriesKind.ENUM
        writes.append(SeriesWrite(SeriesKey.of(rid, channel, tags), kind, ts, values))
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
        raw = orjson.loads(body)
        # The validator costs ~10x the parse per point: only requests the fast path declines meet it.
        writes = fast_writes(raw)
        if writes is None:
            writes = to_writes(write_request_adapter.validate_python(raw))
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
