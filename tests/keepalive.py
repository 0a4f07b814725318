"""Answer the server's application-level pings, as a Nominal client does: the server closes a
connection that leaves them unanswered (tests that wait long on a loaded machine need this)."""

from __future__ import annotations

import asyncio
import datetime
import json

from tests.wire import Client


def iso_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


async def answer_pings(client: Client) -> None:
    while True:
        health = await client.health.get()
        if health["type"] == "ping":
            pong = {"pingOriginallySentAt": health["ping"]["sentAt"], "sentAt": iso_now()}
            await client.ws.send(json.dumps({"type": "pong", "pong": pong}))


def keep_alive(client: Client) -> asyncio.Task[None]:
    return asyncio.create_task(answer_pings(client))
