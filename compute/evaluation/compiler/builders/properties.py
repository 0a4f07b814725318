"""Builders of the property selectors, `selectNumericProperty` (NumericSeries) and
`selectCategoricalProperty` (EnumSeries): a typed property of the assets or runs a dataset resolves
to, as a value with the semantics of `constant` (no timestamps of its own; its consumer broadcasts
it). Registered into registry.py by their Conjure variant names when this module loads.

nominal-api: "Asset branches read properties directly from their asset. Run branches read properties
directly from their run ... Direct saved-dataset branches are unsupported." The value is read when
the plan is compiled; the catalog read is recorded (`CatalogReads`), so an edit of the property
re-resolves the live subscriptions over it (docs/decisions/0056, 0065)."""

from __future__ import annotations

from typing import Any

from compute.evaluation.compiler import datasets
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.registry import builds
from compute.evaluation.errors import MalformedNode, not_supported
from compute.evaluation.nodes import Constant, EnumConstant, SeriesNode
from compute.storage.assets import TypedValue

Json = Any
B = Builder


def _values(b: B, o: dict[str, Json], what: str) -> tuple[str, list[tuple[str, TypedValue | None, str]]]:
    """The property's name and, per branch, (the asset's or run's rid, its typed value or None,
    its untyped string value or "")."""
    name = b.get(o, "propertyName", what)
    if not isinstance(name, str) or not name:
        raise MalformedNode(f"{what}.propertyName must be a non-empty string")
    if o.get("dataset") is not None:
        view = datasets.Resolver(b, b.dataset_references).resolve(o["dataset"])
    elif b.bases:  # inside a withSeries definition: its wrapping input
        view = b.bases[-1]
    else:
        raise not_supported(f"{what} needs a dataset outside a withSeries dataset", what, field="dataset")
    if not view.branches:
        raise not_supported(f"{what}: its dataset resolves to no asset or run", what, field="dataset")
    out: list[tuple[str, TypedValue | None, str]] = []
    for branch in view.branches:
        if branch.resource is None:
            raise not_supported(
                f"{what}: the dataset has a saved-dataset branch (data source '{branch.data_source_rid}'), "
                "which has no properties; select from an asset or a run",
                what,
                field="dataset",
            )
        typed = dict(branch.resource.typed)
        out.append((branch.resource.rid, typed.get(name), dict(branch.resource.properties).get(name, "")))
    return name, out


def _one(what: str, name: str, found: dict[str, TypedValue]) -> TypedValue:
    """The value every branch agrees on: the branches of one selection are one group (as a
    `selectNumeric` without groupByTags merges its branches), and a constant has one value."""
    if len(set(found.values())) > 1:
        listed = ", ".join(f"{rid}={v!r}" for rid, v in sorted(found.items()))
        raise not_supported(
            f"{what}: property '{name}' differs between the assets or runs the dataset resolves to "
            f"({listed}); one selection is one value: narrow the dataset to one asset or run",
            what,
            field="dataset",
            propertyName=name,
        )
    return next(iter(found.values()))


def _missing(what: str, name: str, rid: str, reason: str) -> Exception:
    return not_supported(f"{what}: {rid} {reason}", what, field="propertyName", propertyName=name, rid=rid)


@builds("NumericSeries", "selectNumericProperty")
def _numeric(b: B, v: Json) -> SeriesNode:
    what = "selectNumericProperty"
    name, branches = _values(b, b.obj(v, what), what)
    found: dict[str, TypedValue] = {}
    for rid, typed, _ in branches:
        if typed is None:
            raise _missing(what, name, rid, f"has no typed property '{name}'")
        if isinstance(typed, str):
            raise _missing(
                what, name, rid, f"property '{name}' is a stringValue ({typed!r}), not a numericValue"
            )
        found[rid] = typed
    value = _one(what, name, found)
    assert isinstance(value, float)
    return Constant(value)


@builds("EnumSeries", "selectCategoricalProperty")
def _categorical(b: B, v: Json) -> SeriesNode:
    """A typed stringValue; else the asset's or run's untyped string property of that name (Nominal's
    older string properties, which a typed map does not repeat)."""
    what = "selectCategoricalProperty"
    name, branches = _values(b, b.obj(v, what), what)
    found: dict[str, TypedValue] = {}
    for rid, typed, plain in branches:
        if isinstance(typed, float):
            raise _missing(
                what, name, rid, f"property '{name}' is a numericValue ({typed!r}), not a stringValue"
            )
        label = typed if typed is not None else plain or None
        if label is None:
            raise _missing(what, name, rid, f"has no property '{name}'")
        found[rid] = label
    value = _one(what, name, found)
    assert isinstance(value, str)
    return EnumConstant(value)
