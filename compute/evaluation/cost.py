"""The evaluation cost model (issue 44): what a computation can make the server hold and compute,
told from its Plan before it is admitted, and charged again from what it really holds before each
expensive step runs, so that no computation's cost is found out only by paying it.

- `estimate(...)`: per group, the points/buckets/ranges its result may hold and the largest grid a
  resample in it may make over the held history (the points a node reduces per output point, as
  rollingPoints' count, are charged at run time, against the points really held). The
  session checks it against the per-computation limits and (app/protocol/ledger.py) against the
  budgets of the connection, the tenant and the server when the subscription is made.
- `charge_work`, `check_grid`, `too_many_groups`: the limits at run time, from what is really held,
  raised as a ComputeError before the work: the computation stops with an update error and the
  others keep their pace; `check_cpu`, after a live batch's evaluation, stops one that overran.
- `EvaluationBudget`: the limits, one setting each (app/config.py); `configure` installs the
  server's for the run-time checks (nodes have no settings of their own to read).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compute.evaluation.errors import ComputeError

if TYPE_CHECKING:  # the nodes import this module
    from compute.evaluation.nodes.base import Node, OutputNode


@dataclass(frozen=True)
class EvaluationBudget:
    """The limits of the cost model; each is a setting (SPARKWIRE_<NAME>)."""

    # result points/buckets/ranges held (one group's worth per subscription), summed over live
    # subscriptions
    max_result_points_per_connection: int = 4_000_000
    max_result_points_per_tenant: int = 8_000_000
    max_result_points: int = 32_000_000  # the whole server
    max_subscriptions_per_tenant: int = 1024  # live subscriptions of one token subject, all connections
    max_subscriptions: int = 16_384  # live subscriptions, the whole server
    max_resample_points: int = 1_000_000  # one resample's grid over one group's held history
    max_groups: int = 10_000  # groups (tag value sets) one computation evaluates
    max_evaluation_work: int = 100_000_000  # values one node reduces in one evaluation (rollingPoints)
    max_evaluation_cpu_seconds: float = 5.0  # CPU one computation's evaluation of one batch may take


_budget = EvaluationBudget()


def configure(budget: EvaluationBudget) -> None:
    """The server's limits for the run-time checks (set once at start-up)."""
    global _budget
    _budget = budget


def budget() -> EvaluationBudget:
    return _budget


SETTINGS = {name: f"SPARKWIRE_{name.upper()}" for name in EvaluationBudget.__dataclass_fields__}


def over_limit(
    name: str, what: str, asked: int | float, limit: int | float, error: str = "TooManyPoints"
) -> ComputeError:
    """A refusal naming the limit, its setting and what was asked."""
    setting = SETTINGS[name]
    return ComputeError(
        error,
        f"{what}: {asked:,} exceeds the limit of {limit:,} ({setting})",
        {"limit": str(limit), "setting": setting, "asked": str(asked)},
    )


@dataclass(frozen=True)
class Cost:
    result_points: int  # per group: the most points/buckets/ranges its result may hold
    grid_points: int  # the largest resample grid over one group's held history (0: no resample)


def estimate(plan_root: OutputNode, window_ns: int, history_ns: int) -> Cost:
    """The cost of a compiled tree whose window is `window_ns` and which holds `history_ns` more
    before it (a Plan's root, window_ns and history_ns)."""
    held_ns = window_ns + history_ns
    grid = 0
    for node in _nodes(plan_root.input):
        interval = _resample_interval(node)
        if interval:
            grid = max(grid, held_ns // interval + 2)  # to the clock (nodes/base.py's grid_end)
    return Cost(result_points(plan_root), grid)


def _resample_interval(node: Node) -> int:
    if type(node).__name__ in ("ResampleForwardFill", "EnumResample"):
        return int(getattr(node, "interval_ns", 0))
    return 0


def _nodes(node: Node) -> Iterator[Node]:
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:  # a shared subtree (a reference read twice) is one node
            continue
        seen.add(id(n))
        yield n
        stack.extend(n.children())


def result_points(root: OutputNode) -> int:
    """Per group, the most points, buckets or ranges a root's result may hold."""
    name = type(root).__name__
    if name == "SummarizeSeries":
        decimation = getattr(root, "decimation", None)
        if not getattr(root, "decimate", True) or decimation is None:
            return int(getattr(root, "max_points", 0))
        return int(decimation.max_points)
    if name in ("SelectValue", "SelectRange"):
        return 1
    for field in ("max_ranges", "max_points", "bucket_count"):
        value = getattr(root, field, None)
        if isinstance(value, int) and value > 0:
            return value
    summary = getattr(root, "summary", None)  # SummarizeRangeAggregates
    if summary is not None and isinstance(getattr(summary, "max_ranges", None), int):
        return int(summary.max_ranges)
    return 1_000  # the charts' default size (they refuse more than 10,000 when they compile)


def refusal(cost: Cost, limits: EvaluationBudget) -> ComputeError | None:
    """Why one computation of this cost may not run at all, if it may not."""
    if cost.grid_points > limits.max_resample_points:
        return over_limit(
            "max_resample_points",
            "resample grid points over the held history",
            cost.grid_points,
            limits.max_resample_points,
        )
    return None


# -- run-time checks, before the work ------------------------------------------------------------
def charge_work(values: int, what: str) -> None:
    """Before a node reduces `values` values in one evaluation: refused past the budget."""
    limit = _budget.max_evaluation_work
    if values > limit:
        raise over_limit("max_evaluation_work", f"{what} would reduce this many values", values, limit)


def check_grid(points: int, what: str) -> None:
    limit = _budget.max_resample_points
    if points > limit:
        raise over_limit("max_resample_points", f"{what} grid points", points, limit)


def too_many_groups(routed: int, unrouted_series: int) -> ComputeError:
    """The series of `unrouted_series` more groups than the `routed` ones max_groups allows."""
    limit = _budget.max_groups
    setting = SETTINGS["max_groups"]
    return ComputeError(
        "TooManyGroups",
        f"the computation groups its channels into more than {limit:,} groups ({setting}); "
        f"{unrouted_series:,} series beyond them were left out: group by fewer tags or filter by tag",
        {"limit": str(limit), "setting": setting, "asked": f"more than {limit}"},
    )


def check_cpu(seconds: float) -> None:
    """After a computation's evaluation of one batch: one that took more CPU than the budget is
    stopped (it would take as much again with every batch, delaying every other computation)."""
    limit = _budget.max_evaluation_cpu_seconds
    if seconds > limit:
        raise ComputeError(
            "EvaluationBudgetExceeded",
            f"evaluating one batch took {seconds:.1f} s of CPU, over the limit of {limit:g} s "
            f"({SETTINGS['max_evaluation_cpu_seconds']}): the computation is stopped",
            {
                "limit": f"{limit:g}",
                "setting": SETTINGS["max_evaluation_cpu_seconds"],
                "asked": f"{seconds:.3f}",
            },
        )
