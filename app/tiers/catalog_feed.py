"""Every process serving WebSockets over a shared catalog (`Settings.shared_catalog`: edges, and
servers of `--role all` on the Kafka log given one redis-url) reads the catalog's change notices
(compute/storage/redis/catalog_rows.py) and hands each one to its `CatalogEdits`, which re-resolves
the subscriptions it can move (docs/decisions/0066-catalog-edits-across-processes.md).

The feed keeps its place in the notices (a stream id: the catalog version this process has applied)
and reads on from it with a blocking XREAD. When the link to Redis is lost, notices may be written
that it does not see, and a Redis restarted without its file loses them: so once the link is back the
feed takes the newest version as its place and has every subscription that read the catalog checked
again (the same resolution: nothing; a new one: a FullResult; none: the named error). Checking again
is harmless, a subscription already on the catalog's newest state does not move; it costs one
compilation per such subscription, in slices (app/fanout/catalog_edits.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, cast

import redis
import redis.asyncio as aioredis

from app.fanout.catalog_edits import CatalogEdits
from compute.storage.redis.catalog_rows import CatalogKeys, parse_notice

logger = logging.getLogger(__name__)

BLOCK_MS = 1_000  # one XREAD waits this long for a notice before it asks again
MAX_BACKOFF = 5.0
READ_COUNT = 500
STOP_TIMEOUT_S = 5.0  # how long a stop waits for the follower and the connection to close


class CatalogFeed:
    def __init__(self, redis_url: str, prefix: str, edits: CatalogEdits) -> None:
        self.keys = CatalogKeys(prefix)
        self.edits = edits
        self.redis = aioredis.Redis.from_url(
            redis_url, socket_connect_timeout=5, socket_timeout=BLOCK_MS / 1000 + 5
        )
        self.version: str | None = None  # the last notice applied (None: not linked yet)
        self.links = 0  # how many times the feed (re)linked: each re-checked every subscription
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="catalog-feed")

    async def stop(self) -> None:
        """Bounded: a read the Redis client is in when it is cancelled (or a connection to a port
        that accepts and never answers) must not hold up a shutdown."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=STOP_TIMEOUT_S)
            if self._task.done() and not self._task.cancelled():
                self._task.exception()  # retrieved: its end is this stop
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.redis.aclose(), STOP_TIMEOUT_S)

    async def _run(self) -> None:
        delay, linked = 0.1, False
        while not self._stopping:
            try:
                await self._link()
                if not linked:
                    logger.info("catalog feed: reading the catalog's changes from version %s", self.version)
                linked, delay = True, 0.1
                await self._follow()
            except asyncio.CancelledError:
                raise
            except (redis.RedisError, OSError) as exc:
                if linked:
                    logger.warning("catalog feed: Redis unreachable (%s); retrying with backoff", exc)
                linked = False
                await asyncio.sleep(delay)
                delay = min(MAX_BACKOFF, delay * 2)

    async def _link(self) -> None:
        """Take the newest version as the place to read on from; every subscription that read the
        catalog is checked against what it holds now (it may have changed unseen)."""
        newest = cast(list[Any], await self.redis.xrevrange(self.keys.changes, count=1))
        self.version = newest[0][0].decode() if newest else "0-0"
        self.links += 1
        self.edits.deliver(None, ())

    async def _follow(self) -> None:
        while True:
            assert self.version is not None
            reply = cast(
                list[Any],
                await self.redis.xread({self.keys.changes: self.version}, count=READ_COUNT, block=BLOCK_MS),
            )
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    notice = parse_notice(entry_id, fields)
                    self.edits.deliver(notice.kind, notice.rids)
                    self.version = notice.version
