"""The merged current view of a subscription's window: a FullResult, then every AppendResult applied
with the merge rules of Nominal's `ComputeNodeAppendResponse` (as docs/protocol.md states them):

- raw points (`numeric`, `enum`): the points in `[start, end]` replace the ones held there (points
  that share a timestamp, as a `union` or a `selectTags` merging groups sends them, stay distinct);
- buckets (`bucketedNumeric`, `bucketedEnum`): a bucket replaces the one with the same end timestamp;
- ranges (`range`): old ranges from `start` on are dropped (one spanning `start` is cut there), the
  new ones are added, and ranges that then overlap or touch are merged (a range with a value, from
  `rangeNumericAggregation`, is sent whole from its start and replaces the old one);
- single values (`numericPoint`, `enumPoint`, `singlePoint`): the newest one sent is the value (a
  `singlePoint`'s `Value` unwrapped: a number or a label);
- Arrow results (`arrowNumeric`, `arrowBucketedNumeric`: Nominal's `ArrowPlot`, an Arrow IPC stream,
  asked for with `series(..., arrow="ARROW_V3", fields=[...])`) are read with pyarrow (the `arrow`
  extra) and merge as `numeric` and `bucketedNumeric` do; a bucket holds the columns the request
  named, under the names LEGACY buckets use (`min`, `max`, `mean`, `count`, `variance`, `first`,
  `last`) and the column's own name for the others (`sum`, `standard_deviation`, ...);
- `grouped`: each group merges on its own;
- the charts (`numericHistogram`, `enumHistogram`, `cartesian`, `bucketedCartesian`) have no append
  form: each FullResult replaces the chart;
- a curve fit (`curveFit`, `curveFitV2`: Nominal's `CurveFitResult` / `CurveFitResultV2`, streamed
  with `stream_polled=True`) has no append form either: each FullResult is the fit, one row;
- neither has a spectrum (`frequencyDomain`, `frequencyDomainV2`, `bucketedFrequencyDomain`,
  `spectrogram`): rows of frequency and amplitude, or for `frequencyV2`'s two-series transforms
  of frequency, magnitude and phase (cpsd, bode) or frequency, real and imaginary (nyquist);
- and what falls out of the window (older than the newest `end` minus the window width) is trimmed.

Enum values are stored as their category strings, so category lists that differ between frames
cannot mix them up.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

NANOS = 1_000_000_000
GroupKey = tuple[tuple[str, str], ...]
Json = dict[str, Any]

_POINT_KINDS = frozenset({"numeric", "enum", "arrowNumeric"})
_BUCKET_KINDS = frozenset({"bucketedNumeric", "bucketedEnum", "multivariate", "arrowBucketedNumeric"})
_VALUE_KINDS = frozenset({"numericPoint", "enumPoint", "singlePoint"})
_CHART_KINDS = frozenset(
    {"numericHistogram", "enumHistogram", "cartesian", "bucketedCartesian", "bucketedCartesian3d"}
)
# What only a poll answers (sparkwire_client.compute): a spectrum, its buckets, a spectrogram.
_SPECTRUM_KINDS = frozenset(
    {"frequencyDomain", "frequencyDomainV2", "bucketedFrequencyDomain", "spectrogram"}
)
# A fit's errors and coefficients (Nominal's CurveFitResult / CurveFitResultV2): one row, no append form.
_CURVE_FIT_KINDS = frozenset({"curveFit", "curveFitV2"})
_SPECIAL_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def ns_of(timestamp: Json) -> int:
    return int(timestamp["seconds"]) * NANOS + int(timestamp["nanos"])


def _double(value: Any) -> float:
    return _SPECIAL_DOUBLES[value] if isinstance(value, str) else float(value)


@dataclass(frozen=True)
class Range:
    start: int | None  # ns; None: began before anything the server considered
    end: int | None  # ns, exclusive; None: still open
    # a rangeNumericAggregation's value: a number, a dict of every aggregate, or None (no point in it)
    value: Any = None
    valued: bool = False  # whether the server attached a value


def _range_value(value: Json) -> Any:
    """A RangeValue: `double`, `aggregation` (every aggregate by name) or `noPointsInRange` (None)."""
    if value["type"] == "double":
        return _double(value["double"])
    if value["type"] == "aggregation":
        return {k: _double(v) for k, v in value["aggregation"].items() if v is not None}
    return None


def _numeric_bucket(b: Json) -> Json:
    def point(p: Json | None) -> tuple[int, float] | None:
        return None if p is None else (ns_of(p["timestamp"]), _double(p["value"]))

    return {
        "min": _double(b["min"]) if b.get("min") is not None else math.nan,
        "max": _double(b["max"]) if b.get("max") is not None else math.nan,
        "mean": _double(b["mean"]) if b.get("mean") is not None else math.nan,
        "count": int(b.get("count") or 0),
        "variance": _double(b["variance"]) if b.get("variance") is not None else math.nan,
        "first": point(b.get("firstPoint")),
        "last": point(b.get("lastPoint")),
    }


def _enum_bucket(b: Json, categories: list[str]) -> Json:
    def point(p: Json | None) -> tuple[int, str] | None:
        return None if p is None else (ns_of(p["timestamp"]), categories[p["value"]])

    return {
        "histogram": {categories[int(k)]: int(v) for k, v in b["histogram"].items()},
        "first": point(b.get("firstPoint")),
        "last": point(b.get("lastPoint")),
    }


def arrow_rows(plot: Json) -> list[Json]:
    """An `ArrowPlot`'s rows: its `arrowBinary` (Conjure binary: base64) read as an Arrow IPC stream."""
    import base64

    try:
        import pyarrow as pa
    except ImportError as e:  # an optional extra: only Arrow results need it
        raise ImportError("Arrow results need pyarrow: pip install 'sparkwire-client[arrow]'") from e
    with pa.ipc.open_stream(base64.b64decode(plot["arrowBinary"])) as reader:
        rows: list[Json] = reader.read_all().to_pylist()
    return rows


