"""Which compute processes an edge still hears (app/tiers/edge.py), judged so that an edge reading a
backlog does not take it for silence.

Every heartbeat reaches an edge over its one pub/sub connection, in the order Redis received them.
So once an edge has read a heartbeat of process B, it has read every heartbeat sent before it; if
none of A's came while B's own clock (the heartbeat's `at`) went on by more than the timeout, A has
been silent that long, however far behind the edge reads. Each comparison is within one process's
clock, so the machines' clocks need not agree. The edge's reading clock judges only once it has read
everything (`caught_up`): that is how the last process's silence, or the whole tier's, is seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ComputeProcess:
    """A compute process as its heartbeats tell it."""

    heard: float  # the edge's monotonic time when its last heartbeat was read
    ready: bool
    sharded: bool  # it shares the computations with others (its epoch is not the tier's)
    sent: float | None  # its own monotonic clock at that heartbeat (None: it does not say)
    url: str | None = None  # where its HTTP is reached (None: it does not say)
    # per other process, that one's clock at its first heartbeat read after this one's last
    others_since: dict[str, float] = field(default_factory=dict)


class Liveness:
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.processes: dict[str, ComputeProcess] = {}  # epoch -> the compute process heard of

    def heard(
        self, epoch: str, now: float, ready: bool, sharded: bool, sent: float | None, url: str | None = None
    ) -> bool:
        """A heartbeat read at `now`; whether its process was known already."""
        known = epoch in self.processes
        self.processes[epoch] = ComputeProcess(now, ready, sharded, sent, url)
        if sent is not None:
            for other, process in self.processes.items():
                if other != epoch:
                    process.others_since.setdefault(epoch, sent)
        return known

    def silent(self, caught_up: float) -> list[str]:
        """The processes silent for longer than the timeout: by a sibling's clock, or by the edge's
        as of `caught_up` (the last moment it had read everything)."""
        return [epoch for epoch, process in self.processes.items() if self._silent(process, caught_up)]

    def _silent(self, process: ComputeProcess, caught_up: float) -> bool:
        if caught_up - process.heard > self.timeout:
            return True
        for other, since in process.others_since.items():
            sibling = self.processes.get(other)
            if sibling is not None and sibling.sent is not None and sibling.sent - since > self.timeout:
                return True
        return False

    def heard_all(self, now: float) -> None:
        """Time every process's silence from `now`: the heartbeats before it were lost in transit,
        the siblings' as much as its own."""
        for process in self.processes.values():
            process.heard = now
            process.others_since.clear()

    def forget(self, epoch: str) -> ComputeProcess:
        process = self.processes.pop(epoch)
        for other in self.processes.values():
            other.others_since.pop(epoch, None)
        return process

    def clear(self) -> None:
        self.processes.clear()

    def urls(self) -> list[str]:
        """The HTTP URLs of the processes heard of, the ready ones first."""
        heard = sorted(self.processes.values(), key=lambda p: not p.ready)
        return [p.url for p in heard if p.url]

    def any_ready(self) -> bool:
        return any(p.ready for p in self.processes.values())
