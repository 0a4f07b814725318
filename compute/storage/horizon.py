"""How far back a point log still holds everything it was given, as far as it can tell cheaply: what
a replay (app/fanout/replay.py, docs/extensions.md) checks before it reads a past period.

Retention by time (SPARKWIRE_RETENTION_SECONDS) is a policy the caller checks against the clock
(app/protocol/ws_session.py). What goes beyond it is told here:
- the embedded log with a byte cap (SPARKWIRE_MAX_LOG_BYTES) prunes its oldest blocks whatever
  their age. Seqs start at 1 and are never reused, so the oldest block still held tells whether
  anything was pruned (its seq, or a merged block's first member's, is above 1), and its oldest
  point is where the log is complete from (blocks are pruned in append order);
- the Redis log trims each partition's stream from its oldest entry (MINID or MAXLEN). Every entry
  records the partition's point count at its append (`c`), so the oldest entry left tells whether
  anything before it was trimmed; an entry appended before it held points stamped at most the
  partition's future skew (`f:p`) after that append, so the partition is complete from the oldest
  entry's append time plus that skew.
Each is one small read (one row, one XRANGE ... COUNT 1 per partition). The Kafka log reckons its
own the same way (`KafkaLog.held_from`: a partition's log start offset and its first record)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from compute.storage.redis import layout as rs
from compute.storage.sqlite import blocks

NANOS_PER_MS = 1_000_000


def embedded_held_from(path: str | Path, max_bytes: int) -> int | None:
    """The timestamp (ns) from which the embedded log holds every point it was given; None when
    nothing was pruned beyond the retention by time (only a byte cap prunes points of any age)."""
    if max_bytes <= 0:
        return None
    conn = blocks.connect_reader(path)
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


def redis_held_from(url: str, layout: rs.RedisLayout, series_ids: Sequence[int]) -> int | None:
    """The timestamp (ns) from which the Redis log holds every point of these series; None when
    none of their partitions was trimmed."""
    partitions = sorted({layout.partition_of(sid) for sid in series_ids})
    if not partitions:
        return None
    conn = rs.client(url)  # the process's pool for this Redis
    skew = rs.future_skew_ms(conn, layout)
    held: int | None = None
    for p in partitions:
        first = rs.xrange(conn, layout.stream(p), "-", "+", 1)
        if not first:
            continue
        entry_id, fields = first[0]
        points = len(fields.get(b"t", b"")) // 8
        if int(fields.get(b"c", b"0")) - points <= 0:
            continue  # the partition's first entry ever: nothing trimmed
        appended_ms = rs.seq_of(entry_id) >> rs.SEQ_BITS
        bound = (appended_ms + skew.get(p, 0)) * NANOS_PER_MS
        held = bound if held is None else max(held, bound)
    return held
