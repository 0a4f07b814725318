"""`POST /storage/writer/v1/logs/{dataSourceRid}`: nominal-api's WriteLogsRequest (Conjure JSON),
read strictly by msgspec (app/ingest/logs.py). Unknown fields are refused, never ignored (a field this
server does not know could change what the request means); a null member is an absent one, as
Conjure reads it (nominal-api's encoder writes an unset `channel` as null)."""

from __future__ import annotations

import msgspec


class LogTimestamp(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    seconds: int
    nanos: int


class LogValue(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    message: str
    args: dict[str, str] | None = None  # a Conjure map: absent or null is empty


class LogPoint(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    timestamp: LogTimestamp
    value: LogValue


class WriteLogsRequest(msgspec.Struct, forbid_unknown_fields=True):
    logs: list[LogPoint]
    channel: str | None = None  # nominal-api: "If not provided, defaults to \"logs\""


DEFAULT_LOG_CHANNEL = "logs"

logs_request_decoder = msgspec.json.Decoder(WriteLogsRequest)