def _arrow_bucket(row: Json) -> Json:
    """An Arrow bucket row as a LEGACY bucket's dict, holding only the columns the request named;
    `first` / `last` absent from a one-point bucket, as LEGACY's are."""
    bucket: Json = {}
    for name, value in row.items():
        if name == "end_bucket_timestamp" or name.startswith(("first_", "last_")):
            continue
        bucket[name] = int(value) if name == "count" else (math.nan if value is None else float(value))
    for held in ("first", "last"):
        if f"{held}_value" in row:
            one_point = row.get("count") == 1 or row.get(f"{held}_value") is None
            bucket[held] = None if one_point else (int(row[f"{held}_timestamp"]), float(row[f"{held}_value"]))
    return bucket


def _points(kind: str, body: Any) -> list[tuple[int, Any]]:
    """A plot's points as (timestamp, value) in the frame's order (time order; points that share a
    timestamp are each one)."""
    if kind == "arrowNumeric":
        return [(int(r["timestamp"]), _double(r["value"])) for r in arrow_rows(body)]
    stamps = [ns_of(t) for t in body["timestamps"]]
    if kind == "numeric":
        return list(zip(stamps, (_double(v) for v in body["values"]), strict=True))
    categories = body["categories"]
    return list(zip(stamps, (categories[v] for v in body["values"]), strict=True))


def _entries(kind: str, body: Any) -> dict[int, Any]:
    """A plot's buckets by their end timestamp, as decoded dicts."""
    if kind == "arrowBucketedNumeric":
        return {int(r["end_bucket_timestamp"]): _arrow_bucket(r) for r in arrow_rows(body)}
    if kind == "multivariate":  # a bucket's end -> its values, one per (input, aggregation)
        return {
            ns_of(b["timestamp"]): [
                _double(v["float64Value"]) if v["type"] == "float64Value" else v.get(v["type"])
                for v in b["values"]
            ]
            for b in body["buckets"]
        }
    stamps = [ns_of(t) for t in body["timestamps"]]
    if kind == "bucketedNumeric":
        return dict(zip(stamps, (_numeric_bucket(b) for b in body["buckets"]), strict=True))
    categories = body["categories"]
    return dict(zip(stamps, (_enum_bucket(b, categories) for b in body["buckets"]), strict=True))


