"""Assets and runs over HTTP: create, read, list, update and delete the catalog that
`ChannelSeries.asset`, `ChannelSeries.run`, `Dataset.asset` and `Dataset.run` resolve against
(compute/storage/assets.py).

Reading needs a token as ingest does (authentication on); changing needs the `admin` claim. A token
sees only the assets and runs behind a data source it reaches (compute/storage/catalog_reach.py);
any other is left out of lists and answered 404 as a rid no entry has. An asset names data sources,
it does not grant them: a subscription through an asset is checked against the data sources behind
it, as if it had named them itself. Every change, once stored, reaches the live subscriptions that
resolved through it (app/fanout/catalog_edits.py)."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import APIRouter, FastAPI, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.api.admitted_route import AdmittedRoute, admit_request
from app.config import Settings
from app.http.errors import HttpError
from app.protocol.auth import ADMIN_CLAIM, Principal
from compute.evaluation.compiler.datasets import CatalogKind
from compute.storage.assets import (
    TABLE_KIND,
    Asset,
    AssetStore,
    CatalogUnavailable,
    DataScope,
    Run,
    TypedValue,
)
from compute.storage.catalog_reach import Reach
from schemas.timestamps import NANOS_PER_SECOND

_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ConjureError"}}}  # app/openapi.py
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "an invalid body (the message says what)", "content": _ERROR},
    401: {"description": "a missing or invalid bearer token (authentication on)", "content": _ERROR},
    403: {"description": "changing needs a token with the `admin` claim", "content": _ERROR},
    404: {"description": "no asset or run has that rid", "content": _ERROR},
    503: {"description": "the catalog (Redis, when shared) is out of reach", "content": _ERROR},
}


class CatalogRoute(AdmittedRoute):
    """Admitted before its body is read (app/api/admitted_route.py). A shared catalog out of reach
    (Redis away) is a 503 of every route: nothing was changed, the client may send the request again."""

    doing = "read or change assets and runs"

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except CatalogUnavailable as exc:
                raise HttpError(503, str(exc)) from None

        return guarded


router = APIRouter(prefix="/assets/v1", tags=["assets and runs"], responses=ERRORS, route_class=CatalogRoute)
STORE_FILE = "assets.sqlite"
logger = logging.getLogger(__name__)


def open_store(app: FastAPI, settings: Settings) -> AssetStore:
    """The catalog beside the log, for these routes and for every plan compiled in this process: in the
    data dir; in Redis when shared (`Settings.shared_catalog`: the tiers, or servers on the Kafka log
    given a redis-url), where every process of it (the edges, the compute tier) reads the
    same one and hears of each change (decision 0066)."""
    if settings.shared_catalog:
        from compute.storage.redis.catalog_rows import connect_rows

        if (settings.data_dir / STORE_FILE).exists():  # from before decision 0066: not read any more
            logger.warning(
                "%s is not read: with a shared catalog the assets and runs are in Redis, shared by "
                "every process (docs/decisions/0066); create its assets and runs again through /assets/v1",
                settings.data_dir / STORE_FILE,
            )

        store = AssetStore(rows=connect_rows(settings.redis_url, settings.redis_prefix, TABLE_KIND))
    else:
        store = AssetStore(settings.data_dir / STORE_FILE)
    app.state.assets = store
    return store


# Items in one list or map of a body: with the body limit (SPARKWIRE_MAX_JSON_BODY_BYTES) it bounds
# what one request makes the server validate and keep; pydantic refuses a longer list before
# validating its items (400), so a body of a million empty items costs microseconds, not seconds.
MAX_ITEMS = 1000
MAX_SERIES_TAGS = 64  # as an ingested series' tags (SPARKWIRE_MAX_TAGS_PER_SERIES' default)


class DataScopeBody(BaseModel):
    dataScopeName: str = Field(min_length=1)
    dataSourceRid: str = Field(min_length=1)
    seriesTags: dict[str, str] = Field(
        default_factory=dict, max_length=MAX_SERIES_TAGS, description="tags that pre-filter the data source"
    )


class Time(BaseModel):
    seconds: int
    nanos: int = Field(default=0, ge=0, lt=NANOS_PER_SECOND)

    def ns(self) -> int:
        return self.seconds * NANOS_PER_SECOND + self.nanos


class StringPropertyValue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["stringValue"]
    stringValue: str


class NumericPropertyValue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["numericValue"]
    numericValue: float


# Nominal's `TypedPropertyValue` union: `{"type": "numericValue", "numericValue": 2.5}` or
# `{"type": "stringValue", "stringValue": "LOX"}` (what selectNumericProperty and
# selectCategoricalProperty read); a union carries exactly its variant's value.
TypedPropertyValue = Annotated[StringPropertyValue | NumericPropertyValue, Field(discriminator="type")]


def _typed_in(typed: dict[str, TypedPropertyValue] | None) -> dict[str, TypedValue] | None:
    """The typed properties as the store keeps them; an empty name or a non-finite number (a property
    is a fact, not a reading) is a 400 naming the property."""
    if typed is None:
        return None
    out: dict[str, TypedValue] = {}
    for name, v in typed.items():
        if not name:
            raise HttpError(400, "a typed property needs a non-empty name", params={"typedProperties": ""})
        if isinstance(v, NumericPropertyValue) and not math.isfinite(v.numericValue):
            raise HttpError(
                400, f"typed property {name!r}: numericValue must be finite", params={"typedProperty": name}
            )
        out[name] = v.stringValue if isinstance(v, StringPropertyValue) else v.numericValue
    return out


def _typed_out(typed: dict[str, TypedValue]) -> dict[str, TypedPropertyValue]:
    return {
        name: StringPropertyValue(type="stringValue", stringValue=v)
        if isinstance(v, str)
        else NumericPropertyValue(type="numericValue", numericValue=v)
        for name, v in typed.items()
    }


class CreateAsset(BaseModel):
    title: str = Field(min_length=1)
    dataScopes: list[DataScopeBody] = Field(max_length=MAX_ITEMS)
    properties: dict[str, str] = Field(default_factory=dict, max_length=MAX_ITEMS)
    typedProperties: dict[str, TypedPropertyValue] = Field(default_factory=dict, max_length=MAX_ITEMS)


class CreateRun(BaseModel):
    title: str = Field(min_length=1)
    assetRids: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)
    start: Time
    end: Time | None = Field(default=None, description="absent: the run is still going (it can stream)")
    dataScopes: list[DataScopeBody] = Field(default_factory=list, max_length=MAX_ITEMS)
    properties: dict[str, str] = Field(default_factory=dict, max_length=MAX_ITEMS)
    typedProperties: dict[str, TypedPropertyValue] = Field(default_factory=dict, max_length=MAX_ITEMS)


class UpdateAsset(BaseModel):
    """Nominal's UpdateAssetRequest, for what Sparkwire's assets hold: a field given replaces the
    asset's (`dataScopes` all of them at once); a field left out stays. Unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")
    title: str | None = Field(default=None, min_length=1)
    dataScopes: list[DataScopeBody] | None = Field(default=None, max_length=MAX_ITEMS)
    properties: dict[str, str] | None = Field(default=None, max_length=MAX_ITEMS)
    typedProperties: dict[str, TypedPropertyValue] | None = Field(default=None, max_length=MAX_ITEMS)


