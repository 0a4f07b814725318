"""LTTB, paging and truncation (compute/evaluation/nodes/lttb_paging.py) against references written
from their definitions: Largest-Triangle-Three-Buckets as Steinarsson (2013) defines it (hand
computed on small series, and his reference procedure, tests/lttb_reference.py, on random ones), and
nominal-api's PageInfo / nextPageToken / TruncateStrategy docs (docs/protocol.md, "Points selected
when polled")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import Plan, compile_plan
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes import SummarizeSeries
from compute.evaluation.nodes.lttb_paging import PolledSummary, lttb, lttb_indices, page
from compute.evaluation.results import NumericPoints
from tests import node_json as nj
from tests.lttb_reference import steinarsson

pytestmark = pytest.mark.unit

S = 1_000_000_000
T0 = 1_700_000_000 * S


def points(xs: list[int], ys: list[float]) -> NumericPoints:
    return NumericPoints(np.array(xs, np.int64), np.array(ys, np.float64))


def test_lttb_of_a_small_series_keeps_the_hand_computed_points() -> None:
    # 8 points to 4: every = (8 - 2) / (4 - 2) = 3, buckets {1, 2, 3} and {4, 5, 6}.
    # bucket 1: a = (0, 0), next average (5, 11/3): doubled areas |-5y + 11x/3| = 21.3, 2.3, 1 -> 1
    # bucket 2: a = (1, 5), next average (7, 1): doubled areas |-6(y - 5) + 4(1 - x)| = 30, 14, 8 -> 4
    ys = [0.0, 5.0, 1.0, 2.0, 8.0, 0.0, 3.0, 1.0]
    out = lttb(points([T0 + i * S for i in range(8)], ys), 4)
    assert out.ts.tolist() == [T0, T0 + S, T0 + 4 * S, T0 + 7 * S]
    assert out.values.tolist() == [0.0, 5.0, 8.0, 1.0]


def test_lttb_measures_triangles_in_time_to_the_nanosecond() -> None:
    # 4 points to 3: one bucket {1, 2}, a = (0, 0), next average = the last point (10, 5).
    # In time: doubled areas |-10y + 5x| = 15 (point 1), 5 (point 2) -> point 1. By index instead
    # (x = 0, 1, 2, 3) point 2 would win (1 vs 5.5). The timestamps are ns after 2023: as float64
    # they would all round to one value, so the times must be measured from the first point.
    ys = [0.0, 2.0, 1.5, 5.0]
    out = lttb(points([T0 + x for x in (0, 1, 2, 10)], ys), 3)
    assert out.ts.tolist() == [T0, T0 + 1, T0 + 10]
    assert lttb(points([T0 + x for x in (0, 1, 2, 3)], ys), 3).ts.tolist() == [T0, T0 + 2, T0 + 3]


def test_lttb_equals_steinarssons_procedure_on_random_series() -> None:
    rng = np.random.default_rng(7)
    for n, threshold in ((50, 7), (1000, 100), (1001, 3), (12345, 1000), (300, 299)):
        gaps = rng.integers(1, 5_000_000, n)
        ts = T0 + np.cumsum(gaps)
        ys = rng.normal(size=n).cumsum()
        expected = steinarsson((ts - ts[0]).astype(float).tolist(), ys.tolist(), threshold)
        assert lttb_indices(ts, ys, threshold).tolist() == expected, (n, threshold)


def test_lttb_keeps_first_and_last_and_at_most_the_asked_number() -> None:
    rng = np.random.default_rng(1)
    ts, ys = T0 + np.arange(500) * 1000, rng.normal(size=500)
    for n in (3, 10, 499):
        out = lttb_indices(ts, ys, n)
        assert len(out) == n and out[0] == 0 and out[-1] == 499 and (np.diff(out) > 0).all()
    assert lttb_indices(ts, ys, 500).tolist() == list(range(500))
    assert lttb_indices(ts, ys, 10_000).tolist() == list(range(500))
    assert lttb_indices(ts, ys, 2).tolist() == [0, 499]
    assert lttb_indices(ts, ys, 1).tolist() == [0]
    assert lttb_indices(ts[:0], ys[:0], 5).tolist() == []


def test_lttb_leaves_out_points_that_are_not_finite() -> None:
    ys = [1.0, math.nan, 4.0, math.inf, 2.0, 0.0, 3.0]
    out = lttb(points([T0 + i for i in range(7)], ys), 4)
    finite = [(i, y) for i, y in enumerate(ys) if math.isfinite(y)]
    expected = steinarsson([float(i) for i, _ in finite], [y for _, y in finite], 4)
    assert out.ts.tolist() == [T0 + finite[k][0] for k in expected]


def pages(ts: np.ndarray, size: int) -> tuple[list[list[int]], list[bool]]:
    """Every page from the first request on, each next request carrying the last page's token."""
    got, tokened, token = [], [], None
    for _ in range(len(ts) + 3):
        lo, hi, token = page(ts, token, size)
        got.append(list(range(lo, hi)))
        tokened.append(token is not None)
        if token is None:
            return got, tokened
    raise AssertionError("paging did not end")


