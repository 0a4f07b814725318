"""From a subscription's `ComputableNode` + `Context` to a Plan: the channels it reads (data for the
single Spark job, never plan branches) and the tree of evaluators (compute/evaluation/nodes/).

The root is built by the builder registered for its `ComputableNode` variant (registry.py);
builders/ registers every builder when it loads. Every refusal of a valid Nominal node is a
ComputeError carrying Nominal's error name; `MalformedNode` is only for JSON that is not a Nominal
node at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from compute.evaluation import nodes
from compute.evaluation.compiler import (
    builders,  # noqa: F401  (loading it registers every builder)
    datasets,
    dimensions,
    registry,
)
from compute.evaluation.compiler.builder import Builder, Json, context_references
from compute.evaluation.compiler.catalogs import NO_CATALOGS, Catalogs
from compute.evaluation.compiler.limits import CompileBudget, Limits, ResultOptions
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError, not_supported
from compute.evaluation.nodes.lttb_paging import PolledSummary
from compute.evaluation.nodes.units import WithUnit
from compute.evaluation.output_format import ArrowFormat
from compute.storage.catalog_reach import Reach
from compute.storage.series import ChannelSelector
from schemas.timestamps import NANOS_PER_SECOND


@dataclass
class Plan:
    root: nodes.OutputNode
    selectors: list[ChannelSelector]
    window_ns: int
    lookback_ns: int  # history the nodes need before the window
    grouped: bool
    # The held history's start moves by this much at a time (computation.py): 1/16 of the window
    # (at least 1 s), so a window holds at most that much more than its nodes need.
    history_step_ns: int = NANOS_PER_SECOND
    catalog: datasets.CatalogUse | None = None  # the assets and runs it resolved through, if any
    arrow: ArrowFormat | None = None  # SummarizeSeries asked for Nominal's ArrowPlot (output_format.py)
    unit: str | None = None  # the result's unit symbol, reported at creation (`result_unit`)

    @property
    def history_ns(self) -> int:
        """History a back-fill reads before the window: the lookback and one step."""
        return self.lookback_ns + self.history_step_ns


def history_step(window_ns: int) -> int:
    return max(window_ns // 16, NANOS_PER_SECOND)


def compile_plan(
    node: Json,
    window_ns: int,
    context: Mapping[str, Json],
    limits: Limits,
    options: ResultOptions,
    references: Mapping[str, Json] | None = None,
    may_read: Callable[[str], bool] | None = None,
    reach: Reach | None = None,
    catalogs: Catalogs = NO_CATALOGS,
    polled: bool = False,
    streamed: bool = False,
) -> Plan:
    """`context`: the variables; `references`: the datasets `DatasetReference` names; `may_read`:
    whether the token reaches a data source (None: every one), checked at each read; `catalogs`:
    the assets, runs, modules and events it may look up (none by default); `polled`: computed once
    over a past period (Nominal's ComputeService), so the variants Nominal only polls are built
    too (registry.py `polls`); `streamed`: a live subscription that asked to stream the polled
    variants marked with `streams` (builders/streamed.py, docs/extensions.md). Raises
    ComputeError for a valid request Sparkwire refuses (`ComputationTooComplex` as soon as it
    expands past `limits`' compile budget), MalformedNode for a broken one."""
    if window_ns < 0:
        raise ComputeError(
            "WindowNegative",
            f"windowWidth is negative ({human_duration(window_ns)})",
            {"window": str(window_ns)},
        )
    if window_ns > limits.max_window_ns:
        raise ComputeError(
            "WindowTooLarge",
            f"windowWidth {human_duration(window_ns)} exceeds the limit of "
            f"{human_duration(limits.max_window_ns)} "
            "(SPARKWIRE_MAX_WINDOW_SECONDS)",
            {"maxWindowNanos": str(limits.max_window_ns)},
        )
    budget = CompileBudget(limits.max_compile_nodes, limits.max_compile_depth, limits.max_compile_seconds)
    b = Builder(
        context,
        window_ns=window_ns,
        budget=budget,
        may_read=may_read,
        limits=limits,
        options=options,
        catalogs=catalogs,
        polled=polled,
        streamed=streamed,
        catalog=datasets.CatalogReads(reach=reach, source=catalogs.assets),  # reach None: all
    )
    b.dataset_references = context_references(b, references)
    kind, value = b.variant("ComputableNode", node)
    root = registry.builder("ComputableNode", kind, polled, streamed)(b, value)
    dimensions.check_dimensions(b, root.input)  # no node over differently grouped inputs
    lookback = root.lookback_ns
    if lookback > limits.max_lookback_ns:
        raise ComputeError(
            "WindowWithLookBackTooLarge",
            f"the computation needs {human_duration(lookback)} of history before the window; the limit is "
            f"{human_duration(limits.max_lookback_ns)}",
        )
    group_sets = {s.group_by for s in b.selectors if s.group_by}
    if len(group_sets) > 1:
        raise not_supported(
            f"channels group by different tags {sorted(group_sets)}; one set of groupByTags per computation",
            "groupByTags",
        )
    step = history_step(window_ns)
    return Plan(
        root,
        b.selectors,
        window_ns,
        lookback_ns=lookback,
        grouped=bool(group_sets),
        history_step_ns=step,
        catalog=b.catalog.use(),
        arrow=getattr(root, "arrow", None),  # SummarizeSeries, PolledSummary (nodes/lttb_paging.py)
        unit=result_unit(root),
    )


def result_unit(root: nodes.OutputNode) -> str | None:
    """The unit a creation reports: a series whose last step names its unit (`unitOverride`, or
    `unitConversion`'s output unit), summarized, selected as a value, or its points selected by
    LTTB, page or truncate when polled. Any other node reports none (Sparkwire's channels carry no
    unit, and it does not carry units through the other nodes)."""
    keeps_unit = isinstance(root, nodes.SummarizeSeries | nodes.SelectValue | PolledSummary)
    if keeps_unit and isinstance(root.input, WithUnit):
        return root.input.unit
    return None
