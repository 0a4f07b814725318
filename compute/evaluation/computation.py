"""A live computation: the windows of the series it reads, its current output per group, and what
changed with each update. Shared by every subscriber with the same node, window and context.

Grouping: a channel with `groupByTags` routes each series to the group of its tag values; a channel
without (in a grouped plan) is read by every group. Each window keeps the plan's lookback before
the window's start, so nodes that need history (rolling, time shift, alignment) see it.

A live micro-batch re-evaluates each group only from where its new (or late) points can change the
output (`Node.changed_from`, `OutputNode.update_groups`, nodes/base.py); a back-fill evaluates
whole. The held history starts at `held_from`, the window's start less the nodes' lookback rounded
down to a multiple of the plan's `history_step_ns`: it moves once per step, not per batch, so a
derivative's first point or a range that began before the window is the same whether the
computation is fresh or has run for hours, and a tree whose output depends on where the held
history starts (`Node.head_stable`) is re-evaluated whole only when that start moves."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from compute.evaluation import cost
from compute.evaluation.compiler.plan import Plan
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes import EvalEnv, GroupKey
from compute.evaluation.nodes.base import UNCHANGED, lead_ns
from compute.evaluation.nodes.cross_group import changes_by_group
from compute.evaluation.results import (
    OPEN_END,
    AggregatedRanges,
    DoubleArrayPoints,
    EnumBuckets,
    EnumPoints,
    EnumValue,
    LogPoints,
    MultivariateBuckets,
    NumericBuckets,
    NumericPoints,
    NumericValue,
    Output,
    Ranges,
    RangeValue,
    SinglePoint,
    StringArrayPoints,
    StructPoints,
)
from compute.evaluation.window import SeriesWindow
from compute.storage.series import SeriesInfo, SeriesKind

# The kinds whose points are JSON texts, numbered with the log lines (one numbering of stored texts)
TEXT_POINTS: dict[SeriesKind, type[EnumPoints]] = {
    SeriesKind.LOG: LogPoints,
    SeriesKind.DOUBLE_ARRAY: DoubleArrayPoints,
    SeriesKind.STRING_ARRAY: StringArrayPoints,
    SeriesKind.STRUCT: StructPoints,
}

# A computation's log lines are numbered apart from its enum labels (only log nodes read them, and no
# output holds their codes), and renumbered, those no window holds any more forgotten, once they
# number more than this and twice those held: log lines are mostly distinct, so kept for ever they
# would grow with every line the computation has seen (docs/decisions/0071-log-points.md).
MIN_LOG_LINES_KEPT = 4096
DEFAULT_LATENESS_NS = 100_000_000  # Nominal's default: 100 ms behind the newest point of the series
SHARED: GroupKey = ()  # in a grouped plan: the inputs of channels every group reads

__all__ = ["Change", "Computation", "GroupKey", "LateDrops", "RowFacts", "Rows"]

LATE_HISTORY = 256  # drop events remembered for `LateDrops.newest_since` (ten micro-batches a second)

# Output kinds the diff tells apart, as tuples: `A | B` would build a union object on every call
_POINTS = (NumericPoints, EnumPoints)
_RANGES = (Ranges, AggregatedRanges)
_BUCKETS = (NumericBuckets, EnumBuckets, MultivariateBuckets)
_VALUES = (NumericValue, EnumValue, SinglePoint)


@dataclass(frozen=True)
class RowFacts:
    """What every reader of a series' rows asks of them first. A micro-batch hands the same `Rows` to
    every computation reading the series (a hundred in workload 2b), so these are computed once per
    series and batch, not once per computation."""

    count: int
    seq_max: int
    seq_min: int
    ts_min: int
    ts_max: int
    increasing: bool  # timestamps strictly increasing in write order (the common case)

    @classmethod
    def of(cls, seq: np.ndarray, ts: np.ndarray) -> RowFacts:
        if not len(ts):
            return cls(0, 0, 0, 0, 0, True)
        increasing = bool(np.all(ts[1:] > ts[:-1]))
        low, high = (int(ts[0]), int(ts[-1])) if increasing else (int(ts.min()), int(ts.max()))
        return cls(len(ts), int(seq.max()), int(seq.min()), low, high, increasing)


@dataclass
class Rows:
    """One series' points from a micro-batch or back-fill, in write (seq) order. Never written after
    it is made (its facts are computed once)."""

    seq: np.ndarray
    ts: np.ndarray
    values: np.ndarray  # float64, or object (str) for enum series
    # A back-fill read's buffers that ts and values are views of, with room after them that nothing
    # else holds: the first window to take these rows whole appends into them (then None).
    buffers: tuple[np.ndarray, np.ndarray] | None = None
    _facts: RowFacts | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def facts(self) -> RowFacts:
        if self._facts is None:
            self._facts = RowFacts.of(self.seq, self.ts)
        return self._facts


Batch = dict[int, Rows]  # series id -> its rows of a read


@dataclass(frozen=True)
class Change:
    start: int  # ns: the append reaches back to here
    end: int
    full: bool  # the result's type changed (or a group appeared): a FullResult is due


class LateDrops:
    """Points dropped as late: how many (never decreasing), the newest timestamp among them, how many
    per data source, and the last drop events, so that the newest timestamp among the drops after
    any recent count can be told (app/fanout/late_reports.py: each subscriber is told its own).

    Not thread-safe: its owner guards it (`Computation.lock`, or the event loop for a mirror)."""

    __slots__ = ("_events", "_forgotten", "by_source", "count", "newest")

    def __init__(self) -> None:
        self.count = 0
        self.newest: int | None = None
        self.by_source: dict[str, int] = {}  # data source rid -> points dropped
        self._events: deque[tuple[int, int]] = deque()  # (count after the event, its newest ts)
        self._forgotten = 0  # the count up to which events were let go

    def add(self, points: int, newest: int | None, source: str | None = None) -> None:
        if points <= 0:
            return
        self.count += points
        if source is not None:
            self.by_source[source] = self.by_source.get(source, 0) + points
        if newest is not None:
            self.newest = newest if self.newest is None else max(self.newest, newest)
            self._events.append((self.count, newest))
            if len(self._events) > LATE_HISTORY:
                self._forgotten = self._events.popleft()[0]

    def newest_since(self, count: int) -> int | None:
        """The newest timestamp among the points dropped after the first `count` (None: none since).
        Past the remembered events, the newest of all drops stands in (an upper bound)."""
        if count >= self.count:
            return None
        newest: int | None = None
        for after, ts in reversed(self._events):
            if after <= count:
                return newest
            newest = ts if newest is None else max(newest, ts)
        if count < self._forgotten:
            return self.newest
        return newest


@dataclass
class _Route:
    input_index: int
    group: GroupKey
    kind: SeriesKind


@dataclass
class _Group:
    windows: dict[int, SeriesWindow] = field(default_factory=dict)
    # the input indices whose coded window holds stored texts (log lines, arrays, structs), and the
    # points class each is read as
    texts: dict[int, type[EnumPoints]] = field(default_factory=dict)


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
        # stored texts (log lines, arrays, structs) by code, renumbered by `_forget_log_lines`
        self.log_lines: list[str] = []
        self._log_index: dict[str, int] = {}
        self._log_lines_checked_at = MIN_LOG_LINES_KEPT  # the count past which they are next looked at
        self.newest_seen: dict[int, int] = {}  # series id -> newest timestamp accepted
        self.backfill_seq = 0  # stream rows at or below this seq are already in the back-fill
        # Per series, when a back-fill's series are whole through different seqs (one served from
        # what the process follows, compute/spark/followed_series.py); backfill_seq is then the
        # highest of them, and a series routed after the back-fill has none of its rows in it.
        self.backfill_marks: dict[int, int] | None = None
        self.ready = False
        self._buffered: list[tuple[Batch, int]] = []
        self.end = 0  # the newest `end` announced; never goes backwards
        self.error: ComputeError | None = None
        self.late = LateDrops()  # points left out as later than the allowed lateness (kept in the log)
        self._source_of: dict[int, str] = {}  # series id -> its data source rid
        self.applied_seq = 0  # the newest log seq applied (the back-fill's mark, then stream rows)
        self.updated_at: int | None = None  # unix ns of the last evaluation (a back-fill or a batch)
        self.epoch = 0  # bumped by reset(): a back-fill started before it is stale
        self._changed: dict[GroupKey, int] = {}  # per group: the oldest point applied since evaluated
        self._head_stable = plan.root.input.head_stable()
        self._lead_ns = lead_ns(plan.root.input)
        # Groups routed (max_groups, compute/evaluation/cost.py), and the series left unrouted
        # because their group would pass it: the next evaluation fails on them.
        self._group_keys: set[GroupKey] = set()
        self._unrouted = 0

    # -- wiring ------------------------------------------------------------------------------------
    def route(self, info: SeriesInfo) -> bool:
        """Start reading a series if one of the plan's channels selects it."""
        routes = [
            _Route(i, sel.group_of(info.key), info.kind)
            for i, sel in enumerate(self.plan.selectors)
            if sel.matches(info.key)
        ]
        if routes and self.plan.grouped:
            new = {r.group for r in routes if r.group != SHARED} - self._group_keys
            if new and len(self._group_keys) + len(new) > cost.budget().max_groups:
                self._unrouted += 1  # its points are never held: the evaluation fails instead
                return False
            self._group_keys |= new
        if routes:
            self.routes[info.id] = routes
            self._source_of[info.id] = info.key.data_source_rid
        return bool(routes)

    # -- what it holds (the directory of live computations, late reports) ---------------------------
    @property
    def late_dropped(self) -> int:
        """Points dropped as late since the computation started (never decreases)."""
        return self.late.count

    def late_newest_since(self, dropped: int) -> int | None:
        """The newest timestamp among the points dropped as late after the first `dropped`."""
        with self.lock:
            return self.late.newest_since(dropped)

    def late_by_source(self) -> dict[str, int]:
        """Points dropped as late per data source rid, since the computation started."""
        with self.lock:
            return dict(self.late.by_source)

    def points_held(self) -> tuple[int, int]:
        """(points in the windows of its input series, points/buckets/ranges in its output)."""
        with self.lock:
            window = sum(len(w) for g in self.groups.values() for w in g.windows.values())
            return window, sum(len(out) for out in self.outputs.values())

    # -- updates -----------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the window (the stream restarted); a new back-fill rebuilds it. The last outputs
        stay until then, so a frame built meanwhile is stale, never malformed."""
        with self.lock:
            self.epoch += 1
            self.groups = {}
            self.newest_seen = {}
            self._buffered = []
            self._changed = {}
            self.error = None
            self.ready = False

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
            self._apply(rows, now, live=False)
            self.applied_seq = max(self.applied_seq, self.backfill_seq)
            for buffered, at in self._buffered:
                self._apply(self._after_backfill(buffered), at, live=True)
            self._buffered.clear()
            self.ready = True
            self.end = max(self.end, now)
            self._evaluate(now, whole=True)

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
            before = self.outputs  # replaced, never changed in place, by `_evaluate`
            accepted_from = self._apply(rows, now, live=True)
            if accepted_from is None:
                return None
            cpu_from = time.thread_time()
            self._evaluate(now, whole=False)
            try:  # one that overran would take as much again with every batch, delaying the others
                cost.check_cpu(time.thread_time() - cpu_from)
            except ComputeError as exc:
                self.error = exc
                raise
            return self._diff(before, now)

    def _after_backfill(self, rows: Batch) -> Batch:
        """The rows with seq above the back-fill's mark (the back-fill holds the others)."""
        if all(r.facts.seq_min > self.backfill_seq for r in rows.values()):
            return rows  # the common case once live: nothing to cut, no new dict
        marks = self.backfill_marks
        out: Batch = {}
        for sid, r in rows.items():
            after = _after(r, self.backfill_seq if marks is None else marks.get(sid, 0))
            if after is not None:
                out[sid] = after
        return out

    def _apply(self, rows: Batch, now: int, live: bool) -> int | None:
        """Merge rows into the windows; return the oldest accepted timestamp (None if nothing)."""
        oldest: int | None = None
        for sid, r in rows.items():
            ts, values, facts = r.ts, r.values, r.facts
            if not facts.count:
                continue
            self.applied_seq = max(self.applied_seq, facts.seq_max)
            first, newest, increasing = facts.ts_min, facts.ts_max, facts.increasing
            if live and not self._all_accepted(sid, facts, now):
                keep = self._accepted(sid, ts, now)
                if not keep.all():
                    late = ts[~keep]
                    self.late.add(len(late), int(late.max()), self._source_of.get(sid))
                    ts, values = ts[keep], values[keep]
                    if not len(ts):
                        continue
                    first, newest = int(ts.min()), int(ts.max())
            self.newest_seen[sid] = max(self.newest_seen.get(sid, newest), newest)
            oldest = first if oldest is None else min(oldest, first)
            for route in self.routes.get(sid, ()):
                self._changed[route.group] = min(self._changed.get(route.group, UNCHANGED), first)
                group = self.groups.get(route.group)  # (setdefault would build a default every batch)
                if group is None:
                    group = self.groups[route.group] = _Group()
                window = group.windows.get(route.input_index)
                if route.kind is not SeriesKind.NUMERIC:  # string labels and stored texts, coded alike
                    if window is None:
                        window = group.windows[route.input_index] = SeriesWindow(np.int32)
                        if route.kind in TEXT_POINTS:
                            group.texts[route.input_index] = TEXT_POINTS[route.kind]
                    if route.input_index in group.texts:
                        window.insert(ts, _coded(values, self.log_lines, self._log_index))
                    else:
                        window.insert(ts, self._codes(values))
                else:
                    if window is None:
                        window = group.windows[route.input_index] = SeriesWindow(np.float64)
                    numeric = values.astype(np.float64, copy=False)
                    if r.buffers is not None and window.adopt(ts, numeric, *r.buffers):
                        r.buffers = None  # this window appends into them now: no other may
                    else:
                        window.insert(ts, numeric, increasing)
        return oldest

    def _all_accepted(self, sid: int, facts: RowFacts, now: int) -> bool:
        """Whether every one of these rows is within the allowed lateness, told from their facts
        alone (no per-point work): the common case of points newer than what the series had."""
        if self.allowed_lateness_ns is not None:
            return facts.ts_min + self.allowed_lateness_ns >= now
        if not facts.increasing:
            return False
        prior = self.newest_seen.get(sid)  # increasing: only the newest point before them can refuse one
        return prior is None or facts.ts_min >= prior - DEFAULT_LATENESS_NS

    def _accepted(self, sid: int, ts: np.ndarray, now: int) -> np.ndarray:
        if self.allowed_lateness_ns is not None:
            return ts + self.allowed_lateness_ns >= now
        prior = self.newest_seen.get(sid)
        if not len(ts):
            return np.ones(0, bool)
        newest_before = np.empty_like(ts)  # the newest timestamp written before each point
        newest_before[0] = prior if prior is not None else ts[0]
        np.maximum.accumulate(ts[:-1], out=newest_before[1:])
        if prior is not None:
            np.maximum(newest_before, prior, out=newest_before)
        return ts >= newest_before - DEFAULT_LATENESS_NS

    def _forget_log_lines(self, keep_from: int) -> None:
        """Renumber the log lines the log windows still hold (from `keep_from` on), forgetting the
        others, once they are more than MIN_LOG_LINES_KEPT and twice those held. Looked at only once
        their count has doubled since the last look, so the look (a pass over the held codes) costs
        each line O(1) however large the window."""
        lines = self.log_lines
        if len(lines) <= max(MIN_LOG_LINES_KEPT, self._log_lines_checked_at):
            return
        self._log_lines_checked_at = 2 * len(lines)
        windows = [g.windows[i] for g in self.groups.values() for i in g.texts if i in g.windows]
        for window in windows:
            window.trim_before(keep_from)
        held = np.unique(np.concatenate([w.values for w in windows])) if windows else np.empty(0, np.int32)
        if len(lines) <= 2 * len(held):
            return
        renumbered = np.full(len(lines), -1, np.int32)
        renumbered[held] = np.arange(len(held), dtype=np.int32)
        for window in windows:
            window.values[:] = renumbered[window.values]  # in place: no view of it is held between batches
        self.log_lines = [lines[code] for code in held.tolist()]
        self._log_index = {text: code for code, text in enumerate(self.log_lines)}
        self._log_lines_checked_at = 2 * len(self.log_lines)

    def _codes(self, values: np.ndarray) -> np.ndarray:
        return _coded(values, self.categories, self._category_index)

    def held_from(self, now: int) -> int:
        """Where the held history starts at `now`: at least the nodes' lookback before the window,
        on a multiple of the plan's step (so it moves once per step)."""
        step = self.plan.history_step_ns
        return (now - self.plan.window_ns - self.plan.lookback_ns) // step * step

    def _evaluate(self, now: int, whole: bool) -> None:
        if self._unrouted:
            self.error = cost.too_many_groups(len(self._group_keys), self._unrouted)
            raise self.error
        window_start = now - self.plan.window_ns
        keep_from = self.held_from(now)
        self._forget_log_lines(keep_from)
        # Only dropped points change what a head-unstable tree sees: a held start that moves over no
        # point (history shorter than the window) leaves every input as it was.
        trimmed = False
        changed, self._changed = self._changed, {}
        inputs: dict[GroupKey, dict[int, NumericPoints | EnumPoints]] = {}
        for key, group in self.groups.items():
            series: dict[int, NumericPoints | EnumPoints] = {}
            for index, window in group.windows.items():
                trimmed = window.trim_before(keep_from) > 0 or trimmed
                if index in group.texts:
                    series[index] = group.texts[index](window.ts, window.values, self.log_lines)
                elif window.dtype == np.int32:
                    series[index] = EnumPoints(window.ts, window.values, self.categories)
                else:
                    series[index] = NumericPoints(window.ts, window.values)
            inputs[key] = series
        if self.plan.grouped:
            shared = inputs.pop(SHARED, {})
            envs = {
                key: EvalEnv(
                    {**shared, **series}, window_start, now, self.categories, keep_from, self._lead_ns
                )
                for key, series in inputs.items()
            }
            everywhere = changed.get(SHARED, UNCHANGED)  # a channel every group reads
        else:
            envs = {
                SHARED: EvalEnv(
                    inputs.get(SHARED, {}), window_start, now, self.categories, keep_from, self._lead_ns
                )
            }
            everywhere = UNCHANGED
        if (
            trimmed
            and not self._head_stable
            and not all(self.plan.root.input.head_settled(env, window_start) for env in envs.values())
        ):
            whole = True  # the output near the window's start depends on where history starts
        self.updated_at = time.time_ns()
        try:
            if whole:
                self.outputs = self.plan.root.evaluate_groups(envs)
            else:
                node = self.plan.root.input
                leaves = {k: min(changed.get(k, UNCHANGED), everywhere) for k in envs}
                since = changes_by_group(node, leaves, envs)  # each group's changed_from, across groups
                self.outputs = self.plan.root.update_groups(envs, since)
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
            start, vanished = _settled_change(out, old, window_start)
            if start is not None:
                starts.append(start)
                full = full or not out.appendable or vanished
        if not starts and not full:
            return None
        start = max(min(starts, default=window_start), window_start)
        # The append reaches the newest timestamp any output holds, which can be after the clock (a
        # padded range's end; a point stamped ahead of the server's clock, which can start an open
        # range or be the last value), and never ends before it starts.
        end = max(self.end, now, start)
        for o in self.outputs.values():
            newest = _newest(o)
            if newest is not None and newest > end:
                end = newest
        self.end = end
        return Change(start=start, end=end, full=full)

    # -- reading (the event loop builds frames from these) -----------------------------------------
    def snapshot(self, since: int | None) -> dict[GroupKey, Output]:
        """Current outputs, cut to the part from `since` on (None: the whole window)."""
        with self.lock:
            if since is None:
                return dict(self.outputs)
            return {k: v.since(since) for k, v in self.outputs.items()}


