"""From a subscription's `ComputableNode` + `Context` to a Plan: the channels it reads (data for the
single Spark job, never plan branches) and the tree of evaluators (compute/evaluation/nodes/).

One builder per node kind, registered by its Conjure variant name. Every refusal of a valid Nominal
node is a ComputeError carrying Nominal's error name; `MalformedNode` is only for JSON that is not
a Nominal node at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compute.evaluation import compile_numeric, datasets, nodes
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError, invalid_computation, not_supported, polling_only
from compute.evaluation.nodes import union as nodes_union
from compute.evaluation.nodes.arithmetic import apply_binary, apply_unary
from compute.evaluation.nodes.outputs import DEFAULT_MAX_RANGES, arrow_of_enum
from compute.evaluation.nodes.units import WithUnit
from compute.evaluation.nominal_variants import (
    BINARY_OPERATORS,
    BOOLEAN_COMPARISONS,
    DURATION_UNIT_NANOS,
    ENUMS,
    INVALID_TYPES,
    POLLING_ONLY_TYPES,
    ROLLING_OPERATORS,
    STRATEGY_POLLING_ONLY,
    THRESHOLD_COMPARISONS,
    TIME_UNIT_NANOS,
    UNARY_OPERATORS,
    VARIANTS,
)
from compute.evaluation.output_format import ArrowFormat, arrow_format
from compute.evaluation.results import INT64_MAX
from compute.evaluation.summarize import Decimation
from compute.storage.catalog_reach import Reach
from compute.storage.series import ChannelSelector
from schemas.timestamps import NANOS_PER_SECOND, to_nanos

Json = Any
NO_INPUT = -1  # the input index of a dataset with no branch: no selector routes to it


class MalformedNode(ValueError):
    """Not a Nominal node at all: the client message is invalid (clientMessageError)."""


def _listed(source: dict[str, Json], field: str) -> list[Json]:
    """An optional list field of a channel or series (absent or null: empty)."""
    value = source.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedNode(f"{field} must be a list")
    return value


@dataclass(frozen=True)
class Limits:
    max_window_ns: int = 24 * 3600 * NANOS_PER_SECOND
    max_points: int = 1_000_000  # TooManyPoints: a result may not ask for more buckets/points than this
    max_lookback_ns: int = 24 * 3600 * NANOS_PER_SECOND  # history a node may need before the window
    max_compile_nodes: int = 5_000  # ComputationTooComplex: nodes after expanding every reference
    max_compile_depth: int = 100  # ComputationTooComplex: nesting after expanding every reference
    max_compile_seconds: float = 1.0  # ComputationTooComplex: CPU seconds one compilation may take


class CompileBudget:
    """What one compilation may expand: every expansion step (a series, a range, a dataset, a
    variable or module function, a channel read, an expression's operator) is charged before it
    recurses, so a request that references itself exponentially (`d_i = combine([d_{i-1},
    d_{i-1}])`) is refused after at most `max_nodes` steps, never after 2^N, and no chain of
    references recurses deeper than `max_depth`.

    A step's cost is not always the same (a catalog lookup, a large variable's JSON), so the CPU
    time the compilation has taken is checked too, every CLOCK_EVERY steps, against `max_seconds`.

    `with budget:` charges one node and one level of nesting for the block."""

    __slots__ = ("depth", "max_depth", "max_nodes", "max_seconds", "nodes", "started")
    CLOCK_EVERY = 16

    def __init__(
        self,
        max_nodes: int = Limits.max_compile_nodes,
        max_depth: int = Limits.max_compile_depth,
        max_seconds: float = Limits.max_compile_seconds,
    ):
        self.max_nodes, self.max_depth, self.max_seconds = max_nodes, max_depth, max_seconds
        self.nodes = self.depth = 0
        self.started = time.thread_time()  # CPU time of this thread: a busy machine does not count

    def charge(self, count: int = 1) -> None:
        self.nodes += count
        if self.nodes > self.max_nodes:
            raise too_complex(
                f"more than {self.max_nodes} nodes once its references, datasets, variables and module "
                "functions are expanded",
                self.max_nodes,
                "SPARKWIRE_MAX_COMPILE_NODES",
            )
        if self.nodes % self.CLOCK_EVERY < count and time.thread_time() - self.started > self.max_seconds:
            raise too_complex(
                f"more than {self.max_seconds:g} s of CPU to compile",
                self.max_seconds,
                "SPARKWIRE_MAX_COMPILE_SECONDS",
            )

    def charge_subtree(self, nodes: int, depth: int) -> None:
        """A part measured whole before it is built (an expression's operators), at this depth."""
        self.charge(nodes)
        self._nest(depth)

    def _nest(self, levels: int) -> None:
        if self.depth + levels > self.max_depth:
            raise too_complex(
                f"nested more than {self.max_depth} deep once its references, datasets, variables, "
                "module functions and expressions are expanded",
                self.max_depth,
                "SPARKWIRE_MAX_COMPILE_DEPTH",
            )

    def __enter__(self) -> CompileBudget:
        self.charge()
        self._nest(1)
        self.depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1


def permission_denied(rids: list[str]) -> ComputeError:
    """The token does not reach these data sources."""
    return ComputeError(
        "PermissionDenied",
        "the token does not reach these data sources: " + ", ".join(rids),
        {"rids": ",".join(rids)},
        status_code=403,
    )


def too_complex(what: str, limit: float, setting: str) -> ComputeError:
    """The compile budget's refusal: which limit (`setting`) and its value (`limit`)."""
    return ComputeError(
        "ComputationTooComplex",
        f"the computation is too complex: {what} (the limit is {limit:g}, {setting})",
        {"limit": f"{limit:g}", "setting": setting},
    )


@dataclass(frozen=True)
class ResultOptions:
    append_only: bool = False
    decimate: bool = True


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


@dataclass
class _Subject:
    """The one series a condition is about: its JSON and its node, once seen."""

    json: Json = None
    node: nodes.SeriesNode | None = None


@dataclass
class _Builder:
    context: Mapping[str, Json]
    selectors: list[ChannelSelector] = field(default_factory=list)
    window_ns: int = 0  # the computation's window, for nodes that evaluate it whole (peaks, selections)
    bound: dict[tuple[str, str, str | None], nodes.SeriesNode] = field(
        default_factory=dict
    )  # variables built
    bases: list[datasets.View] = field(default_factory=list)  # the withSeries inputs being built
    dataset_references: Mapping[str, Json] = field(default_factory=dict)  # Context.datasetReferences
    catalog: datasets.CatalogReads = field(default_factory=datasets.CatalogReads)  # assets and runs read
    budget: CompileBudget = field(default_factory=CompileBudget)  # what it may still expand
    # compile_derived.py's module lookups and the functions it has checked, once per compilation
    derived_cache: dict[Any, Any] = field(default_factory=dict)
    # a variable's value and the dataset references in scope as JSON text (`json_key`), by identity
    json_keys: dict[tuple[int, int], tuple[Json, Json, str]] = field(default_factory=dict)
    # Whether the token may read a data source: checked at each read as the tree is expanded, so a
    # refused request costs no more than the steps up to its first read (None: any may be read).
    may_read: Callable[[str], bool] | None = None

    # -- JSON shapes -------------------------------------------------------------------------------
    def variant(self, union: str, value: Json) -> tuple[str, Json]:
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise MalformedNode(f"{union}: expected a union object with a 'type'")
        kind = value["type"]
        if kind not in VARIANTS.get(union, frozenset()):
            raise MalformedNode(f"{union}: unknown variant '{kind}'")
        if kind not in value:
            raise MalformedNode(f"{union}: variant '{kind}' has no value")
        return kind, value[kind]

    @staticmethod
    def obj(value: Json, what: str) -> dict[str, Json]:
        if not isinstance(value, dict):
            raise MalformedNode(f"{what} must be an object")
        return value

    @staticmethod
    def get(obj: dict[str, Json], key: str, what: str) -> Json:
        if obj.get(key) is None:
            raise MalformedNode(f"{what}.{key} is required")
        return obj[key]

    @staticmethod
    def enum_value(enum: str, value: Json, what: str) -> str:
        if not isinstance(value, str) or value not in ENUMS[enum]:
            raise MalformedNode(f"{what}: not a {enum}: {value!r}")
        return value

    def unsupported(self, union: str, kind: str) -> ComputeError:
        if kind in POLLING_ONLY_TYPES:
            return polling_only(f"{union} '{kind}' supports polling only", POLLING_ONLY_TYPES[kind])
        if kind in INVALID_TYPES:
            return invalid_computation(f"{union} '{kind}' cannot stream", INVALID_TYPES[kind])
        return not_supported(f"{union} '{kind}' is not supported by Sparkwire", kind, union=union)

    # -- variables and constants -------------------------------------------------------------------
    def variable(self, name: Json) -> tuple[str, Json]:
        if not isinstance(name, str):
            raise MalformedNode("a variable name must be a string")
        if name not in self.context:
            raise ComputeError(
                "InvalidComputation",
                f"unknown variable '{name}'",
                {"invalidTypes": "", "variable": name},
            )
        return self.variant("VariableValue", self.context[name])

    def typed_variable(self, name: Json, kinds: tuple[str, ...]) -> tuple[str, Json]:
        kind, value = self.variable(name)
        if kind not in kinds:
            raise ComputeError(
                "InvalidComputation",
                f"variable '{name}' is a {kind}, expected {' or '.join(kinds)}",
                {"invalidTypes": "", "variant": kind, "variable": str(name)},
            )
        return kind, value

    def string_constant(self, value: Json) -> str:
        kind, inner = self.variant("StringConstant", value)
        if kind == "variable":
            _, inner = self.typed_variable(inner, ("string",))
        if not isinstance(inner, str):
            raise MalformedNode("a string constant must be a string")
        return inner

    def string_set_constant(self, value: Json) -> frozenset[str]:
        kind, inner = self.variant("StringSetConstant", value)
        if kind == "variable":
            _, inner = self.typed_variable(inner, ("stringSet",))
        if not isinstance(inner, list) or not all(isinstance(x, str) for x in inner):
            raise MalformedNode("a string set must be a list of strings")
        return frozenset(inner)

    def double_constant(self, value: Json) -> float:
        kind, inner = self.variant("DoubleConstant", value)
        if kind == "builtin":
            raise not_supported("builtin constants are not supported; use a literal", "builtin")
        if kind == "variable":
            _, inner = self.typed_variable(inner, ("double", "integer"))
        return _double(inner)

    def duration_constant(self, value: Json) -> int:
        kind, inner = self.variant("DurationConstant", value)
        if kind == "variable":
            _, inner = self.typed_variable(inner, ("duration",))
        return _duration(inner)

    def integer_constant(self, value: Json) -> int:
        kind, inner = self.variant("IntegerConstant", value)
        if kind == "variable":
            _, inner = self.typed_variable(inner, ("integer",))
        if not isinstance(inner, int) or isinstance(inner, bool):
            raise MalformedNode(f"not an INTEGER: {inner!r}")
        return inner

    def duration_expression(self, value: Json) -> int:
        """`scout.compute.api.Duration`: a unit count, a reference, or a sum/difference/negation."""
        kind, inner = self.variant("Duration", value)
        if kind == "reference":
            name = self.obj(inner, "Reference").get("name")
            return _duration(self.typed_variable(name, ("duration",))[1])
        if kind in DURATION_UNIT_NANOS:
            unit_ns = DURATION_UNIT_NANOS[kind]
            return self.integer_constant(self.get(self.obj(inner, kind), kind, kind)) * unit_ns
        o = self.obj(inner, kind)
        if kind == "negate":
            return -self.duration_expression(self.get(o, "input", kind))
        left = self.duration_expression(self.get(o, "left", kind))
        right = self.duration_expression(self.get(o, "right", kind))
        return left + right if kind == "add" else left - right

    # -- channels ----------------------------------------------------------------------------------
    def channel_input(self, reference: Json, expect: str | None) -> nodes.SeriesNode:
        """A `Reference` to a variable bound to a series: a channel, a series selected from a
        dataset, or a sub-computation (`computeNode`, built once however often it is referenced)."""
        ref = self.obj(reference, "Reference")
        name = ref.get("name")
        if not isinstance(name, str):
            raise MalformedNode("a Reference needs a 'name'")
        with self.budget:
            return self._variable_series(name, expect)

    def json_key(self, value: Json) -> str:
        """`[value, the dataset references in scope]` as JSON text, made once per pair of objects: a
        large variable referenced 2,000 times is written once, not 2,000 times (each entry keeps
        its objects, so an id is never reused while it is cached)."""
        references = self.dataset_references
        memo = (id(value), id(references))
        hit = self.json_keys.get(memo)
        if hit is None or hit[0] is not value or hit[1] is not references:
            hit = (value, references, json.dumps([value, references], sort_keys=True))
            self.json_keys[memo] = hit
        return hit[2]

    def _variable_series(self, name: str, expect: str | None) -> nodes.SeriesNode:
        kind, value = self.typed_variable(name, ("channel", "series", "computeNode", "derived"))
        if kind == "channel":
            return self.channel_series(value, expect)
        # a variable referenced again is the node already built (read once, evaluated once); keyed
        # by its JSON too, since a computeNode's own context may bind the same name to another value
        # (and by the dataset references in scope, which the same JSON may resolve against)
        key = (name, self.json_key(value), expect)
        if key in self.bound:
            return self.bound[key]
        if kind == "series":
            variable = self.obj(value, "SeriesVariable")
            group_by = tuple(self.string_constant(g) for g in variable.get("groupByTags") or [])
            node = self.select_series(self.get(variable, "select", "SeriesVariable"), expect, group_by)
            self.bound[key] = (
                node if isinstance(node, nodes.ChannelInput) else nodes_union.SharedSubtree(node)
            )
            return self.bound[key]
        if kind == "derived":  # a function of a module (compile_derived.py)
            node = compile_derived.derived_variable(self, name, value, expect)
            self.bound[key] = nodes_union.SharedSubtree(node)
            return self.bound[key]
        self.bound[key] = nodes_union.SharedSubtree(self.bound_computation(name, value, expect))
        return self.bound[key]

    def bound_computation(self, name: str, value: Json, expect: str | None) -> nodes.SeriesNode:
        """A `ComputeNodeWithContext`: its node, built with its own context's variables and dataset
        references over the subscription's (the inner binding wins)."""
        o = self.obj(value, "ComputeNodeWithContext")
        inner_context = self.obj(o.get("context") or {}, "Context")
        variables = self.obj(inner_context.get("variables") or {}, "Context.variables")
        refuse_unhonoured_context(inner_context)
        references = context_references(self, inner_context.get("datasetReferences"))
        kind, node = datasets.variant("ComputeNode", self.get(o, "seriesNode", "ComputeNodeWithContext"))
        outer, outer_references = self.context, self.dataset_references
        self.context = {**outer, **variables}
        self.dataset_references = {**outer_references, **references}
        try:
            if kind == "numeric":
                return self.numeric(node)
            if kind == "enum":
                return self.enum(node)
            if kind == "raw":
                return self.channel_input(node, expect)
            if kind == "ranges":
                raise ComputeError(
                    "InvalidComputation",
                    f"variable '{name}' is bound to ranges, and is referenced where a series is read",
                    {"invalidTypes": "", "variant": "ranges", "variable": name},
                )
            raise self.unsupported("ComputeNode", kind)
        finally:
            self.context, self.dataset_references = outer, outer_references

    def channel_series(self, value: Json, expect: str | None) -> nodes.SeriesNode:
        kind, source = self.variant("ChannelSeries", value)
        if kind == "dataSource":
            return self.data_source_channel(source, expect)
        return self.resource_channel(kind, self.obj(source, f"{kind}Channel"), expect)

    def resource_channel(self, kind: str, o: dict[str, Json], expect: str | None) -> nodes.SeriesNode:
        """`ChannelSeries.asset` / `.run`: a channel of one data scope of an asset or a run in
        Sparkwire's catalog, that scope's tags and the channel's own tags and tag filters applied."""
        what = "AssetChannel" if kind == "asset" else "RunChannel"
        scope_name = self.string_constant(self.get(o, "dataScopeName", what))
        if kind == "asset":
            branches = datasets.asset_branches(
                self.catalog.asset(self.string_constant(self.get(o, "assetRid", what))), {}
            )
        else:
            run = self.catalog.run(self.string_constant(self.get(o, "runRid", what)))
            branches = datasets.run_branches(run, self.catalog)
            if o.get("assetRid") is not None:
                asset_rid = self.string_constant(o["assetRid"])
                branches = [b for b in branches if dict(b.injected).get(datasets.ASSET_RID) == asset_rid]
            elif len(run.asset_rids) > 1:
                raise ComputeError(
                    "InvalidComputation",
                    f"run '{run.rid}' has {len(run.asset_rids)} assets: a RunChannel needs assetRid",
                    {"invalidTypes": "", "variant": "run", "field": "assetRid", "rid": run.rid},
                )
        branches = [b for b in branches if dict(b.injected).get(datasets.DATA_SCOPE) == scope_name]
        if not branches:
            raise ComputeError(
                "InvalidComputation",
                f"{kind} has no data scope '{scope_name}'",
                {"invalidTypes": "", "variant": kind, "field": "dataScopeName", "dataScopeName": scope_name},
            )
        tags = self.obj(o.get("additionalTags") or {}, f"{what}.additionalTags")
        conditions = [datasets.TagCondition(k, frozenset([self.string_constant(v)])) for k, v in tags.items()]
        if o.get("additionalTagFilters") is not None:
            conditions += datasets.tag_filters(self, o["additionalTagFilters"])
        for c in conditions:
            if any(c.key in dict(b.tags) for b in branches):
                raise not_supported(
                    f"{what} filters tag '{c.key}', which its data scope already fixes",
                    what,
                    field="additionalTagFilters",
                )
            branches = [nb for b in branches if (nb := b.with_filter(c)) is not None]
        channel = self.string_constant(self.get(o, "channel", what))
        return self.read_branches(datasets.View(tuple(branches)), channel, expect, self.group_by(o))

    def group_by(self, o: dict[str, Json]) -> tuple[str, ...]:
        group_by = [self.string_constant(g) for g in _listed(o, "groupByTags")]
        tags_to_group_by = _listed(o, "tagsToGroupBy")
        if not all(isinstance(g, str) for g in tags_to_group_by):
            raise MalformedNode("tagsToGroupBy must be a list of strings")
        return tuple(sorted(set(group_by + tags_to_group_by)))

    def data_source_channel(self, value: Json, expect: str | None) -> nodes.SeriesNode:
        source = self.obj(value, "DataSourceChannel")
        tags = source.get("tags") or {}
        if not isinstance(tags, dict):
            raise MalformedNode("DataSourceChannel.tags must be a map")
        if source.get("storage") is not None:  # which engine to read: Sparkwire has one store
            self.enum_value("SeriesStorage", source["storage"], "DataSourceChannel.storage")
        filters = (
            datasets.tag_filters(self, source["tagFilters"]) if source.get("tagFilters") is not None else []
        )
        selector = ChannelSelector(
            data_source_rid=self.string_constant(self.get(source, "dataSourceRid", "DataSourceChannel")),
            channel=self.string_constant(self.get(source, "channel", "DataSourceChannel")),
            tags=tuple(sorted((k, self.string_constant(v)) for k, v in tags.items())),
            group_by=self.group_by(source),
            tag_filters=tuple(filters),
        )
        return self.read(selector, expect)

    def select_series(
        self, value: Json, expect: str | None, group_by: tuple[str, ...] = ()
    ) -> nodes.SeriesNode:
        """`selectNumeric` / `selectEnum` / a series variable's `select` (a `SelectSeries`): one
        channel, by name, of a dataset (compute/evaluation/datasets.py), every branch of it."""
        what = {"numeric": "selectNumeric", "enum": "selectEnum"}.get(expect or "", "SeriesVariable.select")
        o = self.obj(value, what)
        if o.get("sampling") is not None:
            raise not_supported(
                f"{what}.sampling (subsampling) is not supported; omit it", what, field="sampling"
            )
        if o.get("storage") is not None:  # which engine to read: Sparkwire has one store
            self.enum_value("SeriesStorage", o["storage"], f"{what}.storage")
        if o.get("name") is None:
            raise not_supported(f"{what} without a name (all channels) is not supported", what, field="name")
        name = self.string_constant(o["name"])
        if o.get("dataset") is not None:
            view = datasets.Resolver(self, self.dataset_references).resolve(o["dataset"])
        elif self.bases:
            view = self.bases[-1]
        else:
            raise not_supported(f"{what} needs a dataset outside a withSeries dataset", what, field="dataset")
        derived = dict(view.derived)
        if name in derived:
            if group_by:
                raise not_supported(
                    f"groupByTags on the derived series '{name}': group its inputs", what, field="groupByTags"
                )
            self.bases.append(derived[name].base)
            try:
                node = self.series(derived[name].definition)
            finally:
                self.bases.pop()
            return self.timed(node, what) if expect is None else node
        if name in view.dropped:
            raise ComputeError(
                "InvalidComputation",
                f"series '{name}' was dropped from the dataset (dropSeries)",
                {"invalidTypes": "", "variant": "dropSeries", "name": name},
            )
        return self.read_branches(view, name, expect, group_by)

    def read_branches(
        self, view: datasets.View, channel: str, expect: str | None, group_by: tuple[str, ...]
    ) -> nodes.SeriesNode:
        """One channel on every branch of a dataset: a selector per branch, shifted as the branch is,
        merged in time order. A dataset with no branch (a filter no branch passes) reads nothing."""
        reads: list[nodes.SeriesNode] = []
        for branch in view.branches:
            selector = ChannelSelector(
                data_source_rid=branch.data_source_rid,
                channel=channel,
                tags=branch.tags,
                group_by=group_by,
                tag_filters=branch.filters,
                injected=branch.injected,
            )
            node: nodes.SeriesNode = self.read(selector, expect)
            if branch.from_ns is not None:
                node = nodes_union.PointsFrom(node, branch.from_ns)
            if branch.shift_ns:
                node = nodes.TimeShift(node, branch.shift_ns)
            reads.append(node)
        if not reads:
            return nodes.ChannelInput(NO_INPUT, expect)
        return reads[0] if len(reads) == 1 else nodes_union.MergedBranches(reads)

    def read(self, selector: ChannelSelector, expect: str | None) -> nodes.ChannelInput:
        self.budget.charge()
        self.refuse_unreachable(selector.data_source_rid)
        self.selectors.append(selector)
        return nodes.ChannelInput(len(self.selectors) - 1, expect)

    def refuse_unreachable(self, data_source_rid: str) -> None:
        """PermissionDenied, at once, for a data source the token does not reach."""
        if self.may_read is not None and not self.may_read(data_source_rid):
            raise permission_denied([data_source_rid])

    # -- series, ranges ----------------------------------------------------------------------------
    def series(self, value: Json) -> nodes.SeriesNode:
        with self.budget:
            return self._series(value)

    def _series(self, value: Json) -> nodes.SeriesNode:
        kind, inner = self.variant("Series", value)
        if kind == "raw":
            return self.channel_input(inner, None)
        if kind == "numeric":
            return self.numeric(inner)
        if kind == "enum":
            return self.enum(inner)
        raise self.unsupported("Series", kind)

    def numeric(self, value: Json) -> nodes.SeriesNode:
        kind, inner = self.variant("NumericSeries", value)
        build = NUMERIC_BUILDERS.get(kind)
        if build is None:
            raise self.unsupported("NumericSeries", kind)
        with self.budget:
            return build(self, inner)

    def enum(self, value: Json, constant_ok: bool = False) -> nodes.SeriesNode:
        """An enum series; a label without timestamps (`selectCategoricalProperty`) only where the
        caller broadcasts it (`constant_ok`), refused by name anywhere else."""
        kind, inner = self.variant("EnumSeries", value)
        build = ENUM_BUILDERS.get(kind)
        if build is None:
            raise self.unsupported("EnumSeries", kind)
        with self.budget:
            node = build(self, inner)
        if isinstance(node, nodes.EnumConstant) and not constant_ok:
            raise not_supported(
                f"'{kind}' is a label with no timestamps of its own (it stands at every time, as a "
                "constant does): only categoricalEqualityRangesV2 / enumSeriesEqualityRangesNode "
                "compare a series with it",
                kind,
            )
        return node

    def ranges(self, value: Json) -> nodes.RangeNode:
        kind, inner = self.variant("RangeSeries", value)
        build = RANGE_BUILDERS.get(kind)
        if build is None:
            raise self.unsupported("RangeSeries", kind)
        with self.budget:
            return build(self, inner)

    def condition(self, value: Json, subject: _Subject, what: str, field_name: str) -> nodes.Condition:
        """A `BooleanSeries` whose operands are constants or one and the same series (`subject`):
        it is evaluated at that series' own points and needs no alignment. A condition on two
        different series is refused: Nominal aligns the compared series as arithmetic would, but
        does not say whether a nested condition aligns each comparison first or all its series at
        once, and with a 1 s forward-fill radius the two give different points."""
        kind, inner = self.variant("BooleanSeries", value)
        o = self.obj(inner, kind)
        left, right = self.get(o, "left", kind), self.get(o, "right", kind)
        if kind in ("and", "or"):
            with self.budget:
                a = self.condition(left, subject, what, field_name)
                b = self.condition(right, subject, what, field_name)
            return nodes.BothHold(a, b) if kind == "and" else nodes.EitherHolds(a, b)
        return nodes.Comparison(
            BOOLEAN_COMPARISONS[kind],
            self.operand(left, subject, what, field_name),
            self.operand(right, subject, what, field_name),
        )

    def operand(self, value: Json, subject: _Subject, what: str, field_name: str) -> float | None:
        """A comparison's side: a constant (its value) or the subject (None)."""
        mark = len(self.selectors)
        node = self.numeric(value)
        if isinstance(node, nodes.Constant):
            return node.value
        if subject.node is None:
            subject.json, subject.node = value, node
            return None
        del self.selectors[mark:]  # the subject again: it is read once, through its first node
        if value != subject.json:
            raise ComputeError(
                "InvalidComputation",
                f"{what}.{field_name} compares two different series; a condition streams only over "
                + (
                    "the filtered input and constants"
                    if what == "filterWhere"
                    else "one series and constants (intersectRange / unionRange combine ranges of several)"
                ),
                {"invalidTypes": "", "variant": what, "field": field_name},
            )
        return None

    def timed(self, node: nodes.SeriesNode, where: str) -> nodes.SeriesNode:
        """A series with timestamps of its own: a constant has none, so it cannot feed `where`."""
        if isinstance(node, nodes.Constant):
            raise not_supported(f"'{where}' needs a series that reads a channel, not a constant", where)
        return node


def _double(value: Json) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise MalformedNode(f"not a DOUBLE: {value!r}")
    if isinstance(value, str):
        if value not in ("NaN", "Infinity", "-Infinity"):
            raise MalformedNode(f"not a DOUBLE: {value!r}")
        return float(value.replace("Infinity", "inf"))
    return float(value)


def _duration(value: Json) -> int:
    if not isinstance(value, dict):
        raise MalformedNode("a Duration must be an object")
    seconds, nanos = value.get("seconds"), value.get("nanos", 0)
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (seconds, nanos)):
        raise MalformedNode("a Duration needs integer 'seconds' and 'nanos'")
    assert isinstance(seconds, int) and isinstance(nanos, int)
    return to_nanos(seconds, nanos)


