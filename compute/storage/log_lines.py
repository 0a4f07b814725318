"""A log point's value as the log stores it: its message and args as one compact JSON text,
`["<message>",{"<arg>":"<value>",...}]` (args sorted by key), kept in the string column a string
point uses, so the embedded and the Kafka log keep one point schema (docs/decisions/0071-log-points.md).
The same line written twice is the same text: a live computation codes it once, as an enum label."""

from __future__ import annotations

from collections.abc import Mapping

import orjson


def log_text(message: str, args: Mapping[str, str]) -> str:
    """The stored text of one log point."""
    return orjson.dumps([message, args], option=orjson.OPT_SORT_KEYS).decode()


def read_log_text(text: str) -> tuple[str, dict[str, str]]:
    """A stored log point's (message, args)."""
    message, args = orjson.loads(text)
    return message, args
