"""Builder of `NumericSeries.tagByIntervals` (evaluator: nodes/tag_intervals.py). Registered with
`polls`: built when Nominal's ComputeService polls it; a live subscription keeps Nominal's refusal
(`InvalidComputation` `TAG_BY_INTERVALS`, builders/refusals.py).

`intervals`: `ranges` (`RangeIntervalSource`: a range series and its `tagBy`, `intervalIndex` and
`rangeStartTimestamp`) or `events` (`EventIntervalSource`: "Each event defines [timestamp,
timestamp+duration)", tagged by `intervalIndex`, `rangeStartTimestamp`, the event's `level`, a
`property` or a `label`). `timeShift`: `intervalStart`, `intervalEnd` or `eventTimeShift` (the start
of the index-th event of another query in each interval). Both queries are resolved when the plan
is compiled, as eventsSearch's is (compiler/event_queries.py)."""

from __future__ import annotations

from typing import Any

from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.dimensions import dimensions
from compute.evaluation.compiler.event_queries import LEVEL, at_most, found_events
from compute.evaluation.compiler.helpers import one_of
from compute.evaluation.compiler.registry import polls
from compute.evaluation.errors import MalformedNode, refuse
from compute.evaluation.nodes import SeriesNode
from compute.evaluation.nodes.tag_intervals import (
    EVENT_LABEL_PREFIX,
    EVENT_LEVEL,
    NOMINAL_ABSENT,
    TAG_KEYS,
    EventAnchor,
    EventInterval,
    TagByIntervals,
)
from compute.storage.events import Event, property_value

Json = Any
B = Builder
WHAT = "tagByIntervals"
EVENT_TAGS = ("intervalIndex", "rangeStartTimestamp", "level", "property", "label")


def _listed(b: B, source: dict[str, Json], what: str) -> list[Json]:
    listed = b.get(source, "tagBy", what)
    if not isinstance(listed, list):
        raise MalformedNode(f"{what}.tagBy must be a list")
    if not listed:  # "Non-empty ordered list of tag sources"
        raise refuse(WHAT, "tagBy", "needs at least one tag source")
    return listed


def _add(tag_by: list[str], key: str, kind: str) -> None:
    if key in tag_by:
        raise refuse(WHAT, "tagBy", f"{kind} gives the tag key {key!r} twice")
    tag_by.append(key)


def _event_tags(b: B, listed: list[Json]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The tag keys in order, and the tags an event fixes: (key, source kind, its argument)."""
    tag_by: list[str] = []
    fixed: list[tuple[str, str, str]] = []
    for item in listed:
        kind, inner = one_of(item, "EventTagSource", EVENT_TAGS)
        if kind in TAG_KEYS:
            _add(tag_by, TAG_KEYS[kind], kind)
            continue
        if kind == "level":
            key, arg = EVENT_LEVEL, ""
        elif kind == "property":
            tag = b.obj(inner, "EventPropertyTag")
            key = arg = b.string_constant(b.get(tag, "propertyName", "EventPropertyTag"))
        else:
            arg = b.string_constant(b.get(b.obj(inner, "EventLabelTag"), "label", "EventLabelTag"))
            key = EVENT_LABEL_PREFIX + arg
        _add(tag_by, key, kind)
        fixed.append((key, kind, arg))
    return tag_by, fixed


def _fixed(e: Event, fixed: list[tuple[str, str, str]]) -> tuple[tuple[str, str], ...]:
    """An event's own tags: its level (its type), a property's value (NOMINAL_ABSENT when it has
    none), whether it carries a label ("true" / "false")."""
    out = []
    for key, kind, arg in fixed:
        if kind == "level":
            out.append((key, LEVEL.get(e.type, e.type)))
        elif kind == "property":
            value = property_value(e, arg)
            out.append((key, NOMINAL_ABSENT if value is None else value))
        else:
            out.append((key, "true" if arg in e.labels else "false"))
    return tuple(out)


def _anchor(b: B, v: Json) -> EventAnchor:
    what = "EventTimeShift"
    o = b.obj(v, what)
    index = 0 if o.get("index") is None else b.integer_constant(o["index"])
    if index < 0:  # "Defaults to zero and must be non-negative."
        raise refuse(WHAT, "timeShift.index", f"must be non-negative, not {index}")
    order = o.get("sortOrder") or "ASC"
    if order not in ("ASC", "DESC"):
        raise MalformedNode(f"{what}.sortOrder: not an EventSortOrder: {order!r}")
    found = found_events(b, b.get(o, "query", what), WHAT)
    return EventAnchor(tuple(sorted(e.start_ns for e in found)), index, order == "DESC")


@polls("NumericSeries", "tagByIntervals")
def tag_by_intervals(b: B, v: Json) -> SeriesNode:
    o = b.obj(v, "TagByIntervalsSeries")
    x = b.timed(b.numeric(b.get(o, "input", "TagByIntervalsSeries")), WHAT)
    kind, source = one_of(
        b.get(o, "intervals", "TagByIntervalsSeries"), "IntervalSource", ("events", "ranges")
    )
    ranges = None
    events: tuple[EventInterval, ...] = ()
    if kind == "events":
        s = b.obj(source, "EventIntervalSource")
        tag_by, fixed = _event_tags(b, _listed(b, s, "EventIntervalSource"))
        found = at_most(found_events(b, b.get(s, "query", "EventIntervalSource"), WHAT), WHAT)
        events = tuple(EventInterval(e.start_ns, e.end_ns, _fixed(e, fixed)) for e in found)
    else:
        s = b.obj(source, "RangeIntervalSource")
        ranges = b.ranges(b.get(s, "ranges", "RangeIntervalSource"))
        tag_by = []
        for item in _listed(b, s, "RangeIntervalSource"):
            tag_kind, _ = one_of(item, "RangeTagSource", tuple(TAG_KEYS))
            _add(tag_by, TAG_KEYS[tag_kind], tag_kind)
    shift: str | EventAnchor | None = None
    if o.get("timeShift") is not None:
        shift_kind, inner = one_of(
            o["timeShift"], "TagByIntervalsTimeShift", ("intervalStart", "intervalEnd", "eventTimeShift")
        )
        shift = _anchor(b, inner) if shift_kind == "eventTimeShift" else shift_kind
    dims = dimensions(b, x)
    clash = sorted(set(dims) & set(tag_by))
    if clash:
        raise refuse(WHAT, "tagBy", f"the input is already grouped by {clash}")
    return TagByIntervals(x, ranges, tuple(tag_by), shift, (*dims, *tag_by), events)