SeriesBuilder = Callable[[_Builder, Json], nodes.SeriesNode]
RangeBuilder = Callable[[_Builder, Json], nodes.RangeNode]


# -- NumericSeries -------------------------------------------------------------------------------
def _unary(op: str) -> SeriesBuilder:
    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        x = b.numeric(b.get(b.obj(v, op), "x", op))
        if isinstance(x, nodes.Constant):  # folded now, with the same numpy maths
            return nodes.Constant(float(apply_unary(op, np.array([x.value]))[0]))
        return nodes.UnaryNode(op, x)

    return build


def _binary(op: str) -> SeriesBuilder:
    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, op)
        left, right = b.numeric(b.get(o, "left", op)), b.numeric(b.get(o, "right", op))
        if isinstance(left, nodes.Constant) and isinstance(right, nodes.Constant):
            return nodes.Constant(float(apply_binary(op, np.array([left.value]), np.array([right.value]))[0]))
        return nodes.BinaryNode(op, left, right)

    return build


def _constant(b: _Builder, v: Json) -> nodes.SeriesNode:
    _, inner = b.variant("ConstantNumericSeries", v)
    return nodes.Constant(b.double_constant(inner))


def _negatives(b: _Builder, o: dict[str, Json]) -> str:
    config = o.get("negativeValuesConfiguration")
    return "allowNegativeValues" if config is None else b.variant("NegativeValueConfiguration", config)[0]


