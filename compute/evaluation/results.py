"""What a computation outputs, as numpy columns, and how two outputs differ (the append's start).

Each output knows the earliest timestamp from which it differs from an older output of the same kind,
and how to cut the part from a timestamp on: that is all an AppendResult needs. `kind` is the wire
variant; an output whose `appendable` is false (a rangesSummary) is always sent as a FullResult.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from compute.evaluation.curve_fit_results import CurveFitOutput
from compute.evaluation.spectra import (
    FrequencyBuckets,
    FrequencyComplex,
    FrequencyMagnitudePhase,
    FrequencyPlot,
    SpectrogramGrid,
)

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min
OPEN_END = INT64_MAX  # a range still true at the newest point: no `end` on the wire
NO_START = INT64_MIN  # a range that began before anything the computation holds (e.g. `not`)


def same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a and b are the very same elements in memory, so equal without reading them.

    Sound because no array is written once handed out (windows append past what they gave and
    reshuffle into new arrays, compute/evaluation/window.py; nodes build new arrays), and an array
    still referenced keeps its buffer, so an equal address is the same buffer. A window's view and
    the same view a micro-batch later usually are: comparing them was O(window) per evaluation."""
    return (
        a.base is not None  # fresh arrays (most node outputs) never are: skip the address lookup
        and a.base is b.base
        and len(a) == len(b)
        and a.dtype == b.dtype
        and a.strides == b.strides
        # the same first element: every view here is a slice of an array of its own item size, so
        # first elements that overlap are one element (np.shares_memory on one item each costs
        # ~0.5 us, reading `__array_interface__` twice ~2.6 us, called a few times per evaluation)
        and (not len(a) or bool(np.shares_memory(a[:1], b[:1])))
    )


def _extends(ts: np.ndarray, column: np.ndarray, old_ts: np.ndarray, old_column: np.ndarray) -> bool:
    """Whether the old points are the start of these in memory (a window or a held output appended
    in place): then only points past them can differ, told in O(1)."""
    n = len(old_ts)
    return n <= len(ts) and same_memory(ts[:n], old_ts) and same_memory(column[:n], old_column)


def _first_appended(ts: np.ndarray, old_ts: np.ndarray) -> int | None:
    """The first point appended past `old_ts` (when `_extends`), None when there is none."""
    return None if len(old_ts) == len(ts) else int(ts[len(old_ts)])


def _first_diff(a: np.ndarray, b: np.ndarray) -> int | None:
    """Index of the first position where a and b differ, None if identical. Doubles compare by
    their bits (one pass, no temporaries for NaN): a NaN equals the same NaN, and 0.0 against -0.0
    counts as a change (its JSON differs); a spurious change only costs a redundant append."""
    n = min(len(a), len(b))
    if n and not same_memory(a[:n], b[:n]):
        if a.dtype == np.float64 and b.dtype == np.float64:
            neq = a[:n].view(np.int64) != b[:n].view(np.int64)
        else:
            neq = a[:n] != b[:n]
        k = int(neq.argmax())
        if neq[k]:
            return k
    return None if len(a) == len(b) else n


def _first_diff_columns(a: np.ndarray, b: np.ndarray) -> int | None:
    """`_first_diff` of two matrices of int64 (a row per column): the first column index (a bucket)
    where any row differs, in one comparison."""
    n = min(a.shape[1], b.shape[1])
    if n:
        neq = (a[:, :n] != b[:, :n]).any(axis=0)
        k = int(neq.argmax())
        if neq[k]:
            return k
    return None if a.shape[1] == b.shape[1] else n


