"""Subscriptions and fan-out, on the event loop: which subscriber reads which shared computation,
each subscriber's own pace (minDelay) with pending changes coalesced, one encoding per frame.

A subscriber is owed at most one thing at a time: a span of changes (merged with every newer
change until it is sent; a span reaching past the window becomes a FullResult), a fresh window, or
an error (which replaces whatever data was owed). Its connection builds the frame only when the
socket can take it (app/transport/connection.py), so a client that lags gets fewer, fuller frames instead of
a growing queue."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.fanout.memory import MemoryGiveBack, released_bytes
from app.fanout.resume import ChangeHistory, Refused, Resumed, Tokens
from app.fanout.sink import Sink
from app.metrics import Metrics
from app.protocol import frames
from app.protocol.shared_payload import SharedPayload
from app.protocol.ws_session import Delivery
from compute.evaluation.compiler.plan import Plan
from compute.evaluation.computation import Change, GroupKey
from compute.evaluation.errors import ComputeError
from compute.evaluation.request import ComputationRequest
from compute.evaluation.results import Output

logger = logging.getLogger(__name__)


class LiveResult(Protocol):
    """What the hub reads of a shared computation: a `Computation` in this process
    (compute/evaluation/computation.py), or an edge's copy of one on the compute tier
    (app/tiers/mirror.py)."""

    key: str
    plan: Plan
    end: int  # the newest `end` announced
    error: ComputeError | None

    def snapshot(self, since: int | None) -> dict[GroupKey, Output]: ...

    @property
    def late_dropped(self) -> int:
        """Points left out as late since this computation (or mirror) started; never decreases."""
        ...

    def late_newest_since(self, dropped: int) -> int | None:
        """The newest timestamp (ns) among the late points dropped after the first `dropped`."""
        ...


class Computations(Protocol):
    """Where the live computations are: this process's engine (app/tiers/local.py) or the compute
    tier behind Redis (app/tiers/edge.py). The hub shares each one among its subscribers."""

    @property
    def ready(self) -> bool:
        """Whether new subscriptions can be served now."""
        ...

    def find(self, key: str) -> LiveResult | None: ...

    async def add(self, request: ComputationRequest, plan: Plan) -> LiveResult:
        """The live computation of `request`, created (and back-filled) if nobody runs it."""
        ...

    def remove(self, result: LiveResult) -> None: ...

    def count(self) -> int: ...


@dataclass
class _Pending:
    """What a subscriber is owed, coalesced: a span of changes, or a fresh window (`first`)."""

    start: int
    end: int
    full: bool
    since: float = 0.0  # monotonic time the oldest change in it was produced (frame latency)
    first: bool = False

    def merge(self, change: Change, window_ns: int) -> None:
        self.start = min(self.start, change.start)
        self.end = max(self.end, change.end)
        # Appends that together reach back past the window are one FullResult's worth.
        self.full = self.full or change.full or self.start <= self.end - window_ns


@dataclass(eq=False)
class Subscriber:
    hub: Hub
    sink: Sink  # the subscriber's connection
    subscription_id: str
    computation: LiveResult
    options: Delivery
    last_sent: float = 0.0
    pending: _Pending | None = None
    error: ComputeError | None = None  # an error owed replaces any data owed
    timer: asyncio.TimerHandle | None = None
    active: bool = True
    late_since: int = 0  # the computation's late drops when this subscriber came (app/fanout/late_reports.py)
    late_reported: int = 0  # late drops last told
    resume_outcome: Resumed | Refused | None = None  # told with the first frame after subscribing

    def take_frame(self) -> str | None:
        """Called by the connection when the socket can take a frame (app/transport/connection.py)."""
        return self.hub.frame_for(self)


class FrameCache:
    """Subscribers of a computation that owe the same span share one encoding, until the
    computation changes again."""

    def __init__(self) -> None:
        self._frames: dict[LiveResult, dict[tuple[int | None, int, bool], SharedPayload]] = {}
        self.built_bytes = 0  # encoded since the hub last read it (app/fanout/memory.py)

    def invalidate(self, computation: LiveResult) -> None:
        self._frames.pop(computation, None)

    def clear(self) -> None:
        self._frames.clear()

    def get(self, computation: LiveResult, pending: _Pending, options: Delivery) -> SharedPayload:
        full = pending.first or pending.full or not (options.allow_appends or options.append_only)
        if full and options.append_only and pending.first:
            full = False  # append-only subscribers get their first window as an append
        start = None if full or pending.first else pending.start
        end = computation.end if pending.first else pending.end
        key = (start, end, full)
        frames_of = self._frames.setdefault(computation, {})
        frame = frames_of.get(key)
        if frame is None:
            frame = frames_of[key] = SharedPayload(_encode(computation, start, end, full))
            self.built_bytes += len(frame.data)
        return frame


def _encode(computation: LiveResult, start: int | None, end: int, full: bool) -> bytes:
    grouped, arrow = computation.plan.grouped, computation.plan.arrow
    if full:
        return frames.full_update(computation.snapshot(None), grouped, arrow)
    if start is None:  # append-only first frame: the whole window
        start = end - computation.plan.window_ns
    return frames.append_update(computation.snapshot(start), grouped, start, end, arrow)


LARGE_FRAME_BYTES = 1 << 20  # a frame this large counts towards giving memory back once freed

Changes = Sequence[tuple[LiveResult, Change | ComputeError]]


class Hub:
    def __init__(
        self,
        computations: Computations | None,
        loop: asyncio.AbstractEventLoop,
        metrics: Metrics | None = None,
        resume_linger_s: float = 60.0,
        max_lingering_per_connection: int = 128,
        max_lingering: int = 1024,
    ) -> None:
        self._computations = computations
        self.loop = loop
        self.metrics = metrics or Metrics()
        self.resume_linger_s = resume_linger_s
        # A lingering computation counts against the connection whose subscriber left it last, and
        # against the server: past either cap, the oldest lingering one goes at once (a client that
        # subscribes and leaves in a loop cannot keep more live than its caps).
        self.max_lingering_per_connection = max_lingering_per_connection
        self.max_lingering = max_lingering
        self._subscribers: dict[LiveResult, set[Subscriber]] = {}
        # Resume tokens (app/fanout/resume.py): each computation's recent changes, while it is live; one
        # whose subscribers asked for tokens outlives them by `resume_linger_s`, for their return.
        self._tokens = Tokens()
        self._histories: dict[str, ChangeHistory] = {}
        self._resumable: set[str] = set()
        self._lingering: dict[LiveResult, asyncio.TimerHandle] = {}  # oldest first
        self._left_by: dict[LiveResult, int] = {}  # a lingering computation: the connection's id
        self._creating: dict[str, asyncio.Task[LiveResult]] = {}
        self._cache = FrameCache()
        self.memory = MemoryGiveBack(loop)  # what large computations and frames let go, given back

    @property
    def computations(self) -> Computations:
        if self._computations is None:
            raise RuntimeError("the engine is not running yet")
        return self._computations

    @computations.setter
    def computations(self, computations: Computations) -> None:
        self._computations = computations

    # -- called from other threads (Spark's batch thread, the supervisor) ----------------------------
    def on_changes(self, changes: Changes) -> None:
        self.loop.call_soon_threadsafe(self.fan_out, changes, time.monotonic())

    def on_stream_failed(self, error: ComputeError) -> None:
        """The streaming query died: every subscriber is told (compute/spark/supervisor.py restarts it)."""
        self.loop.call_soon_threadsafe(self.owe_everyone, error)

    def on_stream_recovered(self) -> None:
        """The query runs again and every computation was rebuilt from the log: fresh windows."""
        self.loop.call_soon_threadsafe(self.owe_everyone, None)

    # -- on the loop -------------------------------------------------------------------------------
    async def subscribe(
        self,
        sink: Sink,
        subscription_id: str,
        request: ComputationRequest,
        plan: Plan,
        options: Delivery,
        resume_token: str | None = None,
    ) -> Subscriber:
        key = request.key
        if key in self._creating:
            computation = await self._create(request, plan)
        else:
            computation = self.computations.find(key) or await self._create(request, plan)
        lingering = self._lingering.pop(computation, None)
        self._left_by.pop(computation, None)
        if lingering is not None:
            lingering.cancel()
        known = self._histories.get(key)  # None: new to this hub, so no token can speak of it
        if known is None:
            self._histories[key] = ChangeHistory(key)
        if options.resume:
            self._resumable.add(key)
        subscriber = Subscriber(self, sink, subscription_id, computation, options)
        subscriber.late_since = computation.late_dropped
        self._subscribers.setdefault(computation, set()).add(subscriber)
        if resume_token is None:
            self._owe_fresh(subscriber)
            return subscriber
        outcome = self._resumption(resume_token, computation, known, options)
        subscriber.resume_outcome = outcome
        self.metrics.resumes.labels("resumed" if isinstance(outcome, Resumed) else outcome.reason).inc()
        if isinstance(outcome, Refused):
            self._owe_fresh(subscriber)
        else:  # the changes since the token, as one span (nothing changed: an empty one, up to now)
            start = computation.end if outcome.start is None else outcome.start
            subscriber.pending = _Pending(start, computation.end, full=False, since=time.monotonic())
            subscriber.sink.offer(subscriber)
        return subscriber

    def _resumption(
        self, token: str, computation: LiveResult, known: ChangeHistory | None, options: Delivery
    ) -> Resumed | Refused:
        version = self._tokens.read(token, self._histories[computation.key].digest)
        if isinstance(version, Refused):
            return version
        if known is None:
            return Refused("computationGone")
        if computation.error is not None:
            return Refused("computationFailed")
        if not (options.allow_appends or options.append_only):
            return Refused("appendsNotAllowed")  # every frame of this subscription is a FullResult
        outcome = known.since(version)
        start = outcome.start if isinstance(outcome, Resumed) else None
        if start is not None and start <= computation.end - computation.plan.window_ns:
            return Refused("gapLongerThanWindow")  # the changes reach past the window
        return outcome

    async def _create(self, request: ComputationRequest, plan: Plan) -> LiveResult:
        """Back-fill a new computation once, however many subscribers ask for it meanwhile.

        The creation runs as its own task: a subscriber that goes away mid-way cancels only its
        wait, never the creation others wait for.
        """
        key = request.key
        task = self._creating.get(key)
        if task is None:
            task = self.loop.create_task(self.computations.add(request, plan))
            self._creating[key] = task
            task.add_done_callback(lambda t: self._created(key, t))
        return await asyncio.shield(task)

    def _created(self, key: str, task: asyncio.Task[LiveResult]) -> None:
        del self._creating[key]
        if not task.cancelled() and task.exception() is None:
            # If every waiter went away before subscribing, nobody would ever release it.
            self.loop.call_later(5.0, self._release_if_abandoned, task.result())

    def linger_left_s(self, computation: LiveResult) -> float | None:
        """Seconds until a computation kept for a resume is released (None: it is not kept)."""
        timer = self._lingering.get(computation)
        return None if timer is None else max(0.0, timer.when() - self.loop.time())

    def _release_if_abandoned(self, computation: LiveResult) -> None:
        """The check after a creation: one that lingers for a resume is its timer's to release (at
        the full linger, however soon after its creation its last subscriber left)."""
        if computation not in self._lingering and computation not in self._subscribers:
            self._release(computation)

    def _release_if_unused(self, computation: LiveResult) -> None:
        self._lingering.pop(computation, None)
        self._left_by.pop(computation, None)
        if computation not in self._subscribers:
            self._release(computation)

    def _release(self, computation: LiveResult) -> None:
        self._histories.pop(computation.key, None)
        self._resumable.discard(computation.key)
        self.computations.remove(computation)
        self.memory.released(released_bytes(computation))

    def unsubscribe(self, subscriber: Subscriber) -> None:
        subscriber.active = False
        subscriber.pending = subscriber.error = None
        subscriber.sink.withdraw(subscriber)
        if subscriber.timer is not None:
            subscriber.timer.cancel()
        peers = self._subscribers.get(subscriber.computation)
        if peers is None:
            return
        peers.discard(subscriber)
        if not peers:
            computation = subscriber.computation
            del self._subscribers[computation]
            self._cache.invalidate(computation)
            if computation.key in self._resumable and self.resume_linger_s > 0:
                self._lingering[computation] = self.loop.call_later(
                    self.resume_linger_s, self._release_if_unused, computation
                )
                self._left_by[computation] = subscriber.sink.id
                self._cap_lingering(subscriber.sink.id)
            else:
                self._release(computation)

    def _cap_lingering(self, connection_id: int) -> None:
        """The caps on lingering computations, after one more started lingering for this connection."""
        mine = [c for c, left_by in self._left_by.items() if left_by == connection_id]
        while len(mine) > self.max_lingering_per_connection:
            self._end_linger(mine.pop(0), "connection")
        while len(self._lingering) > self.max_lingering:
            self._end_linger(next(iter(self._lingering)), "server")

    def _end_linger(self, computation: LiveResult, cap: str) -> None:
        timer = self._lingering.pop(computation)
        timer.cancel()
        self._left_by.pop(computation, None)
        self.metrics.lingering_released_early.labels(cap).inc()
        self._release(computation)

    def lingering_count(self) -> int:
        """Computations kept live, with no subscriber, for a resume (docs/extensions.md)."""
        return len(self._lingering)

    def live(self) -> dict[LiveResult, set[Subscriber]]:
        """Each live computation with its subscribers (read-only: for reports and the directory)."""
        return self._subscribers

    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    def fan_out(self, changes: Changes, produced_at: float | None = None) -> None:
        """On the loop: each subscriber of a changed computation is owed the change (or its error)."""
        now = time.monotonic()
        produced_at = now if produced_at is None else produced_at
        for computation, change in changes:
            self._cache.invalidate(computation)
            history = self._histories.get(computation.key)
            if history is not None and isinstance(change, Change):
                history.record(change.start)
            window_ns = computation.plan.window_ns
            for subscriber in self._subscribers.get(computation, ()):
                if isinstance(change, ComputeError):
                    subscriber.pending, subscriber.error = None, change
                    subscriber.sink.offer(subscriber)
                    continue
                if subscriber.pending is None:
                    subscriber.pending = _Pending(change.start, change.end, change.full, produced_at)
                else:
                    subscriber.pending.merge(change, window_ns)
                    self.metrics.frames_coalesced.inc()
                due = subscriber.last_sent + subscriber.options.min_delay_s
                if now >= due:
                    subscriber.sink.offer(subscriber)
                elif subscriber.timer is None:
                    at = self.loop.time() + (due - now)
                    subscriber.timer = self.loop.call_at(at, self._due, subscriber)

    def owe_everyone(self, error: ComputeError | None) -> None:
        """On the loop: every subscriber is owed `error`, or (None) a fresh window."""
        self._cache.clear()
        if error is None:  # every computation was rebuilt: views from before are unknown to it
            for history in self._histories.values():
                history.rebuilt()
        for subscribers in self._subscribers.values():
            for subscriber in subscribers:
                if error is not None:
                    subscriber.pending, subscriber.error = None, error
                    subscriber.sink.offer(subscriber)
                else:
                    self._owe_fresh(subscriber)

    def refresh(self, computation: LiveResult) -> None:
        """On the loop: the subscribers of one computation are owed a fresh window (or its error)."""
        self._cache.invalidate(computation)
        history = self._histories.get(computation.key)
        if history is not None:
            history.rebuilt()
        for subscriber in self._subscribers.get(computation, ()):
            self._owe_fresh(subscriber)

    def _owe_fresh(self, subscriber: Subscriber) -> None:
        """A whole window (or the computation's own error), replacing whatever was owed."""
        computation = subscriber.computation
        if computation.error is not None:
            subscriber.pending, subscriber.error = None, computation.error
        else:
            subscriber.pending = _Pending(computation.end, computation.end, full=True, first=True)
            subscriber.error = None
        subscriber.sink.offer(subscriber)

    def _due(self, subscriber: Subscriber) -> None:
        subscriber.timer = None
        if subscriber.active and (subscriber.pending is not None or subscriber.error is not None):
            subscriber.sink.offer(subscriber)

    def frame_for(self, subscriber: Subscriber) -> str | None:
        """The frame a subscriber is owed, built now: whatever changed since it was offered is in it."""
        if not subscriber.active:
            return None
        if subscriber.error is not None:
            error, subscriber.error = subscriber.error, None
            return frames.subscription_update(subscriber.subscription_id, frames.error_update(error))
        pending, subscriber.pending = subscriber.pending, None
        if pending is None:
            return None
        update = self._cache.get(subscriber.computation, pending, subscriber.options)
        if self._cache.built_bytes >= LARGE_FRAME_BYTES:  # freed once sent and replaced
            self.memory.released(self._cache.built_bytes)
        self._cache.built_bytes = 0
        subscriber.last_sent = time.monotonic()
        self.metrics.frames_sent.inc()
        if not pending.first:
            self.metrics.frame_latency.observe(subscriber.last_sent - pending.since)
        extra = self._resume_fields(subscriber) if subscriber.options.resume else b""
        return frames.subscription_update(subscriber.subscription_id, update, extra)

    def _resume_fields(self, subscriber: Subscriber) -> bytes:
        """The envelope's extension fields: the token of the view this frame completes, and (first
        frame after subscribing with a token) whether it resumed or why not."""
        history = self._histories.get(subscriber.computation.key)
        fields: dict[str, object] = {}
        if history is not None:
            fields["resumeToken"] = self._tokens.issue(history)
        outcome, subscriber.resume_outcome = subscriber.resume_outcome, None
        if isinstance(outcome, Resumed):
            fields["resume"] = {"outcome": "resumed"}
        elif isinstance(outcome, Refused):
            fields["resume"] = {"outcome": "snapshot", "reason": outcome.reason}
        return frames.extension_fields(fields)