def _derivative(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "derivative")
    unit = o.get("timeUnit")
    unit = "SECONDS" if unit is None else b.enum_value("TimeUnit", unit, "derivative.timeUnit")
    x = b.timed(b.numeric(b.get(o, "input", "derivative")), "derivative")
    return nodes.Derivative(x, TIME_UNIT_NANOS[unit], _negatives(b, o))


def _value_difference(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "valueDifference")
    x = b.timed(b.numeric(b.get(o, "input", "valueDifference")), "valueDifference")
    return nodes.ValueDifference(x, _negatives(b, o))


def _time_shift(version: str, family: str) -> SeriesBuilder:
    """`timeShift` (a `DurationConstant`) and `timeShiftV2` (a `Duration` expression, which is what
    nominal-compute's `.time_shift()` emits) of a numeric or an enum series: one evaluator."""

    def build(b: _Builder, v: Json) -> nodes.SeriesNode:
        o = b.obj(v, version)
        raw_input = b.get(o, "input", version)
        x = b.timed(b.numeric(raw_input) if family == "numeric" else b.enum(raw_input), version)
        duration = b.get(o, "duration", version)
        shift_ns = (
            b.duration_constant(duration) if version == "timeShift" else b.duration_expression(duration)
        )
        if abs(shift_ns) > INT64_MAX:
            raise ComputeError(
                "InvalidComputation",
                f"{version}.duration of {human_duration(shift_ns)} is beyond int64 nanoseconds "
                "(about 292 years)",
                {"invalidTypes": "", "variant": version, "field": "duration"},
            )
        return nodes.TimeShift(x, shift_ns)

    return build


