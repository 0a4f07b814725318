"""Builder of `NumericSeries.tagByIntervals` (evaluator: nodes/tag_intervals.py). Registered with
`polls`: built when Nominal's ComputeService polls it; a live subscription keeps Nominal's refusal
(`InvalidComputation` `TAG_BY_INTERVALS`, builders/refusals.py).

`intervals` `ranges` (`RangeIntervalSource`: a range series and its `tagBy`, `intervalIndex` and
`rangeStartTimestamp`) is computed; `events` (`EventIntervalSource`) and the `eventTimeShift` are
refused by name: an interval of an event is [timestamp, timestamp + duration), tagged by the
event's level, properties and labels, which this builder does not read yet."""

from __future__ import annotations

from typing import Any

from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.dimensions import dimensions
from compute.evaluation.compiler.helpers import one_of
from compute.evaluation.compiler.registry import polls
from compute.evaluation.errors import MalformedNode, refuse
from compute.evaluation.nodes import SeriesNode
from compute.evaluation.nodes.tag_intervals import TAG_KEYS, TagByIntervals

Json = Any
B = Builder
WHAT = "tagByIntervals"


@polls("NumericSeries", "tagByIntervals")
def tag_by_intervals(b: B, v: Json) -> SeriesNode:
    o = b.obj(v, "TagByIntervalsSeries")
    x = b.timed(b.numeric(b.get(o, "input", "TagByIntervalsSeries")), WHAT)
    kind, source = one_of(
        b.get(o, "intervals", "TagByIntervalsSeries"), "IntervalSource", ("events", "ranges")
    )
    if kind == "events":
        raise refuse(WHAT, "intervals", "intervals from events are not computed by Sparkwire; use ranges")
    s = b.obj(source, "RangeIntervalSource")
    ranges = b.ranges(b.get(s, "ranges", "RangeIntervalSource"))
    listed = b.get(s, "tagBy", "RangeIntervalSource")
    if not isinstance(listed, list):
        raise MalformedNode("RangeIntervalSource.tagBy must be a list")
    if not listed:  # "Non-empty ordered list of tag sources"
        raise refuse(WHAT, "tagBy", "needs at least one tag source")
    tag_by: list[str] = []
    for item in listed:
        tag_kind, _ = one_of(item, "RangeTagSource", tuple(TAG_KEYS))
        if TAG_KEYS[tag_kind] in tag_by:
            raise refuse(WHAT, "tagBy", f"{tag_kind} is listed twice")
        tag_by.append(TAG_KEYS[tag_kind])
    shift = None
    if o.get("timeShift") is not None:
        shift, _ = one_of(
            o["timeShift"], "TagByIntervalsTimeShift", ("intervalStart", "intervalEnd", "eventTimeShift")
        )
        if shift == "eventTimeShift":
            raise refuse(WHAT, "timeShift", "a shift by an event's time is not computed by Sparkwire")
    dims = dimensions(b, x)
    clash = sorted(set(dims) & set(tag_by))
    if clash:
        raise refuse(WHAT, "tagBy", f"the input is already grouped by {clash}")
    return TagByIntervals(x, ranges, tuple(tag_by), shift, (*dims, *tag_by))
