"""The recent points of the series a compute process follows, kept from the Kafka log's stream so that a
new computation over them is back-filled from memory instead of by a Spark job that reads their
partitions from the window's start (the back-fill trap of docs/decisions/0076: a window of one series
reads that long of every series in its partition). docs/decisions/0101-followed-series-kept.md.

An entry holds, for one series, every row with ts >= `from_ts` and seq <= `through`, in seq order:
first the rows of the back-fill read that made it followed, then each micro-batch's rows of it. The
stream hands a series' rows in seq order (one partition, read in offset order, stamped with the
broker's append time), so a row at or below `through` has been seen and a later one has not.

Consistency with the stream (all under `lock`, which the engine's batch thread takes too):
- An entry is created as pending (`expect`) before the computation's back-fill mark is taken
  (`marked`), so every stream row above that mark is recorded. A back-fill read through at least that
  mark then seeds it: the read's rows, then the recorded rows above the read's own mark.
- A served entry's series is in the stream's series filter and stays there until the next refresh
  (`refreshing` makes a serve wait for the filter being rebuilt), so every row after `through`
  reaches the new computation through the stream; its per-series marks (`through`) make it skip
  the rows it was served.
- An entry whose series leaves the filter is dropped (`retain`): the stream no longer brings it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from compute.evaluation.computation import Batch, Rows

BYTES_PER_POINT = 24  # seq, ts and a float64 value (an enum's value is a reference to a shared str)


@dataclass
class _Entry:
    seeded: bool = False
    # Pending: the back-fill mark taken after it began recording; a read through at least this seq
    # leaves no gap before the recorded rows.
    after_mark: int | None = None
    from_ts: int = 0  # every row of the series with ts >= from_ts and seq <= through is held
    through: int = 0
    chunks: list[Rows] = field(default_factory=list)  # in seq order, sizes roughly halving
    points: int = 0

    def add(self, rows: Rows) -> None:
        """Append rows later than `through` (a re-delivered micro-batch's are skipped)."""
        facts = rows.facts
        if not facts.count or facts.seq_max <= self.through:
            return
        if facts.seq_min <= self.through:
            keep = rows.seq > self.through
            rows = Rows(rows.seq[keep], rows.ts[keep], rows.values[keep])
        self.chunks.append(rows)
        self.points += len(rows.seq)
        self.through = max(self.through, facts.seq_max)
        # Merge the newest chunks while the last is at least half its elder: O(log n) chunks, each
        # point copied O(log n) times, whatever the number of micro-batches.
        while len(self.chunks) > 1 and 2 * len(self.chunks[-1].seq) >= len(self.chunks[-2].seq):
            b, a = self.chunks.pop(), self.chunks.pop()
            self.chunks.append(_concat([a, b]))

    def rows_from(self, from_ts: int) -> Rows | None:
        """A copy of the rows with ts >= from_ts (None: none)."""
        if not self.chunks:
            return None
        whole = _concat(self.chunks) if len(self.chunks) > 1 else self.chunks[0]
        keep = whole.ts >= from_ts
        if not keep.any():
            return None
        return Rows(whole.seq[keep], whole.ts[keep], whole.values[keep])

    def trim_before(self, ts: int) -> None:
        """Drop what is older than ts, the entry then promising only ts on: leading chunks wholly
        older, and the oldest part of the next when that is at least half of it (the oldest chunk
        holds about half the points: cut only then, so that the copy is paid for by what it frees)."""
        while self.chunks and self.chunks[0].facts.ts_max < ts:
            self.points -= len(self.chunks.pop(0).seq)
        self.from_ts = max(self.from_ts, ts)
        if not self.chunks or self.chunks[0].facts.ts_min >= ts:
            return
        first = self.chunks[0]
        keep = first.ts >= ts
        kept = int(np.count_nonzero(keep))
        if 2 * kept <= len(first.seq):
            self.chunks[0] = Rows(first.seq[keep], first.ts[keep], first.values[keep])
            self.points -= len(first.seq) - kept


def _concat(parts: list[Rows]) -> Rows:
    return Rows(
        np.concatenate([p.seq for p in parts]),
        np.concatenate([p.ts for p in parts]),
        np.concatenate([p.values for p in parts]),
    )


class FollowedSeries:
    def __init__(self, budget_points: int) -> None:
        self.budget_points = budget_points
        self.lock = threading.Condition()
        self.refreshing = False  # the batch thread is rebuilding the series filter
        self._entries: dict[int, _Entry] = {}
        self.served = 0  # computations back-filled from here (/metrics)

    # -- the batch thread --------------------------------------------------------------------------
    def begin_refresh(self) -> None:
        with self.lock:
            self.refreshing = True

    def end_refresh(self, in_filter: list[int] | None) -> None:
        """The filter is rebuilt (`in_filter`: its series, None when unchanged): drop the seeded
        entries the stream no longer brings."""
        with self.lock:
            if in_filter is not None:
                keep = set(in_filter)
                for sid in [s for s, e in self._entries.items() if e.seeded and s not in keep]:
                    del self._entries[sid]
            self.refreshing = False
            self.lock.notify_all()

    def record(self, batch: Batch) -> None:
        """A micro-batch's rows, before any computation is handed them."""
        with self.lock:
            for sid, rows in batch.items():
                entry = self._entries.get(sid)
                if entry is not None:
                    entry.add(rows)

    def trim(self, keep_from: dict[int, int]) -> None:
        """Keep each series from the oldest timestamp a computation reading it back-fills from; a
        series no computation reads any more is dropped. Over the budget, the largest go."""
        with self.lock:
            for sid, entry in list(self._entries.items()):
                if not entry.seeded:
                    continue
                if sid not in keep_from:
                    del self._entries[sid]
                else:
                    entry.trim_before(keep_from[sid])
            seeded = sorted((e.points, s) for s, e in self._entries.items() if e.seeded)
            excess = self.points - self.budget_points
            while excess > 0 and seeded:
                points, sid = seeded.pop()
                del self._entries[sid]
                excess -= points

    def clear(self) -> None:
        """The stream restarts at the log's end: nothing held is known to be whole any more."""
        with self.lock:
            self._entries.clear()

    # -- the threads adding computations -----------------------------------------------------------
    def serve(self, series_ids: list[int], from_ts: int) -> tuple[Batch, dict[int, int]] | None:
        """Every one of these series' rows with ts >= from_ts, and per series the seq through which
        they are whole; None unless every series is held from from_ts on."""
        with self.lock:
            while self.refreshing:
                self.lock.wait()
            entries = [(sid, self._entries.get(sid)) for sid in series_ids]
            if not series_ids or any(e is None or not e.seeded or e.from_ts > from_ts for _, e in entries):
                return None
            rows: Batch = {}
            marks: dict[int, int] = {}
            for sid, entry in entries:
                assert entry is not None
                marks[sid] = entry.through
                held = entry.rows_from(from_ts)
                if held is not None:
                    rows[sid] = held
            self.served += 1
            return rows, marks

    def expect(self, series_ids: list[int]) -> None:
        """These series are about to be read by a back-fill: record their stream rows meanwhile.
        Call before the back-fill's mark is taken, then `marked` with it."""
        with self.lock:
            if self.points >= self.budget_points:
                return
            for sid in series_ids:
                self._entries.setdefault(sid, _Entry())

    def marked(self, series_ids: list[int], mark: int) -> None:
        """The back-fill mark taken after `expect`ing these series."""
        with self.lock:
            for sid in series_ids:
                entry = self._entries.get(sid)
                if entry is not None and not entry.seeded and entry.after_mark is None:
                    entry.after_mark = mark

    def seeded_by(self, series_ids: list[int], rows: Batch, from_ts: int, through: int) -> None:
        """A back-fill read these series, ts >= from_ts and seq <= through: the pending ones start from
        it, followed by the stream rows recorded since they were expected."""
        with self.lock:
            for sid in series_ids:
                entry = self._entries.get(sid)
                if entry is None or entry.seeded or entry.after_mark is None or through < entry.after_mark:
                    continue  # not pending, or this read may end before its recording began
                recorded = entry.chunks
                seeded = _Entry(seeded=True, from_ts=from_ts, through=-1)
                read = rows.get(sid)
                if read is not None:
                    seeded.add(read)
                seeded.through = max(seeded.through, through)
                for r in recorded:
                    seeded.add(r)
                self._entries[sid] = seeded

    def abandon(self, series_ids: list[int]) -> None:
        """The back-fill read of these series failed: stop recording the pending ones."""
        with self.lock:
            for sid in series_ids:
                entry = self._entries.get(sid)
                if entry is not None and not entry.seeded:
                    del self._entries[sid]

    @property
    def points(self) -> int:
        return sum(e.points for e in self._entries.values())

    def held_points(self) -> int:
        with self.lock:
            return self.points
