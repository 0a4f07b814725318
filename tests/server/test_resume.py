"""Resume without a re-snapshot (docs/extensions.md): a client that asked for resume tokens and
comes back with the newest one gets only what changed meanwhile, as one AppendResult, and its view
is then the one a fresh FullResult gives; when that cannot be known it gets a FullResult and the
reason. A real server (its own: computations outlive their last subscriber by a few seconds here),
real WebSocket clients, the log and Spark."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
from playwright.async_api import Page

from sparkwire_client import Client as SparkwireClient
from sparkwire_client import numeric_channel, series
from sparkwire_client.view import View
from tests.conftest import ServerProcess, start_server
from tests.server.test_dashboard import reconnected_after_a_point_written_while_away
from tests.server.test_end_to_end import unique_rid
from tests.wire import (
    NANOS,
    Client,
    channel_variable,
    new_id,
    series_node,
    subscription,
    write_points,
)

LINGER_S = 4.0
WINDOW_S = 600.0


@pytest.fixture(scope="module")
def resuming_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("resume")
    env = {"SPARKWIRE_RESUME_LINGER_SECONDS": str(LINGER_S)}
    proc = start_server(base / "data", base / "server.log", env=env)
    yield proc
    proc.stop()


def resumable(rid: str, token: str | None = None, lateness_s: float | None = 300.0) -> dict[str, Any]:
    sub = subscription(series_node(), {"x": channel_variable(rid, "temp")}, WINDOW_S, lateness_s=lateness_s)
    sub["sparkwire"] = {"resume": True} if token is None else {"resumeToken": token}
    return sub


async def envelope(client: Client, sub_id: str, timeout: float = 60) -> dict[str, Any]:
    """The next subscriptionUpdate body (with its extension fields) for `sub_id`."""
    update = await client.update(sub_id, timeout)
    return next(
        f["subscriptionUpdate"]
        for f in reversed(client.frames)
        if f["type"] == "subscriptionUpdate" and f["subscriptionUpdate"]["update"] is update
    )


async def left_with_a_token(server: ServerProcess, rid: str) -> tuple[str, str, Client]:
    """A client that asked for tokens got its first FullResult (of one point) and left: the
    subscription's id, its token, and the (closed) client with the frames it received."""
    await write_points(server.base_url, rid, "temp", [(time.time_ns() - NANOS, 1.0)])
    client = await Client.connect(server.ws_url, strict=False)
    sub_id = new_id()
    await client.subscribe({sub_id: resumable(rid)})
    token = (await envelope(client, sub_id))["resumeToken"]
    await client.close()
    return sub_id, token, client


async def fresh_view(server: ServerProcess, rid: str) -> View:
    """What a client that never left sees: a plain Nominal subscription's FullResult."""
    client = await Client.connect(server.ws_url)
    try:
        sub_id = new_id()
        plain = subscription(series_node(), {"x": channel_variable(rid, "temp")}, WINDOW_S, lateness_s=300.0)
        await client.subscribe({sub_id: plain})
        view = View(int(WINDOW_S * NANOS))
        view.apply(await client.update(sub_id))
        return view
    finally:
        await client.close()


