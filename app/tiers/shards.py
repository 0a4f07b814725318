"""Which live computations this compute process runs when several share them (`compute-slots` > 0):
membership and assignment come from Kafka's group coordinator, the fence from Redis
(docs/decisions/0089-computations-sharded-by-kafka-groups.md).

- **Slots** are the partitions of the topic `{kafka-topic}-compute`. A computation's slot is a stable
  hash of its key modulo the partition count, so every process agrees on it without a word.
- **Membership**: every compute process runs a consumer in one group subscribed to that topic. The
  coordinator assigns its partitions to the members (cooperative-sticky: a rebalance moves only the
  slots that must move, the others keep running). A process that dies leaves the group when its
  session times out (`SESSION_TIMEOUT_MS`), one that stops leaves at once, and its slots go to the
  others. The consumer reads nothing that matters; it is there for its assignment.
- **Fencing**: a process assigned a slot produces a claim record to the slot's partition; its token
  is (the topic's log, the record's offset). Offsets of a partition only grow, but only within one
  log: the log is the Kafka cluster's id and the topic's id, and a topic made again (a new, empty
  cluster, even one formatted with the same cluster id, or the topic deleted) has a new topic id and
  offsets from 0. The process reads the log before and after producing its claims and keeps them
  only if it did not change meanwhile. Redis keeps the slot's token: a claim replaces it when its
  offset is larger in the same log, or when it comes from another log (the newer log's claim: the
  old log's group can assign nothing to anybody once its cluster is gone). Every result it publishes
  for the slot goes through one Lua script that publishes only while the caller's token is the
  stored one's log and at least its offset. A process that lost a slot (revoked, or out of the group
  while frozen, or killed mid-publish, or still holding a token of a log since replaced) can never
  publish it again: its next publish is refused and it drops the slot's computations. Two clusters
  serving compute processes at once (a misconfiguration) take a slot from each other at each claim:
  each such take is logged as a warning naming both logs.
- **A new, empty cluster** has no topic, so nobody is assigned anything: a process without slots
  looks for the topic every `TOPIC_CHECK_S`, makes it again with the slots in use and has its
  consumer ask for it (until one such request is answered); the group forms on it, and the claims,
  of the new log, replace the old tokens. A Kafka error in any round of the membership thread is
  logged and the next round tries again: the thread ends only when the process stops.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import redis
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

logger = logging.getLogger(__name__)

SESSION_TIMEOUT_MS = 6000  # the broker's least by default (group.min.session.timeout.ms)
HEARTBEAT_MS = 500  # the survivors hear of a rebalance at their next heartbeat
POLL_SECONDS = 0.2  # the membership thread's poll: rebalance callbacks run inside it
CLAIM_TIMEOUT_S = 10.0
ADMIN_TIMEOUT_S = 30.0
TOPIC_CHECK_S = 2.0  # a process without slots looks for the topic this often (gone with a cluster?)
TOPIC_CHECK_TIMEOUT_S = 1.0
TOPIC_ID_TIMEOUT_S = 1.0  # the topic's id asked by a process without slots

# A slot's token in Redis: "LOG OFFSET" (a value of another form, e.g. a bare offset: no log).
# KEYS[1]: the slot's token; ARGV: a claim's log and offset. A claim replaces the token when its
# offset is larger in the same log, or when it is of another log. Returns the token held after,
# and the log held before: {log, offset, previous log}.
_CLAIM = """
local held = redis.call('GET', KEYS[1])
local log, offset = '', -1
if held then
  local l, o = string.match(held, '^(%S+) (%-?%d+)$')
  if l then log, offset = l, tonumber(o) end
end
if log ~= ARGV[1] or tonumber(ARGV[2]) > offset then
  redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2])
  return {ARGV[1], ARGV[2], log}
end
return {log, tostring(offset), log}
"""
# KEYS[1]: the slot's token; ARGV: the caller's log, offset, channel, payload. -1: the slot moved on
# (a larger offset, or another log).
_PUBLISH = """
local held = redis.call('GET', KEYS[1])
if held then
  local log, offset = string.match(held, '^(%S+) (%-?%d+)$')
  if log ~= ARGV[1] or tonumber(ARGV[2]) < tonumber(offset) then
    return -1
  end
