"""The attacks of docs/reliability-and-security.md ("Attacks tried"), replayed against a real server
with authentication on: what a trusted server answers, and that its log holds no traceback."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest
import websockets

from tests.conftest import ServerProcess, start_server
from tests.hostile import (
    client_message_errors,
    connect,
    frames_until,
    make_jwt,
    still_usable,
    unique_rid,
    write_body,
)
from tests.wire import channel_variable, series_node, subscription

pytestmark = pytest.mark.server

SECRET = "hostile-secret-that-is-long-enough-for-hs256"
LINGER_S = 12.0
READ_DEADLINE_S = 3.0
WRITE = "/storage/writer/v1"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("hostile")
    proc = start_server(
        base / "data",
        base / "server.log",
        env={
            "SPARKWIRE_JWT_SECRET": SECRET,
            "SPARKWIRE_RESUME_LINGER_SECONDS": str(LINGER_S),
            "SPARKWIRE_INGEST_DECODE_MIN_BYTES": "65536",  # the 120 KB body goes to a decode worker
            "SPARKWIRE_HANDSHAKE_TIMEOUT": str(READ_DEADLINE_S),
            "SPARKWIRE_MAX_LINGERING_PER_CONNECTION": "4",
            "SPARKWIRE_MAX_LINGERING_COMPUTATIONS": "6",
            "SPARKWIRE_MAX_REPLAYS_PER_CONNECTION": "2",
            "SPARKWIRE_MAX_REPLAYS": "3",
        },
    )
    yield proc
    proc.stop()
    assert "Traceback" not in proc.log_text(), proc.log_text()[-4000:]


def token(rids: list[str], admin: bool = False) -> str:
    if not admin:
        return make_jwt(SECRET, rids, 600)
    return jwt.encode(
        {"sub": "ops", "dataSourceRids": rids, "admin": True, "exp": int(time.time()) + 600}, SECRET
    )


def bearer(rids: list[str], admin: bool = False) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(rids, admin)}"}


def now_points(n: int = 3) -> list[tuple[int, float]]:
    now = time.time_ns()
    return [(now - (n - i) * 10_000_000, float(i)) for i in range(n)]


# -- 1. tenant data ------------------------------------------------------------------------------
def test_the_series_catalog_shows_a_token_only_its_data_sources(guarded: ServerProcess) -> None:
    alice, bob = unique_rid("alice"), unique_rid("bob")
    for rid in (alice, bob):
        body = write_body(rid, now_points())
        body["batches"][0]["tags"] = {"pilot": f"pilot-of-{rid}"}
        assert httpx.post(guarded.base_url + WRITE, json=body, headers=bearer([rid])).status_code == 200
    url = guarded.base_url + "/series"
    anonymous = httpx.get(url)
    assert anonymous.status_code == 401, anonymous.text
    assert alice not in anonymous.text and bob not in anonymous.text
    assert anonymous.json()["errorName"] == "Default:Unauthorized"
    seen = httpx.get(url, headers=bearer([alice])).json()
    assert {s["dataSourceRid"] for s in seen} == {alice}
    assert seen[0]["tags"] == {"pilot": f"pilot-of-{alice}"}
    assert httpx.get(url, headers=bearer(["ri.nobody.*"])).json() == []
    both = {s["dataSourceRid"] for s in httpx.get(url, headers=bearer([alice, bob])).json()}
    assert {alice, bob} <= both


def test_metrics_name_no_data_source_unless_opted_in(guarded: ServerProcess) -> None:
    text = httpx.get(guarded.base_url + "/metrics").text
    assert "sparkwire_late_points_dropped_total " in text  # one unlabelled count
    assert "data_source=" not in text
    assert "ri.test." not in text


# -- 2. JSON depth -------------------------------------------------------------------------------
def _raw_request(sock: socket.socket, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """One HTTP/1.1 request on an open socket (kept alive), and its status and body."""
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sock.sendall(head.encode() + body)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server dropped the keep-alive connection"
        data += chunk
    header, rest = data.split(b"\r\n\r\n", 1)
    length = next(
        int(line.split(b":", 1)[1])
        for line in header.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server dropped the connection mid-answer"
        rest += chunk
    return int(header.split(b" ", 2)[1]), rest


def nested(levels: int, pad_to: int = 0) -> bytes:
    rid = "ri.test.deep"
    inner = b"[" * levels + b"]" * levels
    body = b'{"dataSourceRid": "%s", "pad": "%s", "batches": %s}' % (rid.encode(), b"x" * pad_to, inner)
    return body


@pytest.mark.parametrize("levels", [100, 1_000, 100_000])
def test_deeply_nested_json_is_a_400_and_the_connection_stays(guarded: ServerProcess, levels: int) -> None:
    rid = unique_rid("deep")
    auth = bearer(["*"])
    good = json.dumps(write_body(rid, now_points())).encode()
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=30) as sock:
        for body in (nested(levels), nested(levels, pad_to=120_000)):  # the event loop's, the worker's
            status, answer = _raw_request(sock, WRITE, body, auth)
            assert status == 400, answer[:300]
            error = json.loads(answer)
            assert error["errorName"] == "Default:InvalidArgument"
            assert "nested deeper than" in error["message"]
            status, answer = _raw_request(sock, WRITE, good, auth)  # the next request on that connection
            assert status == 200, answer[:300]
        status, answer = _raw_request(
            sock, "/catalog/v1/datasets/multiple", b"[" * levels + b"]" * levels, auth
        )
        assert status == 400, answer[:300]


# -- 3. the six WebSocket messages ---------------------------------------------------------------
def _sub(
    rid: str, data_source: dict[str, Any] | None = None, window_s: float = 10, **sparkwire: Any
) -> dict[str, Any]:
    variable = channel_variable(rid, "p")
    variable["channel"]["dataSource"].update(data_source or {})
    sub = subscription(series_node(), {"x": variable}, window_s)
    if sparkwire:
        sub["sparkwire"] = sparkwire
    return sub


async def test_malformed_websocket_messages_are_answered_and_the_connection_stays(
    guarded: ServerProcess,
) -> None:
    rid = unique_rid("ws")
    ws = await connect(guarded.ws_url, additional_headers=bearer([rid]))
    try:
        cases: list[dict[str, Any]] = [
            {"type": "subscribe", "subscribe": {"a": _sub(rid, {"tagsToGroupBy": 1.5})}},
            {"type": "subscribe", "subscribe": {"b": _sub(rid, {"groupByTags": 5})}},
            {"type": "unsubscribe", "unsubscribe": ["never-subscribed"]},
            {"type": "subscribe", "subscribe": {}},
        ]
        for message in cases:
            await ws.send(json.dumps(message))
            before = await still_usable(ws)
            assert len(client_message_errors(before)) == 1, (message, before)
        # a replay from before year 1: refused as its creation, by name
        huge = {"start": {"seconds": -1099511627776, "nanos": 0}, "end": {"seconds": 10, "nanos": 0}}
        await ws.send(json.dumps({"type": "subscribe", "subscribe": {"r": _sub(rid, replay=huge)}}))
        frame, _ = await frames_until(ws, lambda f: f["type"] == "subscriptionCreation")
        creation = frame["subscriptionCreation"]["creation"]
        assert creation["type"] == "error", creation
        assert creation["error"]["serializableError"]["name"].endswith("ReplayOutOfRange"), creation
        await still_usable(ws)
    finally:
        await ws.close()


async def test_update_token_with_authentication_off_is_answered(server: ServerProcess) -> None:
    ws = await connect(server.ws_url)
    try:
        await ws.send(json.dumps({"type": "updateToken", "updateToken": {"token": "whatever"}}))
        errors = client_message_errors(await still_usable(ws))
        assert len(errors) == 1 and "authentication is off" in json.dumps(errors[0])
    finally:
        await ws.close()


# -- 9. refused handshakes write no ERROR line ---------------------------------------------------
async def test_refused_handshakes_are_not_errors(guarded: ServerProcess) -> None:
    for headers in ({}, {"Authorization": "Bearer forged"}):
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(guarded.ws_url, additional_headers=headers)
        assert refused.value.response.status_code == 401
    await asyncio.sleep(0.5)
    assert "without completing handshake" not in guarded.log_text()
    assert " ERROR " not in guarded.log_text()


# -- 6. the resume linger is honoured exactly ----------------------------------------------------
async def test_a_computation_dropped_at_once_lingers_the_whole_linger(guarded: ServerProcess) -> None:
    rid = unique_rid("linger")
    assert httpx.post(
        guarded.base_url + WRITE, json=write_body(rid, now_points()), headers=bearer([rid])
    ).is_success
    ws = await connect(guarded.ws_url, additional_headers=bearer([rid]))
    admin = bearer(["*"], admin=True)

    def listed() -> bool:
        entries = httpx.get(guarded.base_url + "/computations", headers=admin).json()
        return any(s["dataSourceRid"] == rid for e in entries for s in e["series"])

    try:
        await ws.send(json.dumps({"type": "subscribe", "subscribe": {"l": _sub(rid, resume=True)}}))
        await frames_until(ws, lambda f: f["type"] == "subscriptionUpdate", 120)
        await ws.send(json.dumps({"type": "unsubscribe", "unsubscribe": ["l"]}))
        left = time.monotonic()
        await still_usable(ws)
    finally:
        await ws.close()
    await asyncio.sleep(max(0.0, left + 6.0 - time.monotonic()))  # past the creation check's 5 s
    assert listed(), "released before the linger"
    await asyncio.sleep(max(0.0, left + LINGER_S + 3.0 - time.monotonic()))
    assert not listed(), "still live well after the linger"


# -- 4. one read deadline for every request --------------------------------------------------------
def _closed_within(sock: socket.socket, seconds: float, dribble: bytes = b"", every: float = 0.5) -> float:
    """Dribble `dribble` a byte at a time until the server closes; how long that took."""
    started = time.monotonic()
    sock.setblocking(False)
    sent = 0
    while time.monotonic() - started < seconds:
        try:
            if sock.recv(65536) == b"":
                return time.monotonic() - started
        except BlockingIOError:
            pass
        except ConnectionResetError:
            return time.monotonic() - started
        if sent < len(dribble):
            try:
                sock.send(dribble[sent : sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - started
            sent += 1
        time.sleep(every)
    raise AssertionError(f"the server held the slow connection for {seconds}s")


def _health(sock: socket.socket) -> None:
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_headers_dribbled_after_a_first_request_are_cut_off(guarded: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=10) as sock:
        _health(sock)
        took = _closed_within(sock, 20, b"GET /healthz HTTP/1.1\r\n" + b"X-Slow: " + b"y" * 100)
    assert took < READ_DEADLINE_S + 2


def test_a_body_dribbled_a_byte_at_a_time_is_cut_off(guarded: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=10) as sock:
        _health(sock)
        head = f"POST {WRITE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        head += f"Authorization: Bearer {token(['*'])}\r\nContent-Length: 1000\r\n\r\n"
        sock.sendall(head.encode())
        took = _closed_within(sock, 20, b"{" * 1000)
    assert took < READ_DEADLINE_S + 2


def test_a_slow_but_steady_body_is_taken(guarded: ServerProcess) -> None:
    rid = unique_rid("steady")
    body = json.dumps(write_body(rid, now_points(2000))).encode()  # ~100 KB, sent over ~5 s
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=30) as sock:
        head = f"POST {WRITE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        head += f"Authorization: Bearer {token([rid])}\r\nContent-Length: {len(body)}\r\n\r\n"
        sock.sendall(head.encode())
        step = len(body) // 20 + 1
        for i in range(0, len(body), step):
            sock.sendall(body[i : i + step])
            time.sleep(0.25)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_an_oversized_upgrade_header_gets_its_431(guarded: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=10) as sock:
        request = (
            "GET /persistent-compute/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            f"X-Big: {'b' * 9000}\r\n\r\n"
        )
        sock.sendall(request.encode())
        answer = b""
        while chunk := sock.recv(65536):  # read to the close
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]


# -- 5. churn leaks nothing ---------------------------------------------------------------------------
def metric(base_url: str, name: str) -> float:
    for line in httpx.get(base_url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def listed(base_url: str, rid: str) -> list[dict[str, Any]]:
    entries = httpx.get(base_url + "/computations", headers=bearer(["*"], admin=True)).json()
    return [e for e in entries if any(s["dataSourceRid"] == rid for s in e["series"])]


async def test_subscribe_unsubscribe_churn_leaves_nothing_behind(guarded: ServerProcess) -> None:
    rid = unique_rid("churn")
    assert httpx.post(
        guarded.base_url + WRITE, json=write_body(rid, now_points()), headers=bearer([rid])
    ).is_success
    subscribe = json.dumps({"type": "subscribe", "subscribe": {"c": _sub(rid)}})
    unsubscribe = json.dumps({"type": "unsubscribe", "unsubscribe": ["c"]})

    async def churn() -> None:
        ws = await connect(guarded.ws_url, additional_headers=bearer([rid]))
        try:
            for i in range(600):
                await ws.send(subscribe if i % 2 == 0 else unsubscribe)
                await asyncio.sleep(0.011)
        finally:
            await ws.close()

    await asyncio.gather(*(churn() for _ in range(4)))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (
        metric(guarded.base_url, "sparkwire_subscriptions") or listed(guarded.base_url, rid)
    ):
        await asyncio.sleep(0.5)
    assert metric(guarded.base_url, "sparkwire_subscriptions") == 0
    assert metric(guarded.base_url, "sparkwire_connections") == 0
    assert listed(guarded.base_url, rid) == []


# -- 6. lingering computations count against who left them ------------------------------------------
async def _leave_lingering(guarded: ServerProcess, rid: str, windows: list[int]) -> None:
    ws = await connect(guarded.ws_url, additional_headers=bearer([rid]))
    try:
        subs = {f"w{w}": _sub(rid, window_s=w, resume=True) for w in windows}
        await ws.send(json.dumps({"type": "subscribe", "subscribe": subs}))
        waiting = set(subs)
        while waiting:
            frame, _ = await frames_until(ws, lambda f: f["type"] == "subscriptionUpdate", 120)
            waiting.discard(frame["subscriptionUpdate"]["subscriptionId"])
        await ws.send(json.dumps({"type": "unsubscribe", "unsubscribe": list(subs)}))
        await still_usable(ws)
    finally:
        await ws.close()


async def test_lingering_computations_are_capped_per_connection_and_server(guarded: ServerProcess) -> None:
    rid = unique_rid("lingercap")
    assert httpx.post(
        guarded.base_url + WRITE, json=write_body(rid, now_points()), headers=bearer([rid])
    ).is_success
    await _leave_lingering(guarded, rid, [20, 21, 22, 23, 24, 25])  # 6 left: the connection's cap is 4
    windows = sorted(e["window"]["seconds"] for e in listed(guarded.base_url, rid))
    assert windows == [22, 23, 24, 25], windows  # its oldest two went at once
    await _leave_lingering(guarded, rid, [30, 31, 32, 33])  # 8 in all: the server's cap is 6
    windows = sorted(e["window"]["seconds"] for e in listed(guarded.base_url, rid))
    assert windows == [24, 25, 30, 31, 32, 33], windows
    assert metric(guarded.base_url, "sparkwire_lingering_computations") <= 6
    assert metric(guarded.base_url, 'sparkwire_limit{name="max_lingering_computations"}') == 6
    assert metric(guarded.base_url, 'sparkwire_lingering_released_early_total{cap="connection"}') >= 2
    assert metric(guarded.base_url, 'sparkwire_lingering_released_early_total{cap="server"}') >= 2


# -- 7. replays are capped and visible -----------------------------------------------------------------
def _replay_sub(rid: str) -> dict[str, Any]:
    now = time.time()
    span = {"start": {"seconds": int(now) - 60, "nanos": 0}, "end": {"seconds": int(now), "nanos": 0}}
    return _sub(rid, replay={**span, "speed": 0.01})  # slow: it plays for the whole test


async def _creations(ws: Any, ids: set[str]) -> dict[str, dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    while set(seen) != ids:
        frame, _ = await frames_until(ws, lambda f: f["type"] == "subscriptionCreation", 120)
        seen[frame["subscriptionCreation"]["subscriptionId"]] = frame["subscriptionCreation"]["creation"]
    return seen


async def test_replays_are_capped_per_connection_and_server_and_shown(guarded: ServerProcess) -> None:
    rid = unique_rid("replays")
    points = [(time.time_ns() - s * 1_000_000_000, float(s)) for s in range(50, 0, -1)]
    assert httpx.post(
        guarded.base_url + WRITE, json=write_body(rid, points), headers=bearer([rid])
    ).is_success
    first = await connect(guarded.ws_url, additional_headers=bearer([rid]))
    second = await connect(guarded.ws_url, additional_headers=bearer([rid]))
    try:
        await first.send(
            json.dumps({"type": "subscribe", "subscribe": {f"r{i}": _replay_sub(rid) for i in range(3)}})
        )
        made = await _creations(first, {"r0", "r1", "r2"})
        refused = [c["error"]["serializableError"] for c in made.values() if c["type"] == "error"]
        assert len(refused) == 1 and refused[0]["name"] == "PersistentCompute:TooManyReplays", made
        assert refused[0]["params"]["setting"] == "SPARKWIRE_MAX_REPLAYS_PER_CONNECTION"
        await second.send(json.dumps({"type": "subscribe", "subscribe": {"s0": _replay_sub(rid)}}))
        assert (await _creations(second, {"s0"}))["s0"]["type"] == "success"
        await second.send(json.dumps({"type": "subscribe", "subscribe": {"s1": _replay_sub(rid)}}))
        over = (await _creations(second, {"s1"}))["s1"]
        assert over["type"] == "error", over
        assert over["error"]["serializableError"]["params"]["setting"] == "SPARKWIRE_MAX_REPLAYS"
        assert metric(guarded.base_url, "sparkwire_replays") == 3
        assert metric(guarded.base_url, "sparkwire_subscriptions") >= 3
        replays = [e for e in listed(guarded.base_url, rid) if e["replay"]]
        assert len(replays) == 3 and len({e["id"] for e in replays}) == 3
        one = httpx.get(
            f"{guarded.base_url}/computations/{replays[0]['id']}", headers=bearer(["*"], admin=True)
        )
        assert one.status_code == 200 and one.json()["replay"] is True
    finally:
        await first.close()
        await second.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and metric(guarded.base_url, "sparkwire_replays"):
        await asyncio.sleep(0.2)
    assert metric(guarded.base_url, "sparkwire_replays") == 0
    assert [e for e in listed(guarded.base_url, rid) if e["replay"]] == []
