"""Hostile and broken input against the shared server (default limits): oversized messages close
with 1009, broken messages get `clientMessageError` and the connection stays usable, foreign
browser Origins are refused before the upgrade, and a connection holds at most 128 subscriptions."""

from __future__ import annotations

import asyncio
import json
import select
import time

import httpx
import pytest
import websockets

from tests.conftest import ServerProcess
from tests.hostile import (
    client_message_errors,
    close_code,
    connect,
    frames_until,
    ping_message,
    still_usable,
    unique_rid,
)
from tests.wire import NANOS, channel_variable, new_id, series_node, subscribe_message, subscription

MIB = 1 << 20


def bulky(size: int) -> str:
    """Valid JSON of about `size` bytes that is not a ClientMessage."""
    return json.dumps({"type": "ping", "padding": "x" * size})


async def test_a_message_over_one_mebibyte_closes_with_1009(server: ServerProcess) -> None:
    ws = await connect(server.ws_url, compression=None)
    await ws.send(bulky(MIB + 100))
    assert await close_code(ws) == 1009


async def test_the_limit_counts_decompressed_bytes(server: ServerProcess) -> None:
    ws = await connect(server.ws_url, compression="deflate")
    message = bulky(2 * MIB)  # ~2 MiB of x's deflate to a few KiB on the wire
    await ws.send(message)
    assert await close_code(ws) == 1009


async def test_the_limit_counts_every_fragment_of_a_message(server: ServerProcess) -> None:
    ws = await connect(server.ws_url, compression=None)
    text = bulky(MIB + 100)
    third = len(text) // 3
    await ws.send([text[:third], text[third : 2 * third], text[2 * third :]])
    assert await close_code(ws) == 1009


async def test_the_1009_reaches_a_client_that_reads_it_late(server: ServerProcess) -> None:
    """A busy client may still be writing when the server refuses its message, and read the close
    frame only later. The server must end the connection without a TCP reset, which would destroy the
    unread 1009 and fail the client's next write."""
    ws = await connect(server.ws_url, compression=None)
    ws.transport.pause_reading()  # what the server sends stays unread in the kernel, as for a busy client
    await ws.send(bulky(MIB + 100))
    sock = ws.transport.get_extra_info("socket")
    readable, _, _ = await asyncio.to_thread(select.select, [sock], [], [], 30)
    assert readable, "the server sent nothing after the oversized message"
    await asyncio.sleep(0.5)  # room for the server to finish closing its side
    await ws.send(ping_message())  # still writing: a reset would fail this with a broken pipe
    ws.transport.resume_reading()
    assert await close_code(ws) == 1009


async def test_a_message_just_under_the_limit_is_read_and_answered(server: ServerProcess) -> None:
    ws = await connect(server.ws_url, compression=None)
    await ws.send(bulky(MIB - 1000))
    errors = client_message_errors(await still_usable(ws))
    assert [e["name"] for e in errors] == ["PersistentCompute:InvalidClientMessage"]
    await ws.close()


BROKEN = {
    "nested 65 deep": "[" * 65 + "]" * 65,
    "nested 65 deep inside a ping": json.dumps(
        {"type": "ping", "ping": {"sentAt": "2025-01-01T00:00:00Z"}, "x": json.loads("[" * 64 + "]" * 64)}
    ),
    "not JSON": "{this is not json",
    "a JSON number": "42",
    "unknown variant": json.dumps({"type": "launchMissiles", "launchMissiles": {}}),
    "wrong type for unsubscribe": json.dumps({"type": "unsubscribe", "unsubscribe": "everything"}),
    "wrong type for sentAt": json.dumps({"type": "ping", "ping": {"sentAt": 12}}),
    "subscription id empty": json.dumps({"type": "unsubscribe", "unsubscribe": [""]}),
    "empty": "",
}


@pytest.mark.parametrize("payload", BROKEN.values(), ids=BROKEN.keys())
async def test_broken_messages_get_invalid_client_message_and_the_connection_stays_usable(
    server: ServerProcess, payload: str
) -> None:
    ws = await connect(server.ws_url)
    await ws.send(payload)
    errors = client_message_errors(await still_usable(ws))
    assert [e["name"] for e in errors] == ["PersistentCompute:InvalidClientMessage"]
    assert errors[0]["statusCode"] == 400
    await ws.close()


async def test_nesting_64_deep_is_still_accepted(server: ServerProcess) -> None:
    """The depth limit is exactly 64: a ping carrying 64 levels is a valid ping (extra keys are
    ignored as Conjure clients do), answered without any error."""
    deep = json.loads("[" * 62 + "]" * 62)  # + the message object + "ping" object = 64
    ws = await connect(server.ws_url)
    sent_at = "2025-01-01T00:00:00Z"
    await ws.send(json.dumps({"type": "ping", "ping": {"sentAt": sent_at, "pad": deep}}))
    _, before = await frames_until(
        ws, lambda f: f["type"] == "health" and f["health"]["type"] in ("pong", "clientMessageError")
    )
    assert not before
    await ws.close()


async def test_binary_frames_that_are_not_utf8_are_refused_politely(server: ServerProcess) -> None:
    ws = await connect(server.ws_url)
    await ws.send(b"\xff\xfe\x00garbage")
    errors = client_message_errors(await still_usable(ws))
    assert [e["name"] for e in errors] == ["PersistentCompute:InvalidClientMessage"]
    await ws.close()


