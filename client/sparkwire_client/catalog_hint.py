"""Why a subscription's view is empty, said as the dashboard and `sparkwire tail` say it.

A mistyped data source, channel or tag is not an error on the wire: the server answers with an empty
result and waits for points that never come. So when a subscription's first FullResult is empty, the
client reads the server's catalog (`GET /series`: the series written so far) and names what the
computation reads that was never written, with what was:

    No channel "engine.tmep" in ri.sparkwire.main.dataset.demo (its channels: engine.rpm, engine.temp).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

Json = Any
LISTED_AT_MOST = 20  # the channels or data sources a hint lists (a catalog can hold thousands)


@dataclass(frozen=True)
class ChannelRead:
    """A channel a computation reads by data source: its rid, its name and the tags it selects."""

    data_source_rid: str
    channel: str
    tags: tuple[tuple[str, str], ...]


def _literal(value: Json) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value.get("type") == "literal" and isinstance(value.get("literal"), str):
        return str(value["literal"])
    return None  # a variable or a function of one: not known before the server resolves it


def channels_read(request: Json) -> list[ChannelRead]:
    """The channels a compute request (its node and its variables) reads by data source rid."""
    found: list[ChannelRead] = []
    stack = [request]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            rid, channel = _literal(item.get("dataSourceRid")), _literal(item.get("channel"))
            if rid is not None and channel is not None:
                given = item.get("tags")
                given = given if isinstance(given, dict) else {}
                tags = tuple(sorted((k, v) for k, t in given.items() if (v := _literal(t)) is not None))
                read = ChannelRead(rid, channel, tags)
                if read not in found:
                    found.append(read)
            else:
                stack.extend(item.values())
    return found


def http_base(url: str) -> str:
    """The server's base URL from the client's WebSocket URL (`ws://h:p/persistent-compute/ws`)."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, parts.path.removesuffix("/persistent-compute/ws"), "", ""))


async def listed_series(base_url: str, timeout: float = 10.0) -> list[Json] | None:
    """`GET /series`, or None when it cannot be read (a server with authentication on, or away)."""

    def get() -> list[Json] | None:
        try:
            with urllib.request.urlopen(f"{base_url}/series", timeout=timeout) as answer:
                listed = json.loads(answer.read())
        except (OSError, ValueError):
            return None
        return listed if isinstance(listed, list) else None

    return await asyncio.to_thread(get)


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:LISTED_AT_MOST]) or "none"
    return shown + (f" and {len(names) - LISTED_AT_MOST} more" if len(names) > LISTED_AT_MOST else "")


def empty_hint(reads: list[ChannelRead], listed: list[Json], window_seconds: float) -> str:
    """Why the view of a computation reading `reads` is empty, given the catalog's `listed` series."""
    notices: list[str] = []
    rids = sorted({s["dataSourceRid"] for s in listed})
    for read in reads:
        of_rid = [s for s in listed if s["dataSourceRid"] == read.data_source_rid]
        of_channel = [s for s in of_rid if s["channel"] == read.channel]
        if not of_rid:
            notices.append(
                f'No data source "{read.data_source_rid}" has been written to yet (known: {_names(rids)}).'
            )
        elif not of_channel:
            channels = sorted({s["channel"] for s in of_rid})
            notices.append(
                f'No channel "{read.channel}" in {read.data_source_rid} (its channels: {_names(channels)}).'
            )
        elif read.tags and not any(set(read.tags) <= set(s["tags"].items()) for s in of_channel):
            wanted = " ".join(f"{k}={v}" for k, v in read.tags)
            tag_sets = sorted(
                {" ".join(f"{k}={v}" for k, v in sorted(s["tags"].items())) for s in of_channel}
            )
            notices.append(
                f"No series of {read.channel} in {read.data_source_rid} has the tags {wanted} "
                f"(its series: {_names([t or '(no tags)' for t in tag_sets])})."
            )
    if not notices:
        read_channels = ", ".join(dict.fromkeys(r.channel for r in reads)) or "the computation"
        notices.append(f"No points of {read_channels} in the last {window_seconds:g} s.")
    return " ".join(notices)
