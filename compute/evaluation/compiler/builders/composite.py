"""Builders of the nodes that read array and struct channels (nodes/composite.py; decision 0104):
`select1dArrayIndex` and `extractFromStruct`, numeric and enum. Nominal computes them only when
polled (`ARRAY`, `STRUCT`), so they register with `polls` and a live subscription still gets the
refusal builders/refusals.py registers, unless it asks for `sparkwire.streamPolled`
(builders/streamed.py marks them).

Their inputs (`Numeric1dArraySeries`, `Enum1dArraySeries`, `StructSeries`) are read from a channel
(`channel`, or `raw`: a variable bound to one); their other variants (derived, select, time shift,
tag filters, a struct's combine and nested extraction) are refused by name. `Series.array` and
`Series.struct` themselves (nominal-api's arrow array plots) are refused by name when polled:
Sparkwire answers no array or struct plot."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from compute.evaluation import nodes
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.registry import polls
from compute.evaluation.errors import ComputeError, not_supported
from compute.evaluation.nodes.composite import (
    ExtractLabel,
    ExtractNumber,
    FieldPath,
    SelectEnumIndex,
    SelectNumericIndex,
)

Json = Any

# One step of a joined field path: `.`, a key, or `[n]`
_STEP = re.compile(r"\.|\[(\d+)\]|([^.\[\]]+)")


def _channel(b: Builder, union: str, value: Json, expect: str) -> nodes.SeriesNode:
    kind, inner = b.variant(union, value)
    with b.budget:
        if kind == "channel":
            return b.channel_series(inner, expect)
        if kind == "raw":
            return b.channel_input(inner, expect)
    raise not_supported(f"{union} '{kind}' is not computed by Sparkwire (a channel is)", kind, union=union)


def field_path(b: Builder, segments: Json, what: str) -> FieldPath:
    """nominal-api's FieldPath: "path segments that are joined to locate a nested field. Use dots to
    traverse objects (e.g. `a.b.c`) and 0-based brackets to index into arrays (e.g. `items[0].value`).
    A bare numeric name like `0` refers to an object key named "0"". The segments are joined with
    dots; a path that does not parse is refused by name."""
    if not isinstance(segments, list) or not segments:
        raise _bad_path(what, "fieldPath needs at least one segment")
    joined = ".".join(b.string_constant(s) for s in segments)
    steps: list[str | int] = []
    at, after_dot = 0, True
    while at < len(joined):
        m = _STEP.match(joined, at)
        if m is None:
            raise _bad_path(what, f"fieldPath {joined!r}: unexpected {joined[at]!r} at {at}")
        if m.group(0) == ".":
            if after_dot:  # at the start, or after another dot
                raise _bad_path(what, f"fieldPath {joined!r}: an empty name at {at}")
            after_dot = True
        elif m.group(1) is not None:
            steps.append(int(m.group(1)))
            after_dot = False
        else:
            if not after_dot:  # a name straight after an index: `a[0]b`
                raise _bad_path(what, f"fieldPath {joined!r}: a name after an index needs a dot, at {at}")
            steps.append(m.group(2))
            after_dot = False
        at = m.end()
    if after_dot or not steps:
        raise _bad_path(what, f"fieldPath {joined!r} ends without a name")
    return tuple(steps)


def _bad_path(what: str, message: str) -> ComputeError:
    return ComputeError("InvalidComputation", f"{what}: {message}", {"invalidTypes": "", "variant": what})


@polls("NumericSeries", "select1dArrayIndex")
def select_numeric_index(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "SelectIndexFrom1dNumericArraySeries")
    arrays = _channel(b, "Numeric1dArraySeries", b.get(o, "input", "select1dArrayIndex"), "double-array")
    return SelectNumericIndex(arrays, b.integer_constant(b.get(o, "index", "select1dArrayIndex")))


@polls("EnumSeries", "select1dArrayIndex")
def select_enum_index(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "SelectIndexFrom1dEnumArraySeries")
    arrays = _channel(b, "Enum1dArraySeries", b.get(o, "input", "select1dArrayIndex"), "string-array")
    return SelectEnumIndex(arrays, b.integer_constant(b.get(o, "index", "select1dArrayIndex")))


@polls("NumericSeries", "extractFromStruct")
def extract_number(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "ExtractNumericFromStructSeries")
    structs = _channel(b, "StructSeries", b.get(o, "input", "extractFromStruct"), "struct")
    path = field_path(b, b.get(o, "fieldPath", "extractFromStruct"), "extractFromStruct")
    data_type = "FLOAT64"  # "defaults to FLOAT64"
    if o.get("dataType") is not None:
        data_type = b.enum_value("NumericDataType", o["dataType"], "extractFromStruct.dataType")
    return ExtractNumber(structs, path, data_type)


@polls("EnumSeries", "extractFromStruct")
def extract_label(b: Builder, v: Json) -> nodes.SeriesNode:
    o = b.obj(v, "ExtractEnumFromStructSeries")
    structs = _channel(b, "StructSeries", b.get(o, "input", "extractFromStruct"), "struct")
    path = field_path(b, b.get(o, "fieldPath", "extractFromStruct"), "extractFromStruct")
    return ExtractLabel(structs, path)


def _no_plot(kind: str) -> Callable[[Builder, Json], nodes.SeriesNode]:
    def refuse(b: Builder, v: Json) -> nodes.SeriesNode:
        raise not_supported(
            f"a {kind} series is not answered by Sparkwire (it has no arrow array plot): read a value "
            "out of it with select1dArrayIndex or extractFromStruct",
            kind,
            union="Series",
        )

    return refuse


polls("Series", "array")(_no_plot("array"))
polls("Series", "struct")(_no_plot("struct"))
