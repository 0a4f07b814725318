"""Issue 44, the HTTP and WebSocket edge: every request is admitted before its body is read, and
what a client sends (bodies, headers, control frames, timestamps, nesting) has a limit checked as
it arrives. Each attack runs beside a bystander of another tenant (tests/hostile/bystander.py),
which must keep its writes under 2 s and its live updates' p90 under 2 s; the server's log must
hold no ERROR line and no traceback."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import struct
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest
from nominal.protos.write import nominal_write_pb2 as pb

from tests.conftest import ServerProcess, start_server
from tests.hostile import close_code, connect, make_jwt, still_usable, unique_rid, write_body
from tests.hostile.bystander import Bystander, rss_bytes
from tests.wire import NANOS, Client, channel_variable, new_id, series_node, subscription

SECRET = "bounded-http-secret-that-is-long-enough-for-hs256"
WRITE = "/storage/writer/v1"
JSON_BODY_LIMIT = 1 << 20  # SPARKWIRE_MAX_JSON_BODY_BYTES' default
MiB = 1 << 20
ATTACK_S = 5.0  # each attack goes on this long at least: the bystander measures 20 of its points
BAD_TOKEN = {"Authorization": "Bearer not-a-token"}
# Large bodies are sent 4 a second: the requests, over and over, not a flood of bandwidth. Back
# to back, 3 MB bodies are 1.5 GB in 5 s, which the server refuses for 1.0 s of its CPU (2 ms a body,
# measured) but which, with the client's 1.5 s, takes most of this 2-core machine from everyone.
PACE_S = 0.25


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("bounded-http")
    proc = start_server(
        base / "data",
        base / "server.log",
        env={
            "SPARKWIRE_JWT_SECRET": SECRET,
            "SPARKWIRE_RESUME_LINGER_SECONDS": "0",
            "SPARKWIRE_INGEST_DECODE_MIN_BYTES": "65536",  # the large nested body goes to a worker
        },
    )
    asyncio.run(_warmed_up(proc))
    yield proc
    proc.stop()
    log = proc.log_text()
    assert "Traceback" not in log, log[-4000:]
    assert " ERROR " not in log, [line for line in log.splitlines() if " ERROR " in line][:5]


async def _warmed_up(server: ServerProcess, timeout: float = 90) -> None:
    """Until a bystander's last points arrive live within its budget (2 s), for at most `timeout`: a
    fresh server's first micro-batches take seconds (Spark warming up), which no attack should be
    blamed for. A machine too busy for that is left for the tests' bystanders to report."""
    deadline, kept_up = time.monotonic() + timeout, 0
    async with bystander(server) as b:
        while time.monotonic() < deadline and kept_up < 3:  # three seconds running
            await asyncio.sleep(1.0)
            now = time.monotonic()
            recent = [s for s, t in b.sent_at.items() if now - 3.0 < t < now - 2.0]
            on_time = all(s in b.seen_at and b.seen_at[s] - b.sent_at[s] < 2.0 for s in recent)
            kept_up = kept_up + 1 if recent and on_time else 0


def token(rids: list[str], admin: bool = False) -> str:
    if not admin:
        return make_jwt(SECRET, rids, 600)
    claims = {"sub": "ops", "dataSourceRids": rids, "admin": True, "exp": int(time.time()) + 600}
    return jwt.encode(claims, SECRET)


def bearer(rids: list[str], admin: bool = False) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(rids, admin)}"}


def bystander(server: ServerProcess) -> Bystander:
    rid = unique_rid("bystander")
    return Bystander(server.base_url, server.ws_url, token=token([rid]), rid=rid)


def empty_items(template: str, size: int) -> bytes:
    """`template` (JSON) with its ITEMS a list of empty objects, `size` bytes in all."""
    head, tail = template.encode().split(b"ITEMS")
    count = (size - len(head) - len(tail) - 2) // 3
    return head + b"[" + b",".join([b"{}"] * count) + b"]" + tail


