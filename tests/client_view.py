"""What a client holds after applying a FullResult and every AppendResult, for every result type of
the compute subset, written from docs/protocol.md and the merge rules in nominal-api's
`ComputeNodeAppendResponse` docs (independent of the server's code).

Normalized form, per group: numeric/enum points as [(t, value)] (enum values as strings), buckets as
[(end, bucket)] with enum histograms keyed by category, ranges as [(start, end)] with -inf/inf for an
absent start/end (a range with a RangeValue as (start, end, value): a float, a dict of every
aggregate, or None for noPointsInRange), a value as (t, value).

Arrow results (`arrowNumeric`, `arrowBucketedNumeric`: Nominal's ArrowPlot) are decoded with pyarrow
from the IPC stream, as a Nominal client decodes them, and merged by the same rules as their LEGACY
counterparts. Their normalized form is LEGACY's, named as LEGACY names it, so that an Arrow
subscription compares with the LEGACY one of the same node and with the reference: a bucket's
`first` / `last` from the first_*/last_* columns (left out for a one-point bucket, as LEGACY leaves
them out), every other column under its own name. `GroupView.kind` keeps the wire kind."""

from __future__ import annotations

import base64
import math
import time
from typing import Any

import pyarrow as pa

from tests.wire import ns_of

INF = float("inf")
GroupKey = tuple[tuple[str, str], ...]
POINT_KINDS = ("numeric", "enum", "arrowNumeric")
BUCKET_KINDS = ("bucketedNumeric", "bucketedEnum", "arrowBucketedNumeric", "multivariate")
VALUE_KINDS = ("numericPoint", "enumPoint", "singlePoint", "rangeValue")
LEGACY_KIND = {"arrowNumeric": "numeric", "arrowBucketedNumeric": "bucketedNumeric"}
# The chart results: nominal-api gives them no append form, so only a FullResult carries them.
CHART_KINDS = ("numericHistogram", "enumHistogram", "cartesian", "bucketedCartesian", "bucketedCartesian3d")
EXTREMES = ("minXPoint", "maxXPoint", "minYPoint", "maxYPoint", "minZPoint", "maxZPoint")


def arrow_table(plot: dict[str, Any]) -> pa.Table:
    """An ArrowPlot's `arrowBinary` (Conjure binary: base64) read as an Arrow IPC stream."""
    with pa.ipc.open_stream(base64.b64decode(plot["arrowBinary"])) as reader:
        return reader.read_all()


def _arrow_buckets(plot: dict[str, Any]) -> dict[int, Any]:
    rows = arrow_table(plot).to_pylist()
    out = {}
    for row in rows:
        end = row.pop("end_bucket_timestamp")
        bucket = {k: v for k, v in row.items() if not k.startswith(("first_", "last_"))}
        for held in ("first", "last"):
            if f"{held}_value" in row and row.get("count", 2) > 1:
                bucket[held] = (row[f"{held}_timestamp"], row[f"{held}_value"])
        out[end] = bucket
    return out


def double(x: Any) -> float:
    return float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(x, x))


def _point(p: dict[str, Any], categories: list[str] | None = None) -> tuple[int, Any]:
    value = p["value"]
    return ns_of(p["timestamp"]), (categories[value] if categories is not None else double(value))


def _range(r: dict[str, Any]) -> tuple[Any, ...]:
    start = ns_of(r["start"]) if r.get("start") else -INF
    end = ns_of(r["end"]) if r.get("end") else INF
    value = r.get("value")
    if not value:
        return start, end
    if value["type"] == "double":
        return start, end, double(value["double"])
    if value["type"] == "aggregation":
        return start, end, {k: double(v) for k, v in value["aggregation"].items() if v is not None}
    assert value["type"] == "noPointsInRange", value
    return start, end, None


def point_order(point: tuple[int, Any]) -> tuple[Any, ...]:
    """Points in time order, and those that share a timestamp (a union's, or groups a tag filter or
    selectTags joins) in value order: the order among them is not part of a result."""
    t, v = point
    if isinstance(v, str):
        return (t, 2, v)
    return (t, 1, 0.0) if math.isnan(v) else (t, 0, v)


