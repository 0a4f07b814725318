"""What Nominal only polls of a series' points (built only when polled, through the ComputeService):
Largest-Triangle-Three-Buckets downsampling (the `largestTriangleThreeBuckets` NumericSeries and
summarization strategy), and the `page` and `truncate` summarization strategies, which return full
resolution points (docs/protocol.md, "Points selected when polled"; decision 0080).

Each is evaluated once, whole, over the period (`POLLED_ONLY`): none has an incremental form, and a
live subscription is refused with Nominal's `PollingOnlyComputation` type (unless it asks
`sparkwire.streamPolled`: the LTTB series is then re-evaluated whole at each micro-batch,
compiler/builders/streamed.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import (
    EvalEnv,
    GroupKey,
    OutputNode,
    Series,
    SeriesNode,
    numeric,
)
from compute.evaluation.nodes.cross_group import regroup
from compute.evaluation.nodes.outputs import arrow_of_enum
from compute.evaluation.output_format import ArrowFormat
from compute.evaluation.results import EnumPoints, NumericPoints, Output

MAX_LTTB_POINTS = 10_000  # LttbStrategy.maxPointsPerGroup / maxPointsToReturn: "no greater than 10,000"
MAX_PAGE_SIZE = 5_000  # PageInfo: "Throws if the absolute pageSize is greater than 5,000"
MAX_TRUNCATE_POINTS = 10_000  # TruncateStrategy.maxPointsToReturn: "Throws if greater than 10,000"


def lttb_indices(ts: np.ndarray, values: np.ndarray, n_out: int) -> np.ndarray:
    """The indices (ascending) of the points Largest-Triangle-Three-Buckets (Steinarsson 2013, as his
    published reference code partitions) keeps of these, at most `n_out`: the first and the last;
    the others split into `n_out - 2` buckets, bucket i the points [floor(i * every) + 1,
    floor((i + 1) * every) + 1) with every = (n - 2) / (n_out - 2); of each bucket the point making
    the largest triangle with the point kept from the bucket before and the mean point (mean time,
    mean value) of the bucket after (the last point, after the last bucket); the earliest on a tie.
    Every point when there are at most `n_out`; `n_out` 2: the first and the last; 1: the first.
    Time is measured in ns since the first point, so a timestamp's nanoseconds count exactly."""
    count = len(ts)
    if count <= n_out:
        return np.arange(count, dtype=np.int64)
    if n_out < 3:
        return np.array([0, count - 1][:n_out], dtype=np.int64)
    x = (ts - ts[0]).astype(np.float64)
    y = np.asarray(values, dtype=np.float64)
    every = (count - 2) / (n_out - 2)
    edges = np.floor(np.arange(n_out - 1, dtype=np.float64) * every).astype(np.int64) + 1
    # the mean point of the bucket after bucket i: points [edges[i + 1], edges[i + 2]), and after
    # the last bucket the last point alone
    after = edges[1:]
    sizes = np.diff(np.append(after, count))
    mean_x = np.add.reduceat(x, after) / sizes
    mean_y = np.add.reduceat(y, after) / sizes
    kept = np.empty(n_out, dtype=np.int64)
    kept[0], kept[-1] = 0, count - 1
    a = 0
    for i in range(n_out - 2):
        lo, hi = int(edges[i]), int(edges[i + 1])
        ax, ay = x[a], y[a]
        areas = np.abs((ax - mean_x[i]) * (y[lo:hi] - ay) - (ax - x[lo:hi]) * (mean_y[i] - ay))
        a = lo + int(np.argmax(areas))
        kept[i + 1] = a
    return kept


def lttb(points: NumericPoints, n_out: int) -> NumericPoints:
    """LTTB of the points whose value is finite (a NaN or an infinity has no triangle)."""
    finite = np.isfinite(points.values)
    ts, values = (points.ts, points.values) if finite.all() else (points.ts[finite], points.values[finite])
    kept = lttb_indices(ts, values, n_out)
    return NumericPoints(ts[kept], values[kept])


@dataclass
class LargestTriangleThreeBuckets(SeriesNode):
    """`largestTriangleThreeBuckets`: at most `max_points` of the input's points in the period."""

    POLLED_ONLY = True
    input: SeriesNode
    max_points: int

    def children(self) -> tuple[SeriesNode]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> Series:
        x = numeric(self.input.evaluate(env), "largestTriangleThreeBuckets").since(env.window_start)
        return lttb(x, self.max_points)