def _threshold_filter(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "thresholdFilter")
    x = b.timed(b.numeric(b.get(o, "input", "thresholdFilter")), "thresholdFilter")
    op = b.enum_value("ThresholdOperator", b.get(o, "operator", "thresholdFilter"), "thresholdFilter")
    return nodes.ThresholdFilter(x, op, b.double_constant(b.get(o, "threshold", "thresholdFilter")))


def _filter_where(b: _Builder, v: Json) -> nodes.SeriesNode:
    """`filterWhere` (nominal-compute's `.filter_where(condition)`): the input's points where a
    condition over the input itself and constants holds; `x.filter_where(x > c)` is thresholdFilter."""
    o = b.obj(v, "filterWhere")
    raw_input = b.get(o, "input", "filterWhere")
    x = b.timed(b.numeric(raw_input), "filterWhere")
    condition = b.condition(
        b.get(o, "condition", "filterWhere"), _Subject(raw_input, x), "filterWhere", "condition"
    )
    return nodes.FilterWhere(x, condition)


def _numeric_aggregation(b: _Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "numericAggregation")
    shape, builder = b.variant("AggregationBuilder", b.get(o, "input", "numericAggregation"))
    operator, _ = b.variant("NumericAggregationOperator", b.get(o, "operator", "numericAggregation"))
    if shape != "rollingTime" or operator not in ROLLING_OPERATORS:
        return compile_numeric.aggregation(b, v)  # rollingPoints, groupBy, percentile
    rolling = b.obj(builder, "rollingTime")
    window_ns = b.duration_expression(b.get(rolling, "window", "rollingTime"))
    if window_ns <= 0:
        raise not_supported(
            f"a rolling window must be positive, got {human_duration(window_ns)}",
            "rollingTime",
            field="window",
        )
    x = b.timed(b.series(b.get(rolling, "input", "rollingTime")), "numericAggregation")
    return nodes.RollingAggregation(x, window_ns, operator)