class GroupView:
    """One response (one group): its kind and the merged state."""

    def __init__(self, result: dict[str, Any]) -> None:
        self.kind: str = result["type"]
        self.categories: list[str] = []
        self.entries: dict[int, Any] = {}  # buckets (end -> bucket)
        # points (t, value) in time order: two at one timestamp stay two (a selectTags merging
        # groups that share timestamps sends both; keyed by time, one was lost)
        self.points: list[tuple[int, Any]] = []
        self.ranges: list[tuple[Any, ...]] = []
        self.value: tuple[float, Any] | None = None  # a point, or a rangeValue's (start, end)
        self.summary: list[tuple[float, float, int]] = []
        self.chart: list[Any] = []
        self._load(result)

    def _load(self, result: dict[str, Any]) -> None:
        body = result[self.kind]
        if self.kind in POINT_KINDS:
            self.categories = list(body.get("categories", self.categories))
            self.points = self._points(body)
        elif self.kind in BUCKET_KINDS:
            self.categories = list(body.get("categories", self.categories))
            self.entries.update(self._entries(body))
        elif self.kind == "range":
            self.ranges = [_range(r) for r in body]
        elif self.kind == "rangeValue":
            self.value = _range(body)
        elif self.kind == "singlePoint":  # its value a `Value` union: float64Value or stringValue
            value = body["value"]
            unwrapped = (
                double(value["float64Value"]) if value["type"] == "float64Value" else value["stringValue"]
            )
            self.value = (ns_of(body["timestamp"]), unwrapped)
        elif self.kind in VALUE_KINDS:
            self.value = (
                _point(body) if self.kind == "numericPoint" else (ns_of(body["timestamp"]), body["value"])
            )
        elif self.kind == "rangesSummary":
            self.summary = [(*_range(s["range"]), s["subRangeCount"]) for s in body["rangesSummary"]]
        elif self.kind in CHART_KINDS:
            self.chart = _chart(self.kind, body)
        else:
            raise AssertionError(f"unexpected result type {self.kind}")

    def _points(self, body: dict[str, Any]) -> list[tuple[int, Any]]:
        """A point kind's (t, value) pairs in the frame's order (its timestamps ascend)."""
        if self.kind == "arrowNumeric":
            return [(row["timestamp"], row["value"]) for row in arrow_table(body).to_pylist()]
        stamps = [ns_of(t) for t in body["timestamps"]]
        if self.kind == "numeric":
            values = [double(v) for v in body["values"]]
        else:
            values = [self.categories[v] for v in body["values"]]
        return list(zip(stamps, values, strict=True))

    def _entries(self, body: dict[str, Any]) -> dict[int, Any]:
        if self.kind == "arrowBucketedNumeric":
            return _arrow_buckets(body)
        if self.kind == "multivariate":  # each bucket: its end and one value per (input, aggregation)
            return {ns_of(b["timestamp"]): tuple(_value(v) for v in b["values"]) for b in body["buckets"]}
        stamps = [ns_of(t) for t in body["timestamps"]]
        if self.kind == "bucketedNumeric":
            values = [self._numeric_bucket(b) for b in body["buckets"]]
        else:
            values = [self._enum_bucket(b) for b in body["buckets"]]
        assert len(stamps) == len(values)
        return dict(zip(stamps, values, strict=True))

    @staticmethod
    def _numeric_bucket(b: dict[str, Any]) -> dict[str, Any]:
        out = {k: double(b[k]) for k in ("min", "max", "mean", "variance")}
        out["count"] = b["count"]
        for wire, held in (("firstPoint", "first"), ("lastPoint", "last")):
            if b.get(wire) is not None:
                out[held] = _point(b[wire])
        if b.get("aggregations"):  # SummarizeSeries.numericAggregations, by the request's names
            out["aggregations"] = {k: double(v) for k, v in b["aggregations"].items()}
        return out

    def _enum_bucket(self, b: dict[str, Any]) -> dict[str, Any]:
        cats = self.categories
        out: dict[str, Any] = {
            "histogram": {cats[int(k)]: v for k, v in b["histogram"].items()},
            "first": _point(b["firstPoint"], cats),
        }
        if b.get("lastPoint") is not None:
            out["last"] = _point(b["lastPoint"], cats)
        return out

    def append(self, result: dict[str, Any], start: int, end: int) -> None:
        assert result["type"] == self.kind, f"append of {result['type']} onto {self.kind}"
        body = result[self.kind]
        if self.kind in POINT_KINDS:
            # points in [start, end] are replaced; the categories only grow
            self.categories = list(body.get("categories", self.categories))
            kept = [p for p in self.points if not start <= p[0] <= end]
            self.points = sorted(kept + self._points(body), key=lambda p: p[0])  # stable
        elif self.kind in BUCKET_KINDS:
            self.categories = list(body.get("categories", self.categories))
            self.entries.update(self._entries(body))  # a bucket replaces the one with its end
        elif self.kind == "range":
            # old ranges from `start` on are dropped (one spanning it truncated), then the new
            # ranges are merged in, joining overlapping or adjacent ones
            kept = [(r[0], min(r[1], start), *r[2:]) for r in self.ranges if r[0] < start]
            self.ranges = merge_ranges(kept + [_range(r) for r in body])
        elif self.kind in VALUE_KINDS:
            self._load(result)
        else:
            raise AssertionError(f"{self.kind} has no append form")

    def trim(self, cutoff: int) -> None:
        if self.kind in POINT_KINDS:
            self.points = [p for p in self.points if p[0] >= cutoff]
        elif self.kind in BUCKET_KINDS:
            self.entries = {t: v for t, v in self.entries.items() if t >= cutoff}

    def point_count(self) -> int:
        """How many raw points the merged state reflects (a bucket's count, or its histogram's sum)."""
        if self.kind in ("bucketedNumeric", "arrowBucketedNumeric"):
            return sum(b["count"] for b in self.entries.values())
        if self.kind == "bucketedEnum":
            return sum(sum(b["histogram"].values()) for b in self.entries.values())
        assert self.kind in POINT_KINDS, f"{self.kind} holds no points"
        return len(self.points)

    def normalized(self) -> Any:
        if self.kind in POINT_KINDS:
            return sorted(self.points, key=point_order)
        if self.kind in BUCKET_KINDS:
            return sorted(self.entries.items())
        if self.kind == "range":
            return list(self.ranges)
        if self.kind == "rangesSummary":
            return list(self.summary)
        if self.kind in CHART_KINDS:
            return list(self.chart)
        return self.value


