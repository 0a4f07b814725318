"""The fluid-property tables (compute/evaluation/nodes/fluids.py) against CoolProp and nominal-api:
every RefpropSubstance and RefpropProperty is mapped or refused, every input pair not refused is
solved for every output, and every refused pair really has no solver (so nothing is refused that
could be computed). Values against the standards are checked over a real server
(tests/server/test_fluid_properties.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from CoolProp.CoolProp import PropsSI

from compute.evaluation.nodes.fluids import (
    NO_VISCOSITY,
    OUTPUT_ONLY,
    PROPERTIES,
    SUBSTANCES,
    UNSOLVABLE_PAIRS,
    UNSUPPORTED_SUBSTANCES,
    fluid_kernel,
)
from compute.evaluation.nominal_variants import ENUMS

STATE_VARIABLES = sorted(set(PROPERTIES) - OUTPUT_ONLY)


def test_every_nominal_value_is_mapped_or_refused() -> None:
    assert set(SUBSTANCES) | set(UNSUPPORTED_SUBSTANCES) == ENUMS["RefpropSubstance"] | {"UNKNOWN"}
    assert set(PROPERTIES) == ENUMS["RefpropProperty"]


@pytest.mark.parametrize("substance", sorted(SUBSTANCES))
def test_every_pair_not_refused_gives_every_output_at_a_supercritical_state(substance: str) -> None:
    fluid = SUBSTANCES[substance]
    t, p = 1.1 * PropsSI("Tcrit", fluid), 0.5 * PropsSI("pcrit", fluid)
    direct = {
        name: PropsSI(key, "T", t, "P", p, fluid)
        for name, (key, _) in PROPERTIES.items()
        if not (name == "VISCOSITY" and substance in NO_VISCOSITY)
    }
    for pair in itertools.combinations(STATE_VARIABLES, 2):
        if frozenset(pair) in UNSOLVABLE_PAIRS:
            continue
        for output in direct:
            if output in pair:
                continue
            kernel = fluid_kernel(substance, output, pair)
            got = kernel([np.array([direct[pair[0]]]), np.array([direct[pair[1]]])])[0]
            assert math.isclose(got, direct[output], rel_tol=1e-6), (substance, pair, output, got)


@pytest.mark.parametrize("pair", sorted(tuple(sorted(p)) for p in UNSOLVABLE_PAIRS))
def test_a_refused_pair_has_no_solver(pair: tuple[str, str]) -> None:
    t, p = 350.0, 2e5
    a, b = (PropsSI(PROPERTIES[name][0], "T", t, "P", p, "Water") for name in pair)
    with pytest.raises(ValueError):
        PropsSI("Dmass", PROPERTIES[pair[0]][0], a, PROPERTIES[pair[1]][0], b, "Water")


def test_viscosity_is_refused_only_where_coolprop_has_no_model() -> None:
    for substance, fluid in SUBSTANCES.items():
        if substance in NO_VISCOSITY:
            with pytest.raises(ValueError):
                PropsSI("V", "T", 300.0, "P", 1e5, fluid)
        else:
            assert PropsSI("V", "T", 1.1 * PropsSI("Tcrit", fluid), "P", 1e5, fluid) > 0, substance


def test_an_unsolvable_or_out_of_range_state_is_nan_and_the_rest_unaffected() -> None:
    kernel = fluid_kernel("WATER", "PRESSURE", ("MASS_DENSITY", "TEMPERATURE"))
    density = np.array([996.556, 1000.0, 996.556, -1.0, np.nan, 996.556])
    temperature = np.array([300.0, 2.0, 300.0, 300.0, 300.0, 5000.0])
    out = kernel([density, temperature])
    assert math.isclose(out[0], 0.992418352e5, rel_tol=1e-8)  # IAPWS-95 Table 7
    assert out[2] == out[0]
    assert np.isnan(out[[1, 3, 4, 5]]).all()
