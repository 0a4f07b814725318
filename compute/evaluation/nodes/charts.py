"""The chart roots (`ComputableNode` `histogram`, `cartesian`, `cartesian3d`, `multivariate`): what
sits beside a time chart, a distribution of values, an X-Y (or X-Y-Z) scatter, several series
bucketed together, per group, over the points inside the window.

Their inputs are held per group from the window's start on, as every root holds its input
(`HeldSeries`): a live micro-batch re-evaluates each input only from where its new points can change
it (the node contract, nodes/base.py). The chart itself is then recomputed over the held window in
numpy (a histogram's buckets move with the window's minimum and maximum, a spatial decimation with
its extent). nominal-api gives histograms and scatters no append form, so every change of theirs
is a FullResult; a multivariate result appends buckets (docs/decisions/0059-chart-types.md)."""

from __future__ import annotations

import heapq
import math
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.align import FFILL_RADIUS_NS, forward_fill
from compute.evaluation.nodes.base import (
    EvalEnv,
    GroupKey,
    Node,
    OutputNode,
    Reach,
    Series,
    SeriesNode,
    cut,
    enum,
    numeric,
)
from compute.evaluation.nodes.outputs import HeldSeries
from compute.evaluation.results import (
    Cartesian3dBuckets,
    CartesianBuckets,
    CartesianPoints,
    EnumHistogram,
    EnumPoints,
    MultivariateBuckets,
    NumericHistogram,
    NumericPoints,
    Output,
)

DEFAULT_HISTOGRAM_BUCKETS = 100  # `bucketStrategy` absent (nominal-api names no default)
DEFAULT_SCATTER_POINTS = 2000  # SummarizeCartesian.maxPoints' documented default
MAX_SCATTER_POINTS = 10_000  # ... and its documented maximum


@dataclass
class ChartInputs(Node):
    """The series a chart reads, side by side: the root's one `input`, so that the computation asks
    one node where a change reaches (the earliest of its inputs') and whether its head is stable."""

    inputs: list[SeriesNode]

    def children(self) -> Sequence[Node]:
        return self.inputs

    def reach(self) -> Reach:
        return Reach()  # each input is held on its own; a change reaches no further than its own

    def evaluate(self, env: EvalEnv) -> Series:
        raise AssertionError("a chart's root evaluates its inputs one by one")


class HeldInputs:
    """Per input, its series per group from the window's start on (`HeldSeries` each)."""

    def __init__(self, count: int) -> None:
        self._held = [HeldSeries() for _ in range(count)]

    def whole(
        self, inputs: Sequence[SeriesNode], envs: Mapping[GroupKey, EvalEnv]
    ) -> dict[GroupKey, list[Series]]:
        per_input = [held.whole(x, envs) for held, x in zip(self._held, inputs, strict=True)]
        return {k: [p[k] for p in per_input] for k in envs}

    def update(
        self, inputs: Sequence[SeriesNode], envs: Mapping[GroupKey, EvalEnv], since: Mapping[GroupKey, int]
    ) -> dict[GroupKey, list[Series]]:
        per_input = [held.update(x, envs, since) for held, x in zip(self._held, inputs, strict=True)]
        return {k: [p[k] for p in per_input] for k in envs}


class _Chart(OutputNode):
    """A root over several inputs, held per group; subclasses say which inputs (`chart_inputs`) and
    how one group's inputs chart (`chart`)."""

    bundle: ChartInputs
    held: HeldInputs

    def __post_init__(self) -> None:  # the subclasses are dataclasses: run after their __init__
        inputs = self.chart_inputs()
        self.bundle = ChartInputs(inputs)
        self.held = HeldInputs(len(inputs))

    @abstractmethod
    def chart_inputs(self) -> list[SeriesNode]: ...

    @property
    def input(self) -> Node:
        return self.bundle

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        return self.chart(self.held.whole(self.bundle.inputs, envs), envs)

    def update_groups(
        self, envs: Mapping[GroupKey, EvalEnv], since: Mapping[GroupKey, int]
    ) -> dict[GroupKey, Output]:
        return self.chart(self.held.update(self.bundle.inputs, envs, since), envs)

    @abstractmethod
    def chart(
        self, series: dict[GroupKey, list[Series]], envs: Mapping[GroupKey, EvalEnv]
    ) -> dict[GroupKey, Output]: ...


