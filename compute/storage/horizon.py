"""How far back a point log still holds everything it was given, as far as it can tell cheaply: what
a replay (app/fanout/replay.py, docs/extensions.md) checks before it reads a past period.

Retention by time (SPARKWIRE_RETENTION_SECONDS) is a policy the caller checks against the clock
(app/protocol/ws_session.py). What goes beyond it is told here for the embedded log: with a byte
cap (SPARKWIRE_MAX_LOG_BYTES) it prunes its oldest blocks whatever their age. Seqs start at 1 and
are never reused, so the oldest block still held tells whether anything was pruned (its seq, or a
merged block's first member's, is above 1), and its oldest point is where the log is complete from
(blocks are pruned in append order): one small read (one row). The Kafka log reckons its own the
same way (`KafkaLog.held_from`: a partition's log start offset and its first record)."""

from __future__ import annotations

from pathlib import Path

from compute.storage.sqlite.connection import connect_reader


def embedded_held_from(path: str | Path, max_bytes: int) -> int | None:
    """The timestamp (ns) from which the embedded log holds every point it was given; None when
    nothing was pruned beyond the retention by time (only a byte cap prunes points of any age)."""
    if max_bytes <= 0:
        return None
    conn = connect_reader(path)
    try:
        # A merged block (decision 0032) is its last member's row; its first member's seq says
        # whether anything before it was pruned.
        row = conn.execute(
            "SELECT coalesce(first_seq, seq), min_ts, max_ts FROM blocks ORDER BY seq LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    if row is None or int(row[0]) <= 1:
        return None
    _, min_ts, max_ts = row
    return int(min_ts if min_ts is not None else max_ts)