def _ranges(body: list[Json]) -> list[Range]:
    out = [
        Range(
            ns_of(r["start"]) if r.get("start") else None,
            ns_of(r["end"]) if r.get("end") else None,
            _range_value(r["value"]) if r.get("value") else None,
            bool(r.get("value")),
        )
        for r in body
    ]
    return sorted(out, key=lambda r: -math.inf if r.start is None else r.start)


def _counts(by_channel: Json) -> dict[str, int]:
    return {name: int(c["count"]) for name, c in by_channel.items()}


def _spectrum_rows(kind: str, body: Json) -> list[Json]:
    """A spectrum as rows of (frequency in Hz, amplitude); `frequencyV2`'s `magnitudeAndPhase`
    (cpsd, bode) as rows of (frequency, magnitude, phase), its `complex` (nyquist) as rows of
    (frequency, real, imaginary); buckets with their amplitude statistics; a spectrogram as one row
    per time slice and frequency."""
    if kind == "frequencyDomainV2":
        shape, body = body["type"], body[body["type"]]
        columns = {"magnitudeAndPhase": ("magnitude", "phase"), "complex": ("real", "imaginary")}
        if shape in columns:
            names = columns[shape]
            fields = ("magnitudes", "phases") if shape == "magnitudeAndPhase" else names
            values = zip(body["frequencies"], *(body[f] for f in fields), strict=True)
            return [
                {"frequency": _double(f), names[0]: _double(a), names[1]: _double(b)} for f, a, b in values
            ]
    if kind in ("frequencyDomain", "frequencyDomainV2"):
        pairs = zip(body["frequencies"], body["amplitudes"], strict=True)
        return [{"frequency": _double(f), "amplitude": _double(a)} for f, a in pairs]
    if kind == "bucketedFrequencyDomain":
        return [
            {
                "frequency_start": _double(b["frequencyStart"]),
                "frequency_end": _double(b["frequencyEnd"]),
                **{k: _double(b[f"{k}Amplitude"]) for k in ("min", "max", "mean")},
                "count": b["count"],
            }
            for b in body["buckets"]
        ]
    centers = [_double(c) for c in body["frequencyCenters"]]
    return [
        {"start": ns_of(row["start"]), "end": ns_of(row["end"]), "frequency": f, "value": _double(v)}
        for row in body["rows"]
        for f, v in zip(centers, row["values"], strict=True)
    ]


def _curve_fit_row(body: Json) -> Json:
    """A `CurveFitResult` / `CurveFitResultV2` as one row: the curve's name, the fit's errors, its
    sample count and the curve's details (`coefficients` a_0 ... a_n of a polynomial; `a`, `b` of an
    exponential, logarithmic or power curve; `parameters`, `converged`, `iterations` of a custom one)."""
    details = body["curveResultDetails"]
    curve = details["type"]
    fitted = details[curve]
    row: Json = {
        "curve": curve,
        **{k: _double(body[k]) for k in ("r2", "mae", "mse", "rmse", "maxAbsoluteError")},
        "sampleCount": int(body["sampleCount"]),
    }
    if curve == "polynomial":
        row["coefficients"] = [_double(a) for a in fitted["a"]]
    elif curve == "custom":
        row["parameters"] = {k: _double(v) for k, v in fitted["parameters"].items()}
        row["converged"] = bool(fitted["converged"])
        row["iterations"] = int(fitted["iterations"])
    else:
        row["a"], row["b"] = _double(fitted["a"]), _double(fitted["b"])
    return row