# -- histograms ------------------------------------------------------------------------------------
@dataclass
class NumericHistogramChart(_Chart):
    """`histogram.numeric`: per group, how many finite values of each input fall in each value
    bucket [lower, upper). `bucket_count` n: width (max - min) / n over every input's values, or
    (max - min) / (n - 1) when n buckets on multiples of the first would not reach the maximum;
    every bucket from the minimum's to the maximum's, empty ones too. `width` (and `offset`):
    buckets [k * width + offset, (k + 1) * width + offset), only those holding a value."""

    names: list[str]
    series: list[SeriesNode]
    bucket_count: int | None = None
    width: float | None = None
    offset: float = 0.0

    def chart_inputs(self) -> list[SeriesNode]:
        return list(self.series)

    def chart(
        self, series: dict[GroupKey, list[Series]], envs: Mapping[GroupKey, EvalEnv]
    ) -> dict[GroupKey, Output]:
        return {
            k: self.histogram([numeric(s, "histogram").values for s in group]) for k, group in series.items()
        }

    def histogram(self, values: list[np.ndarray]) -> NumericHistogram:
        finite = [v[np.isfinite(v)] for v in values]
        every = np.concatenate(finite) if finite else np.empty(0, np.float64)
        if not len(every):
            empty = np.empty(0, np.float64)
            return NumericHistogram(empty, empty, np.empty(0, np.int64), list(self.names))
        if self.bucket_count is not None:
            width, offset = count_width(float(every.min()), float(every.max()), self.bucket_count), 0.0
        else:
            assert self.width is not None
            width, offset = self.width, self.offset
        with np.errstate(all="ignore"):
            indices = [np.floor((v - offset) / width) for v in finite]
        every_index = np.concatenate(indices)
        if self.bucket_count is not None:  # every bucket from the minimum's to the maximum's
            low = every_index.min()
            keys = np.arange(low, every_index.max() + 1, dtype=np.float64)
            positions = [(index - low).astype(np.int64) for index in indices]
        else:  # the buckets holding a value
            keys, inverse = np.unique(every_index, return_inverse=True)
            positions = np.split(inverse.reshape(-1), np.cumsum([len(index) for index in indices])[:-1])
        counts = np.zeros((len(keys), len(finite)), np.int64)
        for j, position in enumerate(positions):
            counts[:, j] = np.bincount(position, minlength=len(keys))
        return NumericHistogram(
            keys * width + offset, (keys + 1) * width + offset, counts.ravel(), list(self.names)
        )


def count_width(lo: float, hi: float, n: int) -> float:
    """The bucket width for `bucketCount` n over values in [lo, hi] (docstring above); 1 when every
    value is the same (one bucket, [floor(v), floor(v) + 1))."""
    if hi == lo:
        return 1.0
    width = (hi - lo) / n
    if n > 1 and math.floor(hi / width) - math.floor(lo / width) + 1 > n:
        width = (hi - lo) / (n - 1)
    return width


@dataclass
class EnumHistogramChart(_Chart):
    """`histogram.enum`: per group, each input's count of every label in the window, the labels
    that occur ascending by code point."""

    names: list[str]
    series: list[SeriesNode]

    def chart_inputs(self) -> list[SeriesNode]:
        return list(self.series)

    def chart(
        self, series: dict[GroupKey, list[Series]], envs: Mapping[GroupKey, EvalEnv]
    ) -> dict[GroupKey, Output]:
        out: dict[GroupKey, Output] = {}
        for k, group in series.items():
            per_input: list[dict[str, int]] = []
            for s in group:
                points = enum(s, "histogram", envs[k].categories)
                counted: dict[str, int] = {}
                for code, count in enumerate(np.bincount(points.codes, minlength=0).tolist()):
                    if count:  # two codes may carry one label (a valueMap's own categories)
                        label = points.categories[code]
                        counted[label] = counted.get(label, 0) + count
                per_input.append(counted)
            labels = sorted({label for counted in per_input for label in counted})
            counts = np.array([[c.get(label, 0) for c in per_input] for label in labels], np.int64)
            out[k] = EnumHistogram(labels, counts.reshape(-1), list(self.names))
        return out


# -- scatter ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bounds:
    """`CartesianBounds`, inclusive."""

    min_x: float
    max_x: float
    min_y: float
    max_y: float


