"""Reading the embedded log's blocks from any process (the Spark data source runs these in Python
workers): offsets, point and block rows, back-fill reads."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa

from compute.storage.records import BLOCK_SCHEMA, POINT_SCHEMA


def max_seq(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT MAX(seq) FROM blocks").fetchone()
    return int(row[0] or 0)


def count_points(conn: sqlite3.Connection, after: int, upto: int) -> int:
    """How many points the blocks with after < seq <= upto hold (offsets count blocks, not points)."""
    row = conn.execute("SELECT SUM(n) FROM blocks WHERE seq > ? AND seq <= ?", (after, upto)).fetchone()
    return int(row[0] or 0)


BlockRow = tuple[int, int, int, bytes, bytes | None, str | None]  # seq, series_id, n, ts, value, str


def _to_batch(rows: list[BlockRow], from_ts: int | None = None) -> pa.RecordBatch:
    """Blocks -> one point per row (seq, series_id, ts, value, str), in block then write order.
    Direct, not `points_of_blocks(_to_blocks(rows))`: that detour made a 120,000-point back-fill
    read 3x slower (30 vs 10 ms)."""
    if not rows:
        return pa.RecordBatch.from_pylist([], schema=POINT_SCHEMA)
    counts = np.fromiter((r[2] for r in rows), np.int64, len(rows))
    seq = np.repeat(np.fromiter((r[0] for r in rows), np.int64, len(rows)), counts)
    sid = np.repeat(np.fromiter((r[1] for r in rows), np.int64, len(rows)), counts)
    ts = np.frombuffer(b"".join(r[3] for r in rows), dtype="<i8")
    if all(r[5] is None for r in rows):  # numeric only: the common case, no per-point Python
        value = pa.array(np.frombuffer(b"".join(r[4] or b"" for r in rows), dtype="<f8"))
        text = pa.nulls(len(ts), pa.string())
    else:
        values: list[float | None] = []
        strings: list[str | None] = []
        for r in rows:
            if r[5] is None:
                values.extend(np.frombuffer(r[4] or b"", dtype="<f8").tolist())
                strings.extend([None] * r[2])
            else:
                values.extend([None] * r[2])
                strings.extend(orjson.loads(r[5]))
        value, text = pa.array(values, pa.float64()), pa.array(strings, pa.string())
    batch = pa.RecordBatch.from_arrays(
        [pa.array(seq), pa.array(sid), pa.array(ts), value, text], schema=POINT_SCHEMA
    )
    if from_ts is not None:  # a block may straddle the start of a back-fill
        batch = batch.filter(pa.array(ts >= from_ts))
    return batch


def _to_blocks(rows: list[BlockRow]) -> pa.RecordBatch:
    """Blocks -> one row per block (BLOCK_SCHEMA), in seq order."""
    if not rows:
        return pa.RecordBatch.from_pylist([], schema=BLOCK_SCHEMA)
    n = len(rows)
    counts = np.fromiter((r[2] for r in rows), np.int64, n)
    is_enum = np.fromiter((r[5] is not None for r in rows), np.bool_, n)
    ts = _lists(counts, pa.array(np.frombuffer(b"".join(r[3] for r in rows), dtype="<i8")))
    numeric = np.frombuffer(b"".join(r[4] or b"" for r in rows if r[5] is None), dtype="<f8")
    if not is_enum.any():  # the common case
        value, text = _lists(counts, pa.array(numeric)), pa.nulls(n, BLOCK_SCHEMA.field("str").type)
    else:
        strings = [s for r in rows if r[5] is not None for s in orjson.loads(r[5])]
        value = _lists(np.where(is_enum, 0, counts), pa.array(numeric), null=is_enum)
        text = _lists(np.where(is_enum, counts, 0), pa.array(strings, pa.string()), null=~is_enum)
    seq = pa.array(np.fromiter((r[0] for r in rows), np.int64, n))
    sid = pa.array(np.fromiter((r[1] for r in rows), np.int64, n))
    return pa.RecordBatch.from_arrays([seq, sid, ts, value, text], schema=BLOCK_SCHEMA)


def _lists(counts: np.ndarray, values: pa.Array, null: np.ndarray | None = None) -> pa.ListArray:
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=None if null is None else pa.array(null))


_BLOCK_COLUMNS = "seq, series_id, n, ts, value, str"


def _blocks_between(
    conn: sqlite3.Connection, after: int, upto: int, chunk: int = 256
) -> Iterator[list[BlockRow]]:
    """The blocks with after < seq <= upto, in seq order, `chunk` at a time."""
    cur = conn.execute(
        f"SELECT {_BLOCK_COLUMNS} FROM blocks WHERE seq > ? AND seq <= ? ORDER BY seq", (after, upto)
    )
    while rows := cur.fetchmany(chunk):
        yield rows


def read_seq_range(conn: sqlite3.Connection, after: int, upto: int) -> list[pa.RecordBatch]:
    """Points (POINT_SCHEMA) of the blocks with after < seq <= upto, in seq order."""
    return [_to_batch(rows) for rows in _blocks_between(conn, after, upto)]


def read_block_range(conn: sqlite3.Connection, after: int, upto: int) -> list[pa.RecordBatch]:
    """The blocks (BLOCK_SCHEMA) with after < seq <= upto, in seq order: a planned batch read again."""
    return [_to_blocks(rows) for rows in _blocks_between(conn, after, upto)]


def read_from(conn: sqlite3.Connection, after: int, max_points: int) -> tuple[list[pa.RecordBatch], int]:
    """The stream's next step: the blocks (BLOCK_SCHEMA) after `after` in seq order, stopping once
    they hold `max_points` points; and the seq of the last block read (`after` when none). The
    writer assigns seqs in commit order, so no block can later appear at or below that seq."""
    cur = conn.execute(f"SELECT {_BLOCK_COLUMNS} FROM blocks WHERE seq > ? ORDER BY seq", (after,))
    batches: list[pa.RecordBatch] = []
    last, points = after, 0
    while points < max_points and (rows := cur.fetchmany(256)):
        for i, total in enumerate(itertools.accumulate(r[2] for r in rows)):
            if points + total >= max_points:  # the block that reaches the cap is the last one
                rows = rows[: i + 1]
                break
        batches.append(_to_blocks(rows))
        last, points = rows[-1][0], points + sum(r[2] for r in rows)
    cur.close()  # stopped early, the statement would hold its read snapshot (and the WAL) open
    return batches, last


@dataclass
class SeriesColumns:
    """One series' points of a back-fill read, in seq order (write order inside a block)."""

    seq: np.ndarray  # int64, per point
    ts: np.ndarray  # int64
    values: np.ndarray  # float64, or object (str) for an enum series
    # The arrays ts and values are views of, with spare room after the points that nothing else holds
    # (read_series_columns with `spare`): a window may take them whole and append into that room.
    buffers: tuple[np.ndarray, np.ndarray] | None = None


