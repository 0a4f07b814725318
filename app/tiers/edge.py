"""`--role edge`: the hub's computations live on the compute tier; this process holds a mirror of
each one its clients subscribe to (app/tiers/mirror.py) and does the per-subscriber work itself
(pacing, coalescing, encoding, deflate: app/fanout/hub.py). No JVM, no PySpark.

On the event loop, with redis.asyncio:
- `add` writes the request into this edge's wants (app/tiers/wire.py), subscribes to the
  computation's result channel, nudges the compute tier and waits for the first snapshot;
- one task reads every subscribed channel and the compute tier's heartbeat, applies each message
  to its mirror and hands the hub what changed;
- a thread of its own keeps this edge's lease alive (`_LeaseKeeper`), so a loop busy for seconds
  (2,000 first FullResults at once) does not lose it; one the compute tier dropped anyway is
  registered again, and every mirror re-synced;
- the link task watches the compute tier: no heartbeat for
  `COMPUTE_TIMEOUT_SECONDS` (or Redis unreachable) tells every subscriber `JobInvalidState`; once
  it is back, the wants are written again and every mirror is re-synced by a snapshot, so each
  subscriber gets a fresh FullResult without reconnecting;
- a subscription Redis closed (this edge read too slowly for its output buffer) and redis-py opened
  again re-syncs every mirror too; snapshots are asked at most SNAPSHOTS_IN_FLIGHT at a time, so a
  re-sync of thousands does not overflow that buffer again (docs/decisions/0092).

Several compute processes may share the computations (`compute-slots`, app/tiers/shards.py): the
compute tier is alive while any of them is. One whose heartbeat stops takes only its own
computations' subscribers with it: they are told `JobInvalidState`, and the process that takes
over the computation publishes a snapshot at a new epoch, which gives them a fresh FullResult.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from app.tiers import wire
from app.tiers.liveness import Liveness
from app.tiers.mirror import Fresh, Gap, ResultMirror
from compute.evaluation import deltas
from compute.evaluation.compiler.plan import Plan
from compute.evaluation.computation import Change
from compute.evaluation.errors import ComputeError
from compute.evaluation.request import ComputationRequest

if TYPE_CHECKING:
    from app.fanout.hub import Hub, LiveResult

logger = logging.getLogger(__name__)

FIRST_SNAPSHOT_TIMEOUT = 120.0  # a new computation's back-fill on the compute tier, at most
MAX_BACKOFF = 5.0
GAP_ASK_SECONDS = 0.5  # a mirror that saw a gap asks for a snapshot at most this often
REDIS_CONNECTIONS = 64  # commands beyond these wait for one to come free
# Snapshots asked and not yet received, at most: 2,000 asked at once after a lost link came as
# 120 MB, past Redis's buffer for this edge (512 MB with what was still unread), and were lost with
# the next closed subscription, again and again (docs/decisions/0092).
SNAPSHOTS_IN_FLIGHT = 100
# How often the link task judges silences and stale mirrors: once per message, the scan of 2,000
# mirrors took 4% of a busy edge's CPU.
JUDGE_SECONDS = 0.1
# The lease is kept while the link task has run this recently: a loop stuck for longer is not
# serving, and its computations are let go (a busy one, seconds behind, keeps them).
LOOP_STALL_SECONDS = 30.0


# Why every mirror was re-synced at once (the `cause` label of `sparkwire_edge_resyncs`).
RESYNC_CAUSES = ("subscription_closed", "compute_lost", "compute_restarted", "edge_dropped")


def compute_unreachable(why: str) -> ComputeError:
    return ComputeError(
        "JobInvalidState", f"the compute tier is unreachable ({why}); waiting for it", status_code=503
    )


class RemoteComputations:
    def __init__(
        self, redis_url: str, prefix: str, hub: Hub | None = None, edge_id: str | None = None
    ) -> None:
        """`hub`: the one this edge's changes are fanned out through (it reads its computations here)."""
        self.names = wire.Names(prefix)
        self.edge_id = edge_id or uuid.uuid4().hex[:12]
        self._lease = _LeaseKeeper(redis_url, self.names, self.edge_id, self._dropped)
        # A pool that waits for a free connection: redis-py's default one fails the 101st command at
        # once ("Too many connections"), and under a wave of subscriptions that failure reached the
        # link task, which took it for an outage and re-synced every mirror (docs/decisions/0092).
        pool = aioredis.BlockingConnectionPool.from_url(
            redis_url,
            max_connections=REDIS_CONNECTIONS,
            timeout=20,
            socket_timeout=5,
            socket_connect_timeout=5,
            # RESP2: redis-py's RESP3 parser formats every pub/sub message into a debug log line
            # before dropping it, 7% of a busy edge's CPU (docs/decisions/0092).
            protocol=2,
            # A pooled connection that died with a Redis restart is opened again once, not failed to
            # the caller (the first new subscription after a restart met it: JobInvalidState).
            # Every command here may run twice: wants and leases are overwritten, notices repeated.
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1),
            retry_on_error=[redis.ConnectionError],
        )
        self.redis = aioredis.Redis.from_pool(pool)
        self.hub = hub
        self._mirrors: dict[str, ResultMirror] = {}  # key -> mirror
        self._by_channel: dict[bytes, ResultMirror] = {}
        self._pubsub: Any = None
        self._connected = False
        self._compute_epoch: str | None = None
        self._computes = Liveness(wire.COMPUTE_TIMEOUT_SECONDS)  # the compute processes heard of
        self._compute_ready = False
        self._last_heartbeat = 0.0
        self._compute_alive = False
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        # Every mirror re-synced at once, by cause, since start-up (`sparkwire_edge_resyncs` on
        # /metrics): each costs the compute tier a snapshot per computation, so a run of them says
        # this edge cannot keep up (a subscription Redis closed) or the compute tier is unsteady.
        self.resyncs: dict[str, int] = dict.fromkeys(RESYNC_CAUSES, 0)
        # Orders a key's want and channel being taken and let go: a want re-taken while the old
        # one is let go must not be deleted after it was written.
        self._wants_lock = asyncio.Lock()

    # -- what the hub asks -------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self._connected and self._compute_alive and self._compute_ready

    @property
    def status(self) -> str:
        if not self._connected:
            return "Redis unreachable"
        if not self._compute_alive:
            return "compute tier unreachable"
        return (
            "ready" if self._compute_ready else "compute tier not ready (its streaming query is restarting)"
        )

    def compute_urls(self) -> list[str]:
        """Where the compute processes heard of serve HTTP (their reads of the log), the ready first."""
        return self._computes.urls() if self._compute_alive else []

    def find(self, key: str) -> LiveResult | None:
        mirror = self._mirrors.get(key)
        return mirror if mirror is not None and mirror.first.is_set() else None

    async def add(self, request: ComputationRequest, plan: Plan) -> LiveResult:
        mirror = ResultMirror(request, plan)
        mirror.channel = self.names.results(request.key)
        self._mirrors[mirror.key] = mirror
        self._by_channel[mirror.channel.encode()] = mirror
        try:
            async with self._wants_lock:
                if self._pubsub is not None:
                    await self._pubsub.subscribe(mirror.channel)
                await self.redis.hset(self.names.wants(self.edge_id), mirror.key, request.to_json())
            await self._say({"t": wire.WANTS_CHANGED, "edge": self.edge_id})
            mirror.snapshot_asked = time.monotonic()
            await asyncio.wait_for(mirror.first.wait(), FIRST_SNAPSHOT_TIMEOUT)
        except (TimeoutError, redis.RedisError, OSError) as exc:
            self.remove(mirror)
            why = "no answer in time" if isinstance(exc, TimeoutError) else str(exc)
            raise compute_unreachable(why) from None
        if mirror.error is not None and not mirror.synced:  # it failed to start: as in `--role all`
            self.remove(mirror)
            raise mirror.error
        return mirror

    def remove(self, result: LiveResult) -> None:
        assert isinstance(result, ResultMirror)
        if self._mirrors.get(result.key) is not result:
            return
        del self._mirrors[result.key]
        self._by_channel.pop(result.channel.encode(), None)
        self._spawn(self._let_go(result))

    def count(self) -> int:
        return len(self._mirrors)

    async def _let_go(self, mirror: ResultMirror) -> None:
        with contextlib.suppress(redis.RedisError, OSError):
            async with self._wants_lock:
                if mirror.key in self._mirrors:  # asked for again meanwhile: keep it
                    return
                if self._pubsub is not None:
                    await self._pubsub.unsubscribe(mirror.channel)
                await self.redis.hdel(self.names.wants(self.edge_id), mirror.key)
            await self._say({"t": wire.WANTS_CHANGED, "edge": self.edge_id})

    # -- life ------------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="edge-link")
        self._lease.start(asyncio.get_running_loop())

    async def stop(self) -> None:
        """Leave: the wants and the lease are deleted, so the compute tier lets go at once."""
        self._lease.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        with contextlib.suppress(redis.RedisError, OSError):
            pipe = self.redis.pipeline(transaction=False)
            pipe.delete(self.names.wants(self.edge_id), self.names.lease(self.edge_id))
            pipe.srem(self.names.edges, self.edge_id)
            await pipe.execute()
            await self._say({"t": wire.WANTS_CHANGED, "edge": self.edge_id})
        await self.redis.aclose()

    async def _run(self) -> None:
        delay = 0.1
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            link: Any = None
            try:
                await pubsub.subscribe(self.names.heartbeat, *(m.channel for m in self._mirrors.values()))
                link = pubsub.connection
                link.register_connect_callback(self._resubscribed)
                self._pubsub = pubsub
                await self._register()
                if not self._connected:
                    logger.info("edge %s: linked to Redis at %s", self.edge_id, self.names.prefix)
                self._connected, delay = True, 0.1
                await self._serve(pubsub)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._lease.registered = False
                outage = isinstance(exc, redis.RedisError | OSError)
                if not outage:  # a defect: logged whole, and the link starts again as after an outage
                    # (before, the task ended here and the edge went on answering ready, serving nothing)
                    logger.exception("edge %s: the link to the compute tier failed", self.edge_id)
                if self._connected:
                    logger.warning(
                        "edge %s: link to the compute tier lost (%s); retrying with backoff",
                        self.edge_id,
                        exc,
                    )
                    self._connected = False
                    self._lost(compute_unreachable(f"Redis: {exc}" if outage else "the edge's link failed"))
                await asyncio.sleep(delay)
                delay = min(MAX_BACKOFF, delay * 2)
            finally:
                self._pubsub = None
                if link is not None:  # the connection goes back to the pool: no longer this link's
                    link.deregister_connect_callback(self._resubscribed)
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    async def _register(self) -> None:
        """This edge's lease and every want, written again (after a start or a lost link), in one
        transaction: the compute tier never reads the wants half rewritten."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(self.names.lease(self.edge_id), b"1", px=int(wire.LEASE_SECONDS * 1000))
        pipe.sadd(self.names.edges, self.edge_id)
        async with self._wants_lock:
            wants = {m.key: m.request.to_json() for m in self._mirrors.values()}
            pipe.delete(self.names.wants(self.edge_id))
            if wants:
                pipe.hset(self.names.wants(self.edge_id), mapping=wants)  # type: ignore[arg-type]
            await pipe.execute()
        self._lease.registered = True
        await self._say({"t": wire.WANTS_CHANGED, "edge": self.edge_id})
        await self._ask_snapshots([m for m in self._mirrors.values() if not m.synced])

    async def _serve(self, pubsub: Any) -> None:
        # By this edge's clock, silence is judged as of the last moment nothing was waiting to be
        # read: behind a backlog (2,000 first snapshots at once) the heartbeats sit in it, and judging
        # by the clock told every subscriber `JobInvalidState` and re-synced them all, which made the
        # backlog longer. A process silent while its siblings speak is seen in any backlog by their
        # clocks (app/tiers/liveness.py).
        caught_up = judged = time.monotonic()
        while True:
            message = await pubsub.get_message(timeout=0.25)
            now = self._lease.pulse = time.monotonic()
            if message is None:
                caught_up = now  # every heartbeat sent before now has been read
            elif message["type"] == "message":
                self._on_message(message["channel"], message["data"])
            if now - judged < JUDGE_SECONDS and message is not None:
                continue
            judged = now
            silent = self._computes.silent(caught_up)
            gone = [e for e in silent if self._computes.forget(e).sharded]
            if gone and self._computes.processes and self._compute_alive:  # others live: only its share moves
                self._moved(gone)
            if self._compute_alive and caught_up - self._last_heartbeat > wire.COMPUTE_TIMEOUT_SECONDS:
                logger.warning(
                    "edge %s: no heartbeat from the compute tier for %.1fs",
                    self.edge_id,
                    caught_up - self._last_heartbeat,
                )
                self._compute_alive = False
                self._lost(compute_unreachable("no heartbeat"))
            stale = [
                m
                for m in self._mirrors.values()
                if not m.synced and caught_up - m.snapshot_asked > wire.SNAPSHOT_RETRY_SECONDS
            ]
            if stale and self._compute_alive:
                await self._ask_snapshots(stale)

    # -- messages ----------------------------------------------------------------------------------
    def _on_message(self, channel: bytes, data: bytes) -> None:
        try:
            message = deltas.decode(data)
        except Exception:
            logger.warning("edge %s: an undecodable message on %r was ignored", self.edge_id, channel)
            return
        if message.get("t") == wire.HEARTBEAT:
            self._on_heartbeat(message)
            return
        mirror = self._by_channel.get(channel)
        if mirror is None or self.hub is None:
            return
        outcome = mirror.apply(message)
        if isinstance(outcome, Fresh):
            self.hub.refresh(mirror)
        elif isinstance(outcome, Change | ComputeError):
            self.hub.fan_out([(mirror, outcome)])
        elif isinstance(outcome, Gap) and time.monotonic() - mirror.snapshot_asked > GAP_ASK_SECONDS:
            # (Every message after a gap is one too: asked at most this often, then by the retry.)
            logger.info("edge %s: a result message was missed; asking for a snapshot", self.edge_id)
            self._spawn(self._ask_snapshots([mirror]))

    def _on_heartbeat(self, message: dict[str, Any]) -> None:
        self._last_heartbeat = now = time.monotonic()
        epoch, ready, sharded = str(message.get("e")), bool(message.get("ready")), bool(message.get("sh"))
        sent, url = message.get("at"), message.get("url")
        known = self._computes.heard(
            epoch, now, ready, sharded, float(sent) if sent is not None else None, str(url) if url else None
        )
        # A sharded process that joins is a sibling, not a restart: the computations it takes over
        # reach the mirrors at a new epoch each (app/tiers/mirror.py).
        replaced = epoch != self._compute_epoch and not sharded
        if not self._compute_alive or replaced:
            logger.info("edge %s: compute tier %s is up", self.edge_id, epoch)
            self._compute_alive = True
            if replaced:  # a new compute tier: every mirror re-syncs
                if self._compute_epoch is not None:  # (not this edge's first)
                    self.resyncs["compute_restarted"] += 1
                for mirror in self._mirrors.values():
                    mirror.synced = False
            # (One we lost sight of: `_lost` marked its mirrors already; those synced since stay.)
            self._compute_epoch = epoch
            self._spawn(self._register())
        elif not known:
            logger.info("edge %s: compute process %s joined", self.edge_id, epoch)
        # (sharded: ready while any is; one compute tier: as its latest heartbeat says)
        self._compute_ready = self._computes.any_ready() if sharded else ready

    def _resubscribed(self, _connection: Any) -> None:
        """redis-py opened this link's subscription again (Redis closed it: this edge read too slowly
        for its output buffer). What was queued is lost, and once the data goes quiet no later
        message shows a mirror its gap: every mirror re-syncs (a subscriber gets a fresh FullResult
        if its window changed meanwhile; the link task asks, SNAPSHOTS_IN_FLIGHT at a time)."""
        logger.warning("edge %s: Redis closed this edge's subscription; every mirror re-syncs", self.edge_id)
        self.resyncs["subscription_closed"] += 1
        for mirror in self._mirrors.values():
            mirror.synced = False
        # The heartbeats it held are lost, not missing: silence is timed from here (before, the
        # seconds redis-py took to subscribe again to 2,000 channels told every subscriber
        # `JobInvalidState` after each closure).
        self._last_heartbeat = now = time.monotonic()
        self._computes.heard_all(now)

    def _dropped(self) -> None:
        """On the loop: the compute tier let this edge go (its lease lapsed) while it lived. Its wants
        and lease are written again and every mirror re-syncs (a subscriber gets a fresh FullResult
        if its window changed meanwhile)."""
        logger.warning("edge %s: the compute tier had let this edge go; registering again", self.edge_id)
        self.resyncs["edge_dropped"] += 1
        for mirror in self._mirrors.values():
            mirror.synced = False
        self._spawn(self._register())

    def _moved(self, gone: list[str]) -> None:
        """Sharded compute processes went silent while others live: the subscribers of their
        computations are told, and owed a fresh window once another process publishes them."""
        logger.warning("edge %s: compute process(es) %s silent; their computations move", self.edge_id, gone)
        error = compute_unreachable("the compute process running it is silent; it moves to another")
        moved = [
            m
            for m in self._mirrors.values()
            if m.epoch is not None and wire.process_of(m.epoch) in gone and m.first.is_set()
        ]
        for mirror in moved:
            mirror.lost()
        if self.hub is not None and moved:
            self.hub.fan_out([(m, error) for m in moved])

    def _lost(self, error: ComputeError) -> None:
        """The compute tier is out of reach: every subscriber is told, every mirror must re-sync."""
        self._compute_alive = False
        self._computes.clear()
        self.resyncs["compute_lost"] += 1
        for mirror in self._mirrors.values():
            mirror.lost()
        if self.hub is not None:
            self.hub.owe_everyone(error)

    async def _ask_snapshots(self, mirrors: list[ResultMirror]) -> None:
        """Ask for these mirrors' snapshots, as many as SNAPSHOTS_IN_FLIGHT leaves room for; the link
        task asks for the others as the answers come (a mirror not synced and not asked lately)."""
        now = time.monotonic()
        in_flight = sum(
            1
            for m in self._mirrors.values()
            if not m.synced and now - m.snapshot_asked <= wire.SNAPSHOT_RETRY_SECONDS
        )
        mirrors = mirrors[: max(0, SNAPSHOTS_IN_FLIGHT - in_flight)]
        if not mirrors:
            return
        for mirror in mirrors:
            mirror.snapshot_asked = now
        await self._say({"t": wire.SYNC, "edge": self.edge_id, "keys": [m.key for m in mirrors]})

    async def _say(self, message: dict[str, Any]) -> None:
        await self.redis.publish(self.names.control, deltas.encode(message))

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._quietly(work))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _quietly(self, work: Any) -> None:
        try:
            await work
        except (redis.RedisError, OSError) as exc:  # the link task notices and reconnects
            logger.debug("edge %s: %s", self.edge_id, exc)


class _LeaseKeeper:
    """This edge's lease, refreshed from a thread with a connection of its own every fifth of
    `LEASE_SECONDS` while the link task has run in the last `LOOP_STALL_SECONDS`. On the loop, the
    refresh waited behind whatever else was ready: with 2,000 first FullResults queued it came more
    than 5 s late, the compute tier dropped the edge's wants, and every computation was back-filled
    again (docs/decisions/0091). It also sees when the compute tier let this edge go anyway (not in
    the edges' set): `on_dropped` runs on the loop, once, until the link registers again."""

    def __init__(self, url: str, names: wire.Names, edge_id: str, on_dropped: Any) -> None:
        self._names, self._edge_id, self._on_dropped = names, edge_id, on_dropped
        self._redis = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.pulse = time.monotonic()  # the link task's last turn (written on the loop)
        self.registered = False  # the link has written the lease, the set and the wants

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        threading.Thread(target=self._run, name="edge-lease", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(wire.LEASE_SECONDS / 5):
            if not self.registered or time.monotonic() - self.pulse > LOOP_STALL_SECONDS:
                continue
            try:
                pipe = self._redis.pipeline(transaction=False)
                pipe.set(self._names.lease(self._edge_id), b"1", px=int(wire.LEASE_SECONDS * 1000))
                pipe.sismember(self._names.edges, self._edge_id)
                _, member = pipe.execute()
            except (redis.RedisError, OSError):
                continue  # the link task sees Redis go and registers again when it is back
            if not member and self.registered and not self._stop.is_set():
                self.registered = False
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._on_dropped)
        self._redis.close()
