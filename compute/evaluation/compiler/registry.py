"""The one table of the compute language: for each of Nominal's unions (`NumericSeries`,
`RangeSeries`, `ComputableNode`, ...), the builder of each variant Sparkwire computes and the
refusal of each it does not, with Nominal's reason.

A builder module registers with decorators as it loads (builders/__init__.py loads them all):

    @builds("NumericSeries", "derivative")
    def derivative(b: Builder, value: Json) -> SeriesNode: ...

    refuses("NumericSeries", "integral", invalid="INTEGRAL")

    @polls("NumericSeries", "integral")  # refused live, computed when polled (ComputeService)
    def integral(b: Builder, value: Json) -> SeriesNode: ...

A variant registered twice, or both built and refused, is an error at import: which builder runs
never depends on the order modules load in. tests/unit/test_compile_registry.py checks that, for
every node union, the built and refused variants are exactly nominal-api's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from compute.evaluation.errors import ComputeError, invalid_computation, not_supported, polling_only

Build = Callable[[Any, Any], Any]  # (the Builder, the variant's JSON value) -> an evaluator node
B = TypeVar("B", bound=Build)


@dataclass(frozen=True)
class Refusal:
    """Why a valid variant is not computed: Nominal's own `PollingOnlyComputationType` or
    `InvalidComputationType` value where one applies, else Sparkwire's reason."""

    polling_only: str | None = None
    invalid: str | None = None
    reason: str | None = None

    def error(self, union: str, kind: str) -> ComputeError:
        if self.polling_only is not None:
            return polling_only(self.reason or f"{union} '{kind}' supports polling only", self.polling_only)
        if self.invalid is not None:
            return invalid_computation(self.reason or f"{union} '{kind}' cannot stream", self.invalid)
        why = f": {self.reason}" if self.reason else ""
        return not_supported(f"{union} '{kind}' is not supported by Sparkwire{why}", kind, union=union)


_builders: dict[tuple[str, str], Build] = {}
_refusals: dict[tuple[str, str], Refusal] = {}
_polled: dict[tuple[str, str], Build] = {}  # built only when polled; refused live
# Of those, the variants a live subscription may stream when it asks (`sparkwire.streamPolled`,
# docs/extensions.md): builders/streamed.py lists them.
_streamed: set[tuple[str, str]] = set()


def _claim(union: str, kind: str, *tables: dict[tuple[str, str], Any]) -> None:
    """A variant is built, or refused (and perhaps built when polled), once."""
    if any((union, kind) in table for table in tables):
        raise RuntimeError(f"{union} '{kind}' is registered twice")


def builds(union: str, *variants: str) -> Callable[[B], B]:
    """Registers the decorated function as the builder of these variants of `union`."""

    def register(build: B) -> B:
        for kind in variants:
            _claim(union, kind, _builders, _refusals, _polled)
            _builders[union, kind] = build
        return build

    return register


def polls(union: str, *variants: str) -> Callable[[B], B]:
    """Registers the decorated function as the builder of these variants of `union` when they are
    polled (Nominal's ComputeService); a live subscription still gets the variant's refusal."""

    def register(build: B) -> B:
        for kind in variants:
            _claim(union, kind, _builders, _polled)
            _polled[union, kind] = build  # its refusal (for live subscriptions) is registered apart
        return build

    return register


def streams(union: str, *variants: str) -> None:
    """Marks these polled variants of `union` as streamed live to a subscription that asks for it
    (`sparkwire.streamPolled`); one that does not ask keeps the variant's refusal."""
    for kind in variants:
        if (union, kind) not in _polled:
            raise RuntimeError(f"{union} '{kind}' is not built when polled: it cannot be streamed as polled")
        _streamed.add((union, kind))


def refuses(
    union: str,
    *variants: str,
    polling_only: str | None = None,
    invalid: str | None = None,
    reason: str | None = None,
) -> None:
    """Registers these variants of `union` as refused: by Nominal's `polling_only` or `invalid`
    type when it has one (`reason`, if given, is then the whole message), else with Sparkwire's
    `reason`."""
    refusal = Refusal(polling_only, invalid, reason)
    for kind in variants:
        _claim(union, kind, _builders, _refusals)
        _refusals[union, kind] = refusal


def builder(union: str, kind: str, polled: bool = False, streamed: bool = False) -> Build:
    """The builder of `kind` (when `polled`, also one registered with `polls`; when `streamed`, a
    live subscription that asked for polled variants, also one marked with `streams`), or its
    refusal raised (a variant of a union nothing registers is refused as not supported)."""
    build = _builders.get((union, kind))
    if build is None and polled:
        build = _polled.get((union, kind))
    elif build is None and streamed and (union, kind) in _streamed:
        return _polled[union, kind]
    if build is not None:
        return build
    raise refusal(union, kind)


def refusal(union: str, kind: str) -> ComputeError:
    """The error a request for a variant that is not built gets."""
    return _refusals.get((union, kind), Refusal()).error(union, kind)


def built(union: str) -> frozenset[str]:
    return frozenset(kind for u, kind in _builders if u == union)


def streamed(union: str) -> frozenset[str]:
    """The polled variants a subscription may stream when it asks (`sparkwire.streamPolled`)."""
    return frozenset(kind for u, kind in _streamed if u == union)


def polled(union: str) -> frozenset[str]:
    """The variants built only when polled."""
    return frozenset(kind for u, kind in _polled if u == union)


def refused(union: str) -> dict[str, Refusal]:
    return {kind: r for (u, kind), r in _refusals.items() if u == union}


def builders() -> dict[tuple[str, str], Build]:
    """Every registered builder (for the tests that check the table)."""
    return dict(_builders)
