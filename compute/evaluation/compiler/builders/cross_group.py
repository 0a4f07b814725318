"""Builders of the nodes that act across a computation's groups (nodes/cross_group.py): numeric and
enum `filterByTag` and `selectTags`, numeric `zScore`; and, registered with `polls` (Nominal refuses
every LogSeries to a subscription: PollingOnlyComputation `LOG_SERIES`, which live subscriptions
keep), the LogSeries `filterByTag` (`LogTagFilterSeries`: "Applies a tag predicate to the log series
produced by input") and `selectTags` (`LogSelectTagsSeries`: "Subsets the tag dimensions of the input
log series to the given tag keys. Preserves the input series' cardinality"), the same nodes over
log lines. Registered by their Conjure variant names (registry.py) when this module loads.

A node's groups are keyed by tag keys, its "tag dimensions": a channel's groupByTags, the selected
keys after `selectTags`. A predicate or a selection naming a tag the input is not grouped by reaches
down to the channel reads below it (nominal-api asks no grouping of them): `filterByTag` narrows the
series those reads take to the ones whose tags meet it, `selectTags` groups those reads by the keys
it names. That holds only where no node between acts across groups (below one, a tag it dropped is
gone), and a zScore family must still be among the input's tags: both are refused by name.

A selection without a channel name (`selectNumeric` / `selectEnum` / `selectLogs` with no `name`) is
nominal-api's `SelectSeries` form: `filterByTag` on the reserved `NOMINAL_CHANNEL` key names the
channels (`in`), each read carries its name as that tag, and `selectTags([NOMINAL_CHANNEL])` keeps
them apart as groups."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from compute.evaluation.compiler import datasets, registry
from compute.evaluation.compiler.builder import NO_INPUT, Builder
from compute.evaluation.compiler.dimensions import dimensions, keys_of, known
from compute.evaluation.compiler.helpers import radius
from compute.evaluation.compiler.registry import builds, polls
from compute.evaluation.errors import MalformedNode, refuse
from compute.evaluation.nodes import Node, SeriesNode
from compute.evaluation.nodes.cross_group import FilterByTag, SelectTags, ZScore, crosses
from compute.evaluation.nodes.inputs import ChannelInput
from compute.evaluation.nodes.union import MergedBranches
from compute.storage.series import TagCondition

Json = Any
B = Builder
SELECT = {"numeric": "selectNumeric", "enum": "selectEnum", "log": "selectLogs"}  # SelectSeries by family


def _series(b: B, value: Json, family: str) -> SeriesNode:
    """The input of its family: a NumericSeries, an EnumSeries, or a LogSeries (built as a polled
    `Series.log` is, builders/logs.py)."""
    if family == "numeric":
        return b.numeric(value)
    if family == "enum":
        return b.enum(value)
    node: SeriesNode = registry.builder("Series", "log", polled=True)(b, value)
    return node


def _predicate(b: B, value: Json, what: str) -> list[TagCondition]:
    """A `TagPredicate` (`in`, `notIn`, `and`) as tag conditions, all of which must hold."""
    kind, inner = datasets.variant("TagPredicate", value)
    o = b.obj(inner, kind)
    if kind == "and":
        return _predicate(b, b.get(o, "left", "TagAnd"), what) + _predicate(
            b, b.get(o, "right", "TagAnd"), what
        )
    key = b.string_constant(b.get(o, "key", kind))
    skind, values = datasets.variant("StringSetConstantV2", b.get(o, "values", kind))
    if skind == "variable":
        _, values = b.typed_variable(values, ("stringSet",))
        labels = values if isinstance(values, list) and all(isinstance(v, str) for v in values) else None
    else:
        labels = [b.string_constant(v) for v in values] if isinstance(values, list) else None
    if labels is None:
        raise MalformedNode(f"{what}: {kind}.values must be a set of strings")
    return [TagCondition(key, frozenset(labels), negate=kind == "notIn")]


def _reads(node: Node) -> Iterator[ChannelInput]:
    """The channel reads below a node (a dataset with no branch reads nothing: no selector)."""
    if isinstance(node, ChannelInput):
        if node.index >= 0:
            yield node
        return
    for child in node.children():
        yield from _reads(child)


def _reaches_reads(b: B, x: Node, what: str, field_name: str, keys: set[str], dims: tuple[str, ...]) -> bool:
    """Whether `keys` beyond the input's grouping can reach the channel reads below it: not through a
    node acting across groups (a tag it dropped is gone), which keeps the refusal of `_known`."""
    if not keys:
        return False
    if crosses(x):
        known(b, what, field_name, keys, dims)
    return True


def _narrow(b: B, x: Node, conditions: list[TagCondition]) -> None:
    """Every channel read below `x` takes only the series whose tags meet `conditions`. A tag a read
    injects (a dataset's `tag`, an asset's or run's branch tags, a channel's NOMINAL_CHANNEL) is
    decided here, once: the read keeps every series or none."""
    for read in _reads(x):
        selector = b.selectors[read.index]
        injected = dict(selector.injected)
        filters = list(selector.tag_filters)
        for cond in conditions:
            if cond.key == datasets.NOMINAL_CHANNEL and cond.key not in injected:
                raise refuse(
                    "filterByTag",
                    "predicate",
                    "filterByTag on NOMINAL_CHANNEL selects channels of a selection without a name "
                    f"(selectNumeric / selectEnum without name); '{selector.channel}' is named already",
                )
            if cond.key not in injected:
                filters.append(cond)
            elif not cond.holds(injected):
                filters.append(TagCondition(cond.key, frozenset()))  # holds for no series
        b.selectors[read.index] = replace(selector, tag_filters=tuple(filters))


def _group_reads(b: B, x: Node, keys: set[str]) -> None:
    """Every channel read below `x` grouped by `keys` too, so that its series keep them apart."""
    for read in _reads(x):
        selector = b.selectors[read.index]
        b.selectors[read.index] = replace(selector, group_by=tuple(sorted(set(selector.group_by) | keys)))


def _channels_named(
    b: B, raw: Json, family: str, conditions: list[TagCondition]
) -> tuple[SeriesNode, list[TagCondition]] | None:
    """nominal-api's `SelectSeries` form: a selection without a name, narrowed by `in` predicates on
    NOMINAL_CHANNEL, is one read per channel named, each carrying its name as that tag, merged in
    time order. None when `raw` is not that form. Returns the read and the conditions left."""
    if not isinstance(raw, dict):
        return None
    kind = raw.get("type")
    inner = raw.get(kind) if isinstance(kind, str) else None
    if kind != SELECT[family] or not isinstance(inner, dict) or inner.get("name"):
        return None
    on_channel = [cond for cond in conditions if cond.key == datasets.NOMINAL_CHANNEL]
    if not on_channel:
        return None
    if any(cond.negate for cond in on_channel):
        raise refuse(
            "filterByTag",
            "predicate",
            "filterByTag: NOMINAL_CHANNEL notIn over a selection without a name would read every channel "
            "of the dataset; name the channels with `in`",
        )
    names = sorted(frozenset.intersection(*(cond.values for cond in on_channel)))
    b.budget.charge(len(names))  # each a channel to read
    reads: list[SeriesNode] = []
    for name in names:
        named = {"type": kind, kind: {**inner, "name": {"type": "literal", "literal": name}}}
        read = _series(b, named, family)
        for leaf in _reads(read):
            selector = b.selectors[leaf.index]
            injected = {**dict(selector.injected), datasets.NOMINAL_CHANNEL: name}
            b.selectors[leaf.index] = replace(selector, injected=tuple(sorted(injected.items())))
        reads.append(read)
    rest = [cond for cond in conditions if cond.key != datasets.NOMINAL_CHANNEL]
    if not reads:
        return ChannelInput(NO_INPUT, family), rest
    return (reads[0] if len(reads) == 1 else MergedBranches(reads)), rest


def _filter_by_tag(family: str) -> Callable[[B, Json], SeriesNode]:
    def build(b: B, v: Json) -> SeriesNode:
        what = "filterByTag"
        o = b.obj(v, what)
        raw = b.get(o, "input", what)
        conditions = _predicate(b, b.get(o, "predicate", what), what)
        named = _channels_named(b, raw, family, conditions)
        if named is not None:
            x, conditions = b.timed(named[0], what), named[1]
        else:
            x = b.timed(_series(b, raw, family), what)
        dims = dimensions(b, x)
        beyond = [cond for cond in conditions if cond.key not in dims]
        if _reaches_reads(b, x, what, "predicate", {cond.key for cond in beyond}, dims):
            _narrow(b, x, beyond)
        grouped = tuple(cond for cond in conditions if cond.key in dims)
        return FilterByTag(x, grouped, dims, enum=family == "enum", lines=family == "log") if grouped else x

    return build


def _select_tags(family: str) -> Callable[[B, Json], SeriesNode]:
    def build(b: B, v: Json) -> SeriesNode:
        what = "selectTags"
        o = b.obj(v, what)
        raw = b.get(o, "input", what)
        x = b.timed(_series(b, raw, family), what)
        keys = keys_of(b, o, "tagKeys", what)
        dims = dimensions(b, x)
        if _reaches_reads(b, x, what, "tagKeys", set(keys) - set(dims), dims):
            _group_reads(b, x, set(keys) - set(dims))
            dims = dimensions(b, x)
        kept = tuple(k for k in dims if k in keys)
        return SelectTags(x, keys, kept, enum=family == "enum", lines=family == "log")

    return build


def _z_score(b: B, v: Json) -> SeriesNode:
    what = "zScore"
    o = b.obj(v, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    tags = keys_of(b, o, "groupByTags", what)
    dims = dimensions(b, x)
    known(b, what, "groupByTags", set(tags), dims)
    return ZScore(x, tags, radius(b, o, what), dims)


for _family, _union in (("numeric", "NumericSeries"), ("enum", "EnumSeries")):
    builds(_union, "filterByTag")(_filter_by_tag(_family))
    builds(_union, "selectTags")(_select_tags(_family))
builds("NumericSeries", "zScore")(_z_score)
polls("LogSeries", "filterByTag")(_filter_by_tag("log"))
polls("LogSeries", "selectTags")(_select_tags("log"))
