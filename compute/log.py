"""The embedded durable log: SQLite in WAL mode, int64 nanosecond timestamps.

Points are stored as blocks: one row per series per request, its timestamps and values packed as
little-endian int64/float64 arrays (strings as a JSON list). A row per point cost ~5 us of SQLite
work per point (two B-trees to update) and made the log the ingest bottleneck; a block costs the
same per row, so ~10 rows per request instead of thousands (docs/decisions/0005-log-blocks.md).

`seq` (the block's rowid) is the stream offset; every point of a block carries its seq, and points
keep their write order inside it. A single writer thread group-commits concurrent requests: one
transaction and one fsync for everything queued, and only then are the requests acknowledged.
"""

from __future__ import annotations

import itertools
import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from compute.disk_space import FreeSpaceFloor, Retention, default_min_free_bytes
from compute.series import SeriesInfo, SeriesKey, SeriesKind

log = logging.getLogger(__name__)

POINT_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("series_id", pa.int64()),
        ("ts", pa.int64()),
        ("value", pa.float64()),
        ("str", pa.string()),
    ]
)
POINT_SCHEMA_DDL = "seq long, series_id long, ts long, value double, str string"
# The stream's rows: one per block, its points as arrays (a numeric block's `str` and an enum block's
# `value` are null). Spark copies and serializes every row the stream reader hands it, so a row per
# point cost the JVM per point (docs/decisions/0017-stream-rows-are-blocks.md).
BLOCK_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("series_id", pa.int64()),
        ("ts", pa.list_(pa.int64())),
        ("value", pa.list_(pa.float64())),
        ("str", pa.list_(pa.string())),
    ]
)
BLOCK_SCHEMA_DDL = "seq long, series_id long, ts array<long>, value array<double>, str array<string>"