@dataclass
class NumericPoints:
    ts: np.ndarray  # int64 ns, ascending
    values: np.ndarray  # float64
    kind = "numeric"
    appendable = True

    def first_change(self, old: NumericPoints, since: int | None = None) -> int | None:
        """The earliest time from which these points differ from `old`. With `since`: of the points
        from it on, exactly `self.since(since).first_change(old.since(since))` without building the
        two cuts (a live computation's diff, every micro-batch)."""
        ts, values, old_ts, old_values = self.ts, self.values, old.ts, old.values
        if since is not None:
            at, old_at = ts.searchsorted(since, side="left"), old_ts.searchsorted(since, side="left")
            ts, values, old_ts, old_values = ts[at:], values[at:], old_ts[old_at:], old_values[old_at:]
        if _extends(ts, values, old_ts, old_values):
            return _first_appended(ts, old_ts)
        i = _first_diff(ts, old_ts)
        j = _first_diff(values, old_values)
        k = min(x for x in (i, j, INT64_MAX) if x is not None)
        if k == INT64_MAX:
            return None
        # A point that vanished (trimmed) is not a change; the client trims too.
        candidates = [t[k] for t in (ts, old_ts) if k < len(t)]
        return int(min(candidates))

    def since(self, start: int) -> NumericPoints:
        i = int(self.ts.searchsorted(start, side="left"))
        return NumericPoints(self.ts[i:], self.values[i:])

    def __len__(self) -> int:
        return len(self.ts)


@dataclass(frozen=True)
class KnownSame:
    """Rows an output took unchanged from an earlier one (the bucket memo's reused buckets): every
    bucket whose end is in [first_end, last_end] is bit-identical in both, and both hold the same
    ends there, so a diff skips them without reading them. `of` is the earlier output's `lineage`."""

    of: object
    first_end: int
    last_end: int


# Fields that describe where an output's rows came from, not what it holds: never on the wire, never
# in a delta (compute/evaluation/deltas.py), never compared.
PROVENANCE = {"provenance": True}


@dataclass
class NumericBuckets:
    width: int  # ns
    end: np.ndarray  # int64 exclusive bucket end, ascending
    min: np.ndarray
    max: np.ndarray
    mean: np.ndarray
    count: np.ndarray  # int64
    variance: np.ndarray
    first_ts: np.ndarray
    first_value: np.ndarray
    last_ts: np.ndarray
    last_value: np.ndarray
    # SummarizeSeries.numericAggregations: one column per requested name (a percentile, a sum, ...)
    aggregations: dict[str, np.ndarray] = field(default_factory=dict, kw_only=True)
    # Where the rows came from, set by the bucket memo (compute/evaluation/summarize.py): `stacked` is
    # every column above as one int64 matrix, a row per column in constructor order (the columns are
    # views of its rows, doubles by their bits), so a diff reads all of them in one numpy call;
    # `lineage` an identity kept by every cut (`since`); `known_same` the rows taken unchanged from
    # an earlier output, which a diff does not read.
    stacked: np.ndarray | None = field(
        default=None, kw_only=True, compare=False, repr=False, metadata=PROVENANCE
    )
    lineage: object = field(default=None, kw_only=True, compare=False, repr=False, metadata=PROVENANCE)
    known_same: KnownSame | None = field(
        default=None, kw_only=True, compare=False, repr=False, metadata=PROVENANCE
    )
    kind = "bucketedNumeric"
    appendable = True

    def _columns(self) -> tuple[np.ndarray, ...]:
        return (
            self.end,
            self.min,
            self.max,
            self.mean,
            self.count,
            self.variance,
            self.first_ts,
            self.last_ts,
            self.first_value,
            self.last_value,
            *(self.aggregations[k] for k in sorted(self.aggregations)),
        )

    def first_change(self, old: NumericBuckets, since: int | None = None) -> int | None:
        """The earliest time from which these buckets differ from `old`. With `since`: of the
        buckets ending after it, exactly `self.since(since).first_change(old.since(since))` without
        building the two cuts (a live computation's diff, every micro-batch)."""
        i = 0 if since is None else int(self.end.searchsorted(since, side="right"))
        j = 0 if since is None else int(old.end.searchsorted(since, side="right"))
        if old.width != self.width:
            return int(self.end[i] - self.width) if i < len(self.end) else 0
        if self.stacked is not None and old.stacked is not None:
            k = self._first_diff_stacked(old, i, j)
            if self.aggregations or old.aggregations:  # not in the matrix: read whole
                if self.aggregations.keys() != old.aggregations.keys():
                    k = 0
                else:
                    extra = (
                        _first_diff(v[i:], old.aggregations[n][j:]) for n, v in self.aggregations.items()
                    )
                    k = min((d for d in (k, *extra) if d is not None), default=None)
        else:
            ks = [
                d
                for d in (
                    _first_diff(a[i:], b[j:]) for a, b in zip(self._columns(), old._columns(), strict=True)
                )
                if d is not None
            ]
            k = min(ks, default=None)
        if k is None:
            return None
        ends = [e[k] for e in (self.end[i:], old.end[j:]) if k < len(e)]
        return int(min(ends)) - self.width

    def _first_diff_stacked(self, old: NumericBuckets, i: int, j: int) -> int | None:
        """The first bucket from `i` (in `old`: from `j`) that differs in any column, counted from
        there, reading only the buckets outside those `known_same` says are unchanged since `old`
        (all of them when it says nothing of `old`)."""
        assert self.stacked is not None and old.stacked is not None
        rows, old_rows = self.stacked[:, i:], old.stacked[:, j:]
        known = self.known_same
        if known is not None and old.lineage is not None and known.of is old.lineage:
            # where the known span lies in the cut parts (a sorted array's suffix: the full search less
            # the cut, at least 0)
            i0 = max(int(self.end.searchsorted(known.first_end, side="left")) - i, 0)
            i1 = max(int(self.end.searchsorted(known.last_end, side="right")) - i, 0)
            j0 = max(int(old.end.searchsorted(known.first_end, side="left")) - j, 0)
            j1 = max(int(old.end.searchsorted(known.last_end, side="right")) - j, 0)
            if i0 == j0 and i1 - i0 == j1 - j0:  # where the hint says: skip the known rows
                head = _first_diff_columns(rows[:, :i0], old_rows[:, :j0]) if i0 else None
                if head is not None:
                    return head
                tail = _first_diff_columns(rows[:, i1:], old_rows[:, j1:])
                return None if tail is None else i1 + tail
        return _first_diff_columns(rows, old_rows)

    def since(self, start: int) -> NumericBuckets:
        # every bucket whose span reaches `start` or later (its end is after start)
        i = int(self.end.searchsorted(start, side="right"))
        return NumericBuckets(
            self.width,
            *(
                c[i:]
                for c in (
                    self.end,
                    self.min,
                    self.max,
                    self.mean,
                    self.count,
                    self.variance,
                    self.first_ts,
                    self.first_value,
                    self.last_ts,
                    self.last_value,
                )
            ),
            stacked=None if self.stacked is None else self.stacked[:, i:],
            lineage=self.lineage,
            known_same=self.known_same,
            aggregations={k: v[i:] for k, v in self.aggregations.items()},
        )

    def __len__(self) -> int:
        return len(self.end)


