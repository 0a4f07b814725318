"""Nominal's ModuleService over HTTP, on its own paths and in its own wire form (Conjure JSON of
nominal-api's `module` package): create, update (a new version), batch get, search, archive and
unarchive the modules that `derived` series apply (compute/storage/modules.py,
compute/evaluation/compiler/builders/derived.py). Plus one read Nominal's service has not: a single module by
rid (`GET /scout/v2/module/{moduleRid}`).

Admitted as the asset catalog is (app/api/assets.py): reading needs a token (authentication on),
changing needs the `admin` claim. A module belongs to its creator's `dataSourceRids` (kept with it):
a token whose reach does not overlap them finds no module there, as if none existed
(compute/storage/catalog_reach.py).
Errors carry Nominal's `Module:` error names. Archiving or
unarchiving, once stored, reaches the live subscriptions that resolved through the module
(app/fanout/catalog_edits.py); an update adds a version, and a `derived` node pins one, so it
changes no live result."""

from __future__ import annotations

import asyncio
import datetime
import logging
import re
import time
from typing import Any, Literal

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field

from app.api.assets import CatalogRoute, admit, reach_of
from app.config import Settings
from app.http.errors import HttpError
from app.protocol.auth import Principal
from compute.evaluation.compiler.builders.derived import definition_cycle, malformation
from compute.storage.catalog_reach import Reach
from compute.storage.modules import KIND, Module, ModuleNameTaken, ModuleStore, ModuleVersion

_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ConjureError"}}}  # app/openapi.py
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {
        "description": "an invalid body or name (Module:Invalid..., the params say which)",
        "content": _ERROR,
    },
    401: {"description": "a missing or invalid bearer token (authentication on)", "content": _ERROR},
    403: {"description": "changing needs a token with the `admin` claim", "content": _ERROR},
    404: {"description": "Module:ModuleRidsNotFound / Module:ModulesNotFound", "content": _ERROR},
    409: {
        "description": "Module:ModuleNameConflict, FunctionNameConflict, ParameterNameConflict",
        "content": _ERROR,
    },
    503: {"description": "the module catalog (Redis, when shared) is out of reach", "content": _ERROR},
}


class ModuleRoute(CatalogRoute):
    doing = "read or change modules"


router = APIRouter(prefix="/scout/v2/module", tags=["modules"], responses=ERRORS, route_class=ModuleRoute)
STORE_FILE = "modules.sqlite"
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")  # Nominal's rule for module, function and parameter names
MAX_FUNCTIONS = 100  # ModuleVersionDefinition.functions: "Limited to 100"
MAX_PAGE = 1000
MAX_ITEMS = 1000  # items of one list in a body (as /assets/v1's: app/api/assets.py MAX_ITEMS)
USER_RID_PREFIX = "ri.sparkwire.main.user."
logger = logging.getLogger(__name__)


def open_store(app: FastAPI, settings: Settings) -> ModuleStore:
    """The modules, for these routes and for every plan compiled in this process: in the data dir;
    in Redis when shared (`Settings.shared_catalog`: the tiers, or servers on the Kafka log given a
    redis-url), beside the asset catalog, where every process of it (the edges, the compute tier)
    reads the same modules and hears of each change."""
    if settings.shared_catalog:
        from compute.storage.redis.catalog_rows import connect_rows

        if (settings.data_dir / STORE_FILE).exists():  # from before the shared modules: not read
            logger.warning(
                "%s is not read: with a shared catalog the modules are in Redis, shared by every process "
                "(docs/decisions/0062); create its modules again through /scout/v2/module",
                settings.data_dir / STORE_FILE,
            )
        rows = connect_rows(settings.redis_url, settings.redis_prefix, {}, what="the module catalog")
        store = ModuleStore(rows=rows)
    else:
        store = ModuleStore(settings.data_dir / STORE_FILE)
    app.state.modules = store
    return store


# -- Nominal's request beans ---------------------------------------------------------------------
ValueType = Literal[
    "NUMERIC_SERIES",
    "ENUM_SERIES",
    "RANGES_SERIES",
    "STRING_CONSTANT",
    "DURATION_CONSTANT",
    "TIMESTAMP_CONSTANT",
    "INTEGER_CONSTANT",
    "DOUBLE_CONSTANT",
    "ASSET_RID",
]


