"""Redis Streams as the point log several Sparkwire servers share (layout: compute/storage/redis/layout.py).

Ingest appends each series' points to the stream of its partition (a hash of the series, as Kafka
producers partition by key). One request is one Lua script, so it is atomic: its series are
checked against the shared catalog (a kind conflict refuses the whole request), new series enter
the catalog, and the points are appended with MAXLEN or MINID trimming. A single writer thread
pipelines every request queued meanwhile into one round trip, and resolves each request's future
only once Redis has answered: a 200 means Redis acknowledged the points.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import orjson
import pyarrow as pa
import redis

from compute.storage.contract import LogUnavailable, Offsets, ReadResult, SeriesWrite, WriteRejected
from compute.storage.group_commit import run_groups
from compute.storage.horizon import redis_held_from
from compute.storage.records import POINT_SCHEMA
from compute.storage.redis import layout as rs
from compute.storage.series import SeriesInfo, SeriesKind
from compute.storage.series_ids import definition, parse_definition, series_id

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSource

    from compute.storage.sqlite.blocks import SeriesColumns

logger = logging.getLogger(__name__)

NANOS_PER_MS = 1_000_000
BARRIER_WAIT_S = 5.0  # longest wait for Redis' clock to pass a back-fill snapshot

# KEYS: catalog hash, catalog log, head hash, then one stream per write.
# ARGV: trim kind ("" | "MAXLEN" | "MINID"), trim argument, write count, then 8 per write:
#   series id, definition, partition, point count, ts bytes, value field, value bytes, newest ts (ms)
# Returns {"ok", created series ids...} or {"conflict", write index, the catalog's definition}.
_APPEND = """
local n = tonumber(ARGV[3])
for i = 0, n - 1 do
  local base = 4 + i * 8
  local have = redis.call('HGET', KEYS[1], ARGV[base])
  if have and have ~= ARGV[base + 1] then
    return {'conflict', tostring(i), have}
  end
end
local reply = {'ok'}
for i = 0, n - 1 do
  local base = 4 + i * 8
  local sid, p, count = ARGV[base], ARGV[base + 2], tonumber(ARGV[base + 3])
  if redis.call('HSETNX', KEYS[1], sid, ARGV[base + 1]) == 1 then
    redis.call('XADD', KEYS[2], '*', 'id', sid, 'def', ARGV[base + 1])
    table.insert(reply, sid)
  end
  if count > 0 then
    local total = redis.call('HINCRBY', KEYS[3], 'n:' .. p, count)
    local id
    if ARGV[1] == '' then
      id = redis.call('XADD', KEYS[3 + i + 1], '*',
        's', sid, 't', ARGV[base + 4], ARGV[base + 5], ARGV[base + 6], 'c', total)
    else
      id = redis.call('XADD', KEYS[3 + i + 1], ARGV[1], '~', ARGV[2], '*',
        's', sid, 't', ARGV[base + 4], ARGV[base + 5], ARGV[base + 6], 'c', total)
    end
    redis.call('HSET', KEYS[3], 'id:' .. p, id)
    local ahead = tonumber(ARGV[base + 7]) - tonumber(string.match(id, '^(%d+)'))
    if ahead > tonumber(redis.call('HGET', KEYS[3], 'f:' .. p) or '0') then
      redis.call('HSET', KEYS[3], 'f:' .. p, ahead)
    end
  end
