"""Process logging: human-readable lines, or one JSON object per line for log shippers.

Spark's JVM writes to its own stderr, outside Python's logging: compute/session.py sends that to a
file (see `spark_output_path`), so the server's own output stays one format and free of JVM noise.
"""

from __future__ import annotations

import datetime
import logging
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


def configure_logging(level: str, log_format: str) -> None:
    """Route every Python logger (uvicorn's included) through one stderr handler."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uv = logging.getLogger(name)
        uv.handlers.clear()
        uv.propagate = True
    for name, quiet_level in _QUIET.items():
        logging.getLogger(name).setLevel(quiet_level)


def spark_output_path(data_dir: Path) -> Path:
    """Where the Spark JVM's own console output (log4j, JVM warnings, Python workers) goes."""
    return data_dir / "spark.log"