class FunctionParameter(BaseModel):
    name: str
    type: ValueType


class Function(BaseModel):
    name: str
    description: str
    parameters: list[FunctionParameter] = Field(max_length=MAX_ITEMS)
    functionNode: dict[str, Any] = Field(
        description="a FunctionNode: numeric, enum or ranges (udf is refused)"
    )
    isExported: bool


class ModuleVersionDefinition(BaseModel):
    # one more than allowed: `_checked` then answers Nominal's message; a million is refused unread
    functions: list[Function] = Field(max_length=MAX_FUNCTIONS + 1)


class CreateModuleRequest(BaseModel):
    apiName: str
    title: str
    description: str
    definition: ModuleVersionDefinition
    workspace: str | None = None


class UpdateModuleRequest(BaseModel):
    title: str
    description: str
    definition: ModuleVersionDefinition


class BatchGetModulesRequest(BaseModel):
    requests: list[dict[str, Any]] = Field(
        max_length=MAX_ITEMS, description="RequestModuleRef: name or rid, with a versionStrategy"
    )


class BatchArchiveModulesRequest(BaseModel):
    requests: list[str] = Field(max_length=MAX_ITEMS)


class SearchModulesSortOptions(BaseModel):
    isDescending: bool
    field: Literal["NAME", "LAST_UPDATED_AT", "CREATED_AT", "ARCHIVED_AT"]


class SearchModulesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: dict[str, Any] = Field(description="SearchModulesQuery")
    sort: SearchModulesSortOptions | None = None
    pageSize: int = Field(ge=1, le=MAX_PAGE)
    nextPageToken: str | None = None
    archivedStatuses: list[Literal["NOT_ARCHIVED", "ARCHIVED"]] | None = None


# -- Nominal's response beans, as plain JSON ------------------------------------------------------
def _datetime(ns: int) -> str:
    seconds, nanos = divmod(ns, 1_000_000_000)
    at = datetime.datetime.fromtimestamp(seconds, datetime.UTC).replace(microsecond=nanos // 1000)
    return at.isoformat().replace("+00:00", "Z")


def _metadata(m: Module) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rid": m.rid,
        "apiName": m.api_name,
        "title": m.title,
        "description": m.description,
        "createdBy": m.created_by,
        "createdAt": _datetime(m.created_at_ns),
    }
    if m.archived_at_ns is not None:
        out["archivedAt"] = _datetime(m.archived_at_ns)
    return out


def _version_metadata(v: ModuleVersion) -> dict[str, Any]:
    return {"createdBy": v.created_by, "createdAt": _datetime(v.created_at_ns), "version": str(v.version)}


def module_out(m: Module, v: ModuleVersion) -> dict[str, Any]:
    """Nominal's `Module`: the module, one version's metadata and that version's definition."""
    return {"metadata": _metadata(m), "versionMetadata": _version_metadata(v), "definition": v.definition}


# -- admission and errors ------------------------------------------------------------------------
def _admit(request: Request, admin: bool = False) -> tuple[ModuleStore, Principal]:
    """The store and the principal, once the request is admitted as /assets/v1's are."""
    principal = admit(request, "modules", admin)
    store: ModuleStore = request.app.state.modules
    return store, principal


def _error(status: int, name: str, message: str, **params: str) -> HttpError:
    return HttpError(status, message, name=f"Module:{name}", params=params)


def _changed(request: Request, rid: str) -> None:
    """Stored: the live subscriptions that resolved through this module re-resolve (shared rows
    announced it with the change: every process hears of it from Redis, this one too)."""
    store: ModuleStore = request.app.state.modules
    request.app.state.sparkwire.catalog_edits.changed(KIND, rid, announced=store.shared)