async def test_a_client_that_comes_back_gets_only_what_changed_and_sees_what_a_fresh_one_sees(
    resuming_server: ServerProcess,
) -> None:
    server, rid = resuming_server, unique_rid("resume")
    start = time.time_ns() - 60 * NANOS
    await write_points(server.base_url, rid, "temp", [(start + i * NANOS, float(i)) for i in range(30)])
    client = await Client.connect(server.ws_url, strict=False)
    sub_id = new_id()
    await client.subscribe({sub_id: resumable(rid)})
    first = await envelope(client, sub_id)
    assert first["update"]["type"] == "full" and "resume" not in first
    view = View(int(WINDOW_S * NANOS))
    view.apply(first["update"])
    await write_points(server.base_url, rid, "temp", [(start + 40 * NANOS, 40.0)])
    second = await envelope(client, sub_id)
    view.apply(second["update"])
    token = second["resumeToken"]
    assert token != first["resumeToken"]  # each update moves the view on
    await client.close()  # the network goes away

    # Meanwhile: new points at the end, a late one in the middle of what the client holds, and an
    # overwrite of a point it has.
    await write_points(server.base_url, rid, "temp", [(start + 45 * NANOS, 45.0), (start + 46 * NANOS, 46.0)])
    await write_points(server.base_url, rid, "temp", [(start + 10 * NANOS + 500_000_000, -1.0)])
    await write_points(server.base_url, rid, "temp", [(start + 5 * NANOS, 500.0)])
    await asyncio.sleep(1.0)

    back = await Client.connect(server.ws_url, strict=False)
    try:
        await back.subscribe({sub_id: resumable(rid, token)})
        assert (await back.creation(sub_id))["type"] == "success"
        resumed = await envelope(back, sub_id)
        assert resumed["resume"] == {"outcome": "resumed"}
        update = resumed["update"]
        assert update["type"] == "append"
        # Only the changes: from the earliest timestamp touched meanwhile, not the whole window.
        assert update["append"]["start"] == {"seconds": (start + 5 * NANOS) // NANOS, "nanos": start % NANOS}
        assert len(update["append"]["result"]["numeric"]["values"]) < 40
        view.apply(update)
        expected = await fresh_view(server, rid)
        assert view.rows() == expected.rows()
        assert 500.0 in view.values and -1.0 in view.values and 46.0 in view.values
        # and it goes on live, with a newer token
        await write_points(server.base_url, rid, "temp", [(time.time_ns(), 99.0)])
        live = await envelope(back, sub_id)
        assert live["update"]["type"] == "append" and live["resumeToken"] != token
    finally:
        await back.close()


async def test_nothing_changed_is_an_empty_append(resuming_server: ServerProcess) -> None:
    server, rid = resuming_server, unique_rid("resume-quiet")
    sub_id, token, _ = await left_with_a_token(server, rid)
    back = await Client.connect(server.ws_url, strict=False)
    try:
        await back.subscribe({sub_id: resumable(rid, token)})
        resumed = await envelope(back, sub_id)
        assert resumed["resume"] == {"outcome": "resumed"} and resumed["update"]["type"] == "append"
        assert resumed["update"]["append"]["result"]["numeric"]["values"] == []
    finally:
        await back.close()


def _forged(token: str, **parts: str) -> str:
    """`token` with one of its parts replaced (the format is the server's own: see app/fanout/resume.py)."""
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    form, instance, digest, version = raw.split(".")
    fields = {"instance": instance, "digest": digest, "version": version, **parts}
    text = f"{form}.{fields['instance']}.{fields['digest']}.{fields['version']}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


async def test_a_token_that_cannot_be_used_gets_a_full_result_and_the_reason(
    resuming_server: ServerProcess,
) -> None:
    server, rid = resuming_server, unique_rid("resume-refused")
    await write_points(server.base_url, rid, "temp", [(time.time_ns() - NANOS, 1.0)])
    holder = await Client.connect(server.ws_url, strict=False)
    sub_id = new_id()
    await holder.subscribe({sub_id: resumable(rid)})
    token = (await envelope(holder, sub_id))["resumeToken"]
    other_rid = unique_rid("resume-other")
    await write_points(server.base_url, other_rid, "temp", [(time.time_ns() - NANOS, 2.0)])
    cases = {
        "tokenInvalid": (rid, "not a token"),
        "serverRestarted": (rid, _forged(token, instance="0123456789ab")),
        "computationGone": (other_rid, _forged(token, digest=_digest_of(other_rid))),
    }
    try:
        for reason, (which, presented) in cases.items():
            client = await Client.connect(server.ws_url, strict=False)
            try:
                await client.subscribe({sub_id: resumable(which, presented)})
                answer = await envelope(client, sub_id)
                assert answer["resume"] == {"outcome": "snapshot", "reason": reason}, reason
                assert answer["update"]["type"] == "full"
            finally:
                await client.close()
    finally:
        await holder.close()


def _digest_of(rid: str) -> str:
    from app.fanout.resume import key_digest

    return key_digest(
        _request_key(
            subscription(series_node(), {"x": channel_variable(rid, "temp")}, WINDOW_S, lateness_s=300.0)
        )
    )


def _request_key(sub: dict[str, Any]) -> str:
    from app.protocol.ws_session import _request
    from schemas.client import StreamingComputeNodeSubscription

    return _request(StreamingComputeNodeSubscription.model_validate(sub)).key


async def test_a_computation_released_after_the_linger_is_gone(resuming_server: ServerProcess) -> None:
    server, rid = resuming_server, unique_rid("resume-gone")
    sub_id, token, _ = await left_with_a_token(server, rid)
    await asyncio.sleep(LINGER_S + 2)  # nobody came back in time: the computation was let go
    back = await Client.connect(server.ws_url, strict=False)
    try:
        await back.subscribe({sub_id: resumable(rid, token)})
        answer = await envelope(back, sub_id)
        assert answer["resume"] == {"outcome": "snapshot", "reason": "computationGone"}
        assert answer["update"]["type"] == "full"
    finally:
        await back.close()


async def test_a_subscriber_that_asked_for_nothing_gets_pure_nominal_frames(
    resuming_server: ServerProcess,
) -> None:
    server, rid = resuming_server, unique_rid("resume-plain")
    await write_points(server.base_url, rid, "temp", [(time.time_ns() - NANOS, 1.0)])
    asker = await Client.connect(server.ws_url, strict=False)
    plain = await Client.connect(server.ws_url)  # strict: decodes as a Nominal client does
    try:
        ids = new_id(), new_id()
        await asker.subscribe({ids[0]: resumable(rid)})
        await plain.subscribe(
            {
                ids[1]: subscription(
                    series_node(), {"x": channel_variable(rid, "temp")}, WINDOW_S, lateness_s=300.0
                )
            }
        )
        assert "resumeToken" in await envelope(asker, ids[0])
        assert "resumeToken" not in await envelope(plain, ids[1])  # the same computation, shared
        await write_points(server.base_url, rid, "temp", [(time.time_ns(), 2.0)])
        assert "resumeToken" in await envelope(asker, ids[0])
        assert "resumeToken" not in await envelope(plain, ids[1])
    finally:
        await asker.close()
        await plain.close()


async def test_sparkwire_client_resumes_by_itself_after_the_connection_drops(
    resuming_server: ServerProcess,
) -> None:
    server, rid = resuming_server, unique_rid("resume-client")
    start = time.time_ns() - 30 * NANOS
    await write_points(server.base_url, rid, "temp", [(start + i * NANOS, float(i)) for i in range(10)])
    async with SparkwireClient(server.base_url, backoff_initial=0.1) as client:
        sub = await client.subscribe(
            series(numeric_channel(rid, "temp")), window=WINDOW_S, allowed_lateness=300
        )
        await sub.wait_for(lambda v: len(v.values) == 10, timeout=60)
        assert sub.resume_token is not None
        link = sub.link
        assert link is not None
        await link.ws.close()  # the connection drops; the client reconnects and subscribes again
        await write_points(server.base_url, rid, "temp", [(start + 20 * NANOS, 20.0)])
        view = await sub.wait_for(lambda v: 20.0 in v.values, timeout=60)
        assert sub.link is not link and sub.resume_outcome == {"outcome": "resumed"}
        assert view.rows() == (await fresh_view(server, rid)).rows()


async def test_the_asyncapi_document_describes_the_resume_fields(resuming_server: ServerProcess) -> None:
    server, rid = resuming_server, unique_rid("resume-asyncapi")
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        document = (await http.get("/asyncapi.json")).json()
    schema = {"$ref": "#/components/schemas/ServerMessage", "components": document["components"]}
    server_messages = jsonschema.Draft202012Validator(schema)
    sub_id, token, client = await left_with_a_token(server, rid)
    back = await Client.connect(server.ws_url, strict=False)
    try:
        await back.subscribe({sub_id: resumable(rid, token)})
        assert (await envelope(back, sub_id))["resume"] == {"outcome": "resumed"}
        await back.subscribe({"other": resumable(rid, "not a token")})
        assert (await envelope(back, "other"))["resume"]["reason"] == "tokenInvalid"
        for frame in [*client.frames, *back.frames]:
            server_messages.validate(frame)
        broken = {**back.frames[-1]}
        broken["subscriptionUpdate"] = {**broken["subscriptionUpdate"], "resume": {"outcome": "maybe"}}
        with pytest.raises(jsonschema.ValidationError):
            server_messages.validate(broken)
    finally:
        await back.close()


async def test_the_dashboard_resumes_after_losing_its_connection(
    resuming_server: ServerProcess, page: Page
) -> None:
    rid = unique_rid("resume-dashboard")
    async with reconnected_after_a_point_written_while_away(resuming_server, page, rid) as data:
        assert data["resumes"] == {"resumed": 1}  # an AppendResult of the one new point, no FullResult
        assert data["state"] == "open"
