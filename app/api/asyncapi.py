"""`GET /asyncapi.json`: the WebSocket protocol as an AsyncAPI 3.0 document, generated from the
pydantic models in schemas/ (the same models FastAPI's OpenAPI document is built from)."""

from __future__ import annotations

from functools import cache
from typing import Any

from fastapi import APIRouter, Request
from pydantic import TypeAdapter

from schemas.client import client_message_adapter
from schemas.server import server_message_adapter

router = APIRouter()

CHANNEL = "persistentCompute"
ADDRESS = "/persistent-compute/ws"
SCHEMA_REF = "#/components/schemas/{model}"

DESCRIPTION = """\
Nominal's persistent-compute streaming protocol in Conjure JSON. A client subscribes to computations
(ClientMessage `subscribe`) and receives, per subscription, one `subscriptionCreation` and then a
FullResult followed by AppendResults (`subscriptionUpdate`). Ping/pong keep the connection alive;
on `shutdownNotice` a client opens a new connection, re-subscribes and switches once it delivers.
Compute nodes (`ComputableNode`) are Nominal's; their full definition is the `nominal-api` package.

Sparkwire's extensions (resume tokens, late-point reports, replay, streaming polling-only nodes)
are opt-in per subscription (`sparkwire` beside `computeRequest`); the fields and messages they add
(`resumeToken`, `resume`, `lateReport`, `replayEnded`) are only ever sent to a subscription that
asked, and `streamPolled` streams a signal filter, a spectrum or an LTTB series otherwise
refused with PollingOnlyComputation. See docs/extensions.md.
"""


@cache
def _schemas() -> dict[str, Any]:
    keys, definitions = TypeAdapter.json_schemas(
        [
            ("ClientMessage", "validation", client_message_adapter),
            ("ServerMessage", "serialization", server_message_adapter),
        ],
        ref_template=SCHEMA_REF,
    )
    schemas: dict[str, Any] = dict(definitions.get("$defs", {}))
    schemas["ClientMessage"] = keys[("ClientMessage", "validation")]
    schemas["ServerMessage"] = keys[("ServerMessage", "serialization")]
    return _asyncapi_discriminators(schemas)


def _asyncapi_discriminators(node: Any) -> Any:
    """AsyncAPI's Schema Object names the discriminator property with a plain string, where
    pydantic writes OpenAPI's `{"propertyName": ..., "mapping": ...}`."""
    if isinstance(node, dict):
        out = {k: _asyncapi_discriminators(v) for k, v in node.items()}
        if isinstance(out.get("discriminator"), dict):
            out["discriminator"] = out["discriminator"]["propertyName"]
        return out
    if isinstance(node, list):
        return [_asyncapi_discriminators(v) for v in node]
    return node


def document(host: str, version: str) -> dict[str, Any]:
    channel_ref = {"$ref": f"#/channels/{CHANNEL}"}
    return {
        "asyncapi": "3.0.0",
        "info": {"title": "Sparkwire persistent compute", "version": version, "description": DESCRIPTION},
        "defaultContentType": "application/json",
        "servers": {
            "sparkwire": {"host": host, "protocol": "ws", "description": "this Sparkwire server"},
        },
        "channels": {
            CHANNEL: {
                "address": ADDRESS,
                "title": "Persistent compute subscriptions",
                "messages": {
                    "clientMessage": {"$ref": "#/components/messages/ClientMessage"},
                    "serverMessage": {"$ref": "#/components/messages/ServerMessage"},
                },
            }
        },
        "operations": {
            "receiveClientMessage": {
                "action": "receive",
                "channel": channel_ref,
                "summary": "subscribe, unsubscribe, ping, pong",
                "messages": [{"$ref": f"#/channels/{CHANNEL}/messages/clientMessage"}],
            },
            "sendServerMessage": {
                "action": "send",
                "channel": channel_ref,
                "summary": "subscription creations and updates, health (ping, pong, shutdownNotice, errors)",
                "messages": [{"$ref": f"#/channels/{CHANNEL}/messages/serverMessage"}],
            },
        },
        "components": {
            "messages": {
                name: {
                    "name": name,
                    "title": name,
                    "contentType": "application/json",
                    "payload": {"$ref": SCHEMA_REF.format(model=name)},
                }
                for name in ("ClientMessage", "ServerMessage")
            },
            "schemas": _schemas(),
        },
    }


@router.get("/asyncapi.json", include_in_schema=False)
async def asyncapi(request: Request) -> dict[str, Any]:
    host = request.headers.get("host") or f"{request.url.hostname}:{request.url.port}"
    return document(host, request.app.version)
