"""tagByIntervals over events, and its `eventTimeShift`, compiled and evaluated as a poll does
(compute/evaluation/nodes/tag_intervals.py), against references written from nominal-api's docs:
- `EventIntervalSource`: "Intervals come from an event query. Each event defines [timestamp,
  timestamp+duration)"; `tagBy`: "Each contributes a tag key-value pair per event interval";
- `TagByIntervalsSeries`: "Points within an interval get tagged; points outside all intervals are
  dropped ... If intervals with different tag map overlap, a data point falling in multiple
  intervals is duplicated into each matching output group. Overlapping intervals with equal tag
  maps are not allowed. Optional time shift subtracts a per-interval anchor from timestamps";
- `ReservedTagKey`: EVENT_LEVEL is an interval tag; "The full key for an event label is
  EVENT_LABEL_PREFIX + ":" + labelName";
- `EventTimeShift`: "Shift by the start timestamp of the event at the configured zero-based index
  from this query whose event time lies in the anchor window [start, end) ... The window is the
  tagging interval"; index "Defaults to zero and must be non-negative"; sortOrder "Ordering by
  event start timestamp before selecting the index. Defaults to ASC."
The forms of values nominal-api leaves open are docs/protocol.md's: an interval's index counts the
period's intervals from 0, a level is the event's type, a property an event lacks is NOMINAL_ABSENT
(`ReservedTagValue`), a label's tag is "true" or "false"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from compute.evaluation.compiler.catalogs import Catalogs
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Rows
from compute.evaluation.errors import ComputeError
from compute.evaluation.polled import evaluate_period
from compute.evaluation.results import NumericPoints
from compute.storage.events import Event
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests import node_json as n

pytestmark = pytest.mark.unit

S = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * S
RID = "ri.sparkwire.test.dataset.tagged-by-events"
Json = dict[str, Any]
# two vehicles' channel, each at 10 Hz over 10 s: vehicle a's i-th point is i, vehicle b's is 100 + i
SERIES = {
    ("level", "a"): [(T0 + i * 100 * MS, float(i)) for i in range(100)],
    ("level", "b"): [(T0 + i * 100 * MS, 100.0 + i) for i in range(100)],
}


def event(name: str, start: int, duration: int, kind: str = "FLAG", **extra: Any) -> Event:
    return Event("", name, ["ri.asset"], start, duration, name, "", kind, **extra)


EVENTS = [
    event("burn 1", T0 + S, S, labels=["reviewed"], properties={"phase": "climb"}),
    event("burn 2", T0 + 3 * S, 500 * MS, kind="INFO", properties={"phase": "cruise"}),
    event("burn 3", T0 + 6 * S, S, typed_properties={"phase": "descent"}),
    event("burn 0", T0 - 5 * S, S),  # before the period: no interval of it
    event("burn 4", T0 + 7 * S, S, archived=True),  # archived: found by no query
    event("mark", T0 + 8 * S, 0, kind="SUCCESS"),  # an instant
]


@dataclass
class Kept:
    """The event catalog a compilation looks up (`Catalogs.events`)."""

    kept: list[Event] = field(default_factory=lambda: list(EVENTS))

    def events(self) -> list[Event]:
        return self.kept


def text(s: str) -> Json:
    return n.union("searchText", n.literal(s))


def tagged(intervals: Json, shift: Json | None = None) -> Json:
    body: Json = {"input": n.channel(RID, "level", group_by=["vehicle"]), "intervals": intervals}
    if shift is not None:
        body["timeShift"] = shift
    return n.series(n.numeric_series(n.union("tagByIntervals", body)))


def by_events(query: Json, *tag_by: Json) -> Json:
    return n.union("events", {"query": query, "tagBy": list(tag_by)})


def by_ranges(spans: list[tuple[int, int]]) -> Json:
    literal = [
        {"startTimestamp": n.literal(n.duration(a)), "endTimestamp": n.literal(n.duration(b))}
        for a, b in spans
    ]
    return n.union(
        "ranges",
        {
            "ranges": n.union("literalRanges", {"literalRanges": literal}),
            "tagBy": [n.union("intervalIndex", {})],
        },
    )


def anchor(query: Json, index: int | None = None, order: str | None = None) -> Json:
    body: Json = {"query": query}
    if index is not None:
        body["index"] = n.literal(index)
    if order is not None:
        body["sortOrder"] = order
    return n.union("eventTimeShift", body)


def polled(node: Json, events: list[Event] | None = None) -> dict[Any, list[tuple[int, float]]]:
    start, end = T0, T0 + 10 * S
    catalogs = Catalogs(events=Kept(list(EVENTS) if events is None else events))
    plan = compile_plan(node, end - start, {}, Limits(), ResultOptions(), catalogs=catalogs, polled=True)
    known = [
        SeriesInfo(i, SeriesKey.of(RID, name, {"vehicle": v}), SeriesKind.NUMERIC)
        for i, (name, v) in enumerate(SERIES)
    ]
    points = list(SERIES.values())

    def read(ids: list[int], lo: int, hi: int) -> dict[int, Rows]:
        out = {}
        for i in ids:
            kept_points = [(t, v) for t, v in points[i] if lo <= t <= hi]
            ts = np.array([t for t, _ in kept_points], np.int64)
            values = np.array([v for _, v in kept_points], np.float64)
            out[i] = Rows(np.arange(len(kept_points), dtype=np.int64), ts, values)
        return out

    got = evaluate_period(plan, known, read, end)
    out: dict[Any, list[tuple[int, float]]] = {}
    for key, result in got.items():
        assert isinstance(result, NumericPoints)
        out[key] = list(zip(result.ts.tolist(), result.values.tolist(), strict=True))
    return out


def inside(vehicle: str, start: int, end: int, shift: int = 0) -> list[tuple[int, float]]:
    """The vehicle's points in [start, end), each time less `shift` (the reference, from SERIES)."""
    return [(t - shift, v) for t, v in SERIES[("level", vehicle)] if start <= t < end]


