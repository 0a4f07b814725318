"""Builders of the nodes over events: `eventsSearch` (RangeSeries) and `eventAggregation`
(EnumSeries), over the events Sparkwire keeps (compute/storage/events.py, passed in
as `Catalogs.events`; app/api/events.py serves Nominal's EventService). Registered into registry.py's
tables by their Conjure variant names when this module loads.

The query (scout_rids_api's `ComputeEventQuery`) is resolved when the plan is compiled, against the
events not archived that the subscribing token sees. The search is recorded in the compilation's
catalog reads (kind `event`, every event found with its body), so a created, edited or archived
event compiles again every live subscription that searched the events, and one whose events changed
moves to a computation of its own, whose FullResult follows (docs/decisions/0072-events.md)."""

from __future__ import annotations

from typing import Any

from compute.evaluation.compiler import registry
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.datasets import CatalogUnreachable
from compute.evaluation.compiler.registry import builds
from compute.evaluation.errors import MalformedNode, not_supported
from compute.evaluation.nodes import RangeNode, SeriesNode
from compute.evaluation.nodes.events import EventsEnum, EventsSearch
from compute.storage.assets import CatalogUnavailable
from compute.storage.events import TIME_CONDITIONS, Event, Query, matches

Json = Any
B = Builder

MAX_EVENTS = 1000  # EventsSearchRanges: "Throws if there are more than 1,000 results."
MAX_TERMS = 1000  # the terms of one query (each is evaluated once per event)
LEVEL = {"INFO": "INFO", "FLAG": "FLAG", "ERROR": "ERROR", "SUCCESS": "SUCCESS"}  # event type -> level


# ComputeEventQuery terms with nothing to match in Sparkwire's events (refused by name).
UNSUPPORTED = {
    "template": "templates",
    "workbook": "workbooks",
    "dataReview": "data reviews",
    "dataReviewCheck": "data review checks",
    "dispositionStatus": "dispositions it reads",
    "priority": "dispositions it reads",
    "assignee": "dispositions it reads",
    "workspace": "workspaces",
    "procedure": "procedures",
    "procedureExecution": "procedure executions",
    "stepId": "procedure steps",
}


def _timestamp(b: B, value: Json) -> int:
    kind, inner = b.variant("TimestampConstant", value)
    if kind == "variable":
        _, inner = b.typed_variable(inner, ("timestamp",))
    t = b.obj(inner, "Timestamp")
    seconds, nanos = t.get("seconds"), t.get("nanos") or 0
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not isinstance(nanos, int):
        raise MalformedNode("a Timestamp needs integer 'seconds' and 'nanos'")
    return seconds * 1_000_000_000 + nanos


def _query(b: B, value: Json, what: str, terms: list[int]) -> Query:
    """A `ComputeEventQuery` in the form compute/storage/events.py matches, its constants resolved."""
    terms[0] += 1
    if terms[0] > MAX_TERMS:
        raise not_supported(f"{what}: the query has more than {MAX_TERMS} terms", what, field="query")
    kind, inner = b.variant("ComputeEventQuery", value)
    if kind in UNSUPPORTED:
        raise not_supported(
            f"{what}: ComputeEventQuery.{kind} is not supported: Sparkwire's events have no "
            f"{UNSUPPORTED[kind]}",
            what,
            field=f"query.{kind}",
        )
    if kind == "searchText":
        return ("searchText", b.string_constant(inner))
    if kind in ("after", "before"):
        return (kind, _timestamp(b, inner))
    if kind == "advancedTimeFilter":
        o = b.obj(inner, kind)
        condition = b.get(o, "timestampCondition", kind)
        if condition not in TIME_CONDITIONS:
            raise MalformedNode(f"{kind}.timestampCondition: unknown value {condition!r}")
        return ("time", condition, _timestamp(b, b.get(o, "timestamp", kind)))
    if kind == "asset":
        return ("asset", b.string_constant(inner))
    if kind == "originType":
        if not isinstance(inner, str):
            raise MalformedNode("originType must be a SearchEventOriginType")
        return ("originTypes", [inner])
    if kind == "eventType":
        if not isinstance(inner, str):
            raise MalformedNode("eventType must be an EventType")
        return ("eventTypes", [inner])
    if kind == "createdBy":
        return ("createdBy", [b.string_constant(inner)])
    if kind == "label":
        return ("label", b.string_constant(inner))
    if kind == "property":
        o = b.obj(inner, kind)
        return (
            "property",
            b.string_constant(b.get(o, "name", kind)),
            b.string_constant(b.get(o, "value", kind)),
        )
    if kind == "not":
        with b.budget:  # nesting counts as a node tree's does (ComputationTooComplex past its depth)
            return ("not", _query(b, inner, what, terms))
    if kind in ("and", "or"):
        if not isinstance(inner, list):
            raise MalformedNode(f"ComputeEventQuery.{kind} must be a list")
        with b.budget:
            return (kind, [_query(b, q, what, terms) for q in inner])
    raise registry.refusal("ComputeEventQuery", kind)


