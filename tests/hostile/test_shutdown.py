"""Item 9 of the attacks in docs/reliability-and-security.md, its second half: two SIGTERMs right
after heavy ingest, with subscribers live, stop the server cleanly (exit 0) and log no traceback."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time

import httpx
import pytest

from tests.conftest import start_server
from tests.hostile import connect, unique_rid, write_body
from tests.wire import channel_variable, series_node, subscription

pytestmark = pytest.mark.server


async def test_two_sigterms_right_after_heavy_ingest_log_no_traceback(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = tmp_path_factory.mktemp("hostile-sigterm")
    server = start_server(base / "data", base / "server.log")
    rid = unique_rid("sigterm")
    stop = threading.Event()

    def feed(channel: str) -> None:
        with httpx.Client(timeout=60) as http:
            while not stop.is_set():
                now = time.time_ns()
                body = write_body(rid, [(now - k * 1000, float(k)) for k in range(50_000)], channel=channel)
                try:
                    http.post(f"{server.base_url}/storage/writer/v1", json=body)
                except httpx.HTTPError:
                    return  # the server is going away

    feeders = [threading.Thread(target=feed, args=(f"c{i}",)) for i in range(4)]
    try:
        ws = await connect(server.ws_url)
        subs = {
            f"s{i}": subscription(series_node(), {"x": channel_variable(rid, f"c{i}")}, 60) for i in range(4)
        }
        await ws.send(json.dumps({"type": "subscribe", "subscribe": subs}))
        for feeder in feeders:
            feeder.start()
        await asyncio.sleep(10)  # heavy ingest, micro-batches in flight
        server.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        server.process.send_signal(signal.SIGTERM)  # the second ends the grace period at once
        code = await asyncio.to_thread(server.process.wait, 120)
    finally:
        stop.set()
        for feeder in feeders:
            if feeder.is_alive():
                feeder.join(60)
        server.stop(signal.SIGKILL)
    log = server.log_text()
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[-5000:]
    assert " ERROR " not in log, [line for line in log.splitlines() if " ERROR " in line][:5]