def _chart_rows(kind: str, body: Json) -> list[Json]:
    """A chart as rows: histogram buckets with each input's count, scatter pairs, scatter buckets."""
    if kind == "numericHistogram":
        return [
            {
                "lower": _double(b["lowerBound"]),
                "upper": _double(b["upperBound"]),
                "counts": _counts(b["countsByChannel"]),
            }
            for b in body["buckets"]
        ]
    if kind == "enumHistogram":
        return [{"value": b["value"], "counts": _counts(b["countsByChannel"])} for b in body["buckets"]]
    if kind == "cartesian":
        columns = zip(body["timestamps"], body["xValues"], body["yValues"], strict=True)
        return [{"timestamp": ns_of(t), "x": _double(x), "y": _double(y)} for t, x, y in columns]
    if kind == "bucketedCartesian3d":
        return [
            {
                "mean": tuple(_double(b[k]) for k in ("meanX", "meanY", "meanZ")),
                **{
                    name: (
                        _double(b[key]["x"]),
                        _double(b[key]["y"]),
                        _double(b[key]["z"]),
                        ns_of(b[key]["timestamp"]),
                    )
                    for name, key in (
                        ("min_x", "minXPoint"),
                        ("max_x", "maxXPoint"),
                        ("min_y", "minYPoint"),
                        ("max_y", "maxYPoint"),
                        ("min_z", "minZPoint"),
                        ("max_z", "maxZPoint"),
                    )
                },
                "first": ns_of(b["minTimestamp"]),
                "last": ns_of(b["maxTimestamp"]),
                "count": int(b["count"]),
            }
            for b in body["buckets"]
        ]
    return [
        {
            "min_x": _double(b["minX"]),
            "max_x": _double(b["maxX"]),
            "min_y": _double(b["minY"]),
            "max_y": _double(b["maxY"]),
            "first": ns_of(b["minTimestamp"]),
            "last": ns_of(b["maxTimestamp"]),
            "count": int(b["count"]),
        }
        for b in body["buckets"]
    ]


def _value(kind: str, body: Json | None) -> tuple[int, Any] | None:
    if body is None:
        return None
    value = body["value"]
    if kind == "singlePoint":  # a Value union: float64Value or stringValue
        value = _double(value["float64Value"]) if value["type"] == "float64Value" else value[value["type"]]
    elif kind == "numericPoint":
        value = _double(value)
    return ns_of(body["timestamp"]), value


