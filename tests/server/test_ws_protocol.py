"""The WebSocket protocol's behaviour against a real server: pings, bad messages, unsubscribe,
replacement, pacing and result options."""

from __future__ import annotations

import asyncio
import datetime
import itertools
import json
import time
from typing import Any

import httpx
import websockets
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory, PerMessageDeflate
from websockets.frames import Frame

from tests.conftest import ServerProcess
from tests.wire import NANOS, Client, channel_variable, new_id, series_node, subscription, write_points


def rid_for(name: str) -> str:
    return f"ri.ws.{name}.{time.time_ns()}"


async def assert_usable(client: Client) -> None:
    """The connection still answers: a ping gets its pong."""
    sent = datetime.datetime.now(datetime.UTC).isoformat()
    await client.ws.send(json.dumps({"type": "ping", "ping": {"sentAt": sent}}))
    health = await asyncio.wait_for(client.health.get(), 10)
    assert health["type"] == "pong"
    assert datetime.datetime.fromisoformat(
        health["pong"]["pingOriginallySentAt"]
    ) == datetime.datetime.fromisoformat(sent)


async def test_ping_gets_a_pong(server: ServerProcess) -> None:
    client = await Client.connect(server.ws_url)
    await assert_usable(client)
    await client.close()


async def test_a_browser_like_deflate_offer_is_accepted_with_a_small_window(server: ServerProcess) -> None:
    client = await Client.connect(server.ws_url, compression="deflate")
    assert client.ws.response is not None
    accepted = client.ws.response.headers.get("Sec-WebSocket-Extensions", "")
    assert accepted.startswith("permessage-deflate")
    assert "server_max_window_bits=12" in accepted  # per-connection memory stays small
    assert "client_no_context_takeover" in accepted  # no inflater held between a client's messages
    await assert_usable(client)  # frames compressed by the server decode
    await client.close()


class CountingDeflate(PerMessageDeflate):
    """Client-side permessage-deflate that counts the messages that arrived compressed."""

    compressed = 0

    def decode(self, frame: Frame, *, max_size: int | None = None) -> Frame:
        if frame.rsv1:
            CountingDeflate.compressed += 1
        return super().decode(frame, max_size=max_size)


class CountingDeflateFactory(ClientPerMessageDeflateFactory):
    def process_response_params(self, params: Any, accepted_extensions: Any) -> PerMessageDeflate:
        agreed = super().process_response_params(params, accepted_extensions)
        assert isinstance(agreed, PerMessageDeflate)
        return CountingDeflate(
            agreed.remote_no_context_takeover,
            agreed.local_no_context_takeover,
            agreed.remote_max_window_bits,
            agreed.local_max_window_bits,
        )


async def test_subscribers_of_one_computation_on_compressed_connections_decode_the_same_update(
    server: ServerProcess,
) -> None:
    """The server deflates a shared update once and splices it into each subscriber's envelope
    (app/transport/deflate.py): every client must still inflate exactly the server's JSON."""
    rid = rid_for("shared")
    variables = {"x": channel_variable(rid, "p")}
    t0 = time.time_ns() - 5 * NANOS
    await write_points(server.base_url, rid, "p", [(t0 + i * 1_000_000, float(i)) for i in range(400)])
    CountingDeflate.compressed = 0
    clients = [
        Client(await websockets.connect(server.ws_url, max_size=None, extensions=[CountingDeflateFactory()]))
        for _ in range(2)
    ]
    for client in clients:
        assert client.ws.response is not None
        assert "server_no_context_takeover" in client.ws.response.headers["Sec-WebSocket-Extensions"]
    ids = [new_id(), new_id(), new_id()]
    sub = subscription(series_node(), variables, 60)
    await clients[0].subscribe({ids[0]: sub, ids[1]: sub})  # two on one connection, one on the other
    await clients[1].subscribe({ids[2]: sub})
    fulls = [await clients[i].update(sub_id) for i, sub_id in ((0, ids[0]), (0, ids[1]), (1, ids[2]))]
    assert fulls[0]["type"] == "full"
    assert fulls[0] == fulls[1] == fulls[2]
    assert len(fulls[0]["full"]["result"]["numeric"]["values"]) == 400
    await write_points(server.base_url, rid, "p", [(t0 + (400 + i) * 1_000_000, 0.5 + i) for i in range(200)])
    appends = [await clients[i].update(sub_id) for i, sub_id in ((0, ids[0]), (0, ids[1]), (1, ids[2]))]
    assert appends[0] == appends[1] == appends[2]
    assert appends[0]["type"] == "append"
    assert appends[0]["append"]["result"]["numeric"]["values"][-1] == 199.5
    assert CountingDeflate.compressed >= 6  # the three FullResults and the three appends
    for client in clients:
        await assert_usable(client)
        await client.close()


async def test_unparseable_messages_get_client_message_error_and_the_connection_stays_open(
    server: ServerProcess,
) -> None:
    client = await Client.connect(server.ws_url)
    bad_messages = [
        "not json at all",
        json.dumps({"type": "launch", "launch": {}}),
        json.dumps({"type": "unsubscribe", "unsubscribe": [""]}),
        "[" * 100 + "]" * 100,
    ]
    for text in bad_messages:
        await client.ws.send(text)
        health = await asyncio.wait_for(client.health.get(), 10)
        assert health["type"] == "clientMessageError", text
        assert health["clientMessageError"]["error"]["name"] == "PersistentCompute:InvalidClientMessage"
    await assert_usable(client)
    await client.close()


