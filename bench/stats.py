"""Latency from the feed's records and the clients' frame records, and percentile summaries."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Summary:
    n: int
    p50: float
    p99: float
    max: float

    def as_dict(self) -> dict[str, float]:
        return {
            "n": self.n,
            "p50_ms": round(self.p50, 1),
            "p99_ms": round(self.p99, 1),
            "max_ms": round(self.max, 1),
        }


def summarize(ms: np.ndarray | list[float]) -> Summary:
    a = np.asarray(ms, dtype=np.float64)
    if not len(a):
        return Summary(0, float("nan"), float("nan"), float("nan"))
    return Summary(len(a), float(np.percentile(a, 50)), float(np.percentile(a, 99)), float(a.max()))


@dataclass
class Delivery:
    latencies_ms: np.ndarray  # one per (request, measured subscription)
    missing: int  # requests in the window that a subscription never showed
    # each measured subscription's p99 (ms), in the order of `subs` (or of the subscription numbers)
    p99_by_sub: dict[int, float] = field(default_factory=dict)


def delivery_latency(
    feed: np.ndarray, frames: np.ndarray, t_from: int, t_to: int, subs: list[int] | None = None
) -> Delivery:
    """For each acknowledged write whose 200 came in [t_from, t_to] and each subscription, the time
    from the 200 to the first frame of that subscription that includes the write's newest point.

    feed rows: (sent, t200, newest point ts, points, status); frame rows: (sub, recv, included, full, bytes).
    Frames are sorted once by (subscription, receipt), so 10,000 subscriptions over millions of
    frames cost one sort, not a scan of every frame per subscription.
    """
    ok = (feed[:, 4] == 200) & (feed[:, 1] >= t_from) & (feed[:, 1] <= t_to)
    writes = feed[ok]
    measured = frames[frames[:, 2] >= 0]
    measured = measured[np.lexsort((measured[:, 1], measured[:, 0]))]
    present, starts = np.unique(measured[:, 0], return_index=True)
    ends = [*starts[1:].tolist(), len(measured)] if len(starts) else []  # no frame: every write missing
    bounds = dict(zip(present.tolist(), zip(starts.tolist(), ends, strict=True), strict=True))
    sub_ids = present.tolist() if subs is None else list(subs)
    out: list[np.ndarray] = []
    p99: dict[int, float] = {}
    missing = 0
    for s in sub_ids:
        if s not in bounds:
            missing += len(writes)
            continue
        a, b = bounds[s]
        f = measured[a:b]
        reach = np.maximum.accumulate(f[:, 2])  # newest point shown by each frame or an earlier one
        idx = np.searchsorted(reach, writes[:, 2], side="left")
        seen = idx < len(f)
        missing += int((~seen).sum())
        lat = (f[idx[seen], 1] - writes[seen, 1]) / 1e6
        out.append(lat)
        if len(lat):
            p99[int(s)] = float(np.percentile(lat, 99))
    lat_all = np.concatenate(out) if out else np.empty(0)
    return Delivery(lat_all, missing, p99)