@dataclass
class ScatterChart(_Chart):
    """`cartesian.scatter`: the (x, y) pairs of two series aligned as arithmetic aligns them
    (forward fill, 1 s: `x` and `y` are the two components of one alignment), inside `bounds` if
    set, without a non-finite coordinate. At most `max_points` pairs in every group: `cartesian`;
    more in any group: `bucketedCartesian` by spatial decimation, or with `temporal` a `cartesian`
    of per-time-bucket aggregates."""

    x: SeriesNode
    y: SeriesNode
    window_ns: int
    max_points: int = DEFAULT_SCATTER_POINTS
    bounds: Bounds | None = None
    temporal: tuple[str, str] | None = None  # (xAggregation, yAggregation)

    def chart_inputs(self) -> list[SeriesNode]:
        return [self.x, self.y]

    def chart(
        self, series: dict[GroupKey, list[Series]], envs: Mapping[GroupKey, EvalEnv]
    ) -> dict[GroupKey, Output]:
        pairs = {
            k: self.pairs(numeric(x, "cartesian"), numeric(y, "cartesian")) for k, (x, y) in series.items()
        }
        if all(len(p) <= self.max_points for p in pairs.values()):
            return dict(pairs)
        if self.temporal is not None:
            width = max(MS, math.ceil(math.ceil(self.window_ns / self.max_points) / MS) * MS)
            return {k: temporal_buckets(p, width, *self.temporal) for k, p in pairs.items()}
        return {k: spatial_buckets(p, self.max_points, self.bounds) for k, p in pairs.items()}

    def pairs(self, x: NumericPoints, y: NumericPoints) -> CartesianPoints:
        assert len(x.ts) == len(y.ts), "x and y are components of one alignment"
        keep = np.isfinite(x.values) & np.isfinite(y.values)
        if self.bounds is not None:
            b = self.bounds
            keep &= (
                (x.values >= b.min_x) & (x.values <= b.max_x) & (y.values >= b.min_y) & (y.values <= b.max_y)
            )
        if keep.all():
            return CartesianPoints(x.ts, x.values, y.values)
        return CartesianPoints(x.ts[keep], x.values[keep], y.values[keep])


@dataclass
class Scatter3dChart(_Chart):
    """`cartesian3d.scatter3d`: the (x, y, z) triples of three series aligned as arithmetic aligns
    them (forward fill, 1 s), inside `bounds` (per axis, inclusive) if set, without a non-finite
    coordinate, always as `bucketedCartesian3d` by spatial decimation into octants (up to
    `max_points` buckets: a bucket per distinct point while they fit)."""

    x: SeriesNode
    y: SeriesNode
    z: SeriesNode
    max_points: int = DEFAULT_SCATTER_POINTS
    bounds: list[tuple[float, float]] | None = None

    def chart_inputs(self) -> list[SeriesNode]:
        return [self.x, self.y, self.z]

    def chart(
        self, series: dict[GroupKey, list[Series]], envs: Mapping[GroupKey, EvalEnv]
    ) -> dict[GroupKey, Output]:
        out: dict[GroupKey, Output] = {}
        for k, group in series.items():
            points = [numeric(s, "cartesian3d") for s in group]
            axes = [p.values for p in points]
            keep = np.isfinite(axes[0]) & np.isfinite(axes[1]) & np.isfinite(axes[2])
            if self.bounds is not None:
                for a, (lo, hi) in zip(axes, self.bounds, strict=True):
                    keep &= (a >= lo) & (a <= hi)
            ts, axes = points[0].ts[keep], [a[keep] for a in axes]
            out[k] = octree_buckets(ts, axes, self.max_points, self.bounds)
        return out


def octree_buckets(
    ts: np.ndarray, axes: list[np.ndarray], max_buckets: int, bounds: Box | None
) -> Cartesian3dBuckets:
    """Per bucket of `spatial_leaves` in 3D: the mean per axis, the points holding each axis'
    minimum and maximum (the earliest of equal ones), the first and last timestamps, the count;
    listed by (min x, min y, min z, first timestamp)."""
    rows = []
    for i in spatial_leaves(axes, max_buckets, bounds):
        values = [a[i] for a in axes]
        picks = [int(i[f(v)]) for v in values for f in (np.argmin, np.argmax)]
        rows.append(
            (
                [float(v.mean()) for v in values],
                [float(a[j]) for j in picks for a in axes],
                [int(ts[j]) for j in picks],
                int(ts[i].min()),
                int(ts[i].max()),
                len(i),
            )
        )
    rows.sort(key=lambda r: (r[1][0], r[1][7], r[1][14], r[3]))  # min x's x, min y's y, min z's z
    return Cartesian3dBuckets(
        np.array([m for r in rows for m in r[0]], np.float64),
        np.array([e for r in rows for e in r[1]], np.float64),
        np.array([t for r in rows for t in r[2]], np.int64),
        np.array([r[3] for r in rows], np.int64),
        np.array([r[4] for r in rows], np.int64),
        np.array([r[5] for r in rows], np.int64),
    )


