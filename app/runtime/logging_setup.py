"""Process logging: human-readable lines, or one JSON object per line for log shippers.

Spark's JVM writes to its own stderr, outside Python's logging: compute/spark/session.py sends that to a
file (see `spark_output_path`), so the server's own output stays one format and free of JVM noise.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
from pathlib import Path
from typing import Any

import orjson

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Standard LogRecord attributes; anything else on a record came from `extra=` and is worth keeping
# (except uvicorn's `color_message`: the message again, with terminal colour codes).
_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}

# Chatty libraries: their INFO is about their own plumbing, not Sparkwire's behaviour.
_QUIET = {"py4j": logging.WARNING, "py4j.clientserver": logging.WARNING, "pyspark": logging.WARNING}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and not key.startswith("_"):
                entry[key] = value
        return orjson.dumps(entry, default=str).decode()


class _WebSocketHandshakeLines(logging.Filter):
    """uvicorn's INFO lines for each WebSocket (the handshake accepted, then the websockets
    library's "connection open" and "connection closed"): an access log by another name, shown
    only with `access_log`. Refused handshakes (403, 401) keep their line."""

    MESSAGES = frozenset({'%s - "WebSocket %s" [accepted]', "connection open", "connection closed"})

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and record.msg in self.MESSAGES)


class _Py4jOnRoot(logging.Filter):
    """py4j logs "Exception while sending command." with a traceback at INFO on the root logger
    (not on its own, which _QUIET keeps at WARNING) each time it retries a call to a JVM that has
    gone; the call itself then fails and is reported by whoever made it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or f"{os.sep}py4j{os.sep}" not in record.pathname


def configure_logging(level: str, log_format: str, access_log: bool = False) -> None:
    """Route every Python logger (uvicorn's included) through one stderr handler. Without
    `access_log`, requests that succeed leave no line of their own: app/api/request_summary.py
    counts them in its periodic summary line (uvicorn's access log is off in app/runtime/cli.py)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for quiet in [f for f in root.filters if isinstance(f, _Py4jOnRoot)]:
        root.removeFilter(quiet)
    root.addFilter(_Py4jOnRoot())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uv = logging.getLogger(name)
        uv.handlers.clear()
        uv.propagate = True
    uv_error = logging.getLogger("uvicorn.error")
    for old_filter in [f for f in uv_error.filters if isinstance(f, _WebSocketHandshakeLines)]:
        uv_error.removeFilter(old_filter)
    if not access_log:
        uv_error.addFilter(_WebSocketHandshakeLines())
    for name, quiet_level in _QUIET.items():
        logging.getLogger(name).setLevel(quiet_level)


def spark_output_path(data_dir: Path) -> Path:
    """Where the Spark JVM's own console output (log4j, JVM warnings, Python workers) goes."""
    return data_dir / "spark.log"
