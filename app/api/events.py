"""Nominal's EventService over HTTP, on its own paths and in its own wire form (Conjure JSON of
nominal-api's `event` package): create, get (by uuid, and batch get by rid), update, search, archive
and unarchive the events that `eventsSearch` and `eventAggregation` compute over
(compute/storage/events.py, compute/evaluation/compiler/builders/events.py).

Admitted as the asset catalog is (app/api/assets.py): reading needs a token (authentication on),
changing needs the `admin` claim. An event belongs to its creator's `dataSourceRids` (kept with it,
as a module's): a token whose reach does not overlap them finds no event there, as if none existed.
The assets an event names must exist and be seen by the token. Errors carry `Event:` names. Every
change, once stored, reaches the live subscriptions that searched the events
(app/fanout/catalog_edits.py): each compiles again, and one whose events changed gets a FullResult
(docs/decisions/0072-events.md)."""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Annotated, Any, Literal

from fastapi import APIRouter, FastAPI, Request, Response
from pydantic import BaseModel, Field

from app.api.assets import CatalogRoute, NumericPropertyValue, StringPropertyValue, admit, reach_of
from app.config import Settings
from app.http.errors import HttpError
from app.protocol.auth import Principal
from compute.storage.assets import AssetStore, TypedValue
from compute.storage.catalog_reach import Reach
from compute.storage.events import (
    EVENT_TYPES,
    KIND,
    TIME_CONDITIONS,
    Event,
    EventStore,
    Query,
    key_of,
    matches,
)
from schemas.timestamps import NANOS_PER_SECOND

_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ConjureError"}}}  # app/openapi.py
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "an invalid body (Event:Invalid..., the params say which)", "content": _ERROR},
    401: {"description": "a missing or invalid bearer token (authentication on)", "content": _ERROR},
    403: {"description": "changing needs a token with the `admin` claim", "content": _ERROR},
    404: {"description": "Event:EventsNotFound (the params name them)", "content": _ERROR},
    503: {"description": "the event store (Redis, when shared) is out of reach", "content": _ERROR},
}


class EventRoute(CatalogRoute):
    doing = "read or change events"


router = APIRouter(prefix="/event/v1", tags=["events"], responses=ERRORS, route_class=EventRoute)
STORE_FILE = "events.sqlite"
MAX_ITEMS = 1000  # items of one list or map in a body (as /assets/v1's)
MAX_PAGE = 10_000  # SearchEventsRequest.pageSize: "Will reject page sizes greater than 10k."
USER_RID_PREFIX = "ri.sparkwire.main.user."  # as a module's createdBy (app/api/modules.py)
logger = logging.getLogger(__name__)


def open_store(app: FastAPI, settings: Settings) -> EventStore:
    """The events, for these routes and for every plan compiled in this process: in the data dir;
    in Redis when shared (`Settings.shared_catalog`: the tiers, or servers on the Kafka log given a
    redis-url), beside the asset catalog, where every process of it reads the same events and hears
    of each change."""
    if settings.shared_catalog:
        from compute.storage.redis.catalog_rows import connect_rows

        rows = connect_rows(settings.redis_url, settings.redis_prefix, {}, what="the event store")
        store = EventStore(rows=rows)
    else:
        store = EventStore(settings.data_dir / STORE_FILE)
    app.state.events = store
    return store


# -- Nominal's beans -------------------------------------------------------------------------------
class Timestamp(BaseModel):
    """api.Timestamp (a start) and scout.run.api.Duration (a length) share this shape."""

    seconds: int
    nanos: int = Field(default=0, ge=0, lt=NANOS_PER_SECOND)

    def ns(self) -> int:
        return self.seconds * NANOS_PER_SECOND + self.nanos


TypedPropertyValue = Annotated[StringPropertyValue | NumericPropertyValue, Field(discriminator="type")]
EventType = Literal["INFO", "FLAG", "ERROR", "SUCCESS", "UNKNOWN"]


