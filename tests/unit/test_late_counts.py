"""The late counts a lateReport is made of (tests/server/test_late_reports.py sends them)."""

from __future__ import annotations

from compute.evaluation.computation import LATE_HISTORY, LateDrops


def test_the_newest_late_timestamp_since_a_count() -> None:
    drops = LateDrops()
    assert drops.newest_since(0) is None
    drops.add(2, 50, "ri.a")
    drops.add(3, 20, "ri.b")  # older points dropped later
    assert (drops.count, drops.newest, drops.by_source) == (5, 50, {"ri.a": 2, "ri.b": 3})
    assert drops.newest_since(0) == 50
    assert drops.newest_since(2) == 20  # only the second event's drops
    assert drops.newest_since(5) is None
    for i in range(LATE_HISTORY + 10):  # past what it remembers: the newest of all stands in
        drops.add(1, 10 + i % 3)
    assert drops.newest_since(drops.count - 1) == 10 + (LATE_HISTORY + 9) % 3
    assert drops.newest_since(3) == 50
