"""The tag keys a node's output groups are keyed by, and the checks that keep a computation's nodes
over inputs grouped alike: shared by the plan, the cross-group builders and `groupBy` with a
subset of tags."""

from __future__ import annotations

from typing import Any

from compute.evaluation.compiler import datasets
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.errors import MalformedNode, refuse
from compute.evaluation.nodes import Node, SeriesNode
from compute.evaluation.nodes.cross_group import CrossGroup, SelectTags, crosses
from compute.evaluation.nodes.inputs import ChannelInput

Json = Any
B = Builder


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
        raise refuse(
            "selectTags",
            "tagKeys",
            f"a node combines series grouped by different tags {sorted(keyed)}: after selectTags, only "
            "channels without groupByTags can be combined with its result",
        )
    for child in children:
        _check(b, child)


def known(b: B, what: str, field_name: str, keys: set[str], dims: tuple[str, ...]) -> None:
    unknown = sorted(keys - set(dims))
    if not unknown:
        return
    grouped = f"its groupByTags are {list(dims)}" if dims else "it is not grouped (no groupByTags)"
    channel = (
        "; NOMINAL_CHANNEL selects channels without a name, which Sparkwire does not"
        if datasets.NOMINAL_CHANNEL in unknown
        else ""
    )
    raise refuse(
        what,
        field_name,
        f"{what}.{field_name} names {unknown}, which the input is not grouped by ({grouped}): a tag is "
        f"known per group only when the channel groups by it; add it to groupByTags{channel}",
    )


def keys_of(b: B, o: dict[str, Json], field_name: str, what: str) -> frozenset[str]:
    raw = b.get(o, field_name, what)
    if not isinstance(raw, list):
        raise MalformedNode(f"{what}.{field_name} must be a list")
    return frozenset(b.string_constant(k) for k in raw)


def subset_of_tags(b: B, x: SeriesNode, o: dict[str, Json]) -> SeriesNode:
    """`groupBy` with `GroupByTags.subset`: the input's groups keyed by the subset, those that then
    share their tags joined (every point kept) for the aggregation to reduce."""
    keys = keys_of(b, o, "tags", "GroupBySubsetTags")
    dims = dimensions(b, x)
    known(b, "groupBy", "tags", set(keys), dims)
    return SelectTags(x, keys, tuple(k for k in dims if k in keys))