async def test_one_bad_subscription_in_a_subscribe_creates_nothing(server: ServerProcess) -> None:
    rid = unique_rid("onebad")
    good_id, bad_id = new_id(), new_id()
    good = subscription(series_node(), {"x": channel_variable(rid, "p")}, 60)
    bad = subscription({"type": "series", "series": {"input": {"type": "numeric", "numeric": 5}}}, {}, 60)
    ws = await connect(server.ws_url)
    await ws.send(json.dumps({"type": "subscribe", "subscribe": {good_id: good, bad_id: bad}}))
    before = await still_usable(ws)
    assert [e["name"] for e in client_message_errors(before)] == ["PersistentCompute:InvalidClientMessage"]
    assert all(f["type"] == "health" for f in before), "a subscription was created from a refused message"
    await ws.close()


# -- Origin (the shared server has no SPARKWIRE_ALLOWED_ORIGINS: only its own origin) ------------------


async def test_a_foreign_origin_gets_403_before_the_upgrade(server: ServerProcess) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        await connect(server.ws_url, origin="https://evil.example.com")
    assert refused.value.response.status_code == 403
    body = json.loads(refused.value.response.body)
    assert body["name"] == "Default:PermissionDenied"


@pytest.mark.parametrize("origin", ["null", "http://127.0.0.1.evil.example.com", "http://127.0.0.1:1"])
async def test_look_alike_origins_are_foreign_too(server: ServerProcess, origin: str) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        await connect(server.ws_url, origin=origin)
    assert refused.value.response.status_code == 403


async def test_the_servers_own_origin_and_no_origin_are_allowed(server: ServerProcess) -> None:
    own = await connect(server.ws_url, origin=f"http://127.0.0.1:{server.port}")
    await still_usable(own)
    await own.close()
    no_origin = await connect(server.ws_url)
    await still_usable(no_origin)
    await no_origin.close()


async def test_a_cross_site_ingest_post_is_refused_and_stores_nothing(server: ServerProcess) -> None:
    rid = unique_rid("csrf")
    body = {
        "dataSourceRid": rid,
        "batches": [
            {
                "channel": "p",
                "points": {
                    "type": "double",
                    "double": [{"timestamp": {"seconds": time.time_ns() // NANOS, "nanos": 0}, "value": 1.0}],
                },
            }
        ],
    }
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        refused = await http.post(
            "/storage/writer/v1",
            content=json.dumps(body),
            headers={"Origin": "https://evil.example.com", "Content-Type": "text/plain"},
        )
    assert refused.status_code == 403
    ws = await connect(server.ws_url)
    sub_id = new_id()
    await ws.send(
        subscribe_message({sub_id: subscription(series_node(), {"x": channel_variable(rid, "p")}, 3600)})
    )
    update, _ = await frames_until(ws, lambda f: f["type"] == "subscriptionUpdate")
    assert update["subscriptionUpdate"]["update"]["full"]["result"]["numeric"]["values"] == []
    await ws.close()


# -- subscriptions per connection -------------------------------------------------------------------


async def test_a_connection_holds_at_most_128_subscriptions(server: ServerProcess) -> None:
    rid = unique_rid("many")
    sub = subscription(series_node(), {"x": channel_variable(rid, "p")}, 60)  # all share one computation
    ids = [new_id() for _ in range(130)]
    ws = await connect(server.ws_url)
    await ws.send(subscribe_message({i: sub for i in ids[:100]}))
    await ws.send(subscribe_message({i: sub for i in ids[100:]}))
    creations: dict[str, dict] = {}
    while len(creations) < len(ids):
        frame, _ = await frames_until(ws, lambda f: f["type"] == "subscriptionCreation")
        body = frame["subscriptionCreation"]
        creations[body["subscriptionId"]] = body["creation"]
    refused = [i for i in ids if creations[i]["type"] == "error"]
    assert refused == ids[128:]
    error = creations[ids[128]]["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:TooManySubscriptions"
    assert error["params"] == {"limit": "128"}

    # Unsubscribing frees room; re-using a live id replaces it and takes no more room.
    await ws.send(json.dumps({"type": "unsubscribe", "unsubscribe": ids[:1]}))
    await ws.send(subscribe_message({ids[1]: sub, ids[129]: sub}))
    got: dict[str, str] = {}
    while len(got) < 2:
        frame, _ = await frames_until(ws, lambda f: f["type"] == "subscriptionCreation")
        body = frame["subscriptionCreation"]
        got[body["subscriptionId"]] = body["creation"]["type"]
    assert got == {ids[1]: "success", ids[129]: "success"}
    await ws.close()


async def test_a_subscription_id_with_quotes_and_backslashes_comes_back_as_valid_json(
    server: ServerProcess,
) -> None:
    rid = unique_rid("odd-id")
    now = time.time_ns()
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        body = {
            "dataSourceRid": rid,
            "batches": [
                {"channel": "p", "tags": {}, "points": {"type": "double", "double": [
                    {"timestamp": {"seconds": now // NANOS, "nanos": now % NANOS}, "value": 1.5}
                ]}}
            ],
        }  # fmt: skip
        assert (await http.post("/storage/writer/v1", json=body)).status_code == 200
    ws = await connect(server.ws_url)
    odd = 'say "hi"\\ to \u00e9t\u00e9 \U0001f680'
    await ws.send(
        subscribe_message({odd: subscription(series_node(), {"x": channel_variable(rid, "p")}, 3600)})
    )
    update, _ = await frames_until(ws, lambda f: f["type"] == "subscriptionUpdate")  # parsed as JSON
    assert update["subscriptionUpdate"]["subscriptionId"] == odd
    assert update["subscriptionUpdate"]["update"]["full"]["result"]["numeric"]["values"] == [1.5]
    await ws.close()
