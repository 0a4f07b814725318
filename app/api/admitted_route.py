"""A FastAPI route that admits its request before it reads a byte of the body.

FastAPI reads and validates a route's body before the route's code runs, so a route that checks the
token itself parses whatever an anonymous client sends first (issue 44: 1-3 MB of empty items cost
10-14 s of event-loop CPU and gigabytes of memory before the 401). An `AdmittedRoute` runs, in order:
the Origin and the bearer token (app/protocol/admission.py; 403, 401), then the body read as a
stream under SPARKWIRE_MAX_JSON_BODY_BYTES with its Content-Encoding undone (app/http/request_body.py;
413 while it streams), then its JSON parsed under a count of values and a depth (400), and only then
FastAPI's validation and the route.
The principal is kept on the request (`admit_request`) so the route does not authenticate again."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

from app.http.errors import HttpError
from app.http.request_body import read_body
from app.protocol.admission import Refused
from app.protocol.auth import Principal
from app.protocol.limits import MAX_JSON_DEPTH
from schemas.conjure import absent_nulls

_PRINCIPAL = "sparkwire_principal"  # where the admitted principal is kept on request.state
BODY_SETTING = "max_json_body_bytes"
# Values (objects, arrays, strings, numbers, literals) in one body: what it costs to build them in
# Python bounds the parse (~20 ms at this count), whatever the body's size. A module of 100 functions
# or an asset of 1,000 data scopes holds well under 20,000.
MAX_JSON_VALUES = 100_000


def admit_request(request: Request, doing: str) -> Principal:
    """The request's principal (Origin, then token), once per request; HttpError 403 or 401.
    `doing` completes "this Origin may not ..."."""
    principal: Principal | None = getattr(request.state, _PRINCIPAL, None)
    if principal is not None:
        return principal
    try:
        principal = request.app.state.sparkwire.admission.admit(request.headers, doing)
    except Refused as refused:
        raise HttpError(refused.status, refused.message) from None
    assert principal is not None
    setattr(request.state, _PRINCIPAL, principal)
    return principal


def _parsed(raw: bytes) -> Any:
    """The body's JSON, bounded before and as it is parsed; None when it is not JSON (FastAPI then
    answers it). Every bound costs at most microseconds per KiB: the number of values is counted
    from the separators before anything is built (a 1 MiB body of 350,000 empty objects took 0.2 s
    to parse and 0.2 s more to scan for its depth), orjson stops at 1024 levels, and the depth is
    measured on what was parsed (at most MAX_JSON_VALUES containers)."""
    values = raw.count(b",") + raw.count(b"{") + raw.count(b"[") + 1  # at least the values
    if values > MAX_JSON_VALUES:
        raise HttpError(
            400,
            f"body: more than {MAX_JSON_VALUES} JSON values (counted by their separators)",
            params={"limit": str(MAX_JSON_VALUES)},
        )
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise _too_deep() from None
        return None
    if _depth(parsed) > MAX_JSON_DEPTH:  # what reads it downstream may recurse once per level
        raise _too_deep()
    return parsed


def _too_deep() -> HttpError:
    return HttpError(400, f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")


def _depth(value: Any) -> int:
    """The nesting of parsed JSON, a level at a time (no recursion); stops past MAX_JSON_DEPTH."""
    depth, level = 0, [value]
    while depth <= MAX_JSON_DEPTH:
        level = [item for item in level if type(item) is dict or type(item) is list]  # orjson's types
        if not level:
            break
        depth += 1
        inside: list[Any] = []
        for item in level:
            inside.extend(item.values() if type(item) is dict else item)
        level = inside
    return depth


class AdmittedRoute(APIRoute):
    """Admission, then a bounded body, then FastAPI's handler (see the module's docstring)."""

    doing: ClassVar[str] = "use this route"
    # Its answer reads the log's points: an edge on the Kafka log, which runs no Spark to read them,
    # has the compute tier answer it (app/api/forwarded_reads.py).
    reads_log_points: ClassVar[bool] = False

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        takes_body = self.body_field is not None
        reads_log_points = self.reads_log_points

        async def admitted(request: Request) -> Response:
            admit_request(request, self.doing)
            raw = b""
            if takes_body:
                settings = request.app.state.sparkwire.settings
                raw = await read_body(request, settings.max_json_body_bytes, BODY_SETTING)
            forwarded = request.app.state.sparkwire.forwarded_reads if reads_log_points else None
            if forwarded is not None:
                return await forwarded.forward(request, raw)
            if takes_body:
                request._body = raw  # what FastAPI's `await request.body()` then returns
                parsed = _parsed(raw)
                if parsed is not None:
                    # A present null is an absent optional field, as on the WebSocket (Conjure's rule).
                    request._json = absent_nulls(parsed)  # what `await request.json()` returns
            return await handler(request)

        return admitted