_HISTORY_COLUMNS = "seq, series_id, n, ts, value, str, min_ts, first_seq, seqs"
_BLOCK_META = np.dtype(
    [("sid", "i8"), ("first", "i8"), ("last", "i8"), ("n", "i8"), ("straddle", "?"), ("enum", "?")]
)


def read_series_columns(
    conn: sqlite3.Connection,
    series_ids: Sequence[int],
    from_ts: int,
    upto_seq: int,
    spare: Callable[[int], int] | None = None,
) -> dict[int, SeriesColumns]:
    """Back-fill: points of these series with ts >= from_ts written at seq <= upto_seq, per series in
    seq order. A merged block (first_seq set, compute/storage/sqlite/writer.py) holds its members'
    points in seq order and each member's (seq, count): its points get their own seqs back, so a cut
    at any seq is the same as over the blocks as written.

    `spare(points)`: how much room to leave after a numeric series' columns, in buffers of their own
    (`SeriesColumns.buffers`), when its blocks come in order (the common case)."""
    if not series_ids:
        return {}
    marks = ",".join("?" * len(series_ids))
    cur = conn.execute(
        f"SELECT {_HISTORY_COLUMNS} FROM blocks WHERE series_id IN ({marks}) AND max_ts >= ? "
        "AND coalesce(first_seq, seq) <= ?",
        (*series_ids, from_ts, upto_seq),
    )
    # A chunk of blocks at a time, keeping a few numbers and the bytes of each: a list of every row's
    # tuple would build up (and the garbage collector would walk it again and again).
    parts: list[np.ndarray] = []
    ts_parts: list[bytes] = []
    value_parts: list[bytes] = []
    texts: dict[int, list[str]] = {}  # an enum block's index -> its strings
    merged: list[tuple[int, bytes]] = []  # a merged block's index -> its members' (seq, count) pairs
    seen = 0
    while rows := cur.fetchmany(4096):
        k = len(rows)
        # One pass over the rows for every number; the rare kinds (enum, merged) by index after.
        meta = np.fromiter(
            (
                (
                    r[1],
                    r[0] if r[7] is None else r[7],
                    r[0],
                    r[2],
                    r[6] is None or r[6] < from_ts,
                    r[5] is not None,
                )
                for r in rows
            ),
            _BLOCK_META,
            k,
        )
        parts.append(meta)
        ts_parts.extend(r[3] for r in rows)  # bytes: joined once at the end (one copy, not two)
        if meta["enum"].any():  # an enum block's place in the value column is held by zeros
            value_parts.extend(r[4] if r[5] is None else bytes(8 * r[2]) for r in rows)
            for i in np.flatnonzero(meta["enum"]).tolist():
                texts[seen + i] = orjson.loads(rows[i][5])
        else:
            value_parts.extend(r[4] for r in rows)
        for i in np.flatnonzero(meta["first"] != meta["last"]).tolist():
            merged.append((seen + i, rows[i][8]))
        seen += k
    if not seen:
        return {}
    all_meta = np.concatenate(parts)
    sid, first, last, counts = (all_meta[f] for f in ("sid", "first", "last", "n"))
    straddle = bool(all_meta["straddle"].any())  # blocks with points before from_ts (or not recorded)
    starts = np.r_[0, np.cumsum(counts)]
    if merged:  # each block's (seq, count) runs, a merged block's members in place of it: one repeat
        runs = [np.stack([last, counts], axis=1)]
        pieces, at = [], 0
        for i, members in merged:
            pieces += [runs[0][at:i], np.frombuffer(members, dtype="<i8").reshape(-1, 2)]
            at = i + 1
        pieces.append(runs[0][at:])
        pairs = np.concatenate(pieces)
        seq = _runs(pairs[:, 0], pairs[:, 1])
    else:
        seq = _runs(last, counts)
    block = np.arange(seen)
    # The index hands blocks by (series, newest timestamp): in seq order too when a series is written
    # in time order, which one pass checks; otherwise the blocks (not the points) are sorted.
    ordered = bool(np.all((sid[1:] > sid[:-1]) | ((sid[1:] == sid[:-1]) & (first[1:] > last[:-1]))))
    # In order and asked for room: each series' columns are copied into buffers of their own below;
    # otherwise one join of every series' bytes.
    ts: np.ndarray | None = None
    numeric: np.ndarray | None = None
    if not (ordered and spare is not None):
        ts = np.frombuffer(b"".join(ts_parts), dtype="<i8")
        numeric = np.frombuffer(b"".join(value_parts), dtype="<f8")
    if not ordered:
        assert ts is not None and numeric is not None
        block = np.lexsort((first, sid))
        sorted_counts = counts[block]
        new_starts = np.r_[0, np.cumsum(sorted_counts)]
        gather = np.repeat(starts[:-1][block] - new_starts[:-1], sorted_counts) + np.arange(len(ts))
        seq, ts, numeric = seq[gather], ts[gather], numeric[gather]
        sid, starts = sid[block], new_starts
    bounds = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1], True]).tolist()
    out: dict[int, SeriesColumns] = {}
    for a, b in itertools.pairwise(bounds):
        lo, hi = int(starts[a]), int(starts[b])
        buffers = None
        values: np.ndarray
        if int(block[a]) in texts:  # an enum series (a series keeps its kind)
            values = np.array([t for i in block[a:b].tolist() for t in texts[i]], dtype=object)
            series_ts = np.frombuffer(b"".join(ts_parts[a:b]), dtype="<i8") if ts is None else ts[lo:hi]
        elif spare is not None and ts is None:  # in order: blocks a..b-1 are this series' parts
            count = hi - lo
            room = spare(count)
            buffers = (
                _packed(ts_parts[a:b], count, room, "<i8"),
                _packed(value_parts[a:b], count, room, "<f8"),
            )
            series_ts, values = buffers[0][:count], buffers[1][:count]
        else:
            assert ts is not None and numeric is not None
            series_ts, values = ts[lo:hi], numeric[lo:hi]
        cols = _cut(
            seq[lo:hi], series_ts, values, from_ts, upto_seq, straddle, check=bool(merged) and not ordered
        )
        if cols is not None:
            cols.buffers = buffers  # a cut that copied leaves columns the window can tell are not views
            out[int(sid[a])] = cols
    return out