MS = 1_000_000
AGGREGATIONS = ("MEAN", "MIN", "MAX", "FIRST", "LAST")


def temporal_buckets(p: CartesianPoints, width: int, x_agg: str, y_agg: str) -> CartesianPoints:
    """`TemporalDecimateStrategy`: epoch-aligned time buckets of `width`, each one pair of its x and y
    aggregates, at the bucket's exclusive end (as every bucket of the protocol is stamped)."""
    if not len(p):
        return p
    ids = p.ts // width
    firsts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    return CartesianPoints(
        (ids[firsts] + 1) * width, _aggregate(p.x, firsts, x_agg), _aggregate(p.y, firsts, y_agg)
    )


def _aggregate(values: np.ndarray, firsts: np.ndarray, how: str) -> np.ndarray:
    if how == "MIN":
        return np.minimum.reduceat(values, firsts)
    if how == "MAX":
        return np.maximum.reduceat(values, firsts)
    if how == "FIRST":
        return values[firsts]
    if how == "LAST":
        return values[np.r_[firsts[1:], len(values)] - 1]
    counts = np.diff(np.r_[firsts, len(values)])
    return np.add.reduceat(values, firsts) / counts


def spatial_buckets(p: CartesianPoints, max_buckets: int, bounds: Bounds | None) -> CartesianBuckets:
    """`SpatialDecimateStrategy` over (x, y) pairs (`spatial_leaves`), each bucket the extent of its
    pairs, their first and last timestamps and count, listed by (min x, min y, first timestamp)."""
    box = None if bounds is None else [(bounds.min_x, bounds.max_x), (bounds.min_y, bounds.max_y)]
    x, y, ts = p.x, p.y, p.ts
    columns = [
        (x[i].min(), x[i].max(), y[i].min(), y[i].max(), ts[i].min(), ts[i].max(), len(i))
        for i in spatial_leaves([x, y], max_buckets, box)
    ]
    columns.sort(key=lambda c: (c[0], c[2], c[4]))
    floats = [np.array([c[j] for c in columns], np.float64) for j in range(4)]
    ints = [np.array([c[j] for c in columns], np.int64) for j in range(4, 7)]
    return CartesianBuckets(*floats, *ints)


Box = list[tuple[float, float]]  # per axis (low, high)


def spatial_leaves(axes: list[np.ndarray], max_buckets: int, box: Box | None) -> list[np.ndarray]:
    """`SpatialDecimateStrategy`, in 2 or 3 dimensions: starting from one bucket (the bounds, else
    the points' extent), split the bucket holding the most points at its box's midpoints into
    quadrants (octants in 3D; a point on a midpoint goes to the upper half; empty ones are
    dropped), and again, while the buckets stay at most `max_buckets`. A bucket whose points all
    coincide is not split; ties go to the bucket made first. Returns each bucket's point indexes,
    ascending."""
    n = len(axes[0])
    if not n:
        return []
    if box is None:
        box = [(float(a.min()), float(a.max())) for a in axes]
    made = 0
    heap: list[tuple[int, int, np.ndarray, Box]] = [(-n, made, np.arange(n), box)]
    leaves: list[np.ndarray] = []
    total = 1
    while heap:
        _, _, idx, edges = heapq.heappop(heap)
        values = [a[idx] for a in axes]
        if len(idx) <= 1 or all(v.min() == v.max() for v in values):
            leaves.append(idx)
            continue
        mids = [lo + (hi - lo) / 2 for lo, hi in edges]
        upper = [v >= m for v, m in zip(values, mids, strict=True)]
        code = sum(u.astype(np.int64) << d for d, u in enumerate(upper))  # x the lowest bit
        parts = []
        for c in range(1 << len(axes)):
            mask = code == c
            if mask.any():
                sub = [
                    (m, hi) if c >> d & 1 else (lo, m)
                    for d, ((lo, hi), m) in enumerate(zip(edges, mids, strict=True))
                ]
                parts.append((idx[mask], sub))
        if total - 1 + len(parts) > max_buckets:
            leaves.append(idx)
            leaves.extend(rest[2] for rest in heap)  # the limit is reached: no further split
            break
        total += len(parts) - 1
        for part, sub in parts:
            made += 1
            heapq.heappush(heap, (-len(part), made, part, sub))
    return leaves


