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
the reference reads channels. A series carries every tag it was written with (nominal-api's
SelectSeries: "might contain multiple tag groupings"), and NOMINAL_CHANNEL "carries the channel name,
so channels can be filtered and grouped the same way tags are" (ReservedTagKey): a predicate or a
selection naming a tag the input's groups are not keyed by applies to those series themselves, so
`filterByTag` keeps the series whose tags meet it and `selectTags` keys the groups by the values
the series have (every point kept)."""

from __future__ import annotations

import math
from typing import Any

from tests import reference as r

CROSS = ("filterByTag", "selectTags", "zScore")


def _keys(env: r.Env, values: list[Any]) -> set[str]:
    return {r._string(env, k) for k in values}


Condition = tuple[str, set[str], bool]  # a tag key, its values, and whether the tag must be one of them


def _conditions(env: r.Env, predicate: dict[str, Any]) -> list[Condition]:
    """A TagPredicate as the conditions that must all hold (`and` holds when both sides do)."""
    kind, body = predicate["type"], predicate[predicate["type"]]
    if kind == "and":
        return _conditions(env, body["left"]) + _conditions(env, body["right"])
    values = body["values"]
    allowed = (
        set(r._var(env, values["variable"], ("stringSet",)))
        if values["type"] == "variable"
        else _keys(env, values["literal"])
    )
    return [(r._string(env, body["key"]), allowed, kind == "in")]


def _all_hold(conditions: list[Condition], tags: dict[str, str]) -> bool:
    return all((tags.get(key, "") in allowed) == is_in for key, allowed, is_in in conditions)


def _holds(env: r.Env, predicate: dict[str, Any], tags: dict[str, str]) -> bool:
    """Whether a group's tags meet the conditions on its keys (the others apply to its series)."""
    return _all_hold([c for c in _conditions(env, predicate) if c[0] in tags], tags)


def _series_tags(env: r.Env, node: Any) -> list[dict[str, str]]:
    """The tags (with NOMINAL_CHANNEL) of every series the channel reads below `node` take, each
    passing the predicates of the filterByTag nodes above its read."""
    reads: list[tuple[str, str | None, dict[str, str], list[Condition]]] = []  # rid, channel (None: all)

    def walk(x: Any, above: list[Condition]) -> None:
        if isinstance(x, list):
            for item in x:
                walk(item, above)
            return
        if not isinstance(x, dict):
            return
        kind = x.get("type")
        if kind == "filterByTag" and isinstance(x.get(kind), dict):
            walk(x[kind]["input"], above + _conditions(env, x[kind]["predicate"]))
            return
        if kind == "selectNumeric" and isinstance(x.get(kind), dict):
            body = x[kind]
            name = r._string(env, body["name"]) if body.get("name") else None
            reads.append((r._string(env, body["dataset"]["saved"]["rid"]), name, {}, above))
            return
        if set(x) == {"name"} and isinstance(x["name"], str):
            variable = env.context.get(x["name"], {})
            if variable.get("type") == "channel" and variable["channel"]["type"] == "dataSource":
                ds = variable["channel"]["dataSource"]
                tags = {k: r._string(env, v) for k, v in (ds.get("tags") or {}).items()}
                reads.append(
                    (r._string(env, ds["dataSourceRid"]), r._string(env, ds["channel"]), tags, above)
                )
        for value in x.values():
            walk(value, above)

    walk(node, [])
    found = []
    for s_rid, s_channel, s_tags in env.store.series():
        st = dict(s_tags)
        for rid, channel, tags, above in reads:
            if (
                s_rid != rid
                or channel not in (None, s_channel)
                or any(st.get(k) != v for k, v in tags.items())
            ):
                continue
            full = {**st, "NOMINAL_CHANNEL": s_channel}
            if r.passes(env, s_channel, st) and _all_hold(above, full):
                found.append(full)
    return found


