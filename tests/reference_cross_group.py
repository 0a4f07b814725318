"""The reference for the nodes that act across groups, written from nominal-api's docs in plain
Python (never the server's code):

- `filterByTag` (NumericTagFilterSeries / EnumTagFilterSeries): "Applies a tag predicate to the
  series produced by input": a group whose tags meet the predicate (`in`: the tag is one of the
  values; `notIn`: it is not; `and`: both) keeps its series, the others are gone.
- `selectTags`: "Subsets the tag dimensions of the input series to the given tag keys. Preserves the
  input series' cardinality: points that share the selected keys but differ on dropped keys remain
  distinct": a group is keyed by the selected keys only, and holds every point of every input group
  with those values (two at one timestamp stay two).
- `groupBy` with `GroupByTags.subset`: "Group by exactly the listed tag keys": the groups sharing
  those keys' values aggregated together, points at one timestamp (or in one bucket) reduced.
- `zScore` (ZscoreSeries): "For each group at each timestamp, the output is (value - mean) / stddev,
  where mean and stddev are computed across all groups in the family at that timestamp, using the
  interpolation configuration to align values across groups. When stddev is zero ... that data point
  is excluded." Families: the groups sharing the `groupByTags` values (all groups when empty). The
  timestamps are every group's of the family; a group's value there is its newest at or before it
  within the radius (default 1 s); groups without one take no part. Where Nominal's docs are silent
  Sparkwire's docs/protocol.md says: the standard deviation is the population's.

A group of the reference is a dict of tag values ({} when not grouped); a missing tag reads "", as
the reference reads channels."""

from __future__ import annotations

import math
from typing import Any

from tests import reference as r

CROSS = ("filterByTag", "selectTags", "zScore")


def _keys(env: r.Env, values: list[Any]) -> set[str]:
    return {r._string(env, k) for k in values}


def _holds(env: r.Env, predicate: dict[str, Any], tags: dict[str, str]) -> bool:
    kind, body = predicate["type"], predicate[predicate["type"]]
    if kind == "and":
        return _holds(env, body["left"], tags) and _holds(env, body["right"], tags)
    key = r._string(env, body["key"])
    values = body["values"]
    allowed = (
        set(r._var(env, values["variable"], ("stringSet",)))
        if values["type"] == "variable"
        else _keys(env, values["literal"])
    )
    found = tags.get(key, "") in allowed
    return found if kind == "in" else not found


def output_groups(node: Any, leaves: list[r.GroupKey], context: dict[str, Any]) -> list[r.GroupKey] | None:
    """The groups a node's output has when a cross-group node lies inside it (None: none does)."""
    if isinstance(node, list):
        found: set[r.GroupKey] | None = None
        for item in node:
            inner = output_groups(item, leaves, context)
            if inner is not None:
                found = (found or set()) | set(inner)
        return None if found is None else sorted(found)
    if not isinstance(node, dict):
        return None
    kind = node.get("type")
    if kind == "groupBy" and isinstance(node.get(kind), dict) and node[kind]["tags"]["type"] == "subset":
        inner = output_groups(node[kind]["input"], leaves, context)
        keep = _keys(r.Env(context, r.Store(), {}), node[kind]["tags"]["subset"]["tags"])
        return sorted(
            {tuple((k, v) for k, v in g if k in keep) for g in (leaves if inner is None else inner)}
        )
    if kind in CROSS and isinstance(node.get(kind), dict) and "input" in node[kind]:
        body = node[kind]
        inner = output_groups(body["input"], leaves, context)
        groups = leaves if inner is None else inner
        env = r.Env(context, r.Store(), {})
        if kind == "filterByTag":
            return [g for g in groups if _holds(env, body["predicate"], dict(g))]
        if kind == "selectTags":
            keep = _keys(env, body["tagKeys"])
            return sorted({tuple((k, v) for k, v in g if k in keep) for g in groups})
        return groups
    return output_groups(list(node.values()), leaves, context)


def _input_groups(env: r.Env, node: dict[str, Any]) -> list[r.GroupKey]:
    leaves = r._groups(node, env.context, env.store)
    inner = output_groups(node, leaves, env.context)
    return leaves if inner is None else inner


def _evaluate(env: r.Env, node: dict[str, Any], family: str, group: r.GroupKey) -> r.Points:
    at = r.Env(env.context, env.store, dict(group))
    if family == "enum":
        return r._points(r.series(at, {"type": "enum", "enum": node}))
    return r._points(r.numeric(at, node))


def _radius(env: r.Env, body: dict[str, Any]) -> int:
    config = body.get("interpolationConfiguration")
    if config is None:
        return r.FFILL_RADIUS
    ffill = config["forwardFillInterpolation"]
    return r._duration_constant(env, ffill["interpolationRadius"])


def _z_scores(env: r.Env, body: dict[str, Any]) -> r.Points:
    groups = _input_groups(env, body["input"])
    family_tags = _keys(env, body["groupByTags"])

    def family_of(tags: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in tags.items() if k in family_tags}

    members = [g for g in groups if family_of(dict(g)) == family_of(env.group)]
    radius = _radius(env, body)
    series = {g: _evaluate(env, body["input"], "numeric", g) for g in members}
    mine = tuple(sorted(env.group.items()))
    stamps = sorted({t for points in series.values() for t, _ in points})
    out: r.Points = []
    for t in stamps:
        values: dict[r.GroupKey, float] = {}
        for g, points in series.items():
            before = [(s, v) for s, v in points if s <= t]
            if before and t - before[-1][0] <= radius:
                values[g] = before[-1][1]
        if mine not in values:
            continue
        mean = sum(values.values()) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values.values()) / len(values))
        if std == 0:
            continue
        out.append((t, (values[mine] - mean) / std))
    return out


def joined(env: r.Env, series: dict[str, Any], keys: list[Any]) -> r.Points:
    """`groupBy` with `GroupByTags.subset` ("Group by exactly the listed tag keys"): the points of every
    input group whose values of those keys are this group's, for the aggregation to reduce."""
    keep = _keys(env, keys)
    merged: r.Points = []
    for g in _input_groups(env, series):
        if {k: v for k, v in g if k in keep} == env.group:
            merged += r._points(r.series(r.Env(env.context, env.store, dict(g)), series))
    return sorted(merged, key=lambda p: p[0])


def evaluate(env: r.Env, kind: str, body: dict[str, Any], family: str) -> r.Points:
    """The node's points in the group `env.group` of its output."""
    if kind == "filterByTag":
        if not _holds(env, body["predicate"], env.group):
            return []
        return _evaluate(env, body["input"], family, tuple(sorted(env.group.items())))
    if kind == "selectTags":
        keep = _keys(env, body["tagKeys"])
        merged: r.Points = []
        for g in _input_groups(env, body["input"]):
            if {k: v for k, v in g if k in keep} == env.group:
                merged += _evaluate(env, body["input"], family, g)
        return sorted(merged, key=lambda p: p[0])  # stable: a shared timestamp keeps each group's point
    if kind == "zScore":
        return _z_scores(env, body)
    raise NotImplementedError(kind)
