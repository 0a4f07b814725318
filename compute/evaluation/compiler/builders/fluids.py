"""Builders of `refprop` and `refpropV2` (fluid properties by CoolProp: compute/evaluation/nodes/fluids.py),
registered into registry.py. What CoolProp cannot compute is refused here by name, at
creation: a substance it has no model of, a pair of inputs it has no flash for, viscosity where it
has no viscosity model, anything but two inputs, an output that is one of the inputs."""

from __future__ import annotations

from typing import Any

from compute.evaluation import nodes
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.helpers import pointwise, radius
from compute.evaluation.compiler.registry import builds
from compute.evaluation.errors import MalformedNode, not_supported
from compute.evaluation.nodes.align import FFILL_RADIUS_NS
from compute.evaluation.nodes.fluids import (
    NO_VISCOSITY,
    OUTPUT_ONLY,
    UNSOLVABLE_PAIRS,
    UNSUPPORTED_SUBSTANCES,
    fluid_kernel,
)

Json = Any


def _malformed(message: str) -> Exception:
    return MalformedNode(message)


def _enum(b: Builder, enum: str, value: Json, what: str) -> str:
    """A value of the enum, or UNKNOWN (the value a Conjure client sends for one it does not know),
    which the caller refuses by name."""
    return "UNKNOWN" if value == "UNKNOWN" else b.enum_value(enum, value, what)


def _build(b: Builder, v: Json, what: str, radius_ns: int | None) -> nodes.SeriesNode:
    o = b.obj(v, what)
    substance = _enum(b, "RefpropSubstance", b.get(o, "substance", what), f"{what}.substance")
    if substance in UNSUPPORTED_SUBSTANCES:
        raise not_supported(
            f"{what}.substance {substance} is not supported: {UNSUPPORTED_SUBSTANCES[substance]}",
            what,
            field="substance",
        )
    output = _enum(b, "RefpropProperty", b.get(o, "outputProperty", what), f"{what}.outputProperty")
    raw_inputs = b.obj(b.get(o, "inputs", what), f"{what}.inputs")
    names = sorted(_enum(b, "RefpropProperty", k, f"{what}.inputs") for k in raw_inputs)
    if len(names) != 2:
        raise not_supported(
            f"{what}.inputs must name exactly two properties (a fluid's state), got {len(names)}",
            what,
            field="inputs",
        )
    for name in names:
        if name == "UNKNOWN" or name in OUTPUT_ONLY:
            raise not_supported(
                f"{what}.inputs: {name} cannot be an input (not a state variable of the fluid)",
                what,
                field="inputs",
            )
    if output == "UNKNOWN":
        raise not_supported(f"{what}.outputProperty UNKNOWN is not a property", what, field="outputProperty")
    if output in names:
        raise not_supported(
            f"{what}.outputProperty {output} is also an input; it must be another property",
            what,
            field="outputProperty",
        )
    if frozenset(names) in UNSOLVABLE_PAIRS:
        raise not_supported(
            f"{what}.inputs {names[0]} and {names[1]}: no equation-of-state solver for this pair "
            "(CoolProp); give the state by another pair, e.g. TEMPERATURE and PRESSURE",
            what,
            field="inputs",
        )
    if output == "VISCOSITY" and substance in NO_VISCOSITY:
        raise not_supported(
            f"{what}: no viscosity model for {substance} (CoolProp)", what, field="outputProperty"
        )
    series = [b.numeric(raw_inputs[name]) for name in names]
    kernel = fluid_kernel(substance, output, (names[0], names[1]))
    return pointwise(what, series, kernel, FFILL_RADIUS_NS if radius_ns is None else radius_ns)


@builds("NumericSeries", "refprop")
def refprop(b: Builder, v: Json) -> nodes.SeriesNode:
    """`refprop` aligns its inputs by its `interpolationConfiguration` (forward fill, 1 s by
    default)."""
    return _build(b, v, "refprop", radius(b, b.obj(v, "refprop"), "refprop"))


@builds("NumericSeries", "refpropV2")
def refprop_v2(b: Builder, v: Json) -> nodes.SeriesNode:
    """`refpropV2` has no interpolation field: Nominal's default, forward fill within 1 s."""
    return _build(b, v, "refpropV2", None)