def _checked(definition: ModuleVersionDefinition) -> dict[str, Any]:
    """A definition as Nominal checks it, in its wire form to keep."""
    functions = definition.functions
    if len(functions) > MAX_FUNCTIONS:
        raise HttpError(
            400, f"a module version holds at most {MAX_FUNCTIONS} functions, got {len(functions)}"
        )
    names = [f.name for f in functions]
    bad = [n for n in names if not NAME.match(n)]
    if bad:
        raise _error(
            400,
            "InvalidFunctionNames",
            f"function names must begin with a letter and hold only letters, digits and '_': {bad}",
            functionNames=",".join(bad),
        )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _error(
            409,
            "FunctionNameConflict",
            f"function names appear more than once: {twice}",
            functionNames=",".join(twice),
        )
    for f in functions:
        parameters = [p.name for p in f.parameters]
        for p in parameters:
            if not NAME.match(p):
                raise _error(
                    400,
                    "InvalidParameterNames",
                    f"function '{f.name}': parameter name {p!r} must begin with a letter and hold only "
                    "letters, digits and '_'",
                    parameterName=p,
                )
        twice = sorted({p for p in parameters if parameters.count(p) > 1})
        if twice:
            raise _error(
                409,
                "ParameterNameConflict",
                f"function '{f.name}' names parameters more than once: {twice}",
                parameterNames=",".join(twice),
            )
        kind = f.functionNode.get("type")
        if kind == "udf":
            raise _error(
                400,
                "InvalidRegisteredUdf",
                f"function '{f.name}' is a registered UDF: Sparkwire does not compile or run Rust UDFs",
                reason="registered UDFs are not supported by Sparkwire",
            )
        if kind not in ("numeric", "enum", "ranges") or not isinstance(f.functionNode.get(kind), dict):
            raise HttpError(
                400,
                f"function '{f.name}': functionNode must be a FunctionNode (numeric, enum or ranges), "
                f"got {kind!r}",
                params={"functionName": f.name},
            )
        parameter_types = {p.name: p.type for p in f.parameters}
        problem = malformation(str(kind), f.functionNode[str(kind)], parameter_types)
        if problem is not None:
            raise HttpError(
                400,
                f"function '{f.name}': its {kind} node is not a valid Nominal node: {problem}",
                params={"functionName": f.name},
            )
    return definition.model_dump(mode="json")


async def _refuse_cycles(store: ModuleStore, api_name: str, version: int, definition: dict[str, Any]) -> None:
    """A version whose functions apply themselves, directly or through other functions (its own or
    stored modules'), is refused before it is stored, naming the cycle (each function once, in
    order, the first again at the end). The stored modules are read off the event loop."""
    cycle = await asyncio.to_thread(definition_cycle, store, api_name, version, definition["functions"])
    if cycle is not None:
        raise _error(
            400,
            "InvalidFunctionCycle",
            f"function {cycle[0]} applies itself: {' -> '.join(cycle)}",
            functions=" -> ".join(cycle),
        )


def _user(principal: Principal) -> str:
    return USER_RID_PREFIX + principal.subject


# -- routes --------------------------------------------------------------------------------------
@router.post("", summary="Create a module (admin): its version 1")
async def create_module(body: CreateModuleRequest, request: Request) -> dict[str, Any]:
    store, principal = _admit(request, admin=True)
    if not NAME.match(body.apiName):
        raise _error(
            400,
            "InvalidModuleApiName",
            f"module API name {body.apiName!r} must begin with a letter and hold only letters, digits "
            "and '_'",
            moduleApiName=body.apiName,
        )
    definition = _checked(body.definition)
    await _refuse_cycles(store, body.apiName, 1, definition)
    try:
        module, version = await asyncio.to_thread(
            store.create,
            body.apiName,
            body.title,
            body.description,
            definition,
            _user(principal),
            time.time_ns(),
            body.workspace,
            principal.data_source_patterns,  # whose module it is (compute/storage/catalog_reach.py)
        )
    except ModuleNameTaken:
        raise _error(
            409,
            "ModuleNameConflict",
            f"a module is already named '{body.apiName}'",
            moduleApiName=body.apiName,
        ) from None
    _changed(request, module.rid)
    return module_out(module, version)


@router.put("/{moduleRid}", summary="Update a module (admin): a new version")
async def update_module(moduleRid: str, body: UpdateModuleRequest, request: Request) -> dict[str, Any]:
    store, principal = _admit(request, admin=True)
    existing = await asyncio.to_thread(_visible, store, reach_of(principal), moduleRid)
    if existing is None:
        raise _error(404, "ModuleRidsNotFound", f"no module has the rid {moduleRid!r}", moduleRids=moduleRid)
    definition = _checked(body.definition)
    await _refuse_cycles(store, existing.api_name, existing.latest + 1, definition)
    done = await asyncio.to_thread(
        store.update, moduleRid, body.title, body.description, definition, _user(principal), time.time_ns()
    )
    if done is None:
        raise _error(404, "ModuleRidsNotFound", f"no module has the rid {moduleRid!r}", moduleRids=moduleRid)
    _changed(request, moduleRid)
    return module_out(*done)


