"""The export's decimation (app/api/export.py `decimate`, `resolution_step`) against nominal-api's
ResolutionOption: "the mean of the values will be used for numeric types and the mode of the values
will be used for enum types", per bucket [start + i * step, start + (i + 1) * step) stamped at its
start; of equally frequent labels the first in sort order (docs/decisions/0083). References are
computed here point by point in plain Python."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from app.api.export import resolution_step
from app.api.export_csv import decimate
from app.http.errors import HttpError
from compute.storage.series import SeriesKind


def test_numeric_buckets_are_means_at_their_start() -> None:
    rng = np.random.default_rng(3)
    start, step = 1_000_000_123, 250
    ts = np.sort(rng.choice(np.arange(start, start + 10_000), 600, replace=False)).astype(np.int64)
    values = rng.normal(size=600)
    got_ts, got = decimate(ts, values, SeriesKind.NUMERIC, start, step)
    buckets: dict[int, list[float]] = {}
    for t, v in zip(ts.tolist(), values.tolist(), strict=True):
        buckets.setdefault((t - start) // step, []).append(v)
    assert got_ts.tolist() == [start + k * step for k in sorted(buckets)]
    assert got.tolist() == pytest.approx([sum(buckets[k]) / len(buckets[k]) for k in sorted(buckets)])


def test_enum_buckets_are_modes_ties_to_the_first_label() -> None:
    start, step = 0, 10
    points = [(0, "b"), (1, "a"), (2, "b"), (3, "a"), (12, "z"), (15, "c"), (19, "z"), (35, "q")]
    ts = np.array([t for t, _ in points], dtype=np.int64)
    values = np.array([v for _, v in points], dtype=object)
    got_ts, got = decimate(ts, values, SeriesKind.ENUM, start, step)
    want: dict[int, Counter[str]] = {}
    for t, v in points:
        want.setdefault(t // step, Counter())[v] += 1
    modes = [min(c for c, n in cnt.items() if n == max(cnt.values())) for _, cnt in sorted(want.items())]
    assert got_ts.tolist() == [k * step for k in sorted(want)] == [0, 10, 30]
    assert list(got) == modes == ["a", "z", "q"]


def test_resolution_steps() -> None:
    assert resolution_step({"type": "undecimated", "undecimated": {}}, 0, 100) is None
    assert resolution_step({"type": "nanoseconds", "nanoseconds": 7}, 0, 100) == 7
    assert resolution_step({"type": "buckets", "buckets": 7}, 0, 100) == 15  # ceil(100 / 7)
    assert resolution_step({"type": "buckets", "buckets": 7}, 5, 5) == 1
    for bad in ({"type": "buckets", "buckets": 0}, {"type": "nanoseconds", "nanoseconds": -1}):
        with pytest.raises(HttpError):
            resolution_step(bad, 0, 100)