class UpdateRun(BaseModel):
    """A field given replaces the run's; a field left out stays. `end` given ends a run that was
    still going: a live subscription over it then ends with RUN_WITH_FIXED_END."""

    model_config = ConfigDict(extra="forbid")
    title: str | None = Field(default=None, min_length=1)
    assetRids: list[str] | None = Field(default=None, max_length=MAX_ITEMS)
    start: Time | None = None
    end: Time | None = None
    dataScopes: list[DataScopeBody] | None = Field(default=None, max_length=MAX_ITEMS)
    properties: dict[str, str] | None = Field(default=None, max_length=MAX_ITEMS)
    typedProperties: dict[str, TypedPropertyValue] | None = Field(default=None, max_length=MAX_ITEMS)


class DataScopeOut(DataScopeBody):
    pass


class AssetOut(BaseModel):
    rid: str
    title: str
    dataScopes: list[DataScopeOut]
    properties: dict[str, str]
    typedProperties: dict[str, TypedPropertyValue]


class RunOut(BaseModel):
    rid: str
    title: str
    assetRids: list[str]
    start: Time
    end: Time | None
    dataScopes: list[DataScopeOut]
    properties: dict[str, str]
    typedProperties: dict[str, TypedPropertyValue]


def _scopes_in(scopes: list[DataScopeBody]) -> list[DataScope]:
    names = [s.dataScopeName for s in scopes]
    if len(set(names)) != len(names):
        raise HttpError(
            400, f"data scope names must be unique: {names}", params={"dataScopes": ",".join(names)}
        )
    return [DataScope(s.dataScopeName, s.dataSourceRid, dict(s.seriesTags)) for s in scopes]


