"""Subscriptions and fan-out, on the event loop: which subscriber reads which shared computation,
each subscriber's own pace (minDelay) with pending changes coalesced, one encoding per frame."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app import frames
from app.connection import Connection
from app.metrics import Metrics
from compute.computation import Change, Computation
from compute.engine import Engine
from compute.errors import ComputeError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeliveryOptions:
    min_delay_s: float
    allow_appends: bool
    append_only: bool


@dataclass
class _Pending:
    start: int
    end: int
    full: bool
    since: float = 0.0  # monotonic time the oldest change in it was produced (frame latency)

    def merge(self, change: Change) -> None:
        self.start = min(self.start, change.start)
        self.end = max(self.end, change.end)
        self.full = self.full or change.full


@dataclass(eq=False)
class Subscriber:
    connection: Connection
    subscription_id: str
    computation: Computation
    options: DeliveryOptions
    last_sent: float = 0.0
    pending: _Pending | None = None
    timer: asyncio.TimerHandle | None = None
    active: bool = True
    sent: int = field(default=0)


class FrameCache:
    """Within one fan-out, subscribers of a computation that owe the same span share one encoding."""

    def __init__(self) -> None:
        self._frames: dict[tuple[int, int | None, int, bool], bytes] = {}

    def get(self, computation: Computation, pending: _Pending | None, options: DeliveryOptions) -> bytes:
        full = pending is None or pending.full or not (options.allow_appends or options.append_only)
        if full and options.append_only and pending is None:
            full = False  # append-only subscribers get their first window as an append
        start = None if full else (pending.start if pending else None)
        end = pending.end if pending else computation.end
        key = (id(computation), start, end, full)
        frame = self._frames.get(key)
        if frame is None:
            frame = _encode(computation, start, end, full)
            self._frames[key] = frame
        return frame


def _encode(computation: Computation, start: int | None, end: int, full: bool) -> bytes:
    grouped = computation.plan.grouped
    if full:
        return frames.full_update(computation.snapshot(None), grouped)
    if start is None:  # append-only first frame: the whole window
        start = end - computation.plan.window_ns
    return frames.append_update(computation.snapshot(start), grouped, start, end)


class Hub:
    def __init__(
        self, engine: Engine | None, loop: asyncio.AbstractEventLoop, metrics: Metrics | None = None
    ) -> None:
        self._engine = engine
        self.loop = loop
        self.metrics = metrics or Metrics()
        self._subscribers: dict[Computation, set[Subscriber]] = {}
        self._creating: dict[str, asyncio.Task[Computation]] = {}
        self.frames_sent = 0

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("the engine is not running yet")
        return self._engine

    @engine.setter
    def engine(self, engine: Engine) -> None:
        self._engine = engine

    # -- called from the Spark batch thread --------------------------------------------------------
    def on_changes(self, changes: list[tuple[Computation, Change | ComputeError]]) -> None:
        self.loop.call_soon_threadsafe(self._fan_out, changes, time.monotonic())

    # -- on the loop -------------------------------------------------------------------------------
    async def subscribe(
        self,
        connection: Connection,
        subscription_id: str,
        key: str,
        make: Callable[[], Computation],
        options: DeliveryOptions,
    ) -> Subscriber:
        if key in self._creating:
            computation = await self._create(key, make)
        else:
            computation = self.engine.find(key) or await self._create(key, make)
        subscriber = Subscriber(connection, subscription_id, computation, options)
        self._subscribers.setdefault(computation, set()).add(subscriber)
        if computation.error is not None:
            connection.send(
                frames.subscription_update(subscription_id, frames.error_update(computation.error))
            )
        else:
            self._send(subscriber, FrameCache(), None)
        return subscriber

    async def _create(self, key: str, make: Callable[[], Computation]) -> Computation:
        """Back-fill a new computation once, however many subscribers ask for it meanwhile.

        The creation runs as its own task: a subscriber that goes away mid-way cancels only its
        wait, never the creation others wait for.
        """
        task = self._creating.get(key)
        if task is None:
            task = self.loop.create_task(asyncio.to_thread(self.engine.add, make()))
            self._creating[key] = task
            task.add_done_callback(lambda t: self._created(key, t))
        return await asyncio.shield(task)

    def _created(self, key: str, task: asyncio.Task[Computation]) -> None:
        del self._creating[key]
        if not task.cancelled() and task.exception() is None:
            # If every waiter went away before subscribing, nobody would ever release it.
            self.loop.call_later(5.0, self._release_if_unused, task.result())

    def _release_if_unused(self, computation: Computation) -> None:
        if computation not in self._subscribers:
            self.engine.remove(computation)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        subscriber.active = False
        if subscriber.timer is not None:
            subscriber.timer.cancel()
        peers = self._subscribers.get(subscriber.computation)
        if peers is None:
            return
        peers.discard(subscriber)
        if not peers:
            del self._subscribers[subscriber.computation]
            self.engine.remove(subscriber.computation)

    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    def _fan_out(
        self, changes: list[tuple[Computation, Change | ComputeError]], produced_at: float | None = None
    ) -> None:
        cache = FrameCache()
        now = time.monotonic()
        produced_at = now if produced_at is None else produced_at
        for computation, change in changes:
            for subscriber in list(self._subscribers.get(computation, ())):
                if isinstance(change, ComputeError):
                    update = frames.error_update(change)
                    subscriber.connection.send(frames.subscription_update(subscriber.subscription_id, update))
                    continue
                if subscriber.pending is None:
                    subscriber.pending = _Pending(change.start, change.end, change.full, produced_at)
                else:
                    subscriber.pending.merge(change)
                    self.metrics.frames_coalesced.inc()
                due = subscriber.last_sent + subscriber.options.min_delay_s
                if now >= due:
                    self._flush(subscriber, cache)
                elif subscriber.timer is None:
                    subscriber.timer = self.loop.call_at(
                        self.loop.time() + (due - now), self._flush, subscriber, None
                    )

    def _flush(self, subscriber: Subscriber, cache: FrameCache | None) -> None:
        subscriber.timer = None
        if not subscriber.active or subscriber.pending is None:
            return
        pending, subscriber.pending = subscriber.pending, None
        self._send(subscriber, cache or FrameCache(), pending)

    def _send(self, subscriber: Subscriber, cache: FrameCache, pending: _Pending | None) -> None:
        update = cache.get(subscriber.computation, pending, subscriber.options)
        subscriber.connection.send(frames.subscription_update(subscriber.subscription_id, update))
        subscriber.last_sent = time.monotonic()
        subscriber.sent += 1
        self.frames_sent += 1
        self.metrics.frames_sent.inc()
        if pending is not None:
            self.metrics.frame_latency.observe(subscriber.last_sent - pending.since)