@router.get("/{moduleRid}", summary="One module by rid (Sparkwire's; Nominal has batch-get)")
async def get_module(moduleRid: str, request: Request, version: str | None = None) -> dict[str, Any]:
    """Its latest version, or `?version=N`."""
    store, principal = _admit(request)
    strategy = (
        {"type": "latest", "latest": {}}
        if version is None
        else {"type": "pinned", "pinned": {"version": version}}
    )
    found = await asyncio.to_thread(
        _resolve,
        store,
        reach_of(principal),
        {"type": "rid", "rid": {"rid": moduleRid, "versionStrategy": strategy}},
    )
    if found is None:
        raise _error(
            404,
            "ModulesNotFound",
            f"no module {moduleRid!r} at version {version or 'latest'}",
            moduleRefs=moduleRid,
        )
    return module_out(*found)


def _union(value: Any, what: str, allowed: tuple[str, ...]) -> tuple[str, Any]:
    if not isinstance(value, dict) or value.get("type") not in allowed or value.get(value["type"]) is None:
        raise HttpError(
            400, f"{what} must be one of {list(allowed)} as a Conjure union", params={"field": what}
        )
    return value["type"], value[value["type"]]


def _visible(store: ModuleStore, reach: Reach, rid: str) -> Module | None:
    """The module, if this reach sees it (compute/storage/catalog_reach.py): another tenant's is
    answered as one that does not exist, at every route, so that it exists is not told either."""
    module = store.module(rid)
    return module if module is not None and reach.sees_module(module.reach) else None


def _resolve(store: ModuleStore, reach: Reach, ref: Any) -> tuple[Module, ModuleVersion] | None:
    """A `RequestModuleRef` (by name or rid, latest or pinned version); None: not found, or not
    seen by this reach."""
    kind, inner = _union(ref, "RequestModuleRef", ("name", "rid"))
    if not isinstance(inner, dict):
        raise HttpError(400, "RequestModuleRef must be an object", params={"field": "RequestModuleRef"})
    key = inner.get("apiName") if kind == "name" else inner.get("rid")
    if not isinstance(key, str):
        raise HttpError(400, f"RequestModuleRef.{kind} needs {'apiName' if kind == 'name' else 'rid'}")
    module = store.module_named(key) if kind == "name" else store.module(key)
    if module is None or not reach.sees_module(module.reach):
        return None
    strategy, pinned = _union(inner.get("versionStrategy"), "versionStrategy", ("latest", "pinned"))
    number = module.latest
    if strategy == "pinned":
        text = pinned.get("version") if isinstance(pinned, dict) else None
        if not isinstance(text, str) or not re.fullmatch(r"0|[1-9][0-9]{0,17}", text):
            raise _error(
                400,
                "InvalidModuleVersionString",
                f'module version {text!r} must be a bare number ("1", "2", ...)',
                version=str(text),
            )
        number = int(text)
    version = store.version(module, number)
    return None if version is None else (module, version)


@router.post("/batch-get", summary="Modules by name or rid, latest or pinned version")
async def batch_get_modules(body: BatchGetModulesRequest, request: Request) -> list[dict[str, Any]]:
    store, principal = _admit(request)
    reach = reach_of(principal)
    found = [await asyncio.to_thread(_resolve, store, reach, ref) for ref in body.requests]
    missing = [_ref_text(ref) for ref, f in zip(body.requests, found, strict=True) if f is None]
    if missing:
        raise _error(404, "ModulesNotFound", f"modules not found: {missing}", moduleRefs=",".join(missing))
    return [module_out(*f) for f in found if f is not None]


def _ref_text(ref: dict[str, Any]) -> str:
    inner = ref.get(ref.get("type", "")) or {}
    return str(inner.get("apiName") or inner.get("rid"))


