"""Latency from the feed's records and the clients' frame records, and percentile summaries."""

from __future__ import annotations

from dataclasses import dataclass

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


def delivery_latency(
    feed: np.ndarray, frames: np.ndarray, t_from: int, t_to: int, subs: list[int] | None = None
) -> Delivery:
    """For each acknowledged write whose 200 came in [t_from, t_to] and each subscription, the time
    from the 200 to the first frame of that subscription that includes the write's newest point.

    feed rows: (sent, t200, newest point ts, points, status); frame rows: (sub, recv, included, full, bytes).
    """
    ok = (feed[:, 4] == 200) & (feed[:, 1] >= t_from) & (feed[:, 1] <= t_to)
    writes = feed[ok]
    measured = frames[frames[:, 2] >= 0]
    sub_ids = np.unique(measured[:, 0]) if subs is None else np.asarray(subs)
    out: list[np.ndarray] = []
    missing = 0
    for s in sub_ids.tolist():
        f = measured[measured[:, 0] == s]
        f = f[np.argsort(f[:, 1], kind="stable")]
        if not len(f):
            missing += len(writes)
            continue
        reach = np.maximum.accumulate(f[:, 2])  # newest point shown by each frame or an earlier one
        idx = np.searchsorted(reach, writes[:, 2], side="left")
        seen = idx < len(f)
        missing += int((~seen).sum())
        out.append((f[idx[seen], 1] - writes[seen, 1]) / 1e6)
    lat = np.concatenate(out) if out else np.empty(0)
    return Delivery(lat, missing)
