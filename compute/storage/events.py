"""Events kept by Sparkwire: Nominal's annotated moments and time ranges (`EventService`), which
`eventsSearch` (a range per event) and `eventAggregation` (an enum point per event) compute over.

An event has a uuid (its key) and a rid made from it, one or more assets, a start (`timestamp`) and
a `duration` (zero: an instant), a name, a description, a type (INFO, FLAG, ERROR, SUCCESS), labels,
string and typed properties, its origins (as received; none given: `api`), an optional disposition
(as received), who created it and whether it is archived. Archiving hides it from search and from
computation; unarchiving brings it back; nothing deletes one.

Kept in rows of the catalog (compute/storage/assets.py's `CatalogRows`): with the embedded log in
one SQLite file in the data dir beside it, written with `synchronous=FULL` so that an answered change
survives a restart and a kill -9, as the asset catalog is; when shared (the tiers, or servers on the
Kafka log given a redis-url) in Redis, one copy read by every process, each change written with its
notice (kind `event`) in one script
(docs/decisions/0072-events.md, docs/decisions/0066)."""

from __future__ import annotations

import json
import threading
import uuid as uuids
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from compute.storage.assets import CatalogRows, RowWrite, SqliteRows, TypedValue

EVENT_RID_PREFIX = "ri.event.main.event."
KIND = "event"  # the kind an event's change is announced as (the kind a CatalogUse searches)
EVENTS = "events"  # uuid -> the event's body
TABLES = (EVENTS,)
EVENT_TYPES = ("INFO", "FLAG", "ERROR", "SUCCESS")  # Nominal's EventType, less UNKNOWN
API_ORIGIN: dict[str, Any] = {"type": "api", "api": {}}  # CreateEvent.origins: "If empty, ... api"


@dataclass(frozen=True)
class Event:
    rid: str
    uuid: str
    asset_rids: list[str]
    start_ns: int  # Nominal's `timestamp`
    duration_ns: int
    name: str
    description: str
    type: str  # one of EVENT_TYPES
    labels: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    typed_properties: dict[str, TypedValue] = field(default_factory=dict)
    origins: list[dict[str, Any]] = field(default_factory=lambda: [dict(API_ORIGIN)])
    disposition: dict[str, Any] | None = None
    created_by: str | None = None
    archived: bool = False
    # The `dataSourceRids` of the token that created it: who may see it (as a module's,
    # compute/storage/catalog_reach.py `sees_module`).
    reach: tuple[str, ...] = ("*",)

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns

    def origin_types(self) -> set[str]:
        """The kinds of its origins as `SearchEventOriginType` names them (API, WORKBOOK, ...)."""
        names = {"dataReview": "DATA_REVIEW", "streamingChecklist": "STREAMING_CHECKLIST"}
        return {names.get(str(o.get("type")), str(o.get("type")).upper()) for o in self.origins}


def rid_of(event_uuid: str) -> str:
    return EVENT_RID_PREFIX + event_uuid


class EventStore:
    """Events in `SqliteRows` (`<data dir>/events.sqlite`) or in shared rows (Redis). Every change is
    one `CatalogRows.write` of the row it read (a change by another process meanwhile makes it read
    again), announced with kind `event`. Any thread may use it."""

    def __init__(self, path: Path | None = None, *, rows: CatalogRows | None = None) -> None:
        if rows is None:
            assert path is not None, "a path for SqliteRows, or rows"
            rows = SqliteRows(path, TABLES)
        self.rows = rows
        self._lock = threading.Lock()

    @property
    def shared(self) -> bool:
        """Whether every change is announced by the rows themselves to every process sharing them."""
        return self.rows.shared

    def create(self, event: Event) -> Event:
        """`event` with a new uuid and rid, stored."""
        key = str(uuids.uuid4())
        event = replace(event, uuid=key, rid=rid_of(key))
        with self._lock:
            written = self.rows.write([RowWrite(EVENTS, key, json.dumps(_body(event)))], KIND, [event.rid])
        assert written, "a new uuid cannot be taken"
        return event

    def update(self, key: str, **changes: Any) -> Event | None:
        """`changes`: Event fields, each replacing the event's; None: no such event."""
        with self._lock:
            while True:  # until no other process changed the event between the read and the write
                was = self.rows.get(EVENTS, key)
                if was is None:
                    return None
                event = replace(_event(json.loads(was)), **changes)
                if self.rows.write([RowWrite(EVENTS, key, json.dumps(_body(event)), was)], KIND, [event.rid]):
                    return event

    def set_archived(self, keys: Iterable[str], archived: bool) -> list[str]:
        """Archive or unarchive these events (by uuid); the keys that exist are all changed, or,
        when one does not exist, nothing is (the missing ones are returned)."""
        keys = list(dict.fromkeys(keys))
        with self._lock:
            while True:  # as in `update`
                bodies = {k: self.rows.get(EVENTS, k) for k in keys}
                missing = [k for k, b in bodies.items() if b is None]
                if missing:
                    return missing
                writes = []
                for k, was in bodies.items():
                    assert was is not None
                    event = _event(json.loads(was))
                    if event.archived != archived:
                        writes.append(
                            RowWrite(EVENTS, k, json.dumps(_body(replace(event, archived=archived))), was)
                        )
                rids = [rid_of(w.rid) for w in writes]
                if not writes or self.rows.write(writes, KIND, rids):
                    return []

    def event(self, key: str) -> Event | None:
        body = self.rows.get(EVENTS, key)
        return None if body is None else _event(json.loads(body))

    def events(self) -> list[Event]:
        return [e for key in self.rows.rids(EVENTS) if (e := self.event(key)) is not None]