NUMERIC_BUILDERS: dict[str, SeriesBuilder] = {
    "raw": lambda b, v: b.channel_input(v, "numeric"),
    "channel": lambda b, v: b.channel_series(v, "numeric"),
    "selectNumeric": lambda b, v: b.select_series(v, "numeric"),
    "constant": _constant,
    **{op: _unary(op) for op in UNARY_OPERATORS},
    **{op: _binary(op) for op in BINARY_OPERATORS},
    "derivative": _derivative,
    "valueDifference": _value_difference,
    "timeShift": _time_shift("timeShift", "numeric"),
    "timeShiftV2": _time_shift("timeShiftV2", "numeric"),
    "thresholdFilter": _threshold_filter,
    "filterWhere": _filter_where,
    "numericAggregation": _numeric_aggregation,
    **compile_numeric.BUILDERS,
}
ENUM_BUILDERS: dict[str, SeriesBuilder] = {
    "raw": lambda b, v: b.channel_input(v, "enum"),
    "channel": lambda b, v: b.channel_series(v, "enum"),
    "selectEnum": lambda b, v: b.select_series(v, "enum"),
    "timeShift": _time_shift("timeShift", "enum"),
    "timeShiftV2": _time_shift("timeShiftV2", "enum"),
}


# -- RangeSeries ---------------------------------------------------------------------------------
def _persistence(b: _Builder, o: dict[str, Json], what: str) -> None:
    """Only the default persistence (one point, first matching point starts the range) streams."""
    config = o.get("persistenceWindowConfiguration")
    if config is None:
        return
    config = b.obj(config, f"{what}.persistenceWindowConfiguration")
    min_points = config.get("minPoints")
    min_duration = config.get("minDuration")
    start = config.get("outputRangeStart")
    trivial = (
        (min_points is None or b.variant("IntegerConstant", min_points) == ("literal", 1))
        and (min_duration is None or b.duration_constant(min_duration) <= 1)
        and (start is None or b.variant("OutputRangeStart", start)[0] == "firstPointMatchingCondition")
    )
    if not trivial:
        raise invalid_computation(f"{what} with a persistence window cannot stream", "POINT_PERSISTENCE")