def test_a_live_subscription_keeps_nominals_refusal() -> None:
    node = tagged(by_events(text("burn"), n.union("level", {})))
    with pytest.raises(ComputeError) as refused:
        compile_plan(node, 10 * S, {}, Limits(), ResultOptions())
    assert refused.value.name == "InvalidComputation"
    assert refused.value.params["invalidTypes"] == "TAG_BY_INTERVALS"


def test_each_event_is_an_interval_tagged_by_its_sources() -> None:
    node = tagged(
        by_events(
            text("burn"),
            n.union("intervalIndex", {}),
            n.union("level", {}),
            n.union("property", {"propertyName": n.literal("phase")}),
            n.union("label", {"label": n.literal("reviewed")}),
            n.union("rangeStartTimestamp", {}),
        )
    )
    got = polled(node)
    # the period's events found by "burn" (burn 0 is before it, burn 4 archived), in time order
    found = [
        (T0 + S, T0 + 2 * S, "FLAG", "climb", "true"),
        (T0 + 3 * S, T0 + 3500 * MS, "INFO", "cruise", "false"),
        (T0 + 6 * S, T0 + 7 * S, "FLAG", "descent", "false"),
    ]
    want = {}
    for vehicle in ("a", "b"):
        for i, (start, end, level, phase, reviewed) in enumerate(found):
            key = (
                ("vehicle", vehicle),
                ("INTERVAL_INDEX", str(i)),
                ("EVENT_LEVEL", level),
                ("phase", phase),
                ("EVENT_LABEL_PREFIX:reviewed", reviewed),
                ("INTERVAL_START", str(start)),
            )
            want[key] = inside(vehicle, start, end)
    assert got == want


def test_intervals_with_equal_tags_share_a_group_and_a_missing_property_is_absent() -> None:
    got = polled(tagged(by_events(text("burn"), n.union("level", {}))))
    flag = inside("a", T0 + S, T0 + 2 * S) + inside("a", T0 + 6 * S, T0 + 7 * S)
    assert got[(("vehicle", "a"), ("EVENT_LEVEL", "FLAG"))] == flag
    assert got[(("vehicle", "a"), ("EVENT_LEVEL", "INFO"))] == inside("a", T0 + 3 * S, T0 + 3500 * MS)
    assert len(got) == 4
    quiet = [event("quiet", T0 + 2 * S, S)]  # no `phase` property
    absent = polled(
        tagged(by_events(text("quiet"), n.union("property", {"propertyName": n.literal("phase")}))), quiet
    )
    assert absent[(("vehicle", "b"), ("phase", "NOMINAL_ABSENT"))] == inside("b", T0 + 2 * S, T0 + 3 * S)
    # an instant's interval [t, t) holds no point
    assert polled(tagged(by_events(text("mark"), n.union("level", {})))) == {
        (("vehicle", v), ("EVENT_LEVEL", "SUCCESS")): [] for v in ("a", "b")
    }


