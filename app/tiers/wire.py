"""How the compute tier and the edges talk through Redis: the names, the messages, the timings.

Which Redis mechanism for which message (docs/decisions/0030-compute-tier-and-edges.md):
- what an edge needs (its *wants*: computation key -> request) is state, not a message: a hash
  per edge, kept alive by a lease key the edge refreshes. The compute tier reads the union of the
  live edges' wants, so a compute tier that restarts finds everything it must run, and an edge
  that dies lets go of its computations when its lease expires, with nothing to replay;
- results go by pub/sub, one channel per computation: each change is published once and Redis
  copies it to the edges that subscribed; nothing is stored. Every message carries the compute
  tier's epoch and a version, so an edge that missed one (a reconnect, an overflowing buffer)
  notices the gap and asks for a snapshot instead of serving a wrong view;
- nudges (an edge's wants changed, an edge asks for snapshots) and the compute tier's heartbeat
  are pub/sub too: losing one only delays what the periodic reconcile and the edge's retry do anyway.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

HEARTBEAT_SECONDS = 0.5  # how often the compute tier says it is alive (and whether it is ready)
COMPUTE_TIMEOUT_SECONDS = 3.0  # no heartbeat for this long: the compute tier is down
LEASE_SECONDS = 5.0  # an edge not heard of for this long is gone; its wants are dropped
RECONCILE_SECONDS = 1.0  # the compute tier re-reads every edge's wants at least this often
SNAPSHOT_RETRY_SECONDS = 2.0  # an edge asks again for a snapshot it has not received

# message kinds
SNAPSHOT = "snap"  # a computation's whole outputs at (epoch, version)
CHANGE = "chg"  # the difference to (epoch, version - 1), and the change's span for the hub
ERROR = "err"  # the computation failed (sticky) or the stream is down (not sticky)
LATE = "late"  # late drops grew with no change to publish (snapshots and changes carry them too)
HEARTBEAT = "hb"
WANTS_CHANGED = "wants"  # edge -> compute: re-read my wants now
SYNC = "sync"  # edge -> compute: send me snapshots of these keys (or of all my wants)


@dataclass(frozen=True)
class Names:
    prefix: str

    @property
    def edges(self) -> str:
        """Set of the edges' ids that have wants."""
        return f"{self.prefix}:tier:edges"

    def wants(self, edge: str) -> str:
        """Hash of an edge's wants: computation key -> the request as JSON."""
        return f"{self.prefix}:tier:edge:{edge}:wants"

    def lease(self, edge: str) -> str:
        """Key that exists while the edge is alive (refreshed with a TTL)."""
        return f"{self.prefix}:tier:edge:{edge}:lease"

    @property
    def control(self) -> str:
        """Channel edges -> compute tier."""
        return f"{self.prefix}:tier:control"

    @property
    def heartbeat(self) -> str:
        """Channel compute tier -> edges."""
        return f"{self.prefix}:tier:compute"

    def results(self, key: str) -> str:
        """Channel of one computation's results."""
        return f"{self.prefix}:tier:result:{digest(key)}"


def process_of(epoch: str) -> str:
    """The compute process of a computation's epoch: `PROCESS.TOKEN` when the processes share the
    computations (app/tiers/shards.py), the process's epoch alone otherwise."""
    return epoch.split(".", 1)[0]


def digest(key: str) -> str:
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
