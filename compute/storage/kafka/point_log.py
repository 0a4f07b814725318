"""Kafka as the point log several Sparkwire servers share (layout: compute/storage/kafka/layout.py).

Ingest is one writer thread with one transactional producer (confluent-kafka, on librdkafka: an
idempotent producer, `acks=all`, transactions). Everything queued since its last round is one Kafka
transaction: each request's series blocks (keyed by series, so a series stays in one partition)
and the catalog records of series new to it, committed together; every request's future resolves
only once the commit is acknowledged, so a 200 means Kafka holds the points on every in-sync
replica. A request refused (a kind conflict with the catalog as this process knows it) is refused
before the transaction begins. When the commit fails (the broker away), the transaction is
aborted, or the producer is dropped and its successor's `init_transactions` aborts it (Kafka
fences the old one): readers read `read_committed`, so nothing of the group is ever visible, and
every request of it gets `LogUnavailable` (ingest answers 503).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from compute.storage.contract import LogUnavailable, Offsets, ReadResult, SeriesWrite, WriteRejected
from compute.storage.group_commit import run_groups
from compute.storage.kafka.layout import (
    FUTURE_MARGIN_MS,
    SEQ_BITS,
    SEQ_MASK,
    KafkaLayout,
    encode_blocks,
    seq_at_ms,
)
from compute.storage.series import SeriesInfo, SeriesKind
from compute.storage.series_ids import definition, parse_definition, series_id

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource

    from compute.storage.kafka.spark_frames import KafkaFrames
    from compute.storage.sqlite.blocks import SeriesColumns

logger = logging.getLogger(__name__)

ADMIN_TIMEOUT_S = 10.0
NANOS_PER_MS = 1_000_000
INIT_TIMEOUT_S = 5.0  # a producer that cannot reach the transaction coordinator this soon: 503
COMMIT_TIMEOUT_S = 6.0
DELIVERY_TIMEOUT_MS = 5_000  # a record not acknowledged this soon fails its transaction
BARRIER_WAIT_S = 5.0
TRANSACTION_TIMEOUT_MS = 60_000  # the broker aborts a transaction left open this long
# Another writer's transaction open across a snapshot ends by the time the broker aborts it.
SETTLE_WAIT_S = TRANSACTION_TIMEOUT_MS / 1000 + 10.0
CATALOG_CATCH_UP_S = 10.0
POLL_CATALOG_S = 1.0  # a micro-batch waits at most this long for the catalog's end
# librdkafka logs every failed reconnect to stderr; the writer logs an outage itself, once per 10 s.
QUIET = {"log_level": 2}
_NO_LEADER_YET = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)


@dataclass
class _Pending:
    writes: list[SeriesWrite]
    future: Future[int] = field(default_factory=Future)


@dataclass
class _Barrier:
    """A record on every partition, in a transaction of its own: the broker's append time of each."""

    future: Future[dict[int, tuple[int, int]]] = field(default_factory=Future)  # p -> (ms, offset)