def _value(v: dict[str, Any]) -> Any:
    """A `Value` of a multivariate bucket: a number or a label."""
    assert v["type"] in ("float64Value", "stringValue"), v
    return double(v["float64Value"]) if v["type"] == "float64Value" else v["stringValue"]


def _counts(by_channel: dict[str, Any]) -> dict[str, int]:
    return {name: c["count"] for name, c in by_channel.items()}


def _chart(kind: str, body: dict[str, Any]) -> list[Any]:
    """A chart result in normalized form: histogram buckets as (lower, upper, {input: count}) or
    (label, {input: count}); scatter pairs as (t, x, y); scatter buckets as (minX, maxX, minY,
    maxY, minTimestamp, maxTimestamp, count)."""
    if kind == "numericHistogram":
        out = []
        for b in body["buckets"]:
            assert b.get("buckets", b["countsByChannel"]) == b["countsByChannel"], "deprecated copy differs"
            out.append((double(b["lowerBound"]), double(b["upperBound"]), _counts(b["countsByChannel"])))
        return out
    if kind == "enumHistogram":
        return [(b["value"], _counts(b["countsByChannel"])) for b in body["buckets"]]
    if kind == "cartesian":
        columns = (body["timestamps"], body["xValues"], body["yValues"])
        assert len({len(c) for c in columns}) == 1, "cartesian columns of different lengths"
        return [(ns_of(t), double(x), double(y)) for t, x, y in zip(*columns, strict=True)]
    if kind == "bucketedCartesian3d":
        return [_bucket_3d(b) for b in body["buckets"]]
    return [
        (
            *(double(b[k]) for k in ("minX", "maxX", "minY", "maxY")),
            ns_of(b["minTimestamp"]),
            ns_of(b["maxTimestamp"]),
            b["count"],
        )
        for b in body["buckets"]
    ]