@dataclass
class EnumPoints:
    ts: np.ndarray
    codes: np.ndarray  # int32 index into categories
    categories: list[str]
    kind = "enum"
    appendable = True

    def first_change(self, old: EnumPoints) -> int | None:
        if _extends(self.ts, self.codes, old.ts, old.codes):
            return _first_appended(self.ts, old.ts)
        i = _first_diff(self.ts, old.ts)
        j = _first_diff(self.codes, old.codes)
        ks = [k for k in (i, j) if k is not None]
        if not ks:
            return None
        k = min(ks)
        return int(min(t[k] for t in (self.ts, old.ts) if k < len(t)))

    def since(self, start: int) -> EnumPoints:
        i = int(self.ts.searchsorted(start, side="left"))
        return EnumPoints(self.ts[i:], self.codes[i:], self.categories)

    def __len__(self) -> int:
        return len(self.ts)


class LogPoints(EnumPoints):
    """A log channel's points (SeriesKind.LOG): coded as an enum channel's are, each category one
    log line's message and args as the compact JSON text the log stores (`log_text`). Only the log
    nodes read it (compute/evaluation/nodes/logs.py); a numeric or enum node refuses it by name."""

    kind = "log"

    def since(self, start: int) -> LogPoints:
        i = int(self.ts.searchsorted(start, side="left"))
        return LogPoints(self.ts[i:], self.codes[i:], self.categories)


