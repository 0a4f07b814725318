"""What several builder families share beyond the Builder: interpolation radii, pointwise nodes
folded over constants, unions nominal_variants does not list, and the persistence settings of the
range nodes. Builders import this; it imports no builder."""

from __future__ import annotations

from typing import Any

from compute.evaluation import nodes
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import MalformedNode, not_supported, refuse
from compute.evaluation.nodes.align import FFILL_RADIUS_NS
from compute.evaluation.nodes.math import Kernel, Pointwise, fold

Json = Any


def radius(b: Builder, o: dict[str, Json], what: str) -> int:
    """`interpolationConfiguration`: forward fill with its radius (Nominal's default 1 s)."""
    config = o.get("interpolationConfiguration")
    if config is None:
        return FFILL_RADIUS_NS
    _, inner = b.variant("InterpolationConfiguration", config)
    ffill = b.obj(inner, "forwardFillInterpolation")
    ns = b.duration_constant(b.get(ffill, "interpolationRadius", "forwardFillInterpolation"))
    if ns < 0:
        raise refuse(
            what,
            "interpolationConfiguration",
            f"{what}: a negative interpolation radius ({human_duration(ns)})",
        )
    return ns


def pointwise(name: str, inputs: list[nodes.SeriesNode], kernel: Kernel, radius_ns: int) -> nodes.SeriesNode:
    """The node, or its value folded now when every input is a constant."""
    if all(isinstance(x, nodes.Constant) for x in inputs):
        value = fold(kernel, [x.value for x in inputs if isinstance(x, nodes.Constant)])
        if value is None:
            raise not_supported(f"'{name}' of constants has no value", name)
        return nodes.Constant(value)
    return Pointwise(name, inputs, kernel, radius_ns)


def one_of(value: Json, union: str, allowed: tuple[str, ...]) -> tuple[str, Json]:
    """A union of nominal-api that nominal_variants.VARIANTS does not list (a few builders read one)."""
    if not isinstance(value, dict) or value.get("type") not in allowed or value["type"] not in value:
        raise MalformedNode(f"{union}: expected one of {', '.join(allowed)}")
    return value["type"], value[value["type"]]