def _scopes_out(scopes: list[DataScope]) -> list[DataScopeOut]:
    return [
        DataScopeOut(dataScopeName=s.name, dataSourceRid=s.data_source_rid, seriesTags=s.series_tags)
        for s in scopes
    ]


def _time(ns: int) -> Time:
    return Time(seconds=ns // NANOS_PER_SECOND, nanos=ns % NANOS_PER_SECOND)


def asset_out(a: Asset) -> AssetOut:
    return AssetOut(
        rid=a.rid,
        title=a.title,
        dataScopes=_scopes_out(a.data_scopes),
        properties=a.properties,
        typedProperties=_typed_out(a.typed_properties),
    )


def run_out(r: Run) -> RunOut:
    return RunOut(
        rid=r.rid,
        title=r.title,
        assetRids=r.asset_rids,
        start=_time(r.start_ns),
        end=None if r.end_ns is None else _time(r.end_ns),
        dataScopes=_scopes_out(r.data_scopes),
        properties=r.properties,
        typedProperties=_typed_out(r.typed_properties),
    )


def admit(request: Request, what: str, admin: bool = False) -> Principal:
    """The request's principal, once admitted (Origin, then token: app/protocol/admission.py);
    changing a catalog (`admin`) needs the admin claim. `what` completes "... to read or change"."""
    principal = admit_request(request, f"read or change {what}")  # once per request: its route did
    if admin and not principal.admin:  # ANONYMOUS (authentication off) is an admin
        raise HttpError(
            403,
            f"changing {what} needs a token with the '{ADMIN_CLAIM}' claim",
            params={"claim": ADMIN_CLAIM},
        )
    return principal


def reach_of(principal: Principal) -> Reach:
    """The catalog entries a token may see (compute/storage/catalog_reach.py): those behind the data
    sources its `dataSourceRids` reach; an admin's (authentication off: everyone's) all of them."""
    return Reach(principal.data_source_patterns, everything=principal.admin)


def _store(request: Request, admin: bool = False) -> tuple[AssetStore, Reach]:
    """The asset and run catalog and the reach of the request's token, once it is admitted (`admit`).
    An entry out of that reach is answered as one that does not exist (404, or left out of a list),
    for every route: that it exists is not told either."""
    principal = admit(request, "assets and runs", admin)
    store: AssetStore = request.app.state.assets
    return store, reach_of(principal)


def _visible_asset(store: AssetStore, reach: Reach, rid: str) -> Asset | None:
    asset = store.asset(rid)
    return asset if asset is not None and reach.sees_asset(asset) else None


def _visible_run(store: AssetStore, reach: Reach, rid: str) -> Run | None:
    run = store.run(rid)
    return run if run is not None and reach.sees_run(run, store.asset) else None


def _visible_runs(store: AssetStore, reach: Reach) -> list[Run]:
    runs = store.runs()
    if reach.everything:
        return runs
    assets = {a.rid: a for a in store.assets()}
    return [r for r in runs if reach.sees_run(r, assets.get)]


def _changed(request: Request, kind: CatalogKind, rid: str) -> None:
    """The change is stored: the live subscriptions that resolved through it re-resolve (a shared
    catalog announced it with the change: every process hears of it from Redis, this one too)."""
    store: AssetStore = request.app.state.assets
    request.app.state.sparkwire.catalog_edits.changed(kind, rid, announced=store.shared)


def _missing(what: str, rid: str) -> HttpError:
    return HttpError(
        404, f"no {what} has the rid {rid!r}", name=f"Assets:{what.capitalize()}NotFound", params={"rid": rid}
    )


@router.post("/assets", summary="Create an asset (admin)", response_model=AssetOut)
async def create_asset(body: CreateAsset, request: Request) -> AssetOut:
    store, _ = _store(request, admin=True)
    scopes = _scopes_in(body.dataScopes)
    typed = _typed_in(body.typedProperties)
    asset = await asyncio.to_thread(store.create_asset, body.title, scopes, body.properties, typed)
    _changed(request, "asset", asset.rid)  # a search over assets may now find it
    return asset_out(asset)


@router.get("/assets", summary="List the assets", response_model=list[AssetOut])
async def list_assets(request: Request) -> list[AssetOut]:
    store, reach = _store(request)
    return [asset_out(a) for a in await asyncio.to_thread(store.assets) if reach.sees_asset(a)]


@router.get("/assets/{rid}", summary="One asset", response_model=AssetOut)
async def get_asset(rid: str, request: Request) -> AssetOut:
    asset = await asyncio.to_thread(_visible_asset, *_store(request), rid)
    if asset is None:
        raise _missing("asset", rid)
    return asset_out(asset)


@router.put("/assets/{rid}", summary="Update an asset (admin)", response_model=AssetOut)
async def update_asset(rid: str, body: UpdateAsset, request: Request) -> AssetOut:
    store, reach = _store(request, admin=True)
    if await asyncio.to_thread(_visible_asset, store, reach, rid) is None:
        raise _missing("asset", rid)
    scopes = None if body.dataScopes is None else _scopes_in(body.dataScopes)
    typed = _typed_in(body.typedProperties)
    asset = await asyncio.to_thread(store.update_asset, rid, body.title, scopes, body.properties, typed)
    if asset is None:
        raise _missing("asset", rid)
    _changed(request, "asset", rid)
    return asset_out(asset)


@router.delete("/assets/{rid}", summary="Delete an asset (admin)", status_code=204)
async def delete_asset(rid: str, request: Request) -> None:
    store, reach = _store(request, admin=True)
    if await asyncio.to_thread(_visible_asset, store, reach, rid) is None:
        raise _missing("asset", rid)
    if not await asyncio.to_thread(store.delete_asset, rid):
        raise _missing("asset", rid)
    _changed(request, "asset", rid)


@router.post("/runs", summary="Create a run (admin)", response_model=RunOut)
async def create_run(body: CreateRun, request: Request) -> RunOut:
    store, reach = _store(request, admin=True)
    await _known_assets(store, reach, body.assetRids)
    start, end = body.start.ns(), None if body.end is None else body.end.ns()
    _check_times(start, end)
    scopes = _scopes_in(body.dataScopes)
    typed = _typed_in(body.typedProperties)
    run = await asyncio.to_thread(
        store.create_run, body.title, body.assetRids, start, end, scopes, body.properties, typed
    )
    _changed(request, "run", run.rid)  # a search over runs may now find it
    return run_out(run)


async def _known_assets(store: AssetStore, reach: Reach, rids: list[str]) -> None:
    for rid in rids:
        if await asyncio.to_thread(_visible_asset, store, reach, rid) is None:
            raise HttpError(400, f"run names an unknown asset {rid!r}", params={"assetRid": rid})


def _check_times(start: int, end: int | None) -> None:
    if end is not None and end < start:
        raise HttpError(400, "a run's end is before its start", params={"start": str(start), "end": str(end)})


@router.get("/runs", summary="List the runs", response_model=list[RunOut])
async def list_runs(request: Request) -> list[RunOut]:
    return [run_out(r) for r in await asyncio.to_thread(_visible_runs, *_store(request))]


@router.get("/runs/{rid}", summary="One run", response_model=RunOut)
async def get_run(rid: str, request: Request) -> RunOut:
    run = await asyncio.to_thread(_visible_run, *_store(request), rid)
    if run is None:
        raise _missing("run", rid)
    return run_out(run)


@router.put("/runs/{rid}", summary="Update a run (admin)", response_model=RunOut)
async def update_run(rid: str, body: UpdateRun, request: Request) -> RunOut:
    store, reach = _store(request, admin=True)
    current = await asyncio.to_thread(_visible_run, store, reach, rid)
    if current is None:
        raise _missing("run", rid)
    start = current.start_ns if body.start is None else body.start.ns()
    end = current.end_ns if body.end is None else body.end.ns()
    _check_times(start, end)
    changes: dict[str, object] = {}
    if body.start is not None:
        changes["start_ns"] = start
    if body.end is not None:
        changes["end_ns"] = end
    if body.title is not None:
        changes["title"] = body.title
    if body.assetRids is not None:
        await _known_assets(store, reach, body.assetRids)
        changes["asset_rids"] = body.assetRids
    if body.dataScopes is not None:
        changes["data_scopes"] = _scopes_in(body.dataScopes)
    if body.properties is not None:
        changes["properties"] = body.properties
    if body.typedProperties is not None:
        changes["typed_properties"] = _typed_in(body.typedProperties)
    run = await asyncio.to_thread(lambda: store.update_run(rid, **changes))
    if run is None:
        raise _missing("run", rid)  # deleted meanwhile
    _changed(request, "run", rid)
    return run_out(run)


@router.delete("/runs/{rid}", summary="Delete a run (admin)", status_code=204)
async def delete_run(rid: str, request: Request) -> None:
    store, reach = _store(request, admin=True)
    if await asyncio.to_thread(_visible_run, store, reach, rid) is None:
        raise _missing("run", rid)
    if not await asyncio.to_thread(store.delete_run, rid):
        raise _missing("run", rid)
    _changed(request, "run", rid)