@dataclass
class ResultView:
    """One result (one group of a grouped result) as currently merged."""

    kind: str | None = None
    points: list[tuple[int, Any]] = field(default_factory=list)  # (timestamp, value) in time order
    entries: dict[int, Any] = field(default_factory=dict)  # buckets by their end timestamp
    ranges: list[Range] = field(default_factory=list)
    value: tuple[int, Any] | None = None  # numericPoint / enumPoint / singlePoint
    chart: list[Json] = field(default_factory=list)  # a chart's or spectrum's rows, or a fit's one row

    def replace(self, kind: str, body: Any) -> None:
        """A FullResult: the whole window."""
        self.kind, self.points, self.entries, self.ranges, self.value, self.chart = kind, [], {}, [], None, []
        if kind in _POINT_KINDS:
            self.points = _points(kind, body)
        elif kind in _BUCKET_KINDS:
            self.entries = _entries(kind, body)
        elif kind == "range":
            self.ranges = _ranges(body)
        elif kind in _VALUE_KINDS:
            self.value = _value(kind, body)
        elif kind == "rangeValue":  # SelectValue firstRange / lastRange / nthRange: one range
            self.ranges = _ranges([body]) if body else []
        elif kind == "rangesSummary":
            self.ranges = [_ranges([s["range"]])[0] for s in body["rangesSummary"]]
        elif kind in _CHART_KINDS:
            self.chart = _chart_rows(kind, body)
        elif kind in _SPECTRUM_KINDS:
            self.chart = _spectrum_rows(kind, body)
        elif kind in _CURVE_FIT_KINDS:
            self.chart = [_curve_fit_row(body)]
        else:
            raise ValueError(f"unsupported result type {kind!r}")

    def merge(self, kind: str, body: Any, start: int, end: int) -> None:
        """An AppendResult covering [start, end]."""
        if self.kind is None:  # append-only subscriptions start with an append
            self.kind = kind
        elif kind != self.kind:
            raise ValueError(f"an append of {kind} onto {self.kind}")
        if kind in _POINT_KINDS:
            kept = [p for p in self.points if not start <= p[0] <= end]
            self.points = sorted(kept + _points(kind, body), key=lambda p: p[0])  # (stable)
        elif kind in _BUCKET_KINDS:
            merged = dict(self.entries)
            merged.update(_entries(kind, body))
            self.entries = dict(sorted(merged.items()))
        elif kind == "range":
            self.ranges = _merge_ranges(self.ranges, _ranges(body), start)
        elif kind in _VALUE_KINDS:
            newest = _value(kind, body)
            if newest is not None:
                self.value = newest
        elif kind == "rangeValue":
            self.ranges = _ranges([body]) if body else self.ranges
        else:
            raise ValueError(f"unsupported append type {kind!r}")

    def trim(self, cutoff: int) -> None:
        """Drop what lies wholly before the window's start."""
        if self.kind in _POINT_KINDS:
            self.points = [p for p in self.points if p[0] >= cutoff]
        elif self.kind in _BUCKET_KINDS:  # a bucket's timestamp is its exclusive end
            self.entries = {t: v for t, v in self.entries.items() if t > cutoff}
        self.ranges = [r for r in self.ranges if r.end is None or r.end > cutoff]
        if self.value is not None and self.value[0] < cutoff:
            self.value = None

    def copy(self) -> ResultView:
        return ResultView(
            self.kind, list(self.points), dict(self.entries), list(self.ranges), self.value, list(self.chart)
        )

    def rows(self) -> list[Json]:
        if self.kind in ("numeric", "enum", "arrowNumeric"):
            return [{"timestamp": t, "value": v} for t, v in self.points]
        if self.kind == "arrowBucketedNumeric":  # the columns the request named
            return [
                {"timestamp": t, **{k: v for k, v in b.items() if k not in ("first", "last")}}
                for t, b in self.entries.items()
            ]
        if self.kind == "bucketedNumeric":
            return [
                {"timestamp": t, **{k: b[k] for k in ("min", "max", "mean", "count", "variance")}}
                for t, b in self.entries.items()
            ]
        if self.kind == "multivariate":
            return [{"timestamp": t, "values": values} for t, values in self.entries.items()]
        if self.kind == "bucketedEnum":
            return [
                {"timestamp": t, "histogram": b["histogram"], "first": b["first"][1] if b["first"] else None}
                for t, b in self.entries.items()
            ]
        if self.kind in ("range", "rangesSummary", "rangeValue"):
            return [
                {"start": r.start, "end": r.end, **({"value": r.value} if r.valued else {})}
                for r in self.ranges
            ]
        if self.kind in _VALUE_KINDS and self.value is not None:
            return [{"timestamp": self.value[0], "value": self.value[1]}]
        if self.kind in _CHART_KINDS or self.kind in _SPECTRUM_KINDS or self.kind in _CURVE_FIT_KINDS:
            return list(self.chart)
        return []


def _merge_ranges(old: list[Range], new: list[Range], start: int) -> list[Range]:
    kept: list[Range] = []
    for r in old:
        if r.start is not None and r.start >= start:
            continue  # replaced by what the append says about [start, end]
        if r.end is None or r.end > start:
            r = Range(r.start, start)  # cut where the append takes over
        kept.append(r)
    for r in new:
        last = kept[-1] if kept else None
        touches = last is not None and last.end is not None and r.start is not None and last.end >= r.start
        if last is not None and touches and not r.valued:  # a valued range replaces, never joins
            end = None if r.end is None else max(r.end, last.end or r.end)
            kept[-1] = Range(last.start, end)
        else:
            kept.append(r)
    return kept


