"""A live computation: the windows of the series it reads, its current output per group, and what
changed with each update. Shared by every subscriber with the same node, window and context.

Grouping: a channel with `groupByTags` routes each series to the group of its tag values; a channel
without (in a grouped plan) is read by every group. Each window keeps the plan's lookback before
the window's start, so nodes that need history (rolling, time shift, alignment) see it.

A computation that summarizes a raw numeric channel holds buckets instead of raw points while its
output is bucketed and pre-aggregation is enabled (compute/bucketed.py): it then takes the Spark
job's pre-aggregated rows for its series (`agg_width`), and leaves buckets for raw points again (read
from the log) when the window holds B points or fewer."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from compute.bucketed import END_OF_TIME, LogPoints, RangeRead, SeriesBuckets, bucket_width_of, latest_per_ts
from compute.buckets import Buckets, to_numeric
from compute.compiler import Plan
from compute.errors import ComputeError
from compute.nodes import EvalEnv, GroupKey
from compute.preaggregate import AggRows
from compute.results import EnumBuckets, EnumPoints, NumericBuckets, NumericPoints, Output, Ranges
from compute.series import SeriesInfo, SeriesKind
from compute.window import SeriesWindow

DEFAULT_LATENESS_NS = 100_000_000  # Nominal's default: 100 ms behind the newest point of the series
SHARED: GroupKey = ()  # in a grouped plan: the inputs of channels every group reads

__all__ = ["Change", "Computation", "GroupKey", "Rows"]


@dataclass
class Rows:
    """One series' points from a micro-batch or back-fill, in write (seq) order."""

    seq: np.ndarray
    ts: np.ndarray
    values: np.ndarray  # float64, or object (str) for enum series
    pos: np.ndarray | None = None  # each point's index in its log record; None: whole records

    def positions(self) -> np.ndarray:
        if self.pos is not None:
            return self.pos
        starts = np.flatnonzero(np.r_[True, self.seq[1:] != self.seq[:-1]])
        return np.arange(len(self.seq)) - np.repeat(starts, np.diff(np.r_[starts, len(self.seq)]))


Batch = dict[int, "Rows | AggRows"]  # series id -> its rows of a read, raw or pre-aggregated


@dataclass(frozen=True)
class Change:
    start: int  # ns: the append reaches back to here
    end: int
    full: bool  # the result's type changed (or a group appeared): a FullResult is due


@dataclass
class _Route:
    input_index: int
    group: GroupKey
    kind: SeriesKind


@dataclass
class _Group:
    windows: dict[int, SeriesWindow] = field(default_factory=dict)


