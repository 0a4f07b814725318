"""Decision 0066: what re-resolving the live subscriptions over an edited asset costs the event loop.

1,000 subscriptions (10 connections' sessions of 100) over one asset channel; the asset's data scope
is moved to another data source, so every one of them compiles again and moves. Two arms per
catalog, in one run: all at once (each session's `catalog_changed`, as the loop ran it before
decision 0066) and sliced (`CatalogEdits.deliver`, which yields to the loop every
`SLICE_SECONDS`). Per arm: the thread CPU, and the longest time the loop could not run anything
else (a ticker task's longest gap). Catalogs: the SQLite file of the embedded log and Redis (a
redis-server started here, as the Redis log's processes share it).

    python -m bench.experiments.catalog_re_resolve [rounds]   (default 3)
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import redis

from app.fanout.catalog_edits import SLICE_SECONDS, CatalogEdits
from app.protocol.auth import Principal
from app.protocol.ws_session import Instant, Session, SessionConfig
from compute.evaluation.compiler.catalogs import Catalogs
from compute.storage.assets import TABLE_KIND, AssetStore, DataScope
from compute.storage.redis.catalog_rows import connect_rows

SESSIONS, PER_SESSION = 10, 100
NANOS = 1_000_000_000


def _lit(value: str) -> dict[str, Any]:
    return {"type": "literal", "literal": value}


def _message(asset_rid: str, session: int) -> str:
    import json

    channel = {
        "assetRid": _lit(asset_rid),
        "dataScopeName": _lit("main"),
        "channel": _lit("speed"),
        "additionalTags": {},
        "tagsToGroupBy": [],
        "groupByTags": [],
    }
    variable = {"type": "channel", "channel": {"type": "asset", "asset": channel}}
    node = {
        "type": "series",
        "series": {"input": {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": "x"}}}},
    }
    sub = {
        "computeRequest": {
            "node": node,
            "windowWidth": {"seconds": 60, "nanos": 0},
            "context": {"variables": {"x": variable}, "datasetReferences": {}},
        },
        "subscriptionOptions": {"minDelay": 0, "allowAppends": True},
    }
    subs = {f"c{session}-s{i}": sub for i in range(PER_SESSION)}
    return json.dumps({"type": "subscribe", "subscribe": subs})


def _now() -> Instant:
    return Instant(monotonic=time.monotonic(), unix=time.time())


class Listener:
    def __init__(self, session: Session) -> None:
        self.session = session

    def catalog_affected(self, kind: str | None, rids: Collection[str]) -> list[str]:
        return self.session.catalog_affected(kind, rids)

    def re_resolve(self, sub_id: str) -> None:
        self.session.re_resolve(sub_id, _now())


def _sessions(asset_rid: str, store: AssetStore) -> list[Session]:
    who = Principal("bench", ("ri.bench.*",), None)
    config = SessionConfig(max_subscriptions=PER_SESSION, catalogs=Catalogs(assets=store))
    sessions = [Session(who, config, _now(), authenticate=lambda token: who) for _ in range(SESSIONS)]
    for i, session in enumerate(sessions):
        session.receive(_message(asset_rid, i), _now())
        assert len(session.catalog_affected("asset", (asset_rid,))) == PER_SESSION
    return sessions


async def _with_ticker(work: Any) -> tuple[float, float]:
    """(thread CPU s, the loop's longest gap s) of `work`, awaited."""
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
    cpu = time.thread_time()
    await work()
    cpu = time.thread_time() - cpu
    await asyncio.sleep(0)  # the ticker notes the gap the work left, if it never awaited
    await asyncio.sleep(0)
    tick.cancel()
    return cpu, max(gaps)


async def _arms(store: AssetStore, rounds: int) -> tuple[dict[str, list[tuple[float, float]]], float]:
    """Per arm (CPU, longest loop stall) of each round, and the longest slice's CPU when sliced."""
    asset = store.create_asset("car", [DataScope("main", "ri.bench.a")], {})
    sessions = _sessions(asset.rid, store)
    results: dict[str, list[tuple[float, float]]] = {"all at once": [], "sliced": []}
    edits = CatalogEdits()
    for session in sessions:
        edits.add(Listener(session))
    target = "ri.bench.b"
    for _ in range(rounds):
        for arm in results:
            store.update_asset(asset.rid, None, [DataScope("main", target)])
            target = "ri.bench.a" if target == "ri.bench.b" else "ri.bench.b"
            if arm == "all at once":

                async def at_once() -> None:
                    now = _now()
                    moved = sum(len(s.catalog_changed("asset", asset.rid, now)) for s in sessions)
                    assert moved == SESSIONS * PER_SESSION, moved

                results[arm].append(await _with_ticker(at_once))
            else:
                before = edits.stats.re_resolved

                async def sliced() -> None:
                    edits.deliver("asset", (asset.rid,))
                    await edits.idle()

                results[arm].append(await _with_ticker(sliced))
                assert edits.stats.re_resolved - before == SESSIONS * PER_SESSION
    return results, edits.stats.longest_slice_cpu_s


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    exe = shutil.which("redis-server")
    assert exe is not None, "redis-server is needed"
    port = _free_port()
    daemon = subprocess.Popen(
        [exe, "--port", str(port), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL
    )
    try:
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        with tempfile.TemporaryDirectory() as tmp:
            stores = {
                "sqlite": AssetStore(Path(tmp) / "assets.sqlite"),
                "redis": AssetStore(rows=connect_rows(url, "bench", TABLE_KIND)),
            }
            slice_ms = SLICE_SECONDS * 1000
            print(f"{SESSIONS * PER_SESSION} subscriptions re-resolved per edit; slice {slice_ms:.0f} ms")
            for name, store in stores.items():
                results, slice_cpu = asyncio.run(_arms(store, rounds))
                for arm, runs in results.items():
                    cpu = statistics.median(c for c, _ in runs) * 1000
                    gap = statistics.median(g for _, g in runs) * 1000
                    print(
                        f"{name:6} {arm:12}: CPU {cpu:6.0f} ms ({cpu / (SESSIONS * PER_SESSION):.2f} ms "
                        f"each), longest loop stall {gap:6.1f} ms (median of {rounds})"
                    )
                longest = slice_cpu * 1000
                print(f"{name:6} sliced: the longest slice's CPU {longest:.1f} ms (slice: {slice_ms:.0f} ms)")
    finally:
        daemon.terminate()
        daemon.wait()


if __name__ == "__main__":
    main()
