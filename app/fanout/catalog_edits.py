"""Edits of a catalog (assets and runs; any kind of catalog a plan resolves through) reach the live
subscriptions over them: every open connection's session compiles again the subscriptions that
resolved through an edited rid (app/protocol/ws_session.py `catalog_affected`, `re_resolve`).

Where a notice comes from: a catalog kept by this process alone (SQLite files in its data dir) is
told by the HTTP route that stored the change (`changed`); a shared one (in Redis) writes
a notice with each change, which every process sharing it, the one that stored it included, reads
from Redis and hands to `deliver` (app/tiers/catalog_feed.py): each edit reaches each process once.

Re-resolving costs a compilation per affected subscription (~0.5 ms), so it runs as one task that
yields to the event loop every `SLICE_SECONDS`: a thousand affected subscriptions delay frames and
requests by one slice at a time, never by the whole batch
(docs/decisions/0056-catalog-edits-re-resolve.md, docs/decisions/0066-catalog-edits-across-processes.md)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Protocol

from compute.evaluation.compiler.datasets import CatalogUnreachable

logger = logging.getLogger(__name__)

SLICE_SECONDS = 0.02  # longest run of re-resolutions before the loop serves others
RETRY_SECONDS = 1.0  # a catalog out of reach mid-way: every subscription is checked again after this


class CatalogListener(Protocol):
    def catalog_affected(self, kind: str | None, rids: Collection[str]) -> list[str]:
        """The subscriptions an edit of these rids of this kind can move (kind None: all that read
        a catalog)."""
        ...

    def re_resolve(self, sub_id: str) -> None:
        """Compile one again; raises `CatalogUnreachable` only (its own trouble it reports itself)."""
        ...


@dataclass
class EditStats:
    """What re-resolution has cost in this process (bench/experiments/catalog_re_resolve.py and the
    tests read it)."""

    notices: int = 0
    re_resolved: int = 0
    longest_slice_s: float = 0.0  # wall time (a busy machine's pauses of the process included)
    longest_slice_cpu_s: float = 0.0  # this thread's CPU in that time
    busy_s: float = 0.0


@dataclass
class CatalogEdits:
    _listeners: set[CatalogListener] = field(default_factory=set)
    _pending: deque[tuple[str | None, tuple[str, ...]]] = field(default_factory=deque)
    _worker: asyncio.Task[None] | None = None
    _retry: asyncio.TimerHandle | None = None
    stats: EditStats = field(default_factory=EditStats)

    def add(self, listener: CatalogListener) -> None:
        self._listeners.add(listener)

    def discard(self, listener: CatalogListener) -> None:
        self._listeners.discard(listener)

    def changed(self, kind: str, rid: str, announced: bool = False) -> None:
        """On the loop, once the change is stored. `announced`: the store wrote a notice with it for
        every process sharing it (the feed delivers it here too), so nothing is done now."""
        if not announced:
            self.deliver(kind, (rid,))

    def deliver(self, kind: str | None, rids: Collection[str]) -> None:
        """On the loop: re-resolve what an edit of `rids` of `kind` can move, in order after the
        edits before it; kind None: every subscription that read a catalog (notices were missed)."""
        self.stats.notices += 1
        self._pending.append((kind, tuple(rids)))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work(), name="catalog-edits")

    async def idle(self) -> None:
        """Until every notice delivered so far is applied."""
        while self._worker is not None and not self._worker.done():
            await asyncio.shield(self._worker)

    async def _work(self) -> None:
        started, cpu = time.perf_counter(), time.thread_time()
        while self._pending:
            kind, rids = self._pending.popleft()
            for listener in list(self._listeners):
                if listener not in self._listeners:  # closed meanwhile
                    continue
                try:
                    affected = listener.catalog_affected(kind, rids)
                except Exception:
                    logger.exception("a connection could not list its subscriptions after a catalog edit")
                    continue
                for sub_id in affected:
                    if not self._re_resolve(listener, sub_id):
                        break
                    now = time.perf_counter()
                    if now - started >= SLICE_SECONDS:
                        self._slice_ended(now - started, time.thread_time() - cpu)
                        await asyncio.sleep(0)
                        started, cpu = time.perf_counter(), time.thread_time()
        self._slice_ended(time.perf_counter() - started, time.thread_time() - cpu)

    def _re_resolve(self, listener: CatalogListener, sub_id: str) -> bool:
        """False: the catalog is out of reach; everything is checked again once it may be back."""
        try:
            listener.re_resolve(sub_id)
        except CatalogUnreachable as exc:
            logger.warning("catalog edits: %s; re-checking every subscription in %.0fs", exc, RETRY_SECONDS)
            self._check_all_later()
            return False
        except Exception:  # one connection's failure must not keep the edit from the others
            logger.exception("a connection could not re-resolve subscription %s after a catalog edit", sub_id)
        self.stats.re_resolved += 1
        return True

    def _check_all_later(self) -> None:
        if self._retry is None:
            loop = asyncio.get_running_loop()
            self._retry = loop.call_later(RETRY_SECONDS, self._check_all)

    def _check_all(self) -> None:
        self._retry = None
        self.deliver(None, ())

    def _slice_ended(self, took: float, cpu: float) -> None:
        self.stats.busy_s += took
        self.stats.longest_slice_s = max(self.stats.longest_slice_s, took)
        self.stats.longest_slice_cpu_s = max(self.stats.longest_slice_cpu_s, cpu)
