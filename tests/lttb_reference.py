"""Largest-Triangle-Three-Buckets as Steinarsson (2013) defines it, transcribed from his thesis'
reference procedure: the reference the LTTB tests (unit and server) check Sparkwire's against."""

from __future__ import annotations

import math


def steinarsson(xs: list[float], ys: list[float], threshold: int) -> list[int]:
    """The reference procedure of Steinarsson's thesis (2013), section 4.2 and its published code:
    buckets of `every` = (n - 2) / (threshold - 2) points after the first; in each, the point with
    the largest triangle against the point kept before and the next bucket's average point."""
    n = len(xs)
    if threshold >= n:
        return list(range(n))
    every = (n - 2) / (threshold - 2)
    a, kept = 0, [0]
    for i in range(threshold - 2):
        lo, hi = math.floor((i + 1) * every) + 1, min(math.floor((i + 2) * every) + 1, n)
        avg_x, avg_y = sum(xs[lo:hi]) / (hi - lo), sum(ys[lo:hi]) / (hi - lo)
        best, best_area = -1, -1.0
        for j in range(math.floor(i * every) + 1, math.floor((i + 1) * every) + 1):
            area = abs((xs[a] - avg_x) * (ys[j] - ys[a]) - (xs[a] - xs[j]) * (avg_y - ys[a])) * 0.5
            if area > best_area:
                best, best_area = j, area
        kept.append(best)
        a = best
    return [*kept, n - 1]
