"""Builders of the nodes that act across a computation's groups (nodes/cross_group.py): numeric and
enum `filterByTag` and `selectTags`, numeric `zScore`.
Registered into compiler.py's tables by their Conjure variant names when this module loads.

A node's groups are keyed by tag keys, its "tag dimensions": a channel's groupByTags, the selected
keys after `selectTags`. A predicate, a selection or a zScore family can only name those keys: a tag
the input is not grouped by was merged away when its series were read (Sparkwire merges a channel's
series that share their groupByTags values), so it cannot be known per group and is refused by name."""

from __future__ import annotations

from collections.abc import Callable

from compute.evaluation import compile_numeric, datasets
from compute.evaluation import compiler as c
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes import Node, SeriesNode
from compute.evaluation.nodes.cross_group import CrossGroup, FilterByTag, SelectTags, ZScore, crosses
from compute.evaluation.nodes.inputs import ChannelInput
from compute.storage.series import TagCondition

Json = c.Json
B = c._Builder


def _refuse(what: str, field_name: str, message: str) -> ComputeError:
    return ComputeError("InvalidComputation", message, {"invalidTypes": what, "field": field_name})


def dimensions(b: B, node: Node) -> tuple[str, ...]:
    """The tag keys a node's output groups are keyed by."""
    if isinstance(node, CrossGroup):
        return node.dims
    if isinstance(node, ChannelInput):
        return b.selectors[node.index].group_by if node.index >= 0 else ()
    keys: set[str] = set()
    for child in node.children():
        keys |= set(dimensions(b, child))
    return tuple(sorted(keys))


def check_dimensions(b: B, node: Node) -> None:
    """Refuses a node over inputs grouped by different tags (a `selectTags` result beside a channel
    grouped by the tags it dropped): no group of the one is a group of the other. A channel without
    groupByTags is read by every group, so it may sit beside anything. (Without a cross-group node
    every grouped channel has the plan's one set of groupByTags, which compile_plan checks.)"""
    if crosses(node):
        _check(b, node)


def _check(b: B, node: Node) -> None:
    children = list(node.children())
    keyed = {d for d in (dimensions(b, c) for c in children) if d}
    if len(keyed) > 1:
        raise _refuse(
            "selectTags",
            "tagKeys",
            f"a node combines series grouped by different tags {sorted(keyed)}: after selectTags, only "
            "channels without groupByTags can be combined with its result",
        )
    for child in children:
        _check(b, child)


def _known(b: B, what: str, field_name: str, keys: set[str], dims: tuple[str, ...]) -> None:
    unknown = sorted(keys - set(dims))
    if not unknown:
        return
    grouped = f"its groupByTags are {list(dims)}" if dims else "it is not grouped (no groupByTags)"
    channel = (
        "; NOMINAL_CHANNEL selects channels without a name, which Sparkwire does not"
        if datasets.NOMINAL_CHANNEL in unknown
        else ""
    )
    raise _refuse(
        what,
        field_name,
        f"{what}.{field_name} names {unknown}, which the input is not grouped by ({grouped}): a tag is "
        f"known per group only when the channel groups by it; add it to groupByTags{channel}",
    )


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
        raise c.MalformedNode(f"{what}: {kind}.values must be a set of strings")
    return [TagCondition(key, frozenset(labels), negate=kind == "notIn")]


def _keys(b: B, o: dict[str, Json], field_name: str, what: str) -> frozenset[str]:
    raw = b.get(o, field_name, what)
    if not isinstance(raw, list):
        raise c.MalformedNode(f"{what}.{field_name} must be a list")
    return frozenset(b.string_constant(k) for k in raw)


def _filter_by_tag(family: str) -> Callable[[B, Json], SeriesNode]:
    def build(b: B, v: Json) -> SeriesNode:
        what = "filterByTag"
        o = b.obj(v, what)
        raw = b.get(o, "input", what)
        x = b.timed(b.numeric(raw) if family == "numeric" else b.enum(raw), what)
        conditions = _predicate(b, b.get(o, "predicate", what), what)
        dims = dimensions(b, x)
        _known(b, what, "predicate", {cond.key for cond in conditions}, dims)
        return FilterByTag(x, tuple(conditions), dims, enum=family == "enum")

    return build


def _select_tags(family: str) -> Callable[[B, Json], SeriesNode]:
    def build(b: B, v: Json) -> SeriesNode:
        what = "selectTags"
        o = b.obj(v, what)
        raw = b.get(o, "input", what)
        x = b.timed(b.numeric(raw) if family == "numeric" else b.enum(raw), what)
        keys = _keys(b, o, "tagKeys", what)
        dims = dimensions(b, x)
        _known(b, what, "tagKeys", set(keys), dims)
        return SelectTags(x, keys, tuple(k for k in dims if k in keys), enum=family == "enum")

    return build


def subset_of_tags(b: B, x: SeriesNode, o: dict[str, Json]) -> SeriesNode:
    """`groupBy` with `GroupByTags.subset`: the input's groups keyed by the subset, those that then
    share their tags joined (every point kept) for the aggregation to reduce."""
    keys = _keys(b, o, "tags", "GroupBySubsetTags")
    dims = dimensions(b, x)
    _known(b, "groupBy", "tags", set(keys), dims)
    return SelectTags(x, keys, tuple(k for k in dims if k in keys))


def _z_score(b: B, v: Json) -> SeriesNode:
    what = "zScore"
    o = b.obj(v, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    tags = _keys(b, o, "groupByTags", what)
    dims = dimensions(b, x)
    _known(b, what, "groupByTags", set(tags), dims)
    return ZScore(x, tags, compile_numeric.radius(b, o, what), dims)


c.NUMERIC_BUILDERS.update(
    {
        "filterByTag": _filter_by_tag("numeric"),
        "selectTags": _select_tags("numeric"),
        "zScore": _z_score,
    }
)
c.ENUM_BUILDERS.update(
    {
        "filterByTag": _filter_by_tag("enum"),
        "selectTags": _select_tags("enum"),
    }
)
