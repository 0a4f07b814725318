"""Fluid properties (`refprop` / `refpropV2`): one thermodynamic or transport property of a pure
fluid (or air, a pseudo-pure fluid) from two others, by CoolProp's reference equations of state
(the same published Helmholtz-energy equations REFPROP evaluates for these fluids: IAPWS-95 for
water, Span et al. for nitrogen, Lemmon et al. for air, ...).

Units: nominal-api names none, so every property is in SI base units, CoolProp's own (no
conversion): temperature K, pressure Pa, mass density kg/m^3, specific enthalpy and internal energy
J/kg, specific entropy J/(kg*K), dynamic viscosity Pa*s (REFPROP's "MASS BASE SI" unit system).

A state CoolProp cannot solve (outside an equation's range, an input NaN, a two-phase state a pair
cannot resolve) gives NaN at that point: the chart shows a gap where the physics has no answer,
and every other point is unaffected. The kernel is pointwise over inputs aligned as arithmetic
aligns them (nodes/math.py's `Pointwise`), so a live micro-batch evaluates only its new points."""

from __future__ import annotations

import numpy as np

# RefpropSubstance -> CoolProp's fluid name. Not here: JET_A_4658 and JET_A_3638 (REFPROP's
# surrogate jet fuel mixtures, which CoolProp does not have) and UNKNOWN.
SUBSTANCES: dict[str, str] = {
    "NITROGEN": "Nitrogen",
    "OXYGEN": "Oxygen",
    "HELIUM": "Helium",
    "HYDROGEN": "Hydrogen",  # normal hydrogen, as REFPROP's HYDROGEN.FLD
    "METHANE": "Methane",
    "PROPANE": "n-Propane",
    "BUTANE": "n-Butane",
    "WATER": "Water",
    "XENON": "Xenon",
    "AIR": "Air",  # pseudo-pure (Lemmon et al. 2000), as REFPROP's AIR.PPF
    "CARBON_DIOXIDE": "CarbonDioxide",
    "ARGON": "Argon",
    "CARBON_MONOXIDE": "CarbonMonoxide",
}
UNSUPPORTED_SUBSTANCES: dict[str, str] = {
    "JET_A_4658": "REFPROP's Jet-A surrogate mixture; CoolProp has no model of it",
    "JET_A_3638": "REFPROP's Jet-A surrogate mixture; CoolProp has no model of it",
    "UNKNOWN": "not a substance",
}

# RefpropProperty -> CoolProp's mass-based output key, and the SI unit it is in.
PROPERTIES: dict[str, tuple[str, str]] = {
    "TEMPERATURE": ("T", "K"),
    "PRESSURE": ("P", "Pa"),
    "MASS_DENSITY": ("Dmass", "kg/m3"),
    "MASS_SPECIFIC_ENTHALPY": ("Hmass", "J/kg"),
    "MASS_SPECIFIC_INTERNAL_ENERGY": ("Umass", "J/kg"),
    "MASS_SPECIFIC_ENTROPY": ("Smass", "J/(kg.K)"),
    "VISCOSITY": ("V", "Pa.s"),
}
# A transport property is not a state variable: it is an output only.
OUTPUT_ONLY = frozenset({"VISCOSITY"})
# Pairs of state variables CoolProp's Helmholtz backend has no flash for (CoolProp 8.0).
UNSOLVABLE_PAIRS: frozenset[frozenset[str]] = frozenset(
    {
        frozenset({"TEMPERATURE", "MASS_SPECIFIC_ENTHALPY"}),
        frozenset({"TEMPERATURE", "MASS_SPECIFIC_INTERNAL_ENERGY"}),
        frozenset({"MASS_SPECIFIC_ENTHALPY", "MASS_SPECIFIC_INTERNAL_ENERGY"}),
        frozenset({"MASS_SPECIFIC_INTERNAL_ENERGY", "MASS_SPECIFIC_ENTROPY"}),
    }
)
# Substances CoolProp has no viscosity model for.
NO_VISCOSITY = frozenset({"XENON", "CARBON_MONOXIDE"})


def fluid_kernel(substance: str, output: str, inputs: tuple[str, str]) -> FluidProperty:
    """The kernel for one (substance, output, input pair); the caller has checked the names."""
    return FluidProperty(
        SUBSTANCES[substance], PROPERTIES[output][0], tuple(PROPERTIES[p][0] for p in inputs)
    )


class FluidProperty:
    """A `Kernel` (nodes/math.py): the aligned input columns, in the order of `inputs`, to the output
    property's values."""

    def __init__(self, fluid: str, output: str, inputs: tuple[str, ...]) -> None:
        self.fluid, self.output, self.inputs = fluid, output, inputs

    def __call__(self, columns: list[np.ndarray]) -> np.ndarray:
        from CoolProp.CoolProp import PropsSI  # a compiled extension: loaded when first used

        a, b = (np.asarray(c, np.float64) for c in columns)
        out = np.full(len(a), np.nan)
        ok = self._in_range(self.inputs[0], a) & self._in_range(self.inputs[1], b)
        if not ok.any():
            return out
        # Sensors repeat values (quantized readings, held set points): each distinct state is solved
        # once (a state costs CoolProp ~35 us).
        pairs = np.stack([a[ok], b[ok]], axis=1)
        unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
        solved = np.asarray(
            PropsSI(self.output, self.inputs[0], unique[:, 0], self.inputs[1], unique[:, 1], self.fluid),
            np.float64,
        ).reshape(-1)
        # The vectorized call marks a state it cannot solve with +inf (no property here is infinite).
        solved[~np.isfinite(solved)] = np.nan
        out[ok] = solved[inverse.reshape(-1)]
        return out

    def _in_range(self, key: str, values: np.ndarray) -> np.ndarray:
        """Inputs inside the equation of state's range: temperature within [Tmin, Tmax] (Tmin the
        triple point or the equation's lower limit), pressure within (0, pmax], a positive density.
        Outside it some flashes extrapolate rather than fail (water at 2 K and 1000 kg/m^3 gave
        3e52 Pa), where REFPROP reports an error: NaN, as for any state without a solution."""
        from CoolProp.CoolProp import PropsSI

        with np.errstate(invalid="ignore"):
            if key == "T":
                low, high = PropsSI("Tmin", self.fluid), PropsSI("Tmax", self.fluid)
                return np.asarray((values >= low) & (values <= high), bool)
            if key == "P":
                return np.asarray((values > 0) & (values <= PropsSI("pmax", self.fluid)), bool)
            if key == "Dmass":
                return np.asarray((values > 0) & np.isfinite(values), bool)
            return np.isfinite(values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FluidProperty) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash((self.fluid, self.output, self.inputs))

    def __repr__(self) -> str:
        return f"FluidProperty({self.fluid!r}, {self.output!r}, {self.inputs!r})"
