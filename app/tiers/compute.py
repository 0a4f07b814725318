"""`--role compute`: runs every computation the live edges want, once, and publishes each change of
each one once, through Redis (app/tiers/wire.py has the names and why each mechanism).

Threads, none of them the event loop's:
- the reconciler: reads the live edges' wants (at least every second, at once when nudged), adds
  what is wanted and not running (engine.add in a pool: back-fills of computations asked for
  together share one read), removes what nobody wants, answers snapshot requests, and publishes
  the heartbeat;
- the listener: the control channel's nudges;
- Spark's batch thread calls `on_changes`: each changed computation's difference to what was last
  published, queued;
- the publisher: sends what is queued in order, what queued up meanwhile in one pipelined round
  trip. Versions are assigned and messages queued under one lock, which no Redis round trip holds:
  a burst of snapshots or a slow Redis no longer stalls the batch thread's micro-batches.

With `compute-slots` > 0 several compute processes share the computations (app/tiers/shards.py):
each runs only the wanted computations whose slot Kafka's group coordinator gave it, and each
message it publishes for one goes through the slot's fence. A computation's epoch is this process's
epoch and the slot's token, so a computation that moves reaches the edges as a new epoch.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import redis

from app.tiers import wire
from app.tiers.shards import Fence, Shards
from compute.evaluation import deltas
from compute.evaluation.compiler.catalogs import NO_CATALOGS, Catalogs
from compute.evaluation.compiler.limits import Limits
from compute.evaluation.computation import Change, Computation
from compute.evaluation.errors import ComputeError
from compute.evaluation.request import ComputationRequest
from compute.spark.engine import Engine
from compute.storage.contract import LogUnavailable

logger = logging.getLogger(__name__)

# An add holds its thread until its back-fill is done, and the engine batches the back-fills that
# wait together into one Spark job: with 8 threads, 2,000 computations arriving at once (or moving
# to this process) were read 2-7 per job of ~1.3 s, minutes in all (docs/decisions/0091). A thread
# adds ADD_CHUNK computations at once, so up to ADD_WORKERS x ADD_CHUNK share a job: with one each,
# the 317 computations a survivor took over after a SIGKILL were read ~60 per job, 10 jobs and 22 s
# (docs/decisions/0100). A chunk's computations are published when its last is loaded.
ADD_WORKERS = 64
ADD_CHUNK = 32
PUBLISH_BATCH = 256  # queued publishes sent in one round trip at most


@dataclass
class _Outgoing:
    """Messages to publish together, in order; `what` names them in a warning if they fail."""

    what: str
    messages: list[tuple[str, bytes, Fence | None]] = field(default_factory=list)

    def add(self, channel: str, payload: bytes, fence: Fence | None = None) -> None:
        self.messages.append((channel, payload, fence))


@dataclass
class _Published:
    channel: str
    version: int
    outputs: deltas.Outputs  # what the edges hold as of `version`
    late: int = 0  # the computation's late drops as of the last message (app/tiers/mirror.py)
    epoch: str = ""  # the epoch its messages carry (this process's, and its slot's token if sharded)
    fence: Fence | None = None


@dataclass(frozen=True)
class Sharding:
    """Where the compute processes share their computations (app/tiers/shards.py)."""

    bootstrap_servers: str
    topic: str
    slots: int


class ComputeTier:
    def __init__(
        self,
        engine: Engine,
        redis_url: str,
        prefix: str,
        limits: Limits,
        catalogs: Catalogs = NO_CATALOGS,
        sharding: Sharding | None = None,
        url: str | None = None,
    ) -> None:
        """`url`: where edges reach this process's HTTP (its heartbeat says it): they forward there
        the reads of the log's points that need Spark (app/api/forwarded_reads.py)."""
        self.engine = engine
        self.url = url
        self.limits = limits
        self.catalogs = catalogs  # the assets, modules and events plans look up
        self.names = wire.Names(prefix)
        self.redis = redis.Redis.from_url(redis_url, socket_timeout=5, health_check_interval=10)
        self.epoch = uuid.uuid4().hex[:12]  # a restarted compute tier is a new epoch: edges re-sync
        # Held to assign versions and queue messages, never across a Redis round trip: the
        # publisher thread sends the queue in order, so each computation's versions stay in order.
        self._lock = threading.Lock()
        self._outbox: queue.SimpleQueue[_Outgoing | None] = queue.SimpleQueue()
        self._running: dict[str, Computation] = {}
        self._published: dict[str, _Published] = {}
        self._failed: dict[str, ComputeError] = {}  # wanted, but cannot run (sent as a sticky error)
        self._adding: set[str] = set()
        self._wanted: dict[str, str] = {}  # key -> request JSON, as of the last reconcile
        self._sync: list[list[str] | None] = []  # snapshot requests (None: every wanted key)
        # For /metrics (app/metrics.py's observe_tier): since start-up, and edges at the last reconcile.
        self.started = self.snapshots = self.changes = self.edges_alive = 0
        self._runs = 0  # computations published since start-up: each one's first version is its own
        self._nudge = threading.Event()
        self._stop = threading.Event()
        self._ready = False  # whether the query runs, as `_readiness_loop` last asked the JVM
        self._pool = ThreadPoolExecutor(ADD_WORKERS, thread_name_prefix="tier-add")
        self._fences: dict[str, Fence] = {}  # sharded: the fence each running (or adding) key started under
        self.shards = (
            None
            if sharding is None
            else Shards(
                sharding.bootstrap_servers,
                sharding.topic,
                sharding.slots,
                self.redis,
                prefix,
                self.epoch,
                self._nudge.set,
            )
        )
        self._threads = [
            threading.Thread(target=self._reconcile_loop, name="tier-reconcile", daemon=True),
            threading.Thread(target=self._heartbeat_loop, name="tier-heartbeat", daemon=True),
            threading.Thread(target=self._readiness_loop, name="tier-readiness", daemon=True),
            threading.Thread(target=self._listen, name="tier-listen", daemon=True),
            threading.Thread(target=self._publisher, name="tier-publish", daemon=True),
        ]

    def start(self) -> None:
        if self.shards is not None:
            self.shards.start()
        for thread in self._threads:
            thread.start()
        logger.info("compute tier %s: serving edges through %s", self.epoch, self.names.prefix)

    def stop(self) -> None:
        if self.shards is not None:  # first: the others take its slots while this one stops
            self.shards.stop()
        self._stop.set()
        self._nudge.set()
        self._outbox.put(None)  # the publisher sends what is queued, then ends
        for thread in self._threads:
            if thread.ident is not None:  # never started when the server stopped during start-up
                thread.join(timeout=10)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.redis.close()

    def count(self) -> int:
        with self._lock:
            return len(self._running)

    # -- Spark's threads -----------------------------------------------------------------------------
    def on_changes(self, changes: Sequence[tuple[Computation, Change | ComputeError]]) -> None:
        """The batch thread's hook: each change published once, as a difference."""
        with self._lock:
            out = _Outgoing("results")
            for computation, change in changes:
                published = self._published.get(computation.key)
                if published is None or self._running.get(computation.key) is not computation:
                    continue  # not snapshotted yet: its snapshot will hold this change
                if isinstance(change, ComputeError):
                    error = self._error(change, computation.error is not None, published.epoch)
                    out.add(published.channel, error, published.fence)
                    continue
                outputs = computation.snapshot(None)
                payload = deltas.diff(published.outputs, outputs)
                # The version moves even if the publish fails: edges then see a gap and re-sync.
                published.version += 1
                published.outputs = outputs
                message = {
                    "t": wire.CHANGE,
                    "e": published.epoch,
                    "v": published.version,
                    "s": change.start,
                    "end": change.end,
                    "f": change.full,
                    "d": payload,
                    "late": self._late(computation, published),
                }
                out.add(published.channel, deltas.encode(message), published.fence)
                self.changes += 1
            self._queue(out)

    def on_stream_failed(self, error: ComputeError) -> None:
        """The streaming query died: every edge's subscribers are told (the supervisor restarts it)."""
        with self._lock:
            out = _Outgoing("the stream's failure")
            for published in self._published.values():
                out.add(published.channel, self._error(error, False, published.epoch), published.fence)
            self._queue(out)

    def on_stream_recovered(self) -> None:
        """Every computation was rebuilt from the log: fresh snapshots, at new versions."""
        with self._lock:
            for key in list(self._running):
                self._publish_snapshot(key, bump=True)

    # -- the reconciler ------------------------------------------------------------------------------
    def _heartbeat_loop(self) -> None:
        """The heartbeat on a thread of its own: in the reconciler's loop it waited behind adds and
        snapshot answers, more than the edges' 3 s under 2,000 new subscriptions, and every edge
        told every subscriber `JobInvalidState` and re-synced (docs/decisions/0091)."""
        while not self._stop.is_set():
            with contextlib.suppress(redis.RedisError):  # the reconciler's loop says so, and retries
                self._heartbeat()
            self._stop.wait(wire.HEARTBEAT_SECONDS)

    def _readiness_loop(self) -> None:
        """What the heartbeat says of the query, asked of the JVM here: two py4j calls that waited
        behind the back-fills' Spark jobs made the heartbeat 3.4-3.6 s late (docs/decisions/0091)."""
        while not self._stop.is_set():
            self._ready = self.engine.running
            self._stop.wait(wire.HEARTBEAT_SECONDS)

    def _reconcile_loop(self) -> None:
        next_late = next_reconcile = 0.0
        failing_since: float | None = None
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                if now >= next_late:
                    self._publish_late()
                    next_late = now + wire.HEARTBEAT_SECONDS
                if self._nudge.is_set() or now >= next_reconcile:
                    self._nudge.clear()
                    self._reconcile()
                    self._answer_sync()
                    next_reconcile = now + wire.RECONCILE_SECONDS
                if failing_since is not None:
                    logger.info("compute tier: Redis reachable again")
                    failing_since = None
            except redis.RedisError as exc:
                if failing_since is None:
                    failing_since = now
                    logger.warning("compute tier: Redis unreachable (%s); retrying", exc)
                self._stop.wait(min(5.0, 0.2 * 2 ** min(6, int(now - failing_since))))
                continue
            self._nudge.wait(max(0.0, min(next_late, next_reconcile) - time.monotonic()))

    def _heartbeat(self) -> None:
        message = {
            "t": wire.HEARTBEAT,
            "e": self.epoch,
            "ready": self._ready,
            "at": time.monotonic(),  # its own clock, compared with its siblings (app/tiers/liveness.py)
            "n": len(self._running),
            "sh": 0 if self.shards is None else self.shards.slots,  # edges: a sibling is no restart
            "url": self.url,
        }
        self.redis.publish(self.names.heartbeat, deltas.encode(message))

    def _reconcile(self) -> None:
        edges = sorted(m.decode() for m in self.redis.smembers(self.names.edges))  # type: ignore[union-attr]
        pipe = self.redis.pipeline(transaction=False)
        for edge in edges:
            pipe.exists(self.names.lease(edge))
        alive = [edge for edge, exists in zip(edges, pipe.execute(), strict=True) if exists]
        self.edges_alive = len(alive)
        gone = sorted(set(edges) - set(alive))
        if gone:  # their wants go with them
            pipe = self.redis.pipeline(transaction=False)
            for edge in gone:
                pipe.srem(self.names.edges, edge)
                pipe.delete(self.names.wants(edge))
            pipe.execute()
            logger.info("compute tier: edge(s) %s gone (lease expired); their computations released", gone)
        pipe = self.redis.pipeline(transaction=False)
        for edge in alive:
            pipe.hgetall(self.names.wants(edge))
        wanted: dict[str, str] = {}
        for wants in pipe.execute():
            wanted.update((k.decode(), v.decode()) for k, v in wants.items())
        # While the query restarts, new computations wait: the restart rebuilds what runs. (Asked
        # before taking the lock the batch thread publishes under: it is a call into the JVM.)
        running = self.engine.running
        fences = self._owned(wanted)
        if self.shards is not None:  # only the computations of the slots this process owns
            wanted = {k: v for k, v in wanted.items() if k in fences}
        with self._lock:
            self._wanted = wanted
            moved = {k for k in (*self._running, *self._failed) if self._fences.get(k) != fences.get(k)}
            for key in [k for k in self._running if k not in wanted or k in moved]:
                self.engine.remove(self._running.pop(key))
                self._published.pop(key, None)
                self._fences.pop(key, None)
            for key in [k for k in self._failed if k not in wanted or k in moved]:
                del self._failed[key]
                self._fences.pop(key, None)
            new = [
                k
                for k in wanted
                if running and k not in self._running and k not in self._adding and k not in self._failed
            ]
            self._adding.update(new)
            for key in new:
                if key in fences:
                    self._fences[key] = fences[key]
        for at in range(0, len(new), ADD_CHUNK):
            chunk = [(key, wanted[key], fences.get(key)) for key in new[at : at + ADD_CHUNK]]
            self._pool.submit(self._add_all, chunk)

    def _owned(self, wanted: dict[str, str]) -> dict[str, Fence]:
        """Sharded: the fence of each wanted key whose slot this process owns (else empty)."""
        if self.shards is None:
            return {}
        fences = {k: self.shards.owner(k) for k in wanted}
        return {k: f for k, f in fences.items() if f is not None}

    def _add_all(self, chunk: list[tuple[str, str, Fence | None]]) -> None:
        """Compile and start these computations (key, request, fence), their back-fills together."""
        compiled: list[tuple[str, Fence | None, Computation]] = []
        for key, request_json, fence in chunk:
            try:
                compiled.append((key, fence, self._compiled(key, request_json)))
            except Exception as exc:
                self._not_started(key, fence, exc)
        try:
            started = self.engine.add_all([computation for _, _, computation in compiled])
        except Exception as exc:  # (the log's end unreadable: none of them started)
            started = [(computation, exc) for _, _, computation in compiled]
        for (key, fence, _), (computation, error) in zip(compiled, started, strict=True):
            if error is None:
                self._started(key, fence, computation)
            else:
                self._not_started(key, fence, error)

    def _compiled(self, key: str, request_json: str) -> Computation:
        request = ComputationRequest.from_json(request_json)
        if request.key != key:
            raise ComputeError("InvalidComputation", "the request does not match its key", status_code=400)
        plan = request.compile(self.limits, catalogs=self.catalogs)
        return Computation(key, plan, request.allowed_lateness_ns)

    def _not_started(self, key: str, fence: Fence | None, exc: BaseException) -> None:
        error = (
            exc if isinstance(exc, ComputeError) else ComputeError("ComputeFailed", str(exc), status_code=500)
        )
        if isinstance(exc, LogUnavailable):  # the broker away: said in one line, no traceback
            logger.warning("compute tier: a computation could not start: %s", exc)
        elif not isinstance(exc, ComputeError):
            logger.error("compute tier: a computation failed to start", exc_info=exc)
        with self._lock:
            self._adding.discard(key)
            if key not in self._wanted or self._fences.get(key) != fence:  # moved meanwhile
                self._forget_fence(key, fence)
                return
            self._failed[key] = error
            self._publish_error_to(key, error)

    def _started(self, key: str, fence: Fence | None, computation: Computation) -> None:
        with self._lock:
            self._adding.discard(key)
            if key not in self._wanted or self._fences.get(key) != fence:
                # unwanted while it was back-filled, or its slot moved meanwhile
                self.engine.remove(computation)
                self._forget_fence(key, fence)
                return
            self._running[key] = computation
            self.started += 1
            self._publish_snapshot(key, bump=False)

    def _forget_fence(self, key: str, fence: Fence | None) -> None:
        if fence is not None and self._fences.get(key) == fence:
            del self._fences[key]

    def _answer_sync(self) -> None:
        if not self.engine.running:  # a restart is under way: its end publishes every snapshot
            return
        with self._lock:
            requests, self._sync = self._sync, []
            keys: set[str] = set()
            for asked in requests:
                keys.update(self._wanted if asked is None else asked)
            for key in keys:
                if key in self._running:
                    self._publish_snapshot(key, bump=False)
                elif key in self._failed:
                    self._publish_error_to(key, self._failed[key])

    # -- publishing: messages made and queued with the lock held, sent by the publisher thread ------
    def _publish_snapshot(self, key: str, bump: bool) -> None:
        computation = self._running[key]
        published = self._published.get(key)
        if computation.error is not None:
            self._publish_error_to(key, computation.error)
            return
        outputs = computation.snapshot(None)
        whole = deltas.whole(outputs)
        if published is None:
            # Versions of a key never repeat in this epoch, even if it was let go and added again: a
            # mirror still holding the old run's (epoch, version) would take the new run's changes
            # against other outputs (the edge's link failed on it under 2,000 subscriptions).
            self._runs += 1
            version = self._runs << 32
        else:
            # (epoch, version) names one content: a snapshot asked while a batch is applied but not
            # yet published holds newer outputs than the version's, so it is a version of its own.
            # (A mirror at that version ignores a snapshot of it, and took the next change against
            # what it held: the batch went missing, or failed to apply.)
            moved_on = bump or whole != deltas.whole(published.outputs)
            version = published.version + (1 if moved_on else 0)
        channel = self.names.results(key)
        fence = self._fences.get(key)
        epoch = self._epoch(fence)
        message = {
            "t": wire.SNAPSHOT,
            "e": epoch,
            "v": version,
            "end": computation.end,
            "o": whole,
        }
        late = 0 if published is None else published.late
        fresh = _Published(channel, version, outputs, late, epoch, fence)
        message["late"] = self._late(computation, fresh)
        self._published[key] = fresh
        self.snapshots += 1
        self._queue(_Outgoing("a snapshot", [(channel, deltas.encode(message), fence)]))

    def _epoch(self, fence: Fence | None) -> str:
        """A computation's epoch: this process's, and its slot's token when sharded (a moved
        computation, or one whose slot came back, is a new epoch to the edges)."""
        return self.epoch if fence is None else f"{self.epoch}.{fence[1]}"

    @staticmethod
    def _late(computation: Computation, published: _Published) -> list[int | None]:
        """The computation's late drops for a message: [count, the newest timestamp among the drops
        since the previous message] (the edge's mirror keeps them: app/tiers/mirror.py)."""
        count = computation.late_dropped
        newest = computation.late_newest_since(published.late)
        published.late = count
        return [count, newest]

    def _publish_late(self) -> None:
        """Late drops that came with no change to publish (a batch of late points only): at most
        every heartbeat, per computation whose count grew since its last message."""
        with self._lock:
            out = _Outgoing("late drops")
            for key, published in self._published.items():
                computation = self._running.get(key)
                if computation is None or computation.late_dropped == published.late:
                    continue
                message = {"t": wire.LATE, "e": published.epoch, "late": self._late(computation, published)}
                out.add(published.channel, deltas.encode(message), published.fence)
            self._queue(out)

    def _publish_error_to(self, key: str, error: ComputeError) -> None:
        fence = self._fences.get(key)
        payload = self._error(error, True, self._epoch(fence))
        self._queue(_Outgoing("an error", [(self.names.results(key), payload, fence)]))

    @staticmethod
    def _error(error: ComputeError, sticky: bool, epoch: str) -> bytes:
        err = [error.name, error.message, error.params, error.status_code]
        return deltas.encode({"t": wire.ERROR, "e": epoch, "sticky": sticky, "err": err})

    def _queue(self, out: _Outgoing) -> None:
        """With the lock held: the order messages are queued in is the order they are published."""
        if out.messages:
            self._outbox.put(out)

    def _publisher(self) -> None:
        """Sends the queued messages in order, what queued up meanwhile in one round trip."""
        while True:
            first = self._outbox.get()
            batch = [first]
            while first is not None and len(batch) < PUBLISH_BATCH:
                try:
                    batch.append(self._outbox.get_nowait())
                except queue.Empty:
                    break
            outgoing = [out for out in batch if out is not None]
            if outgoing:
                self._send(outgoing)
            if None in batch:
                return

    def _send(self, outgoing: list[_Outgoing]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        fences: list[Fence | None] = []
        for out in outgoing:
            for channel, payload, fence in out.messages:
                if fence is None or self.shards is None:
                    pipe.publish(channel, payload)
                else:  # published only while this process still holds the slot
                    self.shards.publish(pipe, fence, channel, payload)
                fences.append(fence)
        try:
            answers = pipe.execute()
        except redis.RedisError as exc:
            what = ", ".join(dict.fromkeys(out.what for out in outgoing))
            logger.warning("compute tier: publishing %s failed (%s); edges will re-sync", what, exc)
            return
        if self.shards is not None:
            refused = {f for f, answer in zip(fences, answers, strict=True) if f is not None and answer == -1}
            for fence in refused:  # another process owns the slot now: its computations stop here
                self.shards.refused(fence)

    # -- the listener --------------------------------------------------------------------------------
    def _listen(self) -> None:
        delay = 0.2
        while not self._stop.is_set():
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self.names.control)
                self._nudge.set()  # anything said while we were not listening: reconcile now
                delay = 0.2
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is not None:
                        self._on_control(message["data"])
            except redis.RedisError:
                self._stop.wait(delay)
                delay = min(5.0, delay * 2)
            finally:
                pubsub.close()

    def _on_control(self, data: bytes) -> None:
        try:
            message = deltas.decode(data)
        except Exception:
            logger.warning("compute tier: an undecodable control message was ignored")
            return
        if message.get("t") == wire.SYNC:
            keys = message.get("keys")
            with self._lock:
                self._sync.append(None if keys is None else [str(k) for k in keys])
        self._nudge.set()
