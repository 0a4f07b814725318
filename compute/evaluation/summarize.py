"""Decimation of a series for `SummarizeSeries`: raw points while the window holds at most B of them,
epoch-aligned buckets (timestamp = exclusive end) beyond, per docs/protocol.md."""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, fields

import numpy as np

from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError
from compute.evaluation.results import PROVENANCE, EnumBuckets, KnownSame, NumericBuckets, same_memory

MS = 1_000_000
DEFAULT_BUCKETS = 1000


@dataclass(frozen=True)
class Decimation:
    max_points: int  # B
    bucket_width: int  # w, ns, a whole number of milliseconds

    @classmethod
    def of(cls, window_ns: int, buckets: int | None, resolution_ns: int | None) -> Decimation:
        if buckets is not None and buckets <= 0:
            raise ComputeError(
                "InvalidComputation",
                f"buckets must be positive, got {buckets}",
                {"invalidTypes": "", "variant": "SummarizeSeries", "field": "buckets"},
            )
        if resolution_ns is not None and resolution_ns <= 0:
            raise ComputeError(
                "UnsupportedGranularity", f"resolution must be positive, got {human_duration(resolution_ns)}"
            )
        if buckets is not None:
            b = buckets
        elif resolution_ns is not None:
            b = max(1, window_ns // resolution_ns)
        else:
            b = DEFAULT_BUCKETS
        raw_width = resolution_ns if resolution_ns is not None else math.ceil(window_ns / b)
        # A resolution finer than 1 ms is refused (docs/protocol.md); a width derived from a bucket count is
        # rounded up to whole milliseconds like every other width.
        if raw_width < MS and resolution_ns is not None:
            raise ComputeError(
                "UnsupportedGranularity",
                f"bucket width {human_duration(raw_width)} is below 1 ms",
                {"resolution": str(raw_width)},
            )
        width = max(MS, math.ceil(raw_width / MS) * MS)
        return cls(int(b), int(width))


def _bucket_index(ts: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bucket end per bucket, start offset of each bucket in ts, counts) for sorted ts."""
    if len(ts) and (int(ts[-1]) // width - int(ts[0]) // width) * 4 < len(ts):
        # Many points per bucket (a long window): find each bucket's start by binary search over
        # the epoch-aligned edges instead of dividing every timestamp. Same starts, same buckets.
        first = int(ts[0]) // width
        ids = np.arange(first, int(ts[-1]) // width + 1, dtype=np.int64)
        cuts = np.searchsorted(ts, ids[1:] * width, side="left")
        edges = np.concatenate(([0], cuts, [len(ts)]))
        held = edges[1:] > edges[:-1]  # buckets without points are not sent
        starts = edges[:-1][held]
        return (ids[held] + 1) * width, starts, _run_lengths(starts, len(ts))
    ids = ts // width  # floor division: aligned to multiples of width since the epoch
    if not len(ids):
        return ids, np.empty(0, np.int64), np.empty(0, np.int64)
    new_bucket = np.empty(len(ids), bool)  # (np.r_ here cost ~10 us a call, per evaluation)
    new_bucket[0] = True
    np.not_equal(ids[1:], ids[:-1], out=new_bucket[1:])
    starts = new_bucket.nonzero()[0]  # (np.flatnonzero's wrapper costs more than this on a small edge)
    return (ids[starts] + 1) * width, starts, _run_lengths(starts, len(ids))


def _run_lengths(starts: np.ndarray, n: int) -> np.ndarray:
    """How many of n points each bucket holds, from the buckets' start offsets (np.diff with
    `append` costs more than the rest of a small bucketing)."""
    counts = np.empty(len(starts), np.int64)
    if len(starts):
        np.subtract(starts[1:], starts[:-1], out=counts[:-1])
        counts[-1] = n - starts[-1]
    return counts


# SummarizeSeries.numericAggregations: column name -> the reduction of one bucket's values
Reductions = Mapping[str, Callable[[np.ndarray], float]]


def _reduced(
    values: np.ndarray, starts: np.ndarray, counts: np.ndarray, reductions: Reductions
) -> dict[str, np.ndarray]:
    """Each extra column, exactly: its reduction over each bucket's own points."""
    return {
        name: np.array(
            [reduce(values[s : s + c]) for s, c in zip(starts.tolist(), counts.tolist(), strict=True)],
            np.float64,
        )
        for name, reduce in reductions.items()
    }


