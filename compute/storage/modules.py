"""Nominal modules kept by Sparkwire: named collections of functions that `derived` series apply.

A module has a unique API name and a history of versions: creating it makes version "1", each
update adds the next ("2", "3", ...; Nominal's version strings are a bare MAJOR number), and a
version, once made, never changes, so a `derived` node pinned to it always computes the same
thing. Archiving hides a module from search and from computation; unarchiving brings it back.
Each version's definition is kept as Nominal's `ModuleVersionDefinition` JSON, as received.

Kept in rows of the catalog (compute/storage/assets.py's `CatalogRows`): with the embedded log in
one SQLite file in the data dir beside it, written with `synchronous=FULL` so that an answered change
survives a restart and a kill -9, as the asset catalog is; when shared (the tiers, or servers on the
Kafka log given a redis-url) in Redis, one copy read by every process, each change written with its
notice (kind `module`) in one script
(docs/decisions/0062-modules-and-derived-series.md, docs/decisions/0066)."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compute.storage.assets import CatalogRows, RowWrite, SqliteRows

MODULE_RID_PREFIX = "ri.scout.main.module."
KIND = "module"  # the kind a module's change is announced as (the kind its CatalogUse records)
MODULES = "modules"  # rid -> the module's body
NAMES = "module_names"  # API name -> rid: one row per name makes names unique, whoever writes
VERSIONS = "module_versions"  # "<rid>/<version>" -> the version's body, written once, never replaced
TABLES = (MODULES, NAMES, VERSIONS)


class ModuleNameTaken(Exception):
    """Another module (archived or not) has that API name."""


@dataclass(frozen=True)
class ModuleVersion:
    """One version of one module: what a `derived` node resolves against."""

    rid: str
    api_name: str
    version: int
    created_by: str
    created_at_ns: int
    definition: dict[str, Any]  # Nominal's ModuleVersionDefinition, wire form
    archived: bool  # the module's state when this was read


@dataclass(frozen=True)
class Module:
    rid: str
    api_name: str
    title: str
    description: str
    created_by: str
    created_at_ns: int
    archived_at_ns: int | None
    workspace: str | None
    latest: int  # the newest version number
    # The `dataSourceRids` of the token that created it: who may see it (compute/storage/catalog_reach.py);
    # a module from before this was kept: everyone's, as it was then.
    reach: tuple[str, ...] = ("*",)


class ModuleStore:
    """Modules in `SqliteRows` (`<data dir>/modules.sqlite`) or in shared rows (Redis). Every change
    is one `CatalogRows.write` of the rows it read and the rows it makes: a version number or name
    taken meanwhile by another process makes it read again (update) or fail (create), so versions
    stay immutable and names unique however many processes write. Any thread may use it."""

    def __init__(self, path: Path | None = None, *, rows: CatalogRows | None = None) -> None:
        if rows is None:
            assert path is not None, "a path for SqliteRows, or rows"
            _migrate(path)
            rows = SqliteRows(path, TABLES)
        self.rows = rows
        self._lock = threading.Lock()  # this process's writers in turn: a retry is for other processes

    @property
    def shared(self) -> bool:
        """Whether every change is announced by the rows themselves to every process sharing them."""
        return self.rows.shared

    # -- changes --------------------------------------------------------------------------------
    def create(
        self,
        api_name: str,
        title: str,
        description: str,
        definition: dict[str, Any],
        created_by: str,
        now_ns: int,
        workspace: str | None = None,
        reach: tuple[str, ...] = ("*",),
    ) -> tuple[Module, ModuleVersion]:
        rid = MODULE_RID_PREFIX + str(uuid.uuid4())
        module = Module(rid, api_name, title, description, created_by, now_ns, None, workspace, 1, reach)
        version = {"created_by": created_by, "created_at_ns": now_ns, "definition": definition}
        writes = [
            RowWrite(NAMES, api_name, rid),
            RowWrite(MODULES, rid, json.dumps(_module_body(module))),
            RowWrite(VERSIONS, _version_key(rid, 1), json.dumps(version)),
        ]
        with self._lock:
            if not self.rows.write(writes, KIND, [rid]):
                raise ModuleNameTaken(api_name)  # the rid is new: only the name can be taken
        return module, self._version(module, 1, version)

    def update(
        self,
        rid: str,
        title: str,
        description: str,
        definition: dict[str, Any],
        created_by: str,
        now_ns: int,
    ) -> tuple[Module, ModuleVersion] | None:
        """A new version with this definition (and the module's new title and description); None:
        no such module."""
        version = {"created_by": created_by, "created_at_ns": now_ns, "definition": definition}
        with self._lock:
            while True:  # until no other process changed the module between the read and the write
                was = self.rows.get(MODULES, rid)
                if was is None:
                    return None
                module = _module(json.loads(was))
                module = Module(
                    rid,
                    module.api_name,
                    title,
                    description,
                    module.created_by,
                    module.created_at_ns,
                    module.archived_at_ns,
                    module.workspace,
                    module.latest + 1,
                    module.reach,
                )
                writes = [
                    RowWrite(MODULES, rid, json.dumps(_module_body(module)), was),
                    RowWrite(VERSIONS, _version_key(rid, module.latest), json.dumps(version)),
                ]
                if self.rows.write(writes, KIND, [rid]):
                    return module, self._version(module, module.latest, version)

    def set_archived(self, rids: list[str], archived_at_ns: int | None) -> list[str]:
        """Archive (a time) or unarchive (None) these modules; the rids that exist, in order given.
        Nothing changes unless all exist."""
        with self._lock:
            while True:  # as in `update`
                bodies = {rid: self.rows.get(MODULES, rid) for rid in rids}
                if any(b is None for b in bodies.values()):
                    return [rid for rid in rids if bodies[rid] is not None]
                writes = []
                for rid, was in bodies.items():
                    assert was is not None
                    body = json.loads(was)
                    if (body["archived_at_ns"] is None) == (archived_at_ns is None):
                        continue  # already so: archiving again keeps the first time
                    body["archived_at_ns"] = archived_at_ns
                    writes.append(RowWrite(MODULES, rid, json.dumps(body), was))
                if not writes or self.rows.write(writes, KIND, [w.rid for w in writes]):
                    return rids

    # -- reads ----------------------------------------------------------------------------------
    def module(self, rid: str) -> Module | None:
        body = self.rows.get(MODULES, rid)
        return None if body is None else _module(json.loads(body))

    def module_named(self, api_name: str) -> Module | None:
        rid = self.rows.get(NAMES, api_name)
        return None if rid is None else self.module(rid)

    def modules(self) -> list[Module]:
        return [m for rid in self.rows.rids(MODULES) if (m := self.module(rid)) is not None]

    def version(self, module: Module, version: int) -> ModuleVersion | None:
        body = self.rows.get(VERSIONS, _version_key(module.rid, version))
        return None if body is None else self._version(module, version, json.loads(body))

    @staticmethod
    def _version(module: Module, version: int, body: dict[str, Any]) -> ModuleVersion:
        return ModuleVersion(
            module.rid,
            module.api_name,
            version,
            body["created_by"],
            body["created_at_ns"],
            body["definition"],
            module.archived_at_ns is not None,
        )


def _version_key(rid: str, version: int) -> str:
    return f"{rid}/{version}"


def _migrate(path: Path) -> None:
    """A modules.sqlite from before the rows (tables `modules` with an `api_name` column, and
    `versions`) is moved into them once, in one transaction: no module or version is lost."""
    if not path.exists():
        return
    db = sqlite3.connect(path, timeout=10)
    try:
        columns = [row[1] for row in db.execute("PRAGMA table_info(modules)")]
        if "api_name" not in columns:
            return
        db.execute("PRAGMA synchronous=FULL")
        with db:
            db.execute("BEGIN IMMEDIATE")  # DDL opens no transaction by itself
            db.execute("ALTER TABLE modules RENAME TO modules_before_rows")
            for table in TABLES:
                db.execute(f"CREATE TABLE {table} (rid TEXT PRIMARY KEY, body TEXT NOT NULL)")
            db.execute(f"INSERT INTO {MODULES} SELECT rid, body FROM modules_before_rows")
            db.execute(f"INSERT INTO {NAMES} SELECT api_name, rid FROM modules_before_rows")
            db.execute(f"INSERT INTO {VERSIONS} SELECT rid || '/' || version, body FROM versions")
            db.execute("DROP TABLE modules_before_rows")
            db.execute("DROP TABLE versions")
    finally:
        db.close()


def _module_body(m: Module) -> dict[str, Any]:
    return {
        "rid": m.rid,
        "api_name": m.api_name,
        "title": m.title,
        "description": m.description,
        "created_by": m.created_by,
        "created_at_ns": m.created_at_ns,
        "archived_at_ns": m.archived_at_ns,
        "workspace": m.workspace,
        "latest": m.latest,
        "reach": list(m.reach),
    }


def _module(b: dict[str, Any]) -> Module:
    return Module(
        b["rid"],
        b["api_name"],
        b["title"],
        b["description"],
        b["created_by"],
        b["created_at_ns"],
        b["archived_at_ns"],
        b["workspace"],
        b["latest"],
        tuple(b.get("reach") or ("*",)),
    )
