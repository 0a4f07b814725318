"""Fuzzing a running server with hypothesis: random and mutated ClientMessages on one WebSocket,
random and mutated ingest bodies over HTTP. The server never crashes, always answers (every
message is followed by a ping that must get its pong; every body gets 200 or a 400 error), every
frame decodes as a ServerMessage, and a refused write stores nothing at all."""

from __future__ import annotations

import datetime
import itertools
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import ClientConnection, connect

from tests.conftest import ServerProcess
from tests.hostile import pong_message, stored_points
from tests.wire import NANOS, channel_variable, decode_server_message, series_node, subscription, ts

FUZZ_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same examples each run: a failure here is reproducible
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
RID = f"ri.fuzz.{uuid.uuid4().hex[:12]}"
SUBSCRIPTION_IDS = [str(uuid.UUID(int=i + 1)) for i in range(6)]  # few ids: re-use replaces
_pings = itertools.count()

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """`value` with 1-3 random edits somewhere inside: replace, delete, retype, wrap."""
    value = json.loads(json.dumps(value))
    for _ in range(draw(st.integers(1, 3))):
        value = _edit(draw, value)
    return value


def _edit(draw: st.DrawFn, value: Any) -> Any:
    children: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        children = list(value.items())
    elif isinstance(value, list):
        children = list(enumerate(value))
    if children and draw(st.booleans()):  # go deeper
        key, child = draw(st.sampled_from(children))
        value[key] = _edit(draw, child)
        return value
    op = draw(st.sampled_from(["replace", "delete", "wrap", "stringify", "type"]))
    if op == "delete" and children:
        key, _ = draw(st.sampled_from(children))
        del value[key]
        return value
    if op == "wrap":
        return [value]
    if op == "stringify":
        return json.dumps(value)
    if op == "type" and isinstance(value, dict) and "type" in value:
        value["type"] = draw(
            st.sampled_from(["double", "string", "subscribe", "ping", "series", "numeric", "x"])
        )
        return value
    return draw(json_values)


def iso(i: int) -> str:
    return (
        datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(microseconds=i)
    ).isoformat()


def _instant(text: str) -> datetime.datetime:
    """The same instant compares equal however it is written (`Z` or `+00:00`)."""
    return datetime.datetime.fromisoformat(text)


# -- ClientMessages ------------------------------------------------------------------------------

subscriptions = st.builds(
    lambda channel, window, buckets, min_delay, appends: subscription(
        series_node(buckets=buckets),
        {"x": channel_variable(RID, channel)},
        window,
        min_delay_ms=min_delay,
        allow_appends=appends,
    ),
    st.sampled_from(["a", "b"]),
    st.sampled_from([60.0, 3600.0]),
    st.sampled_from([None, 10]),
    st.integers(0, 2000),
    st.booleans(),
)
valid_messages = st.one_of(
    st.builds(lambda i: {"type": "ping", "ping": {"sentAt": iso(i)}}, st.integers(0, 10**9)),
    st.builds(
        lambda i: {"type": "pong", "pong": {"pingOriginallySentAt": iso(i), "sentAt": iso(i + 1)}},
        st.integers(0, 10**9),
    ),
    st.builds(
        lambda ids: {"type": "unsubscribe", "unsubscribe": ids}, st.lists(st.sampled_from(SUBSCRIPTION_IDS))
    ),
    st.builds(
        lambda subs: {"type": "subscribe", "subscribe": subs},
        st.dictionaries(st.sampled_from(SUBSCRIPTION_IDS), subscriptions, min_size=1, max_size=2),
    ),
    st.builds(lambda t: {"type": "updateToken", "updateToken": {"token": t}}, st.text(max_size=30)),
)
client_frames = st.one_of(
    valid_messages.map(json.dumps),
    valid_messages.flatmap(mutated).map(json.dumps),
    json_values.map(json.dumps),
    st.text(max_size=200),
    st.binary(max_size=200),
)


@pytest.fixture(scope="module")
def ws(server: ServerProcess) -> Iterator[ClientConnection]:
    with connect(server.ws_url, max_size=None) as conn:
        yield conn


