"""Authentication and the Origin allowlist, against a server of their own configured with a JWT
secret, a tokens file and an allowed Origin: missing or bad tokens get 401 before any upgrade,
tokens reach only their data sources, expiring tokens end subscriptions unless refreshed, and
the ingest endpoint takes the same tokens."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from app.protocol.auth import TokensFile
from tests.conftest import ServerProcess, start_server
from tests.hostile import close_code, connect, frames_until, make_jwt, still_usable, unique_rid
from tests.wire import NANOS, channel_variable, new_id, series_node, subscribe_message, subscription, ts

SECRET = "test-secret-that-is-long-enough-for-hs256"
STATIC_TOKEN = "static-token-for-the-tokens-file"
ALLOWED_ORIGIN = "https://dash.example.com"
RID_PREFIX = "ri.auth."


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    base = tmp_path_factory.mktemp("secured")
    tokens = base / "tokens.json"
    write_tokens(tokens, [{"token": STATIC_TOKEN, "sub": "static", "dataSourceRids": [RID_PREFIX + "*"]}])
    proc = start_server(
        base / "data",
        base / "server.log",
        env={
            "SPARKWIRE_JWT_SECRET": SECRET,
            "SPARKWIRE_TOKENS_FILE": str(tokens),
            "SPARKWIRE_ALLOWED_ORIGINS": ALLOWED_ORIGIN,
        },
    )
    yield proc, tokens
    proc.stop()


def write_tokens(path: Path, tokens: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"tokens": tokens}))
    os.replace(tmp, path)


def rid(name: str) -> str:
    return unique_rid(name).replace("ri.test.", RID_PREFIX)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def body(data_source: str, values: list[float], channel: str = "p") -> dict[str, Any]:
    now = time.time_ns()
    points = [{"timestamp": ts(now - (len(values) - i) * NANOS), "value": v} for i, v in enumerate(values)]
    return {
        "dataSourceRid": data_source,
        "batches": [{"channel": channel, "points": {"type": "double", "double": points}}],
    }


async def post(server: ServerProcess, payload: dict[str, Any], token: str | None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        return await http.post("/storage/writer/v1", json=payload, headers=bearer(token) if token else {})


async def subscribe(ws: Any, data_source: str, channel: str = "p") -> tuple[str, dict[str, Any]]:
    """Subscribe to a channel; (id, its subscriptionCreation body)."""
    sub_id = new_id()
    sub = subscription(series_node(), {"x": channel_variable(data_source, channel)}, 3600)
    await ws.send(subscribe_message({sub_id: sub}))

    def answers(frame: dict[str, Any]) -> bool:
        return bool(
            frame["type"] == "subscriptionCreation"
            and frame["subscriptionCreation"]["subscriptionId"] == sub_id
        )

    frame, _ = await frames_until(ws, answers)
    return sub_id, frame["subscriptionCreation"]["creation"]


async def update_of(ws: Any, sub_id: str, timeout: float = 60) -> dict[str, Any]:
    frame, _ = await frames_until(
        ws,
        lambda f: f["type"] == "subscriptionUpdate" and f["subscriptionUpdate"]["subscriptionId"] == sub_id,
        timeout,
    )
    update: dict[str, Any] = frame["subscriptionUpdate"]["update"]
    return update


# -- refused before the upgrade -----------------------------------------------------------------


BAD_TOKENS = {
    "none": None,
    "garbage": "not-a-token",
    "wrong secret": make_jwt("another-secret-another-secret-another", [RID_PREFIX + "*"], 300),
    "expired": make_jwt(SECRET, [RID_PREFIX + "*"], -30),
    "without exp": make_jwt(SECRET, [RID_PREFIX + "*"], None),
    "alg none": "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0."
    + "eyJzdWIiOiJ4IiwiZGF0YVNvdXJjZVJpZHMiOlsiKiJdLCJleHAiOjQxMDI0NDQ4MDB9.",
}


@pytest.mark.parametrize("token", BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
async def test_a_missing_or_bad_token_gets_401_before_the_upgrade(
    secured: tuple[ServerProcess, Path], token: str | None
) -> None:
    server, _ = secured
    headers = bearer(token) if token else None
    with pytest.raises(websockets.InvalidStatus) as refused:
        await connect(server.ws_url, additional_headers=headers)
    response = refused.value.response
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert json.loads(response.body)["name"] == "Default:Unauthorized"


@pytest.mark.parametrize("token", BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
async def test_ingest_without_a_good_token_gets_401_and_stores_nothing(
    secured: tuple[ServerProcess, Path], token: str | None
) -> None:
    server, _ = secured
    data_source = rid("ingest401")
    response = await post(server, body(data_source, [1.0, 2.0]), token)
    assert response.status_code == 401
    ws = await connect(server.ws_url, additional_headers=bearer(STATIC_TOKEN))
    sub_id, creation = await subscribe(ws, data_source)
    assert creation["type"] == "success"
    assert (await update_of(ws, sub_id))["full"]["result"]["numeric"]["values"] == []
    await ws.close()


# -- what a token reaches -----------------------------------------------------------------------


async def test_a_jwt_reaches_its_data_sources_and_only_those(secured: tuple[ServerProcess, Path]) -> None:
    server, _ = secured
    mine, theirs = rid("mine"), rid("theirs")
    token = make_jwt(SECRET, [mine], 300)
    assert (await post(server, body(mine, [1.0, 2.0, 3.0]), token)).status_code == 200
    refused = await post(server, body(theirs, [9.0]), token)
    assert refused.status_code == 403
    assert refused.json()["name"] == "Default:PermissionDenied"

    ws = await connect(server.ws_url, additional_headers=bearer(token))
    sub_id, creation = await subscribe(ws, mine)
    assert creation["type"] == "success"
    assert (await update_of(ws, sub_id))["full"]["result"]["numeric"]["values"] == [1.0, 2.0, 3.0]
    _, denied = await subscribe(ws, theirs)
    error = denied["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:PermissionDenied"
    assert error["statusCode"] == 403
    assert error["params"] == {"rids": theirs}
    await still_usable(ws)
    await ws.close()

    # what the 403 refused was not stored: the static token (which reaches both) sees nothing there
    reader = await connect(server.ws_url, additional_headers=bearer(STATIC_TOKEN))
    other_id, _ = await subscribe(reader, theirs)
    assert (await update_of(reader, other_id))["full"]["result"]["numeric"]["values"] == []
    await reader.close()


async def test_a_token_in_the_websocket_subprotocol_header_works_for_browsers(
    secured: tuple[ServerProcess, Path],
) -> None:
    server, _ = secured
    token = make_jwt(SECRET, [RID_PREFIX + "*"], 300)
    ws = await connect(server.ws_url, subprotocols=["bearer", token], origin=ALLOWED_ORIGIN)
    assert ws.subprotocol == "bearer"  # the token itself is never echoed back
    _, creation = await subscribe(ws, rid("browser"))
    assert creation["type"] == "success"
    await ws.close()


async def test_tokens_file_changes_apply_without_a_restart(secured: tuple[ServerProcess, Path]) -> None:
    server, tokens = secured
    other = "a-second-static-token"
    write_tokens(
        tokens,
        [
            {"token": STATIC_TOKEN, "sub": "static", "dataSourceRids": [RID_PREFIX + "*"]},
            {"token": other, "sub": "other", "dataSourceRids": [RID_PREFIX + "*"]},
        ],
    )
    await asyncio.sleep(TokensFile.RECHECK_S + 0.25)  # an edit reaches lookups within RECHECK_S
    ws = await connect(server.ws_url, additional_headers=bearer(other))
    await still_usable(ws)
    await ws.close()
    write_tokens(tokens, [{"token": STATIC_TOKEN, "sub": "static", "dataSourceRids": [RID_PREFIX + "*"]}])
    await asyncio.sleep(TokensFile.RECHECK_S + 0.25)
    with pytest.raises(websockets.InvalidStatus) as refused:
        await connect(server.ws_url, additional_headers=bearer(other))
    assert refused.value.response.status_code == 401


# -- tokens that expire on a live connection ----------------------------------------------------


async def test_an_expiring_token_ends_subscriptions_then_the_connection(
    secured: tuple[ServerProcess, Path],
) -> None:
    server, _ = secured
    token = make_jwt(SECRET, [RID_PREFIX + "*"], 10)  # long enough to subscribe on a busy machine
    ws = await connect(server.ws_url, additional_headers=bearer(token))
    sub_id, creation = await subscribe(ws, rid("expiring"))
    assert creation["type"] == "success"
    assert (await update_of(ws, sub_id))["type"] == "full"
    update = await update_of(ws, sub_id, timeout=30)
    assert update["type"] == "error"
    assert update["error"]["serializableError"]["name"] == "PersistentCompute:SubscriptionAuthExpired"
    assert await close_code(ws) == 1008


async def test_update_token_before_expiry_keeps_the_connection(secured: tuple[ServerProcess, Path]) -> None:
    server, _ = secured
    data_source = rid("refreshed")
    ws = await connect(server.ws_url, additional_headers=bearer(make_jwt(SECRET, [data_source], 4)))
    fresh = make_jwt(SECRET, [data_source], 300)
    await ws.send(json.dumps({"type": "updateToken", "updateToken": {"token": fresh}}))
    sub_id, _ = await subscribe(ws, data_source)
    assert (await update_of(ws, sub_id))["type"] == "full"
    await asyncio.sleep(6)  # past the first token's expiry
    assert (await post(server, body(data_source, [42.0]), fresh)).status_code == 200
    update = await update_of(ws, sub_id)
    assert update["type"] == "append"
    assert update["append"]["result"]["numeric"]["values"] == [42.0]
    await still_usable(ws)
    await ws.close()


async def test_update_token_with_a_narrower_claim_ends_what_it_no_longer_reaches(
    secured: tuple[ServerProcess, Path],
) -> None:
    server, _ = secured
    kept, lost = rid("kept"), rid("lost")
    ws = await connect(server.ws_url, additional_headers=bearer(make_jwt(SECRET, [kept, lost], 300)))
    kept_id, _ = await subscribe(ws, kept)
    lost_id, _ = await subscribe(ws, lost)
    narrower = make_jwt(SECRET, [kept], 300)
    await ws.send(json.dumps({"type": "updateToken", "updateToken": {"token": narrower}}))
    update = await update_of(ws, lost_id)
    while update["type"] != "error":  # its first FullResult may come first
        update = await update_of(ws, lost_id)
    assert update["error"]["serializableError"]["name"] == "PersistentCompute:PermissionDenied"
    assert (await post(server, body(kept, [7.0]), narrower)).status_code == 200
    update = await update_of(ws, kept_id)
    while update["type"] == "full" and update["full"]["result"]["numeric"]["values"] == []:
        update = await update_of(ws, kept_id)
    assert update["type"] == "append"
    assert update["append"]["result"]["numeric"]["values"] == [7.0]
    await ws.close()


async def test_a_bad_update_token_closes_with_1008(secured: tuple[ServerProcess, Path]) -> None:
    server, _ = secured
    ws = await connect(server.ws_url, additional_headers=bearer(STATIC_TOKEN))
    await still_usable(ws)
    await ws.send(json.dumps({"type": "updateToken", "updateToken": {"token": "forged"}}))
    assert await close_code(ws) == 1008


# -- Origin allowlist ---------------------------------------------------------------------------


async def test_only_listed_origins_and_our_own_may_open_websockets(
    secured: tuple[ServerProcess, Path],
) -> None:
    server, _ = secured
    headers = bearer(STATIC_TOKEN)
    with pytest.raises(websockets.InvalidStatus) as refused:
        await connect(server.ws_url, additional_headers=headers, origin="https://evil.example.com")
    assert refused.value.response.status_code == 403  # even with a valid token
    for origin in (ALLOWED_ORIGIN, f"http://127.0.0.1:{server.port}", None):
        ws = await connect(server.ws_url, additional_headers=headers, origin=origin)
        await still_usable(ws)
        await ws.close()
