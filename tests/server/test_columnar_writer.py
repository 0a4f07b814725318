"""The columnar writers (app/ingest/columnar.py) against a real server: nominal-api's own
WriteColumnBatchesRequest, encoded by conjure_python_client's ConjureEncoder, and its protobuf twin
(nominal-api-protos' direct_channel_writer.v2.WriteBatchesRequest). What they wrote must reach a live
subscriber exactly, or, for arrays and structs, be stored as their JSON texts under their data types;
a refused request stores nothing; the auth of the row writers applies."""

from __future__ import annotations

import gzip
import json
import math
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import zstandard
from conjure_python_client import ConjureEncoder
from nominal.protos.direct_channel_writer.v2 import direct_nominal_channel_writer_pb2 as columnar_pb
from nominal.protos.direct_channel_writer_common.v2 import direct_channel_writer_common_pb2 as common_pb
from nominal.protos.types.time.time_pb2 import Timestamp
from nominal_api import api
from nominal_api import storage_writer_api as w

from tests.client_view import ResultView
from tests.conftest import ServerProcess, start_server
from tests.hostile import make_jwt
from tests.log_file import stored_rows
from tests.wire import (
    NANOS,
    Client,
    channel_variable,
    data_types,
    new_id,
    seen_by_subscriber,
    series_node,
    subscription,
)

COLUMNAR = "/storage/writer/v1/columnar"
NOMINAL_COLUMNAR = "/storage/writer/v1/nominal-columnar"
JSON = {"Content-Type": "application/json"}
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def new_rid() -> str:
    return f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"


