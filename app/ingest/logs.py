"""`POST /storage/writer/v1/logs/{dataSourceRid}`: nominal-api's WriteLogsRequest (Conjure JSON),
log lines (a message and its args) of one channel of a data source, through the pipeline every writer
shares (app/ingest/writes.py `accept_writes`: Origin, bearer token, the body streamed under its limit
with its Content-Encoding undone, the ingest limits, the data sources the token reaches, the durable
log before the 200, nothing stored on a refusal, Conjure errors).

The channel is the request's `channel`, "logs" when it has none (nominal-api's default), with no
tags (the request has none). Its points are stored as a series of kind `log`
(compute/storage/series.py): each point's message and args as one compact JSON text in the string
column (compute/storage/log_lines.py), so a channel holding doubles or strings refuses log lines and
a log channel refuses any other points, as a double channel refuses strings (400, nothing stored).
A body of SPARKWIRE_INGEST_DECODE_MIN_BYTES or more is decoded in a decode process
(app/ingest/workers.py), as the row JSON writer's is."""

from __future__ import annotations

import functools

import msgspec
from fastapi import Request
from fastapi.responses import Response

from app.ingest.nominal import timestamps_ns
from app.ingest.writes import InvalidWrite, accept_writes
from compute.storage.contract import SeriesWrite
from compute.storage.log_lines import log_text
from compute.storage.series import SeriesKey, SeriesKind
from schemas.logs import DEFAULT_LOG_CHANNEL, logs_request_decoder

LOGS_PATH = "/storage/writer/v1/logs/{dataSourceRid}"


async def write_logs(request: Request, dataSourceRid: str) -> Response:
    """`POST /storage/writer/v1/logs/{dataSourceRid}`: nominal-api's WriteLogsRequest (JSON)."""
    decode = functools.partial(
        request.app.state.sparkwire.decoders.decoded, functools.partial(log_writes, dataSourceRid)
    )
    return await accept_writes(request, decode)


def log_writes(data_source_rid: str, body: bytes) -> list[SeriesWrite]:
    """A WriteLogsRequest JSON body to the log's one write; InvalidWrite says what is wrong and where."""
    try:
        request = logs_request_decoder.decode(body)
    except msgspec.DecodeError as exc:  # ValidationError included: msgspec names the path ($.logs[0]...)
        raise InvalidWrite(f"body is not a WriteLogsRequest: {exc}") from None
    except RecursionError:
        raise InvalidWrite("body: JSON nested too deeply for a WriteLogsRequest") from None
    channel = DEFAULT_LOG_CHANNEL if request.channel is None else request.channel
    if not channel:
        raise InvalidWrite("channel: must not be empty (leave it out for the default, 'logs')")
    points = request.logs
    ts = timestamps_ns([p.timestamp.seconds for p in points], [p.timestamp.nanos for p in points], "logs")
    texts = [log_text(p.value.message, p.value.args or {}) for p in points]
    return [SeriesWrite(SeriesKey.of(data_source_rid, channel, {}), SeriesKind.LOG, ts, texts)]
