"""The evaluation cost model (compute/evaluation/cost.py) and its ledger (app/protocol/ledger.py):
what a plan is charged, which budget refuses it, and that what is released can be held again."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.protocol.ledger import CostLedger
from compute.evaluation import cost
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import Plan, compile_plan
from compute.evaluation.computation import Computation
from compute.evaluation.cost import EvaluationBudget
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.aggregate import Operator, ResampleForwardFill, RollingPoints
from compute.evaluation.nodes.base import EvalEnv
from compute.evaluation.nodes.inputs import ChannelInput
from compute.evaluation.results import NumericPoints
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests.wire import channel_variable, series_node

pytestmark = pytest.mark.unit

NANOS = 1_000_000_000
RID = "ri.cost.unit"


def plan(node: dict[str, Any], window_s: int = 10) -> Plan:
    context = {"x": channel_variable(RID, "p")}
    return compile_plan(node, window_s * NANOS, context, Limits(), ResultOptions())


def resample_v2(interval_ns: int) -> dict[str, Any]:
    interval = {
        "type": "nanoseconds",
        "nanoseconds": {"nanoseconds": {"type": "literal", "literal": interval_ns}},
    }
    inner = {"input": {"type": "raw", "raw": {"name": "x"}}, "interval": interval}
    series = {"type": "numeric", "numeric": {"type": "resampleV2", "resampleV2": inner}}
    return {"type": "series", "series": {"input": series, "numericAggregations": {}}}


def estimate(p: Plan) -> cost.Cost:
    return cost.estimate(p.root, p.window_ns, p.history_ns)


def test_result_points_are_the_buckets_asked_for() -> None:
    assert estimate(plan(series_node(buckets=250_000))).result_points == 250_000
    assert estimate(plan(series_node())).result_points == 1_000  # the default bucket count
    assert estimate(plan(series_node())).grid_points == 0


def test_a_resample_grid_is_counted_over_the_held_history() -> None:
    p = plan(resample_v2(1_000_000))  # every 1 ms over a 10 s window, lookback 10 s, step 1 s
    assert estimate(p).grid_points == 21_000 + 2
    assert cost.refusal(estimate(p), EvaluationBudget(max_resample_points=21_002)) is None
    refused = cost.refusal(estimate(p), EvaluationBudget(max_resample_points=21_001))
    assert refused is not None and refused.name == "TooManyPoints"
    assert refused.params["setting"] == "SPARKWIRE_MAX_RESAMPLE_POINTS"


def test_the_ledger_refuses_by_the_first_budget_passed_and_releases() -> None:
    budget = EvaluationBudget(
        max_result_points_per_connection=3_000,
        max_result_points_per_tenant=4_000,
        max_result_points=5_000,
        max_subscriptions_per_tenant=3,
    )
    ledger = CostLedger(budget)
    thousand = plan(series_node())
    one, two, other = ledger.account("a"), ledger.account("a"), ledger.account("b")
    assert [one.admit(f"s{i}", thousand) for i in range(3)] == [None] * 3
    error = one.admit("s3", thousand)
    assert (
        isinstance(error, ComputeError)
        and error.params["setting"] == "SPARKWIRE_MAX_RESULT_POINTS_PER_CONNECTION"
    )
    error = two.admit("t0", plan(series_node(buckets=1_500)))
    assert error is not None and error.params["setting"] == "SPARKWIRE_MAX_RESULT_POINTS_PER_TENANT"
    error = two.admit("t1", plan(series_node(buckets=1)))  # points fit; a 4th subscription of "a" does not
    assert error is not None and error.name == "TooManySubscriptions"
    assert error.params["setting"] == "SPARKWIRE_MAX_SUBSCRIPTIONS_PER_TENANT"
    assert other.admit("u0", thousand) is None
    error = other.admit("u1", plan(series_node(buckets=1_001)))  # 5,001 on the server
    assert error is not None and error.params["setting"] == "SPARKWIRE_MAX_RESULT_POINTS"
    one.release("s0")
    one.release("s0")  # twice: charged once, released once
    assert other.admit("u1", thousand) is None
    one.release_all()
    other.release_all()
    assert ledger.server.points == 0 and ledger.server.subscriptions == 0
    assert [two.admit(f"t{i}", thousand) for i in range(3)] == [None] * 3


def test_a_resample_grid_stops_at_the_clock_whatever_lies_ahead() -> None:
    """Issue 44, finding 6: one point 6 days ahead stretched the grid to it (~70M points)."""
    now = 1_000 * NANOS
    ts = np.array([now - 5 * NANOS, now - NANOS, now + 6 * 86_400 * NANOS], np.int64)
    env = EvalEnv({0: NumericPoints(ts, np.array([1.0, 2.0, 3.0]))}, now - 10 * NANOS, now)
    out = ResampleForwardFill(ChannelInput(0), NANOS, 10 * NANOS).evaluate(env)
    assert out.ts.tolist() == [now - 5 * NANOS + i * NANOS for i in range(6)]  # through the clock
    assert out.values.tolist() == [1.0, 1.0, 1.0, 1.0, 2.0, 2.0]


def test_rolling_points_is_charged_before_it_reduces() -> None:
    """Issue 44, finding 7: points x count values reduced, refused past max_evaluation_work."""
    n, count = 1_000, 100
    ts = np.arange(n, dtype=np.int64) * 1_000_000
    env = EvalEnv({0: NumericPoints(ts, np.ones(n))}, 0, int(ts[-1]))
    node = RollingPoints(ChannelInput(0), count, Operator("average"), NANOS)
    try:
        cost.configure(EvaluationBudget(max_evaluation_work=n * count))
        assert node.evaluate(env).values.tolist() == [1.0] * n
        cost.configure(EvaluationBudget(max_evaluation_work=n * count - 1))
        with pytest.raises(ComputeError) as refused:
            node.evaluate(env)
        assert refused.value.name == "TooManyPoints"
        assert refused.value.params["asked"] == str(n * count)
        assert refused.value.params["setting"] == "SPARKWIRE_MAX_EVALUATION_WORK"
        assert len(node.evaluate_since(env, int(ts[-5]))) == 5  # a live batch's few new points
    finally:
        cost.configure(EvaluationBudget())


def test_series_of_groups_past_max_groups_are_never_held_and_the_evaluation_says_so() -> None:
    """Issue 44, finding 9: 100,000 groups in one computation (an 18.8 MB FullResult after 12.8 s)."""
    variables = {"x": channel_variable(RID, "p", group_by=["unit"])}
    p = compile_plan(series_node(), 60 * NANOS, variables, Limits(), ResultOptions())
    try:
        cost.configure(EvaluationBudget(max_groups=3))
        c = Computation("groups", p, None)
        routed = [
            c.route(SeriesInfo(i, SeriesKey.of(RID, "p", {"unit": str(i)}), SeriesKind.NUMERIC))
            for i in range(5)
        ]
        assert routed == [True, True, True, False, False]
        assert c.route(
            SeriesInfo(9, SeriesKey.of(RID, "p", {"unit": "1"}), SeriesKind.NUMERIC)
        )  # a known group
        with pytest.raises(ComputeError) as refused:
            c.load_backfill({}, 100 * NANOS)
        assert refused.value.name == "TooManyGroups"
        assert refused.value.params == {
            "limit": "3",
            "setting": "SPARKWIRE_MAX_GROUPS",
            "asked": "more than 3",
        }
        assert c.error is refused.value
    finally:
        cost.configure(EvaluationBudget())
