"""The array and struct nodes' rules (compute/evaluation/nodes/composite.py, builders/composite.py),
each case written from nominal-api's docstrings: FieldPath ("dots to traverse objects, 0-based
brackets to index into arrays, a bare numeric name like `0` refers to an object key"), the numeric
cast, the enum label, and that each distinct array is parsed once however many points hold it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.builders.composite import field_path
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes import composite
from compute.evaluation.nodes.composite import SelectEnumIndex, SelectNumericIndex, cast, label, resolve
from compute.evaluation.results import DoubleArrayPoints, EnumPoints, NumericPoints, StringArrayPoints
from compute.storage.composite_points import double_array_text, string_array_text, struct_text


def _path(*segments: str) -> Any:
    return field_path(Builder.__new__(Builder), [{"type": "literal", "literal": s} for s in segments], "x")


@pytest.mark.parametrize(
    ("segments", "steps"),
    [
        (("a.b.c",), ("a", "b", "c")),
        (("a", "b", "c"), ("a", "b", "c")),
        (("items[0].value",), ("items", 0, "value")),
        (("items", "[0]", "value"), ("items", 0, "value")),
        (("m[1][2]",), ("m", 1, 2)),
        (("0",), ("0",)),  # a bare number is an object key
        (("[3]",), (3,)),
    ],
)
def test_a_field_path_parses_as_nominal_documents_it(
    segments: tuple[str, ...], steps: tuple[Any, ...]
) -> None:
    assert _path(*segments) == steps


@pytest.mark.parametrize("bad", ["a..b", ".a", "a.", "a[x]", "a[0]b", "a]", ""])
def test_a_path_that_does_not_parse_is_refused_by_name(bad: str) -> None:
    with pytest.raises(ComputeError) as refused:
        _path(bad)
    assert refused.value.name == "InvalidComputation" and "fieldPath" in str(refused.value)


def test_resolve_cast_and_label() -> None:
    value = {"a": {"b": [10, {"c": 2.5}]}, "0": "zero", "t": True, "n": None}
    assert resolve(value, ("a", "b", 1, "c")) == 2.5
    assert resolve(value, ("0",)) == "zero"
    missing = [("a", "x"), ("a", "b", 2), ("a", 0), ("0", 0), ("a", "b", "c")]
    assert all(resolve(value, p) is composite._MISSING for p in missing)
    assert [cast(v, "FLOAT64") for v in (3, -2.5, "3", True, None, [1])] == [
        3.0,
        -2.5,
        None,
        None,
        None,
        None,
    ]
    assert [cast(v, "INT64") for v in (2.9, -2.9, 2**63, -(2**63))] == [2.0, -2.0, None, float(-(2**63))]
    assert [cast(v, "UINT64") for v in (-0.5, -1, 2**64 - 1, 2**64)] == [0.0, None, float(2**64 - 1), None]
    assert [label(v) for v in ("run", 3, 2.5, True, None, {"x": 1}, [1])] == [
        "run",
        "3",
        "2.5",
        "true",
        None,
        None,
        None,
    ]


def test_each_distinct_array_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [double_array_text([1.0, 2.0]), double_array_text([3.0]), double_array_text([float("nan"), 5.0])]
    codes = np.array([0, 1, 0, 2, 0, 1], np.int32)
    ts = np.arange(6, dtype=np.int64)
    parsed: list[str] = []
    real = composite.read_array_text
    monkeypatch.setattr(composite, "read_array_text", lambda t: parsed.append(t) or real(t))
    out = SelectNumericIndex(None, 1).apply(DoubleArrayPoints(ts, codes, texts))  # type: ignore[arg-type]
    assert isinstance(out, NumericPoints)
    assert out.ts.tolist() == [0, 2, 3, 4] and out.values.tolist() == [2.0, 2.0, 5.0, 2.0]
    assert sorted(parsed) == sorted(texts)
    words = [string_array_text(["a", "b"]), string_array_text(["c"])]
    node = SelectEnumIndex(None, 0)  # type: ignore[arg-type]
    first = node.apply(StringArrayPoints(ts[:2], np.array([0, 1], np.int32), words))
    again = node.apply(StringArrayPoints(ts[:2], np.array([1, 0], np.int32), words))
    assert isinstance(first, EnumPoints) and [first.categories[c] for c in first.codes] == ["a", "c"]
    assert [again.categories[c] for c in again.codes] == ["c", "a"] and first.categories == ["a", "c"]


def test_a_struct_point_must_be_a_json_object() -> None:
    assert struct_text('{ "b": 1, "a": [1, 2] }') == '{"b":1,"a":[1,2]}'  # compact, keys in their order
    for bad, says in (("[1]", "a JSON list"), ("{", "not JSON"), ('{"a": NaN}', "NaN")):
        with pytest.raises(ValueError, match=says):
            struct_text(bad)
