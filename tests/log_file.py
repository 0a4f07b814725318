"""What the embedded log really holds on disk, read straight from its SQLite file (read-only)."""

from __future__ import annotations

import json
import sqlite3
import struct
from pathlib import Path

StoredRow = tuple[str, str, int, float | None, str | None]  # channel, tags JSON, ts, double, string


def stored_rows(data_dir: Path, rid: str) -> list[StoredRow]:
    """One row per point of this data source, in write order.

    The log keeps one block per series per request: timestamps and doubles packed little-endian,
    strings as a JSON list (docs/decisions/0005-log-blocks.md); a double NaN reads back as None here.
    """
    with sqlite3.connect(f"file:{data_dir / 'log.db'}?mode=ro", uri=True) as conn:
        blocks = conn.execute(
            "SELECT s.channel, s.tags, b.ts, b.value, b.str FROM blocks b "
            "JOIN series s ON s.id = b.series_id WHERE s.data_source_rid = ? ORDER BY b.seq",
            (rid,),
        ).fetchall()
    rows: list[StoredRow] = []
    for channel, tags, ts_blob, value_blob, text in blocks:
        stamps = struct.unpack(f"<{len(ts_blob) // 8}q", ts_blob)
        if value_blob is not None:
            values = struct.unpack(f"<{len(value_blob) // 8}d", value_blob)
            rows += [
                (channel, tags, t, None if v != v else v, None) for t, v in zip(stamps, values, strict=True)
            ]
        else:
            rows += [(channel, tags, t, None, s) for t, s in zip(stamps, json.loads(text), strict=True)]
    return rows
