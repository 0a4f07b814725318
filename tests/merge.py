"""A client-side merge of FullResult + AppendResults, written from docs/protocol.md for the tests
(independent of the server's code), and reference computations over raw points."""

from __future__ import annotations

import math
from typing import Any

from tests.wire import ns_of

MS = 1_000_000


class MergedView:
    """The current window as a client sees it after applying every update."""

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self.kind: str | None = None
        self.points: dict[int, Any] = {}  # ts -> value (numeric) or bucket (bucketed)
        self.categories: list[str] = []
        self.latest_end = 0

    def apply(self, update: dict[str, Any]) -> None:
        if update["type"] == "full":
            result = update["full"]["result"]
            self.kind = result["type"]
            self.points = dict(_entries(result))
            self.categories = list(result[self.kind].get("categories", []))
        elif update["type"] == "append":
            append = update["append"]
            result = append["result"]
            assert result["type"] == self.kind, f"append of {result['type']} onto {self.kind}"
            start, end = ns_of(append["start"]), ns_of(append["end"])
            assert end >= self.latest_end, "an append's end went backwards"
            self.latest_end = end
            entries = dict(_entries(result))
            if self.kind in ("numeric", "enum"):
                self.points = {t: v for t, v in self.points.items() if not start <= t <= end}
            self.points.update(entries)
            self.categories = list(result[self.kind].get("categories", self.categories))
            cutoff = self.latest_end - self.window_ns
            self.points = {t: v for t, v in self.points.items() if t >= cutoff}
        else:
            raise AssertionError(f"unexpected update {update['type']}: {update}")

    def point_count(self) -> int:
        """How many raw points the view reflects (bucket counts summed for bucketed results)."""
        if self.kind in ("bucketedNumeric", "bucketedEnum"):
            return sum(
                b["count"] if "count" in b else sum(b["histogram"].values()) for b in self.points.values()
            )
        return len(self.points)

    def as_sorted(self) -> list[tuple[int, Any]]:
        return sorted(self.points.items())


def _entries(result: dict[str, Any]) -> list[tuple[int, Any]]:
    kind = result["type"]
    body = result[kind]
    stamps = [ns_of(t) for t in body["timestamps"]]
    if kind == "numeric":
        return list(zip(stamps, body["values"], strict=True))
    if kind == "enum":
        return [(t, body["categories"][v]) for t, v in zip(stamps, body["values"], strict=True)]
    return list(zip(stamps, body["buckets"], strict=True))


def full_entries(update: dict[str, Any]) -> tuple[str, list[tuple[int, Any]]]:
    assert update["type"] == "full", update["type"]
    result = update["full"]["result"]
    return result["type"], sorted(_entries(result))


def bucket_width(window_ns: int, buckets: int) -> int:
    return max(MS, math.ceil(math.ceil(window_ns / buckets) / MS) * MS)


def reference_buckets(points: list[tuple[int, float]], width: int) -> list[tuple[int, dict[str, Any]]]:
    """Epoch-aligned buckets (timestamp = exclusive end) computed the plain way."""
    groups: dict[int, list[tuple[int, float]]] = {}
    for t, v in sorted(points):
        groups.setdefault(t // width, []).append((t, v))
    out = []
    for b, pts in sorted(groups.items()):
        values = [v for _, v in pts]
        mean = sum(values) / len(values)
        out.append(
            (
                (b + 1) * width,
                {
                    "min": min(values),
                    "max": max(values),
                    "mean": mean,
                    "count": len(values),
                    "variance": sum((v - mean) ** 2 for v in values) / len(values),
                    "first": pts[0],
                    "last": pts[-1],
                },
            )
        )
    return out


def assert_bucket_matches(wire: dict[str, Any], ref: dict[str, Any]) -> None:
    assert wire["count"] == ref["count"]
    for field in ("min", "max", "mean", "variance"):
        assert math.isclose(wire[field], ref[field], rel_tol=1e-9, abs_tol=1e-9), (field, wire, ref)
    if ref["count"] > 1:
        assert (ns_of(wire["firstPoint"]["timestamp"]), wire["firstPoint"]["value"]) == ref["first"]
        assert (ns_of(wire["lastPoint"]["timestamp"]), wire["lastPoint"]["value"]) == ref["last"]
    else:
        assert wire.get("firstPoint") is None and wire.get("lastPoint") is None