def _persistence_v2(b: _Builder, o: dict[str, Json], what: str) -> None:
    """The persistence fields of `thresholdRangesV2`, `categoryFilterRangesV2` and `booleanRanges`
    stream only at their defaults (one point, one nanosecond, the range starting at the first
    matching point); otherwise refused by name."""
    refusal: tuple[str, object] | None = None
    min_points, min_duration, start = o.get("minPoints"), o.get("minDuration"), o.get("rangeStart")
    if min_points is not None and (points := b.integer_constant(min_points)) != 1:
        refusal = ("minPoints", points)
    elif min_duration is not None and (duration_ns := b.duration_expression(min_duration)) > 1:
        refusal = ("minDuration", human_duration(duration_ns))
    elif start is not None and (kind := b.enum_value("RangeStart", start, "rangeStart")) != "CONDITION_START":
        refusal = ("rangeStart", kind)
    if refusal is not None:
        field_name, value = refusal
        raise ComputeError(
            "InvalidComputation",
            f"{what}.{field_name} = {value} asks for a persistence window, which cannot stream",
            {"invalidTypes": "POINT_PERSISTENCE", "field": field_name},
        )


def _threshold_v2(b: _Builder, v: Json) -> nodes.RangeNode:
    o = b.obj(v, "thresholdRangesV2")
    _persistence_v2(b, o, "thresholdRangesV2")
    x = b.timed(b.numeric(b.get(o, "input", "thresholdRangesV2")), "thresholdRangesV2")
    kind, comparison = b.variant("ThresholdRangesComparison", b.get(o, "comparison", "thresholdRangesV2"))
    c = b.obj(comparison, kind)
    threshold = b.double_constant(b.get(c, "threshold", kind))
    tolerance = 0.0
    if kind in ("eq", "ne") and c.get("tolerance") is not None:
        tolerance = b.double_constant(c["tolerance"])
        if not tolerance >= 0.0:  # NaN too
            message = f"thresholdRangesV2 {kind}.tolerance must be >= 0, got {tolerance}"
            raise not_supported(message, "thresholdRangesV2", field=f"comparison.{kind}.tolerance")
    return nodes.Threshold(x, THRESHOLD_COMPARISONS[kind], threshold, tolerance)


