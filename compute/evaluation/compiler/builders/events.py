"""Builders of the nodes over events: `eventsSearch` (RangeSeries) and `eventAggregation`
(EnumSeries), over the events Sparkwire keeps (compute/storage/events.py, passed in
as `Catalogs.events`; app/api/events.py serves Nominal's EventService). Registered into registry.py's
tables by their Conjure variant names when this module loads.

The query (scout_rids_api's `ComputeEventQuery`) is resolved when the plan is compiled
(compiler/event_queries.py, which tagByIntervals' event intervals share), against the events not
archived that the subscribing token sees. The search is recorded in the compilation's catalog reads
(kind `event`, every event found with its body), so a created, edited or archived event compiles
again every live subscription that searched the events, and one whose events changed moves to a
computation of its own, whose FullResult follows (docs/decisions/0072-events.md)."""

from __future__ import annotations

from typing import Any

from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.event_queries import LEVEL, at_most, found_events
from compute.evaluation.compiler.registry import builds
from compute.evaluation.nodes import RangeNode, SeriesNode
from compute.evaluation.nodes.events import EventsEnum, EventsSearch
from compute.storage.events import property_value

Json = Any
B = Builder


@builds("RangeSeries", "eventsSearch")
def _events_search(b: B, v: Json) -> RangeNode:
    what = "eventsSearch"
    found = at_most(found_events(b, b.get(b.obj(v, what), "query", what), what), what)
    return EventsSearch(tuple(e.start_ns for e in found), tuple(e.end_ns for e in found))


@builds("EnumSeries", "eventAggregation")
def _event_aggregation(b: B, v: Json) -> SeriesNode:
    """Each found event's value: the named property's (its string property, else its typed
    stringValue; an event without one gives no point), or its level (its type)."""
    what = "eventAggregation"
    o = b.obj(v, what)
    source, inner = b.variant("EventsEnumValueSource", b.get(o, "valueSource", what))
    name = b.string_constant(inner) if source == "property" else None
    found = at_most(found_events(b, b.get(o, "query", what), what), what)
    points: list[tuple[int, str]] = []
    for e in found:
        if name is None:
            points.append((e.start_ns, LEVEL.get(e.type, e.type)))
            continue
        label = property_value(e, name)
        if label is not None:
            points.append((e.start_ns, label))
    points.sort()
    categories = sorted({label for _, label in points})
    index = {label: i for i, label in enumerate(categories)}
    return EventsEnum(tuple(t for t, _ in points), tuple(index[x] for _, x in points), categories)