class CreateEvent(BaseModel):
    assetRids: list[str] = Field(max_length=MAX_ITEMS, description="at least one")
    origins: list[dict[str, Any]] | None = Field(
        default=None, max_length=MAX_ITEMS, description="EventOrigin; none: api"
    )
    timestamp: Timestamp
    duration: Timestamp = Field(description="scout.run.api.Duration; zero: an instant")
    name: str
    description: str | None = None
    type: EventType
    labels: list[str] | None = Field(default=None, max_length=MAX_ITEMS)
    properties: dict[str, str] | None = Field(default=None, max_length=MAX_ITEMS)
    typedProperties: dict[str, TypedPropertyValue] | None = Field(default=None, max_length=MAX_ITEMS)
    disposition: dict[str, Any] | None = None


class UpdateEvent(BaseModel):
    """Nominal's UpdateEvent: "Empty fields are left unchanged"; a field given replaces the event's."""

    uuid: str | None = None
    rid: str | None = None
    assetRids: list[str] | None = Field(default=None, max_length=MAX_ITEMS)
    timestamp: Timestamp | None = None
    duration: Timestamp | None = None
    name: str | None = None
    description: str | None = None
    type: EventType | None = None
    labels: list[str] | None = Field(default=None, max_length=MAX_ITEMS)
    properties: dict[str, str] | None = Field(default=None, max_length=MAX_ITEMS)
    typedProperties: dict[str, TypedPropertyValue] | None = Field(default=None, max_length=MAX_ITEMS)


class GetEvents(BaseModel):
    uuids: list[str] = Field(max_length=MAX_ITEMS)


class ArchiveEvent(BaseModel):
    uuid: str


class SortOptions(BaseModel):
    isDescending: bool
    field: Literal["START_TIME", "END_TIME", "DURATION", "EVENT_NAME", "DISPOSITION_STATUS", "PRIORITY"]


class SearchEventsRequest(BaseModel):
    sort: SortOptions
    pageSize: int
    nextPageToken: str | None = None
    query: dict[str, Any] = Field(description="event.SearchQuery")
    archivedStatuses: list[Literal["NOT_ARCHIVED", "ARCHIVED"]] | None = None


