"""Array and struct points as the logs store them: one JSON text each, in the string column a string
point uses, so the embedded and the Kafka log keep one point schema, as log lines do
(docs/decisions/0104-array-and-struct-points.md).

- a double array: its values as a JSON list, NaN and the infinities as JSON's `NaN`, `Infinity` and
  `-Infinity` tokens (Python's `json` reads and writes them; every double round-trips exactly);
- a string array: its values as a JSON list of strings;
- a struct: the point's `jsonString`, which must be a JSON object, written back compactly (keys in
  their order), so that equal structs are equal texts and a live computation codes each once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

_COMPACT = (",", ":")


def double_array_text(values: Sequence[float]) -> str:
    return json.dumps([float(v) for v in values], separators=_COMPACT)


def string_array_text(values: Sequence[str]) -> str:
    return _unicode(json.dumps(list(values), separators=_COMPACT, ensure_ascii=False), "a value")


def struct_text(json_string: str) -> str:
    """The stored text of a struct point; ValueError naming the cause when it is no JSON object."""
    try:
        value = json.loads(json_string, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"jsonString is not JSON: {exc}") from None
    except RecursionError:  # json recurses once per level: ~1,000 levels end Python's stack
        raise ValueError("jsonString is nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError(f"jsonString must be a JSON object, got a JSON {type(value).__name__}")
    return _unicode(json.dumps(value, separators=_COMPACT, ensure_ascii=False), "jsonString")


def _unicode(text: str, what: str) -> str:
    """`text`, or ValueError when it holds a lone UTF-16 surrogate ("\\ud800" is valid JSON, which
    Python's json reads, but no Unicode text: the log could not store it and would fail with a 500)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        raise ValueError(
            f"{what} holds a lone UTF-16 surrogate (\\ud800-\\udfff unpaired), which is no Unicode text"
        ) from None
    return text


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"jsonString holds {name}, which is not JSON")


def _loads(text: str) -> Any:
    """orjson (~9x faster than `json` on a 16-double array), or `json` for what orjson refuses:
    NaN and the infinities, an integer wider than 64 bits."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def read_array_text(text: str) -> list[Any]:
    """A stored array's values (doubles or strings); ValueError when the text is no array."""
    value = _loads(text)
    if not isinstance(value, list):
        raise ValueError("not an array point")
    return value


def read_struct_text(text: str) -> dict[str, Any]:
    value = _loads(text)
    if not isinstance(value, dict):
        raise ValueError("not a struct point")
    return value