# -- multivariate ----------------------------------------------------------------------------------
@dataclass
class DriverAligned(SeriesNode):
    """One input's values at the driver's (input 0's) timestamps, every other input forward-filled
    from its newest point no older than `radius_ns`; a driver timestamp where one has none is left
    out. An enum input stays enum (its codes carried through the fill)."""

    inputs: list[SeriesNode]
    index: int
    radius_ns: int = FFILL_RADIUS_NS

    def children(self) -> Sequence[Node]:
        return self.inputs

    def own_lookback_ns(self) -> int:
        return self.radius_ns

    def reach(self) -> Reach:
        return Reach(ns=self.radius_ns)  # the forward fill reads up to its radius back

    def evaluate(self, env: EvalEnv) -> Series:
        return self._apply([x.evaluate(env) for x in self.inputs])

    def evaluate_since(self, env: EvalEnv, since: int) -> Series:
        out: Series = cut(self._apply([self.input_since(x, env, since) for x in self.inputs]), since)
        return out

    def _apply(self, series: list[Series]) -> Series:
        numbers = [
            NumericPoints(s.ts, s.codes.astype(np.float64)) if isinstance(s, EnumPoints) else s
            for s in series
        ]
        ts, columns = forward_fill(numbers, self.radius_ns)
        on_driver = np.isin(ts, series[0].ts, assume_unique=True)
        ts, column = ts[on_driver], columns[self.index][on_driver]
        chosen = series[self.index]
        if isinstance(chosen, EnumPoints):
            return EnumPoints(ts, column.astype(np.int32), chosen.categories)
        return NumericPoints(ts, column)


@dataclass
class MultivariateChart(_Chart):
    """`multivariate`: the inputs aligned on the driver's timestamps (`DriverAligned`, one per
    input), the tuples bucketed into epoch-aligned time buckets of `width`, and per bucket each
    input's aggregations in request order: MEAN, MIN, MAX, FIRST, LAST of a numeric input, MODE of
    an enum one (the most frequent label; the first by code point on a tie)."""

    columns: list[SeriesNode]
    aggregations: list[list[str]]
    width: int
    group_keys: list[str]

    def chart_inputs(self) -> list[SeriesNode]:
        return list(self.columns)

    def chart(
        self, series: dict[GroupKey, list[Series]], envs: Mapping[GroupKey, EvalEnv]
    ) -> dict[GroupKey, Output]:
        return {k: self.buckets(group) for k, group in series.items()}

    def buckets(self, group: list[Series]) -> MultivariateBuckets:
        ts = group[0].ts
        ids = ts // self.width
        firsts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ts) else np.empty(0, np.int64)
        numbers: list[np.ndarray] = []
        labels: list[list[str]] = []
        layout = ""
        for s, how in zip(group, self.aggregations, strict=True):
            for aggregation in how:
                if isinstance(s, EnumPoints):
                    labels.append(_modes(s, firsts))
                    layout += "e"
                else:
                    numbers.append(_aggregate(s.values, firsts, aggregation) if len(firsts) else s.values[:0])
                    layout += "n"
        count = len(firsts)
        number_rows = np.column_stack(numbers).ravel() if numbers else np.empty(0, np.float64)
        label_rows = [column[i] for i in range(count) for column in labels]
        ends = (ids[firsts] + 1) * self.width if count else np.empty(0, np.int64)
        return MultivariateBuckets(self.width, ends, number_rows, label_rows, layout, list(self.group_keys))


def _modes(s: EnumPoints, firsts: np.ndarray) -> list[str]:
    """Per bucket (starting at `firsts`), the most frequent label, the first by code point on a tie:
    counts per (bucket, label) with the labels in code-point order, so argmax takes the first."""
    if not len(firsts):
        return []
    labels = sorted(set(s.categories))
    order = {label: i for i, label in enumerate(labels)}
    column = np.array([order[label] for label in s.categories], np.int64)  # code -> its label's column
    bucket = np.repeat(np.arange(len(firsts)), np.diff(np.r_[firsts, len(s.codes)]))
    counts = np.bincount(bucket * len(labels) + column[s.codes], minlength=len(firsts) * len(labels))
    return [labels[i] for i in counts.reshape(len(firsts), len(labels)).argmax(axis=1).tolist()]
