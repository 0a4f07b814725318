"""Replay (docs/extensions.md): a subscription re-watches a past period of its series from the log.

A replay is private to its subscriber: it never goes through the shared streaming computation. Its
start compiles nothing new (the session compiled the plan), makes a `Computation` of its own, checks
that the log still holds the period (`PointLog.held_from`), reads the history of its series
for [start - window - lookback, end] as the back-fill reads it (compute/spark/history.py: the
embedded log by the driver, the Kafka log by a Spark batch job), and loads the part up to `start`
as its back-fill: the first frame is the FullResult of the window ending at `start`.

Then a replay clock advances from `start` to `end`: in steps of 100 ms of replay time (the
stream's micro-batch cadence), each step's points, those with ts up to the clock, are applied with
`now` = the clock, as if they had arrived live at their timestamps; every 100 ms of wall time the
clock moves on by 100 ms times `speed` (or, without a speed, as fast as the steps run, one chunk
at a time off the event loop). Steps with no point are skipped, as the stream has nothing to do
for them. The Changes reach the subscriber through a hub of its own (app/fanout/hub.py: the same pacing
by minDelay, coalescing and frames as live subscriptions), whose only computation is the replay's:
nothing of it is shared, listed among the live computations, or released into the engine.

At `end`, once the last update is delivered: a `replayEnded` message, then with `then: "stop"` the
replay's resources go (the subscription id stays until the client unsubscribes, and gets nothing
more); with `then: "live"` the subscription joins the shared live computation of its request as a
plain subscribe would, and gets its FullResult.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import numpy as np

from app.fanout.hub import Hub, LiveResult, Subscriber
from app.fanout.memory import give_back_freed_memory
from app.fanout.sink import Sink
from app.metrics import Metrics
from app.protocol import frames
from app.protocol.ws_session import StartSubscription, iso_ns, replay_out_of_range
from compute.evaluation.compiler.plan import Plan
from compute.evaluation.computation import Batch, Change, Computation, Rows
from compute.evaluation.errors import ComputeError
from compute.evaluation.request import ComputationRequest
from compute.storage.contract import PointLog

if TYPE_CHECKING:
    from compute.spark.engine import Engine

logger = logging.getLogger(__name__)


STEP_NS = 100_000_000  # replay time per step: the stream's micro-batch cadence
TICK_S = 0.1  # wall time between clock moves at a given speed
CHUNK_STEPS = 10  # steps per hop off the event loop when replaying as fast as possible
DELIVERY_POLL_S = 0.01  # how often the end waits for the last update to leave


class _OwnComputation:
    """The `Computations` of a replay's private hub: its one computation, never shared, never
    created by the hub, and nothing to release when its subscriber leaves."""

    def __init__(self, computation: Computation) -> None:
        self._computation = computation

    @property
    def ready(self) -> bool:
        return True

    def find(self, key: str) -> LiveResult | None:
        return self._computation if key == self._computation.key else None

    async def add(self, request: ComputationRequest, plan: Plan) -> LiveResult:
        raise RuntimeError("a replay's computation is made by the replay")

    def remove(self, result: LiveResult) -> None:
        return None  # private: nothing shared to let go of

    def count(self) -> int:
        return 1


JoinLive = Callable[[], Awaitable[Subscriber]]
Failed = Callable[[Exception], None]


class ReplayRun:
    """One subscription's replay, from its start to its end (and its hand-over to live)."""

    def __init__(
        self,
        engine: Engine | None,
        log: PointLog,
        metrics: Metrics,
        connection: Sink,
        action: StartSubscription,
        join_live: JoinLive,
        on_failed: Failed,
        running: set[ReplayRun],
        max_replays: int,
    ) -> None:
        assert action.replay is not None
        self.engine, self.log, self.metrics = engine, log, metrics  # engine None: no Spark here
        # the server's running replays (it caps them: SPARKWIRE_MAX_REPLAYS), this one among them
        # from its start until its period is over
        self.running, self.max_replays = running, max_replays
        self.connection = connection
        self.action = action
        self.replay = action.replay
        self._join_live = join_live
        self._on_failed = on_failed
        self.subscriber: Subscriber | None = None  # the replay's own, then (then: live) the live one
        self._hub: Hub | None = None
        self._computation: Computation | None = None
        self._start_ns = self.replay.start.to_nanos()
        self._end_ns = self.replay.end.to_nanos()
        self._later: dict[int, Rows] = {}  # per series, after `start`, in timestamp order
        self._cursor: dict[int, int] = {}  # per series: how many of `_later` were applied
        self._task: asyncio.Task[None] | None = None
        self.ended = False  # the period is over (replayEnded sent)

    # -- start ------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Check the period against the log, read it, load the back-fill and attach the subscriber
        (its first frame, the FullResult at `start`, is owed); the clock starts once that frame has
        left. Raises ComputeError when the log cannot serve the period."""
        engine = self.engine
        if engine is None:
            raise ComputeError("ReplayUnavailable", "replay needs --role all: this server runs no Spark")
        running, limit = self.running, self.max_replays
        if len(running) >= limit:  # each holds its period's points in memory and a share of a core
            self.metrics.replays_refused.inc()
            raise ComputeError(
                "TooManyReplays",
                f"the server runs {len(running)} replays, its limit (SPARKWIRE_MAX_REPLAYS); try again later",
                {"limit": str(limit), "setting": "SPARKWIRE_MAX_REPLAYS"},
                status_code=503,
            )
        running.add(self)  # from now: its read counts too
        computation = await asyncio.to_thread(self._prepare, engine)
        loop = asyncio.get_running_loop()
        self._computation = computation
        self._hub = Hub(_OwnComputation(computation), loop, self.metrics)
        action = self.action
        self.subscriber = await self._hub.subscribe(
            self.connection, action.subscription_id, action.request, action.plan, action.delivery
        )
        self._task = loop.create_task(self._play(), name=f"replay-{self.action.subscription_id}")

    def _prepare(self, engine: Engine) -> Computation:
        """Off the loop: the log's reads and the back-fill's evaluation."""
        from compute.spark.history import known_series, read_period  # never loaded by an edge

        plan, log = self.action.plan, self.log
        self._end_ns = min(self._end_ns, time.time_ns())  # an end in the future: now
        from_ts = self._start_ns - plan.window_ns - plan.history_ns
        computation = Computation(self.action.key, plan, self.action.allowed_lateness_ns)
        for info in known_series(engine):
            computation.route(info)
        series_ids = sorted(computation.routes)
        held = log.held_from(series_ids)
        if held is not None and from_ts < held:
            raise replay_out_of_range(
                f"replay.start less the window ({iso_ns(from_ts)}) is older than what the log still "
                f"holds (from {iso_ns(held)} on)",
                self._start_ns,
                self._end_ns,
                held_from=held,
            )
        rows = read_period(engine, series_ids, from_ts, self._end_ns)
        backfill: Batch = {}
        for sid, r in rows.items():
            order = np.argsort(r.ts, kind="stable")  # points arrive at their timestamps
            seq, ts, values = r.seq[order], r.ts[order], r.values[order]
            cut = int(np.searchsorted(ts, self._start_ns, side="right"))
            if cut:
                backfill[sid] = Rows(seq[:cut], ts[:cut], values[:cut])
            if cut < len(ts):
                self._later[sid] = Rows(seq[cut:], ts[cut:], values[cut:])
                self._cursor[sid] = 0
        computation.load_backfill(backfill, self._start_ns)
        return computation

    # -- the clock ---------------------------------------------------------------------------------
    async def _play(self) -> None:
        try:
            # The FullResult at `start` leaves first (docs/extensions.md): a clock that ran ahead of a
            # busy connection would fold the first appends into it, a FullResult of a later window.
            await self._delivered()
            await self._advance()
            await self._delivered()
            then = self.replay.then
            self.connection.send(frames.replay_ended(self.action.subscription_id, then))
            self.ended = True
            self._release_private()
            if then == "live":
                self.subscriber = await self._join_live()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not isinstance(exc, ComputeError):
                logger.exception("replay of %s failed", self.action.subscription_id)
            self._release_private()
            self._on_failed(exc)

    async def _advance(self) -> None:
        loop = asyncio.get_running_loop()
        speed = self.replay.speed
        clock, began = self._start_ns, loop.time()
        while clock < self._end_ns:
            if speed is None:
                limit = min(self._end_ns, clock + CHUNK_STEPS * STEP_NS)
            else:
                await asyncio.sleep(TICK_S)
                played = int((loop.time() - began) * speed * 1e9)
                limit = min(self._end_ns, self._start_ns + played)
            if limit <= clock:
                continue
            changes, clock = await asyncio.to_thread(self._steps, clock, limit)
            assert self._hub is not None and self._computation is not None
            if changes:
                self._hub.fan_out([(self._computation, c) for c in changes])
            if speed is None:
                await asyncio.sleep(0)  # the loop's other work between chunks

    def _steps(self, clock: int, limit: int) -> tuple[list[Change], int]:
        """Off the loop: the steps from `clock` up to `limit`; their Changes and the new clock.
        (What it works on is taken once: a stop meanwhile lets go of it, this chunk finishes alone.)"""
        later, cursor, computation = self._later, self._cursor, self._computation
        assert computation is not None
        changes: list[Change] = []
        while clock < limit:
            clock = _next_clock(later, cursor, clock, limit)
            change = _step(later, cursor, computation, clock)
            if change is not None:
                changes.append(change)
        return changes, clock

    async def _delivered(self) -> None:
        """Until the update owed has left: the FullResult before the clock starts, the last update
        before replayEnded."""
        sub = self.subscriber
        while (
            sub is not None
            and sub.active
            and (sub.pending is not None or sub.error is not None)
            and not self.connection.closed.is_set()
        ):
            await asyncio.sleep(DELIVERY_POLL_S)

    def live_view(self) -> tuple[Computation, Subscriber] | None:
        """Its private computation and subscriber while it plays (the directory lists them)."""
        if self._computation is None or self.subscriber is None or self.ended:
            return None
        return self._computation, self.subscriber

    # -- the end -----------------------------------------------------------------------------------
    def _leave_running(self) -> None:
        """Last, once what it held is let go: the last replay to end gives the memory back."""
        if self in self.running:
            self.running.discard(self)
            if not self.running:
                give_back_freed_memory()

    def _release_private(self) -> None:
        sub = self.subscriber
        if sub is not None and self._hub is not None and sub.hub is self._hub:
            self._hub.unsubscribe(sub)
            self.subscriber = None
        self._hub = self._computation = None
        self._later, self._cursor = {}, {}
        self._leave_running()

    def stop(self) -> None:
        """Unsubscribed or disconnected: the clock stops at once and what it held goes."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        sub, self.subscriber = self.subscriber, None
        if sub is not None:
            sub.hub.unsubscribe(sub)
        self._hub = self._computation = None
        self._later, self._cursor = {}, {}
        self._leave_running()


def _next_clock(later: dict[int, Rows], cursor: dict[int, int], clock: int, limit: int) -> int:
    """The clock after the next step: 100 ms on, or past a stretch with no point at once."""
    upcoming = [int(r.ts[cursor[sid]]) for sid, r in later.items() if cursor[sid] < len(r.ts)]
    if not upcoming:
        return limit  # nothing more to play: the clock just runs to the end
    step_end = clock + STEP_NS
    first = min(upcoming)
    if first > step_end:  # no point in this step: the empty ones are skipped
        step_end = clock + -(-(first - clock) // STEP_NS) * STEP_NS
    return min(step_end, limit)


def _step(
    later: dict[int, Rows], cursor: dict[int, int], computation: Computation, clock: int
) -> Change | None:
    """The points with ts up to the clock not applied yet, applied with `now` = the clock."""
    batch: Batch = {}
    for sid, r in later.items():
        i = cursor[sid]
        j = int(np.searchsorted(r.ts, clock, side="right"))
        if j > i:
            batch[sid] = Rows(r.seq[i:j], r.ts[i:j], r.values[i:j])
            cursor[sid] = j
    if not batch:
        return None
    return computation.apply_batch(batch, clock)
