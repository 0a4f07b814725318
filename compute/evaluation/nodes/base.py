"""What every evaluator shares: the inputs of one group, the three node families (a series, a set of
ranges, the output a client receives), and the contract under which a live computation re-evaluates
only what its new points can change (docs/architecture.md, "Evaluation", decision 0049).

The contract, for a node with children:
- `evaluate(env)`: the node's output over everything the group holds (from `env.held_from`).
- `evaluate_since(env, since)`: the same output from `since` on, bit for bit (`cut(evaluate(env),
  since)`). The default computes it exactly that way, whole then cut, so a node that has no
  incremental form is still exact; a node that declares its `reach` evaluates its children only from
  `since` minus that reach (`input_since`) and costs what the part from `since` on costs.
- `reach()`: how far back from an output time its inputs matter, or None (no incremental form).
- `changed_from(changed)`: given that its channels changed from time `changed` on (nothing earlier),
  the earliest time at which its output can differ. Without a `reach` it is `EARLIEST` (anything
  may change), so the whole tree is re-evaluated: today's cost, never a wrong answer.
- `own_lookback_ns()`: history before the window the node needs (summed along the tree).

Evaluators are pure functions of their inputs' numpy columns, so live micro-batches, back-fill and a
fresh FullResult run the very same code."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.results import (
    INT64_MAX,
    INT64_MIN,
    EnumPoints,
    LogPoints,
    NumericPoints,
    Output,
    Ranges,
    StoredTexts,
)

if TYPE_CHECKING:
    from compute.evaluation.nodes.cross_group import Family

GroupKey = tuple[tuple[str, str], ...]
Series = NumericPoints | EnumPoints

EARLIEST = int(INT64_MIN)  # `changed_from`: the whole output may have changed
UNCHANGED = int(INT64_MAX)  # `changed_from`: nothing changed
FIRST_PROBE_NS = 100_000_000  # how far back a node with `points` reach looks first (doubled as needed)

# Every node class by name, registered as it is defined: the exactness tests fail for a kind
# without a case (tests/test_incremental_exactness.py).
REGISTRY: dict[str, type[Any]] = {}


def _register(cls: type[Any]) -> None:
    REGISTRY[cls.__name__] = cls


def node_kinds() -> dict[str, type[Any]]:
    """The registered node classes that can be built live (not the abstract families, nor those only
    a poll builds: `POLLED_ONLY`, evaluated once, whole, over a past period, so no micro-batch
    evaluates them incrementally; their own tests check them against references)."""
    return {
        name: cls
        for name, cls in REGISTRY.items()
        if not inspect.isabstract(cls) and not getattr(cls, "POLLED_ONLY", False)
    }


@dataclass
class EvalEnv:
    """One group's inputs (by input index) and the window being evaluated. `held_from` is where the
    held history starts: nodes see nothing before it, and nothing before it is ever asked for."""

    inputs: dict[int, Series]
    window_start: int
    now: int
    categories: list[str] = field(default_factory=list)
    held_from: int = EARLIEST
    lead_ns: int = 0  # how far before `held_from` an output can lie (negative time shifts)
    # Set by `cross_group.regroup` when a node of the tree acts across groups (zScore, selectTags,
    # filterByTag): the group this env evaluates, and every group of the same evaluation.
    group: GroupKey = ()
    family: Family | None = None


@dataclass(frozen=True)
class Reach:
    """How far back from an output time a node's inputs matter: its output at t reads its inputs at
    [t - shift_ns - ns, t - shift_ns], plus the `points` input points before that (the previous point
    of a derivative, the state a range is in). A node declaring one promises that its output at t
    depends on nothing else: neither on inputs outside that span nor on where the held history
    starts (past its own lookback)."""

    ns: int = 0
    points: int = 0
    shift_ns: int = 0


T = TypeVar("T")


def kept_on(node: Node, name: str, compute: Callable[[], T]) -> T:
    """A fact of a compiled node, computed once and kept on it: a tree never changes once compiled,
    and a live evaluation asks some facts of every node several times per micro-batch."""
    known = node.__dict__
    if name not in known:
        known[name] = compute()
    fact: T = known[name]
    return fact


def reach_of(node: Node) -> Reach | None:
    """`node.reach()`, kept on the node (its fields, all its reach depends on, never change)."""
    return kept_on(node, "_reach", node.reach)


def clamp(t: int) -> int:
    return max(EARLIEST, min(UNCHANGED, t))


def cut(out: Any, since: int) -> Any:
    """The part of a series or ranges output from `since` on (a range spanning it starts there)."""
    if since <= EARLIEST:
        return out
    return out.clip(since) if isinstance(out, Ranges) else out.since(since)


class Node:
    """Any node below the output: knows its children, how much history before the window it needs
    (the sum along the path, so nested lookbacks add up), and how far a change reaches."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register(cls)

    def children(self) -> Sequence[Node]:
        return ()

    def own_lookback_ns(self) -> int:
        return 0

    @property
    def lookback_ns(self) -> int:
        return self.own_lookback_ns() + max((c.lookback_ns for c in self.children()), default=0)

    def reads_channel(self) -> bool:
        return any(c.reads_channel() for c in self.children())

    # -- the incremental contract ----------------------------------------------------------------
    def reach(self) -> Reach | None:
        """None: no incremental form (the default); `evaluate_since` then evaluates whole."""
        return None

    def evaluate(self, env: EvalEnv) -> Any:
        raise NotImplementedError

    def evaluate_since(self, env: EvalEnv, since: int) -> Any:
        """The output from `since` on, exactly `cut(evaluate(env), since)`. Override it together with
        `reach`; this default is exact for any node and costs a whole evaluation."""
        return cut(self.evaluate(env), since)

    def changed_from(self, changed: int) -> int:
        """The earliest output time that can differ when the channels changed from `changed` on."""
        reach = reach_of(self)
        if reach is None:
            return EARLIEST
        inner = min((c.changed_from(changed) for c in self.children()), default=UNCHANGED)
        if inner in (EARLIEST, UNCHANGED):
            return inner
        return clamp(inner + reach.shift_ns)

    def head_stable(self) -> bool:
        """Whether the output inside the window stays the same when more history is held before it
        (true of every node whose reach is a time span within its lookback). A derivative's or a
        range's first point depends on the held point before it, so a tree holding one is
        re-evaluated whole when its held history's start moves (computation.py)."""
        reach = reach_of(self)
        return reach is not None and reach.points == 0 and all(c.head_stable() for c in self.children())

    def head_settled(self, env: EvalEnv, since: int) -> bool:
        """Whether the output from `since` on is the same whatever history is held before
        `env.held_from`: true of a head-stable node, and of a point reach whose input holds that
        point at or after `env.held_from` (a dense channel under `derivative(x)` or `threshold(x)`),
        so the computation need not re-evaluate it whole when the held start moves. False when
        it cannot tell cheaply."""
        reach = reach_of(self)
        if reach is None:
            return False
        start = clamp(since - reach.shift_ns - reach.ns) if since > EARLIEST else EARLIEST
        for child in self.children():
            if reach.points and child.points_before(env, start) < reach.points:
                return False
            if not child.head_settled(env, start):
                return False
        return True

    def points_before(self, env: EvalEnv, t: int) -> int:
        """How many points of this node's output lie before `t`, if cheap to tell (else 0)."""
        return 0

    def input_since(self, child: Node, env: EvalEnv, since: int) -> Any:
        """`child`'s output from where this node's reach says its output from `since` needs it."""
        reach = reach_of(self)
        assert reach is not None, "input_since is for nodes that declare a reach"
        start = clamp(since - reach.shift_ns - reach.ns) if since > EARLIEST else EARLIEST
        if not reach.points or start <= EARLIEST:
            return child.evaluate_since(env, start)
        probe = FIRST_PROBE_NS
        floor = env.held_from - env.lead_ns
        while True:  # widen until `points` of the child's output lie before `start`, or all of it
            lower = clamp(start - probe)
            if lower <= floor:
                return child.evaluate_since(env, EARLIEST)
            out = child.evaluate_since(env, lower)
            if int(out.ts.searchsorted(start)) >= reach.points:
                return out
            probe *= 2


