"""The embedded point log's writer: SQLite in WAL mode, int64 nanosecond timestamps.

Points are stored as blocks: one row per series per request, its timestamps and values packed as
little-endian int64/float64 arrays (strings as a JSON list). A row per point cost ~5 us of SQLite
work per point (two B-trees to update) and made the log the ingest bottleneck; a block costs the
same per row, so ~10 rows per request instead of thousands (docs/decisions/0005-log-blocks.md).

`seq` (the block's rowid) is the stream offset; every point of a block carries its seq, and points
keep their write order inside it. A single writer thread group-commits concurrent requests: one
transaction and one fsync for everything queued, and only then are the requests acknowledged.
"""

from __future__ import annotations

import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from compute.storage.contract import InsufficientStorage, SeriesWrite, WriteRejected
from compute.storage.disk_space import FreeSpaceFloor, Retention, default_min_free_bytes
from compute.storage.group_commit import run_groups
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from schemas.timestamps import NANOS_PER_SECOND

logger = logging.getLogger(__name__)

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
    min_ts INTEGER,
    first_seq INTEGER,
    seqs BLOB
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
# (series_id, max_ts, min_ts): back-fill scans max_ts >= from. Logs written before min_ts existed get
# the column (NULL); logs written before merged blocks existed get first_seq and seqs (NULL: a block as
# written, one seq for all its points).
_INDEXES = """
DROP INDEX IF EXISTS blocks_by_series_time;
CREATE INDEX IF NOT EXISTS blocks_by_series_span ON blocks (series_id, max_ts, min_ts);
"""
_INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
PRUNE_BLOCKS = 2000  # blocks deleted per prune step: one short transaction between group commits
PRUNE_INTERVAL_S = 1.0
# While a step finds a full PRUNE_BLOCKS to delete (a backlog: retention just shortened, or more
# blocks a second than one step a second removes), steps come this often instead: a log fed more
# than 2,000 blocks/s (e.g. 100 requests/s over 20+ series) would otherwise outgrow its retention.
PRUNE_BACKLOG_INTERVAL_S = 0.2
# Merging small blocks (docs/decisions/0032-merged-history-blocks.md): a long window's back-fill read
# costs per block (SQLite's row and Python's tuple, ~0.75 us each), so a log fed 10-point blocks reads
# an hour of a 1 kHz channel as 360,000 rows. Blocks the stream has committed past are merged, per
# series, into blocks of up to MERGED_POINTS points that remember each member's seq and count.
COMPACT_MIN_BLOCKS = 4096  # a step waits until at least this many blocks lie past the last one
COMPACT_BLOCKS = 8192  # blocks examined per step (~35 ms): one short transaction between group commits
# A step rewrites the points it merges, holding the writer meanwhile: bounded by points too, or a fast
# feed's blocks of hundreds of points made steps of millions of points (~0.7 s stalls every ~4 s at
# 1,000,000 points/s; decision 0038).
COMPACT_POINTS = 1 << 17
# Blocks with fewer points are merged; bigger ones stay as written. At 256 points an hour of a 1 kHz
# channel is ~14,000 rows (~10 ms to read): merging bigger blocks costs their rewrite for little.
SMALL_BLOCK = 256
MERGED_POINTS = 1 << 16  # points per merged block at most (1 MiB of timestamps and values)
COMPACT_INTERVAL_S = 1.0
COMPACT_BACKLOG_INTERVAL_S = 0.05
_INSERT_BLOCK = (
    "INSERT INTO blocks (series_id, n, max_ts, min_ts, ts, value, str) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


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
            logger.info("switching %s to incremental auto-vacuum (one VACUUM, once)", path)
            conn.execute("VACUUM")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")  # the commit's fsync is what makes a 200 durable
    conn.executescript(_DDL)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(blocks)")}
    for name, kind in (("min_ts", "INTEGER"), ("first_seq", "INTEGER"), ("seqs", "BLOB")):
        if name not in columns:  # a log written before the column existed
            conn.execute(f"ALTER TABLE blocks ADD COLUMN {name} {kind}")
    conn.executescript(_INDEXES)
    return conn


def _disk_full(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and (
        getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    )


class _Prune:
    """A queue item asking the writer thread for one prune step after its next group commit, so that
    pruning never runs beside a commit and never holds the write lock for long."""


@dataclass
class _Compact:
    """A queue item asking the writer thread for one merge step (`done`: told when it ran)."""

    done: Future[int] | None = None


@dataclass
class Compaction:
    """How small blocks are merged (module defaults; tests shrink them)."""

    min_blocks: int = COMPACT_MIN_BLOCKS
    step_blocks: int = COMPACT_BLOCKS
    step_points: int = COMPACT_POINTS
    small_block: int = SMALL_BLOCK
    merged_points: int = MERGED_POINTS


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
    asks the writer for a prune step every second (every PRUNE_BACKLOG_INTERVAL_S while steps come
    back full): up to PRUNE_BLOCKS blocks older than the
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
        # Blocks up to this seq may be merged: the stream's reader never reads them again (set by the
        # log that owns the stream, compute/storage/sqlite/point_log.py; None: nothing is merged).
        self.compact_upto: Callable[[], int | None] | None = None
        self.compaction = Compaction()
        self.merged_blocks = 0  # blocks merged away since the log was opened
        self._compacted = self._meta("compacted_through")  # every block up to this seq was examined
        self._compact_behind = False
        self._queue: queue.SimpleQueue[_Pending | _Prune | _Compact | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sparkwire-log-writer", daemon=True)
        self._thread.start()
        self._stop = threading.Event()
        # Whether the last step was full (more is due than a step a second removes); true at first, as
        # a log opened after downtime may hold a backlog.
        self._prune_behind = True
        if self.retention.prunes:
            threading.Thread(target=self._ask_for_pruning, name="sparkwire-log-pruner", daemon=True).start()
        threading.Thread(target=self._ask_for_merging, name="sparkwire-log-merger", daemon=True).start()

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
        while not self._stop.wait(PRUNE_BACKLOG_INTERVAL_S if self._prune_behind else PRUNE_INTERVAL_S):
            self._queue.put(_Prune())

    def _ask_for_merging(self) -> None:
        while not self._stop.wait(COMPACT_BACKLOG_INTERVAL_S if self._compact_behind else COMPACT_INTERVAL_S):
            if self.compact_upto is not None:
                self._queue.put(_Compact())

    def compact(self) -> Future[int]:
        """One merge step now (on the writer thread); resolves to the blocks it merged away."""
        done: Future[int] = Future()
        self._queue.put(_Compact(done))
        return done

    def _run(self) -> None:
        run_groups(self._queue, self._handle)

    def _handle(self, items: list[_Pending | _Prune | _Compact]) -> None:
        group = [item for item in items if isinstance(item, _Pending)]
        if group:
            self._commit_group(group)
        if any(isinstance(item, _Prune) for item in items):
            try:
                self._prune_step()
            except sqlite3.Error:
                logger.exception("pruning the log failed; it is retried at the next step")
        merges = [item for item in items if isinstance(item, _Compact)]
        if merges:
            try:
                merged = self._compact_step(force=any(m.done is not None for m in merges))
            except sqlite3.Error as exc:
                logger.exception("merging the log's blocks failed; it is retried at the next step")
                for m in merges:
                    if m.done is not None:
                        m.done.set_exception(exc)
                return
            for m in merges:
                if m.done is not None:
                    m.done.set_result(merged)

    def _meta(self, key: str) -> int:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row else 0

    def _compact_step(self, force: bool = False) -> int:
        """Merge runs of small numeric blocks of a series that the stream has committed past: each
        run becomes its last member's row (so seqs stay in append order for pruning), holding the
        members' points in seq order and each member's (seq, count). Readers expand those back to a
        seq per point, so a back-fill cut at any seq is exact (compute/storage/sqlite/blocks.py).
        Returns how many blocks were merged away."""
        mark = self.compact_upto() if self.compact_upto is not None else None
        cfg = self.compaction
        if mark is None or mark <= self._compacted or (not force and mark - self._compacted < cfg.min_blocks):
            self._compact_behind = False
            return 0
        conn = self._conn
        cur = conn.execute(
            "SELECT seq, series_id, n, max_ts, min_ts, CASE WHEN n < ? THEN ts END, "
            "CASE WHEN n < ? THEN value END FROM blocks "
            "WHERE seq > ? AND seq <= ? AND str IS NULL AND first_seq IS NULL ORDER BY seq LIMIT ?",
            (cfg.small_block, cfg.small_block, self._compacted, mark, cfg.step_blocks),
        )
        rows: list[tuple] = []
        points = 0  # of the small blocks examined: what the step may rewrite
        full = False  # the step stopped at one of its bounds: more may wait past it
        for row in cur:
            rows.append(row)
            points += row[2] if row[2] < cfg.small_block else 0
            if len(rows) >= cfg.step_blocks or points >= cfg.step_points:
                full = True
                break
        cur.close()
        through = int(rows[-1][0]) if full else mark
        runs: list[list[tuple]] = []
        open_runs: dict[int, list[tuple]] = {}
        held: dict[int, int] = {}  # points in each open run
        for row in rows:
            sid, n = row[1], row[2]
            run = open_runs.get(sid)
            if n >= cfg.small_block:  # a big block of this series ends its run (seq order per series)
                if run:
                    runs.append(open_runs.pop(sid))
                continue
            if run and held[sid] + n > cfg.merged_points:
                runs.append(open_runs.pop(sid))
                run = None
            if run is None:
                run = open_runs[sid] = []
                held[sid] = 0
            run.append(row)
            held[sid] += n
        runs.extend(open_runs.values())
        runs = [r for r in runs if len(r) > 1]
        merged = 0
        conn.execute("BEGIN")
        try:
            for run in runs:
                ts = b"".join(r[5] for r in run)
                stamps = np.frombuffer(ts, dtype="<i8")
                members = np.array([(r[0], r[2]) for r in run], dtype="<i8")
                conn.execute(
                    "UPDATE blocks SET n = ?, max_ts = ?, min_ts = ?, ts = ?, value = ?, first_seq = ?, "
                    "seqs = ? WHERE seq = ?",
                    (
                        len(stamps),
                        int(stamps.max()),
                        int(stamps.min()),
                        ts,
                        b"".join(r[6] for r in run),
                        int(run[0][0]),
                        members.tobytes(),
                        int(run[-1][0]),
                    ),
                )
                conn.executemany("DELETE FROM blocks WHERE seq = ?", [(r[0],) for r in run[:-1]])
                merged += len(run) - 1
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('compacted_through', ?)", (through,)
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._compacted = through
        self.merged_blocks += merged
        self._compact_behind = full
        return merged

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
                logger.warning("log commit refused: %s", exc)
            else:
                logger.exception("log commit failed")
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
            "+ coalesce(length(seqs), 0) "
            "FROM blocks WHERE seq < (SELECT MAX(seq) FROM blocks) ORDER BY seq LIMIT ?"
        )
        victims: list[tuple[int, int]] = []
        if self.retention.seconds > 0:
            horizon = time.time_ns() - int(self.retention.seconds * NANOS_PER_SECOND)
            rows = conn.execute(oldest, (PRUNE_BLOCKS,)).fetchall()
            victims = [(seq, n) for seq, n, max_ts, _ in rows if max_ts < horizon]
        if not victims and self.retention.max_bytes > 0:
            excess = self._live_bytes() - self.retention.max_bytes
            for seq, n, _, size in conn.execute(oldest, (PRUNE_BLOCKS,)) if excess > 0 else ():
                if excess <= 0:
                    break
                victims.append((seq, n))
                excess -= size
        self._prune_behind = len(victims) >= PRUNE_BLOCKS
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
