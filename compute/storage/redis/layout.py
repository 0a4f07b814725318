"""How Sparkwire's point log lies in Redis, shared by the writer (point_log.py beside this) and the
Spark readers (spark_source.py, which run in executors and see only their options).

- `{prefix}:points:{p}`: one stream per partition. An entry holds one series' points of one
  request: `s` series id, `t` int64 ns timestamps and `v` float64 values (little-endian bytes, so
  NaN and every timestamp round-trip exactly) or `e` a JSON list of strings, and `c` the number of
  points the partition had received once this entry was added (for lag).
- Entry ids are Redis' `<ms>-<n>` (its clock at the append), so time ranges are id ranges. As an
  int64 offset an id is `ms << 20 | n`: ordered like the ids, comparable across partitions.
- `{prefix}:series` (hash, id -> kind and key) and `{prefix}:series-log` (stream of new series):
  the catalog shared by every server. A series id is a stable hash of its key, so every server
  agrees on it without asking; a series lives in partition `id % partitions`.
- `{prefix}:head` (hash): per partition the last entry id (`id:p`), the point count (`n:p`) and how
  far ahead of their append time points have been stamped at most (`f:p`, ms; back-fill reads
  that much further back so future-stamped points are not missed).
- `{prefix}:committed:{consumer}` (hash): each consumer's committed entry id per partition.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import redis

from compute.storage.records import POINT_SCHEMA

SEQ_BITS = 20  # 2^20 entries per millisecond per partition; ms << 20 stays in int64 until ~2248
_SEQ_MASK = (1 << SEQ_BITS) - 1
READ_CHUNK = 2_000  # entries per XRANGE call
COMMITTED_TTL_S = 7 * 86400  # a consumer that stops committing is forgotten after a week

Entry = tuple[bytes, dict[bytes, bytes]]


@dataclass(frozen=True)
class RedisLayout:
    prefix: str
    partitions: int

    def stream(self, partition: int) -> str:
        return f"{self.prefix}:points:{partition}"

    @property
    def catalog(self) -> str:
        return f"{self.prefix}:series"

    @property
    def catalog_log(self) -> str:
        return f"{self.prefix}:series-log"

    @property
    def head(self) -> str:
        return f"{self.prefix}:head"

    @property
    def partition_count(self) -> str:
        return f"{self.prefix}:partitions"

    def committed(self, consumer: str) -> str:
        return f"{self.prefix}:committed:{consumer}"

    def partition_of(self, series_id: int) -> int:
        return series_id % self.partitions


# -- offsets ---------------------------------------------------------------------------------------
def seq_of(entry_id: bytes | str) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, n = text.split("-")
    return int(ms) << SEQ_BITS | int(n)


def entry_id(seq: int) -> str:
    return f"{seq >> SEQ_BITS}-{seq & _SEQ_MASK}"


def seq_at_ms(ms: int) -> int:
    """The smallest offset of an entry appended at or after this millisecond."""
    return max(ms, 0) << SEQ_BITS


# -- connections -----------------------------------------------------------------------------------
_clients: dict[str, redis.Redis] = {}
CONNECT_TIMEOUT_S = 5.0
REPLY_TIMEOUT_S = 30.0  # a hung Redis fails a write or a micro-batch instead of blocking it forever


def connect(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url, decode_responses=False, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=REPLY_TIMEOUT_S
    )


def client(url: str) -> redis.Redis:
    """One client (a connection pool) per process and URL: Spark reuses its Python workers."""
    c = _clients.get(url)
    if c is None:
        c = _clients[url] = connect(url)
    return c


# redis-py's replies are typed as unions of everything Redis can answer; these say what we get
# (the clients never decode responses).
def hgetall(conn: redis.Redis, key: str) -> dict[bytes, bytes]:
    return cast(dict[bytes, bytes], conn.hgetall(key))


def xrange(conn: redis.Redis, key: str, start: str, end: str, count: int) -> list[Entry]:
    return cast(list[Entry], conn.xrange(key, start, end, count=count))


def xread(
    conn: redis.Redis, streams: dict[str, str], count: int, block: int | None = None
) -> list[tuple[bytes, list[Entry]]]:
    reply = conn.xread(cast(dict[Any, Any], streams), count=count, block=block)
    return cast(list[tuple[bytes, list[Entry]]], reply or [])


# -- reading (driver and executors) ----------------------------------------------------------------
def head(conn: redis.Redis, layout: RedisLayout) -> dict[int, tuple[int, int]]:
    """Per partition with any entry: (offset of its last entry, points it has received)."""
    return head_of(hgetall(conn, layout.head), layout)


def head_of(fields: dict[bytes, bytes], layout: RedisLayout) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for p in range(layout.partitions):
        last = fields.get(f"id:{p}".encode())
        if last is not None:
            out[p] = (seq_of(last), int(fields.get(f"n:{p}".encode(), b"0")))
    return out


def future_skew_ms(conn: redis.Redis, layout: RedisLayout) -> dict[int, int]:
    fields = hgetall(conn, layout.head)
    return {p: int(fields.get(f"f:{p}".encode(), b"0")) for p in range(layout.partitions)}


def read_entries(
    conn: redis.Redis, layout: RedisLayout, partition: int, after: int, upto: int, chunk: int = READ_CHUNK
) -> Iterator[list[Entry]]:
    """Entries with after < offset <= upto, oldest first, `chunk` at a time."""
    start = "(" + entry_id(after) if after >= 0 else "-"
    end = entry_id(upto)
    while True:
        entries = xrange(conn, layout.stream(partition), start, end, chunk)
        if not entries:
            return
        yield entries
        if len(entries) < chunk:
            return
        start = "(" + entries[-1][0].decode()


def to_batch(
    entries: Iterable[Entry], series_ids: frozenset[int] | None = None, from_ts: int | None = None
) -> pa.RecordBatch | None:
    """Entries -> POINT_SCHEMA rows (every point of an entry carries the entry's offset), keeping
    only these series and points with ts >= from_ts when given. Columns are built by joining the
    entries' bytes once, not per entry (a read decodes thousands of entries)."""
    seqs: list[int] = []
    sids: list[int] = []
    counts: list[int] = []
    stamp_bytes: list[bytes] = []
    value_bytes: list[bytes] = []
    texts: list[tuple[int, list[str]]] = []  # (first row, strings) of enum entries
    total = 0
    for eid, fields in entries:
        sid = int(fields[b"s"])
        if series_ids is not None and sid not in series_ids:
            continue
        raw_ts = fields[b"t"]
        n = len(raw_ts) // 8
        if n == 0:
            continue
        raw_values = fields.get(b"v")
        if raw_values is None:
            texts.append((total, json.loads(fields[b"e"])))
            raw_values = _nans(n)
        seqs.append(seq_of(eid))
        sids.append(sid)
        counts.append(n)
        stamp_bytes.append(raw_ts)
        value_bytes.append(raw_values)
        total += n
    if total == 0:
        return None
    columns = {
        "seq": np.repeat(np.asarray(seqs, dtype=np.int64), counts),
        "series_id": np.repeat(np.asarray(sids, dtype=np.int64), counts),
        "ts": np.frombuffer(b"".join(stamp_bytes), dtype="<i8").astype(np.int64),
        "value": np.frombuffer(b"".join(value_bytes), dtype="<f8").astype(np.float64),
    }
    strings: list[str | None] | None = None
    if texts:
        strings = [None] * total
        for first, text in texts:
            strings[first : first + len(text)] = text
    if from_ts is not None:
        keep = columns["ts"] >= from_ts
        if not keep.all():
            columns = {name: col[keep] for name, col in columns.items()}
            if strings is not None:
                strings = [s for s, k in zip(strings, keep.tolist(), strict=True) if k]
            if not keep.any():
                return None
    rows = len(columns["ts"])
    str_col = pa.array(strings, type=pa.string()) if strings is not None else pa.nulls(rows, pa.string())
    return pa.RecordBatch.from_arrays(
        [*(pa.array(c) for c in columns.values()), str_col], schema=POINT_SCHEMA
    )


def _nans(n: int) -> bytes:
    return np.full(n, np.nan, dtype="<f8").tobytes()


def read_range(
    conn: redis.Redis,
    layout: RedisLayout,
    partition: int,
    after: int,
    upto: int,
    series_ids: frozenset[int] | None = None,
    from_ts: int | None = None,
) -> Iterator[pa.RecordBatch]:
    for entries in read_entries(conn, layout, partition, after, upto):
        batch = to_batch(entries, series_ids, from_ts)
        if batch is not None:
            yield batch


# -- consumers -------------------------------------------------------------------------------------
def store_committed(conn: redis.Redis, layout: RedisLayout, consumer: str, offsets: dict[int, int]) -> None:
    if not offsets:
        return
    key = layout.committed(consumer)
    pipe = conn.pipeline(transaction=True)
    pipe.hset(key, mapping={f"id:{p}": entry_id(seq) for p, seq in offsets.items()})
    pipe.expire(key, COMMITTED_TTL_S)
    pipe.execute()


def load_committed(conn: redis.Redis, layout: RedisLayout, consumer: str) -> dict[int, int]:
    fields = hgetall(conn, layout.committed(consumer))
    out = {}
    for p in range(layout.partitions):
        value = fields.get(f"id:{p}".encode())
        if value is not None:
            out[p] = seq_of(value)
    return out