async def test_one_malformed_subscription_refuses_the_whole_message(server: ServerProcess) -> None:
    client = await Client.connect(server.ws_url)
    good_id, bad_id = new_id(), new_id()
    variables = {"x": channel_variable(rid_for("malformed"), "p")}
    good = subscription(series_node(), variables, 60)
    bad = subscription(
        {"type": "series", "series": {"input": {"type": "telepathy", "telepathy": {}}}}, variables, 60
    )
    await client.ws.send(json.dumps({"type": "subscribe", "subscribe": {good_id: good, bad_id: bad}}))
    health = await asyncio.wait_for(client.health.get(), 10)
    assert health["type"] == "clientMessageError"
    await assert_usable(client)
    assert good_id not in client.creations and bad_id not in client.creations  # nothing was created
    await client.close()


async def test_unsubscribe_stops_updates(server: ServerProcess) -> None:
    rid = rid_for("unsub")
    client = await Client.connect(server.ws_url)
    keep, drop = new_id(), new_id()
    await client.subscribe(
        {
            keep: subscription(series_node(), {"x": channel_variable(rid, "p")}, 600),
            drop: subscription(series_node("y"), {"y": channel_variable(rid, "p")}, 600),
        }
    )
    for sub_id in (keep, drop):
        assert (await client.creation(sub_id))["type"] == "success"
        assert (await client.update(sub_id))["type"] == "full"
    await client.ws.send(json.dumps({"type": "unsubscribe", "unsubscribe": [drop]}))
    await assert_usable(client)  # the unsubscribe has been handled once the pong arrives
    await write_points(server.base_url, rid, "p", [(time.time_ns(), 1.0)])
    assert (await client.update(keep))["type"] == "append"
    await write_points(server.base_url, rid, "p", [(time.time_ns(), 2.0)])
    assert (await client.update(keep))["type"] == "append"
    assert client.updates[drop].empty()
    await client.close()


async def test_reusing_a_live_id_replaces_the_subscription(server: ServerProcess) -> None:
    rid = rid_for("replace")
    now = time.time_ns()
    await write_points(server.base_url, rid, "a", [(now - NANOS, 1.0)])
    await write_points(server.base_url, rid, "b", [(now - NANOS, 2.0)])
    client = await Client.connect(server.ws_url)
    sub_id = new_id()
    await client.subscribe({sub_id: subscription(series_node(), {"x": channel_variable(rid, "a")}, 600)})
    await client.creation(sub_id)
    assert (await client.update(sub_id))["full"]["result"]["numeric"]["values"] == [1.0]
    await client.subscribe({sub_id: subscription(series_node(), {"x": channel_variable(rid, "b")}, 600)})
    await client.creation(sub_id)
    assert (await client.update(sub_id))["full"]["result"]["numeric"]["values"] == [2.0]
    await write_points(server.base_url, rid, "a", [(time.time_ns(), 10.0)])
    await write_points(server.base_url, rid, "b", [(time.time_ns(), 20.0)])
    update = await client.update(sub_id)
    assert update["append"]["result"]["numeric"]["values"] == [20.0]  # only the new channel
    await client.close()


def seen_points(updates: list[dict]) -> list[tuple[int, float]]:
    """Every (timestamp, value) the appends carried."""
    points = set()
    for u in updates:
        numeric = u["append"]["result"]["numeric"]
        for t, v in zip(numeric["timestamps"], numeric["values"], strict=True):
            points.add((t["seconds"] * NANOS + t["nanos"], v))
    return sorted(points)


async def test_min_delay_spaces_updates_and_coalesces_pending_changes(server: ServerProcess) -> None:
    rid = rid_for("pace")
    client = await Client.connect(server.ws_url)
    sub_id = new_id()
    await client.subscribe(
        {sub_id: subscription(series_node(), {"x": channel_variable(rid, "p")}, 600, min_delay_ms=1500)}
    )
    await client.creation(sub_id)
    await client.update(sub_id)
    written = []
    for i in range(8):
        t = time.time_ns()
        written.append((t, float(i)))
        await write_points(server.base_url, rid, "p", [(t, float(i))])
        await asyncio.sleep(0.25)
    updates: list[dict] = []
    while len(seen_points(updates)) < len(written):
        updates.append(await client.update(sub_id, timeout=60))
    arrivals = client.arrivals[sub_id]
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert all(g >= 1.4 for g in gaps), gaps  # never faster than minDelay (clock slack 0.1 s)
    assert len(updates) < len(written)  # pending changes were coalesced
    assert seen_points(updates) == written  # nothing lost in the coalescing
    await client.close()


async def test_without_allow_appends_every_update_is_a_full_result(server: ServerProcess) -> None:
    rid = rid_for("noappend")
    client = await Client.connect(server.ws_url)
    sub_id = new_id()
    await client.subscribe(
        {sub_id: subscription(series_node(), {"x": channel_variable(rid, "p")}, 600, allow_appends=False)}
    )
    await client.creation(sub_id)
    await client.update(sub_id)
    t1 = time.time_ns()
    await write_points(server.base_url, rid, "p", [(t1, 1.0)])
    first = await client.update(sub_id)
    t2 = time.time_ns()
    await write_points(server.base_url, rid, "p", [(t2, 2.0)])
    second = await client.update(sub_id)
    assert first["type"] == second["type"] == "full"
    assert second["full"]["result"]["numeric"]["values"] == [1.0, 2.0]
    await client.close()


def test_health_endpoints(server: ServerProcess) -> None:
    assert httpx.get(f"{server.base_url}/healthz").status_code == 200
    ready = httpx.get(f"{server.base_url}/readyz")
    assert ready.status_code == 200, ready.text
    enabled = httpx.get(f"{server.base_url}/persistent-compute/enabled")
    assert enabled.status_code == 200
    assert enabled.json() == {}