def _threshold(b: _Builder, v: Json) -> nodes.RangeNode:
    o = b.obj(v, "threshold")
    _persistence(b, o, "threshold")
    x = b.timed(b.numeric(b.get(o, "input", "threshold")), "threshold")
    op = b.enum_value("ThresholdOperator", b.get(o, "operator", "threshold"), "threshold")
    return nodes.Threshold(x, op, b.double_constant(b.get(o, "threshold", "threshold")))


def _min_max_threshold(b: _Builder, v: Json) -> nodes.RangeNode:
    o = b.obj(v, "minMaxThreshold")
    _persistence(b, o, "minMaxThreshold")
    x = b.timed(b.numeric(b.get(o, "input", "minMaxThreshold")), "minMaxThreshold")
    op = b.enum_value("MinMaxThresholdOperator", b.get(o, "operator", "minMaxThreshold"), "minMaxThreshold")
    lower = b.double_constant(b.get(o, "lowerBound", "minMaxThreshold"))
    upper = b.double_constant(b.get(o, "upperBound", "minMaxThreshold"))
    return nodes.MinMaxThreshold(x, op, lower, upper)


def _enum_filter(b: _Builder, v: Json) -> nodes.RangeNode:
    o = b.obj(v, "enumFilter")
    _persistence(b, o, "enumFilter")
    op = b.enum_value("EnumFilterOperator", b.get(o, "operator", "enumFilter"), "enumFilter")
    if op == "MATCHES_ANY_REGEX":
        raise not_supported(
            "enumFilter MATCHES_ANY_REGEX is not supported; use IS_IN", "enumFilter", field="operator"
        )
    values = b.string_set_constant(b.get(o, "values", "enumFilter"))
    return nodes.EnumFilter(b.enum(b.get(o, "input", "enumFilter")), values, negate=op == "IS_NOT_IN")


def _category_filter_v2(b: _Builder, v: Json) -> nodes.RangeNode:
    """`categoryFilterRangesV2` (nominal-compute's `.category_ranges().is_in()` and siblings) is
    `enumFilter` with its values as a list of `StringConstant`s."""
    what = "categoryFilterRangesV2"
    o = b.obj(v, what)
    _persistence_v2(b, o, what)
    op = b.enum_value("EnumFilterOperator", b.get(o, "operator", what), f"{what}.operator")
    if op == "MATCHES_ANY_REGEX":
        raise ComputeError(
            "InvalidComputation",
            f"{what}.operator MATCHES_ANY_REGEX (RE2 patterns) is not supported; use IS_IN",
            {"invalidTypes": "", "variant": what, "field": "operator"},
        )
    values = b.get(o, "values", what)
    if not isinstance(values, list):
        raise MalformedNode(f"{what}.values must be a list")
    labels = frozenset(b.string_constant(x) for x in values)
    return nodes.EnumFilter(b.enum(b.get(o, "input", what)), labels, negate=op == "IS_NOT_IN")


def _boolean_ranges(b: _Builder, v: Json) -> nodes.RangeNode:
    """`booleanRanges` (nominal-compute's `(x > a).ranges()`, `((x > a) & (x < b)).ranges()`, ...):
    where a condition over one series and constants holds."""
    what = "booleanRanges"
    o = b.obj(v, what)
    _persistence_v2(b, o, what)
    subject = _Subject()
    condition = b.condition(b.get(o, "input", what), subject, what, "input")
    if subject.node is None:
        raise not_supported(f"'{what}' needs a series that reads a channel, not only constants", what)
    return nodes.ConditionRanges(subject.node, condition)


def _range_inputs(b: _Builder, v: Json, what: str) -> list[nodes.RangeNode]:
    inputs = b.get(b.obj(v, what), "inputs", what)
    if not isinstance(inputs, list):
        raise MalformedNode(f"{what}.inputs must be a list")
    if not inputs:
        raise not_supported(f"{what} needs at least one input", what, field="inputs")
    return [b.ranges(r) for r in inputs]


RANGE_BUILDERS: dict[str, RangeBuilder] = {
    "threshold": _threshold,
    "thresholdRangesV2": _threshold_v2,
    "minMaxThreshold": _min_max_threshold,
    "enumFilter": _enum_filter,
    "categoryFilterRangesV2": _category_filter_v2,
    "booleanRanges": _boolean_ranges,
    "not": lambda b, v: nodes.NotRanges(b.ranges(b.get(b.obj(v, "not"), "input", "not"))),
    "intersectRange": lambda b, v: nodes.IntersectRanges(_range_inputs(b, v, "intersectRange")),
    "unionRange": lambda b, v: nodes.UnionRanges(_range_inputs(b, v, "unionRange")),
}


# -- ComputableNode ------------------------------------------------------------------------------
def _summarize_series(
    b: _Builder, value: Json, window_ns: int, limits: Limits, options: ResultOptions
) -> nodes.OutputNode:
    o = b.obj(value, "SummarizeSeries")
    strategy = o.get("summarizationStrategy")
    if strategy is not None:
        skind, _ = b.variant("SummarizationStrategy", strategy)
        if skind in STRATEGY_POLLING_ONLY:
            raise polling_only(
                f"summarization strategy '{skind}' supports polling only", STRATEGY_POLLING_ONLY[skind]
            )
    aggregations = compile_numeric.summary_aggregations(b, o)
    arrow = arrow_format(o)
    if arrow is not None:  # V2 percentile fields: bucket columns computed as numericAggregations are
        aggregations += compile_numeric.percentile_columns(arrow.percentiles)
    buckets, resolution = o.get("buckets"), o.get("resolution")
    for name, x in (("buckets", buckets), ("resolution", resolution)):
        if x is not None and (not isinstance(x, int) or isinstance(x, bool)):
            raise MalformedNode(f"SummarizeSeries.{name} must be an integer")
    decimation = Decimation.of(window_ns, buckets, resolution)
    if decimation.max_points > limits.max_points:
        raise _too_many(decimation.max_points, "buckets", limits)
    series_json = b.get(o, "input", "SummarizeSeries")
    if arrow is not None and isinstance(series_json, dict) and series_json.get("type") == "enum":
        raise arrow_of_enum()
    series = b.timed(b.series(series_json), "series")
    return nodes.SummarizeSeries(
        series, decimation, options.decimate, limits.max_points, arrow=arrow, aggregations=aggregations
    )


