"""A FastAPI route that admits its request before it reads a byte of the body.

FastAPI reads and validates a route's body before the route's code runs, so a route that checks the
token itself parses whatever an anonymous client sends first (issue 44: 1-3 MB of empty items cost
10-14 s of event-loop CPU and gigabytes of memory before the 401). An `AdmittedRoute` runs, in order:
the Origin and the bearer token (app/protocol/admission.py; 403, 401), then the body read as a
stream under SPARKWIRE_MAX_JSON_BODY_BYTES with its Content-Encoding undone (app/http/request_body.py;
413 while it streams), then its JSON depth (400), and only then FastAPI's parsing and the route.
The principal is kept on the request (`principal_of`) so the route does not authenticate again."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

from app.http.errors import HttpError
from app.http.request_body import read_body
from app.protocol.admission import Refused
from app.protocol.auth import Principal
from app.protocol.limits import MAX_JSON_DEPTH, json_depth
from schemas.conjure import absent_nulls

_PRINCIPAL = "sparkwire_principal"  # where the admitted principal is kept on request.state
BODY_SETTING = "max_json_body_bytes"


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


class AdmittedRoute(APIRoute):
    """Admission, then a bounded body, then FastAPI's handler (see the module's docstring)."""

    doing: ClassVar[str] = "use this route"

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        takes_body = self.body_field is not None

        async def admitted(request: Request) -> Response:
            admit_request(request, self.doing)
            if takes_body:
                settings = request.app.state.sparkwire.settings
                raw = await read_body(request, settings.max_json_body_bytes, BODY_SETTING)
                # FastAPI's JSON parser recurses once per level: bound the depth before it runs.
                if json_depth(raw) > MAX_JSON_DEPTH:
                    raise HttpError(400, f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
                request._body = raw  # what FastAPI's `await request.body()` then returns
                with contextlib.suppress(orjson.JSONDecodeError):  # FastAPI answers a bad body itself
                    # A present null is an absent optional field, as on the WebSocket (Conjure's rule).
                    request._json = absent_nulls(orjson.loads(raw))
            return await handler(request)

        return admitted
