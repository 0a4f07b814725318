"""Pointwise maths over any number of numeric inputs: trigonometry, power, modulo, floor division,
atan2, the bit operations, offset and scale, if/else, and the cross-series max, min, mean, sum and
product.

Every such node aligns its inputs the way Nominal's arithmetic does (forward fill, a 1 s radius
unless the node's `interpolationConfiguration` says otherwise; a constant is broadcast), then
applies one kernel to the aligned columns. The output at a timestamp depends only on the inputs'
points at most one radius before it, so the node's lookback is that radius when it aligns two or
more series, and 0 otherwise (a pointwise function of one series).

IEEE semantics as in nodes/arithmetic.py: asin(2) is NaN, x % 0 is NaN, NaN in gives NaN out. The
bit operations cast each value to int64 as Nominal's docs say (truncating toward zero, as a cast
does); a value with no int64 (NaN, +-inf, beyond +-2^63) has no bits, so its point is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compute.evaluation.nodes.align import FFILL_RADIUS_NS, forward_fill
from compute.evaluation.nodes.base import EvalEnv, Node, Reach, Series, SeriesNode, cut, numeric
from compute.evaluation.nodes.inputs import Constant
from compute.evaluation.results import NumericPoints

# A kernel maps the aligned columns (one per input, in order) to the output values, or to
# (which points to keep, their values) when some points have no result.
Kernel = Callable[[list[np.ndarray]], np.ndarray | tuple[np.ndarray, np.ndarray]]

TWO_63 = 2.0**63


def _unary(f: Callable[[np.ndarray], np.ndarray]) -> Kernel:
    return lambda cols: f(cols[0])


def _binary(f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Kernel:
    return lambda cols: f(cols[0], cols[1])


# `NumericSeries` variants with one input `x` (radians in, radians out).
TRIG_KERNELS: dict[str, Kernel] = {
    "sin": _unary(np.sin),
    "cos": _unary(np.cos),
    "tan": _unary(np.tan),
    "asin": _unary(np.arcsin),
    "acos": _unary(np.arccos),
}
# Two-input variants, their inputs in the order the kernel takes them: (field, field).
BINARY_FIELDS: dict[str, tuple[str, str]] = {
    "power": ("base", "exponent"),
    "modulo": ("left", "right"),
    "floorDivide": ("left", "right"),
    "atan2": ("y", "x"),
}
BINARY_KERNELS: dict[str, Kernel] = {
    "power": _binary(np.power),
    # Nominal: "the remainder of left divided by right". A remainder takes the dividend's sign (as
    # C's fmod, SQL's and Rust's %): -7 % 3 is -1.
    "modulo": _binary(np.fmod),
    "floorDivide": _binary(lambda a, b: np.floor(np.divide(a, b))),
    "atan2": _binary(np.arctan2),
}
# The cross-series reductions (`inputs`: a list), NaN propagating as IEEE maths does.
REDUCE_KERNELS: dict[str, Kernel] = {
    "max": lambda cols: np.maximum.reduce(cols),
    "min": lambda cols: np.minimum.reduce(cols),
    "sum": lambda cols: np.add.reduce(cols),
    "mean": lambda cols: np.add.reduce(cols) / len(cols),
    "product": lambda cols: np.multiply.reduce(cols),
}


def as_int64(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(which values have an int64, those values truncated toward zero)."""
    keep = np.isfinite(values) & (values >= -TWO_63) & (values < TWO_63)
    return keep, np.trunc(values[keep]).astype(np.int64)


def bit_kernel(operation: str, operand: int) -> Kernel:
    """`bitAnd` / `bitOr` / `bitXor` with an int64 operand, `bitShiftLeft` / `bitShiftRight` by
    0..63 positions (an arithmetic shift right, keeping the sign), `bitTest` of bit 0..63 (0 the
    least significant) giving 0.0 or 1.0."""

    def kernel(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        keep, ints = as_int64(cols[0])
        k = np.int64(operand)
        if operation == "bitAnd":
            out = ints & k
        elif operation == "bitOr":
            out = ints | k
        elif operation == "bitXor":
            out = ints ^ k
        elif operation == "bitShiftLeft":
            out = ints << k  # bits shifted past bit 63 are lost, as in a 64-bit register
        elif operation == "bitShiftRight":
            out = ints >> k
        elif operation == "bitTest":
            out = (ints >> k) & np.int64(1)
        else:
            raise ValueError(operation)
        return keep, out.astype(np.float64)

    return kernel


BIT_OPERATIONS: tuple[str, ...] = ("bitAnd", "bitOr", "bitXor", "bitShiftLeft", "bitShiftRight", "bitTest")


def if_else_kernel(
    condition: Callable[[list[np.ndarray]], np.ndarray], true_at: int, false_at: int
) -> Kernel:
    """The `trueValue` column where the condition holds, else the `falseValue` column."""
    return lambda cols: np.where(condition(cols), cols[true_at], cols[false_at])


@dataclass
class Pointwise(SeriesNode):
    """One kernel over inputs aligned by forward fill (`radius_ns`), constants broadcast."""

    name: str  # the variant, for errors
    inputs: list[SeriesNode]
    kernel: Kernel
    radius_ns: int = FFILL_RADIUS_NS

    def children(self) -> Sequence[Node]:
        return tuple(x for x in self.inputs if not isinstance(x, Constant))

    def own_lookback_ns(self) -> int:
        return self.radius_ns if len(self.children()) >= 2 else 0

    def reach(self) -> Reach:
        return Reach(ns=self.own_lookback_ns())  # the forward fill reads up to its radius back

    def evaluate(self, env: EvalEnv) -> NumericPoints:
        return self._apply([x.evaluate(env) for x in self.children()])

    def evaluate_since(self, env: EvalEnv, since: int) -> NumericPoints:
        out: NumericPoints = cut(
            self._apply([self.input_since(x, env, since) for x in self.children()]), since
        )
        return out

    def _apply(self, series: list[Series]) -> NumericPoints:
        timed = [numeric(x, self.name) for x in series]
        ts, aligned = forward_fill(timed, self.radius_ns)
        columns, it = [], iter(aligned)
        for x in self.inputs:
            columns.append(np.full(len(ts), x.value) if isinstance(x, Constant) else next(it))
        with np.errstate(all="ignore"):
            out = self.kernel(columns)
        if isinstance(out, tuple):
            keep, values = out
            return NumericPoints(ts[keep], np.asarray(values, np.float64))
        return NumericPoints(ts, np.asarray(out, np.float64))


def fold(kernel: Kernel, values: list[float]) -> float | None:
    """The kernel over constants only, at compile time; None when it has no result."""
    with np.errstate(all="ignore"):
        out = kernel([np.array([v], np.float64) for v in values])
    if isinstance(out, tuple):
        keep, kept = out
        return float(kept[0]) if bool(keep[0]) else None
    return float(np.asarray(out, np.float64)[0])