def _summarize_ranges(
    b: _Builder, value: Json, window_ns: int, limits: Limits, options: ResultOptions
) -> nodes.OutputNode:
    o = b.obj(value, "SummarizeRanges")
    max_ranges = o.get("maxRanges")
    if max_ranges is None:
        max_ranges = DEFAULT_MAX_RANGES
    if not isinstance(max_ranges, int) or isinstance(max_ranges, bool):
        raise MalformedNode("SummarizeRanges.maxRanges must be an integer")
    if max_ranges <= 0:
        raise not_supported(
            f"maxRanges must be positive, got {max_ranges}", "SummarizeRanges", field="maxRanges"
        )
    if max_ranges > limits.max_points:
        raise _too_many(max_ranges, "ranges", limits)
    ranges = b.ranges(b.get(o, "input", "SummarizeRanges"))
    return nodes.SummarizeRanges(ranges, window_ns, max_ranges, options.append_only, options.decimate)


def _select_value(
    b: _Builder, value: Json, window_ns: int, limits: Limits, options: ResultOptions
) -> nodes.OutputNode:
    kind, inner = b.variant("SelectValue", value)
    if kind not in ("firstPoint", "lastPoint", "firstValuePoint", "lastValuePoint"):
        raise b.unsupported("SelectValue", kind)
    return nodes.SelectValue(
        b.timed(b.series(inner), kind), last=kind.startswith("last"), single=kind.endswith("ValuePoint")
    )


OutputBuilder = Callable[[_Builder, Json, int, Limits, ResultOptions], nodes.OutputNode]
OUTPUT_BUILDERS: dict[str, OutputBuilder] = {
    "series": _summarize_series,
    "ranges": _summarize_ranges,
    "value": _select_value,
}


def _too_many(asked: int, what: str, limits: Limits) -> ComputeError:
    return ComputeError(
        "TooManyPoints",
        f"{asked} {what} exceed the limit of {limits.max_points}",
        {"limit": str(limits.max_points)},
    )


# Context fields that change an answer and that Sparkwire does not honour, refused by name when set:
# why, for each. (`applyDataScopeOffsets` is honoured: Sparkwire's data scopes have no offsets, so
# applying them shifts nothing.)
UNHONOURED_CONTEXT = {
    "defaultFillStrategy": "multi-input nodes align by forward fill with a 1 s radius; set "
    "interpolationConfiguration on the node instead",
    "defaultAlignmentStrategy": "multi-input nodes align on the union of their inputs' timestamps",
    "resolveAssetsThroughDatasets": "Sparkwire's assets have no mirrored datasets; they resolve through "
    "their data scopes",
    "functionVariables": "it binds variables of (deprecated) function references, which no node of the "
    "compute language reads; a module function takes its arguments from the derived node's functionArgs",
}


def refuse_unhonoured_context(context: Mapping[str, Json]) -> None:
    """A `Context` (wire names) setting a field of UNHONOURED_CONTEXT is refused, naming it (an
    empty map sets nothing)."""
    for name, why in UNHONOURED_CONTEXT.items():
        value = context.get(name)
        if value is not None and value is not False and value != {}:
            raise ComputeError(
                "InvalidComputation",
                f"Context.{name} is not supported by Sparkwire: {why}; omit it",
                {"invalidTypes": name},
            )


def context_references(b: _Builder, value: Json) -> dict[str, Json]:
    """A context's `datasetReferences` (absent or null: none), each checked to be a `Dataset` now,
    so that a broken one is a bad message even where nothing references it."""
    references = b.obj(value if value is not None else {}, "Context.datasetReferences")
    for dataset in references.values():
        b.variant("Dataset", dataset)
    return references


def compile_plan(
    node: Json,
    window_ns: int,
    context: Mapping[str, Json],
    limits: Limits,
    options: ResultOptions,
    references: Mapping[str, Json] | None = None,
    may_read: Callable[[str], bool] | None = None,
    reach: Reach | None = None,
) -> Plan:
    """`context`: the variables; `references`: the datasets `DatasetReference` names; `may_read`:
    whether the token reaches a data source (None: every one), checked at each read. Raises
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
    b = _Builder(context, window_ns=window_ns, budget=budget, may_read=may_read)
    b.catalog.reach = reach  # the catalog entries the token may see (None: all)
    b.dataset_references = context_references(b, references)
    kind, value = b.variant("ComputableNode", node)
    build = OUTPUT_BUILDERS.get(kind)
    if build is None:
        raise b.unsupported("ComputableNode", kind)
    root = build(b, value, window_ns, limits, options)
    compile_cross_group.check_dimensions(b, root.input)  # no node over differently grouped inputs
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
        arrow=root.arrow if isinstance(root, nodes.SummarizeSeries) else None,
        unit=result_unit(root),
    )


def result_unit(root: nodes.OutputNode) -> str | None:
    """The unit a creation reports: a series whose last step names its unit (`unitOverride`, or
    `unitConversion`'s output unit). Any other node reports none (Sparkwire's channels carry no
    unit, and it does not carry units through the other nodes)."""
    if isinstance(root, nodes.SummarizeSeries | nodes.SelectValue) and isinstance(root.input, WithUnit):
        return root.input.unit
    return None


# The range-on-range, equality, stability and enum-mapping builders, the chart roots, those of
# the nodes across groups (filterByTag, selectTags, zScore) and of `derived`, live in their own
# modules, which register them in the tables above when they load (whichever module is imported
# first).
from compute.evaluation import (  # noqa: E402  (they use this module's helpers)
    compile_charts,  # noqa: F401
    compile_cross_group,
    compile_derived,
    compile_events,  # noqa: F401
    compile_logs,  # noqa: F401
    compile_properties,  # noqa: F401
    compile_ranges,  # noqa: F401
)
