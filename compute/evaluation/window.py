"""A series' points inside a computation's window: sorted numpy columns, late points merged, a newer
write at the same timestamp replacing the older one.

Points arriving in order (the common case) are appended into spare room at the end of the columns,
and trimming only moves the start, so a micro-batch costs what it adds, not the whole window: with
100 computations over 120 s of a 1 kHz channel, copying whole windows on every batch was ~6% of the
server's fan-out profile. A batch written out of order (writers with several requests in flight)
but newer than the window is sorted on its own and appended the same way; one reaching back into
the window merges only the held points from its oldest on (docs/decisions/0086). Whatever `ts` and
`values` returned earlier stays valid and unchanged: appends write past their end, and any reshuffle
goes to new arrays.

A back-fill's read can hand its columns over in buffers with that spare room already after them
(`adopt`): an hour-long window of a 1 kHz channel then costs no copy of its 58 MB, which was three
quarters of the back-fill's time with 20 hour windows back-filled at once (docs/decisions/0042).
"""

from __future__ import annotations

import numpy as np

MIN_CAPACITY = 1024


def spare_room(points: int) -> int:
    """The room kept after a window's points: a quarter more, so copies stay amortized (a window is
    copied once per quarter of it appended) and an hour-long window of a 1 kHz channel holds 1.25x
    its 58 MB, not 2x (docs/decisions/0032)."""
    return max(MIN_CAPACITY, points // 4)


class SeriesWindow:
    __slots__ = ("_end", "_start", "_ts", "_values")

    def __init__(self, dtype: type = np.float64) -> None:
        self._ts: np.ndarray = np.empty(0, np.int64)
        self._values: np.ndarray = np.empty(0, dtype)
        self._start = self._end = 0

    @property
    def ts(self) -> np.ndarray:
        return self._ts[self._start : self._end]

    @property
    def values(self) -> np.ndarray:
        return self._values[self._start : self._end]

    @property
    def dtype(self) -> np.dtype:
        return self._values.dtype

    def replace(self, ts: np.ndarray, values: np.ndarray) -> None:
        """Take these sorted, de-duplicated columns as the whole window."""
        self._ts, self._values = ts, values
        self._start, self._end = 0, len(ts)

    def adopt(
        self, ts: np.ndarray, values: np.ndarray, ts_buffer: np.ndarray, values_buffer: np.ndarray
    ) -> bool:
        """Take sorted, distinct columns as the whole window without copying them, keeping the buffers
        they are views of to append into; False (nothing taken) unless the window is empty and the
        columns are such views, in order. The caller vouches that nothing else writes the buffers or
        holds a view past the columns' end."""
        start = _offset(ts, ts_buffer)
        if len(self) or start is None or start != _offset(values, values_buffer):
            return False
        if values_buffer.dtype != self._values.dtype or len(values) != len(ts):
            return False
        if not bool(np.all(ts[1:] > ts[:-1])):
            return False
        self._ts, self._values = ts_buffer, values_buffer
        self._start, self._end = start, start + len(ts)
        return True

    def insert(self, ts: np.ndarray, values: np.ndarray, increasing: bool | None = None) -> None:
        """Merge points given in write order (later rows win on equal timestamps). `increasing`:
        whether `ts` is strictly increasing, when the caller knows already (None: checked here)."""
        n = len(ts)
        if not n:
            return
        if increasing is None:
            increasing = bool(np.all(ts[1:] > ts[:-1]))
        if not increasing:  # e.g. writers with several requests in flight, committed out of order
            ts, values = _last_writes(ts, values)
            n = len(ts)
        if self._end == self._start or ts[0] > self._ts[self._end - 1]:
            # the common case: new points after the newest one (also once a batch written out of
            # order is sorted: it costs its own points, not the window's)
            if self._end + n > len(self._ts):
                self._regrow(n)
            self._ts[self._end : self._end + n] = ts
            self._values[self._end : self._end + n] = values
            self._end += n
            return
        # A point older than the newest held one: only the held points from it on are merged; the
        # ones before it are copied as they are (views handed out earlier keep the old arrays).
        keep = int(self.ts.searchsorted(ts[0], side="left"))
        tail_ts, tail_values = _last_writes(  # held first: a new write wins at an equal timestamp
            np.concatenate([self.ts[keep:], ts]), np.concatenate([self.values[keep:], values])
        )
        total = keep + len(tail_ts)
        new_ts = np.empty(total + spare_room(total), np.int64)
        new_values = np.empty(len(new_ts), self._values.dtype)
        new_ts[:keep], new_values[:keep] = self.ts[:keep], self.values[:keep]
        new_ts[keep:total], new_values[keep:total] = tail_ts, tail_values
        self._ts, self._values, self._start, self._end = new_ts, new_values, 0, total

    def splice(self, t: int, ts: np.ndarray, values: np.ndarray) -> None:
        """Replace everything from `t` on with these sorted points (all at or after `t`): a live
        computation's output re-evaluated from where its inputs changed. Past the end (the common
        case) it appends; cutting into held points copies the rest to new arrays, so that views
        handed out earlier stay unchanged."""
        keep = int(self.ts.searchsorted(t, side="left"))
        if keep < len(self):
            n = len(ts)
            capacity = keep + n + spare_room(keep + n)
            new_ts, new_values = np.empty(capacity, np.int64), np.empty(capacity, self._values.dtype)
            new_ts[:keep], new_values[:keep] = self.ts[:keep], self.values[:keep]
            new_ts[keep : keep + n], new_values[keep : keep + n] = ts, values
            self._ts, self._values, self._start, self._end = new_ts, new_values, 0, keep + n
            return
        n = len(ts)
        if n:
            if self._end + n > len(self._ts):
                self._regrow(n)
            self._ts[self._end : self._end + n] = ts
            self._values[self._end : self._end + n] = values
            self._end += n

    def _regrow(self, extra: int) -> None:
        """New arrays with `spare_room` after what they will hold (old views keep the old arrays)."""
        live = self._end - self._start
        capacity = live + extra + spare_room(live + extra)
        ts = np.empty(capacity, np.int64)
        values = np.empty(capacity, self._values.dtype)
        ts[:live], values[:live] = self.ts, self.values
        self._ts, self._values, self._start, self._end = ts, values, 0, live

    def trim_before(self, t: int) -> int:
        """Drop the points before `t`; return how many were dropped."""
        dropped = int(self.ts.searchsorted(t, side="left"))
        self._start += dropped
        return dropped

    def __len__(self) -> int:
        return self._end - self._start


def _last_writes(ts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points in write order -> sorted by time, the last write of each timestamp kept."""
    order = np.argsort(ts, kind="stable")  # stable: equal timestamps keep write order
    ts, values = ts[order], values[order]
    last = np.empty(len(ts), bool)
    last[-1:] = True
    np.not_equal(ts[1:], ts[:-1], out=last[:-1])
    if last.all():
        return ts, values
    return ts[last], values[last]


def _offset(view: np.ndarray, buffer: np.ndarray) -> int | None:
    """Where a one-dimensional contiguous `view` starts inside `buffer`, in items; None when it is not
    a view of it (another array, another dtype, or running past its end)."""
    if view.dtype != buffer.dtype or not (view.flags.c_contiguous and buffer.flags.c_contiguous):
        return None
    if view.ndim != 1 or buffer.ndim != 1 or not buffer.flags.writeable:
        return None
    step = buffer.itemsize
    delta = view.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]
    if delta < 0 or delta % step or delta // step + len(view) > len(buffer):
        return None
    return delta // step
