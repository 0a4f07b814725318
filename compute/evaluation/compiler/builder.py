"""The builder: one compilation's state (the context's variables, the channels read, the budget, the
catalogs) and what every builder shares to read Nominal's JSON: unions, constants, variables,
channel reads, and the dispatch of a node to its registered builder (registry.py).

It imports no builder: builders import it, and find each other only through the registry.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from compute.evaluation import nodes
from compute.evaluation.compiler import datasets, registry
from compute.evaluation.compiler.catalogs import Catalogs
from compute.evaluation.compiler.limits import CompileBudget, Limits, ResultOptions
from compute.evaluation.errors import ComputeError, MalformedNode, not_supported
from compute.evaluation.nodes import union as nodes_union
from compute.evaluation.nominal_variants import BOOLEAN_COMPARISONS, DURATION_UNIT_NANOS, ENUMS, VARIANTS
from compute.storage.series import ChannelSelector
from schemas.timestamps import to_nanos

Json = Any
NO_INPUT = -1  # the input index of a dataset with no branch: no selector routes to it


def listed(source: dict[str, Json], field: str) -> list[Json]:
    """An optional list field of a channel or series (absent or null: empty)."""
    value = source.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedNode(f"{field} must be a list")
    return value


class VariableUse(NamedTuple):
    """A variable read where a series is: its name, its value and the family wanted there (`numeric`,
    `enum`; None: either). The `VariableValue` builders take it."""

    name: str
    value: Json
    expect: str | None


def permission_denied(rids: list[str]) -> ComputeError:
    """The token does not reach these data sources."""
    return ComputeError(
        "PermissionDenied",
        "the token does not reach these data sources: " + ", ".join(rids),
        {"rids": ",".join(rids)},
        status_code=403,
    )


@dataclass
class Subject:
    """The one series a condition is about: its JSON and its node, once seen."""

    json: Json = None
    node: nodes.SeriesNode | None = None


@dataclass
class Builder:
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
    # builders/derived.py's module lookups and the functions it has checked, once per compilation
    derived_cache: dict[Any, Any] = field(default_factory=dict)
    # a variable's value and the dataset references in scope as JSON text (`json_key`), by identity
    json_keys: dict[tuple[int, int], tuple[Json, Json, str]] = field(default_factory=dict)
    # Whether the token may read a data source: checked at each read as the tree is expanded, so a
    # refused request costs no more than the steps up to its first read (None: any may be read).
    may_read: Callable[[str], bool] | None = None
    limits: Limits = field(default_factory=Limits)
    options: ResultOptions = field(default_factory=ResultOptions)
    catalogs: Catalogs = field(default_factory=Catalogs)  # what it may look up (catalogs.py)
    polled: bool = False  # computed once over a past period (ComputeService): `polls` builders too
    # A live subscription that asked to stream polled variants (`sparkwire.streamPolled`): those
    # marked with `streams` (builders/streamed.py) are built too.
    streamed: bool = False

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

    def build(self, union: str, value: Json) -> Any:
        """The node a variant of `union` builds, by its registered builder (registry.py), or the
        variant's refusal."""
        kind, inner = self.variant(union, value)
        return registry.builder(union, kind, self.polled, self.streamed)(self, inner)

    def nested(self, variables: Mapping[str, Json]) -> Builder:
        """A builder over other variables (a nested context's, alone) sharing everything else: the
        channels read, the catalog reads, the budget, the token's reach."""
        return replace(self, context=variables, bound={}, bases=[])

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
        return double(inner)

    def duration_constant(self, value: Json) -> int:
        kind, inner = self.variant("DurationConstant", value)
        if kind == "variable":
            _, inner = self.typed_variable(inner, ("duration",))
        return duration(inner)

    def integer_constant(self, value: Json) -> int:
        kind, inner = self.variant("IntegerConstant", value)
        if kind == "variable":
            _, inner = self.typed_variable(inner, ("integer",))
        if not isinstance(inner, int) or isinstance(inner, bool):
            raise MalformedNode(f"not an INTEGER: {inner!r}")
        return inner

    def timestamp_constant(self, value: Json) -> int:
        """`TimestampConstant`: a literal `Timestamp` or a variable holding one, in nanoseconds."""
        kind, inner = self.variant("TimestampConstant", value)
        if kind == "variable":
            _, inner = self.typed_variable(inner, ("timestamp",))
        t = self.obj(inner, "Timestamp")
        seconds, nanos = t.get("seconds"), t.get("nanos") or 0  # Conjure's null is an absent member
        if not isinstance(seconds, int) or not isinstance(nanos, int) or isinstance(seconds, bool):
            raise MalformedNode("a Timestamp needs integer 'seconds' and 'nanos'")
        return seconds * 1_000_000_000 + nanos

    def duration_expression(self, value: Json) -> int:
        """`scout.compute.api.Duration`: a unit count, a reference, or a sum/difference/negation."""
        kind, inner = self.variant("Duration", value)
        if kind == "reference":
            name = self.obj(inner, "Reference").get("name")
            return duration(self.typed_variable(name, ("duration",))[1])
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
        if kind == "derived":  # a function of a module (builders/derived.py)
            node = registry.builder("VariableValue", "derived")(self, VariableUse(name, value, expect))
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
            raise registry.refusal("ComputeNode", kind)
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
        group_by = [self.string_constant(g) for g in listed(o, "groupByTags")]
        tags_to_group_by = listed(o, "tagsToGroupBy")
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
        channel, by name, of a dataset (compute/evaluation/compiler/datasets.py), every branch of it."""
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
        node: nodes.SeriesNode = self.build("Series", value)
        return node

    def numeric(self, value: Json) -> nodes.SeriesNode:
        kind, inner = self.variant("NumericSeries", value)
        build = registry.builder("NumericSeries", kind, self.polled, self.streamed)
        with self.budget:
            return build(self, inner)

    def enum(self, value: Json, constant_ok: bool = False) -> nodes.SeriesNode:
        """An enum series; a label without timestamps (`selectCategoricalProperty`) only where the
        caller broadcasts it (`constant_ok`), refused by name anywhere else."""
        kind, inner = self.variant("EnumSeries", value)
        build = registry.builder("EnumSeries", kind, self.polled, self.streamed)
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
        build = registry.builder("RangeSeries", kind, self.polled, self.streamed)
        with self.budget:
            return build(self, inner)

    def condition(self, value: Json, subject: Subject, what: str, field_name: str) -> nodes.Condition:
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

    def operand(self, value: Json, subject: Subject, what: str, field_name: str) -> float | None:
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


def double(value: Json) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise MalformedNode(f"not a DOUBLE: {value!r}")
    if isinstance(value, str):
        if value not in ("NaN", "Infinity", "-Infinity"):
            raise MalformedNode(f"not a DOUBLE: {value!r}")
        return float(value.replace("Infinity", "inf"))
    return float(value)


def duration(value: Json) -> int:
    if not isinstance(value, dict):
        raise MalformedNode("a Duration must be an object")
    seconds, nanos = value.get("seconds"), value.get("nanos", 0)
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (seconds, nanos)):
        raise MalformedNode("a Duration needs integer 'seconds' and 'nanos'")
    assert isinstance(seconds, int) and isinstance(nanos, int)
    return to_nanos(seconds, nanos)


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


def context_references(b: Builder, value: Json) -> dict[str, Json]:
    """A context's `datasetReferences` (absent or null: none), each checked to be a `Dataset` now,
    so that a broken one is a bad message even where nothing references it."""
    references = b.obj(value if value is not None else {}, "Context.datasetReferences")
    for dataset in references.values():
        b.variant("Dataset", dataset)
    return references
