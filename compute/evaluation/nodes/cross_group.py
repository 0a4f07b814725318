"""Nodes that act across a computation's groups (its series' tags): `filterByTag` keeps the groups
whose tags meet a predicate, `selectTags` keeps some tag keys of each group (groups that then share
their tags become one, every point kept), `zScore` normalizes each group against its family at each
timestamp (docs/decisions/0057-nodes-across-groups.md).

Every other node sees one group's inputs (`EvalEnv`). A tree holding one of these is evaluated with
all its groups at hand: `regroup` gives every group's env the `Family` of the evaluation, and tells
the root which groups its output has (a node's groups are its input's, mapped by each cross-group
node on the way up); a cross-group node asks its input for the groups it needs through the family,
which keeps what it computed for one evaluation so that each group's input is evaluated once
however many output groups read it. A tree without such a node is evaluated as before: `regroup`
hands back the envs it was given, and `changes_by_group` is each group's `changed_from`.

Incremental as every node is (nodes/base.py): the three declare a reach (0, 0, and the forward-fill
radius for zScore), and a change in a group reaches the output groups it maps to (zScore: every
group of its family) from the same time on."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.align import FFILL_RADIUS_NS
from compute.evaluation.nodes.base import (
    EARLIEST,
    UNCHANGED,
    EvalEnv,
    GroupKey,
    Node,
    Reach,
    Series,
    SeriesNode,
    clamp,
    kept_on,
    numeric,
    reach_of,
)
from compute.evaluation.results import EnumPoints, LogPoints, NumericPoints
from compute.storage.series import TagCondition


class Family:
    """Every group of one evaluation (the computation's groups, keyed by its groupByTags values) and
    what the cross-group nodes computed for them during it."""

    def __init__(self, leaves: Mapping[GroupKey, EvalEnv]) -> None:
        self.leaves = leaves
        self.memo: dict[tuple[int, Any, int], Any] = {}

    def remember(self, key: tuple[int, Any, int], compute: Any) -> Any:
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]


def crosses(node: Node) -> bool:
    """Whether a node of the tree acts across groups. Asked of the root's input on every live
    evaluation (twice), so the answer is kept on the node: a tree never changes once compiled."""
    return kept_on(
        node, "_crosses", lambda: isinstance(node, CrossGroup) or any(crosses(c) for c in node.children())
    )


def groups_of(node: Node, family: Family) -> Mapping[GroupKey, EvalEnv]:
    """The groups of `node`'s output, each with the env it is evaluated with. A node over several
    inputs has the groups any of them has (a group one input lacks reads it as empty, as a group
    without a channel's points does)."""
    if isinstance(node, CrossGroup):
        return node.output_groups(family)
    found: dict[GroupKey, EvalEnv] | None = None
    for child in node.children():
        if crosses(child):
            found = {**(found or {}), **groups_of(child, family)}
    return family.leaves if found is None else found


def regroup(node: Node, envs: Mapping[GroupKey, EvalEnv]) -> Mapping[GroupKey, EvalEnv]:
    """What a root evaluates: `envs` itself when no node of the tree acts across groups, else the
    groups of the tree's output with their envs, every env knowing the evaluation's family."""
    if not crosses(node):
        return envs
    family = Family(envs)
    for key, env in envs.items():
        env.group, env.family = key, family
    return groups_of(node, family)


def changes_by_group(
    node: Node, changed: Mapping[GroupKey, int], envs: Mapping[GroupKey, EvalEnv]
) -> dict[GroupKey, int]:
    """Per group of the output, the earliest time that can differ, given where each of the
    computation's groups changed (`Node.changed_from` composed across groups)."""
    if not crosses(node):
        return {k: node.changed_from(c) for k, c in changed.items()}
    family = Family(envs)
    for key, env in envs.items():
        env.group, env.family = key, family
    return _changes(node, changed, family)


def _changes(node: Node, changed: Mapping[GroupKey, int], family: Family) -> dict[GroupKey, int]:
    if not crosses(node):
        return {k: node.changed_from(c) for k, c in changed.items()}
    if isinstance(node, CrossGroup):
        return node.changes(_changes(node.input, changed, family), family)
    groups = groups_of(node, family)
    reach = reach_of(node)
    if reach is None:
        return dict.fromkeys(groups, EARLIEST)
    per_child: list[Mapping[GroupKey, int]] = []
    for child in node.children():
        inner = _changes(child, changed, family)
        if not crosses(child):
            # beside a regrouped input, a child in the computation's groups reads only channels every
            # group shares (the compiler refuses anything else): any change of it reaches every group
            earliest = min(inner.values(), default=UNCHANGED)
            inner = dict.fromkeys(groups, earliest)
        per_child.append(inner)
    out: dict[GroupKey, int] = {}
    for key in groups:
        c = min((inner.get(key, UNCHANGED) for inner in per_child), default=UNCHANGED)
        out[key] = c if c in (EARLIEST, UNCHANGED) else clamp(c + reach.shift_ns)
    return out


def _family(env: EvalEnv, node: str) -> Family:
    if env.family is None:  # a root that evaluates its groups without `regroup` would get it wrong
        raise ComputeError(
            "InvalidComputation",
            f"'{node}' reads every group, and this result type evaluates each group apart",
            {"invalidTypes": node},
        )
    return env.family


def _empty(enum: bool, categories: list[str], lines: bool = False) -> Series:
    if lines:
        return LogPoints(np.empty(0, np.int64), np.empty(0, np.int32), [])
    if enum:
        return EnumPoints(np.empty(0, np.int64), np.empty(0, np.int32), categories)
    return NumericPoints(np.empty(0, np.int64), np.empty(0, np.float64))


def merge(parts: Sequence[Series]) -> Series:
    """Several groups' series as one: every point kept (equal timestamps too, in the order of the
    parts), in time order; enum labels kept whatever each part's categories; log lines stay log
    lines."""
    if len(parts) == 1:
        return parts[0]
    filled = [p for p in parts if len(p)]
    if not filled:
        return parts[0]
    if all(isinstance(p, NumericPoints) for p in filled):
        ts = np.concatenate([p.ts for p in filled])
        order = np.argsort(ts, kind="stable")
        return NumericPoints(ts[order], np.concatenate([p.values for p in filled])[order])  # type: ignore[union-attr]
    enums = [p for p in filled if isinstance(p, EnumPoints)]
    if len(enums) != len(filled):
        raise ComputeError(
            "InvalidComputation",
            "groups of one series hold both numbers and strings",
            {"invalidTypes": "selectTags"},
        )
    categories = enums[0].categories
    if any(p.categories is not categories for p in enums):  # e.g. two valueMaps' labels: one list
        categories = list(dict.fromkeys(c for p in enums for c in p.categories))
        index = {c: i for i, c in enumerate(categories)}
        codes = [np.array([index[c] for c in p.categories], np.int32)[p.codes] for p in enums]
    else:
        codes = [p.codes for p in enums]
    ts = np.concatenate([p.ts for p in enums])
    order = np.argsort(ts, kind="stable")
    kind = LogPoints if all(isinstance(p, LogPoints) for p in enums) else EnumPoints
    return kind(ts[order], np.concatenate(codes).astype(np.int32)[order], categories)


class CrossGroup(SeriesNode):
    """A series node whose groups are not its input's, or whose output in a group reads other groups.
    It maps each of its input's groups to one of its own (`key_of`; None: left out)."""

    input: SeriesNode  # declared by each subclass, a dataclass field
    dims: tuple[str, ...]  # the tag keys its output's groups are keyed by (the compiler checks them)

    def children(self) -> Sequence[Node]:
        return (self.input,)

    @abstractmethod
    def key_of(self, key: GroupKey) -> GroupKey | None: ...

    def head_settled(self, env: EvalEnv, since: int) -> bool:
        return self.head_stable()  # its output reads other groups' heads: only a stable tree is settled

    def members(self, family: Family) -> dict[GroupKey, list[tuple[GroupKey, EvalEnv]]]:
        """Per output group, the input's groups that map to it (in key order), with their envs."""

        def compute() -> dict[GroupKey, list[tuple[GroupKey, EvalEnv]]]:
            out: dict[GroupKey, list[tuple[GroupKey, EvalEnv]]] = {}
            for key, env in sorted(groups_of(self.input, family).items(), key=lambda kv: kv[0]):
                mapped = self.key_of(key)
                if mapped is not None:
                    out.setdefault(mapped, []).append((key, env))
            return out

        members: dict[GroupKey, list[tuple[GroupKey, EvalEnv]]] = family.remember(
            (id(self), "members", 0), compute
        )
        return members

    def output_groups(self, family: Family) -> dict[GroupKey, EvalEnv]:
        out: dict[GroupKey, EvalEnv] = {}
        for key, members in self.members(family).items():
            first_key, first = members[0]
            # the env of the first input group, as this group: a node above reads through it only
            # the channels every group shares (the compiler refuses others)
            out[key] = first if first_key == key else replace(first, group=key)
        return out

    def changes(self, inner: Mapping[GroupKey, int], family: Family) -> dict[GroupKey, int]:
        """Where each output group can have changed, given where each input group did."""
        return {
            key: min((inner.get(k, UNCHANGED) for k, _ in members), default=UNCHANGED)
            for key, members in self.members(family).items()
        }

    def _input(self, env: EvalEnv, since: int) -> Series:
        if since <= EARLIEST:
            return self.input.evaluate(env)
        return self.input_since(self.input, env, since)


@dataclass
class FilterByTag(CrossGroup):
    """`filterByTag`: the groups whose tags meet every condition (a tag predicate: `in`, `notIn`,
    `and`); the others are left out of the output."""

    input: SeriesNode
    conditions: tuple[TagCondition, ...]
    dims: tuple[str, ...] = ()
    enum: bool = False  # the EnumSeries variant
    lines: bool = False  # the LogSeries variant (built only when polled)

    def reach(self) -> Reach:
        return Reach()

    def key_of(self, key: GroupKey) -> GroupKey | None:
        tags = dict(key)
        return key if all(c.holds(tags) for c in self.conditions) else None

    def evaluate(self, env: EvalEnv) -> Series:
        return self._kept(env, EARLIEST)

    def evaluate_since(self, env: EvalEnv, since: int) -> Series:
        return self._kept(env, since)

    def _kept(self, env: EvalEnv, since: int) -> Series:
        members = self.members(_family(env, "filterByTag")).get(env.group, [])
        if not members:  # a group this node left out, asked for by a node over several inputs
            return _empty(self.enum, env.categories, self.lines)
        return self._input(members[0][1], since)


@dataclass
class SelectTags(CrossGroup):
    """`selectTags`: each group keyed by only the selected tag keys. Groups that then share their
    tags are one group holding every point of each ("points that share the selected keys but differ
    on dropped keys remain distinct"): a timestamp two of them share appears twice."""

    input: SeriesNode
    keys: frozenset[str]
    dims: tuple[str, ...] = ()
    enum: bool = False  # the EnumSeries variant
    lines: bool = False  # the LogSeries variant (built only when polled)

    def reach(self) -> Reach:
        return Reach()

    def key_of(self, key: GroupKey) -> GroupKey | None:
        return tuple((k, v) for k, v in key if k in self.keys)

    def evaluate(self, env: EvalEnv) -> Series:
        return self._merged(env, EARLIEST)

    def evaluate_since(self, env: EvalEnv, since: int) -> Series:
        return self._merged(env, since)

    def _merged(self, env: EvalEnv, since: int) -> Series:
        members = self.members(_family(env, "selectTags")).get(env.group, [])
        if not members:
            return _empty(self.enum, env.categories, self.lines)
        return merge([self._input(m, since) for _, m in members])


@dataclass
class ZScore(CrossGroup):
    """`zScore`: for each group at each timestamp of its family (the groups sharing the values of
    `family_tags`; all groups when empty), (value - mean) / stddev over the family's groups that
    have a value there, each group's value forward filled within `radius_ns` (Nominal's default
    1 s); a group without a value there has no point there. The standard deviation is the
    population's (as everywhere in Sparkwire); where it is zero (one group, or all equal) the point
    is left out, as Nominal's docs say. NaN propagates as IEEE maths does."""

    input: SeriesNode
    family_tags: frozenset[str]
    radius_ns: int = FFILL_RADIUS_NS
    dims: tuple[str, ...] = ()

    def own_lookback_ns(self) -> int:
        return self.radius_ns

    def reach(self) -> Reach:
        return Reach(ns=self.radius_ns)

    def key_of(self, key: GroupKey) -> GroupKey | None:
        return key

    def family_key(self, key: GroupKey) -> GroupKey:
        return tuple((k, v) for k, v in key if k in self.family_tags)

    def changes(self, inner: Mapping[GroupKey, int], family: Family) -> dict[GroupKey, int]:
        """A change in one group at c changes the mean and deviation of its family from c on."""
        earliest: dict[GroupKey, int] = {}
        for key, _ in self._input_groups(family):
            f = self.family_key(key)
            earliest[f] = min(earliest.get(f, UNCHANGED), inner.get(key, UNCHANGED))
        return {key: earliest[self.family_key(key)] for key, _ in self._input_groups(family)}

    def _input_groups(self, family: Family) -> list[tuple[GroupKey, EvalEnv]]:
        return [m for members in self.members(family).values() for m in members]

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._of_group(env, EARLIEST)

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        return self._of_group(env, since)

    def _of_group(self, env: EvalEnv, since: int) -> NumericPoints:
        family = _family(env, "zScore")
        f = self.family_key(env.group)
        scores: dict[GroupKey, NumericPoints] = family.remember(
            (id(self), f, since), lambda: self._scores(family, f, since)
        )
        found = scores.get(env.group)
        return found if found is not None else NumericPoints(np.empty(0, np.int64), np.empty(0, np.float64))

    def _scores(self, family: Family, f: GroupKey, since: int) -> dict[GroupKey, NumericPoints]:
        members = [(k, e) for k, e in self._input_groups(family) if self.family_key(k) == f]
        series = [numeric(self._input(e, since), "zScore") for _, e in members]
        stamps = [s.ts for s in series if len(s)]
        if not stamps:
            return {}
        ts = np.sort(np.concatenate(stamps))
        ts = ts[np.r_[True, ts[1:] != ts[:-1]]]
        if since > EARLIEST:
            ts = ts[np.searchsorted(ts, since, side="left") :]
        values = np.zeros((len(series), len(ts)))
        valid = np.zeros((len(series), len(ts)), bool)
        for i, s in enumerate(series):
            if not len(s):
                continue
            idx = np.searchsorted(s.ts, ts, side="right") - 1
            has = idx >= 0
            idx = np.where(has, idx, 0)
            valid[i] = has & (ts - s.ts[idx] <= self.radius_ns)
            values[i] = np.where(valid[i], s.values[idx], 0.0)
        count = valid.sum(axis=0)
        with np.errstate(all="ignore"):
            total = np.zeros(len(ts))
            for i in range(len(series)):  # member by member, in key order: the same sums whatever is cut
                total += values[i]
            mean = total / count
            spread = np.zeros(len(ts))
            for i in range(len(series)):
                spread += np.where(valid[i], (values[i] - mean) ** 2, 0.0)
            std = np.sqrt(spread / count)
            out: dict[GroupKey, NumericPoints] = {}
            for i, (key, _) in enumerate(members):
                keep = valid[i] & ~(std == 0.0)
                out[key] = NumericPoints(ts[keep], (values[i][keep] - mean[keep]) / std[keep])
        return out
