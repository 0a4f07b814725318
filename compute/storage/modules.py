"""Nominal modules kept by Sparkwire: named collections of functions that `derived` series apply.

A module has a unique API name and a history of versions: creating it makes version "1", each
update adds the next ("2", "3", ...; Nominal's version strings are a bare MAJOR number), and a
version, once made, never changes, so a `derived` node pinned to it always computes the same
thing. Archiving hides a module from search and from computation; unarchiving brings it back.
Each version's definition is kept as Nominal's `ModuleVersionDefinition` JSON, as received.

Kept in one SQLite file in the data dir beside the point log, written with `synchronous=FULL` so
that an answered change survives a restart and a kill -9, as the asset catalog is
(docs/decisions/0062-modules-and-derived-series.md)."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODULE_RID_PREFIX = "ri.scout.main.module."


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


class ModuleStore:
    """Modules in `<data dir>/modules.sqlite`. Each call opens its own connection, so any thread
    (the event loop's workers, the compute tier compiling a plan) may use it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS modules (rid TEXT PRIMARY KEY, api_name TEXT NOT NULL UNIQUE,"
                " body TEXT NOT NULL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS versions (rid TEXT NOT NULL, version INTEGER NOT NULL,"
                " body TEXT NOT NULL, PRIMARY KEY (rid, version))"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10)
        db.execute("PRAGMA synchronous=FULL")  # fsync on commit: an answered change is on disk
        return db

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
    ) -> tuple[Module, ModuleVersion]:
        rid = MODULE_RID_PREFIX + str(uuid.uuid4())
        module = Module(rid, api_name, title, description, created_by, now_ns, None, workspace, 1)
        version = {"created_by": created_by, "created_at_ns": now_ns, "definition": definition}
        with self._lock, self._connect() as db:
            try:
                db.execute(
                    "INSERT INTO modules (rid, api_name, body) VALUES (?, ?, ?)",
                    (rid, api_name, json.dumps(_module_body(module))),
                )
            except sqlite3.IntegrityError:
                raise ModuleNameTaken(api_name) from None
            db.execute(
                "INSERT INTO versions (rid, version, body) VALUES (?, 1, ?)", (rid, json.dumps(version))
            )
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
        with self._lock, self._connect() as db:
            module = self._module(db, rid)
            if module is None:
                return None
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
            )
            version = {"created_by": created_by, "created_at_ns": now_ns, "definition": definition}
            db.execute("UPDATE modules SET body = ? WHERE rid = ?", (json.dumps(_module_body(module)), rid))
            db.execute(
                "INSERT INTO versions (rid, version, body) VALUES (?, ?, ?)",
                (rid, module.latest, json.dumps(version)),
            )
        return module, self._version(module, module.latest, version)

    def set_archived(self, rids: list[str], archived_at_ns: int | None) -> list[str]:
        """Archive (a time) or unarchive (None) these modules; the rids that exist, in order given.
        Nothing changes unless all exist."""
        with self._lock, self._connect() as db:
            modules = [self._module(db, rid) for rid in rids]
            if any(m is None for m in modules):
                return [m.rid for m in modules if m is not None]
            for m in modules:
                assert m is not None
                if (m.archived_at_ns is None) == (archived_at_ns is None):
                    continue  # already so: archiving again keeps the first time
                body = _module_body(m) | {"archived_at_ns": archived_at_ns}
                db.execute("UPDATE modules SET body = ? WHERE rid = ?", (json.dumps(body), m.rid))
        return rids

    # -- reads ----------------------------------------------------------------------------------
    def module(self, rid: str) -> Module | None:
        with self._connect() as db:
            return self._module(db, rid)

    def module_named(self, api_name: str) -> Module | None:
        with self._connect() as db:
            row = db.execute("SELECT body FROM modules WHERE api_name = ?", (api_name,)).fetchone()
        return None if row is None else _module(json.loads(row[0]))

    def modules(self) -> list[Module]:
        with self._connect() as db:
            return [_module(json.loads(r[0])) for r in db.execute("SELECT body FROM modules ORDER BY rid")]

    def version(self, module: Module, version: int) -> ModuleVersion | None:
        with self._connect() as db:
            row = db.execute(
                "SELECT body FROM versions WHERE rid = ? AND version = ?", (module.rid, version)
            ).fetchone()
        return None if row is None else self._version(module, version, json.loads(row[0]))

    @staticmethod
    def _module(db: sqlite3.Connection, rid: str) -> Module | None:
        row = db.execute("SELECT body FROM modules WHERE rid = ?", (rid,)).fetchone()
        return None if row is None else _module(json.loads(row[0]))

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
    )
