"""A computation's outputs as bytes, whole or as the difference from the previous outputs, so a copy
kept elsewhere (an edge's mirror, app/tiers/mirror.py) stays identical to the original.

A delta per group: the rows of the new output past the longest run it shares with the old one,
after dropping the old rows the window's start left behind. Applying it gives the new output
exactly (values compared bit for bit), whatever changed: appended points, a late point merged in
the middle, a bucket cut by the window's start. Outputs with no rows to share (a rangesSummary, a
single value) travel whole. msgpack (msgspec) carries it: numpy columns as raw bytes, no pickle.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import numpy as np

from compute.evaluation.computation import GroupKey
from compute.evaluation.results import (
    PROVENANCE,
    AggregatedRanges,
    Cartesian3dBuckets,
    CartesianBuckets,
    CartesianPoints,
    EnumBuckets,
    EnumHistogram,
    EnumPoints,
    EnumValue,
    MultivariateBuckets,
    NumericBuckets,
    NumericHistogram,
    NumericPoints,
    NumericValue,
    Output,
    Ranges,
    RangesSummary,
    RangeValue,
    SinglePoint,
    same_memory,
)
from compute.evaluation.spectra import FrequencyBuckets, FrequencyPlot, FrequencyPlotV2

Outputs = dict[GroupKey, Output]

# By class name: an output's `kind` is its wire variant, which two classes may share ("range").
_KINDS: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        NumericPoints,
        NumericBuckets,
        EnumPoints,
        EnumBuckets,
        Ranges,
        AggregatedRanges,
        RangesSummary,
        NumericValue,
        EnumValue,
        SinglePoint,
        RangeValue,
        NumericHistogram,
        EnumHistogram,
        CartesianPoints,
        CartesianBuckets,
        Cartesian3dBuckets,
        MultivariateBuckets,
        # the spectra a live subscription streams under `sparkwire.streamPolled` (decision 0082)
        FrequencyPlot,
        FrequencyPlotV2,
        FrequencyBuckets,
    )
}
# Outputs made of sorted rows, by the column that orders them.
_ROW_KEY = {"numeric": "ts", "bucketedNumeric": "end", "enum": "ts", "bucketedEnum": "end", "range": "starts"}
_OBJECT_COLUMNS = {"histograms"}  # a column of dicts (enum bucket histograms)

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


def encode(message: dict[str, Any]) -> bytes:
    return _encoder.encode(message)


def decode(data: bytes) -> dict[str, Any]:
    message = _decoder.decode(data)
    if not isinstance(message, dict):
        raise ValueError("not a message")
    return message


# -- outputs -------------------------------------------------------------------------------------
def whole(outputs: Outputs) -> list[Any]:
    """Every group's output, whole (a snapshot)."""
    return [[_group_out(g), _whole(o)] for g, o in outputs.items()]


def diff(old: Outputs, new: Outputs) -> list[Any]:
    """What turns `old` into `new` (`apply(old, diff(old, new))` equals `new`), group order kept."""
    out: list[Any] = []
    for group, output in new.items():
        before = old.get(group)
        out.append([_group_out(group), _whole(output) if before is None else _delta(before, output)])
    return out


def apply(old: Outputs, payload: list[Any]) -> Outputs:
    """The outputs a `whole` or `diff` payload describes, given the outputs it was made against."""
    new: Outputs = {}
    for raw_group, part in payload:
        group = _group_in(raw_group)
        if "rows" in part:
            new[group] = _apply_delta(old[group], part)
        else:
            new[group] = _from_whole(part)
    return new


def _group_out(group: GroupKey) -> list[list[str]]:
    return [[k, v] for k, v in group]


def _group_in(raw: list[list[str]]) -> GroupKey:
    return tuple((k, v) for k, v in raw)


def _whole(output: Output) -> dict[str, Any]:
    return {
        "kind": type(output).__name__,
        "fields": {f.name: _value_out(getattr(output, f.name)) for f in _fields(output)},
    }


def _from_whole(part: dict[str, Any]) -> Output:
    cls = _KINDS[part["kind"]]
    return cls(**{name: _value_in(name, v) for name, v in part["fields"].items()})


def _delta(old: Output, new: Output) -> dict[str, Any]:
    key = _ROW_KEY.get(new.kind)
    if key is None or type(old) is not type(new):
        return _whole(new)
    columns = _row_columns(new)
    scalars = {f.name: _value_out(getattr(new, f.name)) for f in _fields(new) if f.name not in columns}
    new_keys, old_keys = getattr(new, key), getattr(old, key)
    drop = int(np.searchsorted(old_keys, new_keys[0], side="left")) if len(new_keys) else len(old_keys)
    shared = min(len(old_keys) - drop, len(new_keys))
    keep = shared
    for name in columns:
        keep = min(keep, _same_prefix(getattr(old, name)[drop : drop + shared], getattr(new, name)[:shared]))
    rows = {name: _value_out(getattr(new, name)[keep:]) for name in columns}
    return {"kind": type(new).__name__, "drop": drop, "keep": keep, "rows": rows, "scalars": scalars}


def _apply_delta(old: Output, part: dict[str, Any]) -> Output:
    cls = _KINDS[part["kind"]]
    drop, keep = part["drop"], part["keep"]
    values: dict[str, Any] = {name: _value_in(name, v) for name, v in part["scalars"].items()}
    for name, raw in part["rows"].items():
        tail = _value_in(name, raw)
        head = getattr(old, name)[drop : drop + keep]
        values[name] = head + tail if name in _OBJECT_COLUMNS else np.concatenate([head, tail])
    return cls(**values)


def _fields(output: Output) -> tuple[dataclasses.Field[Any], ...]:
    """The fields that say what an output holds (not where its rows came from: `PROVENANCE`)."""
    return tuple(f for f in dataclasses.fields(output) if f.metadata != PROVENANCE)


def _row_columns(output: Output) -> list[str]:
    return [
        f.name
        for f in _fields(output)
        if isinstance(getattr(output, f.name), np.ndarray) or f.name in _OBJECT_COLUMNS
    ]


def _same_prefix(a: Any, b: Any) -> int:
    """How many leading rows two columns share (floats compared bit for bit: NaN equals NaN)."""
    n = min(len(a), len(b))
    if isinstance(a, list):
        return next((i for i in range(n) if a[i] != b[i]), n)
    if same_memory(a[:n], b[:n]):  # a held output's rows, spliced past (nodes/outputs.py): O(1)
        return n
    if a.dtype.kind == "f":
        a, b = (
            a.view(np.int64 if a.itemsize == 8 else np.int32),
            b.view(np.int64 if b.itemsize == 8 else np.int32),
        )
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


# -- values --------------------------------------------------------------------------------------
def _value_out(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {"dtype": value.dtype.str, "data": np.ascontiguousarray(value).tobytes()}
    if isinstance(value, dict) and all(isinstance(v, np.ndarray) for v in value.values()):
        return {"columns": {k: _value_out(v) for k, v in value.items()}}  # NumericBuckets.aggregations
    if isinstance(value, list) and value and isinstance(value[0], dict):  # histograms
        return [list(h.items()) for h in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _value_in(name: str, value: Any) -> Any:
    if isinstance(value, dict) and "columns" in value:
        return {k: _value_in(k, v) for k, v in value["columns"].items()}
    if isinstance(value, dict) and "dtype" in value:
        return np.frombuffer(
            value["data"], dtype=np.dtype(value["dtype"])
        )  # read-only: outputs are never written
    if name in _OBJECT_COLUMNS:
        return [{int(k): int(v) for k, v in pairs} for pairs in value]
    return value