def output_groups(
    node: Any, leaves: list[r.GroupKey], context: dict[str, Any], store: r.Store
) -> list[r.GroupKey] | None:
    """The groups a node's output has when a cross-group node lies inside it (None: none does)."""
    if isinstance(node, list):
        found: set[r.GroupKey] | None = None
        for item in node:
            inner = output_groups(item, leaves, context, store)
            if inner is not None:
                found = (found or set()) | set(inner)
        return None if found is None else sorted(found)
    if not isinstance(node, dict):
        return None
    kind = node.get("type")
    if kind == "groupBy" and isinstance(node.get(kind), dict) and node[kind]["tags"]["type"] == "subset":
        inner = output_groups(node[kind]["input"], leaves, context, store)
        keep = _keys(r.Env(context, r.Store(), {}), node[kind]["tags"]["subset"]["tags"])
        return sorted(
            {tuple((k, v) for k, v in g if k in keep) for g in (leaves if inner is None else inner)}
        )
    if kind in CROSS and isinstance(node.get(kind), dict) and "input" in node[kind]:
        body = node[kind]
        inner = output_groups(body["input"], leaves, context, store)
        groups = leaves if inner is None else inner
        env = r.Env(context, store, {})
        if kind == "filterByTag":
            return [g for g in groups if _holds(env, body["predicate"], dict(g))]
        if kind == "selectTags":
            keep = _keys(env, body["tagKeys"])
            beyond = keep - {k for g in groups for k, _ in g}
            selected: set[r.GroupKey] = set()
            for g in groups:
                own = [(k, v) for k, v in g if k in keep]
                if not beyond:
                    selected.add(tuple(own))
                    continue
                for tags in _series_tags(env, body["input"]):
                    if all(tags.get(k, "") == v for k, v in g):
                        selected.add(tuple(sorted(own + [(k, tags.get(k, "")) for k in beyond])))
            return sorted(selected)
        return groups
    return output_groups(list(node.values()), leaves, context, store)


def _input_groups(env: r.Env, node: dict[str, Any]) -> list[r.GroupKey]:
    leaves = r._groups(node, env.context, env.store)
    inner = output_groups(node, leaves, env.context, env.store)
    return leaves if inner is None else inner


def _evaluate(
    env: r.Env, node: dict[str, Any], family: str, group: r.GroupKey, narrow: tuple[Any, ...] = ()
) -> r.Points:
    at = r.Env(env.context, env.store, dict(group), env.narrow + narrow)
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
            merged += r._points(r.series(r.Env(env.context, env.store, dict(g), env.narrow), series))
    return sorted(merged, key=lambda p: p[0])


def evaluate(env: r.Env, kind: str, body: dict[str, Any], family: str) -> r.Points:
    """The node's points in the group `env.group` of its output."""
    if kind == "filterByTag":
        conditions = _conditions(env, body["predicate"])
        if not _all_hold([c for c in conditions if c[0] in env.group], env.group):
            return []
        beyond = [c for c in conditions if c[0] not in env.group]
        keeps = (lambda tags: _all_hold(beyond, tags),) if beyond else ()
        return _evaluate(env, body["input"], family, tuple(sorted(env.group.items())), keeps)
    if kind == "selectTags":
        keep = _keys(env, body["tagKeys"])
        merged: r.Points = []
        for g in _input_groups(env, body["input"]):
            beyond = {k: v for k, v in env.group.items() if k not in dict(g)}
            if {k: v for k, v in g if k in keep} == {k: v for k, v in env.group.items() if k not in beyond}:
                keeps = (lambda tags, b=beyond: all(tags.get(k, "") == v for k, v in b.items()),)
                merged += _evaluate(env, body["input"], family, g, keeps if beyond else ())
        return sorted(merged, key=lambda p: p[0])  # stable: a shared timestamp keeps each group's point
    if kind == "zScore":
        return _z_scores(env, body)
    raise NotImplementedError(kind)