def test_overlapping_intervals_duplicate_points_unless_their_tags_are_equal() -> None:
    overlapping = [event("x 1", T0 + S, 2 * S), event("x 2", T0 + 2 * S, 2 * S)]  # [1, 3) and [2, 4) s
    got = polled(tagged(by_events(text("x"), n.union("intervalIndex", {}))), overlapping)
    for vehicle in ("a", "b"):  # points of [2, 3) s in both groups
        assert got[(("vehicle", vehicle), ("INTERVAL_INDEX", "0"))] == inside(vehicle, T0 + S, T0 + 3 * S)
        assert got[(("vehicle", vehicle), ("INTERVAL_INDEX", "1"))] == inside(vehicle, T0 + 2 * S, T0 + 4 * S)
    with pytest.raises(ComputeError) as equal:  # both FLAG: "not allowed"
        polled(tagged(by_events(text("x"), n.union("level", {}))), overlapping)
    assert equal.value.name == "InvalidComputation" and "overlap" in equal.value.message


def test_an_event_time_shift_subtracts_the_indexed_events_start_in_each_interval() -> None:
    spans = [(T0 + S, T0 + 4 * S), (T0 + 5 * S, T0 + 9 * S)]
    # every event not archived: starts at 1, 3 s in the first interval; 6, 8 s (the instant) in the second
    every = n.union("not", text("no such"))
    second = polled(tagged(by_ranges(spans), anchor(every, index=1)))
    assert second[(("vehicle", "a"), ("INTERVAL_INDEX", "0"))] == inside("a", *spans[0], shift=T0 + 3 * S)
    assert second[(("vehicle", "b"), ("INTERVAL_INDEX", "1"))] == inside("b", *spans[1], shift=T0 + 8 * S)
    first = polled(tagged(by_ranges(spans), anchor(every)))  # index defaults to 0, ASC
    assert first[(("vehicle", "a"), ("INTERVAL_INDEX", "1"))] == inside("a", *spans[1], shift=T0 + 6 * S)
    last = polled(tagged(by_ranges(spans), anchor(every, index=0, order="DESC")))
    assert last[(("vehicle", "a"), ("INTERVAL_INDEX", "0"))] == inside("a", *spans[0], shift=T0 + 3 * S)
    # the time shift's query may differ from the intervals': the first event named "mark" in each
    # FLAG event's interval, none in [1, 2) s: resolution fails, by name
    with pytest.raises(ComputeError) as none:
        polled(tagged(by_events(text("burn"), n.union("intervalIndex", {})), anchor(text("mark"))))
    assert none.value.name == "InvalidComputation" and "index 0" in none.value.message
    with pytest.raises(ComputeError) as past:
        polled(tagged(by_ranges(spans), anchor(every, index=2)))  # two events in the first interval
    assert past.value.name == "InvalidComputation"


def test_an_event_shift_over_event_intervals_and_a_negative_index() -> None:
    events = [
        event("leg 1", T0 + S, 3 * S),
        event("leg 2", T0 + 5 * S, 4 * S),
        event("go", T0 + 1500 * MS, 0, kind="INFO"),
        event("go", T0 + 6 * S, 0, kind="INFO"),
    ]
    got = polled(tagged(by_events(text("leg"), n.union("intervalIndex", {})), anchor(text("go"))), events)
    assert got[(("vehicle", "a"), ("INTERVAL_INDEX", "0"))] == inside("a", T0 + S, T0 + 4 * S, T0 + 1500 * MS)
    assert got[(("vehicle", "a"), ("INTERVAL_INDEX", "1"))] == inside("a", T0 + 5 * S, T0 + 9 * S, T0 + 6 * S)
    with pytest.raises(ComputeError) as negative:  # "must be non-negative"
        polled(
            tagged(by_events(text("leg"), n.union("intervalIndex", {})), anchor(text("go"), index=-1)), events
        )
    assert negative.value.params.get("field") == "timeShift.index"
