"""What the live subscriptions of every connection cost, summed per connection, per tenant (the
token's subject) and for the whole server, and checked against those budgets before a subscription
is admitted (issue 44: 48 subscriptions of a million buckets each from one connection held 3.7 GB,
and nothing capped subscriptions across connections).

A subscription is charged its computation's result points (one group's worth, compute/evaluation/
cost.py) whether or not another subscription shares the computation: an overestimate, never an
underestimate. On the event loop only, like the sessions that use it (no lock)."""

from __future__ import annotations

from dataclasses import dataclass, field

from compute.evaluation import cost
from compute.evaluation.compiler.plan import Plan
from compute.evaluation.cost import EvaluationBudget, over_limit
from compute.evaluation.errors import ComputeError


@dataclass
class _Totals:
    subscriptions: int = 0
    points: int = 0

    def add(self, points: int, sign: int) -> None:
        self.subscriptions += sign
        self.points += sign * points


class CostLedger:
    """The server's totals; `account` opens one connection's."""

    def __init__(self, budget: EvaluationBudget) -> None:
        self.budget = budget
        self.server = _Totals()
        self._tenants: dict[str, _Totals] = {}

    def account(self, tenant: str) -> Account:
        return Account(self, tenant)

    def tenant(self, tenant: str) -> _Totals:
        totals = self._tenants.get(tenant)
        if totals is None:
            totals = self._tenants[tenant] = _Totals()
        return totals

    def forget_if_idle(self, tenant: str) -> None:
        totals = self._tenants.get(tenant)
        if totals is not None and totals.subscriptions == 0:
            del self._tenants[tenant]


@dataclass
class Account:
    """One connection's live subscriptions and what each was charged."""

    ledger: CostLedger
    tenant: str
    points: int = 0
    charged: dict[str, int] = field(default_factory=dict)  # subscription id -> result points

    def admit(self, sub_id: str, plan: Plan) -> ComputeError | None:
        """Charge a new subscription, or say which limit its plan passes (then nothing is charged):
        the per-computation limits first, then the connection's, the tenant's, the server's."""
        b, ledger = self.ledger.budget, self.ledger
        estimate = cost.estimate(plan.root, plan.window_ns, plan.history_ns)
        too_costly = cost.refusal(estimate, b)
        if too_costly is not None:
            return too_costly
        points = estimate.result_points
        tenant, server = ledger.tenant(self.tenant), ledger.server
        refused = (
            _over("max_result_points_per_connection", self.points, points, b.max_result_points_per_connection)
            or _over("max_result_points_per_tenant", tenant.points, points, b.max_result_points_per_tenant)
            or _over("max_result_points", server.points, points, b.max_result_points)
            or _count_over(
                "max_subscriptions_per_tenant", tenant.subscriptions, b.max_subscriptions_per_tenant
            )
            or _count_over("max_subscriptions", server.subscriptions, b.max_subscriptions)
        )
        if refused is not None:
            ledger.forget_if_idle(self.tenant)
            return refused
        self.charged[sub_id] = points
        self.points += points
        tenant.add(points, 1)
        server.add(points, 1)
        return None

    def release(self, sub_id: str) -> None:
        points = self.charged.pop(sub_id, None)
        if points is None:
            return
        self.points -= points
        self.ledger.tenant(self.tenant).add(points, -1)
        self.ledger.server.add(points, -1)
        self.ledger.forget_if_idle(self.tenant)

    def release_all(self) -> None:
        for sub_id in list(self.charged):
            self.release(sub_id)


def _over(name: str, held: int, asked: int, limit: int) -> ComputeError | None:
    if held + asked <= limit:
        return None
    return over_limit(name, f"result points held with this subscription's {asked:,}", held + asked, limit)


def _count_over(name: str, held: int, limit: int) -> ComputeError | None:
    if held < limit:
        return None
    return over_limit(name, "live subscriptions with this one", held + 1, limit, error="TooManySubscriptions")