class StoredTexts(EnumPoints):
    """An array or struct channel's points (decision 0104): coded as log lines are, each category one
    point's value as the JSON text `compute/storage/composite_points.py` stores. Only the nodes that
    read arrays and structs take them (compute/evaluation/nodes/composite.py); any other node refuses
    them by name (`channel` says what they are)."""

    channel = "stored text"

    def since(self, start: int) -> StoredTexts:
        i = int(self.ts.searchsorted(start, side="left"))
        return type(self)(self.ts[i:], self.codes[i:], self.categories)


class DoubleArrayPoints(StoredTexts):
    channel = "double array"


class StringArrayPoints(StoredTexts):
    channel = "string array"


class StructPoints(StoredTexts):
    channel = "struct"


@dataclass
class EnumBuckets:
    width: int
    end: np.ndarray
    histograms: list[dict[int, int]]
    first_ts: np.ndarray
    first_code: np.ndarray
    last_ts: np.ndarray
    last_code: np.ndarray
    count: np.ndarray
    categories: list[str]
    kind = "bucketedEnum"
    appendable = True

    def first_change(self, old: EnumBuckets) -> int | None:
        if old.width != self.width:
            return int(self.end[0] - self.width) if len(self.end) else 0
        cols = (self.end, self.first_ts, self.first_code, self.last_ts, self.last_code, self.count)
        old_cols = (old.end, old.first_ts, old.first_code, old.last_ts, old.last_code, old.count)
        ks = [k for k in (_first_diff(a, b) for a, b in zip(cols, old_cols, strict=True)) if k is not None]
        n = min(len(self.histograms), len(old.histograms))
        hk = next((i for i in range(n) if self.histograms[i] != old.histograms[i]), None)
        if hk is not None:
            ks.append(hk)
        if not ks:
            return None
        k = min(ks)
        return int(min(e[k] for e in (self.end, old.end) if k < len(e))) - self.width

    def since(self, start: int) -> EnumBuckets:
        i = int(self.end.searchsorted(start, side="right"))
        return EnumBuckets(
            self.width,
            self.end[i:],
            self.histograms[i:],
            self.first_ts[i:],
            self.first_code[i:],
            self.last_ts[i:],
            self.last_code[i:],
            self.count[i:],
            self.categories,
        )

    def __len__(self) -> int:
        return len(self.end)


@dataclass
class Ranges:
    """Normalized ranges: sorted, neither overlapping nor adjacent; `end` is exclusive. A range
    with end == start is an instant (onChange, crossovers, peaks: nodes/range_events.py)."""

    starts: np.ndarray  # int64; NO_START when the range began before the held data
    ends: np.ndarray  # int64; OPEN_END when the range is still true at the newest point
    kind = "range"
    appendable = True

    @classmethod
    def empty(cls) -> Ranges:
        return cls(np.empty(0, np.int64), np.empty(0, np.int64))

    def first_change(self, old: Ranges) -> int | None:
        """The earliest instant covered by one and not the other (normalized ranges: the first
        differing start or end)."""
        n = min(len(self), len(old))
        neq = np.flatnonzero((self.starts[:n] != old.starts[:n]) | (self.ends[:n] != old.ends[:n]))
        if len(neq):
            k = int(neq[0])
            if self.starts[k] != old.starts[k]:
                return int(min(self.starts[k], old.starts[k]))
            return int(min(self.ends[k], old.ends[k]))
        if len(self) == len(old):
            return None
        longer = self if len(self) > len(old) else old
        return int(longer.starts[n])

    def since(self, start: int) -> Ranges:
        """Every range still covering `start` or later: a client truncates its ranges at `start`
        and merges these in (they may overlap what it kept)."""
        keep = (self.ends > start) | ((self.ends == self.starts) & (self.starts >= start))  # instants too
        return Ranges(self.starts[keep], self.ends[keep])

    def clip(self, start: int) -> Ranges:
        """The part from `start` on: ranges ending before are dropped, one spanning it begins there."""
        if not len(self.starts) or self.starts[0] >= start:
            return self  # sorted: every range starts at or after `start` already (a clipped output)
        cut = self.since(start)
        return Ranges(np.maximum(cut.starts, start), cut.ends)

    def __len__(self) -> int:
        return len(self.starts)


