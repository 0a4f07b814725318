"""`durationFilter` / `durationFilterV2` with `unboundedBehavior` WINDOW_BOUND (durationFilterV2's
default) over a real server: a range with no end is measured to the window's end as of the
computation's last update, so it is kept once it has lasted long enough and a point arrives; the
clock alone re-sends nothing. INFINITY still measures it as infinitely long. Nodes are built with
nominal-api's classes."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from conjure_python_client import ConjureEncoder
from nominal_api import scout_compute_api as sc
from nominal_api import scout_run_api

from tests import node_json as n
from tests.client_view import ResultView
from tests.conftest import ServerProcess
from tests.wire import NANOS, Client, subscription, write_points

WINDOW_S = 120.0
Json = dict[str, Any]
INF = float("inf")


def above_zero(name: str) -> sc.RangeSeries:
    return sc.RangeSeries(
        threshold=sc.ThresholdingRanges(
            input=sc.NumericSeries(raw=sc.Reference(name=name)),
            threshold=sc.DoubleConstant(literal=0.0),
            operator=sc.ThresholdOperator.GREATER_THAN,
        )
    )


def longer_than(name: str, seconds: int, behavior: sc.UnboundedBehavior | None) -> Json:
    node = sc.ComputableNode(
        ranges=sc.SummarizeRanges(
            input=sc.RangeSeries(
                duration_filter_v2=sc.DurationFilterRangesV2(
                    input=above_zero(name),
                    duration=sc.Duration(
                        seconds=sc.DurationSeconds(seconds=sc.IntegerConstant(literal=seconds))
                    ),
                    comparison=sc.ThresholdOperator.GREATER_THAN,
                    unbounded_behavior=behavior,
                )
            )
        )
    )
    return dict(ConjureEncoder.do_encode(node))


def longer_than_v1(name: str, seconds: int) -> Json:
    node = sc.ComputableNode(
        ranges=sc.SummarizeRanges(
            input=sc.RangeSeries(
                duration_filter=sc.DurationFilterRanges(
                    input=above_zero(name),
                    threshold=sc.DurationConstant(literal=scout_run_api.Duration(seconds=seconds, nanos=0)),
                    operator=sc.ThresholdOperator.GREATER_THAN,
                    unbounded_behavior=sc.UnboundedBehavior.WINDOW_BOUND,
                )
            )
        )
    )
    return dict(ConjureEncoder.do_encode(node))


async def first_full(client: Client, sub_id: str) -> ResultView:
    creation = await client.creation(sub_id, timeout=120)
    assert creation["type"] == "success", creation
    update = await client.update(sub_id, timeout=300)
    assert update["type"] == "full", update
    view = ResultView(int(WINDOW_S * NANOS))
    view.apply(update)
    return view


async def test_an_open_range_is_measured_to_the_window_end_as_of_the_last_update(
    server: ServerProcess,
) -> None:
    rid = f"ri.sparkwire.test.window_bound.{uuid.uuid4().hex}"
    t = time.time_ns()
    # a: a closed range of 2 s 40 s ago, then an open one that began 20 s ago
    a = [(t - 40 * NANOS, 1.0), (t - 38 * NANOS, -1.0), (t - 20 * NANOS, 1.0), (t - 19 * NANOS, 1.0)]
    await write_points(server.base_url, rid, "a", a)
    # b: an open range that began 1 s ago
    await write_points(server.base_url, rid, "b", [(t - 10 * NANOS, -1.0), (t - NANOS, 1.0)])
    variables = {"a": n.channel(rid, "a"), "b": n.channel(rid, "b")}
    cases = {
        "default": longer_than("a", 10, None),  # WINDOW_BOUND, durationFilterV2's default
        "window-bound-hour": longer_than("a", 3600, sc.UnboundedBehavior.WINDOW_BOUND),
        "infinity-hour": longer_than("a", 3600, sc.UnboundedBehavior.INFINITY),
        "v1-window-bound": longer_than_v1("a", 10),
        "live": longer_than("b", 12, sc.UnboundedBehavior.WINDOW_BOUND),
    }
    client = await Client.connect(server.ws_url)
    try:
        await client.subscribe(
            {k: subscription(node, variables, WINDOW_S, lateness_s=WINDOW_S) for k, node in cases.items()}
        )
        views = {k: await first_full(client, k) for k in cases}
        open_a = [(t - 20 * NANOS, INF)]
        assert views["default"].snapshot() == {(): ("range", open_a)}  # ~20 s > 10 s; the 2 s one is not
        assert views["v1-window-bound"].snapshot() == {(): ("range", open_a)}
        assert views["window-bound-hour"].snapshot() == {(): ("range", [])}  # ~20 s, not an hour
        assert views["infinity-hour"].snapshot() == {(): ("range", open_a)}  # infinitely long
        if time.time_ns() - (t - NANOS) < 12 * NANOS:  # (a creation slower than 11 s would make it moot)
            assert views["live"].snapshot() == {(): ("range", [])}

        # the clock alone sends nothing: b's range passes 12 s while no point arrives
        await asyncio.sleep(max(0.0, (t - NANOS + 13 * NANOS - time.time_ns()) / NANOS))
        assert client.updates["live"].empty(), "an update without a new point"
        # a point (still above zero) arrives: the open range is measured again, now longer than 12 s
        await write_points(server.base_url, rid, "b", [(time.time_ns(), 2.0)])
        while True:
            update = await client.update("live", timeout=120)
            views["live"].apply(update)
            if views["live"].snapshot()[()][1]:
                break
        assert views["live"].snapshot() == {(): ("range", [(t - NANOS, INF)])}
    finally:
        await client.close()
