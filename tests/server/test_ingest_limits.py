"""Ingest bodies and limits: bodies are read under SPARKWIRE_MAX_REQUEST_BYTES (counted after
Content-Encoding is undone), zstd, gzip and deflate bodies are accepted, anything else is refused,
and each ingest limit refuses a request before anything of it is stored."""

from __future__ import annotations

import gzip
import socket
import time
import zlib
from typing import Any

import httpx
import orjson
import pytest
import zstandard

from tests.conftest import ServerProcess
from tests.ingest_server import (
    LIMITS,
    TOKEN,
    authorized,
    limited,
    limited_rid,
    reset_peak_rss,
    rss_kib,
    series_of,
)
from tests.log_file import stored_rows
from tests.wire import NANOS, ts

__all__ = ["limited"]  # the fixture, imported so pytest finds it

LIMIT = LIMITS["max_request_bytes"]
T0 = 1_763_769_600 * NANOS


def request(rid: str, batches: list[dict[str, Any]]) -> dict[str, Any]:
    return {"dataSourceRid": rid, "batches": batches}


def doubles(channel: str, n: int, tags: dict[str, str] | None = None) -> dict[str, Any]:
    points = [{"timestamp": ts(T0 + i), "value": float(i)} for i in range(n)]
    return {"channel": channel, "tags": tags or {}, "points": {"type": "double", "double": points}}


def padded(rid: str, size: int) -> bytes:
    """A valid one-point write request of exactly `size` bytes (JSON whitespace at the end)."""
    body = orjson.dumps(request(rid, [doubles("p", 1)]))
    assert len(body) <= size
    return body + b" " * (size - len(body))


def post(server: ServerProcess, content: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/storage/writer/v1",
        content=content,
        headers={**authorized(), **(headers or {})},
        timeout=60,
    )


def assert_refused(r: httpx.Response, status: int, name: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    error = r.json()
    assert (error["errorName"], error["name"], error["statusCode"]) == (name, name, status)
    return dict(error)


def assert_nothing_stored(server: ServerProcess, rid: str) -> None:
    assert series_of(server, rid) == []
    assert stored_rows(server.data_dir, rid) == []


# -- the body's size -----------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["identity", "zstd", "gzip"])
def test_a_body_of_exactly_the_limit_is_accepted_and_one_byte_more_is_413(
    limited: ServerProcess, encoding: str
) -> None:
    compress = {"identity": bytes, "zstd": zstandard.ZstdCompressor().compress, "gzip": gzip.compress}[
        encoding
    ]
    headers = {"Content-Encoding": encoding}
    rid = limited_rid(f"edge.{encoding}")
    assert post(limited, compress(padded(rid, LIMIT)), headers).status_code == 200
    assert len(stored_rows(limited.data_dir, rid)) == 1
    over = limited_rid(f"over.{encoding}")
    error = assert_refused(
        post(limited, compress(padded(over, LIMIT + 1)), headers), 413, "Default:RequestEntityTooLarge"
    )
    assert error["errorCode"] == "REQUEST_ENTITY_TOO_LARGE"
    assert error["parameters"] == {"limit": str(LIMIT), "setting": "SPARKWIRE_MAX_REQUEST_BYTES"}
    assert_nothing_stored(limited, over)


def test_a_chunked_body_without_content_length_is_cut_off_at_the_limit(limited: ServerProcess) -> None:
    rid = limited_rid("chunked")
    body = padded(rid, 3 * LIMIT)
    chunks = (body[i : i + 65536] for i in range(0, len(body), 65536))  # no Content-Length
    r = post(limited, chunks)
    assert_refused(r, 413, "Default:RequestEntityTooLarge")
    assert "as sent" in r.json()["message"]
    assert_nothing_stored(limited, rid)


def test_a_content_length_over_the_limit_is_refused_before_the_body_is_sent(limited: ServerProcess) -> None:
    """Only the request head is sent, announcing 10 GB: the 413 comes without the server waiting."""
    with socket.create_connection(("127.0.0.1", limited.port), timeout=30) as s:
        s.sendall(
            b"POST /storage/writer/v1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
            b"Content-Length: 10000000000\r\n\r\n"
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(65536)
        head, _, rest = answer.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(rest) < length:
            rest += s.recv(65536)
    assert head.startswith(b"HTTP/1.1 413 "), head
    error = orjson.loads(rest)
    assert error["errorName"] == "Default:RequestEntityTooLarge"
    assert "(Content-Length 10000000000)" in error["message"]


def zstd_bomb(decompressed: int) -> bytes:
    """A small zstd frame of `decompressed` zero bytes, made without holding them."""
    out = zstandard.ZstdCompressor(level=3).compressobj(size=decompressed)
    zeros = bytes(1 << 20)
    parts = [out.compress(zeros) for _ in range(decompressed >> 20)]
    return b"".join([*parts, out.flush()])


def test_a_zstd_bomb_is_refused_without_the_server_inflating_it(limited: ServerProcess) -> None:
    bomb = zstd_bomb(1 << 30)  # 1 GiB of zeros in ~33 KB
    assert len(bomb) < 100_000
    pid = limited.process.pid
    rid = limited_rid("bomb")
    assert post(limited, orjson.dumps(request(rid, [doubles("p", 10)]))).status_code == 200  # warm
    before = rss_kib(pid)
    reset_peak_rss(pid)
    r = post(limited, bomb, {"Content-Encoding": "zstd"})
    peak = rss_kib(pid, "VmHWM")
    assert_refused(r, 413, "Default:RequestEntityTooLarge")
    assert "decompressed" in r.json()["message"]
    # The decoder holds at most the limit (1 MiB) plus one zstd block and its window (<= 8 MiB).
    assert peak - before < 48 * 1024, f"peak RSS rose by {peak - before} KiB"


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("garbage after the zstd magic", b"\x28\xb5\x2f\xfd" + b"not really zstd at all" * 4),
        ("truncated frame", zstandard.ZstdCompressor().compress(bytes(range(256)) * 64)[:-7]),
        ("plain JSON labelled zstd", b'{"dataSourceRid": "x", "batches": []}'),
    ],
)
def test_a_corrupt_zstd_body_is_400(limited: ServerProcess, name: str, body: bytes) -> None:
    r = post(limited, body, {"Content-Encoding": "zstd"})
    error = assert_refused(r, 400, "Default:InvalidArgument")
    assert error["errorCode"] == "INVALID_ARGUMENT"
    assert "zstd" in error["message"]


