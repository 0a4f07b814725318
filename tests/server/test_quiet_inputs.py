"""The clock alone re-evaluates nothing (docs/protocol.md, "When a computation is re-evaluated"): a
histogram whose inputs are quiet is not re-sent, though its points age out of the window; the next
point makes a FullResult over the window as of then."""

from __future__ import annotations

import asyncio
import time
import uuid

from tests import node_json as n
from tests.conftest import ServerProcess
from tests.wire import NANOS, Client, subscription, write_points

WINDOW_S = 20.0


def histogram() -> dict[str, object]:
    count = {"type": "bucketCount", "bucketCount": n.literal(4)}
    inputs = {"x": {"type": "raw", "raw": {"name": "x"}}}
    return {
        "type": "histogram",
        "histogram": {"type": "numeric", "numeric": {"inputs": inputs, "bucketStrategy": count}},
    }


def total(update: dict[str, object]) -> int:
    body = update["full"]["result"]["numericHistogram"]  # type: ignore[index]
    return sum(b["countsByChannel"]["x"]["count"] for b in body["buckets"])  # type: ignore[index]


async def test_a_chart_is_not_re_sent_while_its_inputs_are_quiet(server: ServerProcess) -> None:
    rid = f"ri.sparkwire.test.quiet.{uuid.uuid4().hex}"
    t = time.time_ns()
    await write_points(server.base_url, rid, "x", [(t - 2 * NANOS, 1.0), (t - NANOS, 2.0), (t, 3.0)])
    client = await Client.connect(server.ws_url)
    try:
        await client.subscribe({"h": subscription(histogram(), {"x": n.channel(rid, "x")}, WINDOW_S)})
        assert (await client.creation("h", timeout=120))["type"] == "success"
        first = await client.update("h", timeout=300)
        assert first["type"] == "full" and total(first) == 3, first
        # the three points leave the 20 s window while nothing is written: no update is sent
        await asyncio.sleep(max(0.0, (t + int(WINDOW_S * NANOS) + NANOS - time.time_ns()) / NANOS))
        assert client.updates["h"].empty(), "a chart re-sent without a new point"
        # a point: a FullResult over the window as of now, which holds that point alone
        await write_points(server.base_url, rid, "x", [(time.time_ns(), 5.0)])
        update = await client.update("h", timeout=120)
        assert update["type"] == "full" and total(update) == 1, update
    finally:
        await client.close()
