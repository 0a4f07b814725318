"""The chart roots away from a server: what their frames look like to a strict Nominal client and to
the published schemas, what an edge's mirror carries, what they refuse at creation, and the
documented bucketing rules (docs/protocol.md's chart table) on cases small enough to check by hand.
The real-server checks against the reference are tests/server/test_compute_ranges_enums.py's
`histogram_*` and `scatter*` cases."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from nominal_api import persistent_compute_api as pc

from app.protocol import frames
from compute.evaluation import deltas
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.charts import (
    Bounds,
    count_width,
    octree_buckets,
    spatial_buckets,
    temporal_buckets,
)
from compute.evaluation.results import (
    Cartesian3dBuckets,
    CartesianBuckets,
    CartesianPoints,
    EnumHistogram,
    MultivariateBuckets,
    NumericHistogram,
)
from schemas.server import server_message_adapter
from tests import node_json as n
from tests.client_view import ResultView
from tests.server.test_compute_property import variables
from tests.wire import DECODER

S = 1_000_000_000
RID = "ri.charts"
A, B = n.num("a"), n.num("b")


def scatter(**extra: Any) -> dict[str, Any]:
    return n.union("cartesian", {"input": n.union("scatter", {"x": A, "y": B}), **extra})


def histogram(strategy: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"inputs": {"a": A}}
    if strategy is not None:
        body["bucketStrategy"] = strategy
    return n.union("histogram", n.union("numeric", body))


OUTPUTS = {
    "numericHistogram": NumericHistogram(
        np.array([0.0, 1.5]), np.array([1.5, 3.0]), np.array([2, 0, 1, 4], np.int64), ["a", "b"]
    ),
    "enumHistogram": EnumHistogram(["idle", "run"], np.array([3, 1], np.int64), ["e"]),
    "cartesian": CartesianPoints(np.array([5 * S, 6 * S]), np.array([1.0, np.nan]), np.array([2.0, 3.0])),
    "bucketedCartesian": CartesianBuckets(
        np.array([0.0]),
        np.array([1.0]),
        np.array([-1.0]),
        np.array([2.0]),
        np.array([5 * S]),
        np.array([9 * S]),
        np.array([7]),
    ),
    "multivariate": MultivariateBuckets(
        10 * S,
        np.array([10 * S, 20 * S]),
        np.array([1.5, 2.0, np.nan, 4.0]),
        ["run", "idle"],
        "nen",
        ["vehicle"],
    ),
    "bucketedCartesian3d": Cartesian3dBuckets(
        np.array([1.0, 2.0, 3.0]),
        np.arange(18, dtype=np.float64),
        np.arange(6, dtype=np.int64) * S,
        np.array([0]),
        np.array([5 * S]),
        np.array([6]),
    ),
}


@pytest.mark.parametrize("kind", sorted(OUTPUTS))
def test_a_chart_frame_decodes_as_nominal_and_validates_against_the_schema(kind: str) -> None:
    output = OUTPUTS[kind]
    for grouped, outputs in ((False, {(): output}), (True, {(("vehicle", "v1"),): output})):
        update = frames.full_update(outputs, grouped)
        text = frames.subscription_update("s", update)
        server_message_adapter.validate_json(text)
        decoded = DECODER.read_from_string(text, pc.ServerMessage)
        result = decoded.subscription_update.update.full.result
        assert (next(iter(result.grouped.responses)).response if grouped else result).type == kind
        view = ResultView(3600 * S)
        view.apply(json.loads(update))
        assert next(iter(view.snapshot().values()))[0] == kind


def test_multivariate_frames_carry_values_in_request_order_and_append_by_bucket() -> None:
    out = OUTPUTS["multivariate"]
    body = json.loads(frames.full_update({(): out}, False))["full"]["result"]["multivariate"]
    assert body["groupByKeys"] == ["vehicle"]
    assert body["buckets"][1]["values"] == [
        {"type": "float64Value", "float64Value": "NaN"},
        {"type": "stringValue", "stringValue": "idle"},
        {"type": "float64Value", "float64Value": 4.0},
    ]
    later = MultivariateBuckets(
        10 * S,
        np.array([10 * S, 20 * S, 30 * S]),
        np.array([1.5, 2.0, 5.0, 6.0, 7.0, 8.0]),
        ["run", "stop", "run"],
        "nen",
        ["vehicle"],
    )
    assert later.first_change(out) == 10 * S  # from the bucket ending at 20 s
    view = ResultView(3600 * S)
    view.apply(json.loads(frames.full_update({(): out}, False)))
    view.apply(json.loads(frames.append_update({(): later.since(10 * S)}, False, 10 * S, 30 * S)))
    assert view.snapshot()[()] == (
        "multivariate",
        [(10 * S, (1.5, "run", 2.0)), (20 * S, (5.0, "stop", 6.0)), (30 * S, (7.0, "run", 8.0))],
    )


def test_chart_frames_carry_what_the_outputs_hold() -> None:
    view = ResultView(3600 * S)
    view.apply(json.loads(frames.full_update({(): OUTPUTS["numericHistogram"]}, False)))
    assert view.snapshot()[()] == (
        "numericHistogram",
        [(0.0, 1.5, {"a": 2, "b": 0}), (1.5, 3.0, {"a": 1, "b": 4})],
    )
    view.apply(json.loads(frames.full_update({(): OUTPUTS["enumHistogram"]}, False)))
    assert view.snapshot()[()] == ("enumHistogram", [("idle", {"e": 3}), ("run", {"e": 1})])
    view.apply(json.loads(frames.full_update({(): OUTPUTS["bucketedCartesian"]}, False)))
    assert view.snapshot()[()] == ("bucketedCartesian", [(0.0, 1.0, -1.0, 2.0, 5 * S, 9 * S, 7)])
    text = frames.full_update({(): OUTPUTS["cartesian"]}, False)
    assert json.loads(text)["full"]["result"]["cartesian"]["xValues"] == [1.0, "NaN"]


@pytest.mark.parametrize("kind", sorted(OUTPUTS))
def test_a_chart_survives_the_compute_tiers_transport(kind: str) -> None:
    old = {(): OUTPUTS["enumHistogram" if kind != "enumHistogram" else "cartesian"]}
    new = {(): OUTPUTS[kind]}
    for payload in (deltas.whole(new), deltas.diff(old, new)):
        back = deltas.apply(old, deltas.decode(deltas.encode({"p": payload}))["p"])
        assert frames.full_update(back, False) == frames.full_update(new, False)


def _refusal(node: dict[str, Any], options: ResultOptions | None = None) -> ComputeError:
    with pytest.raises(ComputeError) as caught:
        compile_plan(node, 60 * S, variables(RID), Limits(), options or ResultOptions())
    return caught.value


def test_what_the_charts_refuse_at_creation_is_named() -> None:
    appends = _refusal(scatter(), ResultOptions(append_only=True))
    assert (appends.name, appends.params) == (
        "UnavailableResultConfiguration",
        {"reason": "APPENDS_NOT_SUPPORTED_FOR_COMPUTE"},
    )
    assert _refusal(histogram(), ResultOptions(append_only=True)).name == "UnavailableResultConfiguration"
    too_many = _refusal(scatter(maxPoints=10_001))
    assert (too_many.name, too_many.params) == ("TooManyPoints", {"limit": "10000"})
    assert _refusal(scatter(maxPoints=0)).params == {
        "invalidTypes": "",
        "variant": "cartesian",
        "field": "maxPoints",
    }
    zero = _refusal(histogram(n.union("bucketCount", n.literal(0))))
    assert zero.params == {"invalidTypes": "", "variant": "histogram", "field": "bucketStrategy.bucketCount"}
    flat = _refusal(histogram(n.union("bucketWidthAndOffset", {"width": n.literal(0.0)})))
    assert flat.params == {"invalidTypes": "", "variant": "histogram", "field": "bucketStrategy.width"}
    constant = n.union("histogram", n.union("numeric", {"inputs": {"c": n.const(1.0)}}))
    assert _refusal(constant).params == {"invalidTypes": "", "variant": "histogram"}
    nothing = n.union("histogram", n.union("numeric", {"inputs": {}}))
    assert _refusal(nothing).params == {"invalidTypes": "", "variant": "histogram", "field": "inputs"}
    one = [n.union("numeric", {"series": A, "aggregations": ["MEAN"]})]
    many = _refusal(n.union("multivariate", {"inputs": one, "bucketCount": 10_001}))
    assert (many.name, many.params) == ("TooManyPoints", {"limit": "10000"})
    idle = [n.union("numeric", {"series": A, "aggregations": []})]
    assert _refusal(n.union("multivariate", {"inputs": idle})).params == {
        "invalidTypes": "",
        "variant": "multivariate",
        "field": "aggregations",
    }
    driven = n.union(
        "cartesian3d",
        {"input": n.union("scatter3d", {"x": A, "y": B, "z": A, "driverSeries": "X"})},
    )
    assert _refusal(driven).params == {"invalidTypes": "", "variant": "cartesian3d", "field": "driverSeries"}


def test_bucket_count_gives_at_most_that_many_buckets_on_multiples_of_the_width() -> None:
    # integers 0..10 in 10 buckets: width 1 would need 11 (10 lies on a multiple, upper bounds are
    # exclusive), so the width is 10 / 9 and every value fits in 10 buckets
    width = count_width(0.0, 10.0, 10)
    assert width == 10 / 9
    assert int(np.floor(10.0 / width)) - int(np.floor(0.0 / width)) + 1 == 10
    # 0.5..9.5 in 3: width 3 would need [0, 3) .. [9, 12), four buckets, so the width is 9 / 2:
    # [0, 4.5), [4.5, 9), [9, 13.5)
    assert count_width(0.5, 9.5, 3) == 4.5
    assert count_width(-1.0, 2.0, 3) == 1.5  # [-1.5, 0), [0, 1.5), [1.5, 3)
    assert count_width(4.0, 4.0, 7) == 1.0  # one value: one bucket [4, 5)


def test_spatial_buckets_split_the_fullest_bucket_into_quadrants_up_to_the_limit() -> None:
    ts = np.arange(6, dtype=np.int64) * S
    x = np.array([0.0, 0.1, 0.2, 9.0, 9.0, 9.0])
    y = np.array([0.0, 0.1, 0.2, 9.0, 9.0, 9.5])
    out = spatial_buckets(CartesianPoints(ts, x, y), 3, None)
    # [0, 9] x [0, 9.5] splits at (4.5, 4.75) into the lower-left three and the upper-right three.
    # Each is then bisected in turn (the one made first on a tie; a bisection leaving every point in
    # one quadrant adds no bucket): the upper right parts (9, 9.5) from the two at (9, 9) at its
    # fourth bisection, before the lower left's fifth would part (0.2, 0.2); that would make four
    assert out.count.tolist() == [3, 2, 1]
    assert (out.min_x.tolist(), out.max_y.tolist(), out.max_ts.tolist()) == (
        [0.0, 9.0, 9.0],
        [0.2, 9.0, 9.5],
        [2 * S, 4 * S, 5 * S],
    )
    more = spatial_buckets(CartesianPoints(ts, x, y), 10, None)
    assert more.count.sum() == 6 and len(more) == 5  # the two at (9, 9) never split from each other
    # bounds set the first box: its midpoint (10, 10) separates nothing, the next one (5, 5) does
    assert spatial_buckets(CartesianPoints(ts, x, y), 1, Bounds(0.0, 20.0, 0.0, 20.0)).count.tolist() == [6]
    assert spatial_buckets(CartesianPoints(ts, x, y), 2, Bounds(0.0, 20.0, 0.0, 20.0)).count.tolist() == [
        3,
        3,
    ]


def test_temporal_buckets_aggregate_each_time_bucket() -> None:
    ts = np.array([1, 2, 11, 12, 13], np.int64) * S
    p = CartesianPoints(ts, np.array([1.0, 3.0, 5.0, 6.0, 10.0]), np.array([1.0, 2.0, 3.0, 4.0, 0.0]))
    out = temporal_buckets(p, 10 * S, "MEAN", "LAST")
    assert (out.ts.tolist(), out.x.tolist(), out.y.tolist()) == ([10 * S, 20 * S], [2.0, 7.0], [2.0, 0.0])
    out = temporal_buckets(p, 10 * S, "MIN", "FIRST")
    assert (out.x.tolist(), out.y.tolist()) == ([1.0, 5.0], [1.0, 3.0])


def test_octree_buckets_keep_each_axis_extreme_point() -> None:
    ts = np.arange(5, dtype=np.int64) * S
    axes = [
        np.array([0.0, 1.0, 0.0, 8.0, 9.0]),
        np.array([0.0, 0.0, 1.0, 9.0, 8.0]),
        np.array([1.0, 0.0, 0.0, 9.0, 9.0]),
    ]
    one = octree_buckets(ts, axes, 1, None)
    assert one.count.tolist() == [5] and one.mean.tolist() == [3.6, 3.6, 3.8]
    # min x: the earliest of (0, 0, 1) at 0 s and (0, 1, 0) at 2 s; max x (9, 8, 9); min y the
    # earliest of (0, 0, 1) and (1, 0, 0); max y (8, 9, 9); min z (1, 0, 0); max z (8, 9, 9) first
    assert one.extreme_ts.tolist() == [0, 4 * S, 0, 3 * S, S, 3 * S]
    assert one.extremes[:6].tolist() == [0.0, 0.0, 1.0, 9.0, 8.0, 9.0]
    two = octree_buckets(ts, axes, 2, None)  # one split at (4.5, 4.5, 4.5): the near three, the far two
    assert two.count.tolist() == [3, 2] and (two.min_ts.tolist(), two.max_ts.tolist()) == (
        [0, 3 * S],
        [2 * S, 4 * S],
    )
    assert len(octree_buckets(ts, axes, 100, None)) == 5  # every distinct point its own bucket
