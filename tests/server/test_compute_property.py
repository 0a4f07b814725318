"""Property: for random node trees of the compute subset and random arrival orders of the points
(some history before the subscription, the rest live, out of order, with overwrites), FullResult
merged with every AppendResult equals the reference evaluation over all points.

Each example talks to the shared real server, so examples are few and each carries several trees.
Inputs avoid NaN where the reference's plain-Python min/max would order NaN differently from IEEE
reductions (that is a property of Python's `min`, not of the server)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests import node_json as n
from tests.client_view import ResultView, clip_ranges, first_difference, same
from tests.conftest import ServerProcess
from tests.keepalive import keep_alive
from tests.reference import Store, evaluate
from tests.wire import NANOS, Client, new_id, subscription, write_points

WINDOW_S = 3600.0
WINDOW_NS = int(WINDOW_S * NANOS)
REL = 1e-9
STATES = ["idle", "run", "fault", "stop"]
J = dict[str, Any]

GRID = st.integers(-8, 8).map(lambda i: i / 2)  # values on a 0.5 grid: thresholds are hit exactly

leaf = st.sampled_from([n.num("a"), n.num("b"), n.num("g")])


def _extend(children: st.SearchStrategy[J]) -> st.SearchStrategy[J]:
    const = GRID.filter(lambda x: x != 0).map(n.const)
    return st.one_of(
        st.builds(n.unary, st.sampled_from(["abs", "negate"]), children),
        # logarithms and roots of |x| + 1: defined everywhere
        st.builds(
            lambda op, x: n.unary(op, n.binary("add", n.unary("abs", x), n.const(1.0))),
            st.sampled_from(["sqrt", "ln", "log10"]),
            children,
        ),
        st.builds(n.binary, st.sampled_from(["add", "subtract", "multiply"]), children, children),
        st.builds(n.binary, st.sampled_from(["add", "subtract", "multiply", "divide"]), children, const),
        st.builds(n.binary, st.sampled_from(["add", "subtract", "multiply"]), const, children),
        st.builds(lambda x: n.derivative(x), children),
        st.builds(
            lambda x, u: n.derivative(x, u, "setNegativeValuesToZero"),
            children,
            st.sampled_from(["MILLISECONDS", "MINUTES"]),
        ),
        st.builds(
            lambda x, mode: n.value_difference(x, mode),
            children,
            st.sampled_from([None, "excludeNegativeValues"]),
        ),
        st.builds(
            lambda x, s: n.time_shift(x, n.literal(n.duration(s * NANOS // 2))), children, st.integers(-6, 6)
        ),
        st.builds(
            lambda x, op, t: n.threshold_filter(x, op, n.literal(t)),
            children,
            st.sampled_from(["GREATER_THAN", "LESS_THAN_OR_EQUAL_TO", "NOT_EQUAL_TO"]),
            GRID,
        ),
        st.builds(  # filterWhere over the filtered series itself and constants
            lambda x, lo, hi: n.filter_where(
                x,
                n.either(
                    n.compare("lessThan", x, n.const(lo)), n.compare("greaterThanOrEqualTo", x, n.const(hi))
                ),
            ),
            children,
            GRID,
            GRID,
        ),
        st.builds(
            lambda x, w, op: n.rolling(n.numeric_series(x), w * NANOS // 2, op),
            children,
            st.integers(1, 12),
            st.sampled_from(["sum", "average", "min", "max", "count", "standardDeviation", "rootMeanSquare"]),
        ),
    )


numeric_tree = st.recursive(leaf, _extend, max_leaves=4)

range_leaf = st.one_of(
    st.builds(
        lambda x, op, t: n.threshold(x, op, n.literal(t)),
        numeric_tree,
        st.sampled_from(["GREATER_THAN", "GREATER_THAN_OR_EQUAL_TO", "LESS_THAN", "EQUAL_TO"]),
        GRID,
    ),
    st.builds(
        lambda x, op, lo, width: n.min_max(x, op, n.literal(lo), n.literal(lo + width)),
        numeric_tree,
        st.sampled_from(
            ["INSIDE_BOUNDS", "INSIDE_OR_EQUAL_TO_BOUNDS", "OUTSIDE_BOUNDS", "OUTSIDE_OR_EQUAL_TO_BOUNDS"]
        ),
        GRID,
        st.integers(0, 6).map(lambda i: i / 2),
    ),
    st.builds(  # booleanRanges: a condition over one series and constants
        lambda x, lo, hi: n.boolean_ranges(
            n.both(n.compare("greaterThan", x, n.const(lo)), n.compare("notEqualTo", n.const(hi), x))
        ),
        numeric_tree,
        GRID,
        GRID,
    ),
    st.builds(
        lambda op, values: n.enum_filter(n.raw("e"), op, n.literal(sorted(values))),
        st.sampled_from(["IS_IN", "IS_NOT_IN"]),
        st.sets(st.sampled_from(STATES), min_size=1, max_size=3),
    ),
)
range_tree = st.recursive(
    range_leaf,
    lambda children: st.one_of(
        st.builds(n.not_, children),
        st.builds(lambda xs: n.intersect(*xs), st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda xs: n.union_ranges(*xs), st.lists(children, min_size=1, max_size=3)),
    ),
    max_leaves=3,
)
computable = st.one_of(
    st.builds(
        lambda x, b: n.series(n.numeric_series(x), buckets=b), numeric_tree, st.sampled_from([None, 8, 40])
    ),
    st.builds(lambda b: n.series(n.enum_series(n.raw("e")), buckets=b), st.sampled_from([None, 6])),
    st.builds(lambda r, m: n.ranges(r, max_ranges=m), range_tree, st.sampled_from([None, 4])),
    st.builds(
        lambda which, x: n.value(which, n.numeric_series(x)),
        st.sampled_from(["firstPoint", "lastPoint"]),
        numeric_tree,
    ),
    st.builds(lambda which: n.value(which, n.raw("e")), st.sampled_from(["firstPoint", "lastPoint"])),
)


@st.composite
def writes(draw: st.DrawFn) -> list[tuple[str, dict[str, str], list[tuple[int, Any]]]]:
    """Points of channels a, b, e and g (two vehicles), as write requests in arrival order; the
    timestamps are offsets (ns) from a base chosen when the example runs."""
    requests: list[tuple[str, dict[str, str], list[tuple[int, Any]]]] = []
    for channel, tags in (
        ("a", {}),
        ("b", {}),
        ("e", {}),
        ("g", {"vehicle": "v1"}),
        ("g", {"vehicle": "v2"}),
    ):
        count = draw(st.integers(0, 25))
        gaps = draw(
            st.lists(st.integers(50, 2500), min_size=count, max_size=count)
        )  # ms: some beyond the 1 s radius
        stamps, t = [], 0
        for gap in gaps:
            t += gap * 1_000_000 + draw(st.integers(0, 999))
            stamps.append(t)
        values: list[Any] = (
            [draw(st.sampled_from(STATES)) for _ in stamps]
            if channel == "e"
            else [draw(GRID) for _ in stamps]
        )
        points = list(zip(stamps, values, strict=True))
        if points and draw(st.booleans()):  # a later write of an existing timestamp wins
            t0, _ = draw(st.sampled_from(points))
            points.append((t0, draw(st.sampled_from(STATES)) if channel == "e" else draw(GRID)))
        chunks = draw(st.integers(1, 4))
        for i in range(chunks):
            part = points[i::chunks]
            if part:
                requests.append((channel, tags, part))
    order = draw(st.permutations(range(len(requests))))
    return [requests[i] for i in order]


def variables(rid: str) -> dict[str, Any]:
    return {
        "a": n.channel(rid, "a"),
        "b": n.channel(rid, "b"),
        "e": n.channel(rid, "e"),
        "g": n.channel(rid, "g", group_by=["vehicle"]),
        "gs": n.channel(rid, "g", group_by=["site", "vehicle"]),  # site: no series has it ("")
        "gu": n.channel(rid, "g"),  # not grouped: a tag reaches its series (filterByTag, selectTags)
        "rid": n.string_var(rid),  # the data source of a selection without a name (NOMINAL_CHANNEL)
    }


async def run_example(
    server: ServerProcess,
    nodes: list[J],
    requests: list[tuple[str, dict[str, str], list[tuple[int, Any]]]],
    before: int,
) -> None:
    rid = f"ri.test.property.{time.time_ns()}.{random.random()}"
    context = variables(rid)
    store = Store()
    base = time.time_ns() - 200 * NANOS

    async def send(channel: str, tags: dict[str, str], points: list[tuple[int, Any]]) -> None:
        stamped = [(base + t, v) for t, v in points]
        await write_points(server.base_url, rid, channel, stamped, tags=tags)
        store.write(rid, channel, stamped, tags)

    for request in requests[:before]:  # history: reaches the computations by back-fill
        await send(*request)
    client = await Client.connect(server.ws_url)
    keepalive = keep_alive(client)
    try:
        ids = [new_id() for _ in nodes]
        await client.subscribe(
            {
                i: subscription(node, context, WINDOW_S, lateness_s=WINDOW_S)
                for i, node in zip(ids, nodes, strict=True)
            }
        )
        views = [ResultView(WINDOW_NS) for _ in nodes]
        for i, view in zip(ids, views, strict=True):
            assert (await client.creation(i, timeout=120))["type"] == "success"
            view.apply(await client.update(i, timeout=300))
        for request in requests[before:]:  # live, in an arbitrary order
            await send(*request)

        def collect() -> None:
            for i, view in zip(ids, views, strict=True):
                q = client.updates.setdefault(i, asyncio.Queue())
                while not q.empty():
                    view.apply(q.get_nowait())

        def compare() -> tuple[list[Any], list[Any]]:
            cutoffs = [v.applied_at - WINDOW_NS for v in views]
            merged = [clip_ranges(v.snapshot(), c) for v, c in zip(views, cutoffs, strict=True)]
            expected = [
                evaluate(node, context, store, WINDOW_NS, c) for node, c in zip(nodes, cutoffs, strict=True)
            ]
            return merged, expected

        deadline = time.monotonic() + 120
        while True:
            collect()
            merged, expected = await asyncio.to_thread(compare)  # off the loop: pings get answered
            if (
                all(same(m, e, REL) for m, e in zip(merged, expected, strict=True))
                or time.monotonic() > deadline
            ):
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)  # frames still in flight must not change the answer
        collect()
        merged, expected = compare()
        for node, m, e in zip(nodes, merged, expected, strict=True):
            diff = first_difference(m, e, REL)
            assert diff is None, f"{node}\nmerged result differs from the reference at {diff}"
    finally:
        keepalive.cancel()
        await client.close()


@pytest.mark.timeout(1200)
@settings(
    max_examples=5,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: every step costs real server round trips
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(
    nodes=st.lists(computable, min_size=4, max_size=6),
    requests=writes(),
    before_share=st.floats(0, 1),
)
def test_merged_results_of_random_trees_equal_the_reference(
    server: ServerProcess, nodes: list[J], requests: list[Any], before_share: float
) -> None:
    asyncio.run(run_example(server, nodes, requests, int(len(requests) * before_share)))
