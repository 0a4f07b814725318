"""Hostile fuzzing, bounded in time (each test stops drawing after BUDGET_S): mutated and random
WebSocket client messages, JSON write bodies and protobuf write bodies, with the values an attacker
reaches for (huge and negative numbers, wrong types, deep nesting, long strings). What must hold:
never a 5xx, never a connection dropped without a close code and a reason, never a traceback or an
ERROR line in the server's log."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nominal.protos.write import nominal_write_pb2 as pb
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.conftest import ServerProcess, start_server
from tests.hostile import pong_message, write_body
from tests.wire import channel_variable, decode_server_or_extension, series_node, subscription

pytestmark = pytest.mark.server

BUDGET_S = 8.0  # per test: the three stay under half a minute once the server is up
FUZZ = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,  # the same examples each run: a failure is reproducible
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
RID = f"ri.hostile-fuzz.{uuid.uuid4().hex[:12]}"

hostile_leaves = st.sampled_from(
    [
        None,
        True,
        0,
        -1,
        1.5,
        5,
        -1099511627776,
        2**63,
        -(2**63) - 1,
        2**64,
        1e308,
        -1e308,
        "",
        "x" * 5000,
        "é",
    ]
)
hostile_values = st.recursive(
    hostile_leaves | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


def deep(levels: int) -> str:
    """A marker that `dumps` turns into `levels` nested arrays (hypothesis never holds, nor prints,
    the nesting as Python objects)."""
    return f"@deep{levels}@"


def dumps(value: Any) -> str:
    text = json.dumps(value)
    for levels in DEPTHS:
        text = text.replace(json.dumps(deep(levels)), "[" * levels + "0" + "]" * levels)
    return text


DEPTHS = (70, 500, 5000)


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """`value` with 1-3 edits somewhere inside: a field replaced by a hostile value, deleted, or
    buried under nesting."""
    value = json.loads(json.dumps(value))
    for _ in range(draw(st.integers(1, 3))):
        value = _edit(draw, value)
    return value


def _edit(draw: st.DrawFn, value: Any) -> Any:
    children = (
        list(value.items())
        if isinstance(value, dict)
        else list(enumerate(value))
        if isinstance(value, list)
        else []
    )
    if not children or draw(st.integers(0, 3)) == 0:
        return draw(hostile_values | st.builds(deep, st.sampled_from(DEPTHS)))
    key, child = children[draw(st.integers(0, len(children) - 1))]
    if draw(st.integers(0, 5)) == 0:
        if isinstance(value, dict):
            del value[key]
        else:
            value.pop(key)
        return value
    value[key] = _edit(draw, child)
    return value


def _subscription(extension: dict[str, Any] | None) -> dict[str, Any]:
    sub = subscription(series_node(), {"x": channel_variable(RID, "p", group_by=["g"])}, 10)
    if extension is not None:
        sub["sparkwire"] = extension
    return sub


NOW = int(time.time())
BASE_MESSAGES: list[Any] = [
    {"type": "subscribe", "subscribe": {"a": _subscription(None)}},
    {"type": "subscribe", "subscribe": {"b": _subscription({"resume": True, "lateReports": True})}},
    {
        "type": "subscribe",
        "subscribe": {
            "c": _subscription(
                {"replay": {"start": {"seconds": NOW - 60, "nanos": 0}, "end": {"seconds": NOW, "nanos": 0}}}
            )
        },
    },
    {"type": "unsubscribe", "unsubscribe": ["a", "b", "c"]},
    {"type": "updateToken", "updateToken": {"token": "t"}},
    {"type": "ping", "ping": {"sentAt": "2026-01-01T00:00:00Z"}},
]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("hostile-fuzz")
    env = {"SPARKWIRE_MAX_MESSAGES_PER_SECOND": "100000", "SPARKWIRE_INGEST_DECODE_MIN_BYTES": "4096"}
    proc = start_server(base / "data", base / "server.log", env=env)
    yield proc
    proc.stop()


class Socket:
    """One WebSocket, re-opened when the server closed it (with a code and a reason, or the test fails)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ws: ClientConnection | None = None
        self.pings = 0

    def open(self) -> ClientConnection:
        if self.ws is None:
            self.ws = connect(self.url, max_size=None)
        return self.ws

    def answered(self, text: str) -> None:
        """Send, then a ping: every frame until its pong decodes as a ServerMessage, or as an extension
        message (BASE_MESSAGES ask for replays and late reports, whose frames may come later)."""
        ws = self.open()
        self.pings += 1
        sent_at = f"2026-01-01T00:00:{self.pings % 60:02d}.{self.pings:06d}Z"
        try:
            ws.send(text)
            ws.send(json.dumps({"type": "ping", "ping": {"sentAt": sent_at}}))
            while True:
                frame_text = ws.recv(timeout=30)
                assert isinstance(frame_text, str)
                decode_server_or_extension(frame_text)
                frame = json.loads(frame_text)
                if (pong := pong_message(frame)) is not None:
                    ws.send(pong)
                health = frame.get("health", {})
                if health.get("type") == "pong" and health["pong"]["pingOriginallySentAt"] == sent_at:
                    return
        except ConnectionClosed as closed:
            self.ws = None
            assert closed.rcvd is not None, "the server dropped the connection without a close frame"
            assert closed.rcvd.code and closed.rcvd.reason, f"closed {closed.rcvd.code} with no reason"