def numeric_buckets(
    ts: np.ndarray, values: np.ndarray, width: int, reductions: Reductions | None = None
) -> NumericBuckets:
    end, starts, counts = _bucket_index(ts, width)
    extra = _reduced(values, starts, counts, reductions or {})
    if values.dtype == np.float64:  # the columns as one matrix (`NumericBuckets.stacked`)
        return _from_matrix(width, _bucket_rows(ts, values, end, starts, counts), None, extra)
    if len(starts) == 0:
        empty_f = np.empty(0, np.float64)
        empty_i = np.empty(0, np.int64)
        return NumericBuckets(
            width, empty_i, empty_f, empty_f, empty_f, empty_i, empty_f, empty_i, empty_f, empty_i, empty_f,
            aggregations=extra,
        )  # fmt: skip
    sums = np.add.reduceat(values, starts)
    mean = sums / counts
    # population variance, two-pass for accuracy: mean of squared deviations from the bucket mean
    # in one scratch array: over an hour of 1 kHz, each temporary is 29 MB of fresh memory to fault in
    dev = np.repeat(mean, counts)
    np.subtract(values, dev, out=dev)
    np.multiply(dev, dev, out=dev)
    variance = np.add.reduceat(dev, starts) / counts
    last = starts + counts - 1
    return NumericBuckets(
        width=width,
        end=end.astype(np.int64),
        min=np.minimum.reduceat(values, starts),
        max=np.maximum.reduceat(values, starts),
        mean=mean,
        count=counts.astype(np.int64),
        variance=variance,
        first_ts=ts[starts],
        first_value=values[starts],
        last_ts=ts[last],
        last_value=values[last],
        aggregations=extra,
    )