def test_a_zstd_frame_needing_a_huge_window_is_refused_with_the_reason(limited: ServerProcess) -> None:
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=27)
    compressing = zstandard.ZstdCompressor(compression_params=params).compressobj()  # size unknown
    frame = compressing.compress(b"{}") + compressing.flush()
    assert zstandard.get_frame_parameters(frame).window_size == 1 << 27
    r = post(limited, frame, {"Content-Encoding": "zstd"})
    assert_refused(r, 400, "Default:InvalidArgument")
    assert "window larger than 8 MiB" in r.json()["message"]


# -- encodings -----------------------------------------------------------------------------------

ENCODERS = {
    "zstd": zstandard.ZstdCompressor().compress,
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,
    "identity": bytes,
}


@pytest.mark.parametrize("encoding", list(ENCODERS))
def test_compressed_bodies_are_stored_exactly(server: ServerProcess, encoding: str) -> None:
    rid = f"ri.ingest.encoding.{encoding}.{time.time_ns()}"
    body = orjson.dumps(request(rid, [doubles("p", 300, {"unit": "a"})]))
    r = httpx.post(
        f"{server.base_url}/storage/writer/v1",
        content=ENCODERS[encoding](body),
        headers={"Content-Encoding": encoding, "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    rows = stored_rows(server.data_dir, rid)
    assert [(c, tags, t, v) for c, tags, t, v, _ in rows] == [
        ("p", '{"unit":"a"}', T0 + i, float(i)) for i in range(300)
    ]


def test_concatenated_zstd_frames_and_gzip_members_are_one_body(server: ServerProcess) -> None:
    for encoding, compress in (("zstd", zstandard.ZstdCompressor().compress), ("gzip", gzip.compress)):
        rid = f"ri.ingest.frames.{encoding}.{time.time_ns()}"
        body = orjson.dumps(request(rid, [doubles("p", 50)]))
        pieces = [body[i : i + 97] for i in range(0, len(body), 97)]
        r = httpx.post(
            f"{server.base_url}/storage/writer/v1",
            content=b"".join(compress(p) for p in pieces),
            headers={"Content-Encoding": encoding},
        )
        assert r.status_code == 200, r.text
        assert len(stored_rows(server.data_dir, rid)) == 50


@pytest.mark.parametrize("encoding", ["br", "compress", "zstd, gzip", "gzip, zstd"])
def test_an_unsupported_content_encoding_is_415_and_stores_nothing(
    server: ServerProcess, encoding: str
) -> None:
    rid = f"ri.ingest.415.{time.time_ns()}"
    r = httpx.post(
        f"{server.base_url}/storage/writer/v1",
        content=orjson.dumps(request(rid, [doubles("p", 3)])),
        headers={"Content-Encoding": encoding},
    )
    error = assert_refused(r, 415, "Sparkwire:UnsupportedContentEncoding")
    assert error["errorCode"] == "CUSTOM_CLIENT"
    assert error["parameters"]["contentEncoding"] == encoding
    assert_nothing_stored(server, rid)


def test_a_corrupt_gzip_body_is_400(server: ServerProcess) -> None:
    good = gzip.compress(b'{"dataSourceRid": "ri.ingest.gz", "batches": []}')
    for body in (good[:-9], b"\x1f\x8b" + b"garbage" * 8):
        r = httpx.post(
            f"{server.base_url}/storage/writer/v1", content=body, headers={"Content-Encoding": "gzip"}
        )
        assert_refused(r, 400, "Default:InvalidArgument")
        assert "gzip" in r.json()["message"]


# -- ingest limits ---------------------------------------------------------------------------------

# name: (a batch just over the limit, the same batch at the limit, the setting named, status)
LIMIT_CASES: dict[str, tuple[dict[str, Any], dict[str, Any], str, int]] = {
    "tags per series": (
        doubles("p", 2, {f"k{i}": "v" for i in range(5)}),
        doubles("p", 2, {f"k{i}": "v" for i in range(4)}),
        "SPARKWIRE_MAX_TAGS_PER_SERIES",
        400,
    ),
    "tag key length": (
        doubles("p", 2, {"k" * 17: "v"}),
        doubles("p", 2, {"k" * 16: "v"}),
        "SPARKWIRE_MAX_TAG_KEY_LENGTH",
        400,
    ),
    "tag value length": (
        doubles("p", 2, {"unit": "é" * 33}),  # characters, not bytes: 32 é (64 bytes) pass
        doubles("p", 2, {"unit": "é" * 32}),
        "SPARKWIRE_MAX_TAG_VALUE_LENGTH",
        400,
    ),
    "channel length": (doubles("c" * 33, 2), doubles("c" * 32, 2), "SPARKWIRE_MAX_CHANNEL_LENGTH", 400),
    "points per request": (doubles("p", 1000), doubles("p", 999), "SPARKWIRE_MAX_POINTS_PER_REQUEST", 413),
}


@pytest.mark.parametrize("case", list(LIMIT_CASES))
def test_each_ingest_limit_refuses_the_whole_request_and_names_the_place(
    limited: ServerProcess, case: str
) -> None:
    over, at, setting, status = LIMIT_CASES[case]
    rid = limited_rid("over")
    # A good series first and the offending one second: the first is not stored either. One point
    # of the good series plus the batch's points makes "points per request" one over its limit.
    good = doubles("ok", 1)
    r = post(limited, orjson.dumps(request(rid, [good, over])))
    name = "Default:InvalidArgument" if status == 400 else "Default:RequestEntityTooLarge"
    error = assert_refused(r, status, name)
    assert error["parameters"]["setting"] == setting
    assert setting in error["message"]
    if status == 400:
        assert error["message"].startswith("series 1 (channel ")  # where: the second series
    assert_nothing_stored(limited, rid)
    accepted = limited_rid("at")
    assert post(limited, orjson.dumps(request(accepted, [good, at]))).status_code == 200
    assert [s["channel"] for s in series_of(limited, accepted)] == sorted(["ok", at["channel"]])


def test_a_data_source_rid_over_its_limit_is_refused(limited: ServerProcess) -> None:
    longest = LIMITS["max_data_source_rid_length"]
    rid = limited_rid("r")
    over = rid + "x" * (longest + 1 - len(rid))
    r = post(limited, orjson.dumps(request(over, [doubles("p", 1)])))
    error = assert_refused(r, 400, "Default:InvalidArgument")
    assert error["parameters"]["setting"] == "SPARKWIRE_MAX_DATA_SOURCE_RID_LENGTH"
    assert_nothing_stored(limited, over)
    at = over[:longest]
    assert post(limited, orjson.dumps(request(at, [doubles("p", 1)]))).status_code == 200
    assert len(stored_rows(limited.data_dir, at)) == 1


def test_a_long_name_is_shortened_in_the_error_message(limited: ServerProcess) -> None:
    rid = limited_rid("long")
    r = post(limited, orjson.dumps(request(rid, [doubles("c" * 5000, 1)])))
    error = assert_refused(r, 400, "Default:InvalidArgument")
    assert "(5000 characters)" in error["message"]
    assert len(error["message"]) < 400
