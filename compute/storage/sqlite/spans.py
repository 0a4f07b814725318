"""What the embedded log can tell about series without reading their points: the span of time they
cover and how many points a time range holds, from the blocks' own columns (n, min_ts, max_ts) over
the index back-fill uses (blocks_by_series_span). The data sources' bounds and the export's cost
check read these (app/api/data_sources.py, app/api/export.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from compute.storage.sqlite.connection import connect_reader

CHUNK = 500  # series ids per statement (SQLite's host parameters)


def spans(path: str | Path, series_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """(earliest ts, latest ts) of each of these series that holds a point. A block written before
    blocks kept their min_ts has its max_ts taken for both ends."""
    found: dict[int, tuple[int, int]] = {}
    conn = connect_reader(path)
    try:
        for i in range(0, len(series_ids), CHUNK):
            part = list(series_ids[i : i + CHUNK])
            marks = ",".join("?" * len(part))
            for sid, lo, hi in conn.execute(
                f"SELECT series_id, min(coalesce(min_ts, max_ts)), max(max_ts) FROM blocks "
                f"WHERE series_id IN ({marks}) GROUP BY series_id",
                part,
            ):
                found[int(sid)] = (int(lo), int(hi))
    finally:
        conn.close()
    return found


def points_between(path: str | Path, series_ids: Sequence[int], from_ts: int, to_ts: int) -> dict[int, int]:
    """Per series, the points of the blocks that overlap [from_ts, to_ts]: at least the points in the
    range, and what reading them costs (a block is read whole)."""
    found: dict[int, int] = {}
    conn = connect_reader(path)
    try:
        for i in range(0, len(series_ids), CHUNK):
            part = list(series_ids[i : i + CHUNK])
            marks = ",".join("?" * len(part))
            for sid, n in conn.execute(
                f"SELECT series_id, sum(n) FROM blocks WHERE series_id IN ({marks}) AND max_ts >= ? "
                "AND coalesce(min_ts, ?) <= ? GROUP BY series_id",
                (*part, from_ts, from_ts, to_ts),
            ):
                found[int(sid)] = int(n)
    finally:
        conn.close()
    return found