end
return reply
"""


@dataclass
class Retention:
    """MINID trims entries older than `seconds`; otherwise MAXLEN keeps `max_entries` per partition
    (approximately, `~`: Redis trims whole nodes). Zero means keep everything."""

    seconds: float = 0.0
    max_entries: int = 0


@dataclass
class _Pending:
    writes: list[SeriesWrite]
    future: Future[int] = field(default_factory=Future)


class RedisLog:
    @property
    def data_source(self) -> type[DataSource]:
        # Imported here: an edge (app/tiers/edge.py) writes to this log without PySpark loaded.
        from compute.storage.redis.spark_source import RedisDataSource

        return RedisDataSource

    def __init__(
        self,
        url: str,
        partitions: int,
        consumer: str,
        retention: Retention | None = None,
        prefix: str = "sparkwire",
    ) -> None:
        if partitions < 1:
            raise ValueError("the Redis log needs at least one partition")
        self.url = url
        self.layout = rs.RedisLayout(prefix, partitions)
        self.consumer = consumer
        self.retention = retention or Retention()
        self._conn = rs.connect(url)
        self._outage_logged = float("-inf")  # when an unreachable Redis was last logged (monotonic)
        self._check_partition_count()
        self._append = self._conn.register_script(_APPEND)
        self._catalog_lock = threading.Lock()
        self._series: dict[int, SeriesInfo] = {}
        self._catalog_cursor = "0-0"
        self._in_order: list[SeriesInfo] = []  # the catalog in the log's order
        self._announced = 0  # how many of them poll_new_series has returned
        self._read_catalog()
        self._announced = len(self._in_order)  # known at start: nothing to announce yet
        self._position: dict[int, int] | None = None  # where `read` stands
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sparkwire-redis-writer", daemon=True)
        self._thread.start()

    def _check_partition_count(self) -> None:
        """Servers sharing a log must agree on its partitions, or some would miss some series."""
        key = self.layout.partition_count
        self._conn.set(key, self.layout.partitions, nx=True)
        stored = int(self._conn.get(key) or 0)
        if stored != self.layout.partitions:
            raise ValueError(
                f"the Sparkwire log in Redis ({self.url}, prefix '{self.layout.prefix}') has {stored} "
                f"partitions; this server is configured with {self.layout.partitions}"
            )

    # -- ingest ------------------------------------------------------------------------------------
    def submit(self, writes: list[SeriesWrite]) -> Future[int]:
        pending = _Pending(writes)
        self._queue.put(pending)
        return pending.future

    def _run(self) -> None:
        run_groups(self._queue, self._append_group)

    def _append_group(self, group: list[_Pending]) -> None:
        sent: list[tuple[_Pending, int]] = []
        pipe = self._conn.pipeline(transaction=False)
        for pending in group:
            try:
                keys, args = self._script_call(pending.writes)
            except WriteRejected as exc:
                pending.future.set_exception(exc)
                continue
            self._append(keys=keys, args=args, client=pipe)
            sent.append((pending, sum(len(w.ts) for w in pending.writes)))
        if not sent:
            return
        try:
            replies = pipe.execute(raise_on_error=False)
        except (redis.ConnectionError, redis.TimeoutError) as exc:  # unreachable: nothing is acknowledged
            now = time.monotonic()
            if now - self._outage_logged >= 10.0:  # one line per 10 s of outage, not one per request
                self._outage_logged = now
                logger.warning("Redis append failed, writes answered 503 until it is back: %s", exc)
            unavailable = LogUnavailable(f"the point log (Redis) is unreachable: {exc}")
            for pending, _ in sent:
                pending.future.set_exception(unavailable)
            return
        except Exception as exc:  # anything else is a bug: nothing is acknowledged either
            logger.exception("Redis append failed")
            for pending, _ in sent:
                pending.future.set_exception(exc)
            return
        for (pending, count), reply in zip(sent, replies, strict=True):
            if isinstance(reply, Exception):
                pending.future.set_exception(reply)
            elif reply[0] == b"conflict":
                write = pending.writes[int(reply[1])]
                have = parse_definition(series_id(write.key), reply[2])
                if have.key != write.key:  # two keys with one 63-bit hash: refuse, never mix them
                    error = WriteRejected(f"series {have.key} and {write.key} hash to one id")
                    pending.future.set_exception(error)
                else:
                    pending.future.set_exception(_kind_conflict(write, have.kind))
            else:
                pending.future.set_result(count)

    def _script_call(self, writes: list[SeriesWrite]) -> tuple[list[str], list[bytes | str | int]]:
        """Keys and arguments of one request's append; refuses a request that contradicts itself
        or the catalog as this process knows it (the script checks again atomically)."""
        retention = self.retention
        if retention.seconds > 0:
            floor_ms = time.time_ns() // NANOS_PER_MS - int(retention.seconds * 1000)
            trim: list[bytes | str | int] = ["MINID", f"{floor_ms}-0"]
        elif retention.max_entries > 0:
            trim = ["MAXLEN", retention.max_entries]
        else:
            trim = ["", 0]
        keys = [self.layout.catalog, self.layout.catalog_log, self.layout.head]
        args: list[bytes | str | int] = [*trim, len(writes)]
        kinds: dict[int, SeriesKind] = {}
        for write in writes:
            sid = series_id(write.key)
            known = self._series.get(sid)
            kind = kinds.setdefault(sid, known.kind if known is not None else write.kind)
            if kind is not write.kind:
                raise _kind_conflict(write, kind)
            ts = np.asarray(write.ts, dtype="<i8")
            if write.kind is SeriesKind.NUMERIC:
                field_name, values = "v", np.asarray(write.values, dtype="<f8").tobytes()
            else:
                field_name, values = "e", orjson.dumps(list(write.values))
            partition = self.layout.partition_of(sid)
            newest_ms = int(ts.max()) // NANOS_PER_MS if len(ts) else 0
            keys.append(self.layout.stream(partition))
            args += [sid, definition(write.kind, write.key), partition, len(ts)]
            args += [ts.tobytes(), field_name, values, newest_ms]
        return keys, args

    # -- the series catalog ------------------------------------------------------------------------
    def series(self) -> list[SeriesInfo]:
        """The shared catalog as of now: read on from where it stood (an edge, whose log nothing
        polls, listed only the series it read at its start). With Redis unreachable, the catalog
        as last read."""
        with self._catalog_lock:
            try:
                self._read_catalog()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                now = time.monotonic()
                if now - self._outage_logged >= 10.0:  # one line per 10 s of outage, as the writer's
                    self._outage_logged = now
                    logger.warning("the series catalog could not be read on (%s): listed as last read", exc)
            return list(self._series.values())

    def poll_new_series(self) -> list[SeriesInfo]:
        """The series added to the catalog since the last call (or since the start)."""
        with self._catalog_lock:
            self._read_catalog()
            new = self._in_order[self._announced :]
            self._announced = len(self._in_order)
        return new

    def _read_catalog(self) -> None:
        """Catch up with the shared catalog (called with the catalog lock held, or at start)."""
        while True:
            reply = rs.xread(self._conn, {self.layout.catalog_log: self._catalog_cursor}, count=10_000)
            if not reply:
                return
            entries = reply[0][1]
            for eid, fields in entries:
                info = parse_definition(int(fields[b"id"]), fields[b"def"])
                if info.id not in self._series:
                    self._series[info.id] = info
                    self._in_order.append(info)
                self._catalog_cursor = eid.decode()

    # -- the source contract -----------------------------------------------------------------------
    def partitions(self) -> list[int]:
        return list(range(self.layout.partitions))

    def read(self, limit: int, timeout_ms: int) -> ReadResult:
        if self._position is None:
            committed = rs.load_committed(self._conn, self.layout, self.consumer)
            self._position = {p: committed.get(p, 0) for p in self.partitions()}
        streams = {self.layout.stream(p): rs.entry_id(seq) for p, seq in self._position.items()}
        # BLOCK 0 would wait forever; a block longer than the socket timeout would fail.
        block = min(timeout_ms, int(rs.REPLY_TIMEOUT_S * 1000) // 2) if timeout_ms > 0 else None
        reply = rs.xread(self._conn, streams, count=max(limit, 1), block=block)
        by_stream = {name.decode(): entries for name, entries in reply}
        taken: list[rs.Entry] = []
        for p in self.partitions():
            for eid, fields in by_stream.get(self.layout.stream(p), []):
                if len(taken) >= limit:
                    break
                taken.append((eid, fields))
                self._position[p] = rs.seq_of(eid)
        batch = rs.to_batch(taken)
        table = POINT_SCHEMA.empty_table() if batch is None else pa.Table.from_batches([batch])
        return ReadResult(table, dict(self._position))

    def commit(self, offsets: Offsets) -> None:
        rs.store_committed(self._conn, self.layout, self.consumer, offsets)

    def pending(self) -> int:
        """Points appended after this consumer's committed entries (each entry records the
        partition's point count at its append); -1 if a committed entry was trimmed away."""
        heads = rs.head(self._conn, self.layout)
        committed = rs.load_committed(self._conn, self.layout, self.consumer)
        total = 0
        for p, (last, count) in heads.items():
            seq = committed.get(p, 0)
            if seq == 0:  # nothing of this partition committed yet
                total += count
                continue
            if seq >= last:
                continue
            entries = rs.xrange(self._conn, self.layout.stream(p), rs.entry_id(seq), rs.entry_id(seq), 1)
            if not entries:
                return -1
            total += count - int(entries[0][1][b"c"])
        return total

    def ready(self) -> bool:
        try:
            return bool(self._conn.ping())
        except redis.RedisError:
            return False

    # -- Spark -------------------------------------------------------------------------------------
    def _options(self) -> dict[str, str]:
        return {"url": self.url, "prefix": self.layout.prefix, "partitions": str(self.layout.partitions)}

    def stream_options(self) -> dict[str, str]:
        """The stream starts at every partition's current end, committed as this consumer's start."""
        start = rs.head(self._conn, self.layout)
        rs.store_committed(self._conn, self.layout, self.consumer, {p: seq for p, (seq, _) in start.items()})
        as_json = "{" + ",".join(f'"{p}":[{seq},{n}]' for p, (seq, n) in start.items()) + "}"
        return {**self._options(), "consumer": self.consumer, "start": as_json}

    def end_offset(self) -> int:
        """A snapshot across all partitions from Redis' one clock: t = max(now, newest entry id),
        taken atomically. Waiting until Redis' clock passes t makes every entry at or below t
        readable, and every later append gets an id above t."""
        pipe = self._conn.pipeline(transaction=True)
        pipe.time()
        pipe.hgetall(self.layout.head)
        (seconds, micros), fields = pipe.execute()
        t_ms = seconds * 1000 + micros // 1000
        for seq, _ in rs.head_of(fields, self.layout).values():
            t_ms = max(t_ms, seq >> rs.SEQ_BITS)
        deadline = time.monotonic() + BARRIER_WAIT_S
        while True:
            seconds, micros = self._conn.time()
            if seconds * 1000 + micros // 1000 > t_ms:
                return rs.seq_at_ms(t_ms + 1) - 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"Redis' clock did not pass {t_ms} ms within {BARRIER_WAIT_S} s")
            time.sleep(0.0005)

    def backfill_options(self, series_ids: Sequence[int], from_ts: int, upto_seq: int) -> dict[str, str]:
        return {
            **self._options(),
            "series_ids": ",".join(map(str, series_ids)),
            "from_ts": str(from_ts),
            "upto_seq": str(upto_seq),
        }

    # Redis Streams hold no index by series and time: history is read by Spark's executors.
    @property
    def driver_reads(self) -> bool:
        return False

    def read_history(self, series_ids: Sequence[int], from_ts: int, upto_seq: int) -> pa.Table:
        raise NotImplementedError("the redis log is read by Spark's executors, partition by partition")

    def read_history_columns(
        self,
        series_ids: Sequence[int],
        from_ts: int,
        upto_seq: int,
        spare: Callable[[int], int] | None = None,
    ) -> dict[int, SeriesColumns]:
        raise NotImplementedError("the redis log is read by Spark's executors, partition by partition")

    # -- optional capabilities -----------------------------------------------------------------------
    @property
    def spark_frames(self) -> None:
        return None  # read through its Python data source

    @property
    def local_writer(self) -> None:
        return None  # kept by redis-server

    def held_from(self, series_ids: Sequence[int]) -> int | None:
        return redis_held_from(self.url, self.layout, series_ids)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)
        self._conn.close()


def _kind_conflict(write: SeriesWrite, kind: SeriesKind) -> WriteRejected:
    return WriteRejected(
        f"channel '{write.key.channel}' with tags {dict(write.key.tags)} holds "
        f"{kind.value} points; this request writes {write.kind.value} points"
    )
