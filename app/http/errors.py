"""HTTP error bodies in Conjure's HTTP error format, and the exception that carries one.

Every HTTP error the server answers (ingest refusals, a refused WebSocket handshake, FastAPI's own
404/405/422/500 through the handlers in app/runtime/server.py) has the body Conjure clients decode
(`conjure_python_client.ConjureHTTPError`, conjure-rust-runtime):

    {"errorCode": "INVALID_ARGUMENT", "errorName": "Default:InvalidArgument",
     "errorInstanceId": "<uuid>", "parameters": {"str": "str"},
     "name": ..., "message": ..., "statusCode": 400, "params": {...}}

The last four are the fields Sparkwire answered before (the shape of the WebSocket's
SerializableError); they stay beside the Conjure ones, which carry the same values.

errorCode is one of Conjure's codes. Conjure has none for 405, 415 or 507: those get CUSTOM_CLIENT
(4xx) or CUSTOM_SERVER (5xx), Conjure's codes for "a client (server) error the generic codes do not
name"; the errorName says which.
"""

from __future__ import annotations

import logging
import uuid
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from compute.storage.contract import LogUnavailable

logger = logging.getLogger(__name__)

# Conjure's generic errors (namespace Default) and the status each travels with. UNAUTHORIZED is
# not in conjure's ErrorCode definition but is what Palantir's runtimes answer a bad token with
# (conjure-java-runtime-api's ErrorType.UNAUTHORIZED); clients read the code as a string.
CODES: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Default:InvalidArgument"),
    401: ("UNAUTHORIZED", "Default:Unauthorized"),
    403: ("PERMISSION_DENIED", "Default:PermissionDenied"),
    404: ("NOT_FOUND", "Default:NotFound"),
    409: ("CONFLICT", "Default:Conflict"),
    413: ("REQUEST_ENTITY_TOO_LARGE", "Default:RequestEntityTooLarge"),
    500: ("INTERNAL", "Default:Internal"),
}
# Statuses without a Conjure generic error: a name in Sparkwire's namespace.
OTHER_NAMES: dict[int, str] = {
    405: "Sparkwire:MethodNotAllowed",
    406: "Sparkwire:NotAcceptable",
    415: "Sparkwire:UnsupportedMediaType",
    503: "Sparkwire:ServiceUnavailable",
}

INVALID_ARGUMENT = "Default:InvalidArgument"
REQUEST_ENTITY_TOO_LARGE = "Default:RequestEntityTooLarge"
# 415 for a Content-Encoding the server cannot decode (app/http/request_body.py): it is the encoding,
# not the media type, that is refused, and the name says so.
UNSUPPORTED_CONTENT_ENCODING = "Sparkwire:UnsupportedContentEncoding"
# 507: the log is below its free-space floor (compute.log.InsufficientStorage).
INSUFFICIENT_STORAGE = "Storage:InsufficientStorage"
# 503: the point log cannot be reached (a Kafka outage, compute.storage.contract.LogUnavailable).
LOG_UNAVAILABLE = "Storage:LogUnavailable"
RETRY_AFTER_S = 2  # what that 503 tells a client to wait before asking again


def error_code(status: int) -> str:
    if status in CODES:
        return CODES[status][0]
    return "CUSTOM_CLIENT" if status < 500 else "CUSTOM_SERVER"


def default_name(status: int) -> str:
    if status in CODES:
        return CODES[status][1]
    return OTHER_NAMES.get(status, f"Sparkwire:Http{status}")


def serializable_error(
    name: str, message: str, status: int, params: dict[str, str] | None = None
) -> dict[str, Any]:
    """The error body for `status`: Conjure's fields and, beside them, name/message/statusCode/params."""
    instance = str(uuid.uuid4())
    parameters = dict(params or {})
    return {
        "errorCode": error_code(status),
        "errorName": name,
        "errorInstanceId": instance,
        "parameters": parameters,
        "name": name,
        "message": message,
        "statusCode": status,
        "params": parameters,
    }


def error_response(
    status: int,
    message: str,
    name: str | None = None,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer", **(headers or {})}
    body = serializable_error(name or default_name(status), message, status, params)
    return JSONResponse(body, status_code=status, headers=headers)


class HttpError(Exception):
    """An error answered as a Conjure error body; raise it from a route (app/runtime/server.py renders it)."""

    def __init__(
        self, status: int, message: str, name: str | None = None, params: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.name = name or default_name(status)
        self.params = params or {}

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.name, self.params)


def _describe_validation(exc: RequestValidationError) -> str:
    problems = []
    for err in list(exc.errors())[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "request"
        problems.append(f"{where}: {err.get('msg', 'invalid')}")
    more = f" (and {len(exc.errors()) - 5} more)" if len(exc.errors()) > 5 else ""
    return "; ".join(problems) + more


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HttpError)
    return exc.response()


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    """FastAPI's and Starlette's own HTTP errors: an unknown route (404), a method the route does not
    take (405, with its Allow header), and any HTTPException a route raises."""
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    if status < 400:  # not an error: keep Starlette's bare answer
        return Response(status_code=status, headers=exc.headers)
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
    message = f"{request.method} {request.url.path}: {detail}"
    return error_response(status, message, headers=dict(exc.headers or {}))


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    """A request FastAPI's validation refuses: 400 INVALID_ARGUMENT, as a Conjure server answers a
    malformed body, rather than FastAPI's 422 (which Conjure has no code for)."""
    assert isinstance(exc, RequestValidationError)
    return error_response(400, _describe_validation(exc), INVALID_ARGUMENT)


async def _on_log_unavailable(request: Request, exc: Exception) -> Response:
    """A read the point log could not answer (the catalog, history: a Kafka outage): 503 naming it,
    as a write gets, rather than a partial answer."""
    return error_response(503, str(exc), LOG_UNAVAILABLE, headers={"Retry-After": str(RETRY_AFTER_S)})


async def _on_unhandled(request: Request, exc: Exception) -> Response:
    """A bug: 500 INTERNAL. Starlette re-raises the exception after this answer, so the server's
    log gets its traceback right after this line, which ties it to the errorInstanceId."""
    body = serializable_error(default_name(500), "internal server error", 500)
    logger.error(
        "unhandled %s in %s %s (errorInstanceId %s)",
        type(exc).__name__,
        request.method,
        request.url.path,
        body["errorInstanceId"],
    )
    return JSONResponse(body, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    """Conjure error bodies for every error FastAPI or Starlette answer on their own."""
    app.add_exception_handler(HttpError, _on_http_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(LogUnavailable, _on_log_unavailable)
    app.add_exception_handler(Exception, _on_unhandled)