_DDL = """
CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY,
    data_source_rid TEXT NOT NULL,
    channel TEXT NOT NULL,
    tags TEXT NOT NULL,
    kind TEXT NOT NULL,
    UNIQUE (data_source_rid, channel, tags)
);
CREATE TABLE IF NOT EXISTS blocks (
    seq INTEGER PRIMARY KEY,
    series_id INTEGER NOT NULL,
    n INTEGER NOT NULL,
    max_ts INTEGER NOT NULL,
    ts BLOB NOT NULL,
    value BLOB,
    str TEXT,
    min_ts INTEGER
);
"""
# (series_id, max_ts, min_ts): back-fill scans max_ts >= from; a range read (read_series_range) also
# skips blocks starting after its end without touching the table. Logs written before min_ts existed
# get the column (NULL: such a block is read by every range read that reaches its max_ts).
_INDEXES = """
DROP INDEX IF EXISTS blocks_by_series_time;
CREATE INDEX IF NOT EXISTS blocks_by_series_span ON blocks (series_id, max_ts, min_ts);
"""
_INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
PRUNE_BLOCKS = 2000  # blocks deleted per prune step: one short transaction between group commits
PRUNE_INTERVAL_S = 1.0
_INSERT_BLOCK = (
    "INSERT INTO blocks (series_id, n, max_ts, min_ts, ts, value, str) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


class WriteRejected(ValueError):
    """A request the log refuses as a whole (e.g. string points on a double series)."""


class InsufficientStorage(Exception):
    """The log refuses a request because the disk is below its free-space floor; nothing of it is
    stored, and writes are accepted again once space returns (ingest answers 507)."""


@dataclass
class SeriesWrite:
    key: SeriesKey
    kind: SeriesKind
    ts: list[int] | np.ndarray  # int64 nanoseconds; the protobuf decoder hands numpy columns
    values: list[float] | list[str] | np.ndarray  # a numeric series' float64 column, or strings


@dataclass
class _Pending:
    writes: list[SeriesWrite]
    future: Future[int] = field(default_factory=Future)


def connect_writer(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    # Pruned pages go back to the file system only with auto_vacuum, which must be chosen before
    # the first table exists; a log made before retention existed is switched by one VACUUM.
    fresh = not conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone()
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != _INCREMENTAL:
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        if not fresh:
            log.info("switching %s to incremental auto-vacuum (one VACUUM, once)", path)
            conn.execute("VACUUM")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")  # the commit's fsync is what makes a 200 durable
    conn.executescript(_DDL)
    if "min_ts" not in {row[1] for row in conn.execute("PRAGMA table_info(blocks)")}:
        conn.execute("ALTER TABLE blocks ADD COLUMN min_ts INTEGER")
    conn.executescript(_INDEXES)
    return conn


def connect_reader(path: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    conn.execute("PRAGMA query_only=1")
    return conn


T = TypeVar("T")


def run_groups(requests: queue.SimpleQueue[T | None], handle: Callable[[list[T]], None]) -> None:
    """A writer thread's loop: hand everything queued since the last round to `handle` as one group
    (one commit or round trip for all of it); a None in the queue stops the loop after its group."""
    while True:
        first = requests.get()
        if first is None:
            return
        group = [first]
        stop = False
        while True:
            try:
                nxt = requests.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                stop = True
                break
            group.append(nxt)
        handle(group)
        if stop:
            return


def _disk_full(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and (
        getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    )


class _Prune:
    """A queue item asking the writer thread for one prune step after its next group commit, so that
    pruning never runs beside a commit and never holds the write lock for long."""


@dataclass
class PruneStats:
    blocks: int = 0
    points: int = 0
    steps: int = 0
    last_step_s: float = 0.0


class DurableLog:
    """Owns the writer connection and thread; readers open their own connections (other processes).

    Before each group commit the writer checks the free-space floor: below it, the group's requests
    fail with InsufficientStorage and nothing is stored. With a retention policy, a pruner thread
    asks the writer for a prune step every second: up to PRUNE_BLOCKS blocks older than the
    retention (by their newest point's timestamp, in append order) or, past the byte cap, the oldest
    blocks, then an incremental vacuum that returns the pages to the file system."""

    def __init__(
        self,
        path: Path,
        on_new_series: Callable[[SeriesInfo], None] | None = None,
        retention: Retention | None = None,
        min_free_bytes: int | None = 0,
    ) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = connect_writer(path)
        self._series: dict[SeriesKey, SeriesInfo] = {}
        for info in self._load_series(self._conn):
            self._series[info.key] = info
        self.on_new_series = on_new_series
        self.retention = retention or Retention(0, 0)
        floor = default_min_free_bytes(path.parent) if min_free_bytes is None else min_free_bytes
        self.floor = FreeSpaceFloor(path.parent, floor)
        self.pruned = PruneStats()
        self._queue: queue.SimpleQueue[_Pending | _Prune | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sparkwire-log-writer", daemon=True)
        self._thread.start()
        self._stop = threading.Event()
        if self.retention.prunes:
            threading.Thread(target=self._ask_for_pruning, name="sparkwire-log-pruner", daemon=True).start()

    # -- writing ---------------------------------------------------------------------------------
    def submit(self, writes: list[SeriesWrite]) -> Future[int]:
        """Queue one request's points; the future resolves to the point count once they are durable."""
        pending = _Pending(writes)
        self._queue.put(pending)
        return pending.future

    def close(self) -> None:
        self._stop.set()
        self._queue.put(None)
        self._thread.join(timeout=10)
        self._conn.close()

    def size_bytes(self) -> int:
        """The log's files on disk (the database and its WAL)."""
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())

    def _ask_for_pruning(self) -> None:
        while not self._stop.wait(PRUNE_INTERVAL_S):
            self._queue.put(_Prune())

    def _run(self) -> None:
        run_groups(self._queue, self._handle)

    def _handle(self, items: list[_Pending | _Prune]) -> None:
        group = [item for item in items if isinstance(item, _Pending)]
        if group:
            self._commit_group(group)
        if len(group) < len(items):
            try:
                self._prune_step()
            except sqlite3.Error:
                log.exception("pruning the log failed; it is retried at the next step")

    def _commit_group(self, group: list[_Pending]) -> None:
        if self.floor.below():
            refusal = InsufficientStorage(self.floor.describe())
            for pending in group:
                pending.future.set_exception(refusal)
            return
        conn = self._conn
        outcomes: list[tuple[_Pending, int | BaseException]] = []
        new_series: list[SeriesInfo] = []
        try:
            conn.execute("BEGIN")
            for pending in group:
                conn.execute("SAVEPOINT request")
                created: list[SeriesInfo] = []
                try:
                    count = self._insert(pending.writes, created)
                except BaseException as exc:  # one bad request must not sink the others
                    conn.execute("ROLLBACK TO request")
                    conn.execute("RELEASE request")
                    for info in created:
                        self._series.pop(info.key, None)
                    outcomes.append((pending, exc))
                    continue
                conn.execute("RELEASE request")
                new_series.extend(created)
                outcomes.append((pending, count))
            # New series are announced before the commit, so no stream batch can hold their
            # points before the engine knows which computations read them.
            if self.on_new_series is not None:
                for info in new_series:
                    self.on_new_series(info)
            conn.execute("COMMIT")
        except BaseException as exc:
            if _disk_full(exc):  # filled between the floor's readings: refused, not a server error
                exc = InsufficientStorage(f"the disk under {self.path.parent} is full: {exc}")
                log.warning("log commit refused: %s", exc)
            else:
                log.exception("log commit failed")
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for info in new_series:
                self._series.pop(info.key, None)
            for pending, _ in outcomes:
                pending.future.set_exception(exc)
            return
        for pending, outcome in outcomes:
            if isinstance(outcome, BaseException):
                pending.future.set_exception(outcome)
            else:
                pending.future.set_result(outcome)

    def _prune_step(self) -> None:
        """One bounded prune: expired blocks first, then, while the log is over its byte cap, the
        oldest blocks that cover the excess. The newest block always stays, so seq (the rowid)
        never starts over."""
        conn, started = self._conn, time.monotonic()
        oldest = (
            "SELECT seq, n, max_ts, length(ts) + coalesce(length(value), 0) + coalesce(length(str), 0) "
            "FROM blocks WHERE seq < (SELECT MAX(seq) FROM blocks) ORDER BY seq LIMIT ?"
        )
        victims: list[tuple[int, int]] = []
        if self.retention.seconds > 0:
            horizon = time.time_ns() - int(self.retention.seconds * 1e9)
            rows = conn.execute(oldest, (PRUNE_BLOCKS,)).fetchall()
            victims = [(seq, n) for seq, n, max_ts, _ in rows if max_ts < horizon]
        if not victims and self.retention.max_bytes > 0:
            excess = self._live_bytes() - self.retention.max_bytes
            for seq, n, _, size in conn.execute(oldest, (PRUNE_BLOCKS,)) if excess > 0 else ():
                if excess <= 0:
                    break
                victims.append((seq, n))
                excess -= size
        if not victims:
            return
        conn.execute("BEGIN")
        try:
            conn.executemany("DELETE FROM blocks WHERE seq = ?", [(seq,) for seq, _ in victims])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        # The freed pages back to the file system. executescript steps the pragma to its end: a
        # cursor's execute() would free one page only.
        conn.executescript("PRAGMA incremental_vacuum;")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # and the WAL back to nothing
        stats = self.pruned
        stats.blocks += len(victims)
        stats.points += sum(n for _, n in victims)
        stats.steps += 1
        stats.last_step_s = time.monotonic() - started

    def _live_bytes(self) -> int:
        """Pages in use (the file's size less its free pages): what pruning can bring down."""
        pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
        free = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
        return int((pages - free) * self._conn.execute("PRAGMA page_size").fetchone()[0])

    def _insert(self, writes: list[SeriesWrite], created: list[SeriesInfo]) -> int:
        conn = self._conn
        count = 0
        for write in writes:
            info = self._series.get(write.key)
            if info is None:
                cur = conn.execute(
                    "INSERT INTO series (data_source_rid, channel, tags, kind) VALUES (?, ?, ?, ?)",
                    (write.key.data_source_rid, write.key.channel, write.key.tags_json(), write.kind.value),
                )
                assert cur.lastrowid is not None
                info = SeriesInfo(cur.lastrowid, write.key, write.kind)
                self._series[write.key] = info
                created.append(info)
            elif info.kind is not write.kind:
                raise WriteRejected(
                    f"channel '{write.key.channel}' with tags {dict(write.key.tags)} holds "
                    f"{info.kind.value} points; this request writes {write.kind.value} points"
                )
            n = len(write.ts)
            if not n:
                continue
            ts = np.asarray(write.ts, dtype="<i8")
            if write.kind is SeriesKind.NUMERIC:
                value, text = np.asarray(write.values, dtype="<f8").tobytes(), None
            else:
                value, text = None, orjson.dumps(write.values).decode()
            conn.execute(_INSERT_BLOCK, (info.id, n, int(ts.max()), int(ts.min()), ts.tobytes(), value, text))
            count += n
        return count

    # -- reading (driver side) -------------------------------------------------------------------
    def series(self) -> list[SeriesInfo]:
        return list(self._series.values())

    @staticmethod
    def _load_series(conn: sqlite3.Connection) -> list[SeriesInfo]:
        return [
            SeriesInfo(sid, SeriesKey.of(ds, ch, _tags(tags)), SeriesKind(kind))
            for sid, ds, ch, tags, kind in conn.execute(
                "SELECT id, data_source_rid, channel, tags, kind FROM series"
            )
        ]


def _tags(tags_json: str) -> dict[str, str]:
    return dict(json.loads(tags_json))


# -- reading (any process: the Spark data source runs these in Python workers) -------------------
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


def points_of_blocks(table: pa.Table) -> pa.Table:
    """BLOCK_SCHEMA rows (e.g. a micro-batch's `toArrow()`) -> POINT_SCHEMA rows, in the same order."""
    counts = pc.list_value_length(table.column("ts")).to_numpy(zero_copy_only=False).astype(np.int64)
    total = int(counts.sum())
    seq = np.repeat(table.column("seq").to_numpy(), counts)
    sid = np.repeat(table.column("series_id").to_numpy(), counts)
    ts = pc.list_flatten(table.column("ts"))
    value_lists, str_lists = table.column("value"), table.column("str")
    if value_lists.null_count == 0:  # numeric only
        value, text = pc.list_flatten(value_lists), pa.nulls(total, pa.string())
    else:
        enum_point = np.repeat(value_lists.is_null().to_numpy(zero_copy_only=False), counts)
        values = np.full(total, np.nan)
        values[~enum_point] = pc.list_flatten(value_lists).to_numpy()
        strings = np.full(total, None, dtype=object)
        strings[enum_point] = pc.list_flatten(str_lists).to_pylist()
        value, text = pa.array(values, mask=enum_point), pa.array(strings, pa.string())
    return pa.table([seq, sid, ts, value, text], schema=POINT_SCHEMA)


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


def read_series_since(
    conn: sqlite3.Connection, series_ids: Sequence[int], from_ts: int, upto_seq: int
) -> list[pa.RecordBatch]:
    """Back-fill: points of these series with ts >= from_ts in blocks with seq <= upto_seq."""
    if not series_ids:
        return []
    marks = ",".join("?" * len(series_ids))
    cur = conn.execute(
        f"SELECT {_BLOCK_COLUMNS} FROM blocks WHERE series_id IN ({marks}) AND max_ts >= ? AND seq <= ?",
        (*series_ids, from_ts, upto_seq),
    )
    batches = []
    while rows := cur.fetchmany(256):
        batches.append(_to_batch(rows, from_ts))
    return batches


RANGE_SCHEMA = pa.schema(
    [("seq", pa.int64()), ("pos", pa.int64()), ("ts", pa.int64()), ("value", pa.float64())]
)


def read_series_range(
    conn: sqlite3.Connection, series_id: int, from_ts: int, to_ts: int, after_seq: int, upto_seq: int
) -> pa.Table:
    """A numeric series' points with from_ts <= ts < to_ts in blocks with after_seq < seq <= upto_seq,
    in write order: (seq, pos = the point's index in its block, ts, value)."""
    rows = conn.execute(
        "SELECT seq, n, ts, value FROM blocks WHERE series_id = ? AND max_ts >= ? "
        "AND (min_ts IS NULL OR min_ts < ?) AND seq > ? AND seq <= ? ORDER BY seq",
        (series_id, from_ts, to_ts, after_seq, upto_seq),
    ).fetchall()
    if not rows:
        return RANGE_SCHEMA.empty_table()
    counts = np.fromiter((r[1] for r in rows), np.int64, len(rows))
    seq = np.repeat(np.fromiter((r[0] for r in rows), np.int64, len(rows)), counts)
    pos = np.arange(len(seq), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    ts = np.frombuffer(b"".join(r[2] for r in rows), dtype="<i8")
    value = np.frombuffer(b"".join(r[3] or b"" for r in rows), dtype="<f8")
    keep = (ts >= from_ts) & (ts < to_ts)
    return pa.table([seq[keep], pos[keep], ts[keep], value[keep]], schema=RANGE_SCHEMA)
