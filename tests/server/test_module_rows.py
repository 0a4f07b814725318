"""Modules kept in the shared catalog's rows on a real redis-server, without Spark: two processes'
`ModuleStore`s over one Redis read the same modules and versions, names stay unique and versions
immutable whoever writes, each change reaches another process's `CatalogEdits` once as a `module`
notice, and Redis away is `CatalogUnavailable` (to a compilation, `CatalogUnreachable`)
(docs/decisions/0062-modules-and-derived-series.md). The embedded store keeps the modules of a file
written before the rows."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.fanout.catalog_edits import CatalogEdits
from app.tiers.catalog_feed import CatalogFeed
from compute.evaluation.compiler.catalogs import Catalogs
from compute.evaluation.compiler.datasets import CatalogUnreachable
from compute.storage.assets import CatalogUnavailable
from compute.storage.modules import ModuleNameTaken, ModuleStore
from compute.storage.redis.catalog_rows import connect_rows
from tests.infra import RedisServer, start_redis
from tests.server.test_catalog_feed import Recorder, until
from tests.unit.test_derived import derived, plan, summarize

pytestmark = pytest.mark.timeout(120)
PREFIX = "modulerows"


def definition(body: str) -> dict[str, object]:
    node = {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": body}}}
    return {
        "functions": [
            {"name": "f", "description": "", "parameters": [], "functionNode": node, "isExported": True}
        ]
    }


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path / "redis", persistent=True)
    yield server
    server.daemon.stop()


def store(redis_server: RedisServer) -> ModuleStore:
    return ModuleStore(rows=connect_rows(redis_server.url, PREFIX, {}, what="the module catalog"))


async def test_modules_written_through_one_process_are_read_and_announced_in_another(
    redis_server: RedisServer,
) -> None:
    a, b = store(redis_server), store(redis_server)  # edge A's and edge B's
    assert a.shared and b.shared
    edits, listener = CatalogEdits(), Recorder()
    edits.add(listener)
    feed = CatalogFeed(redis_server.url, PREFIX, edits)  # edge B's
    feed.start()
    try:
        await until(lambda: feed.links == 1, "linked")
        await edits.idle()
        listener.asked.clear()

        module, v1 = await asyncio.to_thread(a.create, "speeds", "Speeds", "km/h", definition("x"), "u1", 10)
        assert b.module(module.rid) == module
        assert b.module_named("speeds") == module
        assert b.version(module, 1) == v1 and v1.definition == definition("x")
        with pytest.raises(ModuleNameTaken):  # a name is unique across processes, archived or not
            await asyncio.to_thread(b.create, "speeds", "Other", "", definition("y"), "u2", 11)

        updated, v2 = await asyncio.to_thread(
            b.update, module.rid, "Speeds 2", "m/s", definition("y"), "u2", 12
        )
        assert (updated.latest, v2.version, updated.title) == (2, 2, "Speeds 2")
        assert a.module(module.rid) == updated
        assert a.version(updated, 1) == v1  # a version, once made, never changes
        assert a.version(updated, 2) == v2 and a.version(updated, 3) is None
        assert (
            await asyncio.to_thread(b.update, "ri.scout.main.module.none", "t", "", definition("z"), "u", 13)
            is None
        )

        assert await asyncio.to_thread(a.set_archived, [module.rid], 14) == [module.rid]
        assert b.module_named("speeds") == replace(updated, archived_at_ns=14)
        assert await asyncio.to_thread(a.set_archived, [module.rid], 15) == [module.rid]  # no change
        assert b.module(module.rid).archived_at_ns == 14  # type: ignore[union-attr]  # the first time kept
        missing = "ri.scout.main.module.none"
        assert await asyncio.to_thread(a.set_archived, [module.rid, missing], None) == [module.rid]
        assert b.module(module.rid).archived_at_ns == 14  # type: ignore[union-attr]  # all or nothing
        assert await asyncio.to_thread(b.set_archived, [module.rid], None) == [module.rid]
        assert a.module(module.rid).archived_at_ns is None  # type: ignore[union-attr]
        assert [m.rid for m in a.modules()] == [module.rid]

        # create, update, archive, unarchive: one notice each; a refused or empty change none
        await until(lambda: len(listener.asked) >= 4, "four notices")
        await asyncio.sleep(0.5)  # and nothing more
        assert listener.asked == [("module", (module.rid,))] * 4
    finally:
        await feed.stop()


async def test_updates_racing_through_two_processes_each_get_a_version_of_their_own(
    redis_server: RedisServer,
) -> None:
    a, b = store(redis_server), store(redis_server)
    module, _ = a.create("raced", "Raced", "", definition("x0"), "u", 1)
    made: list[int] = []

    def update(s: ModuleStore, who: str) -> None:
        for i in range(10):
            done = s.update(module.rid, "Raced", "", definition(f"{who}{i}"), who, 2)
            assert done is not None
            made.append(done[1].version)

    threads = [threading.Thread(target=update, args=(s, who)) for s, who in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(made) == list(range(2, 22))  # no number given twice, none skipped
    latest = b.module(module.rid)
    assert latest is not None and latest.latest == 21
    bodies = [b.version(latest, n) for n in range(2, 22)]
    # every update's definition kept under the number it was answered with
    assert sorted(json.dumps(v.definition) for v in bodies if v is not None) == sorted(
        json.dumps(definition(f"{who}{i}")) for who in "ab" for i in range(10)
    )


def test_redis_away_is_catalog_unavailable_and_nothing_changes(redis_server: RedisServer) -> None:
    a = store(redis_server)
    module, _ = a.create("kept", "Kept", "", definition("x"), "u", 1)
    redis_server.daemon.stop()
    with pytest.raises(CatalogUnavailable, match="the module catalog"):
        a.module_named("kept")
    with pytest.raises(CatalogUnavailable):
        a.update(module.rid, "t", "", definition("y"), "u", 2)
    # a derived subscription compiled meanwhile: the passing JobInvalidState a client retries
    with pytest.raises(CatalogUnreachable) as unreachable:
        plan(summarize({"type": "derived", "derived": derived("kept", "f", {})}), {}, Catalogs(modules=a))
    assert (unreachable.value.name, unreachable.value.status_code) == ("JobInvalidState", 503)


def test_a_modules_file_from_before_the_rows_keeps_its_modules(tmp_path: Path) -> None:
    path = tmp_path / "modules.sqlite"
    rid = "ri.scout.main.module.old"
    body = {
        "rid": rid,
        "api_name": "old",
        "title": "Old",
        "description": "",
        "created_by": "u",
        "created_at_ns": 1,
        "archived_at_ns": None,
        "workspace": None,
        "latest": 2,
    }
    db = sqlite3.connect(path)
    with db:  # the layout the store wrote before it kept rows
        db.execute(
            "CREATE TABLE modules (rid TEXT PRIMARY KEY, api_name TEXT NOT NULL UNIQUE, body TEXT NOT NULL)"
        )
        db.execute(
            "CREATE TABLE versions (rid TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL,"
            " PRIMARY KEY (rid, version))"
        )
        db.execute("INSERT INTO modules VALUES (?, 'old', ?)", (rid, json.dumps(body)))
        for n in (1, 2):
            version = {"created_by": "u", "created_at_ns": n, "definition": definition(f"x{n}")}
            db.execute("INSERT INTO versions VALUES (?, ?, ?)", (rid, n, json.dumps(version)))
    db.close()

    modules = ModuleStore(path)
    old = modules.module_named("old")
    assert old is not None and old.latest == 2
    assert [modules.version(old, n).definition for n in (1, 2)] == [definition("x1"), definition("x2")]  # type: ignore[union-attr]
    assert not modules.shared
    with pytest.raises(ModuleNameTaken):
        modules.create("old", "Again", "", definition("y"), "u", 3)
    _, v3 = modules.update(rid, "Old", "", definition("x3"), "u", 4) or (None, None)
    assert v3 is not None and v3.version == 3
    assert ModuleStore(path).version(old, 3) == v3  # opened again: nothing moved twice
