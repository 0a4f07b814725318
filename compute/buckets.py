"""Per-series bucket statistics and their exact combination: the store a summarized computation keeps
instead of raw points once its output is bucketed (compute/bucketed.py), fed by buckets the Spark job
pre-aggregated (compute/preaggregate.py) or by raw points aggregated here.

Buckets are epoch-aligned (`key` = floor(ts / width)). Buckets of a width that divides another nest
in it, so finer buckets combine into coarser ones exactly: counts and sums add, min/max of min/max,
first/last point by timestamp, and the population variance by Chan's parallel formula
(M2 = sum of the parts' M2 + sum of n_i * (mean_i - mean)^2). Combining assumes the parts hold
disjoint sets of timestamps (the caller guarantees it: a rewrite of a timestamp is resolved from the
log, never by combining)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from compute.results import NumericBuckets


@dataclass
class Buckets:
    """Columns, one row per bucket (sorted by key, unique keys unless said otherwise)."""

    key: np.ndarray  # int64: floor(ts / width)
    count: np.ndarray  # int64
    mean: np.ndarray  # float64
    m2: np.ndarray  # float64: sum of squared deviations from the mean
    min: np.ndarray
    max: np.ndarray
    first_ts: np.ndarray  # int64
    first_value: np.ndarray
    last_ts: np.ndarray
    last_value: np.ndarray

    def __len__(self) -> int:
        return len(self.key)

    def take(self, index: np.ndarray | slice) -> Buckets:
        return Buckets(*(getattr(self, f.name)[index] for f in fields(self)))

    @classmethod
    def concat(cls, parts: list[Buckets]) -> Buckets:
        return cls(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)))

    @classmethod
    def empty(cls) -> Buckets:
        i, f = np.empty(0, np.int64), np.empty(0, np.float64)
        return cls(i, i, f, f, f, f, i, f, i, f)


def from_points(ts: np.ndarray, values: np.ndarray, width: int) -> Buckets:
    """Buckets of points sorted by timestamp with unique timestamps (two-pass, like numeric_buckets)."""
    if not len(ts):
        return Buckets.empty()
    keys = ts // width
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    counts = np.diff(np.r_[starts, len(ts)])
    mean = np.add.reduceat(values, starts) / counts
    dev = values - np.repeat(mean, counts)
    last = starts + counts - 1
    return Buckets(
        key=keys[starts].astype(np.int64),
        count=counts.astype(np.int64),
        mean=mean,
        m2=np.add.reduceat(dev * dev, starts),
        min=np.minimum.reduceat(values, starts),
        max=np.maximum.reduceat(values, starts),
        first_ts=ts[starts],
        first_value=values[starts],
        last_ts=ts[last],
        last_value=values[last],
    )


def combine(parts: Buckets) -> Buckets:
    """Rows with equal keys combined into one (rows in any order; disjoint timestamps per key)."""
    if len(parts) <= 1:
        return parts
    order = np.lexsort((parts.first_ts, parts.key))
    p = parts.take(order)
    starts = np.flatnonzero(np.r_[True, p.key[1:] != p.key[:-1]])
    if len(starts) == len(p):
        return p
    n = np.add.reduceat(p.count, starts)
    weighted = p.mean * p.count
    mean = np.add.reduceat(weighted, starts) / n
    spread = p.count * (p.mean - np.repeat(mean, np.diff(np.r_[starts, len(p)]))) ** 2
    m2 = np.add.reduceat(p.m2, starts) + np.add.reduceat(spread, starts)
    ends = np.r_[starts[1:], len(p)]
    # the last point: the row with the greatest last_ts within each key
    last_order = np.lexsort((p.last_ts, np.repeat(np.arange(len(starts)), ends - starts)))
    last_rows = last_order[ends - 1]
    # combining exactly one row must give that row unchanged (no rounding of mean or m2)
    single = (ends - starts) == 1
    mean = np.where(single, p.mean[starts], mean)
    m2 = np.where(single, p.m2[starts], m2)
    return Buckets(
        key=p.key[starts],
        count=n.astype(np.int64),
        mean=mean,
        m2=m2,
        min=np.minimum.reduceat(p.min, starts),
        max=np.maximum.reduceat(p.max, starts),
        first_ts=p.first_ts[starts],
        first_value=p.first_value[starts],
        last_ts=p.last_ts[last_rows],
        last_value=p.last_value[last_rows],
    )


def rebucket(b: Buckets, width: int, to_width: int) -> Buckets:
    """Buckets of `width` combined into buckets of `to_width` (a multiple of `width`)."""
    if to_width == width:
        return b
    if to_width % width:
        raise ValueError(f"{to_width} is not a multiple of {width}")
    coarse = Buckets(*(getattr(b, f.name) for f in fields(b)))
    coarse.key = (b.key * width) // to_width
    return combine(coarse)


def to_numeric(b: Buckets, width: int) -> NumericBuckets:
    return NumericBuckets(
        width=width,
        end=((b.key + 1) * width).astype(np.int64),
        min=b.min,
        max=b.max,
        mean=b.mean,
        count=b.count,
        variance=b.m2 / b.count if len(b) else np.empty(0, np.float64),
        first_ts=b.first_ts,
        first_value=b.first_value,
        last_ts=b.last_ts,
        last_value=b.last_value,
    )


class BucketStore:
    """One series' buckets of one width, sorted by key."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.buckets = Buckets.empty()

    def __len__(self) -> int:
        return len(self.buckets)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """Index of each key in the store, -1 where absent."""
        at = np.searchsorted(self.buckets.key, keys)
        found = at < len(self.buckets)
        found[found] = self.buckets.key[at[found]] == keys[found]
        return np.where(found, at, -1)

    def merge(self, new: Buckets) -> None:
        """Add buckets whose points are new to the store (disjoint timestamps from what it holds)."""
        if len(new):
            self.buckets = combine(Buckets.concat([self.buckets, new]))

    def replace(self, new: Buckets, keys: np.ndarray) -> None:
        """Set buckets `keys` to `new` (recomputed from the points): keys absent from `new` are emptied."""
        keep = self.find(keys)
        mask = np.ones(len(self.buckets), bool)
        mask[keep[keep >= 0]] = False
        self.buckets = combine(Buckets.concat([self.buckets.take(mask), new]))

    def trim_before(self, key: int) -> None:
        i = int(np.searchsorted(self.buckets.key, key, side="left"))
        if i:
            self.buckets = self.buckets.take(slice(i, None))

    def since(self, key: int) -> Buckets:
        """The buckets with key >= `key`."""
        return self.buckets.take(slice(int(np.searchsorted(self.buckets.key, key, side="left")), None))