@pytest.mark.parametrize("size", [1, 3, 4, 5, 100])
def test_paging_forward_gives_every_point_once_in_order(size: int) -> None:
    # 12 points, with runs of equal timestamps that straddle page boundaries
    ts = np.array([T0 + t for t in (0, 0, 0, 5, 5, 6, 9, 9, 9, 9, 12, 20)], np.int64)
    got, tokened = pages(ts, size)
    assert [i for p in got for i in p] == list(range(12))
    # nextPageToken exactly when the page is full; the page after a full last page is empty
    assert all(t == (len(p) == size) for p, t in zip(got, tokened, strict=True))
    assert len(got) == 12 // size + 1 and len(got[-1]) == 12 % size


@pytest.mark.parametrize("size", [1, 3, 5, 100])
def test_paging_backward_gives_every_point_once_from_the_end(size: int) -> None:
    ts = np.array([T0 + t for t in (0, 0, 0, 5, 5, 6, 9, 9, 9, 9, 12, 20)], np.int64)
    got, tokened = pages(ts, -size)
    assert [i for p in reversed(got) for i in p] == list(range(12))
    assert got[0] == list(range(max(12 - size, 0), 12))  # no token: the period's last points
    assert all(t == (len(p) == size) for p, t in zip(got, tokened, strict=True))


def test_a_token_without_id_starts_at_the_first_point_at_or_after_its_time() -> None:
    ts = np.array([T0 + t for t in (0, 5, 5, 6)], np.int64)
    assert page(ts, (T0 + 5, 0), 2)[:2] == (1, 3)
    assert page(ts, (T0 + 4, 0), 1)[:2] == (1, 2)
    assert page(ts, (T0 + 5, 0), -5)[:2] == (0, 1)  # backward: the points before that position
    assert page(ts, (T0 + 99, 0), 3) == (4, 4, None)
    assert page(ts[:0], None, 3) == (0, 0, None)


# -- compiled: built only when polled, refused live with Nominal's types -------------------------------
def _strategy_node(kind: str, value: object, **extra: object) -> dict[str, object]:
    body = {"input": nj.numeric_series(nj.channel("ri.test.lttb", "x")), "numericAggregations": {}, **extra}
    return nj.union("series", {**body, "summarizationStrategy": nj.union(kind, value)})


LTTB_SERIES = nj.series(
    nj.numeric_series(
        nj.union(
            "largestTriangleThreeBuckets",
            {"input": nj.channel("ri.test.lttb", "x"), "maxPointsToReturn": nj.literal(100)},
        )
    )
)
POLLED_ONLY = {
    "LTTB_SUMMARIZATION_STRATEGY": _strategy_node("largestTriangleThreeBuckets", {"maxPointsPerGroup": 10}),
    "PAGE_SUMMARIZATION_STRATEGY": _strategy_node("page", nj.union("pageInfo", {"pageSize": 10})),
    "TRUNCATE_SUMMARIZATION_STRATEGY": _strategy_node("truncate", nj.union("maxPointsToReturn", 10)),
    "LARGEST_TRIANGLE_THREE_BUCKETS_SERIES": LTTB_SERIES,
}


def _compile(node: dict[str, object], polled: bool) -> Plan:
    return compile_plan(node, 60 * S, {}, Limits(), ResultOptions(), polled=polled)


@pytest.mark.parametrize("kind", sorted(POLLED_ONLY))
def test_live_gets_nominals_polling_only_type_and_a_poll_builds_it(kind: str) -> None:
    with pytest.raises(ComputeError) as refused:
        _compile(POLLED_ONLY[kind], polled=False)
    assert refused.value.name == "PollingOnlyComputation" and refused.value.params["pollingOnlyTypes"] == kind
    root = _compile(POLLED_ONLY[kind], polled=True).root
    assert isinstance(
        root, PolledSummary if kind != "LARGEST_TRIANGLE_THREE_BUCKETS_SERIES" else SummarizeSeries
    )


@pytest.mark.parametrize(
    "node",
    [
        _strategy_node("largestTriangleThreeBuckets", {"maxPointsPerGroup": 0}),
        _strategy_node("largestTriangleThreeBuckets", {"maxPointsPerGroup": 10_001}),
        _strategy_node("page", nj.union("pageInfo", {"pageSize": 0})),
        _strategy_node("page", nj.union("pageInfo", {"pageSize": -5_001})),
        _strategy_node(
            "page",
            nj.union(
                "pageInfo",
                {
                    "pageSize": 10,
                    "pageToken": nj.union(
                        "timestampAndId", {"timestamp": {"seconds": 1, "nanos": 0}, "id": "x"}
                    ),
                },
            ),
        ),
        _strategy_node("truncate", nj.union("maxPointsToReturn", 10_001)),
    ],
)
def test_values_outside_nominals_bounds_are_refused_by_name(node: dict[str, object]) -> None:
    with pytest.raises(ComputeError) as refused:
        _compile(node, polled=True)
    assert refused.value.name == "InvalidComputation" and refused.value.params.get("field")
