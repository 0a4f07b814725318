"""What `POST /storage/writer/v1` (nominal-api's WriteBatchesRequestExternal) does not store, it
refuses by name, 400, nothing of the request stored: a batch's `unit` (the columnar protobuf writer
refuses it alike; Sparkwire's series carry no unit). An unset unit, which nominal-api's encoder
writes as null, is no unit. Array and struct points, refused until decision 0104, are stored, each
as one JSON text. Bodies built with nominal-api's own classes and encoder, small ones decoded on
the event loop and large ones in a decode process."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest
from conjure_python_client import ConjureEncoder
from nominal_api import api
from nominal_api import storage_writer_api as w

from tests.conftest import ServerProcess
from tests.log_file import stored_rows
from tests.wire import NANOS

pytestmark = pytest.mark.server

WRITER = "/storage/writer/v1"


def stamp(t: int) -> api.Timestamp:
    return api.Timestamp(seconds=t // NANOS, nanos=t % NANOS)


def doubles(t0: int, count: int) -> w.PointsExternal:
    return w.PointsExternal(
        double=[w.DoublePoint(timestamp=stamp(t0 + i), value=float(i)) for i in range(count)]
    )


def body(rid: str, *batches: w.RecordsBatchExternal) -> bytes:
    request = w.WriteBatchesRequestExternal(batches=list(batches), data_source_rid=rid)
    return json.dumps(ConjureEncoder().default(request)).encode()


def post(server: ServerProcess, content: bytes) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}{WRITER}",
        content=content,
        headers={"Content-Type": "application/json"},
        timeout=60,
    )


def refused_batch(name: str, t0: int) -> w.RecordsBatchExternal:
    assert name == "a unit"
    return w.RecordsBatchExternal(channel="speed", points=doubles(t0, 2), tags={}, unit="m/s")


REFUSED: dict[str, str] = {
    "a unit": "batches.1 (channel 'speed').unit: units are not supported",
}


@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("name", list(REFUSED))
def test_what_the_row_writer_does_not_store_it_refuses_by_name(
    server: ServerProcess, name: str, size: str
) -> None:
    rid = f"ri.sparkwire.test.refused.{uuid.uuid4().hex}"
    t0 = time.time_ns() - 60 * NANOS
    count = 5_000 if size == "large" else 3  # 5,000 points: past the 64 KiB a decode process takes
    good = w.RecordsBatchExternal(channel="fine", points=doubles(t0, count), tags={})
    content = body(rid, good, refused_batch(name, t0))
    assert (size == "large") == (len(content) >= 64 * 1024)
    r = post(server, content)
    assert r.status_code == 400, r.text
    error: dict[str, Any] = r.json()
    assert error["errorName"] == "Default:InvalidArgument", error
    assert REFUSED[name] in error["message"] and "nothing of the request was stored" in error["message"]
    assert stored_rows(server.data_dir, rid) == []


def test_an_unset_unit_sent_as_null_is_no_unit(server: ServerProcess) -> None:
    rid = f"ri.sparkwire.test.refused.{uuid.uuid4().hex}"
    t0 = time.time_ns() - 60 * NANOS
    content = body(rid, w.RecordsBatchExternal(channel="fine", points=doubles(t0, 2), tags={}))
    assert b'"unit": null' in content
    assert post(server, content).status_code == 200
    assert [(c, t, v) for c, _, t, v, _ in stored_rows(server.data_dir, rid)] == [
        ("fine", t0, 0.0),
        ("fine", t0 + 1, 1.0),
    ]


@pytest.mark.parametrize("size", ["small", "large"])
def test_array_and_struct_points_are_stored_as_json_texts(server: ServerProcess, size: str) -> None:
    rid = f"ri.sparkwire.test.composite.{uuid.uuid4().hex}"
    t0 = time.time_ns() - 60 * NANOS
    count = 5_000 if size == "large" else 3
    doubles_1d = w.ArrayPoints(
        double=[w.DoubleArrayPoint(timestamp=stamp(t0), value=[1.0, float("nan"), -2.5])]
    )
    strings_1d = w.ArrayPoints(string=[w.StringArrayPoint(timestamp=stamp(t0 + 1), value=["a", "é"])])
    structs = [w.StructPoint(json_string='{"a": {"b": [1, 2.5]}, "c": "x"}', timestamp=stamp(t0 + 2))]
    content = body(
        rid,
        w.RecordsBatchExternal(channel="fine", points=doubles(t0, count), tags={}),
        w.RecordsBatchExternal(channel="vector", points=w.PointsExternal(array=doubles_1d), tags={}),
        w.RecordsBatchExternal(channel="names", points=w.PointsExternal(array=strings_1d), tags={}),
        w.RecordsBatchExternal(channel="record", points=w.PointsExternal(struct=structs), tags={}),
    )
    assert (size == "large") == (len(content) >= 64 * 1024)
    r = post(server, content)
    assert r.status_code == 200, r.text
    texts = {c: (t, s) for c, _, t, _, s in stored_rows(server.data_dir, rid) if c != "fine"}
    assert texts == {
        "vector": (t0, "[1.0,NaN,-2.5]"),
        "names": (t0 + 1, '["a","é"]'),
        "record": (t0 + 2, '{"a":{"b":[1,2.5]},"c":"x"}'),
    }
