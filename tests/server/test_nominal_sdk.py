"""Nominal's own writers, unchanged, against a real server: the `nominal-streaming` client (its
Rust core sends protobuf + zstd to `/storage/writer/v1/nominal/{rid}`) and the `nominal` SDK's
`get_write_stream()` (run from `.venv-nominal`, since it pins an older nominal-api). What they
wrote must reach a subscriber exactly; their arrays and structs be stored as their JSON texts
(compute/storage/composite_points.py) under their data types. Then the protobuf endpoint's refusals,
each storing nothing."""

from __future__ import annotations

import gzip
import math
import subprocess
import textwrap
import time
import uuid
from pathlib import Path

import httpx
import pytest
import zstandard
from nominal.protos.write import nominal_write_pb2 as pb
from nominal_streaming import NominalDatasetStream, PyNominalStreamOpts

from tests.conftest import ROOT, ServerProcess
from tests.log_file import stored_rows
from tests.wire import (
    NANOS,
    data_types,
    seen_by_subscriber,
)

NOMINAL_PYTHON = ROOT / ".venv-nominal" / "bin" / "python"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def five_part_rid() -> str:
    """The shape `with_core_consumer` insists on: ri.<service>.<instance>.<type>.<locator>."""
    return f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"


async def test_nominal_streaming_client_writes_doubles_integers_and_strings_exactly(
    server: ServerProcess,
) -> None:
    rid = five_part_rid()
    t0 = time.time_ns() - 60 * NANOS + 123
    temps = [(t0 + i * 1_000_000_007, 20.0 + i / 8) for i in range(50)]
    counts = [(t0, -(2**53)), (t0 + 1, 0), (t0 + 2, 2**53), (t0 + 3, 7)]  # int64 up to 2^53: exact
    modes = [(t0, "park"), (t0 + 5 * NANOS, "drive")]
    opts = PyNominalStreamOpts().with_api_base_url(server.base_url)
    with NominalDatasetStream("a-token", opts).with_core_consumer(rid) as stream:
        stream.enqueue_batch(
            "engine.temp", [t for t, _ in temps], [v for _, v in temps], tags={"vehicle": "a1"}
        )
        stream.enqueue_batch("odometer", [t for t, _ in counts], [v for _, v in counts])
        for t, mode in modes:
            stream.enqueue("drive.mode", t, mode)
    # close() returns once every request was answered: the points are durable now.
    assert await seen_by_subscriber(server, rid, "engine.temp", {"vehicle": "a1"}) == temps
    assert await seen_by_subscriber(server, rid, "odometer") == [(t, float(v)) for t, v in counts]
    assert await seen_by_subscriber(server, rid, "drive.mode", kind="enum") == modes


def stored_texts(server: ServerProcess, rid: str) -> list[tuple[str, int, str | None]]:
    """(channel, timestamp, stored text) of each point of the data source, in write order."""
    return [(c, ts, text) for c, _, ts, _, text in stored_rows(server.data_dir, rid)]


def test_nominal_streaming_client_writes_arrays_and_structs_as_their_texts(server: ServerProcess) -> None:
    rid = five_part_rid()
    t0 = time.time_ns() - 60 * NANOS + 11  # recent: the retention (7 days) prunes older points
    with NominalDatasetStream(
        "a-token", PyNominalStreamOpts().with_api_base_url(server.base_url)
    ).with_core_consumer(rid) as stream:
        stream.enqueue_float_array("spectrum", t0, [1.5, -2.25, math.nan, math.inf, -0.0])
        stream.enqueue_float_array("spectrum", t0 + 1, [])
        stream.enqueue_string_array("labels", t0, ["a", "é", ""], tags={"vehicle": "a1"})
        stream.enqueue_struct(
            "state", t0, {"engine": {"temp": 81.5, "mode": "run"}, "ok": True, "items": [1, None]}
        )
        stream.enqueue("speed", t0, 3.5)
    rows = sorted(stored_rows(server.data_dir, rid))  # series in the client's order: sorted here
    assert rows == [
        ("labels", '{"vehicle":"a1"}', t0, None, '["a","é",""]'),
        ("spectrum", "{}", t0, None, "[1.5,-2.25,NaN,Infinity,-0.0]"),
        ("spectrum", "{}", t0 + 1, None, "[]"),
        ("speed", "{}", t0, 3.5, None),
        ("state", "{}", t0, None, '{"engine":{"temp":81.5,"mode":"run"},"ok":true,"items":[1,null]}'),
    ]
    assert data_types(server.base_url, rid) == {
        "labels": "STRING_ARRAY",
        "spectrum": "DOUBLE_ARRAY",
        "speed": "DOUBLE",
        "state": "STRUCT",
    }


