"""Logs for a server left alone for months: no line per successful request (uvicorn's access log is
off unless `access_log` is set), one summary line every `summary_interval` seconds instead, and a
line of its own for every request that was refused or failed, with the reason.

The summary says what happened since the previous line (HTTP requests by status class, points
ingested, ingest requests and points rejected, late points, frames sent, WebSocket connections
opened) and what is open now (connections, subscriptions). Its counts are the /metrics counters,
so the two always agree; a last line at shutdown covers the time since the previous one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import orjson

from app.periodic import Periodic

if TYPE_CHECKING:
    from app.api.state import ServerState

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Probes and scrapes are the monitoring, not the traffic: not counted, and the probes' 503 (while
# the server starts or drains) is a state, not a refusal worth a line each.
PROBES = frozenset({"/healthz", "/readyz", "/persistent-compute/enabled"})
UNCOUNTED = PROBES | {"/metrics"}
# Server-side statuses that are refusals on purpose, not failures: a client can send them at will
# during an outage or with the disk full, so one ERROR line each would let anyone flood the log.
REFUSALS = frozenset({503, 507})
REASON_BYTES = 2048  # of an error body, enough for its Conjure name and message


class RequestLog:
    """ASGI middleware: counts HTTP answers by status class (`sparkwire_http_requests_total`), and logs
    each HTTP answer of 400 or more (WARNING; ERROR for a 5xx but the deliberate refusals 503 and 507,
    whose cause, an outage or a full disk, is logged once where it is met) with the reason its body
    gives. Health probes and /metrics scrapes are neither counted nor logged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = getattr(getattr(scope.get("app"), "state", None), "sparkwire", None)
        if state is None or scope["type"] not in ("http", "websocket") or scope["path"] in UNCOUNTED:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":  # app/api/ws.py counts its connections itself
            await self.app(scope, receive, send)
            return
        status = 0
        body = bytearray()

        async def observe(message: Message) -> None:
            nonlocal status
            kind = message["type"]
            if kind == "http.response.start":
                status = message["status"]
                state.metrics.count_request(status)
            elif kind == "http.response.body" and status >= 400 and len(body) < REASON_BYTES:
                body.extend(message.get("body", b"")[: REASON_BYTES - len(body)])
            await send(message)

        try:
            await self.app(scope, receive, observe)
        except Exception:
            if not status:  # the error handler outside this middleware answers 500 (and logs it)
                state.metrics.count_request(500)
            raise
        if status >= 400:
            _log_refusal(scope, status, bytes(body))


def _log_refusal(scope: Scope, status: int, body: bytes) -> None:
    client = scope.get("client")
    where = client[0] if client else "unknown client"
    method, path = scope["method"], scope["path"]
    reason = _reason(body)
    logger.log(
        logging.ERROR if status >= 500 and status not in REFUSALS else logging.WARNING,
        "%d %s %s from %s: %s",
        status,
        method,
        path,
        where,
        reason,
        extra={"status": status, "method": method, "path": path, "client": where},
    )


def _reason(body: bytes) -> str:
    """`errorName: message` of a Conjure error body, or what the body starts with."""
    try:
        error = orjson.loads(body)
        name = error.get("errorName") or error.get("name")
        message = error.get("message") or error.get("detail")
        if name or message:
            return f"{name}: {message}" if name and message else str(name or message)
    except (orjson.JSONDecodeError, AttributeError):
        pass
    text = body.decode(errors="replace").strip()
    return text[:300] if text else "(no body)"


class Summary:
    """The periodic summary line; `start` on the event loop, `stop` logs the last partial period."""

    def __init__(self, state: ServerState, interval: float) -> None:
        self.state = state
        self.interval = interval
        self._periodic = Periodic("log-summary", interval, self.emit)
        self._last = self._counts()
        self._last_at = time.monotonic()

    def start(self) -> None:
        if self.interval > 0:
            self._periodic.start()

    async def stop(self) -> None:
        if not self._periodic.running:
            return
        await self._periodic.stop()
        self.emit()

    def emit(self) -> None:
        now, counts = time.monotonic(), self._counts()
        delta = {key: counts.get(key, 0.0) - self._last.get(key, 0.0) for key in counts}
        seconds = now - self._last_at
        self._last, self._last_at = counts, now
        fields = _fields(delta)
        fields["connections"] = len(self.state.connections)
        fields["subscriptions"] = self.state.hub.subscriber_count()
        logger.info(
            "last %.0fs: %s", seconds, _describe(fields), extra={"interval_s": round(seconds, 3), **fields}
        )

    def _counts(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        counts = {}
        for family in self.state.metrics.registry.collect():
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    counts[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return counts


def _fields(delta: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[str, int]:
    def total(name: str, **labels: str) -> int:
        wanted = set(labels.items())
        return int(sum(v for (n, lbl), v in delta.items() if n == name and wanted <= set(lbl)))

    fields = {"requests": total("sparkwire_http_requests_total")}
    for status_class in ("2xx", "3xx", "4xx", "5xx"):
        fields[f"requests_{status_class}"] = total("sparkwire_http_requests_total", status=status_class)
    fields["points_ingested"] = total("sparkwire_points_ingested_total")
    fields["ingest_requests_rejected"] = total("sparkwire_ingest_requests_rejected_total")
    fields["points_rejected_invalid"] = total("sparkwire_points_rejected_total", reason="invalid")
    fields["points_rejected_late"] = total("sparkwire_points_rejected_total", reason="late")
    fields["frames_sent"] = total("sparkwire_frames_sent_total")
    fields["connections_opened"] = total("sparkwire_websocket_connections_opened_total")
    return fields


def _describe(f: dict[str, int]) -> str:
    classes = ", ".join(
        f"{f[f'requests_{c}']} {c}" for c in ("2xx", "3xx", "4xx", "5xx") if f[f"requests_{c}"]
    )
    requests = f"{f['requests']} requests" + (f" ({classes})" if classes else "")
    return (
        f"{requests}, {f['points_ingested']} points ingested, "
        f"{f['ingest_requests_rejected']} ingest requests rejected ({f['points_rejected_invalid']} points), "
        f"{f['points_rejected_late']} late points, {f['frames_sent']} frames sent, "
        f"{f['connections_opened']} connections opened; "
        f"now {f['connections']} connections, {f['subscriptions']} subscriptions"
    )