def _newest(out: Output) -> int | None:
    """The newest timestamp an output holds: its last point or value, the last range's start or
    closed end. None for buckets (an append of buckets is spanned by their changes) and charts."""
    if isinstance(out, _POINTS):
        return int(out.ts[-1]) if len(out) else None
    if isinstance(out, _VALUES):
        return out.ts
    if isinstance(out, _RANGES):
        return max((int(t) for t in (*out.starts[-1:], *out.ends[-1:]) if t != OPEN_END), default=None)
    if isinstance(out, RangeValue):
        return out.start if out.end == OPEN_END else max(out.start, out.end)
    return None


def _settled(out: Output, window_start: int) -> Output:
    """The part of an output that only new points can change: a bucket cut by the window's start
    changes as time passes, and clients trim it themselves, so it is not announced as a change."""
    if isinstance(out, _BUCKETS):
        return out.since(window_start + out.width - 1)
    if isinstance(out, Ranges):
        return out.clip(window_start)
    return out.since(window_start)


def _settled_change(out: Output, old: Output, window_start: int) -> tuple[int | None, bool]:
    """Where the settled parts (`_settled`) of two outputs of one kind first differ, and whether a
    bucket the client holds vanished. Points and float buckets (most outputs) are cut by index
    inside `first_change`, with no cut outputs built: this runs for every computation every batch."""
    if isinstance(out, NumericPoints) and isinstance(old, NumericPoints):
        return out.first_change(old, since=window_start), False
    if isinstance(out, NumericBuckets) and isinstance(old, NumericBuckets) and out.width == old.width:
        cut = window_start + out.width - 1
        start = out.first_change(old, since=cut)
        if start is None:
            return None, False
        ends = out.end[int(out.end.searchsorted(cut, side="right")) :]
        old_ends = old.end[int(old.end.searchsorted(cut, side="right")) :]
        return start, _bucket_vanished(ends, old_ends, start)
    settled, settled_old = _settled(out, window_start), _settled(old, window_start)
    start = settled.first_change(settled_old)  # type: ignore[arg-type]
    if start is None:
        return None, False
    if isinstance(settled, _BUCKETS) and isinstance(settled_old, _BUCKETS):
        return start, _bucket_vanished(settled.end, settled_old.end, start)
    return start, False


