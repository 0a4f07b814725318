"""A summarized computation's series held as buckets instead of raw points (its output is bucketed):
one BucketStore per series at the computation's bucket width, fed by pre-aggregated rows from Spark
or by raw rows aggregated here, and kept EXACTLY equal to bucketing the raw points:

- a batch bucket that may rewrite a timestamp the store already holds (its span overlaps the stored
  bucket's [first, last] timestamps), or that holds a timestamp twice, or values Spark aggregates
  differently (NaN, infinities), is recomputed from the log's points;
- the bucket cut by the window's start is computed from its raw points (read from the log once when
  the window's start enters it, cached until a batch touches it), counting only points inside;
- log reads leave out the points the live computation refused as late (`LogPoints`).

Which batches may be applied as aggregates at all (lateness) is the computation's decision
(compute/computation.py); everything here assumes every point it is given was accepted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from compute.buckets import Buckets, BucketStore, combine, from_points, rebucket
from compute.compiler import Plan
from compute.nodes.inputs import ChannelInput
from compute.nodes.outputs import SummarizeSeries
from compute.preaggregate import AggRows

# (series id, from ts, to ts (exclusive), after seq, up to seq) -> (seq, pos, ts, value) in write order
RangeRead = Callable[[int, int, int, int, int], pa.Table]
END_OF_TIME = np.iinfo(np.int64).max


def bucket_width_of(plan: Plan) -> int | None:
    """The bucket width of a plan that summarizes a raw numeric channel (None: any other plan)."""
    root = plan.root
    if not isinstance(root, SummarizeSeries) or not root.decimate or plan.lookback_ns:
        return None
    if not isinstance(root.series, ChannelInput) or root.series.expect == "enum":
        return None
    return root.decimation.bucket_width


def latest_per_ts(ts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points in write order -> sorted unique timestamps, the last write of each winning."""
    order = np.argsort(ts, kind="stable")
    ts, values = ts[order], values[order]
    keep = np.r_[ts[1:] != ts[:-1], True] if len(ts) else np.empty(0, bool)
    return ts[keep], values[keep]