@pytest.fixture(scope="module")
def socket_(fuzzed: ServerProcess) -> Iterator[Socket]:
    sock = Socket(fuzzed.ws_url)
    yield sock
    if sock.ws is not None:
        sock.ws.close()


class Budget:
    def __init__(self) -> None:
        self.ends: dict[str, float] = {}

    def spent(self, name: str) -> bool:
        end = self.ends.setdefault(name, time.monotonic() + BUDGET_S)
        return time.monotonic() > end


BUDGET = Budget()


@FUZZ
@given(message=st.sampled_from(BASE_MESSAGES).flatmap(mutated) | hostile_values)
def test_websocket_messages(socket_: Socket, message: Any) -> None:
    if BUDGET.spent("ws"):
        return
    socket_.answered(dumps(message))


def _conjure_error(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text[:500]
    if response.status_code >= 400:
        body = response.json()
        assert {"errorCode", "errorName", "errorInstanceId"} <= body.keys(), body


JSON_BASE = write_body(RID, [(1_700_000_000_000_000_000 + i, float(i)) for i in range(3)])
BIG_JSON = write_body(RID, [(1_700_000_000_000_000_000 + i, float(i)) for i in range(200)])  # to the worker


@FUZZ
@given(body=st.sampled_from([JSON_BASE, BIG_JSON]).flatmap(mutated) | hostile_values)
def test_json_writer(fuzzed: ServerProcess, body: Any) -> None:
    if BUDGET.spent("json"):
        return
    content = dumps(body).encode()
    _conjure_error(httpx.post(f"{fuzzed.base_url}/storage/writer/v1", content=content, timeout=60))


def _protobuf_base() -> bytes:
    request = pb.WriteRequestNominal()
    series = request.series.add()
    series.channel.name = "p"
    series.tags["g"] = "1"
    for i in range(5):
        point = series.points.double_points.points.add()
        point.timestamp.seconds, point.timestamp.nanos = 1_700_000_000 + i, 0
        point.value = float(i)
    return request.SerializeToString()


PROTOBUF_BASE = _protobuf_base()


@st.composite
def protobuf_bodies(draw: st.DrawFn) -> bytes:
    """A valid body with bytes flipped, cut or inserted, or random bytes."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.binary(max_size=200))
    body = bytearray(PROTOBUF_BASE)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(body)))
        edit = draw(st.sampled_from(["flip", "cut", "insert"]))
        if edit == "flip" and at < len(body):
            body[at] = draw(st.integers(0, 255))
        elif edit == "cut":
            del body[at:]
        else:
            body[at:at] = draw(st.binary(min_size=1, max_size=12))
    return bytes(body)


@FUZZ
@given(body=protobuf_bodies())
def test_protobuf_writer(fuzzed: ServerProcess, body: bytes) -> None:
    if BUDGET.spent("protobuf"):
        return
    headers = {"Content-Type": "application/x-protobuf"}
    url = f"{fuzzed.base_url}/storage/writer/v1/nominal/{RID}"
    _conjure_error(httpx.post(url, content=body, headers=headers, timeout=60))


def test_the_log_holds_no_traceback_and_no_error(fuzzed: ServerProcess) -> None:
    time.sleep(1.0)  # what the last requests logged
    log = fuzzed.log_text()
    assert "Traceback" not in log, log[-5000:]
    assert " ERROR " not in log, [line for line in log.splitlines() if " ERROR " in line][:5]