def _bucket_rows(
    ts: np.ndarray, values: np.ndarray, end: np.ndarray, starts: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """The buckets of float64 `values` as `NumericBuckets.stacked` holds them: one int64 matrix, a
    row per column in `_COLUMNS` order (doubles by their bits), each figure written into its row
    (the same arithmetic as the column-by-column form below, so the same bits)."""
    rows = np.empty((len(_COLUMNS), len(starts)), np.int64)
    doubles = rows.view(np.float64)
    rows[_ROW["end"]] = end
    if not len(starts):
        return rows
    rows[_ROW["count"]] = counts
    np.minimum.reduceat(values, starts, out=doubles[_ROW["min"]])
    np.maximum.reduceat(values, starts, out=doubles[_ROW["max"]])
    mean = np.divide(np.add.reduceat(values, starts), counts, out=doubles[_ROW["mean"]])
    # population variance, two-pass for accuracy: mean of squared deviations from the bucket mean
    # in one scratch array: over an hour of 1 kHz, each temporary is 29 MB of fresh memory to fault in
    dev = np.repeat(mean, counts)
    np.subtract(values, dev, out=dev)
    np.multiply(dev, dev, out=dev)
    np.divide(np.add.reduceat(dev, starts), counts, out=doubles[_ROW["variance"]])
    last = starts + counts - 1
    rows[_ROW["first_ts"]] = ts[starts]
    doubles[_ROW["first_value"]] = values[starts]
    rows[_ROW["last_ts"]] = ts[last]
    doubles[_ROW["last_value"]] = values[last]
    return rows


def enum_buckets(ts: np.ndarray, codes: np.ndarray, categories: list[str], width: int) -> EnumBuckets:
    end, starts, counts = _bucket_index(ts, width)
    histograms: list[dict[int, int]] = []
    for s, c in zip(starts.tolist(), counts.tolist(), strict=True):
        counts_by_code = np.bincount(codes[s : s + c])
        present = np.flatnonzero(counts_by_code)
        histograms.append(dict(zip(present.tolist(), counts_by_code[present].tolist(), strict=True)))
    last = starts + counts - 1
    return EnumBuckets(
        width,
        end.astype(np.int64),
        histograms,
        ts[starts],
        codes[starts],
        ts[last],
        codes[last],
        counts.astype(np.int64),
        categories,
    )


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal elements; O(1) when both are views of the same window memory (the common case)."""
    return same_memory(a, b) or np.array_equal(a, b)


_COLUMNS = tuple(  # in constructor order
    f.name
    for f in fields(NumericBuckets)
    if f.name not in ("width", "aggregations") and f.metadata != PROVENANCE
)
_INT_ROWS = frozenset(r for r, name in enumerate(_COLUMNS) if name in ("end", "count", "first_ts", "last_ts"))
_ROW = {name: r for r, name in enumerate(_COLUMNS)}


@dataclass
class _Bucketed:
    ts: np.ndarray
    values: np.ndarray
    out: NumericBuckets


class BucketMemo:
    """`numeric_buckets` of a window that slides: a bucket whose points are the same as last time is
    taken from the last result instead of being summed again. Between two micro-batches a 60 s window
    of a 1 kHz channel gains ~100 points and loses as many, so only the bucket cut by the window's
    start and the buckets from the last old point on are computed (re-bucketing the whole window was
    ~11% of the server's fan-out profile). Reused buckets are bit-identical: each bucket's figures
    depend only on its own points. Inputs must never be written after they are given (windows and
    nodes hand out new or append-only arrays, compute/evaluation/window.py)."""

    def __init__(self) -> None:
        self._last: dict[object, _Bucketed] = {}

    def buckets(
        self,
        key: object,
        ts: np.ndarray,
        values: np.ndarray,
        width: int,
        reductions: Reductions | None = None,
    ) -> NumericBuckets:
        prev = self._last.get(key)
        out = self._reuse(prev, ts, values, width, reductions or {}) if prev is not None else None
        if out is None:
            out = numeric_buckets(ts, values, width, reductions)  # float64: `stacked` for `_reuse`
        out.lineage = object()  # the identity the next batch's `known_same` names
        self._last[key] = _Bucketed(ts, values, out)
        return out

    def retain(self, keys: Container[object]) -> None:
        """Forget every key not in `keys` (a group that vanished, or raw output again)."""
        if self._last:  # (asked on every evaluation of a raw output, when there is nothing to forget)
            self._last = {k: v for k, v in self._last.items() if k in keys}

    @staticmethod
    def _reuse(
        prev: _Bucketed, ts: np.ndarray, values: np.ndarray, width: int, reductions: Reductions
    ) -> NumericBuckets | None:
        if prev.out.stacked is None or prev.out.width != width or not len(ts) or not len(prev.ts):
            return None
        if values.dtype != np.float64 or prev.values.dtype != np.float64:  # compared as int64 bits
            return None
        j = int(prev.ts.searchsorted(ts[0], side="left"))
        m = min(len(prev.ts) - j, len(ts))  # ts[:m] must be exactly prev.ts[j:j + m], values too
        if m <= 0 or not _identical(prev.ts[j : j + m], ts[:m]):
            return None
        if not _identical(prev.values[j : j + m].view(np.int64), values[:m].view(np.int64)):
            return None
        # Buckets strictly between the first one (cut by the window's start) and the one holding the
        # last common point (it may go on in the new points) hold exactly the same points as before.
        first_key, last_key = int(ts[0]) // width, int(ts[m - 1]) // width
        # a bucket's end is (its key + 1) * width: search the ends rather than divide every one
        lo = int(prev.out.end.searchsorted((first_key + 1) * width, side="right"))
        hi = int(prev.out.end.searchsorted((last_key + 1) * width, side="left"))
        if hi <= lo:
            return None
        head = int(ts.searchsorted((first_key + 1) * width, side="left"))
        tail = int(ts.searchsorted(last_key * width, side="left"))
        # The first bucket and the buckets from the tail on, bucketed in one call (each bucket's
        # figures depend on its own points only; a call's fixed cost is most of a small bucketing).
        edge_ts = np.concatenate((ts[:head], ts[tail:]))
        edge_values = np.concatenate((values[:head], values[tail:]))
        edge_end, edge_starts, edge_counts = _bucket_index(edge_ts, width)
        edge_aggregations = _reduced(edge_values, edge_starts, edge_counts, reductions)
        if set(prev.out.aggregations) != set(edge_aggregations):
            return None
        edge = _bucket_rows(edge_ts, edge_values, edge_end, edge_starts, edge_counts)
        first = 1 if head else 0  # ts[:head] is one bucket's points, or none
        # one copy of every column at once; the diff against the last output reads only the first
        # bucket and the tail (and the numericAggregations columns, outside the matrix, whole)
        rows = np.concatenate((edge[:, :first], prev.out.stacked[:, lo:hi], edge[:, first:]), axis=1)
        known = KnownSame(prev.out.lineage, int(prev.out.end[lo]), int(prev.out.end[hi - 1]))
        aggregations = {
            k: np.concatenate((e[:first], prev.out.aggregations[k][lo:hi], e[first:]))
            for k, e in edge_aggregations.items()
        }
        return _from_matrix(width, rows, known, aggregations)


def _from_matrix(
    width: int, rows: np.ndarray, known: KnownSame | None, aggregations: dict[str, np.ndarray]
) -> NumericBuckets:
    doubles = rows.view(np.float64)
    columns = (rows[r] if r in _INT_ROWS else doubles[r] for r in range(len(_COLUMNS)))
    return NumericBuckets(width, *columns, aggregations=aggregations, stacked=rows, known_same=known)
