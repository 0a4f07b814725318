"""Unit tests for the client package's pieces (no server): every node builder produces a request
that nominal-api's own classes decode unchanged, and the merge rules for the result types the
live tests cannot reach yet (ranges, single values) behave as ComputeNodeAppendResponse documents."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conjure_python_client import ConjureDecoder, ConjureEncoder
from nominal_api import persistent_compute_api as pc

from sparkwire_client import nodes as n
from sparkwire_client.client import ws_url
from sparkwire_client.view import Range, View

NANOS = 1_000_000_000


def ts(ns: int) -> dict[str, int]:
    return {"seconds": ns // NANOS, "nanos": ns % NANOS}


def _drop_empty(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _drop_empty(v) for k, v in x.items() if v not in (None, [], {})}
    if isinstance(x, list):
        return [_drop_empty(v) for v in x]
    return x


temp = n.numeric_channel("ri.x", "engine.temp", tags={"vehicle": "a1"})
rpm = n.numeric_channel("ri.x", "engine.rpm", group_by=["vehicle"])
mode = n.enum_channel("ri.x", "drive.mode")

BUILT = {
    "raw": n.series(temp),
    "buckets": n.series(temp, buckets=100),
    "resolution": n.series(mode, resolution_seconds=0.01),
    "arrow": n.series(temp, buckets=100, arrow="ARROW_V3", fields=["MEAN", "MAX", "FIRST_POINT"]),
    "arrow-v4-default-fields": n.series(temp, arrow="ARROW_V4"),
    "arithmetic": n.series((temp - 32) / 1.8 + rpm * 2 - 1),
    "reflected": n.series(10 - temp, buckets=5),
    "unary": n.series(abs(-temp).sqrt().ln().log10()),
    "derivative": n.series(temp.derivative("MILLISECONDS")),
    "difference": n.series(temp.value_difference()),
    "shift": n.series(temp.time_shift(1.5)),
    "filter": n.series(temp.where("GREATER_THAN", 3)),
    "rolling": n.series(temp.rolling(0.25, "average")),
    "rolling-std": n.series(temp.rolling(2, "standardDeviation")),
    "ranges": n.ranges((temp.above(90) & ~temp.below(10)) | mode.is_in(["PARK"]), max_ranges=10),
    "bounds": n.ranges(temp.bounds(1, 2, "OUTSIDE_BOUNDS")),
    "enum-filter": n.ranges(mode.is_not_in(["DRIVE", "PARK"])),
    "trig-and-powers": n.series(n.atan2(temp.sin() ** 2 % 3 // 1, temp.cos()) + temp.tan().asin().acos()),
    "bits": n.series(temp.bits("bitAnd", 12).bits("bitTest", 3)),
    "units": n.series(temp.in_unit("[degF]").convert_to("Cel").drop_nan()),
    "across": n.series(n.across("max", temp, rpm, temp * 2)),
    "resample-and-time-difference": n.series(temp.resample(0.5).time_difference("MILLISECONDS")),
    "fluid-property": n.series(
        n.fluid_property("WATER", "MASS_DENSITY", {"TEMPERATURE": temp + 273.15, "PRESSURE": rpm * 1000})
    ),
    "first": n.first_point(temp),
    "last": n.last_point(mode),
    "across-groups": n.series(
        rpm.filter_by_tag("vehicle", ["a1", "a2"]).select_tags().z_score(radius_seconds=3)
    ),
    "excluded-groups": n.series(rpm.filter_by_tag("vehicle", ["a3"], exclude=True).z_score("vehicle")),
    "enum-groups": n.series(
        n.enum_channel("ri.x", "drive.mode", group_by=["vehicle"])
        .filter_by_tag("vehicle", ["a1"])
        .select_tags("vehicle")
    ),
}


@pytest.mark.parametrize("name", BUILT)
def test_built_nodes_decode_as_nominal_requests(name: str) -> None:
    node = BUILT[name]
    sub_id = "0a1b2c3d-0000-4000-8000-000000000000"
    raw = {
        "type": "subscribe",
        "subscribe": {sub_id: {"computeRequest": node.request(60), "subscriptionOptions": {"minDelay": 0}}},
    }
    decoded = ConjureDecoder().read_from_string(json.dumps(raw), pc.ClientMessage)
    again = ConjureEncoder.do_encode(decoded)["subscribe"][sub_id]["computeRequest"]
    assert _drop_empty(again["node"]) == _drop_empty(node.json)  # nothing lost or renamed
    assert set(again["context"]["variables"]) == set(node.variables)


def test_identical_builds_are_identical_on_the_wire() -> None:
    again = n.series(n.numeric_channel("ri.x", "engine.temp", tags={"vehicle": "a1"}))
    assert again.request(60) == BUILT["raw"].request(60)
    assert n.series(temp).request(60) != n.series(n.numeric_channel("ri.x", "engine.temp")).request(60)


def test_ws_url_accepts_http_and_websocket_addresses() -> None:
    assert ws_url("http://127.0.0.1:8000") == "ws://127.0.0.1:8000/persistent-compute/ws"
    assert ws_url("https://host/") == "wss://host/persistent-compute/ws"
    assert ws_url("ws://h:1/persistent-compute/ws") == "ws://h:1/persistent-compute/ws"


def _range(start: int | None, end: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if start is not None:
        out["start"] = ts(start)
    if end is not None:
        out["end"] = ts(end)
    return out


def _append(start: int, end: int, result: dict[str, Any]) -> dict[str, Any]:
    return {"type": "append", "append": {"start": ts(start), "end": ts(end), "result": result}}


def test_range_appends_replace_from_start_cut_the_spanning_range_and_merge_touching_ones() -> None:
    view = View(window_ns=1000 * NANOS)
    full = [_range(10 * NANOS, 20 * NANOS), _range(30 * NANOS, None)]
    view.apply({"type": "full", "full": {"result": {"type": "range", "range": full}}})
    assert view.result.ranges == [Range(10 * NANOS, 20 * NANOS), Range(30 * NANOS, None)]

    # from 35 s on: the open range is cut at 35 s, and the new one starting there joins it
    view.apply(_append(35 * NANOS, 50 * NANOS, {"type": "range", "range": [_range(35 * NANOS, 40 * NANOS)]}))
    assert view.result.ranges == [Range(10 * NANOS, 20 * NANOS), Range(30 * NANOS, 40 * NANOS)]

    # from 15 s on nothing holds: the first range is cut at 15 s, the second dropped
    view.apply(_append(15 * NANOS, 60 * NANOS, {"type": "range", "range": []}))
    assert view.result.ranges == [Range(10 * NANOS, 15 * NANOS)]


def test_points_in_the_append_span_are_replaced_and_old_ones_trimmed() -> None:
    view = View(window_ns=100 * NANOS)
    full = {
        "type": "numeric",
        "numeric": {"timestamps": [ts(t * NANOS) for t in (5, 50, 60, 70)], "values": [1.0, 2.0, 3.0, "NaN"]},
    }
    view.apply({"type": "full", "full": {"result": full}})
    append = {"type": "numeric", "numeric": {"timestamps": [ts(65 * NANOS)], "values": [9.0]}}
    view.apply(_append(55 * NANOS, 120 * NANOS, append))  # 60 and 70 are gone, 65 arrives; 5 < 120-100
    assert view.timestamps == [50 * NANOS, 65 * NANOS]
    assert view.values == [2.0, 9.0]


def test_points_that_share_a_timestamp_stay_distinct_until_an_append_replaces_them() -> None:
    """A union or a selectTags merging groups sends every point of a shared timestamp (docs/protocol.md);
    an append replaces whatever the view holds in its [start, end], however many points that is."""
    view = View(window_ns=100 * NANOS)

    def numeric(points: list[tuple[int, float]]) -> dict[str, Any]:
        return {
            "type": "numeric",
            "numeric": {"timestamps": [ts(t * NANOS) for t, _ in points], "values": [v for _, v in points]},
        }

    view.apply({"type": "full", "full": {"result": numeric([(10, 1.0), (10, 5.0), (11, 2.0)])}})
    assert list(zip(view.timestamps, view.values, strict=True)) == [
        (10 * NANOS, 1.0),
        (10 * NANOS, 5.0),
        (11 * NANOS, 2.0),
    ]
    view.apply(_append(12 * NANOS, 12 * NANOS, numeric([(12, 7.0), (12, 8.0)])))  # new ones after them
    assert view.values == [1.0, 5.0, 2.0, 7.0, 8.0]
    view.apply(_append(10 * NANOS, 10 * NANOS, numeric([(10, 6.0)])))  # both at 10 s replaced by one
    assert view.values == [6.0, 2.0, 7.0, 8.0]
    assert [r["value"] for r in view.rows()] == [6.0, 2.0, 7.0, 8.0]


def test_buckets_replace_by_end_timestamp_per_group() -> None:
    view = View(window_ns=1000 * NANOS)

    def bucket(mean: float, count: int) -> dict[str, Any]:
        return {"min": mean, "max": mean, "mean": mean, "count": count, "variance": 0.0, "aggregations": {}}

    def grouped(vehicle: str, ends: list[int], buckets: list[dict[str, Any]]) -> dict[str, Any]:
        plot = {"timestamps": [ts(e * NANOS) for e in ends], "buckets": buckets}
        return {
            "grouping": {"type": "tagsWithValues", "tagsWithValues": {"vehicle": vehicle}},
            "response": {"type": "bucketedNumeric", "bucketedNumeric": plot},
        }

    full = {
        "type": "grouped",
        "grouped": {
            "responses": [
                grouped("a1", [10, 20], [bucket(1, 1), bucket(2, 1)]),
                grouped("a2", [10], [bucket(5, 1)]),
            ]
        },
    }
    view.apply({"type": "full", "full": {"result": full}})
    append = {
        "type": "grouped",
        "grouped": {"responses": [grouped("a1", [20, 30], [bucket(4, 2), bucket(3, 1)])]},
    }
    view.apply(_append(10 * NANOS, 30 * NANOS, append))
    rows = [(r["vehicle"], r["timestamp"] // NANOS, r["mean"], r["count"]) for r in view.rows()]
    assert rows == [("a1", 10, 1, 1), ("a1", 20, 4, 2), ("a1", 30, 3, 1), ("a2", 10, 5, 1)]


def test_a_single_value_keeps_the_newest_point_in_the_window() -> None:
    view = View(window_ns=10 * NANOS)
    point = {"timestamp": ts(100 * NANOS), "value": 1.5}
    view.apply({"type": "full", "full": {"result": {"type": "numericPoint", "numericPoint": point}}})
    assert view.rows() == [{"timestamp": 100 * NANOS, "value": 1.5}]
    newer = {"timestamp": ts(105 * NANOS), "value": 2.5}
    view.apply(_append(101 * NANOS, 106 * NANOS, {"type": "numericPoint", "numericPoint": newer}))
    assert view.rows() == [{"timestamp": 105 * NANOS, "value": 2.5}]
    view.apply(_append(106 * NANOS, 120 * NANOS, {"type": "numericPoint"}))  # nothing new; 105 is old
    assert view.rows() == []
