"""A series' points inside a computation's window: sorted numpy columns, late points merged in place,
a newer write at the same timestamp replacing the older one."""

from __future__ import annotations

import numpy as np


class SeriesWindow:
    __slots__ = ("ts", "values")

    def __init__(self, dtype: type = np.float64) -> None:
        self.ts: np.ndarray = np.empty(0, np.int64)
        self.values: np.ndarray = np.empty(0, dtype)

    def insert(self, ts: np.ndarray, values: np.ndarray) -> None:
        """Merge points given in write order (later rows win on equal timestamps)."""
        if not len(ts):
            return
        in_order = bool(np.all(ts[1:] > ts[:-1])) and (not len(self.ts) or ts[0] > self.ts[-1])
        if in_order:  # the common case: new points after the newest one
            self.ts = np.concatenate([self.ts, ts])
            self.values = np.concatenate([self.values, values])
            return
        all_ts = np.concatenate([self.ts, ts])
        all_values = np.concatenate([self.values, values])
        order = np.argsort(all_ts, kind="stable")  # stable: equal timestamps keep write order
        all_ts, all_values = all_ts[order], all_values[order]
        keep = np.r_[all_ts[1:] != all_ts[:-1], True]  # the last write of each timestamp
        self.ts, self.values = all_ts[keep], all_values[keep]

    def trim_before(self, t: int) -> None:
        i = int(np.searchsorted(self.ts, t, side="left"))
        if i:
            self.ts, self.values = self.ts[i:], self.values[i:]

    def __len__(self) -> int:
        return len(self.ts)