def _bucket_3d(b: dict[str, Any]) -> tuple[Any, ...]:
    """((meanX, meanY, meanZ), each extreme point as (x, y, z, t), minTimestamp, maxTimestamp, count)."""
    for name in EXTREMES:  # the deprecated minX ... maxZ, where sent, are those points' coordinates
        if b.get(name[:4]) is not None:
            assert double(b[name[:4]]) == double(b[name]["xyz"[EXTREMES.index(name) // 2]]), (name, b)
    points = tuple(
        (double(b[n]["x"]), double(b[n]["y"]), double(b[n]["z"]), ns_of(b[n]["timestamp"])) for n in EXTREMES
    )
    means = (double(b["meanX"]), double(b["meanY"]), double(b["meanZ"]))
    return means, points, ns_of(b["minTimestamp"]), ns_of(b["maxTimestamp"]), b["count"]


def merge_ranges(ranges: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[Any]] = []
    for r in sorted(ranges, key=lambda r: (r[0], r[1])):
        s, e = r[0], r[1]
        if s > e:  # s == e: an instant (a zero-duration range: onChange, crossovers, peaks)
            continue
        if out and s <= out[-1][1] and len(r) == 2:  # a range with a value is never joined
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append(list(r))
    return [tuple(r) for r in out]


def _responses(result: dict[str, Any]) -> dict[GroupKey, dict[str, Any]]:
    if result["type"] != "grouped":
        return {(): result}
    out = {}
    for r in result["grouped"]["responses"]:
        assert r["grouping"]["type"] == "tagsWithValues"
        key = tuple(sorted(r["grouping"]["tagsWithValues"].items()))
        assert key not in out, f"group {key} twice in one response"
        out[key] = r["response"]
    kinds = {r["type"] for r in out.values()}
    assert len(kinds) <= 1, f"a grouped response mixes result types {kinds}"
    return out


class ResultView:
    """The merged state of one subscription."""

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self.groups: dict[GroupKey, GroupView] = {}
        self.grouped: bool | None = None
        self.latest_end = 0
        self.fulls = 0
        self.appends: list[tuple[int, int]] = []  # (start, end) of each AppendResult
        self.applied_at = 0  # clock when the last update was applied: after the server computed it

    def apply(self, update: dict[str, Any]) -> None:
        self.applied_at = time.time_ns()
        if update["type"] == "full":
            result = update["full"]["result"]
            self.grouped = result["type"] == "grouped"
            self.groups = {k: GroupView(r) for k, r in _responses(result).items()}
            self.fulls += 1
        elif update["type"] == "append":
            append = update["append"]
            start, end = ns_of(append["start"]), ns_of(append["end"])
            assert start <= end, (start, end)
            assert end >= self.latest_end, "an append's end went backwards"
            self.latest_end = end
            self.appends.append((start, end))
            result = append["result"]
            assert (result["type"] == "grouped") == self.grouped, "an append changed grouping"
            for key, response in _responses(result).items():
                assert key in self.groups, f"append for group {key} that no FullResult announced"
                self.groups[key].append(response, start, end)
            for group in self.groups.values():
                group.trim(self.latest_end - self.window_ns)
        else:
            raise AssertionError(f"unexpected update {update['type']}: {update}")

    def ungrouped(self) -> GroupView:
        """The one response of a subscription whose result is not grouped."""
        assert self.grouped is False, "no FullResult yet" if self.grouped is None else "a grouped result"
        return self.groups[()]

    def snapshot(self) -> dict[GroupKey, tuple[str, Any]]:
        return {k: (LEGACY_KIND.get(g.kind, g.kind), g.normalized()) for k, g in self.groups.items()}


def clip_ranges(snapshot: dict[GroupKey, tuple[str, Any]], cutoff: int) -> dict[GroupKey, tuple[str, Any]]:
    """Ranges as seen from `cutoff` on: a range that began earlier starts at the cutoff. (A range
    true since before the window, e.g. from `not`, starts at the window's start, which moves with
    the server's clock; any cutoff after the server computed the result makes them comparable.)"""
    out = {}
    for key, (kind, value) in snapshot.items():
        if kind == "range":
            value = [(max(r[0], cutoff), *r[1:]) for r in value if r[1] > cutoff or r[0] == r[1] >= cutoff]
        elif kind == "rangesSummary":
            value = [(max(s, cutoff), e, count) for s, e, count in value if e > cutoff]
        out[key] = (kind, value)
    return out


def same(a: Any, b: Any, rel: float = 0.0) -> bool:
    """Structural equality; floats equal when both NaN, or within `rel` (0: exactly)."""
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if math.isinf(a) or math.isinf(b) or rel == 0.0:
            return a == b
        return math.isclose(a, b, rel_tol=rel, abs_tol=rel)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rel) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y, rel) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def first_difference(a: Any, b: Any, rel: float = 0.0, path: str = "") -> str | None:
    """Where two results differ (for assertion messages)."""
    if same(a, b, rel):
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(map(str, a))} != {sorted(map(str, b))}"
        for k in a:
            d = first_difference(a[k], b[k], rel, f"{path}.{k}")
            if d:
                return d
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            d = first_difference(x, y, rel, f"{path}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}; extra: {(a[len(b) :] or b[len(a) :])[:3]}"
    return f"{path}: {a!r} != {b!r}"