# The columns of a RangeAggregation (Nominal's `all`), by RangeAggregationOperation variant.
RANGE_AGGREGATES = ("count", "sum", "average", "min", "max", "standardDeviation", "rootMeanSquare")


@dataclass
class AggregatedRanges:
    """`rangeNumericAggregation` at a `ranges` root: normalized ranges (clipped at the window's start)
    each with the aggregates of its input's points, one column per RANGE_AGGREGATES entry; a range
    without points has count 0 (Nominal's `noPointsInRange`). `operation` is which to send: one of
    RANGE_AGGREGATES, or `all` (a RangeAggregation). A range's value changes as points arrive in
    it, so a change is announced from that range's start: an append carries the whole range, which
    replaces the client's."""

    starts: np.ndarray
    ends: np.ndarray
    count: np.ndarray  # int64
    sum: np.ndarray
    average: np.ndarray
    min: np.ndarray
    max: np.ndarray
    standardDeviation: np.ndarray
    rootMeanSquare: np.ndarray
    operation: str
    kind = "range"
    appendable = True

    def columns(self) -> tuple[np.ndarray, ...]:
        return (self.starts, self.ends, *(getattr(self, name) for name in RANGE_AGGREGATES))

    def first_change(self, old: AggregatedRanges) -> int | None:
        k = min(
            (
                d
                for a, b in zip(self.columns(), old.columns(), strict=True)
                if (d := _first_diff(a, b)) is not None
            ),
            default=None,
        )
        if k is None:
            return None
        return int(min(r.starts[k] for r in (self, old) if k < len(r)))

    def since(self, start: int) -> AggregatedRanges:
        """Every range still covering `start` or later (a change starts at a range's start)."""
        keep = (self.ends > start) | ((self.ends == self.starts) & (self.starts >= start))
        rows = {name: getattr(self, name)[keep] for name in ("starts", "ends", *RANGE_AGGREGATES)}
        return dataclasses.replace(self, **rows)

    def __len__(self) -> int:
        return len(self.starts)


@dataclass
class RangesSummary:
    """Too many ranges for one response: per time bucket, the span of the ranges starting in it and
    their count. Not appendable: every change is a FullResult."""

    starts: np.ndarray
    ends: np.ndarray  # OPEN_END when a summarized range is open
    counts: np.ndarray
    kind = "rangesSummary"
    appendable = False

    def first_change(self, old: RangesSummary) -> int | None:
        same = (
            len(self.starts) == len(old.starts)
            and bool(np.all(self.starts == old.starts))
            and bool(np.all(self.ends == old.ends))
            and bool(np.all(self.counts == old.counts))
        )
        if same:
            return None
        firsts = [int(x[0]) for x in (self.starts, old.starts) if len(x)]
        return min(firsts, default=0)

    def since(self, start: int) -> RangesSummary:
        return self

    def __len__(self) -> int:
        return len(self.starts)


@dataclass
class NumericValue:
    """`value` (SelectValue firstPoint / lastPoint) over a numeric series: one point."""

    ts: int
    value: float
    kind = "numericPoint"
    appendable = True

    def first_change(self, old: NumericValue) -> int | None:
        same_value = self.value == old.value or (np.isnan(self.value) and np.isnan(old.value))
        if self.ts == old.ts and same_value:
            return None
        return min(self.ts, old.ts)

    def since(self, start: int) -> NumericValue:
        return self  # an append carries the point itself; the client replaces its own

    def __len__(self) -> int:
        return 1


@dataclass
class EnumValue:
    """`value` over an enum series: one point, its category by code."""

    ts: int
    code: int
    categories: list[str]
    kind = "enumPoint"
    appendable = True

    def first_change(self, old: EnumValue) -> int | None:
        if self.ts == old.ts and self.code == old.code:
            return None
        return min(self.ts, old.ts)

    def since(self, start: int) -> EnumValue:
        return self

    def __len__(self) -> int:
        return 1


