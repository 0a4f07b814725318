"""A computation over a past period, as Nominal's ComputeService asks for one (`start`/`end` instead
of a sliding window): the plan a subscription would compile, with its window the period, evaluated
once as a new subscription's FullResult is built from history (compute/spark/backfill.py): a
`Computation` routed to the series its channels select, loaded with their points from the
period less the plan's history, and evaluated whole at `end` as its clock. No node is evaluated
any other way (docs/decisions/0078-compute-service.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from compute.evaluation.compiler.plan import Plan
from compute.evaluation.computation import Batch, Computation, GroupKey
from compute.evaluation.results import Output
from compute.storage.series import SeriesInfo

# (series ids, from ts, to ts inclusive) -> their points in the log now, per series in seq order
ReadPeriod = Callable[[list[int], int, int], Batch]


class PolledComputation:
    """One polled evaluation of a compiled plan whose window is the period [end - window_ns, end]."""

    def __init__(self, plan: Plan, end: int) -> None:
        self.plan = plan
        self.end = end
        self._computation = Computation("polled", plan, None)

    def route(self, known: Iterable[SeriesInfo]) -> list[int]:
        """The ids of the series the plan reads, among those the log knows now."""
        for info in known:
            self._computation.route(info)
        return sorted(self._computation.routes)

    @property
    def read_from(self) -> int:
        """The oldest timestamp read: the period's start less the history a back-fill reads before
        its window (the nodes' lookback and one history step)."""
        return self.end - self.plan.window_ns - self.plan.history_ns

    def evaluate(self, rows: Batch) -> dict[GroupKey, Output]:
        """The outputs over the period (raises the ComputeError an evaluation raises)."""
        self._computation.load_backfill(rows, self.end)
        return self._computation.snapshot(None)


def evaluate_period(
    plan: Plan, known: Iterable[SeriesInfo], read: ReadPeriod, end: int
) -> dict[GroupKey, Output]:
    """Blocking: `plan` evaluated over its window ending at `end`, its points read by `read`."""
    polled = PolledComputation(plan, end)
    ids = polled.route(known)
    rows = read(ids, polled.read_from, end - 1) if ids else {}
    return polled.evaluate(rows)
