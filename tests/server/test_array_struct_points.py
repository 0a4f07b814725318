"""Array and struct points (decision 0104) on a real server: written through `POST /storage/writer/v1`
as nominal-api's WriteBatchesRequestExternal carries them, listed with their data types, and read
back through nominal-api's generated ComputeService client with `select1dArrayIndex` and
`extractFromStruct`, each answer checked against a reference written from nominal-api's docstrings
(an out-of-bounds index omits the point; a path that does not resolve, or a value that cannot be
cast, filters the row out). A live subscription to them is still refused as Nominal refuses it
(tests/server/test_compute_errors.py)."""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

import httpx
import pytest
from conjure_python_client import ConjureHTTPError

from tests import node_json as n
from tests.conftest import ServerProcess
from tests.server.test_compute_service import TOKEN, ns, request, secured, service
from tests.wire import NANOS, composite_batch, data_types, ts

__all__ = ["secured"]  # the module-scoped server with a tokens file, shared with test_compute_service

MS = 1_000_000
Json = dict[str, Any]

DOUBLE_ARRAYS = [[1.5, 2.5, 3.5], [4.0], [], [7.0, -8.25, 9.0, 10.0], [1.5, 2.5, 3.5]]
STRING_ARRAYS = [["a", "b"], ["c"], ["d", "e", "f"], [], ["a", "b"]]
STRUCTS = [
    {"engine": {"temp": 81.5, "mode": "run"}, "items": [{"v": 3}, {"v": 4.9}], "0": 11},
    {"engine": {"temp": 82}, "items": [{"v": -2.7}], "0": 12},
    {"engine": {"temp": "hot", "mode": True}, "items": []},
    {"engine": {"mode": None}, "items": [{"v": 2**70}, {"v": -1}]},
    {"engine": {"temp": 83.25, "mode": {"nested": 1}}, "items": [{"v": 1e300}, {"v": 7}]},
]


def _batch(channel: str, kind: str, values: list[Any], t0: int) -> Json:
    return composite_batch(channel, kind, [(t0 + i * MS, v) for i, v in enumerate(values)])


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


async def _write(base_url: str, body: Json) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": TOKEN}, timeout=60) as c:
        # json.dumps escapes a lone surrogate as \\udfff (ASCII), as a client in another language would
        content = json.dumps(body).encode()
        return await c.post(
            "/storage/writer/v1", content=content, headers={"Content-Type": "application/json"}
        )


@pytest.fixture(scope="module")
async def written(secured: ServerProcess) -> Json:
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 600) * NANOS
    body = {
        "dataSourceRid": rid,
        "batches": [
            _batch("spectrum", "double", DOUBLE_ARRAYS, t0),
            _batch("labels", "string", STRING_ARRAYS, t0),
            _batch("state", "struct", STRUCTS, t0),
            {
                "channel": "plain",
                "points": {"type": "double", "double": [{"timestamp": ts(t0), "value": 1.0}]},
            },
        ],
    }
    r = await _write(secured.base_url, body)
    assert r.status_code == 200, r.text
    return {"rid": rid, "t0": t0}


def _compute(server: ServerProcess, node: Json, t0: int) -> Any:
    return service(server.base_url).compute(TOKEN, request(n.series(node), t0, t0 + NANOS))


def _numeric(answer: Any) -> list[tuple[int, float]]:
    assert answer.numeric is not None, answer
    return [(ns(t), v) for t, v in zip(answer.numeric.timestamps, answer.numeric.values, strict=True)]


def _enum(answer: Any) -> list[tuple[int, str]]:
    assert answer.enum is not None, answer
    labels = answer.enum.categories
    return [(ns(t), labels[v]) for t, v in zip(answer.enum.timestamps, answer.enum.values, strict=True)]


def test_the_writer_lists_their_data_types(secured: ServerProcess, written: Json) -> None:
    types = data_types(secured.base_url, written["rid"], {"Authorization": TOKEN})
    assert types == {
        "spectrum": "DOUBLE_ARRAY",
        "labels": "STRING_ARRAY",
        "state": "STRUCT",
        "plain": "DOUBLE",
    }


@pytest.mark.parametrize("index", [0, 1, 3, 4, -1])
def test_select_an_index_of_double_arrays(secured: ServerProcess, written: Json, index: int) -> None:
    rid, t0 = written["rid"], written["t0"]
    node = n.numeric_series(
        n.union("select1dArrayIndex", {"input": n.channel(rid, "spectrum"), "index": n.literal(index)})
    )
    want = [(t0 + i * MS, a[index]) for i, a in enumerate(DOUBLE_ARRAYS) if 0 <= index < len(a)]
    assert _numeric(_compute(secured, node, t0)) == want


def test_select_an_index_of_string_arrays(secured: ServerProcess, written: Json) -> None:
    rid, t0 = written["rid"], written["t0"]
    for index in (0, 2):
        node = n.enum_series(
            n.union("select1dArrayIndex", {"input": n.channel(rid, "labels"), "index": n.literal(index)})
        )
        want = [(t0 + i * MS, a[index]) for i, a in enumerate(STRING_ARRAYS) if index < len(a)]
        assert _enum(_compute(secured, node, t0)) == want


