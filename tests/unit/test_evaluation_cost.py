"""The evaluation cost model (compute/evaluation/cost.py) and its ledger (app/fanout/ledger.py):
what a plan is charged, which budget refuses it, and that what is released can be held again."""

from __future__ import annotations

from typing import Any

import pytest

from app.fanout.ledger import CostLedger
from compute.evaluation import cost
from compute.evaluation.compiler import Limits, Plan, ResultOptions, compile_plan
from compute.evaluation.cost import EvaluationBudget
from compute.evaluation.errors import ComputeError
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
