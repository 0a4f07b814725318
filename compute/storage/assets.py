"""Assets and runs kept by Sparkwire: what Nominal's workbooks name their data through.

An asset (a vehicle, a test stand) has named data scopes, each a data source rid with series tags
that pre-filter it. A run is one or more assets over a time range, with data scopes of its own. Kept
beside the point log: in one SQLite file in the data dir, written with `synchronous=FULL` so that an
acknowledged change survives a restart and a kill -9 (docs/decisions/0055-assets-runs-and-datasets.md);
when shared (the tiers, or servers on the Kafka log given a redis-url), in Redis, read by every process
(docs/decisions/0066).

Properties come two ways, as in Nominal: `properties` (strings) and `typedProperties` (each a string
or a number: Nominal's `TypedPropertyValue`, kept here as a `str` or a `float`), which
`selectNumericProperty` and `selectCategoricalProperty` read (docs/decisions/0065). Records written
before typed properties existed load with none."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

ASSET_RID_PREFIX = "ri.scout.main.asset."
RUN_RID_PREFIX = "ri.scout.main.run."

TypedValue = str | float  # Nominal's TypedPropertyValue: stringValue | numericValue


@dataclass(frozen=True)
class DataScope:
    name: str
    data_source_rid: str
    series_tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Asset:
    rid: str
    title: str
    data_scopes: list[DataScope]
    properties: dict[str, str] = field(default_factory=dict)
    typed_properties: dict[str, TypedValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Run:
    rid: str
    title: str
    asset_rids: list[str]
    start_ns: int
    end_ns: int | None  # None: the run is still going
    data_scopes: list[DataScope] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    typed_properties: dict[str, TypedValue] = field(default_factory=dict)


def _typed(body: dict[str, Any]) -> dict[str, TypedValue]:
    """A record's typed properties (none in a record written before they existed); a number stays
    a float even where JSON wrote it as an integer."""
    raw = body.get("typed_properties") or {}
    return {k: v if isinstance(v, str) else float(v) for k, v in raw.items()}


def _scopes(raw: list[dict[str, Any]]) -> list[DataScope]:
    return [DataScope(str(s["name"]), str(s["data_source_rid"]), dict(s["series_tags"])) for s in raw]


class AssetStore:
    """Assets and runs, one JSON body per rid, in rows kept by `SqliteRows` (`<data dir>/assets.sqlite`,
    a catalog not shared) or by a shared backend (compute/storage/redis/catalog_rows.py, in Redis,
    which also writes each change's notice with it). Any thread may use it (the event
    loop's workers, the compute tier compiling a plan)."""

    def __init__(self, path: Path | None = None, *, rows: CatalogRows | None = None) -> None:
        if rows is None:
            assert path is not None, "a path for SqliteRows, or rows"
            rows = SqliteRows(path)
        self.rows = rows
        self._lock = threading.Lock()

    @property
    def shared(self) -> bool:
        """Whether every change is announced by the rows themselves to every process sharing them."""
        return self.rows.shared

    # -- assets ---------------------------------------------------------------------------------
    def create_asset(
        self,
        title: str,
        data_scopes: list[DataScope],
        properties: dict[str, str],
        typed_properties: dict[str, TypedValue] | None = None,
    ) -> Asset:
        asset = Asset(
            ASSET_RID_PREFIX + str(uuid.uuid4()), title, data_scopes, properties, dict(typed_properties or {})
        )
        self._put("assets", asset.rid, asdict(asset))
        return asset

    def asset(self, rid: str) -> Asset | None:
        body = self._get("assets", rid)
        if body is None:
            return None
        return Asset(
            body["rid"], body["title"], _scopes(body["data_scopes"]), body["properties"], _typed(body)
        )

    def assets(self) -> list[Asset]:
        return [a for rid in self._rids("assets") if (a := self.asset(rid)) is not None]

    def update_asset(
        self,
        rid: str,
        title: str | None = None,
        data_scopes: list[DataScope] | None = None,
        properties: dict[str, str] | None = None,
        typed_properties: dict[str, TypedValue] | None = None,
    ) -> Asset | None:
        """What is given replaces what the asset had (data scopes all together, as Nominal's
        UpdateAssetRequest does); None: no such asset."""
        with self._lock:
            asset = self.asset(rid)
            if asset is None:
                return None
            asset = replace(
                asset,
                title=asset.title if title is None else title,
                data_scopes=asset.data_scopes if data_scopes is None else data_scopes,
                properties=asset.properties if properties is None else properties,
                typed_properties=asset.typed_properties if typed_properties is None else typed_properties,
            )
            self._replace("assets", rid, asdict(asset))
        return asset

    def delete_asset(self, rid: str) -> bool:
        return self._delete("assets", rid)

    # -- runs -----------------------------------------------------------------------------------
    def create_run(
        self,
        title: str,
        asset_rids: list[str],
        start_ns: int,
        end_ns: int | None,
        data_scopes: list[DataScope],
        properties: dict[str, str],
        typed_properties: dict[str, TypedValue] | None = None,
    ) -> Run:
        run = Run(
            RUN_RID_PREFIX + str(uuid.uuid4()),
            title,
            asset_rids,
            start_ns,
            end_ns,
            data_scopes,
            properties,
            dict(typed_properties or {}),
        )
        self._put("runs", run.rid, asdict(run))
        return run

    def run(self, rid: str) -> Run | None:
        b = self._get("runs", rid)
        if b is None:
            return None
        return Run(
            b["rid"],
            b["title"],
            b["asset_rids"],
            b["start_ns"],
            b["end_ns"],
            _scopes(b["data_scopes"]),
            b["properties"],
            _typed(b),
        )

    def runs(self) -> list[Run]:
        return [r for rid in self._rids("runs") if (r := self.run(rid)) is not None]

    def update_run(self, rid: str, **changes: Any) -> Run | None:
        """`changes`: Run fields (title, asset_rids, start_ns, end_ns, data_scopes, properties,
        typed_properties), each
        replacing the run's; None: no such run."""
        with self._lock:
            run = self.run(rid)
            if run is None:
                return None
            run = replace(run, **changes)
            self._replace("runs", rid, asdict(run))
        return run

    def delete_run(self, rid: str) -> bool:
        return self._delete("runs", rid)

    # -- rows -----------------------------------------------------------------------------------
    def _put(self, table: str, rid: str, body: dict[str, object]) -> None:
        with self._lock:
            self.rows.put(table, rid, json.dumps(body))

    def _replace(self, table: str, rid: str, body: dict[str, object]) -> None:
        """Under `_lock`, held by the caller across its read and this write."""
        self.rows.replace(table, rid, json.dumps(body))

    def _get(self, table: str, rid: str) -> dict[str, Any] | None:
        text = self.rows.get(table, rid)
        return None if text is None else json.loads(text)

    def _rids(self, table: str) -> list[str]:
        return self.rows.rids(table)

    def _delete(self, table: str, rid: str) -> bool:
        with self._lock:
            return self.rows.delete(table, rid)


class CatalogUnavailable(Exception):
    """The rows could not be read or written (a shared backend out of reach): nothing changed."""


TABLE_KIND = {"assets": "asset", "runs": "run"}  # the kind a change of a table's row is announced as


@dataclass(frozen=True)
class RowWrite:
    """One row of a `CatalogRows.write`: `body` is stored under (table, rid) if the row is still as
    the writer read it: absent (`was` None) or holding exactly `was`."""

    table: str
    rid: str
    body: str
    was: str | None = None


class CatalogRows(Protocol):
    """Where the catalog's bodies are kept: one JSON text per (table, rid)."""

    shared: bool  # True: several processes read these rows, and each change is announced to them

    def put(self, table: str, rid: str, body: str) -> None: ...

    def replace(self, table: str, rid: str, body: str) -> None: ...

    def get(self, table: str, rid: str) -> str | None: ...

    def rids(self, table: str) -> list[str]: ...

    def delete(self, table: str, rid: str) -> bool: ...

    def write(self, writes: Sequence[RowWrite], kind: str, rids: Collection[str]) -> bool:
        """All of `writes` or, if any row is no longer as its writer read it, none (False: read
        again and retry). A shared backend announces (kind, rids) with them, in the same step."""
        ...


class SqliteRows:
    """The rows in one SQLite file of this process's data dir, fsync'd on every change."""

    shared = False

    def __init__(self, path: Path, tables: Iterable[str] = TABLE_KIND) -> None:
        self.path = path
        with self._connect() as db:
            for table in tables:
                db.execute(f"CREATE TABLE IF NOT EXISTS {table} (rid TEXT PRIMARY KEY, body TEXT NOT NULL)")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection for one statement, committed and closed at once (left to the garbage
        collector, a thousand lookups' connections were closed in one pause of ~50 ms)."""
        db = sqlite3.connect(self.path, timeout=10)
        try:
            db.execute("PRAGMA synchronous=FULL")  # fsync on commit: an answered change is on disk
            with db:
                yield db
        finally:
            db.close()

    def put(self, table: str, rid: str, body: str) -> None:
        with self._connect() as db:
            db.execute(f"INSERT INTO {table} (rid, body) VALUES (?, ?)", (rid, body))

    def replace(self, table: str, rid: str, body: str) -> None:
        with self._connect() as db:
            db.execute(f"UPDATE {table} SET body = ? WHERE rid = ?", (body, rid))

    def get(self, table: str, rid: str) -> str | None:
        with self._connect() as db:
            row = db.execute(f"SELECT body FROM {table} WHERE rid = ?", (rid,)).fetchone()
        return None if row is None else str(row[0])

    def rids(self, table: str) -> list[str]:
        with self._connect() as db:
            return [r[0] for r in db.execute(f"SELECT rid FROM {table} ORDER BY rid")]

    def delete(self, table: str, rid: str) -> bool:
        with self._connect() as db:
            return db.execute(f"DELETE FROM {table} WHERE rid = ?", (rid,)).rowcount > 0

    def write(self, writes: Sequence[RowWrite], kind: str, rids: Collection[str]) -> bool:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")  # the checks and the writes, with no writer in between
            for w in writes:
                row = db.execute(f"SELECT body FROM {w.table} WHERE rid = ?", (w.rid,)).fetchone()
                if (None if row is None else str(row[0])) != w.was:
                    return False  # nothing was written: the transaction ends empty
            for w in writes:
                db.execute(f"INSERT OR REPLACE INTO {w.table} (rid, body) VALUES (?, ?)", (w.rid, w.body))
        return True