def _found(b: B, o: dict[str, Json], what: str) -> list[Event]:
    """The events the query finds, in time order: not archived, seen by the subscribing token.
    The search is recorded (an event's change re-resolves), and so is each event found."""
    query = _query(b, b.get(o, "query", what), what, [0])
    # the catalog's notices name kinds generically (docs/decisions/0066): `event` is this one's
    b.catalog.searched.add("event")
    try:
        events = b.catalogs.events.events() if b.catalogs.events is not None else []
    except CatalogUnavailable as exc:
        raise CatalogUnreachable(str(exc)) from None
    reach = b.catalog.reach
    found = [
        e
        for e in events
        if not e.archived and (reach is None or reach.sees_module(e.reach)) and matches(query, e)
    ]
    found.sort(key=lambda e: (e.start_ns, e.end_ns, e.uuid))
    for e in found:
        b.catalog.found(e)  # its body is in the digest: its edit moves the subscription
    return found


@builds("RangeSeries", "eventsSearch")
def _events_search(b: B, v: Json) -> RangeNode:
    what = "eventsSearch"
    found = _found(b, b.obj(v, what), what)
    if len(found) > MAX_EVENTS:
        raise not_supported(
            f"{what}: the query finds {len(found)} events, more than {MAX_EVENTS}",
            what,
            field="query",
            limit=str(MAX_EVENTS),
        )
    return EventsSearch(tuple(e.start_ns for e in found), tuple(e.end_ns for e in found))


@builds("EnumSeries", "eventAggregation")
def _event_aggregation(b: B, v: Json) -> SeriesNode:
    """Each found event's value: the named property's (its string property, else its typed
    stringValue; an event without one gives no point), or its level (its type)."""
    what = "eventAggregation"
    o = b.obj(v, what)
    source, inner = b.variant("EventsEnumValueSource", b.get(o, "valueSource", what))
    name = b.string_constant(inner) if source == "property" else None
    found = _found(b, o, what)
    if len(found) > MAX_EVENTS:
        raise not_supported(
            f"{what}: the query finds {len(found)} events, more than {MAX_EVENTS}",
            what,
            field="query",
            limit=str(MAX_EVENTS),
        )
    points: list[tuple[int, str]] = []
    for e in found:
        if name is None:
            points.append((e.start_ns, LEVEL.get(e.type, e.type)))
            continue
        label = e.properties.get(name)
        typed = e.typed_properties.get(name)
        if label is None and isinstance(typed, str):
            label = typed
        if label is not None:
            points.append((e.start_ns, label))
    points.sort()
    categories = sorted({label for _, label in points})
    index = {label: i for i, label in enumerate(categories)}
    return EventsEnum(tuple(t for t, _ in points), tuple(index[x] for _, x in points), categories)
