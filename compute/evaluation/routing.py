"""Which live computations read which series: the table the engine consults for every micro-batch,
kept in step with the log's series catalog.

Two locks, so that no thread the event loop waits on holds one across I/O: `_lock` guards the
tables and is held for dict work only (the event loop takes it: `find`, `remove`); `_catalog_lock`
orders reading the catalog (I/O in the Kafka log) with routing what it returned, and the event loop
never takes it (docs/decisions/0028-compute-in-wings.md)."""

from __future__ import annotations

import threading
from typing import Protocol

from compute.evaluation.computation import Batch, Computation
from compute.storage.series import SeriesInfo


class Catalog(Protocol):
    """The part of a point log routing reads (compute/storage/contract.py's `PointLog`)."""

    def series(self) -> list[SeriesInfo]: ...

    def poll_new_series(self) -> list[SeriesInfo]: ...


class Routes:
    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self._lock = threading.Lock()
        self._catalog_lock = threading.Lock()
        self._computations: dict[str, Computation] = {}
        self._readers: dict[int, set[Computation]] = {}  # series id -> computations reading it
        self._changed = True  # the set of series in use changed since `series_in_use` last said

    def find(self, key: str) -> Computation | None:
        with self._lock:
            return self._computations.get(key)

    def computations(self) -> list[Computation]:
        with self._lock:
            return list(self._computations.values())

    def register(self, computation: Computation) -> Computation:
        """Route a computation to every series it reads; the live one with its key if there is one
        (then nothing changes). Blocking: reads the catalog."""
        with self._catalog_lock:
            self._poll_catalog()
            known = self._catalog.series()
            with self._lock:
                existing = self._computations.get(computation.key)
                if existing is not None:
                    return existing
                for info in known:
                    self._route(computation, info)
                self._computations[computation.key] = computation
        return computation

    def remove(self, computation: Computation) -> None:
        with self._lock:
            if self._computations.get(computation.key) is computation:
                del self._computations[computation.key]
            for sid in list(computation.routes):
                readers = self._readers.get(sid)
                if readers is not None:
                    readers.discard(computation)
                    if not readers:
                        del self._readers[sid]
                        self._changed = True

    def series_in_use(self) -> list[int] | None:
        """After routing series new to the catalog (from any server): the series ids some computation
        reads, or None when that set is the same as at the last call. Blocking: reads the catalog.

        A series reaches the catalog before its points can be read, so after this every series of a
        micro-batch planned earlier is routed."""
        self.catch_up()
        with self._lock:
            if not self._changed:
                return None
            self._changed = False
            return sorted(self._readers)

    def catch_up(self) -> None:
        """Route the series new to the catalog (from any server) now, as the next micro-batch would.
        Blocking: reads the catalog."""
        with self._catalog_lock:
            self._poll_catalog()

    def targets(self, rows: Batch) -> dict[Computation, Batch]:
        """A batch's rows per computation reading them."""
        with self._lock:
            out: dict[Computation, Batch] = {}
            for sid, series_rows in rows.items():
                for computation in self._readers.get(sid, ()):
                    out.setdefault(computation, {})[sid] = series_rows
            return out

    def _poll_catalog(self) -> None:
        """Call with `_catalog_lock` held."""
        new = self._catalog.poll_new_series()  # I/O in the Kafka log: outside `_lock`
        if not new:
            return
        with self._lock:
            for info in new:
                for computation in self._computations.values():
                    self._route(computation, info)

    def _route(self, computation: Computation, info: SeriesInfo) -> None:
        """Call with `_lock` held."""
        if computation.route(info):
            self._readers.setdefault(info.id, set()).add(computation)
            self._changed = True