def key_of(rid_or_uuid: str) -> str:
    """The uuid a rid is made from (a uuid stays as it is)."""
    return rid_or_uuid.removeprefix(EVENT_RID_PREFIX)


def _body(e: Event) -> dict[str, Any]:
    body = asdict(e)
    body["reach"] = list(e.reach)
    return body


def _event(b: dict[str, Any]) -> Event:
    return Event(
        b["rid"],
        b["uuid"],
        list(b["asset_rids"]),
        int(b["start_ns"]),
        int(b["duration_ns"]),
        b["name"],
        b["description"],
        b["type"],
        list(b["labels"]),
        dict(b["properties"]),
        {k: v if isinstance(v, str) else float(v) for k, v in b["typed_properties"].items()},
        list(b["origins"]),
        b.get("disposition"),
        b.get("created_by"),
        bool(b["archived"]),
        tuple(b.get("reach") or ("*",)),
    )


# -- search ---------------------------------------------------------------------------------------
# A query as both searches read it (Nominal's event.SearchQuery over HTTP, scout_rids_api's
# ComputeEventQuery in a computation, each turned into this form with its constants resolved): a
# tuple whose first item names the term.
Query = tuple[Any, ...]

# EventTimeFilterCondition -> (which end of the event, the comparison with the filter's time)
TIME_CONDITIONS: dict[str, tuple[str, str]] = {
    "START_TIME_BEFORE_INCLUSIVE": ("start", "<="),
    "START_TIME_BEFORE_EXCLUSIVE": ("start", "<"),
    "START_TIME_AFTER_INCLUSIVE": ("start", ">="),
    "START_TIME_AFTER_EXCLUSIVE": ("start", ">"),
    "END_TIME_BEFORE_INCLUSIVE": ("end", "<="),
    "END_TIME_BEFORE_EXCLUSIVE": ("end", "<"),
    "END_TIME_AFTER_INCLUSIVE": ("end", ">="),
    "END_TIME_AFTER_EXCLUSIVE": ("end", ">"),
}


def _compare(a: int, op: str, b: int) -> bool:
    return {"<=": a <= b, "<": a < b, ">=": a >= b, ">": a > b}[op]


def property_value(e: Event, name: str) -> str | None:
    """A string property of that name: the untyped one, else a typed stringValue."""
    if name in e.properties:
        return e.properties[name]
    typed = e.typed_properties.get(name)
    return typed if isinstance(typed, str) else None


def matches(query: Query, e: Event) -> bool:
    """Whether the event meets the query. `after` and `before` are exclusive and take an event
    that spans the time (nominal-api: "This includes events that start before, but end after this
    time"): after T holds when the event ends after T, before T when it starts before T."""
    kind = query[0]
    if kind == "searchText":
        text = str(query[1]).lower()
        return text in e.name.lower() or text in e.description.lower()
    if kind == "after":
        return e.end_ns > query[1]
    if kind == "before":
        return e.start_ns < query[1]
    if kind == "time":
        which, op = TIME_CONDITIONS[query[1]]
        return _compare(e.start_ns if which == "start" else e.end_ns, op, query[2])
    if kind == "asset":
        return query[1] in e.asset_rids
    if kind == "assets":  # (operator, rids)
        found = [rid in e.asset_rids for rid in query[2]]
        return all(found) if query[1] == "AND" else any(found)
    if kind == "label":
        return query[1] in e.labels
    if kind == "labels":
        found = [label in e.labels for label in query[2]]
        return all(found) if query[1] == "AND" else any(found)
    if kind == "property":  # (name, value)
        return property_value(e, query[1]) == query[2]
    if kind == "properties":  # (name, values): any of them
        return property_value(e, query[1]) in query[2]
    if kind == "eventTypes":
        return e.type in query[1]
    if kind == "originTypes":
        return bool(e.origin_types() & set(query[1]))
    if kind == "createdBy":
        return e.created_by in query[1]
    if kind == "archived":
        return e.archived == query[1]
    if kind == "not":
        return not matches(query[1], e)
    if kind == "and":
        return all(matches(q, e) for q in query[1])
    if kind == "or":
        return any(matches(q, e) for q in query[1])
    raise AssertionError(f"unknown query term {kind!r}")