# -- paging ----------------------------------------------------------------------------------------
# A page token is a position in the period's points in time order (points at one timestamp in the
# order they were written): `TimestampAndId(timestamp t, id "k")` is the k-th point stamped t
# (from 0; without an id, 0), i.e. the first point at or after t moved on by k. A forward page
# (pageSize > 0) is the pageSize points from that position on; a backward one (pageSize < 0) the
# |pageSize| points just before it. Without a token a forward page starts at the period's first
# point and a backward one ends at its last.
Token = tuple[int, int]  # (timestamp ns, k)


def token_position(ts: np.ndarray, token: Token | None, forward: bool) -> int:
    if token is None:
        return 0 if forward else len(ts)
    t, k = token
    first = int(ts.searchsorted(t, side="left"))
    return min(first + k, len(ts))


def position_token(ts: np.ndarray, position: int) -> Token:
    """The token of a position: the timestamp of the point there and its rank at that timestamp; a
    position past the last point is the last point's timestamp, ranked one past it."""
    at = min(position, len(ts) - 1)
    t = int(ts[at])
    return t, position - int(ts.searchsorted(t, side="left"))


def page(ts: np.ndarray, token: Token | None, size: int) -> tuple[int, int, Token | None]:
    """(lo, hi, next token): the page is points [lo, hi) of `ts`. The next token is given exactly when
    the page holds |size| points (PageInfo's nextPageToken: the next page may then be empty)."""
    forward = size > 0
    at = token_position(ts, token, forward)
    lo, hi = (at, min(at + size, len(ts))) if forward else (max(at + size, 0), at)
    if hi - lo < abs(size) or not len(ts):
        return lo, hi, None
    return lo, hi, position_token(ts, hi if forward else lo)


@dataclass(frozen=True)
class PagedPoints:
    """A page of a series' points and the token of the next (None: no further points that way)."""

    points: NumericPoints | EnumPoints
    next_token: Token | None

    kind = "paged"
    appendable = False

    def __len__(self) -> int:
        return len(self.points)

    def since(self, start: int) -> PagedPoints:
        return self  # a polled answer is never cut


# -- the polled summary root -------------------------------------------------------------------------
@dataclass(frozen=True)
class LttbStrategy:
    max_points_per_group: int


@dataclass(frozen=True)
class PageStrategy:
    size: int
    token: Token | None


@dataclass(frozen=True)
class TruncateStrategy:
    max_points: int


Strategy = LttbStrategy | PageStrategy | TruncateStrategy


@dataclass
class PolledSummary(OutputNode):
    """`series` with `summarizationStrategy` largestTriangleThreeBuckets, page or truncate: per group,
    the points of the input in the period the strategy selects (no decimation into buckets)."""

    POLLED_ONLY = True
    series: SeriesNode
    strategy: Strategy
    arrow: ArrowFormat | None = None  # answered as Nominal's ArrowPlot (numeric series only)

    @property
    def input(self) -> SeriesNode:
        return self.series

    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]:
        envs = regroup(self.series, envs)
        return {k: self._select(_in_period(self.series.evaluate(env), env)) for k, env in envs.items()}

    def _select(self, s: Series) -> Output:
        if self.arrow is not None and isinstance(s, EnumPoints):
            raise arrow_of_enum()
        strategy = self.strategy
        if isinstance(strategy, LttbStrategy):
            return lttb(_lttb_input(s), strategy.max_points_per_group)
        if isinstance(strategy, TruncateStrategy):
            return points_slice(s, 0, strategy.max_points)
        lo, hi, token = page(s.ts, strategy.token, strategy.size)
        return cast(Output, PagedPoints(points_slice(s, lo, hi), token))  # encoded by frames.output_body


def _in_period(s: Series, env: EvalEnv) -> Series:
    """The points of the period polled, start <= ts < end (a positive timeShift carries points
    read inside it past its end)."""
    s = s.since(env.window_start)
    return points_slice(s, 0, int(s.ts.searchsorted(env.now, side="left")))


def points_slice(s: Series, lo: int, hi: int) -> Series:
    """Points [lo, hi) of a series, of its own type."""
    if isinstance(s, EnumPoints):
        return type(s)(s.ts[lo:hi], s.codes[lo:hi], s.categories)
    return NumericPoints(s.ts[lo:hi], s.values[lo:hi])


def _lttb_input(s: Series) -> NumericPoints:
    if isinstance(s, EnumPoints):
        raise ComputeError(
            "InvalidComputation",
            "summarizationStrategy largestTriangleThreeBuckets needs a numeric series: LTTB selects "
            "numeric timestamp/value points",
            {"invalidTypes": "", "variant": "largestTriangleThreeBuckets"},
        )
    return s
