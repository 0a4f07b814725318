"""An edge's copy of one computation on the compute tier: the outputs as of the last message, kept
identical to the original by applying each published difference (compute/evaluation/deltas.py).
The hub reads it like a local computation (app/fanout/hub.py's `LiveResult`), so a new subscriber's
FullResult comes from here, with no round trip to Spark."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from app.tiers import wire
from compute.evaluation import deltas
from compute.evaluation.compiler.plan import Plan
from compute.evaluation.computation import Change, GroupKey, LateDrops
from compute.evaluation.errors import ComputeError
from compute.evaluation.request import ComputationRequest
from compute.evaluation.results import Output


@dataclass(frozen=True)
class Fresh:
    """The mirror was replaced by a snapshot: its subscribers are owed a whole window."""


@dataclass(frozen=True)
class Gap:
    """A message was missed: the mirror waits for a snapshot."""


Applied = Change | ComputeError | Fresh | Gap | None


class ResultMirror:
    def __init__(self, request: ComputationRequest, plan: Plan) -> None:
        self.request = request
        self.key = request.key
        self.plan = plan
        self.channel = ""  # set by the edge (app/tiers/wire.py's Names.results)
        self.end = 0
        self.error: ComputeError | None = None
        self.outputs: dict[GroupKey, Output] = {}
        self.epoch: str | None = None
        self.version = -1
        self.synced = False  # holds the compute tier's outputs as of (epoch, version)
        # Subscribers were told of a failure since their last whole window: the next snapshot is
        # owed to them even if it holds what they had.
        self.failure_told = False
        self.first = asyncio.Event()  # set by the first snapshot (or a failure)
        self.snapshot_asked = 0.0  # monotonic time of the last request for a snapshot
        # Late drops since this mirror started, from the compute tier's running counts ("late":
        # [count, newest ts of the drops since its previous message]), kept growing across epochs.
        self.late = LateDrops()
        self._late_epoch: str | None = None
        self._late_seen = 0  # the compute tier's count in `_late_epoch` as last heard
        self.updated_at: int | None = None  # unix ns of the last snapshot or change applied

    @property
    def late_dropped(self) -> int:
        return self.late.count

    def late_newest_since(self, dropped: int) -> int | None:
        return self.late.newest_since(dropped)

    def points_held(self) -> tuple[int | None, int]:
        """(None: an edge holds no input windows, the points/buckets/ranges of the outputs)."""
        return None, sum(len(out) for out in self.outputs.values())

    def _late(self, message: dict[str, Any]) -> None:
        late = message.get("late")
        if late is None:
            return
        count, newest = int(late[0]), late[1]
        if message["e"] != self._late_epoch:
            # The first count heard is what was dropped before this mirror started; a new epoch's
            # computation started after it (a restarted compute tier), so its drops are all new.
            first, self._late_epoch, self._late_seen = self._late_epoch is None, message["e"], 0
            if first:
                self._late_seen = count
                return
        if count > self._late_seen:
            self.late.add(count - self._late_seen, None if newest is None else int(newest))
            self._late_seen = count

    def snapshot(self, since: int | None) -> dict[GroupKey, Output]:
        if since is None:
            return dict(self.outputs)
        return {k: v.since(since) for k, v in self.outputs.items()}

    def apply(self, message: dict[str, Any]) -> Applied:
        kind = message["t"]
        if kind in (wire.SNAPSHOT, wire.CHANGE, wire.LATE):  # running counts: even across a gap
            self._late(message)
        if kind == wire.SNAPSHOT:
            if self.synced and (message["e"], message["v"]) == (self.epoch, self.version):
                return None  # another edge asked for it; this one has it already
            unchanged = self.first.is_set() and self.error is None and not self.failure_told
            if unchanged:  # a re-sync (a link lost and back, a query restart) with nothing new
                held = {"o": deltas.whole(self.outputs)}
                unchanged = deltas.encode(held) == deltas.encode({"o": message["o"]})
            self.outputs = deltas.apply({}, message["o"])
            self.epoch, self.version, self.synced = message["e"], message["v"], True
            self.end = max(self.end, message["end"])
            self.error = None
            self.updated_at = time.time_ns()
            self.first.set()
            if unchanged:
                return None  # subscribers hold this window already: no second FullResult
            self.failure_told = False
            return Fresh()
        if kind == wire.CHANGE:
            if not self.synced or message["e"] != self.epoch or message["v"] != self.version + 1:
                if self.synced or self.epoch != message["e"]:
                    self.synced = False
                    return Gap()
                return None  # still waiting for a snapshot
            self.outputs = deltas.apply(self.outputs, message["d"])
            self.updated_at = time.time_ns()
            self.version = message["v"]
            self.end = max(self.end, message["end"])
            return Change(message["s"], self.end, message["f"])
        if kind == wire.ERROR:
            name, text, params, status = message["err"]
            error = ComputeError(name, text, dict(params), status)
            self.failure_told = True
            if message.get("sticky"):
                self.error = error
                self.first.set()
            return error
        return None

    def lost(self) -> None:
        """The compute tier went out of reach and subscribers were told: re-sync, then owe them a
        whole window whatever the next snapshot holds."""
        self.synced = False
        self.failure_told = True