def answered(ws: ClientConnection) -> list[dict[str, Any]]:
    """Send a ping and read every frame up to its pong; each must decode as a ServerMessage."""
    sent_at = iso(10**12 + next(_pings))
    ws.send(json.dumps({"type": "ping", "ping": {"sentAt": sent_at}}))
    frames = []
    deadline = time.monotonic() + 60
    while True:
        text = ws.recv(timeout=max(0.1, deadline - time.monotonic()))
        assert isinstance(text, str)
        decode_server_message(text)  # raises if nominal-api cannot decode it
        frame = json.loads(text)
        if (pong := pong_message(frame)) is not None:
            ws.send(pong)
        health = frame.get("health", {})
        # a dropped message would be this ping: fail now rather than wait for a pong that never comes
        notice = health.get("clientMessageError", {}).get("error", {}).get("message", "")
        assert "messages per second" not in notice, f"the test outran the message rate limit: {notice}"
        if health.get("type") == "pong" and _instant(health["pong"]["pingOriginallySentAt"]) == _instant(
            sent_at
        ):
            return frames
        frames.append(frame)


@FUZZ_SETTINGS
@given(frame=client_frames)
def test_random_and_mutated_client_messages_never_break_the_connection(
    server: ServerProcess, ws: ClientConnection, frame: str | bytes
) -> None:
    ws.send(frame)
    answered(ws)
    # 2-3 messages per example: 50 ms keeps them well under the default 100 messages/s (burst 200),
    # which hypothesis's fast shrinking runs would otherwise exceed
    time.sleep(0.05)


# -- ingest bodies -------------------------------------------------------------------------------

_cases = itertools.count()
_origin = time.time_ns() - 1800 * NANOS


@st.composite
def ingest_bodies(draw: st.DrawFn) -> tuple[str, Any]:
    """(case tag, body): a valid WriteBatchesRequest for a unique case, maybe mutated, or junk."""
    case = f"case-{next(_cases)}-{uuid.uuid4().hex[:8]}"
    batches = []
    for b in range(draw(st.integers(1, 3))):
        count = draw(st.integers(1, 5))
        kind = draw(st.sampled_from(["double", "string"]))
        values: list[Any] = (
            draw(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=count, max_size=count))
            if kind == "double"
            else draw(st.lists(st.text(max_size=8), min_size=count, max_size=count))
        )
        start = _origin + hash(case) % 10**9 * 1000 + b * 1000
        points = [{"timestamp": ts(start + i), "value": v} for i, v in enumerate(values)]
        batches.append(
            {"channel": f"{kind}-{b}", "tags": {"case": case}, "points": {"type": kind, kind: points}}
        )
    body: Any = {"dataSourceRid": RID, "batches": batches}
    shape = draw(st.sampled_from(["valid", "mutated", "mutated", "junk"]))
    if shape == "mutated":
        body = draw(mutated(body))
    elif shape == "junk":
        body = draw(json_values)
    return case, body


@pytest.fixture(scope="module")
def outcomes() -> dict[str, list[Any]]:
    return {"accepted": [], "refused": []}


@FUZZ_SETTINGS
@given(drawn=ingest_bodies(), cut=st.integers(0, 9))
def test_random_and_mutated_ingest_bodies_get_200_or_400(
    server: ServerProcess, outcomes: dict[str, list[Any]], drawn: tuple[str, Any], cut: int
) -> None:
    case, body = drawn
    content = json.dumps(body).encode()
    if cut == 0:  # sometimes not even JSON: cut the body short
        content = content[: len(content) // 2]
    response = httpx.post(f"{server.base_url}/storage/writer/v1", content=content, timeout=60)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        error = response.json()
        assert error["name"] == "Default:InvalidArgument" and error["statusCode"] == 400
        outcomes["refused"].append(case)
    else:
        outcomes["accepted"].append(body)


def test_refused_writes_stored_nothing_and_accepted_ones_everything(
    server: ServerProcess, outcomes: dict[str, list[Any]]
) -> None:
    """After the fuzzing above: the log holds exactly the points of the accepted bodies."""
    accepted, refused = outcomes["accepted"], outcomes["refused"]
    assert len(accepted) >= 10 and len(refused) >= 10, (len(accepted), len(refused))
    expected = sum(
        len(batch["points"][batch["points"]["type"]])
        for body in accepted
        if isinstance(body, dict) and body.get("dataSourceRid") == RID
        for batch in body["batches"]
    )
    stored = stored_points(server.data_dir, RID)
    assert sum(stored.values()) == expected
    assert httpx.get(f"{server.base_url}/healthz").status_code == 200
    assert server.process.poll() is None
