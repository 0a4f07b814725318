"""The client's notice for an empty view, without a server (client/sparkwire_client/catalog_hint.py;
tests/server/test_tail.py checks it against a real one)."""

from __future__ import annotations

import asyncio

import pytest

from sparkwire_client import Client, enum_channel, numeric_channel, series
from sparkwire_client import client as client_module
from sparkwire_client.catalog_hint import ChannelRead, channels_read, empty_hint, http_base


def test_the_channels_a_request_reads_are_found_in_its_variables() -> None:
    node = series(numeric_channel("ri.a", "x", tags={"k": "v"}) + numeric_channel("ri.b", "y"))
    reads = channels_read(node.request(60))
    assert sorted(reads, key=lambda r: r.channel) == [
        ChannelRead("ri.a", "x", (("k", "v"),)),
        ChannelRead("ri.b", "y", ()),
    ]
    assert channels_read(series(enum_channel("ri.a", "mode")).request(60)) == [
        ChannelRead("ri.a", "mode", ())
    ]


def test_a_long_catalog_is_listed_in_part() -> None:
    listed = [{"dataSourceRid": "ri.a", "channel": f"c{i:02d}", "tags": {}} for i in range(25)]
    hint = empty_hint([ChannelRead("ri.a", "typo", ())], listed, 60)
    assert hint.startswith('No channel "typo" in ri.a (its channels: c00, c01,')
    assert hint.endswith("c19 and 5 more).")


def test_the_http_base_keeps_a_path_prefix() -> None:
    assert http_base("ws://h:1/persistent-compute/ws") == "http://h:1"
    assert http_base("wss://h/sparkwire/persistent-compute/ws") == "https://h/sparkwire"


async def test_subscriptions_explained_together_read_the_catalog_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    async def listed_series(base_url: str) -> list[object]:
        calls.append(base_url)
        await asyncio.sleep(0.1)
        return []

    monkeypatch.setattr(client_module, "listed_series", listed_series)
    client = Client("http://127.0.0.1:9")
    assert await asyncio.gather(*(client._catalog() for _ in range(50))) == [[]] * 50
    assert calls == ["http://127.0.0.1:9"]
