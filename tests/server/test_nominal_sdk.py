"""Nominal's own writers, unchanged, against a real server: the `nominal-streaming` client (its
Rust core sends protobuf + zstd to `/storage/writer/v1/nominal/{rid}`) and the `nominal` SDK's
`get_write_stream()` (run from `.venv-nominal`, since it pins an older nominal-api). What they
wrote must reach a subscriber exactly. Then the protobuf endpoint's refusals, each storing nothing."""

from __future__ import annotations

import gzip
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


def arrays(channel: str) -> pb.Series:
    s = pb.Series(channel=pb.Channel(name=channel))
    p = s.points.array_points.double_array_points.points.add(value=[1.0, 2.0])
    p.timestamp.seconds = 1_700_000_000
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
    "array points beside valid series": (400, "Default:InvalidArgument", "array points are not supported"),
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
    elif name == "array points beside valid series":
        body = request(good, arrays("vector")).SerializeToString()
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
