"""A series' points inside a computation's window: sorted numpy columns, late points merged in place,
a newer write at the same timestamp replacing the older one.

Points arriving in order (the common case) are appended into spare room at the end of the columns,
and trimming only moves the start, so a micro-batch costs what it adds, not the whole window: with
100 computations over 120 s of a 1 kHz channel, copying whole windows on every batch was ~6% of the
server's fan-out profile. Whatever `ts` and `values` returned earlier stays valid and unchanged:
appends write past their end, and any reshuffle goes to new arrays.
"""

from __future__ import annotations

import numpy as np

MIN_CAPACITY = 1024


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

    def replace(self, ts: np.ndarray, values: np.ndarray) -> None:
        """Take these sorted, de-duplicated columns as the whole window."""
        self._ts, self._values = ts, values
        self._start, self._end = 0, len(ts)

    def insert(self, ts: np.ndarray, values: np.ndarray) -> None:
        """Merge points given in write order (later rows win on equal timestamps)."""
        n = len(ts)
        if not n:
            return
        in_order = bool(np.all(ts[1:] > ts[:-1])) and (
            self._end == self._start or ts[0] > self._ts[self._end - 1]
        )
        if in_order:  # the common case: new points after the newest one
            if self._end + n > len(self._ts):
                self._regrow(n)
            self._ts[self._end : self._end + n] = ts
            self._values[self._end : self._end + n] = values
            self._end += n
            return
        all_ts = np.concatenate([self.ts, ts])
        all_values = np.concatenate([self.values, values])
        order = np.argsort(all_ts, kind="stable")  # stable: equal timestamps keep write order
        all_ts, all_values = all_ts[order], all_values[order]
        keep = np.r_[all_ts[1:] != all_ts[:-1], True]  # the last write of each timestamp
        self.replace(all_ts[keep], all_values[keep])

    def _regrow(self, extra: int) -> None:
        """New arrays with a quarter more room than they will hold (old views keep the old arrays):
        copies stay amortized (a window is copied once per quarter of it appended), and an hour-long
        window of a 1 kHz channel holds 1.25x its 58 MB, not 2x (docs/decisions/0032)."""
        live = self._end - self._start
        capacity = live + extra + max(MIN_CAPACITY, (live + extra) // 4)
        ts = np.empty(capacity, np.int64)
        values = np.empty(capacity, self._values.dtype)
        ts[:live], values[:live] = self.ts, self.values
        self._ts, self._values, self._start, self._end = ts, values, 0, live

    def trim_before(self, t: int) -> None:
        self._start += int(np.searchsorted(self.ts, t, side="left"))

    def __len__(self) -> int:
        return self._end - self._start
