"""The shared catalog's change notices on a real redis-server, without Spark: a change stored through
one process's `AssetStore` (compute/storage/redis/catalog_rows.py) reaches another process's
`CatalogEdits` through its `CatalogFeed` once, in order, and a feed that lost Redis re-checks every
subscription once it is back (docs/decisions/0066-catalog-edits-across-processes.md). Re-resolving a
thousand affected subscriptions leaves the event loop free at least every slice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

from app.fanout.catalog_edits import CatalogEdits
from app.tiers.catalog_feed import CatalogFeed
from compute.storage.assets import TABLE_KIND, AssetStore, CatalogUnavailable, DataScope
from compute.storage.redis.catalog_rows import connect_rows
from tests.infra import RedisServer, start_redis

pytestmark = pytest.mark.timeout(120)


class Recorder:
    """A connection whose every subscription read every rid: it records what it is asked to redo."""

    def __init__(self, subscriptions: int = 1, cost_s: float = 0.0) -> None:
        self.asked: list[tuple[str | None, tuple[str, ...]]] = []
        self.redone: list[str] = []
        self.subscriptions = [f"s{i}" for i in range(subscriptions)]
        self.cost_s = cost_s

    def catalog_affected(self, kind: str | None, rids: Collection[str]) -> list[str]:
        self.asked.append((kind, tuple(rids)))
        return self.subscriptions

    def re_resolve(self, sub_id: str) -> None:
        deadline = time.perf_counter() + self.cost_s  # a compilation's CPU, spent on the loop
        while time.perf_counter() < deadline:
            pass
        self.redone.append(sub_id)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path / "redis", persistent=True)
    yield server
    server.daemon.stop()


async def until(predicate: object, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        await asyncio.sleep(0.05)


async def test_a_change_stored_by_one_process_reaches_another_once_and_a_lost_link_rechecks(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    prefix = "feedtest"
    writer = AssetStore(rows=connect_rows(redis_server.url, prefix, TABLE_KIND))  # edge A's
    edits, listener = CatalogEdits(), Recorder()
    edits.add(listener)
    feed = CatalogFeed(redis_server.url, prefix, edits)  # edge B's
    feed.start()
    try:
        await until(lambda: feed.links == 1, "linked")
        await edits.idle()
        assert listener.asked == [(None, ())]  # at start: nothing to re-check yet, but checked
        listener.asked.clear()

        asset = await asyncio.to_thread(writer.create_asset, "car", [DataScope("main", "ri.ds.1")], {})
        await asyncio.to_thread(writer.update_asset, asset.rid, None, [DataScope("main", "ri.ds.2")])
        assert not await asyncio.to_thread(
            writer.delete_run, "ri.scout.main.run.none"
        )  # no change, no notice
        await asyncio.to_thread(writer.delete_asset, asset.rid)
        await until(lambda: len(listener.asked) >= 3, "three notices")
        await asyncio.sleep(1.5)  # longer than a blocking read: nothing more comes
        assert listener.asked == [("asset", (asset.rid,))] * 3
        # the reader's catalog is the writer's: a fresh store over the same Redis reads the delete
        reader = AssetStore(rows=connect_rows(redis_server.url, prefix, TABLE_KIND))
        assert await asyncio.to_thread(reader.asset, asset.rid) is None

        # Redis goes away and comes back with its file: the feed links again and has everything
        # checked again, since it cannot know what it missed meanwhile; then it reads on.
        port = int(redis_server.url.rsplit(":", 1)[1].split("/")[0])
        redis_server.daemon.stop()
        with pytest.raises(CatalogUnavailable):
            await asyncio.to_thread(writer.create_asset, "while away", [], {})
        listener.asked.clear()
        restarted = start_redis(tmp_path / "redis", port=port, persistent=True)
        redis_server.daemon = restarted.daemon
        await until(lambda: feed.links == 2, "linked again", timeout=30)
        run = await asyncio.to_thread(writer.create_run, "lap", [], 0, None, [], {})
        await until(lambda: ("run", (run.rid,)) in listener.asked, "a notice after the restart")
        await edits.idle()
        assert listener.asked == [(None, ()), ("run", (run.rid,))]
    finally:
        await asyncio.wait_for(feed.stop(), 15)  # bounded itself: a hang here would hide the failure


async def test_a_thousand_affected_subscriptions_are_re_resolved_in_slices() -> None:
    """1,000 subscriptions over one edited asset, each costing 0.5 ms to compile again (what a
    compilation over an asset costs, decision record 0066): the event loop is never held longer
    than a slice and a compilation, and every subscription is re-resolved once."""
    edits, listener = CatalogEdits(), Recorder(subscriptions=1_000, cost_s=0.0005)
    edits.add(listener)
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.get_running_loop().create_task(ticker())
    await asyncio.sleep(0)
    edits.deliver("asset", ("ri.scout.main.asset.x",))
    await edits.idle()
    tick.cancel()
    assert sorted(listener.redone) == sorted(listener.subscriptions)
    assert edits.stats.re_resolved == 1_000
    # The loop waits one slice and one compilation at most (the bound: 100 ms; left at
    # that, since a busy machine can pause the process mid-slice); all at once it would be 500 ms.
    assert max(gaps) < 0.1, max(gaps)
    assert edits.stats.longest_slice_s < 0.1 and edits.stats.busy_s >= 0.5