# -- 2. authentication before the body, and a body limit on every route ------------------------------
ASSET = '{"title": "a", "dataScopes": ITEMS}'
MODULE = '{"apiName": "m", "title": "m", "description": "", "definition": {"functions": ITEMS}}'
CATALOG_BODIES = {
    "/assets/v1/assets": ASSET,
    "/assets/v1/runs": '{"title": "r", "start": {"seconds": 1}, "dataScopes": ITEMS}',
    "/scout/v2/module": MODULE,
    "/scout/v2/module/batch-get": '{"requests": ITEMS}',
}


async def test_unauthenticated_bodies_are_refused_401_unread(edge: ServerProcess) -> None:
    """Issue 44 finding 2: 1-3 MB of empty items to POST /assets/v1/assets, /assets/v1/runs and
    /scout/v2/module cost 10-14 s of the event loop each and +2.5 GB before the 401."""
    bodies = {path: empty_items(template, 3 * MiB) for path, template in CATALOG_BODIES.items()}
    before = rss_bytes(edge.pid)
    async with bystander(edge) as b, httpx.AsyncClient(base_url=edge.base_url, timeout=60) as http:
        attack_ends = time.monotonic() + ATTACK_S
        while time.monotonic() < attack_ends:
            for (path, body), headers in itertools.product(bodies.items(), ({}, BAD_TOKEN)):
                started = time.monotonic()
                r = await http.post(
                    path, content=body, headers={"Content-Type": "application/json", **headers}
                )
                took = time.monotonic() - started
                assert r.status_code == 401, (path, r.status_code, r.text[:300])
                assert r.json()["errorName"] == "Default:Unauthorized"
                assert took < 3.0, (path, took)
                await asyncio.sleep(PACE_S)
    grown = rss_bytes(edge.pid) - before
    assert grown < 64 * MiB, f"the server's RSS grew by {grown / MiB:.0f} MiB"
    print(b.summary())  # shown with -rP: what the bystander measured
    b.assert_unharmed()