def group_key(grouping: Json) -> GroupKey:
    return tuple(sorted(grouping.get("tagsWithValues", {}).items()))


@dataclass
class View:
    """A subscription's whole result: one ResultView, or one per tag group when grouped."""

    window_ns: int
    grouped: bool = False
    groups: dict[GroupKey, ResultView] = field(default_factory=dict)
    end: int = 0  # the newest AppendResult end; never goes backwards
    updates: int = 0  # how many updates have been applied

    # -- applying updates ------------------------------------------------------------------------
    def apply_full(self, result: Json) -> None:
        self.updates += 1
        kind = result["type"]
        self.grouped = kind == "grouped"
        self.groups = {}
        for key, inner_kind, body in _parts(result):
            view = ResultView()
            view.replace(inner_kind, body)
            self.groups[key] = view

    def apply_append(self, start: int, end: int, result: Json) -> None:
        self.updates += 1
        self.end = max(self.end, end)
        self.grouped = self.grouped or result["type"] == "grouped"
        for key, inner_kind, body in _parts(result):
            self.groups.setdefault(key, ResultView()).merge(inner_kind, body, start, end)
        cutoff = self.end - self.window_ns
        for view in self.groups.values():
            view.trim(cutoff)

    def apply(self, update: Json) -> None:
        """Apply one `SubscriptionUpdate` (`full` or `append`)."""
        if update["type"] == "full":
            self.apply_full(update["full"]["result"])
        elif update["type"] == "append":
            append = update["append"]
            self.apply_append(ns_of(append["start"]), ns_of(append["end"]), append["result"])
        else:
            raise ValueError(f"not a result update: {update['type']}")

    def snapshot(self) -> View:
        groups = {k: v.copy() for k, v in self.groups.items()}
        return View(self.window_ns, self.grouped, groups, self.end, self.updates)

    # -- reading ---------------------------------------------------------------------------------
    @property
    def kind(self) -> str | None:
        kinds = {v.kind for v in self.groups.values()}
        return kinds.pop() if len(kinds) == 1 else None

    @property
    def result(self) -> ResultView:
        """The result of an ungrouped subscription."""
        if self.grouped:
            raise ValueError("a grouped result: read .groups or .rows()")
        return self.groups.get((), ResultView())

    @property
    def timestamps(self) -> list[int]:
        """Ungrouped points or buckets: their timestamps in nanoseconds since the epoch (points that
        share a timestamp each give one)."""
        result = self.result
        return [t for t, _ in result.points] if result.kind in _POINT_KINDS else list(result.entries)

    @property
    def values(self) -> list[Any]:
        """Ungrouped points: their values (float or str); buckets: dicts of min/max/mean/..."""
        result = self.result
        return [v for _, v in result.points] if result.kind in _POINT_KINDS else list(result.entries.values())

    def rows(self) -> list[Json]:
        """Plain rows; a grouped result adds each grouping tag as a column."""
        out: list[Json] = []
        for key, view in sorted(self.groups.items()):
            out.extend({**dict(key), **row} for row in view.rows())
        return out

    def to_pandas(self) -> pd.DataFrame:
        """A DataFrame of rows(); timestamps (and range bounds) as UTC datetimes. Needs pandas:
        `pip install "sparkwire-client[pandas]"`."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                'View.to_pandas() needs pandas: pip install "sparkwire-client[pandas]"'
            ) from exc
        frame = pd.DataFrame(self.rows())
        for column in ("timestamp", "start", "end"):
            if column in frame:
                frame[column] = pd.to_datetime(frame[column], unit="ns", utc=True)
        return frame

    def __iter__(self) -> Iterator[Json]:
        return iter(self.rows())


def _parts(result: Json) -> list[tuple[GroupKey, str, Any]]:
    kind = result["type"]
    if kind != "grouped":
        return [((), kind, result.get(kind))]
    return [
        (group_key(g["grouping"]), g["response"]["type"], g["response"].get(g["response"]["type"]))
        for g in result["grouped"]["responses"]
    ]
