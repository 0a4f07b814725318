"""A series' identity on a shared log: a stable id every process computes alike from its key (no
process needs to ask another), and the text its catalog record holds (its kind and key)."""

from __future__ import annotations

import hashlib
import json

from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind


def key_json(key: SeriesKey) -> str:
    return json.dumps([key.data_source_rid, key.channel, list(key.tags)], separators=(",", ":"))


def series_id(key: SeriesKey) -> int:
    """Stable across processes and machines (unlike Python's hash)."""
    digest = hashlib.blake2b(key_json(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & ((1 << 63) - 1)


def definition(kind: SeriesKind, key: SeriesKey) -> str:
    """The catalog's value for a series: its kind and key."""
    return f"{kind.value}\n{key_json(key)}"


def parse_definition(sid: int, text: bytes | str) -> SeriesInfo:
    raw = text.decode() if isinstance(text, bytes) else text
    kind, key = raw.split("\n", 1)
    rid, channel, tags = json.loads(key)
    return SeriesInfo(sid, SeriesKey.of(rid, channel, dict(tags)), SeriesKind(kind))
