"""Nominal's unit symbols (UCUM, as Nominal's units service says) read with pint, the units library
that does the conversions: Sparkwire keeps no table of conversion factors of its own.

UCUM and pint spell most units alike (m, km, s, h, Pa, kPa, bar, K, W, V, A, Hz, rad, g, kg, L).
UCUM writes products with '.', exponents as trailing integers (m/s2), and a few atoms in brackets
or its own names ([ft_i], [psi], Cel, deg); those atoms are spelt for pint by `UCUM_ATOMS`, and the
term is rebuilt as a pint expression. A symbol neither understands is refused by name."""

from __future__ import annotations

import re
from functools import cache

import pint

# UCUM atoms whose pint name differs (the UCUM spelling -> pint's).
UCUM_ATOMS: dict[str, str] = {
    "Cel": "degC",
    "[degF]": "degF",
    "[degR]": "degR",
    "[psi]": "psi",
    "[ft_i]": "ft",
    "[in_i]": "inch",
    "[yd_i]": "yard",
    "[mi_i]": "mile",
    "[nmi_i]": "nautical_mile",
    "[kn_i]": "knot",
    "[lb_av]": "lb",
    "[oz_av]": "oz",
    "[lbf_av]": "lbf",
    "[gal_us]": "gallon",
    "[g]": "g0",
    "[ppm]": "ppm",
    "[ppb]": "ppb",
    "deg": "degree",
    "'": "arcminute",
    "''": "arcsecond",
    "%": "percent",
    "Ohm": "ohm",
    "a": "julian_year",
    "mo": "month",
    "wk": "week",
    "1": "dimensionless",
}
_COMPONENT = re.compile(r"^(?P<atom>\[[^\]]+\]|[^\d\-+]+?)(?P<exp>[-+]?\d+)?$")


class UnknownUnit(ValueError):
    """A symbol that is not a unit Sparkwire can read."""


@cache
def _registry() -> pint.UnitRegistry:
    return pint.UnitRegistry()


def _pint_expression(symbol: str) -> str:
    """A UCUM term as a pint expression: 'km/h' -> 'km / h', 'm/s2' -> 'm / s ** 2'."""
    if not symbol or any(c in symbol for c in "(){} "):
        raise UnknownUnit(symbol)
    parts = re.split(r"([./])", symbol)
    if parts[0] == "":  # a leading '/': the reciprocal of what follows
        parts = ["1", *parts[1:]]
    out = []
    for part in parts:
        if part in (".", "/"):
            out.append("*" if part == "." else "/")
            continue
        match = _COMPONENT.match(part)
        if match is None:
            raise UnknownUnit(symbol)
        atom, exp = match["atom"], match["exp"]
        name = UCUM_ATOMS.get(atom, atom)
        out.append(f"({name} ** {int(exp)})" if exp else name)
    return " ".join(out)


@cache
def unit(symbol: str) -> pint.Unit:
    try:
        expression = _pint_expression(symbol)
        return _registry().parse_units(expression)
    except (pint.errors.PintError, AttributeError, ValueError, TypeError, AssertionError) as e:
        raise UnknownUnit(symbol) from e


@cache
def conversion(source: str, target: str) -> tuple[float, float]:
    """(scale, offset) with target = scale * source + offset. Every pint conversion between two
    commensurable units of this registry is affine (the temperatures with an offset); checked at a
    third point all the same. Raises UnknownUnit, or ValueError when the units do not convert."""
    src, dst = unit(source), unit(target)
    quantity = _registry().Quantity
    try:
        at = [float(quantity(x, src).to(dst).magnitude) for x in (0.0, 1.0, 1000.0)]
    except pint.errors.DimensionalityError as e:
        raise ValueError(f"'{source}' cannot be converted to '{target}'") from e
    offset, scale = at[0], at[1] - at[0]
    if abs(scale * 1000.0 + offset - at[2]) > 1e-9 * max(1.0, abs(at[2])):
        raise ValueError(f"'{source}' to '{target}' is not a linear conversion")
    return scale, offset
