"""`POST /storage/writer/v1`: validate a whole request, then make it durable; 200 only after fsync."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

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
    body = await request.body()
    try:
        parsed = write_request_adapter.validate_python(orjson.loads(body))
        writes = to_writes(parsed)
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


def _bad(message: str) -> JSONResponse:
    return JSONResponse(serializable_error("Default:InvalidArgument", message, 400), status_code=400)


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        problems.append(f"{where}: {err['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(problems) + more