end
return redis.call('PUBLISH', ARGV[3], ARGV[4])
"""


class Token(NamedTuple):
    """A claim: its offset orders claims only within its log ("CLUSTER-ID/TOPIC-ID")."""

    log: str
    offset: int

    def __str__(self) -> str:  # in a computation's epoch: a new log's offset 0 is not the old one's
        return f"{self.offset}-{hashlib.blake2b(self.log.encode(), digest_size=3).hexdigest()}"


Fence = tuple[int, Token]  # (slot, token)


def slot_of(key: str, slots: int) -> int:
    """A computation's slot: the same in every process, whatever Python's hash seed."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") % slots


class Shards:
    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        slots: int,
        client: redis.Redis,
        prefix: str,
        member: str,
        on_change: Callable[[], None],
    ) -> None:
        """`member`: this process's epoch (in its claim records and logs); `on_change`: called on the
        membership thread whenever the owned slots change (the compute tier reconciles)."""
        self.topic = topic
        self.slots = slots  # the topic's partition count once started (it wins over the setting)
        self.prefix = prefix
        self.member = member
        self._bootstrap = bootstrap_servers
        self._redis = client
        self._claim = client.register_script(_CLAIM)
        self._publish = client.register_script(_PUBLISH)
        self._on_change = on_change
        self._lock = threading.Lock()
        self._owned: dict[int, Token] = {}  # slot -> token
        self._unclaimed: set[int] = set()  # assigned, claim not stored yet (retried each poll)
        self._stop = threading.Event()
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._admin: AdminClient | None = None
        self._fatal: KafkaError | None = None  # the claims' producer failed for good (on_delivery)
        self._topic_id: str | None = None  # the topic the consumer and producer were made with
        self._thread = threading.Thread(target=self._run, name="tier-shards", daemon=True)

    # -- what the compute tier asks ------------------------------------------------------------------
    def owner(self, key: str) -> Fence | None:
        """(slot, token) while this process owns the key's slot, else None."""
        slot = slot_of(key, self.slots)
        with self._lock:
            token = self._owned.get(slot)
        return None if token is None else (slot, token)

    def owned(self) -> dict[int, Token]:
        with self._lock:
            return dict(self._owned)

    def token_key(self, slot: int) -> str:
        return f"{self.prefix}:tier:slot:{slot}:token"

    def publish(self, pipe: Any, fence: Fence, channel: str, payload: bytes) -> None:
        """Queues a fenced publish on `pipe`: it answers -1 if the slot has a newer owner."""
        slot, token = fence
        self._publish(
            keys=[self.token_key(slot)], args=[token.log, token.offset, channel, payload], client=pipe
        )

    def refused(self, fence: Fence) -> None:
        """A publish under `fence` was refused: the slot has a newer owner, this process lets go."""
        slot, token = fence
        with self._lock:
            if self._owned.get(slot) != token:
                return
            del self._owned[slot]
        logger.warning("compute slot %d: a newer owner holds it; its computations stop here", slot)
        self._on_change()

    # -- life ----------------------------------------------------------------------------------------
    def start(self) -> None:
        self._admin = AdminClient(
            {"bootstrap.servers": self._bootstrap, "allow.auto.create.topics": False, "log_level": 3}
        )
        count = self._ensure_topic()
        if count != self.slots:
            logger.warning(
                "compute slots: topic %s has %d partitions, not %d: %d slots it is",
                self.topic,
                count,
                self.slots,
                count,
            )
        self.slots = count
        self._topic_id = self._current_topic_id(ADMIN_TIMEOUT_S)
        self._producer = self._new_producer()
        self._consumer = self._new_consumer()
        self._thread.start()
        logger.info("compute slots: %d, shared through Kafka group %s", self.slots, self.topic)

    def _new_consumer(self) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": self._bootstrap,
                "group.id": self.topic,
                "client.id": f"sparkwire-compute-{self.member}",
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
                "topic.metadata.refresh.interval.ms": int(TOPIC_CHECK_S * 1000),  # (a topic gone, sooner)
                "log_level": 3,
            }
        )
        consumer.subscribe(
            [self.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        return consumer

    def _new_producer(self) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self._bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                # (a producer's default: its metadata requests would make a missing topic, with the
                # broker's default partition count, before this process makes it with the slots)
                "allow.auto.create.topics": False,
                "log_level": 3,
            }
        )

    def stop(self) -> None:
        """Leaves the group at once (the others take the slots without waiting for a timeout)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=15)
        with self._lock:
            self._owned.clear()
        self._producer = self._consumer = None  # (librdkafka's handles end with them)

    def _ensure_topic(self) -> int:
        admin = self._admin
        assert admin is not None
        topics = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        if self.topic not in topics:
            created = admin.create_topics([NewTopic(self.topic, self.slots, 1)])[self.topic]
            try:
                created.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another process made it
                    raise
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        while True:  # (a topic just made may show no partitions for a moment)
            topic = admin.list_topics(self.topic, timeout=ADMIN_TIMEOUT_S).topics[self.topic]
            if (topic.partitions and topic.error is None) or time.monotonic() > deadline:
                return len(topic.partitions)
            time.sleep(0.1)

    def _run(self) -> None:
        try:
            checked = time.monotonic()
            while not self._stop.is_set():
                try:
                    assert self._consumer is not None
                    self._consumer.poll(POLL_SECONDS)  # records are ignored: the assignment is what counts
                    # No slot here: is the topic gone (a new cluster)? Also with slots assigned but not
                    # claimed: a group that assigned from metadata of the topic before it went has
                    # claims that fail until the topic is made again.
                    if not self._owned and time.monotonic() - checked > TOPIC_CHECK_S:
                        checked = time.monotonic()
                        self._look_for_topic()
                    if self._unclaimed:
                        self._claim_slots()
                # Every failure of a round is retried: a thread ended by one (a timed-out request, in
                # CI) left its process without slots for good.
                except KafkaException as exc:  # a broker slow or away
                    logger.warning("compute slots: %r; trying again", exc)
                    time.sleep(POLL_SECONDS)
                except Exception:
                    logger.exception("compute slots: a membership round failed; trying again")
                    time.sleep(TOPIC_CHECK_S)
        finally:
            if self._consumer is not None:
                self._consumer.close()  # leaves the group (revoking: the callback lets the slots go)
            if self._producer is not None:
                self._producer.flush(1)

    def _look_for_topic(self) -> None:
        """No slot here: the topic made again with the slots in use if it is missing (a new, empty
        cluster, or the topic deleted), so that the group has slots to assign (its claims then start
        a new log); a topic made again (a new id) gets a new consumer and producer."""
        admin = self._admin
        assert admin is not None
        try:  # (briefly: the membership thread's polls wait meanwhile)
            present = self.topic in admin.list_topics(timeout=TOPIC_CHECK_TIMEOUT_S).topics
        except KafkaException:
            return  # no broker answers (an outage): nothing to say
        if not present and not self._make_topic():
            return
        try:
            topic_id = self._current_topic_id(TOPIC_ID_TIMEOUT_S)
        except (KafkaException, TimeoutError) as exc:  # asked again at the next look
            logger.warning("compute slots: the id of topic %s not known (%r)", self.topic, exc)
            return
        if topic_id != self._topic_id:
            self._renew_clients(topic_id)

    def _current_topic_id(self, timeout_s: float) -> str:
        admin = self._admin
        assert admin is not None
        described = admin.describe_topics(TopicCollection([self.topic]), request_timeout=timeout_s)
        return str(described[self.topic].result(timeout=timeout_s).topic_id)

    def _renew_clients(self, topic_id: str) -> None:
        """librdkafka keeps a partition's leader epoch across a topic made again, and ignores the new
        topic's metadata as older (its epochs restart at 0; librdkafka issue 4898): a consumer that
        joined the group before the topic was made saw no partitions, and was assigned none for
        good (measured, with the topic made 0.3 s after a new cluster came up). A new consumer and
        producer start without that cache."""
        logger.info(
            "compute slots: topic %s is new (id %s, was %s): its consumer and producer made anew",
            self.topic,
            topic_id,
            self._topic_id,
        )
        if self._consumer is not None:
            self._consumer.close()  # leaves the group (a slot assigned, unclaimed, is let go)
        if self._producer is not None:
            self._producer.flush(1)
        self._consumer = self._new_consumer()
        self._producer = self._new_producer()
        self._topic_id = topic_id

    def _make_topic(self) -> bool:
        admin = self._admin
        assert admin is not None
        try:
            count = self._ensure_topic()
            if 0 < count < self.slots:  # made meanwhile by another client, with too few partitions
                grown = admin.create_partitions([NewPartitions(self.topic, self.slots)])[self.topic]
                grown.result(timeout=ADMIN_TIMEOUT_S)
                count = self.slots
        except (KafkaException, TimeoutError) as exc:
            logger.warning("compute slots: topic %s is missing; making it failed (%r)", self.topic, exc)
            return False
        logger.info("compute slots: topic %s was missing, made again", self.topic)
        if count != self.slots:
            logger.warning(
                "compute slots: topic %s has %d partitions now, this process keeps %d slots",
                self.topic,
                count,
                self.slots,
            )
        return True

    def _log(self) -> str:
        """The log the claims' offsets count in: "CLUSTER-ID/TOPIC-ID" (a topic made again, on a new
        cluster or the same one, has a new topic id; the cluster id, which an operator may pin when
        formatting a new cluster, only names it)."""
        admin = self._admin
        assert admin is not None
        cluster = admin.describe_cluster(request_timeout=CLAIM_TIMEOUT_S).result(CLAIM_TIMEOUT_S).cluster_id
        return f"{cluster}/{self._current_topic_id(CLAIM_TIMEOUT_S)}"

    # -- the rebalance callbacks, on the membership thread -------------------------------------------
    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        with self._lock:
            self._unclaimed.update(p.partition for p in partitions)
        self._claim_slots()

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {p.partition for p in partitions}
        with self._lock:
            self._unclaimed -= gone
            lost = sorted(gone & set(self._owned))
            for slot in lost:
                del self._owned[slot]
        if lost:
            logger.info("compute slots %s: revoked", lost)
            self._on_change()

    def _claim_slots(self) -> None:
        """Each assigned slot's claim record, its (log, offset) stored as the slot's token; a failure
        (Kafka or Redis away, or the log changed while claiming) is retried at the next poll."""
        with self._lock:
            pending = sorted(self._unclaimed)
        producer = self._producer
        assert producer is not None
        offsets: dict[int, int] = {}

        def delivered(err: KafkaError | None, message: Any) -> None:
            if err is None:
                offsets[message.partition()] = message.offset()
            elif err.fatal():  # (the idempotent producer's state is of a cluster that is gone)
                self._fatal = err

        try:  # the log before and after the claims: the same, they were appended to it
            log = self._log()
            for slot in pending:
                producer.produce(
                    self.topic, value=self.member.encode(), partition=slot, on_delivery=delivered
                )
            producer.flush(CLAIM_TIMEOUT_S)
            after = self._log()
        except (KafkaException, TimeoutError) as exc:
            logger.warning("compute slots: claiming failed (%r); retrying", exc)
            return
        finally:
            self._renew_producer()
        if after != log:
            logger.warning(
                "compute slots: the log changed from %s to %s while claiming; retrying", log, after
            )
            return
        claimed: dict[int, Token] = {}
        beaten: set[int] = set()
        try:
            for slot, offset in offsets.items():
                token = Token(log, offset)
                held_log, held_offset, before = (
                    v.decode() for v in self._claim(keys=[self.token_key(slot)], args=[log, offset])
                )
                held = Token(held_log, int(held_offset))
                if held != token:  # a later claim exists: assigned here, but somebody newer holds it
                    beaten.add(slot)
                    logger.warning(
                        "compute slot %d: claim %d behind %d; not taken", slot, offset, held.offset
                    )
                    continue
                claimed[slot] = token
                if before == "":
                    continue
                if before != log:
                    logger.warning(
                        "compute slot %d: its token was of log %s, now of this claim's %s (a new Kafka "
                        "cluster or topic; if both are still in use, the compute processes are split "
                        "across two Kafka clusters, and they take the slot from each other)",
                        slot,
                        before,
                        log,
                    )
        except redis.RedisError as exc:
            logger.warning("compute slots: storing claims failed (%s); retrying", exc)
        with self._lock:
            for slot, token in claimed.items():
                if slot in self._unclaimed:  # (not revoked meanwhile)
                    self._unclaimed.discard(slot)
                    self._owned[slot] = token
            # a claim beaten by a newer one is not retried: that owner's revocation comes
            self._unclaimed -= beaten
        if claimed:
            logger.info(
                "compute slots %s: claimed (tokens %s)",
                sorted(claimed),
                {s: str(t) for s, t in claimed.items()},
            )
            self._on_change()

    def _renew_producer(self) -> None:
        """A producer that met a fatal error (its idempotent state refused by a new cluster) is made
        anew: every later produce of the old one would fail."""
        if self._fatal is None:
            return
        logger.warning("compute slots: the claims' producer failed (%s); a new one", self._fatal)
        self._fatal = None
        self._producer = self._new_producer()