def _packed(parts: list[bytes], count: int, room: int, dtype: str) -> np.ndarray:
    """These parts' bytes back to back in a new array with `room` items spare after them, copied
    straight in (joining them first would fault in memory only to copy it again) by numpy, which lets
    go of the GIL while it copies: the new pages' faults overlap the back-fill's loading."""
    out = np.empty(count + room, dtype)
    pieces = [np.frombuffer(part, dtype) for part in parts]
    if sum(len(piece) for piece in pieces) != count:
        raise ValueError(f"blocks hold {sum(len(piece) for piece in pieces)} points, not {count}")
    if pieces:
        np.concatenate(pieces, out=out[:count])
    return out


def _runs(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """`np.repeat(values, counts)` for int64 runs, as a cumulative sum of the steps between them: with
    millions of runs of ten (a 10-point block each), repeat costs ~20 ns a point, this ~3."""
    if not len(counts) or not bool(np.all(counts > 0)):
        return np.repeat(values, counts)
    out = np.zeros(int(counts.sum()), np.int64)
    out[np.cumsum(counts) - counts] = np.diff(values.astype(np.int64), prepend=np.int64(0))
    return np.cumsum(out, out=out)


def _cut(
    seq: np.ndarray,
    ts: np.ndarray,
    values: np.ndarray,
    from_ts: int,
    upto_seq: int,
    straddle: bool,
    check: bool,
) -> SeriesColumns | None:
    """One series' points (its blocks in order of their first seqs) cut to seq <= upto_seq and
    ts >= from_ts; slices where the cut is a prefix or a suffix, so the common case copies nothing.
    `check`: merged blocks came out of order, so their seq ranges might interleave."""
    if check and not bool(np.all(seq[1:] >= seq[:-1])):
        order = np.argsort(seq, kind="stable")
        seq, ts, values = seq[order], ts[order], values[order]
    if len(seq) and seq[-1] > upto_seq:  # a merged block whose members run past the cut
        hi = int(np.searchsorted(seq, upto_seq, side="right"))
        seq, ts, values = seq[:hi], ts[:hi], values[:hi]
    if straddle:
        keep = ts >= from_ts
        dropped = len(keep) - int(np.count_nonzero(keep))
        if dropped and not keep[:dropped].any():  # the oldest points first: a slice
            seq, ts, values = seq[dropped:], ts[dropped:], values[dropped:]
        elif dropped:
            seq, ts, values = seq[keep], ts[keep], values[keep]
    if not len(ts):
        return None
    return SeriesColumns(seq, ts, values)


def columns_batch(series_id: int, cols: SeriesColumns) -> pa.RecordBatch:
    """One series' columns as POINT_SCHEMA rows."""
    count = len(cols.ts)
    sid = pa.array(np.full(count, series_id, np.int64))
    if cols.values.dtype == object:
        value, text = pa.nulls(count, pa.float64()), pa.array(cols.values, pa.string())
    else:
        value, text = pa.array(cols.values), pa.nulls(count, pa.string())
    return pa.RecordBatch.from_arrays(
        [pa.array(cols.seq), sid, pa.array(cols.ts), value, text], schema=POINT_SCHEMA
    )


def read_series_since(
    conn: sqlite3.Connection, series_ids: Sequence[int], from_ts: int, upto_seq: int
) -> list[pa.RecordBatch]:
    """Back-fill: points of these series with ts >= from_ts in blocks with seq <= upto_seq (POINT_SCHEMA,
    one batch per series, in seq order)."""
    return [
        columns_batch(sid, cols)
        for sid, cols in read_series_columns(conn, series_ids, from_ts, upto_seq).items()
    ]
