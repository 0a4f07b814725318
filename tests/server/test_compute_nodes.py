"""Every node of the compute subset over a real server: points written in order and out of order,
FullResult merged with every AppendResult compared with (1) a fresh FullResult of a brand-new
computation and (2) a one-shot evaluation of the same node over all points by tests/reference.py.

One scenario feeds every subscription at once (Spark jobs are the slow part), then one test per
node checks its own result."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests import node_json as n
from tests.client_view import ResultView, clip_ranges, first_difference, same
from tests.conftest import ServerProcess
from tests.keepalive import keep_alive
from tests.reference import Store, evaluate
from tests.wire import NANOS, Client, new_id, subscription, write_points

WINDOW_S = 3600.0
WINDOW_NS = int(WINDOW_S * NANOS)
REL = 1e-9  # reference vs server: a different algorithm may round differently in the last bits
STATES = ["idle", "run", "fault", "stop"]
S = NANOS

A, B, E, G = n.num("a"), n.num("b"), n.raw("e"), n.num("g")
K = n.variable("k")

CASES: dict[str, dict[str, Any]] = {
    # numeric series
    "raw": n.series(n.numeric_series(A)),
    "series_raw_reference": n.series(n.raw("a")),
    "channel_by_variables": n.series(
        n.numeric_series(
            n.union(
                "channel",
                n.union(
                    "dataSource",
                    {
                        "dataSourceRid": n.variable("rid"),
                        "channel": n.variable("b_name"),
                        "tags": {},
                        "tagsToGroupBy": [],
                        "groupByTags": [],
                    },
                ),
            )
        )
    ),
    "add": n.series(n.numeric_series(n.binary("add", A, B))),
    "subtract": n.series(n.numeric_series(n.binary("subtract", A, B))),
    "multiply_by_variable": n.series(n.numeric_series(n.binary("multiply", A, n.const(K)))),
    "divide": n.series(n.numeric_series(n.binary("divide", A, B))),
    "divide_constant_by_series": n.series(n.numeric_series(n.binary("divide", n.const(1.0), B))),
    "constant_folded": n.series(n.numeric_series(n.binary("add", A, n.unary("negate", n.const(2.0))))),
    "abs": n.series(n.numeric_series(n.unary("abs", A))),
    "negate": n.series(n.numeric_series(n.unary("negate", A))),
    "sqrt_with_nan": n.series(n.numeric_series(n.unary("sqrt", A))),
    "ln": n.series(n.numeric_series(n.unary("ln", B))),
    "log10": n.series(n.numeric_series(n.unary("log10", B))),
    "derivative": n.series(n.numeric_series(n.derivative(A))),
    "derivative_ms_clamped": n.series(
        n.numeric_series(n.derivative(A, "MILLISECONDS", "setNegativeValuesToZero"))
    ),
    "value_difference": n.series(n.numeric_series(n.value_difference(A))),
    "value_difference_excluding_negatives": n.series(
        n.numeric_series(n.value_difference(B, "excludeNegativeValues"))
    ),
    "time_shift": n.series(n.numeric_series(n.time_shift(A, n.literal(n.duration(5 * S))))),
    "time_shift_back_by_variable": n.series(n.numeric_series(n.time_shift(B, n.variable("back")))),
    "threshold_filter": n.series(n.numeric_series(n.threshold_filter(A, "GREATER_THAN_OR_EQUAL_TO", K))),
    **{
        f"rolling_{op}": n.series(n.numeric_series(n.rolling(n.numeric_series(A), 10 * S, op)))
        for op in ("sum", "average", "min", "max", "count", "standardDeviation", "rootMeanSquare")
    },
    "rolling_count_of_enum": n.series(n.numeric_series(n.rolling(n.enum_series(E), 10 * S, "count"))),
    "nested": n.series(
        n.numeric_series(
            n.rolling(n.numeric_series(n.derivative(n.binary("add", A, n.unary("abs", B)))), 5 * S, "average")
        )
    ),
    "bucketed": n.series(n.numeric_series(A), buckets=20),
    "bucketed_derived": n.series(n.numeric_series(n.binary("subtract", A, B)), buckets=25),
    # enum series
    "enum_raw": n.series(n.enum_series(E)),
    "enum_channel": n.series(
        n.enum_series(
            n.union(
                "channel",
                n.union(
                    "dataSource",
                    {
                        "dataSourceRid": n.variable("rid"),
                        "channel": n.literal("e"),
                        "tags": {},
                        "tagsToGroupBy": [],
                        "groupByTags": [],
                    },
                ),
            )
        )
    ),
    "enum_bucketed": n.series(n.enum_series(E), buckets=15),
    # ranges
    "threshold": n.ranges(n.threshold(A, "GREATER_THAN", n.literal(2.0))),
    "min_max_inside": n.ranges(n.min_max(A, "INSIDE_OR_EQUAL_TO_BOUNDS", n.literal(-2.0), n.literal(2.0))),
    "min_max_outside": n.ranges(n.min_max(B, "OUTSIDE_BOUNDS", n.variable("k"), n.literal(12.0))),
    "enum_filter_in": n.ranges(n.enum_filter(E, "IS_IN", n.literal(["run", "fault"]))),
    "enum_filter_not_in": n.ranges(n.enum_filter(E, "IS_NOT_IN", n.variable("states"))),
    "not": n.ranges(n.not_(n.threshold(A, "GREATER_THAN", n.literal(0.0)))),
    "intersect": n.ranges(
        n.intersect(
            n.threshold(A, "GREATER_THAN", n.literal(-1.0)),
            n.min_max(B, "INSIDE_BOUNDS", n.literal(3.0), n.literal(15.0)),
        )
    ),
    "union": n.ranges(
        n.union_ranges(
            n.threshold(A, "LESS_THAN", n.literal(-3.0)),
            n.enum_filter(E, "IS_IN", n.literal(["fault"])),
        )
    ),
    "ranges_summary": n.ranges(n.threshold(A, "GREATER_THAN", n.literal(0.0)), max_ranges=3),
    # values
    "first_point": n.value("firstPoint", n.numeric_series(A)),
    "last_point": n.value("lastPoint", n.numeric_series(A)),
    "last_point_enum": n.value("lastPoint", n.enum_series(E)),
    "first_point_raw_enum": n.value("firstPoint", n.raw("e")),
    # groupByTags
    "grouped_series": n.series(n.numeric_series(G)),
    "grouped_multiply": n.series(n.numeric_series(n.binary("multiply", G, n.const(2.0)))),
    "grouped_add_shared_channel": n.series(n.numeric_series(n.binary("add", G, A))),
    "grouped_threshold": n.ranges(n.threshold(G, "GREATER_THAN", n.literal(0.0))),
    "grouped_last_point": n.value("lastPoint", n.numeric_series(G)),
}
NO_APPEND_FORM = {"ranges_summary"}
GROUPED = {name for name in CASES if name.startswith("grouped_")}


def context(rid: str) -> dict[str, Any]:
    return {
        "a": n.channel(rid, "a"),
        "b": n.channel(rid, "b"),
        "e": n.channel(rid, "e"),
        "g": n.channel(rid, "g", group_by=["vehicle"]),
        "k": n.double_var(2.5),
        "back": n.duration_var(-3 * S),
        "states": n.string_set_var(["idle", "stop"]),
        "rid": n.string_var(rid),
        "b_name": n.string_var("b"),
    }


@dataclass
class Writer:
    base_url: str
    rid: str
    store: Store = field(default_factory=Store)

    async def write(
        self, channel: str, points: list[tuple[int, Any]], tags: dict[str, str] | None = None
    ) -> None:
        await write_points(self.base_url, self.rid, channel, points, tags=tags)
        self.store.write(self.rid, channel, points, tags)


def walk(rng: random.Random, start: int, end: int, step: tuple[float, float]) -> list[int]:
    out, t = [], start
    while t < end:
        out.append(t)
        t += int(rng.uniform(*step) * S) + rng.randint(0, 999)
    return out


async def write_history(w: Writer, rng: random.Random, now: int) -> None:
    start, end = now - 300 * S, now - 60 * S
    await w.write("a", [(t, round(rng.uniform(-6, 6), 2)) for t in walk(rng, start, end, (0.2, 2.0))])
    b_points = [(t, round(rng.uniform(0.5, 20), 2)) for t in walk(rng, start, end, (0.5, 2.5))]
    b_points[len(b_points) // 2] = (b_points[len(b_points) // 2][0], 0.0)  # ln(0), x / 0
    await w.write("b", b_points)
    await w.write("e", [(t, rng.choice(STATES)) for t in walk(rng, start, end, (0.5, 3.0))])
    for vehicle in ("v1", "v2"):
        points = [(t, round(rng.uniform(-5, 5), 1)) for t in walk(rng, start, end, (1.0, 4.0))]
        await w.write("g", points, {"vehicle": vehicle})


async def write_round(w: Writer, rng: random.Random, round_: int, origin: int) -> None:
    """Fresh points at the clock, late points among the history, an overwrite, (round 3) a new
    tag combination and a new enum category, (round 4) points older than all others."""
    t = time.time_ns()
    ms = 1_000_000
    late = sorted(origin - rng.randint(70, 290) * S - rng.randint(0, S) for _ in range(2))
    if round_ == 5:  # the last round flips every condition the range nodes test
        # 6.5 is above every random value of a (at most 6): it changes the max of whatever
        # interval it lands in, so a bucketed max is reached by an append however the clock falls.
        fresh_a = [(t, 6.5), (t + 50 * ms, -5.5), (t + 100 * ms, 0.5), (t + 150 * ms, 5.5)]
        fresh_b = [(t + 10 * ms, 0.6), (t + 60 * ms, 19.0), (t + 110 * ms, 9.0)]
        fresh_e = [(t + 20 * ms, "run"), (t + 70 * ms, "idle"), (t + 120 * ms, "fault")]
        fresh_g = [(t + 30 * ms, 3.0), (t + 80 * ms, -3.0)]
    else:
        fresh_a = [(t + i * 50 * ms, round(rng.uniform(-6, 6), 2)) for i in range(3)]
        fresh_b = [(t + 10 * ms, round(rng.uniform(0.5, 20), 2))]
        fresh_e = [(t + 20 * ms, rng.choice(STATES))]
        fresh_g = [(t + 30 * ms, round(rng.uniform(-5, 5), 1))]
    await w.write("a", fresh_a)
    await w.write("a", [(x, round(rng.uniform(-6, 6), 2)) for x in late])
    await w.write("b", [*fresh_b, (late[0] + 7, 9.5)])
    await w.write("e", [*fresh_e, (late[1] + 3, rng.choice(STATES))])
    groups = ("v1", "v2", "v3") if round_ >= 3 else ("v1", "v2")
    for vehicle in groups:
        await w.write("g", [*fresh_g, (late[0] + 11, -1.5)], {"vehicle": vehicle})
    if round_ == 2:  # a second write of an existing timestamp replaces the first
        first_a = min(tt for rid, ch, _, pts in w.store.writes if ch == "a" for tt, _ in pts)
        await w.write("a", [(first_a, 4.25)])
    if round_ == 3:
        await w.write("e", [(t + 40 * ms, "maintenance"), (late[0] + 5, "maintenance")])
    if round_ == 4:  # older than every point so far: the first points change
        await w.write("a", [(origin - 305 * S, -0.5)])
        await w.write("e", [(origin - 305 * S, "stop")])


@dataclass
class Outcome:
    views: dict[str, ResultView]
    appends_before_last_phase: dict[str, int]
    fresh: dict[str, ResultView]
    expected: dict[str, dict[Any, tuple[str, Any]]]
    cutoff: int
    fulls_before_last_phase: dict[str, int] = field(default_factory=dict)


async def collect(client: Client, ids: dict[str, str], views: dict[str, ResultView]) -> None:
    """Apply every update that has arrived so far."""
    if client.failure is not None:
        raise client.failure
    for name, sub_id in ids.items():
        q = client.updates.setdefault(sub_id, asyncio.Queue())
        while not q.empty():
            views[name].apply(q.get_nowait())


async def subscribe_all(client: Client, variables: dict[str, Any], cases: dict[str, Any]) -> dict[str, str]:
    """Every case subscribed on one connection (lateness: the whole window), each created."""
    ids = {name: new_id() for name in cases}
    await client.subscribe(
        {
            ids[name]: subscription(node, variables, WINDOW_S, lateness_s=WINDOW_S)
            for name, node in cases.items()
        }
    )
    for name, sub_id in ids.items():
        creation = await client.creation(sub_id, timeout=120)
        assert creation["type"] == "success", (name, creation)
    return ids


async def first_fulls(client: Client, ids: dict[str, str]) -> dict[str, ResultView]:
    views = {name: ResultView(WINDOW_NS) for name in ids}
    for name, sub_id in ids.items():
        update = await client.update(sub_id, timeout=300)
        assert update["type"] == "full", (name, update)
        views[name].apply(update)
    return views


async def play_scenario(
    server: ServerProcess, cases: dict[str, Any], rid: str, variables: dict[str, Any], seed: int
) -> Outcome:
    """The scenario every node test shares: the cases subscribed before anything is written, the
    history and six rounds of writes (late points, an overwrite, a tag group appearing, points older
    than all others), then a brand-new computation of each case; the views, the fresh FullResults and
    the reference (tests/reference.py) at one cutoff."""
    rng = random.Random(seed)
    w = Writer(server.base_url, rid)
    origin = time.time_ns()
    client = await Client.connect(server.ws_url)
    keepalive = keep_alive(client)
    # Subscribed before anything is written: every point reaches these computations live.
    ids = await subscribe_all(client, variables, cases)
    views = await first_fulls(client, ids)
    appends_before: dict[str, int] = {}
    fulls_before: dict[str, int] = {}

    async def settle() -> None:
        """Wait (generously: other Spark jobs share the machine) until every view shows what the
        reference expects, then for a quiet spell so that late frames are applied too."""

        def matches() -> bool:
            return all(
                same(
                    clip_ranges(views[k].snapshot(), views[k].applied_at - WINDOW_NS),
                    evaluate(cases[k], variables, w.store, WINDOW_NS, views[k].applied_at - WINDOW_NS),
                    REL,
                )
                for k in cases
            )

        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            await collect(client, ids, views)
            if await asyncio.to_thread(matches):  # off the loop: pings must be answered meanwhile
                break
            await asyncio.sleep(1.0)
        await asyncio.sleep(2.0)
        await collect(client, ids, views)

    # In phases, so that the last one's changes cannot ride along with a group appearing (which
    # makes a FullResult): history and rounds 0-2, round 3 (a new group), rounds 4-5.
    await write_history(w, rng, origin)
    for phase in ((0, 1, 2), (3,), (4, 5)):
        if phase[0] == 4:
            appends_before = {k: len(v.appends) for k, v in views.items()}
            fulls_before = {k: v.fulls for k, v in views.items()}
        for round_ in phase:
            await write_round(w, rng, round_, origin)
            await asyncio.sleep(0.3)
        await settle()
    keepalive.cancel()
    await client.close()

    # A brand-new computation of each node (an extra variable makes its key distinct): back-filled
    # from the log, it must equal the live one's merged result.
    other = await Client.connect(server.ws_url)
    other_keepalive = keep_alive(other)
    fresh_ids = await subscribe_all(other, {**variables, "unused": n.double_var(0.0)}, cases)
    fresh = await first_fulls(other, fresh_ids)
    other_keepalive.cancel()
    await other.close()
    cutoff = max(v.applied_at for v in (*views.values(), *fresh.values())) - WINDOW_NS
    expected = {name: evaluate(node, variables, w.store, WINDOW_NS, cutoff) for name, node in cases.items()}
    return Outcome(views, appends_before, fresh, expected, cutoff, fulls_before)


@pytest.fixture(scope="module")
async def outcome(server: ServerProcess) -> Outcome:
    rid = f"ri.test.nodes.{time.time_ns()}"
    return await play_scenario(server, CASES, rid, context(rid), seed=20261122)


@pytest.mark.timeout(900)  # the first test also runs the scenario; Spark shares the machine
@pytest.mark.parametrize("name", list(CASES))
async def test_merged_result_equals_reference_and_a_fresh_full_result(outcome: Outcome, name: str) -> None:
    view = outcome.views[name]
    merged_equals_reference_and_fresh(outcome, name)
    if name in NO_APPEND_FORM:
        assert view.fulls >= 2 and not view.appends, "every change of a rangesSummary is a FullResult"
    else:
        reached_by_an_append(outcome, name)


def merged_equals_reference_and_fresh(outcome: Outcome, name: str) -> dict[Any, tuple[str, Any]]:
    """A case's merged live result, not empty, equal to the reference and to a fresh FullResult
    (the check every node test makes of the shared scenario); returns it."""
    merged = clip_ranges(outcome.views[name].snapshot(), outcome.cutoff)
    assert merged, f"{name}: no result"
    diff = first_difference(merged, outcome.expected[name], REL)
    assert diff is None, f"{name}: merged result differs from the reference at {diff}"
    diff = first_difference(merged, clip_ranges(outcome.fresh[name].snapshot(), outcome.cutoff))
    assert diff is None, f"{name}: merged result differs from a fresh FullResult at {diff}"
    return merged


def reached_by_an_append(outcome: Outcome, name: str) -> None:
    later = len(outcome.views[name].appends) - outcome.appends_before_last_phase[name]
    assert later > 0, f"{name}: the last writes reached it in no AppendResult"


def reached_by_a_full_result(outcome: Outcome, name: str) -> None:
    """For a result type with no append form (the charts): never an append, and the last writes
    reached it in a FullResult."""
    view = outcome.views[name]
    assert not view.appends, f"{name}: an AppendResult of a type that has no append form"
    later = view.fulls - outcome.fulls_before_last_phase[name]
    assert later > 0, f"{name}: the last writes reached it in no FullResult"


@pytest.mark.parametrize("name", sorted(GROUPED))
async def test_a_tag_combination_appearing_mid_stream_reaches_subscribers(
    outcome: Outcome, name: str
) -> None:
    view = outcome.views[name]
    keys = set(view.snapshot())
    assert (("vehicle", "v3"),) in keys, keys
    assert keys == {(("vehicle", v),) for v in ("v1", "v2", "v3")}
    assert view.fulls >= 2, "the new group came with a FullResult"
