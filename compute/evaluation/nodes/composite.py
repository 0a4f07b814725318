"""Nodes that read array and struct channels (decision 0104), each point by point, as nominal-api's
docs define them:

- `select1dArrayIndex` (SelectIndexFrom1dNumericArraySeries / ...EnumArraySeries): "for each
  timestamp, selects a single numeric value from the 1D numeric array at the specified index. If the
  index is out of bounds for an array at a given timestamp, it is omitted" (a negative index is out
  of bounds: it does not count from the end);
- `extractFromStruct` (ExtractNumericFromStructSeries / ExtractEnumFromStructSeries): the value at a
  path (`FieldPath`); "rows where the path is invalid or the value cannot be converted to the
  specified type are filtered out" (numeric), "or resolves to a nested object rather than a scalar"
  (enum).

The points arrive coded (results.StoredTexts): each distinct array or struct is parsed once per
evaluation, however many timestamps hold it. Built when polled; the numeric ones also live under the
opt-in `sparkwire.streamPolled` (builders/streamed.py), where, being point by point, a micro-batch
costs its new points only."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compute.evaluation.nodes.base import PointByPoint, Series, SeriesNode, stored_texts
from compute.evaluation.results import (
    DoubleArrayPoints,
    EnumPoints,
    NumericPoints,
    StoredTexts,
    StringArrayPoints,
    StructPoints,
)
from compute.storage.composite_points import read_array_text, read_struct_text

# A path's steps: an object key (str) or an array index (int)
FieldPath = tuple[str | int, ...]

# NumericDataType: the range a value must fall in once cast (INT64 and UINT64 cast toward zero, as a
# CAST does); the result is a double, as every Sparkwire numeric series is.
INT64_RANGE = (-(2**63), 2**63 - 1)
UINT64_RANGE = (0, 2**64 - 1)


def _each_distinct(points: StoredTexts, value_of: Callable[[str], Any]) -> tuple[np.ndarray, list[Any]]:
    """Per point, the index of its distinct text in the returned list of `value_of(text)` results."""
    codes, inverse = np.unique(points.codes, return_inverse=True)
    return inverse.reshape(-1), [value_of(points.categories[c]) for c in codes.tolist()]


def _numeric(points: StoredTexts, value_of: Callable[[str], float | None]) -> NumericPoints:
    if not len(points):
        return NumericPoints(points.ts, np.empty(0))
    per_point, values = _each_distinct(points, value_of)
    per_text = np.array([np.nan if v is None else v for v in values], np.float64)
    present = np.array([v is not None for v in values], bool)[per_point]
    return NumericPoints(points.ts[present], per_text[per_point][present])


@dataclass
class _Labels:
    """An enum node's own labels, numbered as they first appear (stable across evaluations)."""

    categories: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def enum(self, points: StoredTexts, value_of: Callable[[str], str | None]) -> EnumPoints:
        if not len(points):
            return EnumPoints(points.ts, np.empty(0, np.int32), self.categories)
        per_point, labels = _each_distinct(points, value_of)
        index = self.index
        codes = np.array(
            [-1 if label is None else index.setdefault(label, len(index)) for label in labels], np.int32
        )
        self.categories.extend(list(index)[len(self.categories) :])
        coded = codes[per_point]
        keep = coded >= 0
        return EnumPoints(points.ts[keep], coded[keep], self.categories)


@dataclass
class SelectNumericIndex(PointByPoint):
    """`NumericSeries.select1dArrayIndex` over a double-array channel."""

    input: SeriesNode
    index: int

    def apply(self, x: Series) -> NumericPoints:
        arrays = stored_texts(x, DoubleArrayPoints, "select1dArrayIndex")
        return _numeric(arrays, lambda text: _element(text, self.index))


@dataclass
class SelectEnumIndex(PointByPoint):
    """`EnumSeries.select1dArrayIndex` over a string-array channel."""

    POLLED_ONLY = True  # built only by a poll: its labels are numbered as it reads points

    input: SeriesNode
    index: int
    labels: _Labels = field(default_factory=_Labels, compare=False, repr=False)

    def apply(self, x: Series) -> EnumPoints:
        arrays = stored_texts(x, StringArrayPoints, "select1dArrayIndex")
        return self.labels.enum(arrays, lambda text: _element(text, self.index))


def _element(text: str, index: int) -> Any:
    values = read_array_text(text)
    return values[index] if 0 <= index < len(values) else None


@dataclass
class ExtractNumber(PointByPoint):
    """`NumericSeries.extractFromStruct`: the number at `path`, cast to `data_type`'s range."""

    input: SeriesNode
    path: FieldPath
    data_type: str  # FLOAT64, INT64 or UINT64

    def apply(self, x: Series) -> NumericPoints:
        structs = stored_texts(x, StructPoints, "extractFromStruct")
        return _numeric(
            structs, lambda text: cast(resolve(read_struct_text(text), self.path), self.data_type)
        )


@dataclass
class ExtractLabel(PointByPoint):
    """`EnumSeries.extractFromStruct`: the scalar at `path` as a label: a string as it is, a number or
    a boolean as its JSON text; null, an object or an array is no label (the row is filtered out)."""

    POLLED_ONLY = True  # built only by a poll: its labels are numbered as it reads points

    input: SeriesNode
    path: FieldPath
    labels: _Labels = field(default_factory=_Labels, compare=False, repr=False)

    def apply(self, x: Series) -> EnumPoints:
        structs = stored_texts(x, StructPoints, "extractFromStruct")
        return self.labels.enum(structs, lambda text: label(resolve(read_struct_text(text), self.path)))


_MISSING = object()


def resolve(value: Any, path: FieldPath) -> Any:
    """The value at `path`, or _MISSING when a step does not exist (a key absent, an index out of
    bounds, a key into a non-object, an index into a non-array)."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list) or not 0 <= step < len(value):
                return _MISSING
        elif not isinstance(value, dict) or step not in value:
            return _MISSING
        value = value[step]
    return value


def cast(value: Any, data_type: str) -> float | None:
    """A JSON number cast to `data_type` (as a double), or None when it cannot be: not a number (a
    string, a boolean, null, an object, an array, a missing path), or outside the type's range."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if data_type == "FLOAT64":
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    whole = int(value)  # toward zero
    low, high = INT64_RANGE if data_type == "INT64" else UINT64_RANGE
    return float(whole) if low <= whole <= high else None


def label(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None
