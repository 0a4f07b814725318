"""The asset and run catalog in Redis, shared by every process that uses it (edges, the compute
tier, servers of `--role all` on one Redis), with the notice of each change
written in the same script (docs/decisions/0066-catalog-edits-across-processes.md).

- `{prefix}:catalog:{table}` (hash, rid -> JSON body): one per table (`assets`, `runs`; the modules'
  `modules`, `module_names`, `module_versions`: compute/storage/modules.py);
- `{prefix}:catalog:changes` (stream): one entry per stored change, `k` its kind and `r` the rids
  (a JSON list). The entry id is the catalog's version: a process that has applied every notice up
  to an id holds the catalog's state as of it. Trimmed to about `CHANGES_KEPT` entries; a reader
  whose place was trimmed away (or a stream that restarted behind it) re-checks everything.

A change and its notice are one Lua script (a single row's put, replace or delete, or a `write` of
several rows, each only if still as its writer read it), so no change is stored without its notice (a process
dying in between, or Redis going away, cannot split them); Redis' own persistence (append-only
file) is what keeps both across its restart.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import cast

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from compute.storage.assets import CatalogUnavailable, RowWrite

TIMEOUT_S = 2.0  # a plan compiled on the event loop reads the catalog: an outage must not hang it
CHANGES_KEPT = 10_000  # notices kept; a reader further behind re-checks every subscription

# KEYS: the table's hash, the changes stream. ARGV: mode, rid, body, kind, rids (JSON), kept.
# mode "put": only a new rid; "replace": only an existing one; "delete": removes it.
# Returns the notice's id, or false when nothing changed (so no notice either).
_CHANGE = """
local exists = redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1
local mode = ARGV[1]
if mode == 'put' then
  if exists then return redis.error_reply('rid exists: ' .. ARGV[2]) end
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
elseif mode == 'replace' then
  if not exists then return false end
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
else
  if not exists then return false end
  redis.call('HDEL', KEYS[1], ARGV[2])
end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'k', ARGV[4], 'r', ARGV[5])
"""

# KEYS: the changes stream, then each write's table hash. ARGV: kind, rids (JSON), kept, then per
# write: rid, body, '1' if it must hold `was` (else it must be absent), was.
# Returns the notice's id, or false when a row was not as expected (then nothing changed).
_WRITE = """
for i = 2, #KEYS do
  local a = 4 * (i - 2) + 4
  local current = redis.call('HGET', KEYS[i], ARGV[a])
  if ARGV[a + 2] == '1' then
    if current ~= ARGV[a + 3] then return false end
  elseif current then
    return false
  end
end
for i = 2, #KEYS do
  local a = 4 * (i - 2) + 4
  redis.call('HSET', KEYS[i], ARGV[a], ARGV[a + 1])
end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'k', ARGV[1], 'r', ARGV[2])
"""


@dataclass(frozen=True)
class CatalogKeys:
    prefix: str

    def table(self, table: str) -> str:
        return f"{self.prefix}:catalog:{table}"

    @property
    def changes(self) -> str:
        return f"{self.prefix}:catalog:changes"


@dataclass(frozen=True)
class Notice:
    """One stored change: which catalog (`asset`, `run`, or another kind of catalog) and which rids."""

    version: str  # the stream entry id
    kind: str
    rids: tuple[str, ...]


def encode_rids(rids: Collection[str]) -> str:
    return json.dumps(sorted(rids))


def parse_notice(entry_id: bytes | str, fields: dict[bytes, bytes]) -> Notice:
    version = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return Notice(version, fields[b"k"].decode(), tuple(json.loads(fields[b"r"])))


def version_key(version: str) -> tuple[int, int]:
    """A stream id as a comparable pair ("0" or "0-0": before every notice)."""
    ms, _, n = version.partition("-")
    return int(ms), int(n or 0)


class RedisRows:
    """`CatalogRows` (compute/storage/assets.py) in Redis; every change announced on the stream."""

    shared = True

    def __init__(
        self, conn: redis.Redis, prefix: str, kinds: dict[str, str], what: str = "the asset and run catalog"
    ) -> None:
        """`kinds`: table -> the kind its single-row changes are announced as; `what`: the catalog's
        name in an error."""
        self.conn = conn
        self.keys = CatalogKeys(prefix)
        self.kinds = kinds
        self.what = what
        self._change = conn.register_script(_CHANGE)
        self._write_all = conn.register_script(_WRITE)

    def _write(self, mode: str, table: str, rid: str, body: str) -> bool:
        args: list[str | int] = [mode, rid, body, self.kinds[table], encode_rids([rid]), CHANGES_KEPT]
        with _reachable(self.what):
            return self._change(keys=[self.keys.table(table), self.keys.changes], args=args) is not None

    def put(self, table: str, rid: str, body: str) -> None:
        self._write("put", table, rid, body)

    def replace(self, table: str, rid: str, body: str) -> None:
        self._write("replace", table, rid, body)

    def get(self, table: str, rid: str) -> str | None:
        with _reachable(self.what):
            raw = cast(bytes | None, self.conn.hget(self.keys.table(table), rid))
        return None if raw is None else raw.decode()

    def rids(self, table: str) -> list[str]:
        with _reachable(self.what):
            rids = cast(list[bytes], self.conn.hkeys(self.keys.table(table)))
        return sorted(r.decode() for r in rids)

    def delete(self, table: str, rid: str) -> bool:
        return self._write("delete", table, rid, "")

    def write(self, writes: Sequence[RowWrite], kind: str, rids: Collection[str]) -> bool:
        keys = [self.keys.changes, *(self.keys.table(w.table) for w in writes)]
        args: list[str | int] = [kind, encode_rids(rids), CHANGES_KEPT]
        for w in writes:
            args += [w.rid, w.body, "0" if w.was is None else "1", w.was or ""]
        with _reachable(self.what):
            return self._write_all(keys=keys, args=args) is not None


def connect_rows(
    url: str, prefix: str, kinds: dict[str, str], what: str = "the asset and run catalog"
) -> RedisRows:
    conn = redis.Redis.from_url(
        url,
        socket_connect_timeout=TIMEOUT_S,
        socket_timeout=TIMEOUT_S,
        # A pooled connection that died with a Redis restart is opened again once, quickly: a lookup
        # on the event loop must not wait out redis-py's default backoff.
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1),
        retry_on_error=[redis.ConnectionError],
    )
    return RedisRows(conn, prefix, kinds, what)


@contextmanager
def _reachable(what: str) -> Iterator[None]:
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise CatalogUnavailable(f"{what} (Redis) is unreachable: {exc}") from exc