def _at(value: Any, path: list[str | int]) -> Any:
    """The reference: nominal-api's FieldPath followed step by step; None when a step is missing."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                return None
        elif not isinstance(value, dict) or step not in value:
            return None
        value = value[step]
    return value


def _extract(rid: str, segments: list[str], data_type: str | None = None) -> Json:
    body: Json = {"input": n.channel(rid, "state"), "fieldPath": [n.literal(s) for s in segments]}
    if data_type is not None:
        body["dataType"] = data_type
    return body


@pytest.mark.parametrize(
    ("segments", "path"),
    [
        (["engine", "temp"], ["engine", "temp"]),
        (["engine.temp"], ["engine", "temp"]),  # the segments are joined with dots
        (["items[1].v"], ["items", 1, "v"]),
        (["0"], ["0"]),  # a bare number is an object key
    ],
)
def test_extract_a_number_from_structs(
    secured: ServerProcess, written: Json, segments: list[str], path: list[str | int]
) -> None:
    rid, t0 = written["rid"], written["t0"]
    got = _numeric(
        _compute(secured, n.numeric_series(n.union("extractFromStruct", _extract(rid, segments))), t0)
    )
    want = []
    for i, s in enumerate(STRUCTS):
        v = _at(s, path)
        if isinstance(v, int | float) and not isinstance(v, bool):  # a string, a bool, null: filtered out
            want.append((t0 + i * MS, float(v)))
    assert got == want and want


def test_extract_cast_to_int64_and_uint64(secured: ServerProcess, written: Json) -> None:
    rid, t0 = written["rid"], written["t0"]
    for data_type, low, high in (("INT64", -(2**63), 2**63 - 1), ("UINT64", 0, 2**64 - 1)):
        node = n.numeric_series(n.union("extractFromStruct", _extract(rid, ["items[0].v"], data_type)))
        want = []
        for i, s in enumerate(STRUCTS):
            v = _at(s, ["items", 0, "v"])
            if v is not None and low <= math.trunc(v) <= high:
                want.append((t0 + i * MS, float(math.trunc(v))))
        assert _numeric(_compute(secured, node, t0)) == want
    # 3 -> 3, -2.7 -> -2 (toward zero), 2**70 out of range, 1e300 out of range
    assert [v for _, v in want] == [3.0]


def test_extract_a_label_from_structs(secured: ServerProcess, written: Json) -> None:
    rid, t0 = written["rid"], written["t0"]
    node = n.enum_series(n.union("extractFromStruct", _extract(rid, ["engine", "mode"])))
    # a string as it is, a boolean as its JSON text; null and an object are filtered out
    assert _enum(_compute(secured, node, t0)) == [(t0, "run"), (t0 + 2 * MS, "true")]


def test_refused_by_name(secured: ServerProcess, written: Json) -> None:
    rid, t0 = written["rid"], written["t0"]
    cases = [
        # an array node over a channel of doubles
        (
            n.numeric_series(
                n.union("select1dArrayIndex", {"input": n.channel(rid, "plain"), "index": n.literal(0)})
            ),
            "needs a double array series, got a double channel",
        ),
        # a numeric index of a string array
        (
            n.numeric_series(
                n.union("select1dArrayIndex", {"input": n.channel(rid, "labels"), "index": n.literal(0)})
            ),
            "needs a double array series, got a string array channel",
        ),
        (n.numeric_series(n.union("extractFromStruct", _extract(rid, ["a..b"]))), "an empty name"),
        # a channel's array read as a series itself: no arrow array plot
        (n.union("array", n.union("numeric1d", n.channel(rid, "spectrum"))), "no arrow array plot"),
    ]
    for node, says in cases:
        with pytest.raises(ConjureHTTPError) as refused:
            _compute(secured, node, t0)
        assert refused.value.error_name == "Compute:InvalidComputation", refused.value
        response = refused.value.response
        assert response is not None and says in response.json()["message"], response.text


async def test_bad_points_are_refused_whole(secured: ServerProcess, written: Json) -> None:
    rid, t0 = written["rid"], written["t0"]
    fresh = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    good = _batch("fine", "double", [[1.0]], t0)
    for bad, says in (
        (_batch("s", "struct", [[1, 2]], t0), "must be a JSON object"),
        (_batch("s", "struct", [{"a": "\ud800"}], t0), "lone UTF-16 surrogate"),
        (_batch("s", "struct", [_nested(5_000)], t0), "nested too deeply"),
        # in the body itself, orjson refuses it before any point is read
        (_batch("a", "string", [["ok", "\udfff"]], t0), "surrogate in string"),
        (
            {
                "channel": "s",
                "points": {"type": "struct", "struct": [{"timestamp": ts(t0), "jsonString": "{"}]},
            },
            "is not JSON",
        ),
        (
            {
                "channel": "a",
                "points": {
                    "type": "array",
                    "array": {"type": "double", "double": [{"timestamp": ts(t0), "value": [1.0, "x"]}]},
                },
            },
            "batches.1.points",
        ),
    ):
        r = await _write(secured.base_url, {"dataSourceRid": fresh, "batches": [good, bad]})
        assert r.status_code == 400, r.text
        assert says in r.json()["message"], r.text
    # nothing of those requests was stored
    assert data_types(secured.base_url, fresh, {"Authorization": TOKEN}) == {}
    # a series' kind is fixed by its first write: arrays to the channel of doubles are refused
    r = await _write(
        secured.base_url, {"dataSourceRid": rid, "batches": [_batch("plain", "double", [[1.0]], t0)]}
    )
    assert r.status_code == 400 and "double-array points" in r.text, r.text