def _bucket_vanished(ends: np.ndarray, old_ends: np.ndarray, start: int) -> bool:
    """Whether a bucket the client holds (after `start`, inside the window: one of `old_ends`) is
    gone from `ends`. An append of buckets replaces the client's buckets with the same end and
    removes none, so a bucket left empty (its points dropped: a derivative's first point losing the
    point before it when the held history's start moves, an overwrite a filter now rejects) needs a
    FullResult."""
    held = old_ends[int(old_ends.searchsorted(start, side="right")) :]  # ascending: those after `start`
    if not len(held):
        return False
    if not len(ends):
        return True
    at = ends.searchsorted(held)  # both ascending: a binary search, not np.isin's sort
    return not bool((ends[np.minimum(at, len(ends) - 1)] == held).all())


def _after(r: Rows, seq: int) -> Rows | None:
    facts = r.facts
    if not facts.count or facts.seq_max <= seq:
        return None
    if facts.seq_min > seq:
        return r  # the same object: its facts stay shared with the series' other readers
    keep = r.seq > seq
    return Rows(r.seq[keep], r.ts[keep], r.values[keep])


def _coded(values: np.ndarray, labels: list[str], index: dict[str, int]) -> np.ndarray:
    """Each value's code in `labels` (by `index`), a new label appended to both."""
    codes = np.empty(len(values), np.int32)
    for i, v in enumerate(values.tolist()):
        code = index.get(v)
        if code is None:
            code = index[v] = len(labels)
            labels.append(v)
        codes[i] = code
    return codes