NOMINAL_SCRIPT = textwrap.dedent(
    """
    import sys
    from nominal.core import NominalClient

    base_url, rid, implementation, t0 = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    client = NominalClient.from_token("a-token", base_url=base_url)
    dataset = client.get_dataset(rid)  # POST /catalog/v1/datasets/multiple
    assert dataset.rid == rid, dataset.rid
    with dataset.get_write_stream(implementation=implementation) as stream:
        for i in range(20):
            stream.enqueue("speed", t0 + i * 1_000_000, 10.0 + i, tags={"vehicle": "b2"})
            stream.enqueue("gear", t0 + i * 1_000_000, i % 5)
        stream.enqueue("state", t0, "ok")
        stream.enqueue_float_array("spectrum", t0, [0.5, 1.5])
        stream.enqueue_string_array("labels", t0, ["x", "y"])
        stream.enqueue_struct("engine", t0, {"temp": 80, "mode": "idle"})
    print("written")
    """
)


@pytest.mark.parametrize("implementation", ["rust", "python"])
async def test_the_nominal_sdks_write_stream_reaches_a_subscriber_exactly(
    server: ServerProcess, tmp_path: Path, implementation: str
) -> None:
    assert NOMINAL_PYTHON.exists(), "the nominal SDK's environment is missing: run `make install`"
    script = tmp_path / "write_with_nominal.py"
    script.write_text(NOMINAL_SCRIPT)
    rid = five_part_rid()
    t0 = time.time_ns() - 30 * NANOS
    done = subprocess.run(
        [str(NOMINAL_PYTHON), str(script), server.base_url, rid, implementation, str(t0)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0 and "written" in done.stdout, done.stderr[-3000:]
    speeds = [(t0 + i * 1_000_000, 10.0 + i) for i in range(20)]
    gears = [(t0 + i * 1_000_000, float(i % 5)) for i in range(20)]
    assert await seen_by_subscriber(server, rid, "speed", {"vehicle": "b2"}) == speeds
    assert await seen_by_subscriber(server, rid, "gear") == gears
    assert await seen_by_subscriber(server, rid, "state", kind="enum") == [(t0, "ok")]
    texts = {(c, ts, text) for c, ts, text in stored_texts(server, rid) if text is not None and c != "state"}
    assert texts == {
        ("spectrum", t0, "[0.5,1.5]"),
        ("labels", t0, '["x","y"]'),
        ("engine", t0, '{"temp":80,"mode":"idle"}'),
    }
    types = data_types(server.base_url, rid)
    assert (types["spectrum"], types["labels"], types["engine"]) == ("DOUBLE_ARRAY", "STRING_ARRAY", "STRUCT")


# -- the endpoint's refusals ------------------------------------------------------------------------
def request(*series: pb.Series) -> pb.WriteRequestNominal:
    return pb.WriteRequestNominal(series=list(series))


def doubles(channel: str, points: list[tuple[int, float]]) -> pb.Series:
    s = pb.Series(channel=pb.Channel(name=channel))
    for t, v in points:
        p = s.points.double_points.points.add(value=v)
        p.timestamp.seconds, p.timestamp.nanos = divmod(t, NANOS)
    return s


def integers(channel: str, points: list[tuple[int, int]], unsigned: bool = False) -> pb.Series:
    s = pb.Series(channel=pb.Channel(name=channel))
    target = s.points.uint64_points.points if unsigned else s.points.integer_points.points
    for t, v in points:
        p = target.add(value=v)
        p.timestamp.seconds, p.timestamp.nanos = divmod(t, NANOS)
    return s


def double_arrays(channel: str, points: list[tuple[int, list[float]]]) -> pb.Series:
    s = pb.Series(channel=pb.Channel(name=channel))
    for t, v in points:
        p = s.points.array_points.double_array_points.points.add(value=v)
        p.timestamp.seconds, p.timestamp.nanos = divmod(t, NANOS)
    return s


def string_arrays(channel: str, points: list[tuple[int, list[str]]]) -> pb.Series:
    s = pb.Series(channel=pb.Channel(name=channel))
    for t, v in points:
        p = s.points.array_points.string_array_points.points.add(value=v)
        p.timestamp.seconds, p.timestamp.nanos = divmod(t, NANOS)
    return s


def structs(channel: str, points: list[tuple[int, str]]) -> pb.Series:
    s = pb.Series(channel=pb.Channel(name=channel))
    for t, v in points:
        p = s.points.struct_points.points.add(json_string=v)
        p.timestamp.seconds, p.timestamp.nanos = divmod(t, NANOS)
    return s


def post(
    server: ServerProcess, rid: str, body: bytes, headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/storage/writer/v1/nominal/{rid}",
        content=body,
        headers={**PROTOBUF, **(headers or {})},
    )


def zstd(message: pb.WriteRequestNominal) -> bytes:
    return zstandard.ZstdCompressor().compress(message.SerializeToString())


def test_integers_a_double_cannot_hold_exactly_are_refused_not_rounded(server: ServerProcess) -> None:
    rid = five_part_rid()
    t = 1_700_000_000 * NANOS
    beyond = request(integers("ok", [(t, 1)]), integers("counter", [(t, 5), (t + 1, 2**53 + 1)]))
    r = post(server, rid, zstd(beyond), {"Content-Encoding": "zstd"})
    assert r.status_code == 400, r.text
    assert r.json()["errorName"] == "Default:InvalidArgument"
    assert (
        "series.1 (channel 'counter').points.integer_points.1.value: 9007199254740993" in r.json()["message"]
    )
    # uint64 beyond int64's range, but a power of two a double holds exactly: stored exactly.
    exact = request(integers("big", [(t, 2**63), (t + 1, 2**64 - 2**11)], unsigned=True))
    assert post(server, rid, zstd(exact), {"Content-Encoding": "zstd"}).status_code == 200
    over = request(integers("big", [(t + 2, 2**64 - 1)], unsigned=True))
    assert post(server, rid, zstd(over), {"Content-Encoding": "zstd"}).status_code == 400
    assert [(c, ts, v) for c, _, ts, v, _ in stored_rows(server.data_dir, rid)] == [
        ("big", t, float(2**63)),
        ("big", t + 1, float(2**64 - 2**11)),
    ]


REFUSALS: dict[str, tuple[int, str, str]] = {
    # name: (status, errorName, a part of the message)
    "corrupt zstd": (400, "Default:InvalidArgument", "zstd"),
    "truncated protobuf": (400, "Default:InvalidArgument", "not a WriteRequestNominal protobuf"),
    "wrong content type": (415, "Sparkwire:UnsupportedMediaType", "application/json"),
    "a struct that is no JSON object beside valid series": (
        400,
        "Default:InvalidArgument",
        "series.1 (channel 'state').points.struct_points.1.json_string: jsonString must be a JSON object, "
        "got a JSON str",
    ),
    "a struct escaping a lone surrogate": (
        400,
        "Default:InvalidArgument",
        "series.1 (channel 'state').points.struct_points.0.json_string: jsonString holds a lone UTF-16",
    ),
    "a struct nested 100,000 deep": (
        400,
        "Default:InvalidArgument",
        "series.1 (channel 'state').points.struct_points.0.json_string: jsonString is nested too deeply",
    ),
    "array points of no array type": (
        400,
        "Default:InvalidArgument",
        "series.1 (channel 'vector').points.array_points: holds neither double nor string array points",
    ),
    "a string array element not UTF-8": (400, "Default:InvalidArgument", "bad UTF-8"),
    "array points stamped before the epoch": (
        400,
        "Default:InvalidArgument",
        "series.1 (channel 'vector').points.array_points.double_array_points.1.timestamp: seconds -5",
    ),
    "timestamp before the epoch": (400, "Default:InvalidArgument", "seconds -5"),
    "empty channel name": (400, "Default:InvalidArgument", "series.1.channel.name"),
    "unknown content encoding": (415, "Sparkwire:UnsupportedContentEncoding", "br"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refused_protobuf_requests_store_nothing(server: ServerProcess, name: str) -> None:
    rid = five_part_rid()
    good = doubles("fine", [(1_700_000_000 * NANOS, 1.0)])
    body = request(good).SerializeToString()
    headers: dict[str, str] = {}
    if name == "corrupt zstd":
        body, headers = b"\x28\xb5\x2f\xfd" + b"\x00garbage" * 8, {"Content-Encoding": "zstd"}
    elif name == "truncated protobuf":
        body = request(good, doubles("more", [(1_700_000_000 * NANOS, 2.0)])).SerializeToString()[:-3]
    elif name == "wrong content type":
        headers = {"Content-Type": "application/json"}
    elif name == "a struct that is no JSON object beside valid series":
        t = 1_700_000_000 * NANOS
        body = request(good, structs("state", [(t, '{"a": 1}'), (t + 1, '"a"')])).SerializeToString()
    elif name == "a struct escaping a lone surrogate":
        lone = '{"\\udc00": 1}'  # a lone surrogate escaped in a key
        body = request(good, structs("state", [(1_700_000_000 * NANOS, lone)])).SerializeToString()
    elif name == "a struct nested 100,000 deep":
        deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
        body = request(good, structs("state", [(1_700_000_000 * NANOS, deep)])).SerializeToString()
    elif name == "array points of no array type":
        empty = pb.Series(channel=pb.Channel(name="vector"), points=pb.Points(array_points=pb.ArrayPoints()))
        body = request(good, empty).SerializeToString()
    elif name == "a string array element not UTF-8":
        strings = string_arrays("vector", [(1_700_000_000 * NANOS, ["ok", "zz"])])
        body = request(good, strings).SerializeToString().replace(b"zz", b"\xff\xfe")  # as long
    elif name == "array points stamped before the epoch":
        points = [(1_700_000_000 * NANOS, [1.0]), (-5 * NANOS, [2.0])]
        body = request(good, double_arrays("vector", points)).SerializeToString()
    elif name == "timestamp before the epoch":
        body = request(good, doubles("old", [(-5 * NANOS, 1.0)])).SerializeToString()
    elif name == "empty channel name":
        body = request(good, doubles("", [(1_700_000_000 * NANOS, 1.0)])).SerializeToString()
    elif name == "unknown content encoding":
        headers = {"Content-Encoding": "br"}
    status, error_name, fragment = REFUSALS[name]
    r = post(server, rid, body, headers)
    assert r.status_code == status, r.text
    error = r.json()
    assert error["errorName"] == error_name and fragment in error["message"], error
    assert stored_rows(server.data_dir, rid) == []


def test_gzip_and_plain_bodies_are_accepted_too(server: ServerProcess) -> None:
    rid = five_part_rid()
    t = 1_700_000_000 * NANOS + 7
    plain = request(doubles("a", [(t, 1.5)])).SerializeToString()
    assert post(server, rid, plain).status_code == 200
    zipped = gzip.compress(request(doubles("b", [(t, 2.5)])).SerializeToString())
    assert post(server, rid, zipped, {"Content-Encoding": "gzip"}).status_code == 200
    assert [(c, ts, v) for c, _, ts, v, _ in stored_rows(server.data_dir, rid)] == [
        ("a", t, 1.5),
        ("b", t, 2.5),
    ]


def test_a_big_request_is_stored_exactly_and_refused_the_same_way(server: ServerProcess) -> None:
    rid = five_part_rid()
    t = 1_700_000_000 * NANOS
    points = [(t + i * 1_000, i * 0.25) for i in range(40_000)]  # ~0.9 MB of protobuf
    big = request(doubles("wide", points), integers("count", [(t + i, i) for i in range(10_000)]))
    r = post(server, rid, zstd(big), {"Content-Encoding": "zstd"})
    assert r.status_code == 200, r.text
    rows = stored_rows(server.data_dir, rid)
    assert [(ts, v) for c, _, ts, v, _ in rows if c == "wide"] == points
    assert [(ts, v) for c, _, ts, v, _ in rows if c == "count"] == [(t + i, float(i)) for i in range(10_000)]
    bad = request(doubles("wide", points), integers("count", [(t, 2**53 + 1)]))
    refused = post(server, five_part_rid(), zstd(bad), {"Content-Encoding": "zstd"})
    assert refused.status_code == 400, refused.text
    assert "series.1 (channel 'count').points.integer_points.0.value" in refused.json()["message"]


def test_a_channel_keeps_its_kind_for_arrays_and_structs(server: ServerProcess) -> None:
    """Array points to a channel of doubles, doubles or structs to a channel of arrays: refused whole
    (400, naming both kinds), nothing of the request stored."""
    rid = five_part_rid()
    t = time.time_ns() - 60 * NANOS
    first = request(doubles("speed", [(t, 1.0)]), double_arrays("spectrum", [(t, [1.0, 2.0])]))
    assert post(server, rid, first.SerializeToString()).status_code == 200
    conflicts = {
        "holds double points; this request writes double-array points": double_arrays(
            "speed", [(t + 1, [3.0])]
        ),
        "holds double-array points; this request writes double points": doubles("spectrum", [(t + 1, 3.0)]),
        "holds double-array points; this request writes string-array points": string_arrays(
            "spectrum", [(t + 1, ["a"])]
        ),
        "holds double-array points; this request writes struct points": structs("spectrum", [(t + 1, "{}")]),
    }
    for fragment, series in conflicts.items():
        r = post(server, rid, request(doubles("new", [(t, 5.0)]), series).SerializeToString())
        assert r.status_code == 400 and fragment in r.json()["message"], r.text
    assert stored_texts(server, rid) == [("speed", t, None), ("spectrum", t, "[1.0,2.0]")]
