"""Back-fill of new computations, batched: computations that ask while a back-fill job runs wait and
share the next one. One Spark batch job reads the union of their series from the oldest timestamp
any of them needs; each computation then takes only its own rows. Many subscriptions arriving
together (a dashboard opening) cost one or two reads instead of one each."""

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
    def __init__(self, read: ReadLog) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._pending: list[tuple[Computation, int, Future[None]]] = []  # (computation, its epoch, done)
        self._worker: threading.Thread | None = None

    def run(self, computation: Computation) -> None:
        """Back-fill one computation (blocking); raises what its back-fill raised."""
        self._submit([computation])[0].result()

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
        series_ids = sorted({sid for c, _, _ in batch for sid in c.routes})
        rows: Batch = {}
        from_ts = min(now - c.plan.window_ns - c.plan.lookback_ns for c, _, _ in batch)
        upto = max(c.backfill_seq for c, _, _ in batch)
        try:
            if series_ids:
                rows = self._read(series_ids, from_ts, upto)
        except BaseException as exc:  # the job failed: every computation waiting on it fails
            for _, _, done in batch:
                done.set_exception(exc)
            return
        if len(batch) > 1:
            logger.info("back-filled %d computations with one job", len(batch))
        for computation, epoch, done in batch:
            try:
                computation.load_backfill(_own_rows(computation, rows, now, from_ts, upto), now, epoch)
            except BaseException as exc:
                done.set_exception(exc)
            else:
                done.set_result(None)


def _own_rows(computation: Computation, rows: Batch, now: int, read_from: int, read_upto: int) -> Batch:
    """The rows this computation's back-fill covers: its series, its history, seq <= its mark. The
    read covered ts >= read_from and seq <= read_upto: a computation asking for exactly that (one
    back-filled alone, or with others of its window) takes its rows as they are."""
    from_ts = now - computation.plan.window_ns - computation.plan.lookback_ns
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
