"""Multi-input alignment, Nominal's default: forward fill with a 1 s radius. The output has a point
at every timestamp of the union of the inputs' timestamps where each input has a value at or before
it that is no older than the radius."""

from __future__ import annotations

import numpy as np

from compute.evaluation.results import NumericPoints

FFILL_RADIUS_NS = 1_000_000_000


def forward_fill(
    series: list[NumericPoints], radius_ns: int = FFILL_RADIUS_NS
) -> tuple[np.ndarray, list[np.ndarray]]:
    """(timestamps, each input's value at them)."""
    if len(series) == 1:
        return series[0].ts, [series[0].values]
    first = series[0].ts
    if all(len(s.ts) == len(first) and bool((s.ts == first).all()) for s in series[1:]):
        # Channels sampled together (the common case): each input has its own point at every
        # timestamp of the union, so no sort and no search (~40x cheaper on 5,000 points).
        return first, [s.values for s in series]
    ts = np.sort(np.concatenate([s.ts for s in series]))  # (np.union1d is ~50x slower in numpy 2.4)
    ts = ts[np.r_[True, ts[1:] != ts[:-1]]] if len(ts) else ts
    ok = np.ones(len(ts), bool)
    picks = []
    for s in series:
        if not len(s.ts):
            ok[:] = False
            picks.append(np.zeros(len(ts), np.int64))
            continue
        idx = np.searchsorted(s.ts, ts, side="right") - 1
        valid = idx >= 0
        idx = np.where(valid, idx, 0)
        ok &= valid & (ts - s.ts[idx] <= radius_ns)
        picks.append(idx)
    return ts[ok], [
        s.values[idx[ok]] if len(s.ts) else s.values[:0] for s, idx in zip(series, picks, strict=True)
    ]