async def _set_archived(request: Request, body: BatchArchiveModulesRequest, archived: bool) -> list[str]:
    store, principal = _admit(request, admin=True)
    reach = reach_of(principal)
    hidden = [rid for rid in body.requests if await asyncio.to_thread(_visible, store, reach, rid) is None]
    at = time.time_ns() if archived else None
    done = [] if hidden else await asyncio.to_thread(store.set_archived, body.requests, at)
    missing = hidden or [rid for rid in body.requests if rid not in done]
    if missing:
        raise _error(
            404, "ModuleRidsNotFound", f"no module has the rid(s) {missing}", moduleRids=",".join(missing)
        )
    for rid in dict.fromkeys(body.requests):
        _changed(request, rid)
    return body.requests


@router.post("/archive", summary="Archive modules (admin): derived series over them end")
async def batch_archive_modules(body: BatchArchiveModulesRequest, request: Request) -> dict[str, Any]:
    return {"archivedModuleRids": await _set_archived(request, body, archived=True)}


@router.post("/unarchive", summary="Unarchive modules (admin)")
async def batch_unarchive_modules(body: BatchArchiveModulesRequest, request: Request) -> dict[str, Any]:
    return {"unarchivedModuleRids": await _set_archived(request, body, archived=False)}


def _matches(query: Any, module: Module, last_updated_by: str) -> bool:
    kind, inner = _union(
        query,
        "SearchModulesQuery",
        ("searchText", "createdBy", "lastUpdatedBy", "workspace", "and", "or", "not"),
    )
    if kind == "searchText":
        text = str(inner).lower()
        return any(text in s.lower() for s in (module.api_name, module.title, module.description))
    if kind == "createdBy":
        return module.created_by == inner
    if kind == "lastUpdatedBy":
        return last_updated_by == inner
    if kind == "workspace":
        return module.workspace == inner
    if kind == "not":
        return not _matches(inner, module, last_updated_by)
    if not isinstance(inner, list):
        raise HttpError(400, f"SearchModulesQuery.{kind} must be a list", params={"field": kind})
    results = [_matches(q, module, last_updated_by) for q in inner]
    return all(results) if kind == "and" else any(results)


def _search(store: ModuleStore, reach: Reach, body: SearchModulesRequest) -> dict[str, Any]:
    statuses = set(body.archivedStatuses or ["NOT_ARCHIVED"])
    rows: list[tuple[Module, ModuleVersion]] = []
    for module in store.modules():
        if not reach.sees_module(module.reach):
            continue
        if ("ARCHIVED" if module.archived_at_ns is not None else "NOT_ARCHIVED") not in statuses:
            continue
        latest = store.version(module, module.latest)
        if latest is not None and _matches(body.query, module, latest.created_by):
            rows.append((module, latest))
    sort = body.sort or SearchModulesSortOptions(isDescending=False, field="NAME")
    keys = {
        "NAME": lambda r: (r[0].api_name, r[0].rid),
        "LAST_UPDATED_AT": lambda r: (r[1].created_at_ns, r[0].rid),
        "CREATED_AT": lambda r: (r[0].created_at_ns, r[0].rid),
        "ARCHIVED_AT": lambda r: (r[0].archived_at_ns or 0, r[0].rid),
    }
    rows.sort(key=keys[sort.field], reverse=sort.isDescending)
    try:
        start = int(body.nextPageToken or 0)
    except ValueError:
        raise HttpError(400, f"nextPageToken {body.nextPageToken!r} is not one this server gave") from None
    page = rows[start : start + body.pageSize]
    out: dict[str, Any] = {
        "results": [{"metadata": _metadata(m), "latest": _version_metadata(v)} for m, v in page]
    }
    if start + body.pageSize < len(rows):
        out["nextPageToken"] = str(start + body.pageSize)
    return out


@router.post("/search", summary="Search modules (not archived unless archivedStatuses says)")
async def search_modules(body: SearchModulesRequest, request: Request) -> dict[str, Any]:
    store, principal = _admit(request)
    if (terms := _terms(body.query)) > MAX_ITEMS:  # each is evaluated once per module
        raise HttpError(
            400,
            f"SearchModulesQuery: {terms} terms, more than the limit of {MAX_ITEMS}",
            params={"limit": str(MAX_ITEMS)},
        )
    return await asyncio.to_thread(_search, store, reach_of(principal), body)


def _terms(query: Any) -> int:
    """The objects of a query (its terms, `and`/`or`/`not` included), counted without recursion."""
    count, stack = 0, [query]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            count += 1
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count