def batch(channel: str, points: list[tuple[int, Any]], kind: str, tags: dict[str, str] | None = None) -> Any:
    stamps = [api.Timestamp(seconds=t // NANOS, nanos=t % NANOS) for t, _ in points]
    column: dict[str, Any] = {kind: [v for _, v in points]}
    values = w.ColumnValues(**column)
    return w.ColumnBatch(channel=channel, tags=tags or {}, timestamps=stamps, values=values)


def conjure_body(rid: str, *batches: Any) -> bytes:
    request = w.WriteColumnBatchesRequest(batches=list(batches), data_source_rid=rid, session_name="tests")
    return json.dumps(ConjureEncoder().default(request)).encode()


def proto_batch(channel: str, points: list[tuple[int, Any]], kind: str, **extra: Any) -> Any:
    stamps = [Timestamp(seconds=t // NANOS, nanos=t % NANOS) for t, _ in points]
    member = {"double_points": common_pb.DoublePoints, "string_points": common_pb.StringPoints}.get(kind)
    member = member or {"int_points": common_pb.IntPoints, "uint64_points": common_pb.Uint64Points}[kind]
    values = member(points=[v for _, v in points])
    return common_pb.RecordsBatch(
        channel=channel, points=common_pb.Points(timestamps=stamps, **{kind: values}), **extra
    )


def proto_body(rid: str, *batches: Any) -> bytes:
    return columnar_pb.WriteBatchesRequest(data_source_rid=rid, batches=list(batches)).SerializeToString()


def post(server: ServerProcess, path: str, body: bytes, headers: dict[str, str], **kw: Any) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path}", content=body, headers=headers, timeout=30, **kw)


def arrays_batch(channel: str, t0: int, **arrays: Any) -> Any:
    """nominal-api's ColumnBatch of arrays (ArraysValues: `doubles1d` or `strings1d`), one a ns."""
    ((member, points),) = arrays.items()
    stamps = [api.Timestamp(seconds=(t0 + i) // NANOS, nanos=(t0 + i) % NANOS) for i in range(len(points))]
    values = w.ColumnValues(arrays=w.ArraysValues(**{member: points}))
    return w.ColumnBatch(channel=channel, tags={}, timestamps=stamps, values=values)


def proto_composite(channel: str, t0: int, member: str, points: list[Any]) -> Any:
    """A RecordsBatch of array points (`double_array_points`, `string_array_points`) or struct
    points (`struct_points`), one a nanosecond from t0."""
    stamps = [Timestamp(seconds=(t0 + i) // NANOS, nanos=(t0 + i) % NANOS) for i in range(len(points))]
    if member == "struct_points":
        held = common_pb.Points(timestamps=stamps, struct_points=common_pb.StructPoints(points=points))
    elif member == "double_array_points":
        arrays = common_pb.DoubleArrayPoints(points=[common_pb.DoubleArrayPoint(value=v) for v in points])
        held = common_pb.Points(
            timestamps=stamps, array_points=common_pb.ArrayPoints(double_array_points=arrays)
        )
    else:
        strings = common_pb.StringArrayPoints(points=[common_pb.StringArrayPoint(value=v) for v in points])
        held = common_pb.Points(
            timestamps=stamps, array_points=common_pb.ArrayPoints(string_array_points=strings)
        )
    return common_pb.RecordsBatch(channel=channel, points=held)


def stored_texts(server: ServerProcess, rid: str) -> list[tuple[str, int, str | None]]:
    """(channel, timestamp, stored text) of each point of the data source, in write order."""
    return [(c, ts, text) for c, _, ts, _, text in stored_rows(server.data_dir, rid)]


# Arrays and structs as nominal-api's clients send them, and the JSON text each is stored as
# (compute/storage/composite_points.py): compact, NaN and the infinities as JSON's tokens, a struct's
# keys in their order
DOUBLE_ARRAYS = [[1.5, -2.25, 0.0], [], [math.nan, math.inf, -math.inf, -0.0, 2.0**60]]
DOUBLE_TEXTS = ["[1.5,-2.25,0.0]", "[]", "[NaN,Infinity,-Infinity,-0.0,1.152921504606847e+18]"]
STRING_ARRAYS = [["a", "é", ""], [], ['say "hi"']]
STRING_TEXTS = ['["a","é",""]', "[]", '["say \\"hi\\""]']
STRUCTS = [
    '{"engine": {"temp": 81.5, "mode": "run"}, "items": [1, 2]}',
    "{}",
    '{ "b" : null , "a": [true, {"c": "é"}] }',
]
STRUCT_TEXTS = [
    '{"engine":{"temp":81.5,"mode":"run"},"items":[1,2]}',
    "{}",
    '{"b":null,"a":[true,{"c":"é"}]}',
]


def expected_texts(t0: int) -> list[tuple[str, int, str | None]]:
    return [
        *[("spectrum", t0 + i, text) for i, text in enumerate(DOUBLE_TEXTS)],
        *[("labels", t0 + i, text) for i, text in enumerate(STRING_TEXTS)],
        *[("state", t0 + i, text) for i, text in enumerate(STRUCT_TEXTS)],
    ]


COMPOSITE_TYPES = {"spectrum": "DOUBLE_ARRAY", "labels": "STRING_ARRAY", "state": "STRUCT"}


def test_arrays_and_structs_are_stored_as_their_texts(server: ServerProcess) -> None:
    rid = new_rid()
    t0 = time.time_ns() - 60 * NANOS  # recent: the retention (7 days) prunes older points
    body = conjure_body(
        rid,
        arrays_batch("spectrum", t0, doubles1d=DOUBLE_ARRAYS),
        arrays_batch("labels", t0, strings1d=STRING_ARRAYS),
        batch("state", [(t0 + i, v) for i, v in enumerate(STRUCTS)], "structs"),
        batch("plain", [(t0, 1.0)], "doubles"),
    )
    assert b'"NaN"' in body and b'"Infinity"' in body  # as Conjure's encoder writes them
    r = post(server, COLUMNAR, gzip.compress(body), {**JSON, "Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    assert stored_texts(server, rid) == [*expected_texts(t0), ("plain", t0, None)]
    assert data_types(server.base_url, rid) == {**COMPOSITE_TYPES, "plain": "DOUBLE"}


def test_the_protobuf_twin_stores_arrays_and_structs_as_their_texts(server: ServerProcess) -> None:
    rid = new_rid()
    t0 = time.time_ns() - 60 * NANOS
    body = proto_body(
        rid,
        proto_composite("spectrum", t0, "double_array_points", DOUBLE_ARRAYS),
        proto_composite("labels", t0, "string_array_points", STRING_ARRAYS),
        proto_composite("state", t0, "struct_points", STRUCTS),
        proto_batch("plain", [(t0, 1.0)], "double_points"),
    )
    r = post(
        server,
        NOMINAL_COLUMNAR,
        zstandard.ZstdCompressor().compress(body),
        {**PROTOBUF, "Content-Encoding": "zstd"},
    )
    assert r.status_code == 200, r.text
    assert stored_texts(server, rid) == [*expected_texts(t0), ("plain", t0, None)]
    assert data_types(server.base_url, rid) == {**COMPOSITE_TYPES, "plain": "DOUBLE"}


def test_a_channel_keeps_its_kind_through_both_columnar_writers(server: ServerProcess) -> None:
    """Arrays to a channel of doubles, doubles or structs to one of arrays: refused whole, 400."""
    rid = new_rid()
    t = time.time_ns() - 60 * NANOS
    first = conjure_body(
        rid, batch("speed", [(t, 1.0)], "doubles"), arrays_batch("spectrum", t, doubles1d=[[1.0]])
    )
    assert post(server, COLUMNAR, first, JSON).status_code == 200
    conflicts = [
        (
            COLUMNAR,
            conjure_body(
                rid, batch("new", [(t, 2.0)], "doubles"), arrays_batch("speed", t + 1, doubles1d=[[2.0]])
            ),
            JSON,
            "holds double points; this request writes double-array points",
        ),
        (
            COLUMNAR,
            conjure_body(
                rid, batch("new", [(t, 2.0)], "doubles"), batch("spectrum", [(t + 1, 3.0)], "doubles")
            ),
            JSON,
            "holds double-array points; this request writes double points",
        ),
        (
            NOMINAL_COLUMNAR,
            proto_body(
                rid,
                proto_batch("new", [(t, 2.0)], "double_points"),
                proto_composite("spectrum", t + 1, "struct_points", ['{"a": 1}']),
            ),
            PROTOBUF,
            "holds double-array points; this request writes struct points",
        ),
        (
            NOMINAL_COLUMNAR,
            proto_body(
                rid,
                proto_batch("new", [(t, 2.0)], "double_points"),
                proto_composite("speed", t + 1, "string_array_points", [["a"]]),
            ),
            PROTOBUF,
            "holds double points; this request writes string-array points",
        ),
    ]
    for path, body, headers, fragment in conflicts:
        r = post(server, path, body, headers)
        assert r.status_code == 400 and fragment in r.json()["message"], r.text
    # nothing of the refused requests: not even their good batch
    assert stored_texts(server, rid) == [("speed", t, None), ("spectrum", t, "[1.0]")]
    assert data_types(server.base_url, rid) == {"speed": "DOUBLE", "spectrum": "DOUBLE_ARRAY"}


async def test_a_live_subscriber_sees_columnar_json_points_as_they_are_written(server: ServerProcess) -> None:
    rid = new_rid()
    client = await Client.connect(server.ws_url)
    try:
        sub_id = new_id()
        variables = {"x": channel_variable(rid, "speed", {"car": "c1"})}
        await client.subscribe({sub_id: subscription(series_node(), variables, 600, lateness_s=600)})
        assert (await client.creation(sub_id))["type"] == "success"
        view = ResultView(600 * NANOS)
        view.apply(await client.update(sub_id))
        t0 = time.time_ns() - 30 * NANOS
        speeds = [(t0 + i * 250_000_001, 10.0 + i / 4) for i in range(40)]
        body = gzip.compress(conjure_body(rid, batch("speed", speeds, "doubles", {"car": "c1"})))
        r = post(server, COLUMNAR, body, {**JSON, "Content-Encoding": "gzip"})
        assert r.status_code == 200, r.text
        while view.ungrouped().point_count() < len(speeds):
            view.apply(await client.update(sub_id, timeout=60))
        assert view.ungrouped().normalized() == speeds
    finally:
        await client.close()


async def test_every_column_kind_is_stored_exactly_from_nominal_apis_request(server: ServerProcess) -> None:
    rid = new_rid()
    t0 = time.time_ns() - 60 * NANOS + 17
    doubles = [(t0, -1.5), (t0 + 1, 2.25), (t0 + 2, math.inf)]
    ints = [(t0, -(2**53)), (t0 + 1, 0), (t0 + 2, 2**53)]  # int64 up to 2^53: exact as doubles
    uints = [(t0, 2**63), (t0 + 1, 2**64 - 2**11)]  # beyond int64, yet exact as doubles
    modes = [(t0, "park"), (t0 + NANOS, "drive")]
    body = conjure_body(
        rid,
        batch("temp", doubles, "doubles", {"unit": "a"}),
        batch("count", ints, "ints"),
        batch("odometer", uints, "uint64s"),
        batch("mode", modes, "strings"),
    )
    r = post(
        server, COLUMNAR, zstandard.ZstdCompressor().compress(body), {**JSON, "Content-Encoding": "zstd"}
    )
    assert r.status_code == 200, r.text
    assert await seen_by_subscriber(server, rid, "temp", {"unit": "a"}) == [
        (t, v if math.isfinite(v) else "Infinity") for t, v in doubles
    ]
    assert await seen_by_subscriber(server, rid, "count") == [(t, float(v)) for t, v in ints]
    assert await seen_by_subscriber(server, rid, "odometer") == [(t, float(v)) for t, v in uints]
    assert await seen_by_subscriber(server, rid, "mode", kind="enum") == modes


async def test_the_protobuf_twin_is_stored_exactly(server: ServerProcess) -> None:
    rid = new_rid()
    t0 = time.time_ns() - 60 * NANOS + 3
    doubles = [(t0 + i * NANOS, i * 0.5) for i in range(20)]
    ints = [(t0, -7), (t0 + 1, 2**53)]
    modes = [(t0, "a"), (t0 + 1, "b")]
    body = proto_body(
        rid,
        proto_batch("v", doubles, "double_points", tags={"k": "1"}),
        proto_batch("n", ints, "int_points"),
        proto_batch("u", [(t0, 2**63)], "uint64_points"),
        proto_batch("s", modes, "string_points"),
    )
    r = post(
        server,
        NOMINAL_COLUMNAR,
        zstandard.ZstdCompressor().compress(body),
        {**PROTOBUF, "Content-Encoding": "zstd"},
    )
    assert r.status_code == 200, r.text
    assert await seen_by_subscriber(server, rid, "v", {"k": "1"}) == doubles
    assert await seen_by_subscriber(server, rid, "n") == [(t, float(v)) for t, v in ints]
    assert await seen_by_subscriber(server, rid, "u") == [(t0, float(2**63))]
    assert await seen_by_subscriber(server, rid, "s", kind="enum") == modes


def decoded(server: ServerProcess, where: str) -> float:
    text = httpx.get(f"{server.base_url}/metrics", timeout=10).text
    match = re.search(rf'^sparkwire_ingest_bodies_decoded_total\{{where="{where}"\}} (\S+)$', text, re.M)
    return 0.0 if match is None else float(match.group(1))


def test_a_large_json_body_is_decoded_in_a_worker_exactly_and_refused_alike(server: ServerProcess) -> None:
    """Over SPARKWIRE_INGEST_DECODE_MIN_BYTES (64 KiB): off the event loop, as the row writer's."""
    rid, refused_rid = new_rid(), new_rid()
    t0 = time.time_ns() - 600 * NANOS
    values = [(t0 + i * 1_000_003, i / 3) for i in range(5000)]
    labels = [(t0 + i, f"s{i % 7}") for i in range(5000)]
    body = conjure_body(rid, batch("v", values, "doubles"), batch("s", labels, "strings"))
    assert len(body) > 64 << 10
    before = decoded(server, "worker")
    assert post(server, COLUMNAR, body, JSON).status_code == 200
    assert decoded(server, "worker") == before + 1
    rows = [(c, ts, v if s is None else s) for c, _, ts, v, s in stored_rows(server.data_dir, rid)]
    assert rows == [("v", t, v) for t, v in values] + [("s", t, s) for t, s in labels]
    bad = conjure_body(refused_rid, batch("v", values, "doubles"), batch("n", [(t0, 2**60 + 1)], "ints"))
    r = post(server, COLUMNAR, bad, JSON)
    assert r.status_code == 400 and "1152921504606846977 has no exact double" in r.json()["message"], r.text
    assert decoded(server, "worker") == before + 2
    assert stored_rows(server.data_dir, refused_rid) == []


def test_a_large_body_of_arrays_and_structs_is_decoded_in_a_worker(server: ServerProcess) -> None:
    rid = new_rid()
    t0 = time.time_ns() - 60 * NANOS
    arrays = [[i + j / 8 for j in range(12)] for i in range(2000)]
    states = [json.dumps({"i": i, "mode": "run"}) for i in range(2000)]
    body = conjure_body(
        rid,
        arrays_batch("spectrum", t0, doubles1d=arrays),
        batch("state", [(t0 + i, v) for i, v in enumerate(states)], "structs"),
    )
    assert len(body) > 64 << 10
    before = decoded(server, "worker")
    r = post(server, COLUMNAR, body, JSON)
    assert r.status_code == 200, r.text
    assert decoded(server, "worker") == before + 1
    texts = stored_texts(server, rid)
    assert texts == [
        ("spectrum", t0 + i, json.dumps(a, separators=(",", ":"))) for i, a in enumerate(arrays)
    ] + [("state", t0 + i, f'{{"i":{i},"mode":"run"}}') for i in range(2000)]


def test_nan_is_stored_as_conjure_sends_it(server: ServerProcess) -> None:
    rid = new_rid()
    t = 1_700_000_000 * NANOS
    r = post(server, COLUMNAR, conjure_body(rid, batch("x", [(t, math.nan), (t + 1, 1.0)], "doubles")), JSON)
    assert r.status_code == 200, r.text
    assert [(c, ts, v) for c, _, ts, v, _ in stored_rows(server.data_dir, rid)] == [
        ("x", t, None),
        ("x", t + 1, 1.0),
    ]


T = 1_700_000_000 * NANOS
GOOD = batch("fine", [(T, 1.0)], "doubles")


def json_body(*values: Any, stamps: int = 1) -> bytes:
    """GOOD, then a batch "bad" of `stamps` timestamps and each of these `values` members in turn."""
    timestamps = [{"seconds": 1, "nanos": i} for i in range(stamps)]
    batches = [{"channel": "bad", "timestamps": timestamps, "values": v} for v in values]
    good = ConjureEncoder().default(GOOD)
    return json.dumps({"dataSourceRid": "R", "batches": [good, *batches]}).encode()


def double_arrays_json(*arrays: Any) -> dict[str, Any]:
    return {"type": "arrays", "arrays": {"type": "doubles1d", "doubles1d": list(arrays)}}


# name: (body, status, errorName, a part of the message); each beside a valid batch
JSON_REFUSALS: dict[str, tuple[bytes, int, str, str]] = {
    "more timestamps than values": (
        json.dumps(
            {
                "dataSourceRid": "R",
                "batches": [
                    {
                        "channel": "c",
                        "timestamps": [{"seconds": 1, "nanos": 0}] * 2,
                        "values": {"type": "doubles", "doubles": [1.0]},
                    }
                ],
            }
        ).encode(),
        400,
        "Default:InvalidArgument",
        "2 timestamps and 1 values",
    ),
    "an integer a double cannot hold": (
        conjure_body("R", GOOD, batch("big", [(T, 2**53 + 1)], "ints")),
        400,
        "Default:InvalidArgument",
        "9007199254740993 has no exact double",
    ),
    "a struct that is no JSON object": (
        conjure_body("R", GOOD, batch("s", [(T, '{"a": 1}'), (T + 1, "[1, 2]")], "structs")),
        400,
        "Default:InvalidArgument",
        "batches.1 (channel 's').values.structs.1: jsonString must be a JSON object, got a JSON list",
    ),
    "a struct that is not JSON": (
        conjure_body("R", GOOD, batch("s", [(T, '{"a": NaN}')], "structs")),
        400,
        "Default:InvalidArgument",
        "values.structs.0: jsonString holds NaN, which is not JSON",
    ),
    "a struct escaping a lone surrogate": (  # valid JSON, but no Unicode text: the log cannot hold it
        conjure_body("R", GOOD, batch("s", [(T, '{"a": "\\ud800"}')], "structs")),
        400,
        "Default:InvalidArgument",
        "batches.1 (channel 's').values.structs.0: jsonString holds a lone UTF-16 surrogate",
    ),
    "a struct nested 100,000 deep": (
        conjure_body("R", GOOD, batch("s", [(T, '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")], "structs")),
        400,
        "Default:InvalidArgument",
        "batches.1 (channel 's').values.structs.0: jsonString is nested too deeply",
    ),
    "a struct that is an object, not its text": (
        json_body({"type": "structs", "structs": [{"a": 1}]}),
        400,
        "Default:InvalidArgument",
        "Expected `str`, got `object` - at `$.batches[1].values.structs[0]`",
    ),
    "a double array holding a string": (
        json_body(double_arrays_json([1.0, "2.5"])),
        400,
        "Default:InvalidArgument",
        "Invalid enum value '2.5' - at `$.batches[1].values.arrays.doubles1d[0][1]`",
    ),
    "a double array holding true": (
        json_body(double_arrays_json([True])),
        400,
        "Default:InvalidArgument",
        "got `bool` - at `$.batches[1].values.arrays.doubles1d[0][0]`",
    ),
    "a string array holding a number": (
        json_body({"type": "arrays", "arrays": {"type": "strings1d", "strings1d": [["a", 1]]}}),
        400,
        "Default:InvalidArgument",
        "Expected `str`, got `int` - at `$.batches[1].values.arrays.strings1d[0][1]`",
    ),
    "a double array that is a double": (
        json_body(double_arrays_json(1.0)),
        400,
        "Default:InvalidArgument",
        "Expected `array`, got `float` - at `$.batches[1].values.arrays.doubles1d[0]`",
    ),
    "arrays of a type nominal-api has not": (
        json_body({"type": "arrays", "arrays": {"type": "ints1d", "ints1d": [[1]]}}),
        400,
        "Default:InvalidArgument",
        "Invalid value 'ints1d' - at `$.batches[1].values.arrays.type`",
    ),
    "more timestamps than arrays": (
        json_body(double_arrays_json([1.0]), stamps=2),
        400,
        "Default:InvalidArgument",
        "2 timestamps and 1 values",
    ),
    "an unknown field": (
        conjure_body("R", GOOD)[:-1] + b', "compress": true}',
        400,
        "Default:InvalidArgument",
        "unknown field `compress`",
    ),
    "a timestamp before the epoch": (
        conjure_body("R", GOOD, batch("old", [(-5 * NANOS, 1.0)], "doubles")),
        400,
        "Default:InvalidArgument",
        "seconds -5",
    ),
    "arrays nested 100,000 deep": (  # before the union's tag: msgspec skips them looking for it
        conjure_body("R", GOOD).replace(
            b"}}]",
            b'}}, {"channel": "a", "timestamps": [], "values": {"type": "arrays", "arrays": {"doubles1d": '
            + b"[" * 100_000
            + b"]" * 100_000
            + b', "type": "doubles1d"}}}]',
            1,
        ),
        400,
        "Default:InvalidArgument",
        "nested too deeply",
    ),
    "not JSON": (b"{nope", 400, "Default:InvalidArgument", "not a WriteColumnBatchesRequest"),
}


@pytest.mark.parametrize("name", list(JSON_REFUSALS))
def test_refused_columnar_json_requests_store_nothing(server: ServerProcess, name: str) -> None:
    rid = new_rid()
    body, status, error_name, fragment = JSON_REFUSALS[name]
    r = post(server, COLUMNAR, body.replace(b'"R"', json.dumps(rid).encode()), JSON)
    assert r.status_code == status, r.text
    error = r.json()
    assert error["errorName"] == error_name and fragment in error["message"], error
    assert stored_rows(server.data_dir, rid) == []


PROTOBUF_REFUSALS: dict[str, tuple[int, str, str]] = {
    "a unit": (400, "Default:InvalidArgument", "units are not supported"),
    "log points": (400, "Default:InvalidArgument", "log points are not supported"),
    "a struct that is no JSON object": (
        400,
        "Default:InvalidArgument",
        "batches.1 (channel 'j').values.structs.1: jsonString must be a JSON object, got a JSON list",
    ),
    "array points of no array type": (
        400,
        "Default:InvalidArgument",
        "batches.1 (channel 'a').points.array_points: holds neither double nor string array points",
    ),
    "a string array element not UTF-8": (400, "Default:InvalidArgument", "bad UTF-8"),
    "fewer timestamps than structs": (400, "Default:InvalidArgument", "1 timestamps and 2 values"),
    "fewer timestamps than values": (400, "Default:InvalidArgument", "1 timestamps and 2 values"),
    "truncated": (400, "Default:InvalidArgument", "not a WriteBatchesRequest protobuf"),
    "wrong content type": (415, "Sparkwire:UnsupportedMediaType", "application/json"),
}


@pytest.mark.parametrize("name", list(PROTOBUF_REFUSALS))
def test_refused_protobuf_columnar_requests_store_nothing(server: ServerProcess, name: str) -> None:
    rid = new_rid()
    good = proto_batch("fine", [(T, 1.0)], "double_points")
    headers = PROTOBUF
    if name == "a unit":
        body = proto_body(rid, good, proto_batch("v", [(T, 1.0)], "double_points", unit="m/s"))
    elif name == "log points":
        logs = common_pb.Points(
            timestamps=[Timestamp(seconds=1)], log_points=common_pb.LogPoints(points=[common_pb.LogPoint()])
        )
        body = proto_body(rid, good, common_pb.RecordsBatch(channel="log", points=logs))
    elif name == "a struct that is no JSON object":
        body = proto_body(rid, good, proto_composite("j", T, "struct_points", ['{"a": 1}', "[1]"]))
    elif name == "array points of no array type":
        empty = common_pb.Points(timestamps=[Timestamp(seconds=1)], array_points=common_pb.ArrayPoints())
        body = proto_body(rid, good, common_pb.RecordsBatch(channel="a", points=empty))
    elif name == "a string array element not UTF-8":
        strings = proto_composite("a", T, "string_array_points", [["ok", "zz"]])
        body = proto_body(rid, good, strings).replace(b"zz", b"\xff\xfe")  # as long: still protobuf
    elif name == "fewer timestamps than structs":
        structs = common_pb.Points(
            timestamps=[Timestamp(seconds=1)], struct_points=common_pb.StructPoints(points=["{}", "{}"])
        )
        body = proto_body(rid, good, common_pb.RecordsBatch(channel="j", points=structs))
    elif name == "fewer timestamps than values":
        mismatched = common_pb.Points(
            timestamps=[Timestamp(seconds=1)], double_points=common_pb.DoublePoints(points=[1.0, 2.0])
        )
        body = proto_body(rid, good, common_pb.RecordsBatch(channel="m", points=mismatched))
    elif name == "truncated":
        body = proto_body(rid, good, proto_batch("more", [(T, 2.0)], "double_points"))[:-3]
    else:
        body, headers = proto_body(rid, good), JSON
    status, error_name, fragment = PROTOBUF_REFUSALS[name]
    r = post(server, NOMINAL_COLUMNAR, body, headers)
    assert r.status_code == status, r.text
    error = r.json()
    assert error["errorName"] == error_name and fragment in error["message"], error
    assert stored_rows(server.data_dir, rid) == []


def test_both_columnar_writers_are_in_the_openapi_document(server: ServerProcess) -> None:
    paths = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()["paths"]
    body = paths[COLUMNAR]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/WriteColumnBatchesRequest"}
    assert "application/x-protobuf" in paths[NOMINAL_COLUMNAR]["post"]["requestBody"]["content"]


SECRET = "columnar-secret-that-is-long-enough-for-hs256"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("columnar-auth")
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_JWT_SECRET": SECRET})
    yield proc
    proc.stop()


def test_the_row_writers_auth_applies(guarded: ServerProcess) -> None:
    rid, other = new_rid(), new_rid()
    body = conjure_body(rid, GOOD)
    assert post(guarded, COLUMNAR, body, JSON).status_code == 401
    wrong = {**JSON, "Authorization": f"Bearer {make_jwt(SECRET, [other], 600)}"}
    assert post(guarded, COLUMNAR, body, wrong).status_code == 403
    proto_wrong = {**PROTOBUF, "Authorization": f"Bearer {make_jwt(SECRET, [other], 600)}"}
    assert (
        post(
            guarded,
            NOMINAL_COLUMNAR,
            proto_body(rid, proto_batch("a", [(T, 1.0)], "double_points")),
            proto_wrong,
        ).status_code
        == 403
    )
    assert stored_rows(guarded.data_dir, rid) == []
    right = {**JSON, "Authorization": f"Bearer {make_jwt(SECRET, [rid], 600)}"}
    assert post(guarded, COLUMNAR, body, right).status_code == 200
    assert [(c, ts, v) for c, _, ts, v, _ in stored_rows(guarded.data_dir, rid)] == [("fine", T, 1.0)]
