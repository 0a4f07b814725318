"""`lateReport` messages (docs/extensions.md, "Late points, counted and told"): a subscription that
asked (`sparkwire.lateReports`) is told how many points its computation left out as later than
the allowed lateness since the subscription started, and the newest such timestamp, at most once
a second and only when the count changed since its last report.

One task for the whole server, as app/transport/liveness.py is for connections: every `TICK_SECONDS` it
reads each live computation's running count of late drops (a `LiveResult`: a `Computation` here,
or an edge's mirror of one, which the compute tier keeps informed), and only when that count
moved does it look at the computation's subscribers. A subscription counts from the computation's
count when it subscribed (`Subscriber.late_since`, taken by the hub).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from app.periodic import Periodic
from app.protocol import frames

if TYPE_CHECKING:
    from app.fanout.hub import Hub, LiveResult, Subscriber

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.25
MIN_INTERVAL_SECONDS = 1.0  # at most one report a second per subscription


@dataclass
class _Watch:
    """A computation as the last tick saw it."""

    dropped: int  # its late drops at the last tick that looked at its subscribers
    tick: int  # the last tick it was live at
    owed: bool = False  # a subscriber's report waits for its second to pass


@dataclass
class _Told:
    """A subscription's late reports: its starting count and when it was last told."""

    since: int  # the computation's count when the subscription started
    at: float = float("-inf")  # monotonic time of its last report


class LateReports:
    def __init__(self, hub: Hub, period: float = TICK_SECONDS) -> None:
        self.hub = hub
        self.period = period
        self._watches: WeakKeyDictionary[LiveResult, _Watch] = WeakKeyDictionary()
        self._told: WeakKeyDictionary[Subscriber, _Told] = WeakKeyDictionary()
        self._tick = 0
        self._periodic = Periodic("late-reports", period, lambda: self.tick(time.monotonic()))
        self.sent = 0  # reports sent since start-up

    def start(self) -> None:
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    def tick(self, now: float) -> None:
        self._tick += 1
        for computation, subscribers in list(self.hub.live().items()):
            try:
                self._look(computation, subscribers, now)
            except Exception:  # one computation's trouble must not stop the others' reports
                logger.exception("late reports: a computation could not be looked at")

    def _look(self, computation: LiveResult, subscribers: set[Subscriber], now: float) -> None:
        dropped = computation.late_dropped
        watch = self._watches.get(computation)
        if watch is None:  # new: every drop it made so far was made for its subscribers
            watch = self._watches[computation] = _Watch(0, self._tick)
        elif watch.tick != self._tick - 1:  # live again after a while without subscribers: look
            watch.owed = True
        watch.tick = self._tick
        if dropped == watch.dropped and not watch.owed:
            return
        watch.owed = False
        for subscriber in list(subscribers):
            if subscriber.options.late_reports and subscriber.active:
                watch.owed |= self._report(subscriber, computation, dropped, now)
        watch.dropped = dropped

    def _report(self, subscriber: Subscriber, computation: LiveResult, dropped: int, now: float) -> bool:
        """Tell one subscriber if its count changed; True if that must wait for its second to pass."""
        told = self._told.get(subscriber)
        if told is None:
            told = self._told[subscriber] = _Told(subscriber.late_since)
        count = dropped - told.since
        if count == subscriber.late_reported:
            return False
        if now - told.at < MIN_INTERVAL_SECONDS:
            return True
        newest = computation.late_newest_since(told.since)
        subscriber.sink.send(frames.late_report(subscriber.subscription_id, count, newest))
        subscriber.late_reported, told.at = count, now
        self.sent += 1
        return False