@dataclass
class SinglePoint:
    """`value` (SelectValue firstValuePoint / lastValuePoint): one point as Nominal's SinglePoint,
    whose value is a `Value` union: a number of a numeric series, the label of an enum one."""

    ts: int
    value: float | str
    kind = "singlePoint"
    appendable = True

    def first_change(self, old: SinglePoint) -> int | None:
        same = self.value == old.value or (
            isinstance(self.value, float)
            and isinstance(old.value, float)
            and np.isnan(self.value)
            and np.isnan(old.value)
        )
        if self.ts == old.ts and same and type(self.value) is type(old.value):
            return None
        return min(self.ts, old.ts)

    def since(self, start: int) -> SinglePoint:
        return self  # an append carries the point itself; the client replaces its own

    def __len__(self) -> int:
        return 1


@dataclass
class RangeValue:
    """`value` (SelectValue firstRange / lastRange / nthRange): one range, with Ranges' conventions
    (NO_START: began before the held data; OPEN_END: still open)."""

    start: int
    end: int
    kind = "rangeValue"
    appendable = True

    def first_change(self, old: RangeValue) -> int | None:
        if self.start == old.start and self.end == old.end:
            return None
        return min(self.start, old.start)

    def since(self, start: int) -> RangeValue:
        return self  # an append carries the range itself; the client replaces its own

    def __len__(self) -> int:
        return 1