class Computation:
    def __init__(self, key: str, plan: Plan, allowed_lateness_ns: int | None) -> None:
        self.key = key
        self.plan = plan
        self.allowed_lateness_ns = allowed_lateness_ns
        self.lock = threading.Lock()
        self.routes: dict[int, list[_Route]] = {}  # series id -> where its points go
        self.groups: dict[GroupKey, _Group] = {}
        self.outputs: dict[GroupKey, Output] = {}
        self.categories: list[str] = []  # enum categories, stable across appends
        self._category_index: dict[str, int] = {}
        self.newest_seen: dict[int, int] = {}  # series id -> newest timestamp accepted
        self.backfill_seq = 0  # stream rows at or below this seq are already in the back-fill
        self.ready = False
        self._buffered: list[tuple[Batch, int]] = []
        self.end = 0  # the newest `end` announced; never goes backwards
        self.error: ComputeError | None = None
        self.late_dropped = 0
        self.epoch = 0  # bumped by reset(): a back-fill started before it is stale
        # -- pre-aggregation (compute/bucketed.py) --
        self.bucket_width = bucket_width_of(plan)  # None: the plan is not a summarized raw channel
        self.log: LogPoints | None = None  # direct log reads; None: pre-aggregation off for this one
        self.min_points = 1  # points per bucket (window average) below which raw rows are cheaper
        self._stores: dict[int, SeriesBuckets] | None = None  # series id -> buckets, when bucketed
        self.applied_seq: dict[int, int] = {}  # series id -> every point up to this seq is applied
        self.agg_width = 0  # the width it takes pre-aggregated rows at now (0: raw rows only)
        self.aggregated_buckets = 0  # pre-aggregated rows applied (stats)
        self.aggregated_points = 0  # points those rows summarized

    def enable_preaggregation(self, read: RangeRead, min_points: int) -> None:
        """Let this computation hold buckets (if its plan is in scope) and read the raw points behind
        pre-aggregated rows meant for other computations of its series: `read` reads the log."""
        self.log = LogPoints(read)
        self.min_points = max(1, min_points)

    @property
    def bucketed(self) -> bool:
        return self._stores is not None

    def can_bucket(self) -> bool:
        """In scope now: a summarized numeric channel, one series per group, log reads available."""
        if self.bucket_width is None or self.log is None:
            return False
        groups: set[GroupKey] = set()
        for routes in list(self.routes.values()):
            for r in routes:
                if r.kind is not SeriesKind.NUMERIC or r.group in groups:
                    return False
                groups.add(r.group)
        return True

    # -- wiring ------------------------------------------------------------------------------------
    def route(self, info: SeriesInfo) -> bool:
        """Start reading a series if one of the plan's channels selects it."""
        routes = [
            _Route(i, sel.group_of(info.key), info.kind)
            for i, sel in enumerate(self.plan.selectors)
            if sel.matches(info.key)
        ]
        if routes:
            self.routes[info.id] = routes
        return bool(routes)

    # -- updates -----------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the window (the stream restarted); a new back-fill rebuilds it. The last outputs
        stay until then, so a frame built meanwhile is stale, never malformed."""
        with self.lock:
            self.epoch += 1
            self.groups = {}
            self.newest_seen = {}
            self._buffered = []
            self.error = None
            self.ready = False
            self._stores = None
            self.applied_seq = {}
            self.agg_width = 0
            if self.log is not None:
                self.log = LogPoints(self.log.read)

    def fail(self, error: ComputeError) -> None:
        """The computation cannot go on: it stops taking rows and its subscribers get `error`."""
        with self.lock:
            self.error = error
            self._buffered = []
            self.ready = True

    def load_backfill(self, rows: Batch, now: int, epoch: int | None = None) -> None:
        """Install history (seq <= backfill_seq), then the stream rows that arrived meanwhile."""
        with self.lock:
            if epoch is not None and epoch != self.epoch:
                return  # reset meanwhile: a newer back-fill is on its way
            for sid in self.routes:
                self.applied_seq[sid] = max(self.applied_seq.get(sid, 0), self.backfill_seq)
            if any(isinstance(r, AggRows) for r in rows.values()) and self.can_bucket():
                self._stores = {}  # pre-aggregated history: start bucketed (raw again if few points)
            self._apply(rows, now, live=False)
            for buffered, at in self._buffered:
                self._apply(self._after_backfill(buffered), at, live=True)
            self._buffered.clear()
            self.ready = True
            self.end = max(self.end, now)
            self._evaluate(now)

    def apply_batch(self, rows: Batch, now: int) -> Change | None:
        """Apply one micro-batch's rows for this computation's series; return what changed."""
        with self.lock:
            if not self.ready:  # kept until the back-fill (whose mark may not be set yet) is in
                if rows:
                    self._buffered.append((rows, now))
                return None
            if self.error is not None:
                return None
            rows = self._after_backfill(rows)
            if not rows:
                return None
            before = dict(self.outputs)
            accepted_from = self._apply(rows, now, live=True)
            if accepted_from is None:
                return None
            self._evaluate(now)
            return self._diff(before, now)

    def _after_backfill(self, rows: Batch) -> Batch:
        """The rows with seq above the back-fill's mark (the back-fill holds the others)."""
        mark = self.backfill_seq
        out: Batch = {}
        for sid, r in rows.items():
            if isinstance(r, AggRows):
                if int(r.max_seq.max()) <= mark:
                    continue
                if int(r.min_seq.min()) <= mark:  # buckets straddle the mark: the points after it
                    r = self._raw_of(sid, r, mark)
            else:
                r = _after(r, mark)  # type: ignore[assignment]
            if r is not None and len(r.seq if isinstance(r, Rows) else r.min_seq):
                out[sid] = r
        return out

    def _raw_of(self, sid: int, agg: AggRows, after_seq: int, upto_seq: int | None = None) -> Rows:
        """The raw points behind pre-aggregated rows (seq > after_seq), read from the log."""
        if self.log is None:
            raise RuntimeError("pre-aggregated rows reached a computation without log reads")
        upto = int(agg.max_seq.max()) if upto_seq is None else upto_seq
        after = max(after_seq, int(agg.min_seq.min()) - 1)
        b = agg.buckets
        t = self.log.batch(sid, int(b.first_ts.min()), int(b.last_ts.max()) + 1, after, upto)
        return Rows(
            t.column("seq").to_numpy(),
            t.column("ts").to_numpy(),
            t.column("value").to_numpy(),
            t.column("pos").to_numpy(),
        )

    def _aggregates_certain(self, sid: int, agg: AggRows, now: int) -> bool:
        """Whether every point behind these rows is accepted (so they may be applied as they are)."""
        first, last = int(agg.buckets.first_ts.min()), int(agg.buckets.last_ts.max())
        if self.allowed_lateness_ns is not None:
            return first + self.allowed_lateness_ns >= now
        prior = self.newest_seen.get(sid)
        return first >= max(last if prior is None else max(prior, last), last) - DEFAULT_LATENESS_NS

    def _upto(self, sid: int) -> int:
        return self.applied_seq.get(sid, self.backfill_seq)

    def _apply(self, rows: Batch, now: int, live: bool) -> int | None:
        """Merge rows into the windows; return the oldest accepted timestamp (None if nothing)."""
        oldest: int | None = None
        for sid, r in rows.items():
            if isinstance(r, AggRows):
                if (
                    self._stores is not None
                    and self.log is not None
                    and self.bucket_width is not None
                    and self.bucket_width % r.width == 0  # the rows' buckets nest in ours
                    and (not live or self._aggregates_certain(sid, r, now))
                ):
                    first = self._apply_aggregates(sid, r, live)
                    oldest = first if oldest is None else min(oldest, first)
                    continue
                r = self._raw_of(sid, r, 0, None if live else self.backfill_seq)
            ts = r.ts
            if live:
                keep = self._accepted(sid, ts, now)
                if not keep.all():
                    self.late_dropped += int((~keep).sum())
                    if self.log is not None and self.bucket_width is not None:  # only they read back
                        self.log.refuse(sid, r.seq[~keep], r.positions()[~keep], ts[~keep])
                    ts, values = ts[keep], r.values[keep]
                else:
                    values = r.values
                if len(r.seq):
                    self.applied_seq[sid] = max(self._upto(sid), int(r.seq.max()))
            else:
                values = r.values
            if not len(ts):
                continue
            self.newest_seen[sid] = max(self.newest_seen.get(sid, ts[0]), int(ts.max()))
            oldest = int(ts.min()) if oldest is None else min(oldest, int(ts.min()))
            if self._stores is not None and self.log is not None and self.bucket_width is not None:
                for route in self.routes.get(sid, ()):
                    self.groups.setdefault(route.group, _Group())
                store = self._stores.setdefault(sid, SeriesBuckets(self.bucket_width))
                store.add_points(sid, ts, values.astype(np.float64, copy=False), self._upto(sid), self.log)
                continue
            for route in self.routes.get(sid, ()):
                group = self.groups.setdefault(route.group, _Group())
                if route.kind is SeriesKind.ENUM:
                    window = group.windows.setdefault(route.input_index, SeriesWindow(np.int32))
                    window.insert(ts, self._codes(values))
                else:
                    window = group.windows.setdefault(route.input_index, SeriesWindow(np.float64))
                    window.insert(ts, values.astype(np.float64, copy=False))
        return oldest

    def _accepted(self, sid: int, ts: np.ndarray, now: int) -> np.ndarray:
        if self.allowed_lateness_ns is not None:
            return ts + self.allowed_lateness_ns >= now
        prior = self.newest_seen.get(sid)
        running = np.maximum.accumulate(ts)
        newest_before = np.r_[prior if prior is not None else ts[0], running[:-1]]
        if prior is not None:
            newest_before = np.maximum(newest_before, prior)
        return ts >= newest_before - DEFAULT_LATENESS_NS

    def _apply_aggregates(self, sid: int, agg: AggRows, live: bool) -> int:
        """Pre-aggregated rows of accepted points into the series' buckets; the oldest timestamp."""
        assert self._stores is not None and self.log is not None and self.bucket_width is not None
        first, last = int(agg.buckets.first_ts.min()), int(agg.buckets.last_ts.max())
        self.newest_seen[sid] = max(self.newest_seen.get(sid, last), last)
        if live:
            self.applied_seq[sid] = max(self._upto(sid), int(agg.max_seq.max()))
        for route in self.routes.get(sid, ()):
            self.groups.setdefault(route.group, _Group())
        store = self._stores.setdefault(sid, SeriesBuckets(self.bucket_width))
        store.add_aggregates(sid, agg, self._upto(sid), self.log)
        self.aggregated_buckets += len(agg.min_seq)
        self.aggregated_points += agg.count
        return first

    def _codes(self, values: np.ndarray) -> np.ndarray:
        codes = np.empty(len(values), np.int32)
        for i, v in enumerate(values.tolist()):
            code = self._category_index.get(v)
            if code is None:
                code = self._category_index[v] = len(self.categories)
                self.categories.append(v)
            codes[i] = code
        return codes

    def _evaluate(self, now: int) -> None:
        if self._stores is not None and self._evaluate_buckets(now):
            return
        self._evaluate_points(now)
        self._enter_buckets(now)

    # -- bucketed (compute/bucketed.py) ------------------------------------------------------------
    def _evaluate_buckets(self, now: int) -> bool:
        """Outputs from the buckets; False (and raw windows again) when they no longer apply."""
        assert self._stores is not None and self.log is not None and self.bucket_width is not None
        if not self.can_bucket():
            self._leave_buckets(now)
            return False
        window_start = now - self.plan.window_ns
        per_group: dict[GroupKey, Buckets] = {}
        for sid, routes in list(self.routes.items()):
            sb = self._stores.get(sid)
            if sb is not None:
                per_group[routes[0].group] = sb.window(sid, window_start, self._upto(sid), self.log)
        counts = [int(b.count.sum()) for b in per_group.values()]
        if all(c <= self.plan.root.decimation.max_points for c in counts):  # type: ignore[attr-defined]
            self._leave_buckets(now)
            return False
        w = self.bucket_width
        keys = list(self.groups) if self.plan.grouped else [SHARED]
        self.outputs = {k: to_numeric(per_group.get(k, Buckets.empty()), w) for k in keys}
        self.log.trim(window_start)
        self._set_agg_width(sum(counts), len(per_group))
        return True

    def _set_agg_width(self, points: int, series: int) -> None:
        assert self.bucket_width is not None
        buckets = max(1, self.plan.window_ns // self.bucket_width) * max(1, series)
        self.agg_width = self.bucket_width if points >= self.min_points * buckets else 0

    def _enter_buckets(self, now: int) -> None:
        """After a raw evaluation that gave buckets: hold buckets from now on."""
        if not self.can_bucket() or not any(isinstance(o, NumericBuckets) for o in self.outputs.values()):
            return
        assert self.bucket_width is not None
        window_start = now - self.plan.window_ns
        stores: dict[int, SeriesBuckets] = {}
        points = 0
        for sid, routes in list(self.routes.items()):
            group = self.groups.get(routes[0].group)
            window = group.windows.pop(routes[0].input_index, None) if group is not None else None
            if window is None:
                continue
            i = int(np.searchsorted(window.ts, window_start, side="left"))
            stores[sid] = SeriesBuckets.of_points(
                self.bucket_width, window.ts[i:], window.values[i:], window_start
            )
            points += len(window.ts) - i
        self._stores = stores
        self._set_agg_width(points, len(stores))

    def _leave_buckets(self, now: int) -> None:
        """Back to raw windows: the window's points read from the log (few: B or fewer per group)."""
        assert self._stores is not None and self.log is not None
        window_start = now - self.plan.window_ns
        by_window: dict[tuple[GroupKey, int], list[tuple[np.ndarray, ...]]] = {}
        for sid, routes in list(self.routes.items()):
            seq, pos, ts, values = self.log.accepted(sid, window_start, END_OF_TIME, self._upto(sid))
            if not len(ts):
                continue
            for route in routes:
                by_window.setdefault((route.group, route.input_index), []).append((seq, pos, ts, values))
        for (key, index), parts in by_window.items():
            seq, pos, ts, values = (np.concatenate(c) for c in zip(*parts, strict=True))
            order = np.lexsort((pos, seq))  # write order across the group's series
            window = SeriesWindow(np.float64)
            window.replace(*latest_per_ts(ts[order], values[order]))
            self.groups.setdefault(key, _Group()).windows[index] = window
        self._stores = None
        self.agg_width = 0

    def _evaluate_points(self, now: int) -> None:
        window_start = now - self.plan.window_ns
        if self.log is not None:
            self.log.trim(window_start)
        keep_from = window_start - self.plan.lookback_ns
        inputs: dict[GroupKey, dict[int, NumericPoints | EnumPoints]] = {}
        for key, group in self.groups.items():
            series: dict[int, NumericPoints | EnumPoints] = {}
            for index, window in group.windows.items():
                window.trim_before(keep_from)
                if window.values.dtype == np.int32:
                    series[index] = EnumPoints(window.ts, window.values, self.categories)
                else:
                    series[index] = NumericPoints(window.ts, window.values)
            inputs[key] = series
        if self.plan.grouped:
            shared = inputs.pop(SHARED, {})
            envs = {
                key: EvalEnv({**shared, **series}, window_start, now, self.categories)
                for key, series in inputs.items()
            }
        else:
            envs = {SHARED: EvalEnv(inputs.get(SHARED, {}), window_start, now, self.categories)}
        try:
            self.outputs = self.plan.root.evaluate_groups(envs)
        except ComputeError as exc:
            self.error = exc
            raise

    def _diff(self, before: dict[GroupKey, Output], now: int) -> Change | None:
        window_start = now - self.plan.window_ns
        starts: list[int] = []
        # a group appearing or vanishing, a result type changing, or a result with no append form
        full = before.keys() != self.outputs.keys()
        for key, out in self.outputs.items():
            old = before.get(key)
            if old is None or old.kind != out.kind:
                full = True
                continue
            start = _settled(out, window_start).first_change(_settled(old, window_start))  # type: ignore[arg-type]
            if start is not None:
                starts.append(start)
                full = full or not out.appendable
        if not starts and not full:
            return None
        newest = max(
            (
                int(o.ts[-1])
                for o in self.outputs.values()
                if isinstance(o, NumericPoints | EnumPoints) and len(o)
            ),
            default=now,
        )
        self.end = max(self.end, now, newest)
        return Change(start=max(min(starts, default=window_start), window_start), end=self.end, full=full)

    # -- reading (the event loop builds frames from these) -----------------------------------------
    def snapshot(self, since: int | None) -> dict[GroupKey, Output]:
        """Current outputs, cut to the part from `since` on (None: the whole window)."""
        with self.lock:
            if since is None:
                return dict(self.outputs)
            return {k: v.since(since) for k, v in self.outputs.items()}


def _settled(out: Output, window_start: int) -> Output:
    """The part of an output that only new points can change: a bucket cut by the window's start
    changes as time passes, and clients trim it themselves, so it is not announced as a change."""
    if isinstance(out, NumericBuckets | EnumBuckets):
        return out.since(window_start + out.width - 1)
    if isinstance(out, Ranges):
        return out.clip(window_start)
    return out.since(window_start)


def _after(r: Rows, seq: int) -> Rows | None:
    if not len(r.seq) or r.seq[0] > seq:
        return r if len(r.seq) else None
    keep = r.seq > seq
    if not keep.any():
        return None
    return Rows(r.seq[keep], r.ts[keep], r.values[keep], None if r.pos is None else r.pos[keep])