class KafkaLog:
    def __init__(
        self, bootstrap: str, topic: str, partitions: int, consumer: str, retention_s: float = 0.0
    ) -> None:
        if partitions < 1:
            raise ValueError("the Kafka log needs at least one partition")
        self.bootstrap = bootstrap
        self.layout = KafkaLayout(topic, partitions)
        self.consumer = consumer
        self.retention_s = retention_s
        self._admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        self._ensure_topics()
        self._transactional_id = f"sparkwire-{topic}-{consumer}"
        self._producer: Producer | None = None
        self._outage_logged = float("-inf")
        self._catalog_lock = threading.Lock()
        self._series: dict[int, SeriesInfo] = {}
        self._in_order: list[SeriesInfo] = []  # the catalog in the order this process learnt it
        self._announced = 0  # how many of them poll_new_series has returned
        # Ends (watermarks) are asked of a consumer that fetches nothing: a broker answers one
        # connection's requests in order, so asked of a consuming one, the question waits behind its
        # fetch, which the broker holds up to fetch.wait.max.ms (500 ms) at the end of a partition.
        self._meta_lock = threading.Lock()
        self._meta = self._consumer("meta")
        # ...and of one that sees records of transactions not yet settled (the high watermark)
        self._appended = self._consumer("appended", {"isolation.level": "read_uncommitted"})
        self._catalog = self._consumer("catalog", {"enable.partition.eof": True})
        self._catalog.assign([TopicPartition(self.layout.catalog_topic, 0, OFFSET_BEGINNING)])
        self._catch_up_catalog()
        self._announced = len(self._in_order)  # known at start: nothing to announce yet
        self._reader: Consumer | None = None  # `read`'s consumer, made on first use
        self._queue: queue.SimpleQueue[_Pending | _Barrier | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sparkwire-kafka-writer", daemon=True)
        self._thread.start()

    # -- topics --------------------------------------------------------------------------------------
    def _ensure_topics(self) -> None:
        """Create the points and catalog topics if missing; servers sharing a log must agree on its
        partitions, or some would miss some series."""
        try:
            topics = self._admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        except KafkaException as exc:
            raise LogUnavailable(f"Kafka at {self.bootstrap} is unreachable: {exc}") from exc
        have = topics.get(self.layout.topic)
        if have is not None and len(have.partitions) != self.layout.partitions:
            raise ValueError(
                f"the Kafka topic {self.layout.topic} at {self.bootstrap} has {len(have.partitions)} "
                f"partitions; this server is configured with {self.layout.partitions}"
            )
        retention_ms = str(int(self.retention_s * 1000)) if self.retention_s > 0 else "-1"
        wanted = []
        if have is None:
            points = {"message.timestamp.type": "LogAppendTime", "retention.ms": retention_ms}
            wanted.append(NewTopic(self.layout.topic, self.layout.partitions, 1, config=points))
        if self.layout.catalog_topic not in topics:
            catalog = {"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime"}
            wanted.append(NewTopic(self.layout.catalog_topic, 1, 1, config=catalog))
        for name, created in self._admin.create_topics(wanted).items() if wanted else []:
            try:
                created.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another server made it
                    raise LogUnavailable(f"creating Kafka topic {name} failed: {exc}") from exc

    def _consumer(self, role: str, extra: dict[str, Any] | None = None) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"sparkwire-{role}-{self.consumer}",  # never joined: partitions are assigned
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                **QUIET,
                **(extra or {}),
            }
        )

    # -- ingest ------------------------------------------------------------------------------------
    def submit(self, writes: list[SeriesWrite]) -> Future[int]:
        pending = _Pending(writes)
        self._queue.put(pending)
        return pending.future

    def _run(self) -> None:
        run_groups(self._queue, self._append_group)

    def _transactional_producer(self) -> Producer:
        if self._producer is None:
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "transactional.id": self._transactional_id,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 1,
                    "message.timeout.ms": DELIVERY_TIMEOUT_MS,
                    "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                    "compression.type": "none",  # float64 columns barely compress; CPU is scarcer
                    **QUIET,
                }
            )
            producer.init_transactions(INIT_TIMEOUT_S)  # fences (aborts) a predecessor's open transaction
            self._producer = producer
        return self._producer

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(Exception):  # already broken: its successor fences it anyway
                producer.purge(in_queue=True, in_flight=True)

    def _append_group(self, group: list[_Pending | _Barrier]) -> None:
        kinds: dict[int, SeriesKind] = {}
        new_series: dict[int, SeriesInfo] = {}
        accepted: list[tuple[_Pending, list[tuple[int, int, bytes]]]] = []
        barriers: list[_Barrier] = []
        for item in group:
            if isinstance(item, _Barrier):
                barriers.append(item)
                continue
            try:
                accepted.append((item, self._records(item.writes, kinds, new_series)))
            except WriteRejected as exc:
                item.future.set_exception(exc)
        if not accepted and not barriers:
            return
        appended: dict[int, tuple[int, int]] = {}

        def on_barrier(err: KafkaError | None, msg: Message) -> None:
            partition, offset = msg.partition(), msg.offset()
            if err is None and partition is not None and offset is not None:
                appended[partition] = (msg.timestamp()[1], offset)

        try:
            producer = self._transactional_producer()
            producer.begin_transaction()
            for info in new_series.values():
                value = definition(info.kind, info.key).encode()
                self._produce(producer, self.layout.catalog_topic, str(info.id).encode(), value, 0)
            for _, records in accepted:
                for sid, partition, value in records:
                    self._produce(producer, self.layout.topic, str(sid).encode(), value, partition)
            if barriers:
                for p in range(self.layout.partitions):
                    self._produce(producer, self.layout.topic, b"", b"", p, on_barrier)
            producer.flush(COMMIT_TIMEOUT_S)  # serves the barriers' delivery reports
            producer.commit_transaction(COMMIT_TIMEOUT_S)
        except (KafkaException, BufferError) as exc:
            self._abort()
            now = time.monotonic()
            if now - self._outage_logged >= 10.0:  # one line per 10 s of outage, not one per request
                self._outage_logged = now
                logger.warning("Kafka append failed, writes answered 503 until it is back: %s", exc)
            unavailable = LogUnavailable(f"the point log (Kafka at {self.bootstrap}) is unavailable: {exc}")
            for pending, _ in accepted:
                pending.future.set_exception(unavailable)
            for barrier in barriers:
                barrier.future.set_exception(unavailable)
            return
        if new_series:
            with self._catalog_lock:
                for info in new_series.values():
                    if info.id not in self._series:
                        self._series[info.id] = info
                        self._in_order.append(info)
        for pending, _ in accepted:
            pending.future.set_result(sum(len(w.ts) for w in pending.writes))
        for barrier in barriers:
            if len(appended) == self.layout.partitions:
                barrier.future.set_result(dict(appended))
            else:
                barrier.future.set_exception(LogUnavailable("a snapshot barrier was not acknowledged"))

    def _abort(self) -> None:
        producer = self._producer
        if producer is None:
            return
        try:
            producer.abort_transaction(COMMIT_TIMEOUT_S)
        except KafkaException:  # the broker away: the next producer's init_transactions aborts it
            self._drop_producer()

    @staticmethod
    def _produce(
        producer: Producer,
        topic: str,
        key: bytes,
        value: bytes,
        partition: int,
        on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {"key": key, "value": value, "partition": partition}
        if on_delivery is not None:
            kwargs["on_delivery"] = on_delivery
        while True:
            try:
                producer.produce(topic, **kwargs)
                return
            except BufferError:  # librdkafka's queue is full: let it send, then go on
                producer.poll(0.05)

    def _records(
        self, writes: list[SeriesWrite], kinds: dict[int, SeriesKind], new_series: dict[int, SeriesInfo]
    ) -> list[tuple[int, int, bytes]]:
        """One request's records (series id, partition, value); refuses a request that contradicts
        itself, the group it is sent in or the catalog as this process knows it."""
        out: list[tuple[int, int, bytes]] = []
        mine: dict[int, SeriesKind] = {}
        for write in writes:
            sid = series_id(write.key)
            known = self._series.get(sid) or new_series.get(sid)
            if known is not None and known.key != write.key:  # two keys with one 63-bit hash
                raise WriteRejected(f"series {known.key} and {write.key} hash to one id")
            kind = mine.setdefault(sid, known.kind if known is not None else kinds.get(sid, write.kind))
            if kind is not write.kind:
                raise _kind_conflict(write, kind)
            ts = np.asarray(write.ts, dtype=np.int64)
            partition = self.layout.partition_of(sid)
            out += [(sid, partition, value) for value in encode_blocks(write.kind, ts, write.values)]
        for write in writes:  # the request is accepted: its new series enter the group's catalog
            sid = series_id(write.key)
            kinds[sid] = mine[sid]
            if sid not in self._series and sid not in new_series:
                new_series[sid] = SeriesInfo(sid, write.key, write.kind)
        return out

    # -- the series catalog ------------------------------------------------------------------------
    def series(self) -> list[SeriesInfo]:
        """The shared catalog as of now, other writers' series included: read to the topic's end, or
        `LogUnavailable` (a subscription routed to part of the catalog would be back-filled without
        the rest, and then skip those points as back-filled)."""
        with self._catalog_lock:
            self._read_catalog_to_end(CATALOG_CATCH_UP_S)
            return list(self._series.values())

    def poll_new_series(self) -> list[SeriesInfo]:
        """New series, other servers' included, up to the catalog's end as of this call. The engine
        polls before filtering a micro-batch, whose points were committed with their catalog
        records (one transaction): read to the end, the catalog knows every series of the batch."""
        with self._catalog_lock:
            self._read_on()
            new = self._in_order[self._announced :]
            self._announced = len(self._in_order)
        return new

    def _read_on(self) -> None:
        """The catalog topic read to its end (called with the catalog lock held)."""
        try:
            self._read_catalog_to_end(POLL_CATALOG_S)
        except LogUnavailable:  # the broker away: what has been fetched already, the rest next time
            self._read_catalog(0)

    def _read_catalog(self, timeout: float) -> int:
        """Take what the catalog topic has for us now; the furthest end the consumer reported on the
        way (-1 if none). An end report can be stale: queued when an earlier read reached the end,
        it says nothing of records committed since."""
        reported_end = -1
        while True:
            messages = self._catalog.consume(num_messages=10_000, timeout=timeout)
            for msg in messages:
                error = msg.error()
                if error is not None:
                    offset = msg.offset()
                    if error.code() == KafkaError._PARTITION_EOF and offset is not None:
                        reported_end = max(reported_end, offset)
                    continue
                key, value = msg.key(), msg.value()
                if key is None or not value:
                    continue
                info = parse_definition(int(key), value)
                if info.id not in self._series:
                    self._series[info.id] = info
                    self._in_order.append(info)
            if not messages:
                return reported_end
            timeout = 0

    def _read_catalog_to_end(self, wait_s: float) -> None:
        """Read the catalog topic up to its end as of now, within `wait_s`: every record appended
        before this call (its high watermark), once its transaction is settled. A write is answered
        once its transaction commits, but the commit markers reach the partitions a moment later:
        up to then the series is past the last stable offset, where read_committed reading stops.
        Read to the stable end only, a series written just before a subscribe was missed in 22 of 40
        tries on an idle machine, and its back-fill with it. The consumer's position stops short of
        a commit marker (not a record), so the end the consumer reports counts too, when it is this
        one: a report queued by an earlier read is stale."""
        tp = TopicPartition(self.layout.catalog_topic, 0)
        with self._meta_lock:
            end = self._end_of(self._appended, tp, wait_s)
        deadline = time.monotonic() + wait_s
        while True:
            position = self._catalog.position([tp])[0].offset
            if end <= 0 or position >= end:
                return
            if self._read_catalog(0.05) >= end:
                return
            if time.monotonic() > deadline:
                raise LogUnavailable(
                    f"the series catalog in {self.layout.catalog_topic} was not read in time"
                )

    def _catch_up_catalog(self) -> None:
        """Read the catalog topic up to its end as of now (a server that starts knows every series)."""
        with self._catalog_lock:
            self._read_catalog_to_end(CATALOG_CATCH_UP_S)

    # -- the source contract -----------------------------------------------------------------------
    def partitions(self) -> list[int]:
        return list(range(self.layout.partitions))

    def _ends(self) -> dict[int, int]:
        """Each partition's next offset (its high watermark)."""
        with self._meta_lock:
            out = {}
            for p in self.partitions():
                out[p] = self._end_of(self._meta, TopicPartition(self.layout.topic, p))
            return out

    def _end_of(self, consumer: Consumer, tp: TopicPartition, wait_s: float = ADMIN_TIMEOUT_S) -> int:
        """A partition's high watermark; a topic created a moment ago may have no leader yet."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return int(consumer.get_watermark_offsets(tp, timeout=wait_s, cached=False)[1])
            except KafkaException as exc:
                if not exc.args[0].retriable() and exc.args[0].code() not in _NO_LEADER_YET:
                    raise LogUnavailable(f"Kafka at {self.bootstrap} is unreachable: {exc}") from exc
                if time.monotonic() > deadline:
                    raise LogUnavailable(f"Kafka at {self.bootstrap} is unreachable: {exc}") from exc
                time.sleep(0.1)

    def read(self, limit: int, timeout_ms: int) -> ReadResult:
        """Records after this reader's position (at first the log's end), decoded by the driver."""
        import pyarrow as pa  # an edge, which only writes, never loads Arrow (~35 MB)

        from compute.storage.kafka.blocks import BLOCK_SCHEMA, points_of_blocks

        if self._reader is None:
            self._reader = self._consumer("reader")
            self._reader.assign([TopicPartition(self.layout.topic, p, o) for p, o in self._ends().items()])
        messages = self._reader.consume(num_messages=max(limit, 1), timeout=timeout_ms / 1000)
        seqs, sids, blocks = [], [], []
        for msg in messages:
            key, value, offset = msg.key(), msg.value(), msg.offset()
            if msg.error() is not None or not value or key is None or offset is None:
                continue
            seqs.append(msg.timestamp()[1] << SEQ_BITS | offset & SEQ_MASK)
            sids.append(int(key))
            blocks.append(value)
        table = points_of_blocks(pa.table([seqs, sids, blocks], schema=BLOCK_SCHEMA))
        positions = self._reader.position(self._reader.assignment())
        return ReadResult(table, {tp.partition: tp.offset - 1 for tp in positions if tp.offset >= 0})

    def commit(self, offsets: Offsets) -> None:
        """Spark keeps the stream's offsets in its checkpoint; nothing is committed to Kafka."""

    def pending(self) -> int:
        return -1  # offsets are Spark's (its checkpoint): not counted in points here

    def ready(self) -> bool:
        try:
            self._admin.list_topics(topic=self.layout.topic, timeout=2.0)
            return True
        except KafkaException:
            return False

    # -- Spark -------------------------------------------------------------------------------------
    @property
    def data_source(self) -> type[DataSource]:
        raise NotImplementedError("the Kafka log is read by Spark's built-in Kafka source (spark_frames)")

    @property
    def spark_frames(self) -> KafkaFrames:
        from compute.storage.kafka.spark_frames import KafkaFrames

        return KafkaFrames(self.bootstrap, self.layout)

    def stream_options(self) -> dict[str, str]:
        """The stream starts at every partition's current end."""
        offsets = {str(p): o for p, o in self._ends().items()}
        return {"startingOffsets": json.dumps({self.layout.topic: offsets})}

    def _barrier(self) -> dict[int, tuple[int, int]]:
        barrier = _Barrier()
        self._queue.put(barrier)
        return barrier.future.result(timeout=COMMIT_TIMEOUT_S * 3)

    def end_offset(self) -> int:
        """A snapshot of every partition on the brokers' clock: a barrier record on each partition
        gives each its append time, T the latest of them; a second round of barriers whose append
        times all pass T proves that every record appended from now on has a seq above T's last.
        Then every transaction holding a record at or below T has ended (`_settled`), so a
        read_committed back-fill sees all of it."""
        first = self._barrier()
        t_ms = max(ms for ms, _ in first.values())
        deadline = time.monotonic() + BARRIER_WAIT_S
        while True:
            time.sleep(0.001)
            later = self._barrier()
            if min(ms for ms, _ in later.values()) > t_ms:
                self._settled({p: offset for p, (_, offset) in later.items()})
                return seq_at_ms(t_ms + 1) - 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka's append times did not pass {t_ms} ms within {BARRIER_WAIT_S} s")

    def _settled(self, barriers: dict[int, int]) -> None:
        """Waits until each partition's last stable offset (where read_committed reading stops) is
        past its second-round barrier, so that every record appended before it is committed or
        aborted. This process's own records were committed before its barriers, but another
        process writing the same log (a second server) may hold a transaction open across the
        snapshot: its points, appended before T, would be left out of the back-fill, then skipped
        by the stream as back-filled once committed. Its transaction ends within the transaction
        timeout (the broker aborts it)."""
        began = time.monotonic()
        warned = False
        while True:
            ends = self._ends()  # read_committed: the last stable offsets
            if all(ends[p] > offset for p, offset in barriers.items()):
                return
            waited = time.monotonic() - began
            if waited > SETTLE_WAIT_S:
                raise RuntimeError(
                    f"a Kafka transaction stayed open for {SETTLE_WAIT_S:.0f} s across a snapshot"
                )
            if waited > 1.0 and not warned:
                warned = True
                logger.warning("a snapshot of the Kafka log waits for another writer's open transaction")
            time.sleep(0.005)

    def backfill_options(self, series_ids: Sequence[int], from_ts: int, upto_seq: int) -> dict[str, str]:
        return {
            "series_ids": ",".join(map(str, series_ids)),
            "from_ts": str(from_ts),
            "upto_seq": str(upto_seq),
        }

    # Kafka holds no index by series: history is read by Spark's executors (a batch job).
    @property
    def driver_reads(self) -> bool:
        return False

    def read_history(self, series_ids: Sequence[int], from_ts: int, upto_seq: int) -> pa.Table:
        raise NotImplementedError("the Kafka log is read by Spark's Kafka source, partition by partition")

    def read_history_columns(
        self,
        series_ids: Sequence[int],
        from_ts: int,
        upto_seq: int,
        spare: Callable[[int], int] | None = None,
    ) -> dict[int, SeriesColumns]:
        raise NotImplementedError("the Kafka log is read by Spark's Kafka source, partition by partition")

    # -- optional capabilities -----------------------------------------------------------------------
    @property
    def local_writer(self) -> None:
        return None  # kept by the brokers

    def held_from(self, series_ids: Sequence[int]) -> int | None:
        """The timestamp (ns) from which the log holds every point of these series; None when none
        of their partitions lost records. Retention deletes a partition's oldest segments, which
        moves its log start offset (the low watermark) past 0; its first record left was appended
        at t, and a point is stamped at most FUTURE_MARGIN_MS after its append, so every point
        stamped from t + the margin on is still there."""
        held: int | None = None
        for p in sorted({self.layout.partition_of(sid) for sid in series_ids}):
            appended_ms = self._first_append_ms(TopicPartition(self.layout.topic, p))
            if appended_ms is None:
                continue
            bound = (appended_ms + FUTURE_MARGIN_MS) * NANOS_PER_MS
            held = bound if held is None else max(held, bound)
        return held

    def _first_append_ms(self, tp: TopicPartition) -> int | None:
        """When the partition's first record still held was appended; None if it lost none."""
        with self._meta_lock:
            try:
                low, high = self._meta.get_watermark_offsets(tp, timeout=ADMIN_TIMEOUT_S, cached=False)
            except KafkaException as exc:
                raise LogUnavailable(f"Kafka at {self.bootstrap} is unreachable: {exc}") from exc
        if low <= 0:
            return None
        now_ms = int(time.time() * 1000)
        if low >= high:  # every record deleted: nothing appended before now is held
            return now_ms
        # a consumer of its own: `_meta` must never fetch (its questions would wait behind fetches)
        probe = self._consumer("horizon", {"enable.partition.eof": True})
        try:
            probe.assign([TopicPartition(tp.topic, tp.partition, low)])
            deadline = time.monotonic() + ADMIN_TIMEOUT_S
            while time.monotonic() < deadline:
                msg = probe.poll(0.2)
                if msg is None:
                    continue
                error = msg.error()
                if error is None:
                    return int(msg.timestamp()[1])  # LogAppendTime: the broker's clock at the append
                if error.code() == KafkaError._PARTITION_EOF:  # only markers or aborted records left
                    return now_ms
            raise LogUnavailable(
                f"Kafka at {self.bootstrap} did not return partition {tp.partition}'s first record"
            )
        finally:
            probe.close()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)
        self._drop_producer()
        for consumer in (self._catalog, self._meta, self._appended, self._reader):
            if consumer is not None:
                consumer.close()


def _kind_conflict(write: SeriesWrite, kind: SeriesKind) -> WriteRejected:
    return WriteRejected(
        f"channel '{write.key.channel}' with tags {dict(write.key.tags)} holds "
        f"{kind.value} points; this request writes {write.kind.value} points"
    )