def _same_columns(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> bool:
    """Whether two outputs' columns are equal, element for element (doubles by their bits)."""
    return all(len(x) == len(y) and _first_diff(x, y) is None for x, y in zip(a, b, strict=True))


@dataclass
class NumericHistogram:
    """`numericHistogram` (the `histogram` chart over numeric inputs): value buckets [lower, upper)
    and, per bucket, each input's count, row-major (bucket, then input in `channels` order). It has
    no append form (nominal-api's ComputeNodeAppendResponse lists none): every change is a FullResult."""

    lower: np.ndarray  # float64
    upper: np.ndarray  # float64
    counts: np.ndarray  # int64, len(lower) * len(channels)
    channels: list[str]  # the inputs' variable names
    kind = "numericHistogram"
    appendable = False

    def first_change(self, old: NumericHistogram) -> int | None:
        same = self.channels == old.channels and _same_columns(
            (self.lower, self.upper, self.counts), (old.lower, old.upper, old.counts)
        )
        return None if same else 0  # whole: the computation clamps it to the window's start

    def since(self, start: int) -> NumericHistogram:
        return self

    def __len__(self) -> int:
        return len(self.lower)


@dataclass
class EnumHistogram:
    """`enumHistogram`: per label (ascending by code point), each input's count, row-major. No
    append form, like NumericHistogram."""

    labels: list[str]
    counts: np.ndarray  # int64, len(labels) * len(channels)
    channels: list[str]
    kind = "enumHistogram"
    appendable = False

    def first_change(self, old: EnumHistogram) -> int | None:
        same = (
            self.channels == old.channels
            and self.labels == old.labels
            and _same_columns((self.counts,), (old.counts,))
        )
        return None if same else 0

    def since(self, start: int) -> EnumHistogram:
        return self

    def __len__(self) -> int:
        return len(self.labels)


@dataclass
class CartesianPoints:
    """`cartesian` (a scatter's pairs, or its time buckets' aggregates): no append form."""

    ts: np.ndarray  # int64
    x: np.ndarray  # float64
    y: np.ndarray  # float64
    kind = "cartesian"
    appendable = False

    def first_change(self, old: CartesianPoints) -> int | None:
        same = _same_columns((self.ts, self.x, self.y), (old.ts, old.x, old.y))
        return None if same else 0

    def since(self, start: int) -> CartesianPoints:
        return self

    def __len__(self) -> int:
        return len(self.ts)


@dataclass
class CartesianBuckets:
    """`bucketedCartesian` (a scatter of more than `maxPoints` pairs, decimated spatially): per
    bucket the extent of its points, their first and last timestamps and their count. No append form."""

    min_x: np.ndarray
    max_x: np.ndarray
    min_y: np.ndarray
    max_y: np.ndarray
    min_ts: np.ndarray  # int64
    max_ts: np.ndarray  # int64
    count: np.ndarray  # int64
    kind = "bucketedCartesian"
    appendable = False

    def _columns(self) -> tuple[np.ndarray, ...]:
        return (self.min_x, self.max_x, self.min_y, self.max_y, self.min_ts, self.max_ts, self.count)

    def first_change(self, old: CartesianBuckets) -> int | None:
        return None if _same_columns(self._columns(), old._columns()) else 0

    def since(self, start: int) -> CartesianBuckets:
        return self

    def __len__(self) -> int:
        return len(self.count)


@dataclass
class Cartesian3dBuckets:
    """`bucketedCartesian3d` (a 3D scatter, always bucketed: nominal-api has no raw 3D result): per
    bucket its points' mean per axis, the points holding each axis' minimum and maximum (x, y, z and
    timestamp: min x, max x, min y, max y, min z, max z), their first and last timestamps and count.
    Flat columns, row-major (bucket, then axis or extreme). No append form."""

    mean: np.ndarray  # float64, buckets * 3
    extremes: np.ndarray  # float64, buckets * 6 * 3
    extreme_ts: np.ndarray  # int64, buckets * 6
    min_ts: np.ndarray  # int64
    max_ts: np.ndarray  # int64
    count: np.ndarray  # int64
    kind = "bucketedCartesian3d"
    appendable = False

    def _columns(self) -> tuple[np.ndarray, ...]:
        return (self.mean, self.extremes, self.extreme_ts, self.min_ts, self.max_ts, self.count)

    def first_change(self, old: Cartesian3dBuckets) -> int | None:
        return None if _same_columns(self._columns(), old._columns()) else 0

    def since(self, start: int) -> Cartesian3dBuckets:
        return self

    def __len__(self) -> int:
        return len(self.count)


@dataclass
class MultivariateBuckets:
    """`multivariate`: per epoch-aligned time bucket (stamped at its exclusive end), the aggregates
    of the driver-aligned tuples in it, one value per (input, aggregation) in request order:
    `layout` says which are numbers ("n", in `numbers`) and which labels ("e", in `labels`), both
    row-major (bucket, then column). Appendable: a bucket replaces the one with the same end."""

    width: int  # ns
    end: np.ndarray  # int64, ascending
    numbers: np.ndarray  # float64, buckets * layout.count("n")
    labels: list[str]  # buckets * layout.count("e")
    layout: str
    group_keys: list[str]
    kind = "multivariate"
    appendable = True

    def _row(self, i: int) -> tuple[int, np.ndarray, list[str]]:
        n, e = self.layout.count("n"), self.layout.count("e")
        return int(self.end[i]), self.numbers[i * n : (i + 1) * n], self.labels[i * e : (i + 1) * e]

    def first_change(self, old: MultivariateBuckets) -> int | None:
        if old.width != self.width or old.layout != self.layout:
            return int(self.end[0] - self.width) if len(self.end) else 0
        for i in range(min(len(self), len(old))):
            (end, numbers, labels), (old_end, old_numbers, old_labels) = self._row(i), old._row(i)
            differ = end != old_end or labels != old_labels or _first_diff(numbers, old_numbers) is not None
            if differ:
                return min(end, old_end) - self.width
        if len(self) == len(old):
            return None
        longer = self if len(self) > len(old) else old
        return int(longer.end[min(len(self), len(old))]) - self.width

    def since(self, start: int) -> MultivariateBuckets:
        """Every bucket whose span reaches `start` or later (its end is after it)."""
        i = int(np.searchsorted(self.end, start, side="right"))
        n, e = self.layout.count("n"), self.layout.count("e")
        return MultivariateBuckets(
            self.width,
            self.end[i:],
            self.numbers[i * n :],
            self.labels[i * e :],
            self.layout,
            self.group_keys,
        )

    def __len__(self) -> int:
        return len(self.end)


Output = (
    NumericPoints
    | NumericBuckets
    | EnumPoints
    | EnumBuckets
    | Ranges
    | AggregatedRanges
    | RangesSummary
    | NumericValue
    | EnumValue
    | SinglePoint
    | RangeValue
    | NumericHistogram
    | EnumHistogram
    | CartesianPoints
    | CartesianBuckets
    | Cartesian3dBuckets
    | MultivariateBuckets
    | CurveFitOutput
    | FrequencyPlot
    | FrequencyBuckets
    | SpectrogramGrid
    | FrequencyMagnitudePhase
    | FrequencyComplex
)