def _time(ns: int) -> dict[str, int]:
    return {"seconds": ns // NANOS_PER_SECOND, "nanos": ns % NANOS_PER_SECOND}


def event_out(e: Event) -> dict[str, Any]:
    """Nominal's `Event`."""
    out: dict[str, Any] = {
        "uuid": e.uuid,
        "rid": e.rid,
        "assetRids": e.asset_rids,
        "origins": e.origins,
        "timestamp": _time(e.start_ns),
        "duration": _time(e.duration_ns),
        "name": e.name,
        "description": e.description,
        "type": e.type,
        "labels": e.labels,
        "properties": e.properties,
        "typedProperties": {
            k: {"type": "stringValue", "stringValue": v}
            if isinstance(v, str)
            else {"type": "numericValue", "numericValue": v}
            for k, v in e.typed_properties.items()
        },
        "isArchived": e.archived,
    }
    if e.created_by is not None:
        out["createdBy"] = e.created_by
    if e.disposition is not None:
        out["disposition"] = e.disposition
    return out


# -- checks and errors -----------------------------------------------------------------------------
def _error(status: int, name: str, message: str, **params: str) -> HttpError:
    return HttpError(status, message, name=f"Event:{name}", params=params)


def _typed_in(typed: dict[str, Any] | None) -> dict[str, TypedValue] | None:
    if typed is None:
        return None
    out: dict[str, TypedValue] = {}
    for name, v in typed.items():
        if isinstance(v, NumericPropertyValue):
            if not math.isfinite(v.numericValue):
                raise _error(
                    400,
                    "InvalidTypedProperty",
                    f"typed property {name!r}: numericValue must be finite",
                    typedProperty=name,
                )
            out[name] = v.numericValue
        else:
            out[name] = v.stringValue
    return out


def _type(value: str) -> str:
    if value not in EVENT_TYPES:
        raise _error(
            400, "InvalidEventType", f"event type {value!r} is not one of {list(EVENT_TYPES)}", type=value
        )
    return value


def _duration(d: Timestamp) -> int:
    ns = d.ns()
    if ns < 0:
        raise _error(
            400, "InvalidDuration", f"an event's duration must not be negative, got {ns} ns", duration=str(ns)
        )
    return ns


async def _assets(request: Request, reach: Reach, rids: list[str]) -> list[str]:
    """The asset rids, checked: at least one, each an asset the token sees."""
    if not rids:
        raise _error(400, "InvalidAssetRids", "an event must name at least one asset", assetRids="")
    assets: AssetStore = request.app.state.assets
    for rid in rids:
        asset = await asyncio.to_thread(assets.asset, rid)
        if asset is None or not reach.sees_asset(asset):
            raise _error(400, "InvalidAssetRids", f"no asset has the rid {rid!r}", assetRids=rid)
    return list(dict.fromkeys(rids))


def _origins(origins: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    kinds = ("workbook", "template", "api", "dataReview", "procedure", "streamingChecklist")
    for o in origins or []:
        kind = o.get("type")
        if kind not in kinds or not isinstance(o.get(kind), dict):
            raise _error(
                400,
                "InvalidOrigin",
                f"an origin must be an EventOrigin ({', '.join(kinds)}), got {kind!r}",
                origin=str(kind),
            )
    return list(origins or []) or [{"type": "api", "api": {}}]


def _admit(request: Request, admin: bool = False) -> tuple[EventStore, Principal]:
    principal = admit(request, "events", admin)
    store: EventStore = request.app.state.events
    return store, principal


def _visible(store: EventStore, reach: Reach, key: str) -> Event | None:
    event = store.event(key_of(key))
    return event if event is not None and reach.sees_module(event.reach) else None


def _not_found(keys: list[str]) -> HttpError:
    return _error(404, "EventsNotFound", f"no event has the uuid or rid {keys}", eventRids=",".join(keys))


def _changed(request: Request, event: Event) -> None:
    """Stored: the subscriptions that searched the events compile again (shared rows announced it
    with the change: every process hears of it from Redis, this one too)."""
    store: EventStore = request.app.state.events
    request.app.state.sparkwire.catalog_edits.changed(KIND, event.rid, announced=store.shared)


# -- routes ------------------------------------------------------------------------------------------
@router.post("/events", summary="Create an event (admin)")
async def create_event(body: CreateEvent, request: Request) -> dict[str, Any]:
    store, principal = _admit(request, admin=True)
    reach = reach_of(principal)
    event = Event(
        rid="",
        uuid="",
        asset_rids=await _assets(request, reach, body.assetRids),
        start_ns=body.timestamp.ns(),
        duration_ns=_duration(body.duration),
        name=body.name,
        description=body.description or "",
        type=_type(body.type),
        labels=list(dict.fromkeys(body.labels or [])),
        properties=dict(body.properties or {}),
        typed_properties=_typed_in(body.typedProperties) or {},
        origins=_origins(body.origins),
        disposition=body.disposition,
        created_by=USER_RID_PREFIX + principal.subject,
        reach=tuple(principal.data_source_patterns),
    )
    event = await asyncio.to_thread(store.create, event)
    _changed(request, event)
    return event_out(event)


async def _get(request: Request, keys: list[str]) -> list[dict[str, Any]]:
    store, principal = _admit(request)
    reach = reach_of(principal)
    found = [await asyncio.to_thread(_visible, store, reach, k) for k in keys]
    missing = [k for k, e in zip(keys, found, strict=True) if e is None]
    if missing:
        raise _not_found(missing)
    return [event_out(e) for e in found if e is not None]


@router.post("/get-events", summary="Events by uuid")
async def get_events(body: GetEvents, request: Request) -> list[dict[str, Any]]:
    return await _get(request, body.uuids)


@router.post("/events/batch-get", summary="Events by rid")
async def batch_get_events(
    request: Request, body: Annotated[list[str], Field(max_length=MAX_ITEMS)]
) -> list[dict[str, Any]]:
    return await _get(request, body)


@router.post("/update-event", summary="Update an event (admin): the fields given replace its own")
async def update_event(body: UpdateEvent, request: Request) -> dict[str, Any]:
    store, principal = _admit(request, admin=True)
    reach = reach_of(principal)
    key = body.uuid or body.rid
    if not key:
        raise _error(400, "InvalidEventReference", "an update names its event by uuid or rid", field="uuid")
    current = await asyncio.to_thread(_visible, store, reach, key)
    if current is None:
        raise _not_found([key])
    changes: dict[str, Any] = {}
    if body.assetRids is not None:
        changes["asset_rids"] = await _assets(request, reach, body.assetRids)
    if body.timestamp is not None:
        changes["start_ns"] = body.timestamp.ns()
    if body.duration is not None:
        changes["duration_ns"] = _duration(body.duration)
    if body.name is not None:
        changes["name"] = body.name
    if body.description is not None:
        changes["description"] = body.description
    if body.type is not None:
        changes["type"] = _type(body.type)
    if body.labels is not None:
        changes["labels"] = list(dict.fromkeys(body.labels))
    if body.properties is not None:
        changes["properties"] = dict(body.properties)
    if body.typedProperties is not None:
        changes["typed_properties"] = _typed_in(body.typedProperties)
    event = await asyncio.to_thread(lambda: store.update(current.uuid, **changes))
    if event is None:
        raise _not_found([key])
    _changed(request, event)
    return event_out(event)


async def _set_archived(request: Request, keys: list[str], archived: bool) -> Response:
    store, principal = _admit(request, admin=True)
    reach = reach_of(principal)
    hidden = [k for k in keys if await asyncio.to_thread(_visible, store, reach, k) is None]
    missing = hidden or await asyncio.to_thread(store.set_archived, [key_of(k) for k in keys], archived)
    if missing:
        raise _not_found(missing)
    for key in dict.fromkeys(key_of(k) for k in keys):
        event = await asyncio.to_thread(store.event, key)
        if event is not None:
            _changed(request, event)
    return Response(status_code=204)


@router.post("/archive-event", summary="Archive an event (admin): computations leave it out", status_code=204)
async def archive_event(body: ArchiveEvent, request: Request) -> Response:
    return await _set_archived(request, [body.uuid], archived=True)


@router.post("/batch-archive-events", summary="Archive events by rid (admin)", status_code=204)
async def batch_archive_events(
    request: Request, body: Annotated[list[str], Field(max_length=MAX_ITEMS)]
) -> Response:
    return await _set_archived(request, body, archived=True)


@router.post("/batch-unarchive-events", summary="Unarchive events by rid (admin)", status_code=204)
async def batch_unarchive_events(
    request: Request, body: Annotated[list[str], Field(max_length=MAX_ITEMS)]
) -> Response:
    return await _set_archived(request, body, archived=False)


# -- search ------------------------------------------------------------------------------------------
# SearchQuery terms with nothing to match in Sparkwire's events (no workbooks, templates, data
# reviews, procedures, workspaces or streaming checklists; dispositions are kept as received, not read).
UNSUPPORTED_TERMS = (
    "exactMatch",
    "template",
    "workbook",
    "dataReview",
    "dataReviews",
    "dataReviewCheck",
    "dataReviewChecks",
    "dispositionStatus",
    "dispositionStatuses",
    "priority",
    "priorities",
    "assignee",
    "assignees",
    "workspace",
    "procedure",
    "procedureExecution",
    "stepId",
    "streamingChecklist",
    "streamingCheck",
    "numericProperty",
    "numericPropertyRange",
)


def _bad_query(message: str, term: str) -> HttpError:
    return _error(400, "InvalidSearchQuery", message, term=term)


def search_query(q: Any, depth: int = 0, terms: list[int] | None = None) -> Query:
    """An `event.SearchQuery` in the form compute/storage/events.py matches; a term Sparkwire
    cannot match is refused by name (`term`). At most `MAX_ITEMS` terms (each is matched once per
    event), nested at most 50 deep."""
    terms = [0] if terms is None else terms
    terms[0] += 1
    if depth > 50 or terms[0] > MAX_ITEMS:
        raise _bad_query(f"SearchQuery nests deeper than 50 or holds more than {MAX_ITEMS} terms", "and")
    if not isinstance(q, dict) or not isinstance(q.get("type"), str) or q["type"] not in q:
        raise _bad_query("a SearchQuery must be a union object with a 'type'", "type")
    kind, v = q["type"], q[q["type"]]
    if kind in UNSUPPORTED_TERMS:
        raise _bad_query(f"SearchQuery.{kind} is not supported by Sparkwire: its events have no {kind}", kind)
    try:
        if kind == "archived":
            return ("archived", bool(v))
        if kind == "searchText":
            return ("searchText", str(v))
        if kind in ("after", "before"):
            return (kind, Timestamp.model_validate(v).ns())
        if kind == "advancedTimeFilter":
            condition = v["timestampCondition"]
            if condition not in TIME_CONDITIONS:
                raise _bad_query(f"timestampCondition {condition!r} is not known", kind)
            return ("time", condition, Timestamp.model_validate(v["timestamp"]).ns())
        if kind == "asset":
            return ("asset", str(v))
        if kind == "assets":
            return ("assets", _operator(v["operator"], kind), [str(a) for a in v["assets"]])
        if kind == "originType":
            return ("originTypes", [str(v)])
        if kind == "originTypes":
            return ("originTypes", [str(o) for o in v["originTypes"]])
        if kind == "eventType":
            return ("eventTypes", [str(v)])
        if kind == "eventTypes":
            return ("eventTypes", [str(t) for t in v])
        if kind == "createdBy":
            return ("createdBy", [str(v)])
        if kind == "createdByAnyOf":
            return ("createdBy", [str(u) for u in v])
        if kind == "label":
            return ("label", str(v))
        if kind == "labels":
            return ("labels", _operator(v["operator"], kind), [str(x) for x in v["labels"]])
        if kind == "property":
            return ("property", str(v["name"]), str(v["value"]))
        if kind == "properties":
            return ("properties", str(v["name"]), [str(x) for x in v["values"]])
        if kind == "not":
            return ("not", search_query(v, depth + 1, terms))
        if kind in ("and", "or"):
            if not isinstance(v, list) or len(v) > MAX_ITEMS:
                raise _bad_query(f"SearchQuery.{kind} must be a list of at most {MAX_ITEMS}", kind)
            return (kind, [search_query(x, depth + 1, terms) for x in v])
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise _bad_query(f"SearchQuery.{kind} is malformed: {exc}", kind) from None
    raise _bad_query(f"SearchQuery.{kind} is not a SearchQuery term", kind)


def _operator(op: Any, term: str) -> str:
    if op not in ("AND", "OR"):
        raise _bad_query(f"SearchQuery.{term}.operator must be AND or OR, got {op!r}", term)
    return str(op)


def _search(store: EventStore, reach: Reach, body: SearchEventsRequest, query: Query) -> dict[str, Any]:
    statuses = set(body.archivedStatuses or ["NOT_ARCHIVED"])
    found = [
        e
        for e in store.events()
        if reach.sees_module(e.reach)
        and ("ARCHIVED" if e.archived else "NOT_ARCHIVED") in statuses
        and matches(query, e)
    ]
    keys = {
        "START_TIME": lambda e: (e.start_ns, e.uuid),
        "END_TIME": lambda e: (e.end_ns, e.uuid),
        "DURATION": lambda e: (e.duration_ns, e.uuid),
        "EVENT_NAME": lambda e: (e.name, e.uuid),
    }
    found.sort(key=keys[body.sort.field], reverse=body.sort.isDescending)
    try:
        start = int(body.nextPageToken or 0)
    except ValueError:
        raise _error(
            400,
            "InvalidPageToken",
            f"nextPageToken {body.nextPageToken!r} is not one this server gave",
            nextPageToken=str(body.nextPageToken),
        ) from None
    page = found[start : start + body.pageSize]
    out: dict[str, Any] = {"results": [event_out(e) for e in page]}
    if start + body.pageSize < len(found):
        out["nextPageToken"] = str(start + body.pageSize)
    return out


@router.post("/search-events", summary="Search events (not archived unless archivedStatuses says)")
async def search_events(body: SearchEventsRequest, request: Request) -> dict[str, Any]:
    store, principal = _admit(request)
    if not 1 <= body.pageSize <= MAX_PAGE:
        raise _error(
            400,
            "InvalidPageSize",
            f"pageSize must be 1 to {MAX_PAGE}, got {body.pageSize}",
            pageSize=str(body.pageSize),
        )
    if body.sort.field in ("DISPOSITION_STATUS", "PRIORITY"):
        raise _error(
            400,
            "InvalidSortField",
            f"sorting by {body.sort.field} is not supported: dispositions are not read",
            field=body.sort.field,
        )
    query = search_query(body.query)
    return await asyncio.to_thread(_search, store, reach_of(principal), body, query)
