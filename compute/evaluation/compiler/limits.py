"""What one compilation may ask for and expand: the limits (windows, points, lookback, the compile
budget) and the result options, shared by the plan and every builder."""

from __future__ import annotations

import time
from dataclasses import dataclass

from compute.evaluation.errors import ComputeError
from schemas.timestamps import NANOS_PER_SECOND


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


def too_many_points(asked: int, what: str, limits: Limits) -> ComputeError:
    return ComputeError(
        "TooManyPoints",
        f"{asked} {what} exceed the limit of {limits.max_points}",
        {"limit": str(limits.max_points)},
    )