@dataclass
class LogPoints:
    """Direct reads of the log from the driver, without the points this computation refused."""

    read: RangeRead

    def __post_init__(self) -> None:
        self.refused: dict[int, dict[tuple[int, int], int]] = {}  # sid -> (seq, pos) -> ts

    def refuse(self, sid: int, seq: np.ndarray, pos: np.ndarray, ts: np.ndarray) -> None:
        book = self.refused.setdefault(sid, {})
        for s, p, t in zip(seq.tolist(), pos.tolist(), ts.tolist(), strict=True):
            book[(s, p)] = t

    def trim(self, before_ts: int) -> None:
        for sid, book in self.refused.items():
            if any(t < before_ts for t in book.values()):
                self.refused[sid] = {k: t for k, t in book.items() if t >= before_ts}

    def batch(self, sid: int, from_ts: int, to_ts: int, after_seq: int, upto_seq: int) -> pa.Table:
        """Points as written (a batch being applied now: nothing refused yet)."""
        return self.read(sid, from_ts, to_ts, after_seq, upto_seq)

    def accepted(
        self, sid: int, from_ts: int, to_ts: int, upto_seq: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(seq, pos, ts, value) of the accepted points in [from_ts, to_ts) written up to `upto_seq`,
        in write order."""
        table = self.read(sid, from_ts, to_ts, 0, upto_seq)
        seq, pos = table.column("seq").to_numpy(), table.column("pos").to_numpy()
        ts, values = table.column("ts").to_numpy(), table.column("value").to_numpy()
        book = self.refused.get(sid)
        if book and len(ts):
            keep = np.fromiter(
                ((s, p) not in book for s, p in zip(seq.tolist(), pos.tolist(), strict=True)), bool, len(ts)
            )
            seq, pos, ts, values = seq[keep], pos[keep], ts[keep], values[keep]
        return seq, pos, ts, values

    def points(self, sid: int, from_ts: int, to_ts: int, upto_seq: int) -> tuple[np.ndarray, np.ndarray]:
        """The accepted points in [from_ts, to_ts) as of `upto_seq`: sorted, one per timestamp."""
        _, _, ts, values = self.accepted(sid, from_ts, to_ts, upto_seq)
        return latest_per_ts(ts, values)


@dataclass
class _Edge:
    key: int  # the bucket
    from_ts: int  # the points of the bucket at or after this timestamp
    ts: np.ndarray
    values: np.ndarray


class SeriesBuckets:
    """One series of one computation, as buckets of the computation's width."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.store = BucketStore(width)
        self._edge: _Edge | None = None
        self.recomputed = 0  # buckets recomputed from the log (stats)

    @classmethod
    def of_points(cls, width: int, ts: np.ndarray, values: np.ndarray, window_start: int) -> SeriesBuckets:
        """From a raw window (sorted, unique timestamps, nothing before `window_start`)."""
        sb = cls(width)
        sb.store.merge(from_points(ts, values, width))
        key = window_start // width
        at = ts < (key + 1) * width
        sb._edge = _Edge(key, window_start, ts[at], values[at])
        return sb

    # -- updates -----------------------------------------------------------------------------------
    def add_aggregates(self, sid: int, agg: AggRows, upto_seq: int, log: LogPoints) -> None:
        """Pre-aggregated buckets (width dividing ours) of accepted points written up to `upto_seq`."""
        w = self.width
        keys = (agg.buckets.key * agg.width) // w
        unsure = (agg.bad > 0) | (agg.distinct_ts < agg.buckets.count) | (agg.max_seq > upto_seq)
        redo = set(keys[unsure].tolist())
        clean = agg.buckets.take(~unsure)
        self._add(sid, rebucket(clean, agg.width, w), redo, upto_seq, log)

    def add_points(self, sid: int, ts: np.ndarray, values: np.ndarray, upto_seq: int, log: LogPoints) -> None:
        """Accepted raw points, in write order."""
        if not len(ts):
            return
        order = np.argsort(ts, kind="stable")
        ts_sorted = ts[order]
        dup = ts_sorted[1:] == ts_sorted[:-1]
        redo = set((ts_sorted[1:][dup] // self.width).tolist())
        odd = ~np.isfinite(values)
        if odd.any():  # buckets with NaN or infinities: from the points, never by combining
            redo |= set((ts[odd] // self.width).tolist())
        ts_u, values_u = latest_per_ts(ts, values)
        self._add(sid, from_points(ts_u, values_u, self.width), redo, upto_seq, log)

    def _add(self, sid: int, new: Buckets, redo: set[int], upto_seq: int, log: LogPoints) -> None:
        if len(new):
            at = self.store.find(new.key)
            held = at >= 0
            s = self.store.buckets
            overlap = np.zeros(len(new), bool)
            overlap[held] = (new.first_ts[held] <= s.last_ts[at[held]]) & (
                new.last_ts[held] >= s.first_ts[at[held]]
            )
            redo |= set(new.key[overlap].tolist())
            if redo:
                new = new.take(~np.isin(new.key, np.fromiter(redo, np.int64, len(redo))))
            self.store.merge(combine(new))
            if self._edge is not None and self._edge.key in set(new.key.tolist()):
                self._edge = None
        if redo:
            self._recompute(sid, np.array(sorted(redo), np.int64), upto_seq, log)

    def _recompute(self, sid: int, keys: np.ndarray, upto_seq: int, log: LogPoints) -> None:
        w = self.width
        ts, values = log.points(sid, int(keys[0]) * w, (int(keys[-1]) + 1) * w, upto_seq)
        fresh = from_points(ts, values, w)
        self.store.replace(fresh.take(np.isin(fresh.key, keys)), keys)
        self.recomputed += len(keys)
        if self._edge is not None and self._edge.key in set(keys.tolist()):
            self._edge = None

    # -- reading -----------------------------------------------------------------------------------
    def window(self, sid: int, window_start: int, upto_seq: int, log: LogPoints) -> Buckets:
        """The buckets of the points at or after `window_start` (the first one cut by it)."""
        key = window_start // self.width
        self.store.trim_before(key)
        edge = self._edge
        if edge is None or edge.key != key or edge.from_ts > window_start:
            ts, values = log.points(sid, window_start, (key + 1) * self.width, upto_seq)
            edge = self._edge = _Edge(key, window_start, ts, values)
        i = int(np.searchsorted(edge.ts, window_start, side="left"))
        first = from_points(edge.ts[i:], edge.values[i:], self.width)
        return Buckets.concat([first, self.store.since(key + 1)])
