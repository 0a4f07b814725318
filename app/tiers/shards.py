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
- **Fencing**: a process assigned a slot produces a claim record to the slot's partition; the
  record's offset is its token, and offsets of a partition only grow. It stores the largest token
  of the slot in Redis, and every result it publishes for the slot goes through one Lua script that
  publishes only while the caller's token is still the largest. A process that lost a slot (revoked,
  or out of the group while frozen, or killed mid-publish) can never publish it again: its next
  publish is refused and it drops the slot's computations.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import redis
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

logger = logging.getLogger(__name__)

SESSION_TIMEOUT_MS = 6000  # the broker's least by default (group.min.session.timeout.ms)
HEARTBEAT_MS = 500  # the survivors hear of a rebalance at their next heartbeat
POLL_SECONDS = 0.2  # the membership thread's poll: rebalance callbacks run inside it
CLAIM_TIMEOUT_S = 10.0
ADMIN_TIMEOUT_S = 30.0

# KEYS[1]: the slot's token; ARGV[1]: a claim's token. The largest token wins, returned.
_CLAIM = """
local held = tonumber(redis.call('GET', KEYS[1]) or '-1')
local token = tonumber(ARGV[1])
if token > held then
  redis.call('SET', KEYS[1], ARGV[1])
  return token
end
return held
"""
# KEYS[1]: the slot's token; ARGV: the caller's token, channel, payload. -1: the slot moved on.
_PUBLISH = """
local held = tonumber(redis.call('GET', KEYS[1]) or '-1')
if tonumber(ARGV[1]) < held then
  return -1
end
return redis.call('PUBLISH', ARGV[2], ARGV[3])
"""

Fence = tuple[int, int]  # (slot, token)


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
        self._owned: dict[int, int] = {}  # slot -> token
        self._unclaimed: set[int] = set()  # assigned, claim not stored yet (retried each poll)
        self._stop = threading.Event()
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._thread = threading.Thread(target=self._run, name="tier-shards", daemon=True)

    # -- what the compute tier asks ------------------------------------------------------------------
    def owner(self, key: str) -> Fence | None:
        """(slot, token) while this process owns the key's slot, else None."""
        slot = slot_of(key, self.slots)
        with self._lock:
            token = self._owned.get(slot)
        return None if token is None else (slot, token)

    def owned(self) -> dict[int, int]:
        with self._lock:
            return dict(self._owned)

    def token_key(self, slot: int) -> str:
        return f"{self.prefix}:tier:slot:{slot}:token"

    def publish(self, pipe: Any, fence: Fence, channel: str, payload: bytes) -> None:
        """Queues a fenced publish on `pipe`: it answers -1 if the slot has a newer owner."""
        slot, token = fence
        self._publish(keys=[self.token_key(slot)], args=[token, channel, payload], client=pipe)

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
        self.slots = self._ensure_topic()
        self._producer = Producer(
            {
                "bootstrap.servers": self._bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "log_level": 3,
            }
        )
        self._consumer = Consumer(
            {
                "bootstrap.servers": self._bootstrap,
                "group.id": self.topic,
                "client.id": f"sparkwire-compute-{self.member}",
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
                "log_level": 3,
            }
        )
        self._consumer.subscribe(
            [self.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        self._thread.start()
        logger.info("compute slots: %d, shared through Kafka group %s", self.slots, self.topic)

    def stop(self) -> None:
        """Leaves the group at once (the others take the slots without waiting for a timeout)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=15)
        with self._lock:
            self._owned.clear()
        self._producer = self._consumer = None  # (librdkafka's handles end with them)

    def _ensure_topic(self) -> int:
        admin = AdminClient({"bootstrap.servers": self._bootstrap, "log_level": 3})
        topics = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        if self.topic not in topics:
            created = admin.create_topics([NewTopic(self.topic, self.slots, 1)])[self.topic]
            try:
                created.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another process made it
                    raise
            topics = admin.list_topics(self.topic, timeout=ADMIN_TIMEOUT_S).topics
        count = len(topics[self.topic].partitions)
        if count != self.slots:
            logger.warning(
                "compute slots: topic %s has %d partitions, not %d: %d slots it is",
                self.topic,
                count,
                self.slots,
                count,
            )
        return count

    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        try:
            while not self._stop.is_set():
                consumer.poll(POLL_SECONDS)  # records are ignored: the assignment is what counts
                if self._unclaimed:
                    self._claim_slots()
        except Exception:
            logger.exception("compute slots: the membership thread failed")
        finally:
            consumer.close()  # leaves the group (revoking: the callback lets the slots go)
            if self._producer is not None:
                self._producer.flush(1)

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
        """Each assigned slot's claim record, its offset stored as the slot's token; a failure (Kafka
        or Redis away) is retried at the next poll."""
        with self._lock:
            pending = sorted(self._unclaimed)
        producer = self._producer
        assert producer is not None
        offsets: dict[int, int] = {}

        def delivered(err: KafkaError | None, message: Any) -> None:
            if err is None:
                offsets[message.partition()] = message.offset()

        for slot in pending:
            producer.produce(self.topic, value=self.member.encode(), partition=slot, on_delivery=delivered)
        producer.flush(CLAIM_TIMEOUT_S)
        claimed: dict[int, int] = {}
        beaten: set[int] = set()
        try:
            for slot, token in offsets.items():
                held = int(self._claim(keys=[self.token_key(slot)], args=[token]))
                if held == token:
                    claimed[slot] = token
                else:  # a later claim exists: assigned here, but somebody newer holds it
                    beaten.add(slot)
                    logger.warning("compute slot %d: claim %d behind %d; not taken", slot, token, held)
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
            logger.info("compute slots %s: claimed (tokens %s)", sorted(claimed), claimed)
            self._on_change()