def grid_end(env: EvalEnv, interval_ns: int) -> int:
    """The last grid point a resample makes: the first at or after the clock, so that its grid is
    bounded by the held history, never by how far ahead a stray point is stamped (issue 44: one
    point 6 days ahead of a day's window at 8.64 ms made a 70M-point grid)."""
    return -(-env.now // interval_ns) * interval_ns


def lead_ns(node: Node) -> int:
    """How far before the held history a node's output can reach (the sum of negative shifts)."""
    reach = reach_of(node)
    own = max(-reach.shift_ns, 0) if reach is not None else 0
    return own + max((lead_ns(c) for c in node.children()), default=0)


class SeriesNode(Node, ABC):
    """A node that yields a series (numeric or enum) over the held part of the window."""

    @abstractmethod
    def evaluate(self, env: EvalEnv) -> Series: ...

    def evaluate_since(self, env: EvalEnv, since: int) -> Series:
        out: Series = super().evaluate_since(env, since)
        return out


class PointByPoint(SeriesNode):
    """A series node whose output at a time depends only on its one input's point at that time
    (reach 0: filters, unit and value maps, per-point transforms). It says how a run of points maps
    (`apply`); a whole evaluation and a live one since a time are then the same code."""

    input: SeriesNode  # declared by each subclass, a dataclass field

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def reach(self) -> Reach:
        return Reach()

    def evaluate(self, env: EvalEnv) -> Series:
        return self.apply(self.input.evaluate(env))

    def evaluate_since(self, env: EvalEnv, since: int) -> Series:
        return self.apply(self.input_since(self.input, env, since))

    @abstractmethod
    def apply(self, x: Series) -> Series: ...


class RangeNode(Node, ABC):
    """A node that yields normalized ranges."""

    @abstractmethod
    def evaluate(self, env: EvalEnv) -> Ranges: ...

    def evaluate_since(self, env: EvalEnv, since: int) -> Ranges:
        out: Ranges = super().evaluate_since(env, since)
        return out


class OutputNode(ABC):
    """The root of a computation: turns every group's inputs into what its clients receive. It sees
    all groups at once because a grouped response holds one result type across groups.

    `evaluate_groups` evaluates whole (a back-fill, a fresh FullResult). `update_groups` is a live
    micro-batch's: `since[group]` is where that group's input can have changed (`EARLIEST`: all of
    it, `UNCHANGED`: nothing); the default evaluates whole, so a root without an incremental form
    stays exact."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register(cls)

    @property
    @abstractmethod
    def input(self) -> Node: ...

    @abstractmethod
    def evaluate_groups(self, envs: Mapping[GroupKey, EvalEnv]) -> dict[GroupKey, Output]: ...

    def update_groups(
        self, envs: Mapping[GroupKey, EvalEnv], since: Mapping[GroupKey, int]
    ) -> dict[GroupKey, Output]:
        return self.evaluate_groups(envs)

    @property
    def lookback_ns(self) -> int:
        return self.input.lookback_ns


def empty_numeric() -> NumericPoints:
    return NumericPoints(np.empty(0, np.int64), np.empty(0, np.float64))


def numeric(series: Series, node: str) -> NumericPoints:
    """The series as numbers, or an honest refusal when a numeric node reads an enum or log channel."""
    if isinstance(series, EnumPoints):
        raise ComputeError(
            "InvalidComputation",
            f"'{node}' needs a numeric series, got a {_channel_kind(series)} channel",
            {"invalidTypes": "", "variant": node},
        )
    return series


def _channel_kind(series: EnumPoints) -> str:
    if isinstance(series, StoredTexts):
        return series.channel
    return "log" if isinstance(series, LogPoints) else "string"


Texts = TypeVar("Texts", bound=StoredTexts)


def stored_texts(series: Series, points: type[Texts], node: str) -> Texts:
    """The series as an array or struct channel's points of this class, or an honest refusal naming
    what the channel holds (decision 0104)."""
    if isinstance(series, points):
        return series
    if not len(series):  # nothing written yet
        return points(series.ts, np.empty(0, np.int32), [])
    got = _channel_kind(series) if isinstance(series, EnumPoints) else "double"
    raise ComputeError(
        "InvalidComputation",
        f"'{node}' needs a {points.channel} series, got a {got} channel",
        {"invalidTypes": "", "variant": node},
    )


def log_lines(series: Series, node: str) -> LogPoints:
    """The series as log lines, or an honest refusal when a log node reads a double or string channel."""
    if isinstance(series, LogPoints):
        return series
    if not len(series):  # nothing written yet: no log line
        return LogPoints(series.ts, np.empty(0, np.int32), [])
    got = _channel_kind(series) if isinstance(series, EnumPoints) else "double"
    raise ComputeError(
        "InvalidComputation",
        f"'{node}' needs a log series, got a {got} channel",
        {"invalidTypes": "", "variant": node},
    )


def enum(series: Series, node: str, categories: list[str]) -> EnumPoints:
    if isinstance(series, LogPoints | StoredTexts):  # no label: only the log (array, struct) nodes read it
        raise ComputeError(
            "InvalidComputation",
            f"'{node}' needs an enum series, got a {_channel_kind(series)} channel",
            {"invalidTypes": "", "variant": node},
        )
    if isinstance(series, NumericPoints):
        if not len(series):  # nothing written yet: an empty enum series
            return EnumPoints(series.ts, np.empty(0, np.int32), categories)
        raise ComputeError(
            "InvalidComputation",
            f"'{node}' needs an enum series, got a double channel",
            {"invalidTypes": "", "variant": node},
        )
    return series
