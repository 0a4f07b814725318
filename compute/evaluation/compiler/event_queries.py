"""A `ComputeEventQuery` (scout_rids_api) resolved against the events Sparkwire keeps
(compute/storage/events.py, passed in as `Catalogs.events`), when the plan is compiled: what the
builders over events share (builders/events.py: `eventsSearch`, `eventAggregation`;
builders/tag_intervals.py: `tagByIntervals`' event intervals and `eventTimeShift`). Builders import
this; it imports no builder.

The events found are the ones not archived that the compiling token sees, in time order; the search
is recorded in the compilation's catalog reads (kind `event`, every event found with its body), so a
created, edited or archived event compiles again every live subscription that searched the events
(docs/decisions/0072-events.md)."""

from __future__ import annotations

from typing import Any

from compute.evaluation.compiler import registry
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.datasets import CatalogUnreachable
from compute.evaluation.errors import MalformedNode, not_supported
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


def query(b: B, value: Json, what: str, terms: list[int]) -> Query:
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
        return (kind, b.timestamp_constant(inner))
    if kind == "advancedTimeFilter":
        o = b.obj(inner, kind)
        condition = b.get(o, "timestampCondition", kind)
        if condition not in TIME_CONDITIONS:
            raise MalformedNode(f"{kind}.timestampCondition: unknown value {condition!r}")
        return ("time", condition, b.timestamp_constant(b.get(o, "timestamp", kind)))
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
            return ("not", query(b, inner, what, terms))
    if kind in ("and", "or"):
        if not isinstance(inner, list):
            raise MalformedNode(f"ComputeEventQuery.{kind} must be a list")
        with b.budget:
            return (kind, [query(b, q, what, terms) for q in inner])
    raise registry.refusal("ComputeEventQuery", kind)


def found_events(b: B, value: Json, what: str) -> list[Event]:
    """The events the `ComputeEventQuery` `value` finds, in time order (start, end, uuid): not
    archived, seen by the compiling token. The search is recorded (an event's change re-resolves),
    and so is each event found."""
    resolved = query(b, value, what, [0])
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
        if not e.archived and (reach is None or reach.sees_module(e.reach)) and matches(resolved, e)
    ]
    found.sort(key=lambda e: (e.start_ns, e.end_ns, e.uuid))
    for e in found:
        b.catalog.found(e)  # its body is in the digest: its edit moves the subscription
    return found


def at_most(found: list[Event], what: str) -> list[Event]:
    """`found`, refused by name (`limit`) past MAX_EVENTS."""
    if len(found) > MAX_EVENTS:
        raise not_supported(
            f"{what}: the query finds {len(found)} events, more than {MAX_EVENTS}",
            what,
            field="query",
            limit=str(MAX_EVENTS),
        )
    return found
