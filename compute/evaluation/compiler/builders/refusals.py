"""The variants of Nominal's compute unions Sparkwire does not compute, each refused by name: with
Nominal's own `PollingOnlyComputationType` / `InvalidComputationType` where Nominal does not stream it
either, else with the reason Sparkwire cannot compute it honestly. Registered like the builders,
so a variant is built or refused, never both, never neither (tests/unit/test_compile_registry.py)."""

from __future__ import annotations

from compute.evaluation.compiler.registry import refuses
from compute.evaluation.nominal_variants import INVALID_TYPES, POLLING_ONLY_TYPES

# Nominal's own streaming status, by the variant that carries it, in each union that has the variant.
for _union, _variants in {
    "ComputableNode": ("frequency", "frequencyV2", "spectrogram", "curve", "curveV2"),
    "Series": ("log", "array", "struct"),
    "EnumSeries": ("scalarUdf",),
    "RangeSeries": ("staleRange", "numericStaleRangesV2", "categoricalStaleRangesV2", "literalRanges"),
    "NumericSeries": (
        "cumulativeSum",
        "integral",
        "scalarUdf",
        "largestTriangleThreeBuckets",
        "signalFilter",
        "tagByIntervals",
        "phaseUnwrap",
    ),
}.items():
    for _kind in _variants:
        if _kind == "scalarUdf":  # below, with the reason it is refused when polled too
            continue
        if _kind in POLLING_ONLY_TYPES:
            refuses(_union, _kind, polling_only=POLLING_ONLY_TYPES[_kind])
        else:
            refuses(_union, _kind, invalid=INVALID_TYPES[_kind])

refuses("Series", "video", reason="Sparkwire stores no video")
# Nominal computes scalarUdf only when polled; Sparkwire refuses it either way: its source is Rust to
# be compiled to WASM, arbitrary code that no expression library evaluates
# (docs/decisions/0084-the-last-polled-variants.md).
for _union in ("NumericSeries", "EnumSeries"):
    refuses(
        _union,
        "scalarUdf",
        invalid=INVALID_TYPES["scalarUdf"],
        reason="scalarUdf cannot stream (as in Nominal), and Sparkwire does not compute it when polled "
        "either: its source is Rust code to compile to WebAssembly and run, which Sparkwire does not do",
    )
# An array or struct series streams by polling only, whichever family reads it (computed when polled:
# builders/composite.py).
for _union in ("NumericSeries", "EnumSeries"):
    refuses(
        _union,
        "select1dArrayIndex",
        polling_only="ARRAY",
        reason="select1dArrayIndex reads an array series, which streams by polling only",
    )
    refuses(
        _union,
        "extractFromStruct",
        polling_only="STRUCT",
        reason="extractFromStruct reads a struct series, which streams by polling only",
    )
# A user-defined aggregation, wherever an aggregation operator is read.
refuses("NumericAggregationOperator", "udf", polling_only=POLLING_ONLY_TYPES["udf"])
