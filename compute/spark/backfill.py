"""Back-fill of new computations, batched: computations that ask while a back-fill job runs wait and
share the next one. One Spark batch job reads the union of their series from the oldest timestamp
any of them needs; each computation then takes only its own rows. Many subscriptions arriving
together (a dashboard opening) cost one or two reads instead of one each.

A log the driver reads itself (the embedded one) is read series by series instead, by two threads of
their own that keep up to two computations ahead of the loads: reads (SQLite and numpy's copies let
go of the GIL) overlap each other and the loads, each computation is answered as soon as it is
loaded rather than after the whole batch's read, and only the rows of the next computations are
held at a time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np

from compute.evaluation.computation import Batch, Computation, Rows

logger = logging.getLogger(__name__)

# (series ids, from timestamp, up to seq) -> their rows
ReadLog = Callable[[list[int], int, int], Batch]


class BackfillQueue:
    def __init__(self, read: ReadLog, split_reads: bool = False) -> None:
        """`split_reads`: a read costs what it reads (no job to start), so a batch is read per
        computation, overlapping the loads."""
        self._read = read
        self._split_reads = split_reads
        self._lock = threading.Lock()
        self._pending: list[tuple[Computation, int, Future[None]]] = []  # (computation, its epoch, done)
        self._worker: threading.Thread | None = None

    def run_all(self, computations: list[Computation]) -> list[tuple[Computation, BaseException | None]]:
        """Back-fill these together (blocking); what each one's back-fill raised, if anything."""
        futures = self._submit(computations)
        return [(c, f.exception()) for c, f in zip(computations, futures, strict=True)]

    def _submit(self, computations: list[Computation]) -> list[Future[None]]:
        futures: list[Future[None]] = [Future() for _ in computations]
        with self._lock:
            # The epoch says which reset a back-fill belongs to: one started before a reset
            # (compute/spark/engine.py recover) is dropped by the computation instead of loaded.
            self._pending += [(c, c.epoch, f) for c, f in zip(computations, futures, strict=True)]
            if self._worker is None:
                self._worker = threading.Thread(target=self._drain, name="sparkwire-backfill", daemon=True)
                self._worker.start()
        return futures

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch, self._pending = self._pending, []
                if not batch:
                    self._worker = None
                    return
            self._run_batch(batch)

    def _run_batch(self, batch: list[tuple[Computation, int, Future[None]]]) -> None:
        now = time.time_ns()
        computations = [c for c, _, _ in batch]
        from_ts = min(now - c.plan.window_ns - c.plan.history_ns for c in computations)
        upto = max(c.backfill_seq for c in computations)
        if len(batch) > 1:
            logger.info("back-filling %d computations together", len(batch))
        reads = _Reads(self._read, _steps(computations, self._split_reads), from_ts, upto)
        try:
            for i, (computation, epoch, done) in enumerate(batch):
                try:
                    rows = reads.through(i)
                    computation.load_backfill(_own_rows(computation, rows, now, from_ts, upto), now, epoch)
                except BaseException as exc:  # a read failing fails every computation still waiting
                    done.set_exception(exc)
                else:
                    done.set_result(None)
                reads.forget({sid for c in computations[i + 1 :] for sid in c.routes})
        finally:
            reads.stop()


def _steps(computations: list[Computation], split: bool) -> list[list[int]]:
    """The series each read step reads: one step per computation (the series no earlier step read),
    or one step for them all."""
    if not split:
        return [sorted({sid for c in computations for sid in c.routes})] + [[]] * (len(computations) - 1)
    read: set[int] = set()
    steps = []
    for c in computations:
        steps.append(sorted(set(c.routes) - read))
        read.update(c.routes)
    return steps


class _Reads:
    """The read steps of a batch, run in order by `READERS` threads of their own (inline when there
    is only one step), at most `AHEAD` steps ahead of the computation being loaded: its rows are held
    meanwhile. SQLite's fetch and numpy's copies let go of the GIL, so two reads in flight keep both
    cores busy where one left the loading thread waiting (docs/decisions/0042)."""

    AHEAD = 2
    READERS = 2

    def __init__(self, read: ReadLog, steps: list[list[int]], from_ts: int, upto: int) -> None:
        self._read, self._steps, self._from, self._upto = read, steps, from_ts, upto
        self._rows: Batch = {}
        self._started = 0  # steps handed to a reader
        self._finished: set[int] = set()
        self._done = 0  # steps 0.._done-1 are read
        self._wanted = 0  # the step being loaded
        self._error: BaseException | None = None
        self._failed = 0  # the step whose read raised `_error` (steps before it are still read)
        self._stopped = False
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []
        if sum(1 for step in steps if step) > 1:
            for _ in range(self.READERS):
                thread = threading.Thread(target=self._run, name="sparkwire-backfill-read", daemon=True)
                thread.start()
                self._threads.append(thread)

    def through(self, i: int) -> Batch:
        """The rows of steps 0..i (waits for them); raises what a read raised."""
        if not self._threads:
            while self._started <= i and self._error is None:
                self._started += 1
                self._step(self._started - 1)
        with self._changed:
            self._wanted = i
            self._changed.notify_all()
            while self._done <= i and (self._error is None or self._failed > i):
                self._changed.wait()
            if self._done <= i:
                assert self._error is not None
                raise self._error
            return dict(self._rows)

    def forget(self, keep: set[int]) -> None:
        """Drop the rows of series no computation still to load reads."""
        with self._changed:
            for sid in [sid for sid in self._rows if sid not in keep]:
                del self._rows[sid]

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._stopped and self._started > self._wanted + self.AHEAD:
                    self._changed.wait()
                if self._stopped or self._error is not None or self._started == len(self._steps):
                    return
                self._started += 1
                i = self._started - 1
            self._step(i)

    def _step(self, i: int) -> None:
        series = self._steps[i]
        try:
            rows = self._read(series, self._from, self._upto) if series else {}
        except BaseException as exc:
            with self._changed:
                if self._error is None or i < self._failed:
                    self._error, self._failed = exc, i
                self._changed.notify_all()
            return
        with self._changed:
            self._rows.update(rows)  # steps read different series, so finishing out of order is fine
            self._finished.add(i)
            while self._done in self._finished:
                self._finished.remove(self._done)
                self._done += 1
            self._changed.notify_all()


def _own_rows(computation: Computation, rows: Batch, now: int, read_from: int, read_upto: int) -> Batch:
    """The rows this computation's back-fill covers: its series, its history, seq <= its mark. The
    read covered ts >= read_from and seq <= read_upto: a computation asking for exactly that (one
    back-filled alone, or with others of its window) takes its rows as they are."""
    from_ts = now - computation.plan.window_ns - computation.plan.history_ns
    out: Batch = {}
    for sid in computation.routes:
        r = rows.get(sid)
        if r is None:
            continue
        if computation.backfill_seq < read_upto:  # rows are in seq order (Rows): a cut, not a mask
            hi = int(np.searchsorted(r.seq, computation.backfill_seq, side="right"))
            r = Rows(r.seq[:hi], r.ts[:hi], r.values[:hi])
        if from_ts > read_from:
            keep = r.ts >= from_ts
            if not keep.all():
                r = Rows(r.seq[keep], r.ts[keep], r.values[keep])
        if len(r.seq):
            out[sid] = r
    return out