async def test_an_admitted_body_over_the_limit_is_413_as_it_streams(edge: ServerProcess) -> None:
    admin = bearer(["*"], admin=True)
    body = empty_items(ASSET, JSON_BODY_LIMIT + 4096)

    async def chunks() -> Any:  # no Content-Length: the limit is counted as the body arrives
        for i in range(0, len(body), 65536):
            yield body[i : i + 65536]

    async with bystander(edge) as b, httpx.AsyncClient(base_url=edge.base_url, timeout=60) as http:
        attack_ends, rounds = time.monotonic() + ATTACK_S, 0
        while time.monotonic() < attack_ends or rounds == 0:
            rounds += 1
            content = body if rounds % 2 else chunks()
            r = await http.post(
                "/assets/v1/assets", content=content, headers={"Content-Type": "application/json", **admin}
            )
            assert r.status_code == 413, r.text[:300]
            error = r.json()
            assert error["errorName"] == "Default:RequestEntityTooLarge", error
            assert error["parameters"] == {
                "limit": str(JSON_BODY_LIMIT),
                "setting": "SPARKWIRE_MAX_JSON_BODY_BYTES",
            }
            await asyncio.sleep(PACE_S)
        # Within the limit, 350,000 empty items: refused by their count before one is built (JSON
        # parsing and pydantic's validation of each took 5.4 s); 5,000 of them: pydantic refuses the
        # list, longer than its cap, before validating its items.
        for size, says in (
            (JSON_BODY_LIMIT - 4096, "more than 100000 JSON values"),
            (15_000, "at most 1000 items"),
        ):
            started = time.monotonic()
            r = await http.post(
                "/assets/v1/assets",
                content=empty_items(ASSET, size),
                headers={"Content-Type": "application/json", **admin},
            )
            took = time.monotonic() - started
            assert r.status_code == 400 and says in r.text, r.text[:300]
            assert took < 1.0, took
        # A JSON body nested deeper than the WebSocket's messages may be is refused before parsing.
        r = await http.post("/scout/v2/module/search", content=b"[" * 5000 + b"]" * 5000, headers={**admin})
        assert r.status_code == 400 and "nested deeper" in r.text, r.text[:300]
        # getEnrichedDatasets has the same limit (it had ingest's 64 MiB)
        rids = json.dumps([f"ri.test.{i:012d}" for i in range(JSON_BODY_LIMIT // 20)]).encode()
        r = await http.post("/catalog/v1/datasets/multiple", content=rids, headers=admin)
        assert r.status_code == 413 and "SPARKWIRE_MAX_JSON_BODY_BYTES" in r.text, r.text[:300]
        # A module search of 1,001 terms (each evaluated per module) is refused before it runs.
        terms = [{"type": "searchText", "searchText": "x"}] * 1001
        r = await http.post(
            "/scout/v2/module/search",
            json={"query": {"type": "or", "or": terms}, "pageSize": 10},
            headers=admin,
        )
        assert r.status_code == 400 and "more than the limit of 1000" in r.text, r.text[:300]
        # And an ordinary request still works.
        rid = unique_rid("asset-scope")
        r = await http.post(
            "/assets/v1/assets",
            json={"title": "ok", "dataScopes": [{"dataScopeName": "s", "dataSourceRid": rid}]},
            headers=admin,
        )
        assert r.status_code == 200, r.text
    print(b.summary())  # shown with -rP: what the bystander measured
    b.assert_unharmed()


# -- 3. request headers on plain HTTP ----------------------------------------------------------------
async def _answered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    """One GET /healthz on a kept-alive connection: its status line and headers."""
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    length = next(
        int(v) for k, _, v in (ln.partition(b":") for ln in head.split(b"\r\n")) if k == b"content-length"
    )
    await reader.readexactly(length)
    return head


async def _stream_header_lines(port: int, line_bytes: int, upto: int) -> tuple[int, bytes]:
    """After one whole GET /healthz on a kept-alive connection, the next request's header lines
    of `line_bytes` each, until the server answers or `upto` bytes were sent; the bytes sent and
    the server's answer to the close."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    first = await _answered(reader, writer)
    assert first.startswith(b"HTTP/1.1 200"), first
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    answer = asyncio.create_task(reader.read())  # to the close
    sent, i = 0, 0
    while not answer.done() and sent < upto:
        line = f"X-Pad-{i}: ".encode() + b"a" * line_bytes + b"\r\n"
        writer.write(line)
        sent, i = sent + len(line), i + 1
        drained = asyncio.ensure_future(writer.drain())
        await asyncio.wait({drained, answer}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        if not drained.done():  # the server stopped reading
            drained.cancel()
            break
        if drained.exception() is not None:  # or closed
            break
    try:
        return sent, await asyncio.wait_for(answer, 15)
    finally:
        writer.close()


async def test_an_idle_kept_alive_connection_outlives_a_clients_pool_and_closes_at_the_deadline(
    edge: ServerProcess,
) -> None:
    """uvicorn closed an idle connection after 5 s, the very age at which httpx's pool retires one:
    a write reusing it at 4.99 s lost its answer (ReadError on CI). Idle, it now lasts until the
    read deadline (handshake-timeout, 10 s by default), then closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", edge.port)
    try:
        assert (await _answered(reader, writer)).startswith(b"HTTP/1.1 200")
        await asyncio.sleep(6.5)  # past uvicorn's 5 s and httpx's expiry
        assert (await _answered(reader, writer)).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 30) == b"", "an idle connection was never closed"
        assert 9.0 < time.monotonic() - started < 15.0
    finally:
        writer.close()


async def test_streamed_request_headers_are_cut_off_with_431(edge: ServerProcess) -> None:
    """Issue 44 finding 3: 20 connections streaming 8 KB header lines after a GET /healthz: 8.4 GB
    accepted until the 10 s read deadline, RSS 213 MB -> 6.2 GB."""
    before = rss_bytes(edge.pid)
    async with bystander(edge) as b:
        attack_ends, results = time.monotonic() + ATTACK_S, []
        while time.monotonic() < attack_ends:  # rounds of 20 connections at once
            started = time.monotonic()
            results += await asyncio.gather(
                *(_stream_header_lines(edge.port, 8192, 16 * MiB) for _ in range(20))
            )
            took = time.monotonic() - started
            assert took < 5.0, took  # answered at the limit, not at the read deadline (10 s)
    grown = rss_bytes(edge.pid) - before
    for sent, answer in results:
        assert answer.startswith(b"HTTP/1.1 431"), (sent, answer[:200])
        body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
        assert body["parameters"]["setting"] == "SPARKWIRE_MAX_HEADER_BYTES", body
        assert sent < 16 * MiB, sent  # cut off: what was sent beyond 64 KiB is what the kernel buffered
    # Before the limit the same attack grew the RSS by 6 GB (issue 44: 213 MB -> 6.2 GB). The bound
    # leaves room for the bystander's own live subscription and writes, which grew it by 55 MiB in
    # two quiet runs with the headers cut off at 64 KiB; it stays well inside the 200 MB.
    assert grown < 128 * MiB, f"the server's RSS grew by {grown / MiB:.0f} MiB"
    print(b.summary())  # shown with -rP: what the bystander measured
    b.assert_unharmed()
    # Many small header lines: the count limit.
    sent, answer = await _stream_header_lines(edge.port, 10, 1 * MiB)
    assert answer.startswith(b"HTTP/1.1 431") and b"SPARKWIRE_MAX_HEADER_COUNT" in answer, answer[:300]
    # Large but reasonable headers (a 30 KB cookie) are still served.
    r = httpx.get(edge.base_url + "/healthz", headers={"Cookie": "c=" + "x" * 30_000})
    assert r.status_code == 200


# -- 11. WebSocket control frames ---------------------------------------------------------------------
def _masked_pings(count: int) -> bytes:
    """`count` client ping frames (masked, empty), as raw bytes."""
    return (b"\x89\x80" + os.urandom(4)) * count


async def test_a_ping_flood_is_closed_1008(edge: ServerProcess) -> None:
    """Issue 44 finding 11: 1.84M control frames in 10 s were answered in full (9.6 s of CPU; the
    bystander's updates p50 93 -> 1,091 ms)."""
    rid = unique_rid("pinger")
    headers = bearer([rid])
    async with bystander(edge) as b:
        # A client pinging now and then, as client libraries do, is served.
        calm = await connect(edge.ws_url, additional_headers=headers)
        for _ in range(5):
            await asyncio.wait_for(await calm.ping(), 10)
            await asyncio.sleep(0.3)
        await still_usable(calm)
        attack_ends = time.monotonic() + ATTACK_S
        while time.monotonic() < attack_ends:  # one flooder after another
            flooder = await connect(edge.ws_url, additional_headers=headers)
            started = time.monotonic()
            transport: Any = flooder.transport
            for _ in range(20):  # up to 2M frames, 12 MB, as fast as the socket takes them
                if transport.is_closing():
                    break
                transport.write(_masked_pings(100_000))
                await asyncio.sleep(0.05)
            assert await close_code(flooder, timeout=30) == 1008
            assert time.monotonic() - started < 10
        await still_usable(calm)
        await calm.close()
    print(b.summary())  # shown with -rP: what the bystander measured
    b.assert_unharmed()


# -- 12. points stamped far ahead ---------------------------------------------------------------------
def _nominal_body(stamps_ns: list[int]) -> bytes:
    request = pb.WriteRequestNominal()
    series = request.series.add()
    series.channel.name = "p"
    for i, t in enumerate(stamps_ns):
        point = series.points.double_points.points.add()
        point.timestamp.seconds, point.timestamp.nanos = divmod(t, NANOS)
        point.value = 10.0 + i
    return request.SerializeToString()


async def test_a_point_stamped_a_century_ahead_is_refused_and_the_live_view_holds(
    edge: ServerProcess,
) -> None:
    """Issue 44 finding 12: a point 100 years ahead moved the append's end to 2126; the next real
    points were late and never shown."""
    rid = unique_rid("future")
    headers = bearer([rid])
    now = time.time_ns()
    async with httpx.AsyncClient(base_url=edge.base_url, headers=headers, timeout=60) as http:
        r = await http.post(WRITE, json=write_body(rid, [(now - NANOS, 1.0)]))
        assert r.status_code == 200, r.text
        client = await Client.connect(edge.ws_url, additional_headers=headers)
        sub_id = new_id()
        await client.subscribe({sub_id: subscription(series_node(), {"x": channel_variable(rid, "p")}, 600)})
        assert (await client.update(sub_id))["type"] == "full"
        century = now + 100 * 365 * 86400 * NANOS
        # JSON and protobuf: refused whole, the point of today beside it included
        refused = [
            await http.post(WRITE, json=write_body(rid, [(now, 2.0), (century, 3.0)])),
            await http.post(
                f"{WRITE}/nominal/{rid}",
                content=_nominal_body([now, century]),
                headers={"Content-Type": "application/x-protobuf"},
            ),
        ]
        for r in refused:
            assert r.status_code == 400, r.text
            error = r.json()
            assert error["errorName"] == "Default:InvalidArgument", error
            assert error["parameters"]["setting"] == "SPARKWIRE_MAX_FUTURE_SECONDS", error
            assert error["parameters"]["limit"] == "60", error
        # a writer's clock a little ahead is within the bound
        r = await http.post(WRITE, json=write_body(rid, [(time.time_ns() + 4 * NANOS, 4.0)]))
        assert r.status_code == 200, r.text
        await asyncio.sleep(5)  # the server's clock passes that point: the next one is on time again
        r = await http.post(WRITE, json=write_body(rid, [(time.time_ns(), 5.0)]))
        assert r.status_code == 200, r.text
        seen: list[float] = []
        deadline = time.monotonic() + 30
        while 5.0 not in seen:
            assert time.monotonic() < deadline, seen
            update = await client.update(sub_id, timeout=30)
            result = update[update["type"]]["result"] if update["type"] in ("full", "append") else None
            if result is not None and result["type"] == "numeric":
                seen += [float(v) for v in result["numeric"]["values"]]
        # nothing of the refused requests was stored, today's points beside the century's included
        assert not {2.0, 3.0, 10.0, 11.0} & set(seen), seen
        await client.close()


# -- 13. invalid UTF-8, deep nesting -----------------------------------------------------------------
async def test_a_text_frame_that_is_not_utf8_is_closed_1007_without_an_error(edge: ServerProcess) -> None:
    ws = await connect(edge.ws_url, additional_headers=bearer([unique_rid("utf8")]))
    frame = b"\xc3\x28 not utf-8"
    mask = os.urandom(4)
    masked = bytes(c ^ mask[i % 4] for i, c in enumerate(frame))
    transport: Any = ws.transport
    transport.write(b"\x81" + struct.pack("B", 0x80 | len(frame)) + mask + masked)
    assert await close_code(ws, timeout=30) == 1007
    await asyncio.sleep(0.5)  # the log line is written
    log = edge.log_text()
    assert "not UTF-8" in log  # one INFO line says why the connection was closed
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]  # uvicorn logged both


@pytest.mark.parametrize("size", ["small", "large"])  # on the event loop; in a decode worker
def test_an_ingest_body_nested_5000_deep_is_a_400(edge: ServerProcess, size: str) -> None:
    rid = unique_rid("nested")
    nested = b'{"a":' * 5000 + b"1" + b"}" * 5000
    pad = b" " * (70_000 if size == "large" else 0)
    body = b'{"dataSourceRid": "' + rid.encode() + b'", "batches": [], "x": ' + nested + pad + b"}"
    r = httpx.post(edge.base_url + WRITE, content=body, headers=bearer([rid]), timeout=60)
    assert r.status_code == 400, r.text[:300]
    assert "nested deeper than 64" in r.json()["message"]
