"""What a server left alone writes to its log, on servers of their own (JSON lines, so every field
is read exactly): no line per successful request, a summary line every few seconds whose counts add
up to what the test did, and one line per refused request with the reason."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess, start_server
from tests.wire import Client, channel_variable, new_id, series_node, subscription, write_points

SUMMARY_S = 2
COUNTED = (
    "requests",
    "requests_2xx",
    "requests_4xx",
    "requests_5xx",
    "points_ingested",
    "ingest_requests_rejected",
    "points_rejected_invalid",
    "connections_opened",
)


def records(server: ServerProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.log_text().splitlines() if line.strip()]


def summaries(server: ServerProcess) -> list[dict[str, Any]]:
    return [
        r
        for r in records(server)
        if r["logger"] == "app.api.request_summary" and r["message"].startswith("last ")
    ]


async def until_summary(server: ServerProcess, check: Any, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = [s for s in summaries(server) if check(s)]
        if found:
            return found[-1]
        assert time.monotonic() < deadline, f"no such summary line: {summaries(server)[-3:]}"
        await asyncio.sleep(0.5)


@pytest.fixture
def quiet_server(tmp_path: Path) -> Iterator[ServerProcess]:
    env = {"SPARKWIRE_LOG_FORMAT": "json", "SPARKWIRE_SUMMARY_INTERVAL": str(SUMMARY_S)}
    server = start_server(tmp_path / "data", tmp_path / "server.log", env=env)
    yield server
    server.stop()


async def test_summary_lines_count_what_happened_and_successes_have_no_line_of_their_own(
    quiet_server: ServerProcess,
) -> None:
    server = quiet_server
    rid = f"ri.summary.{time.time_ns()}"
    now = time.time_ns()
    wrong_type = {  # strings into a double channel: 400, three points refused
        "dataSourceRid": rid,
        "batches": [
            {
                "channel": "p",
                "points": {
                    "type": "string",
                    "string": [{"timestamp": {"seconds": 1, "nanos": i}, "value": "x"} for i in range(3)],
                },
            }
        ],
    }
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        for i in range(5):
            await write_points(server.base_url, rid, "p", [(now + 3 * i + k, float(k)) for k in range(3)])
        assert (await http.post("/storage/writer/v1", json=wrong_type)).status_code == 400
        not_json = await http.post(
            "/storage/writer/v1", content=b"{nope", headers={"content-type": "application/json"}
        )
        assert not_json.status_code == 400
        assert (await http.get("/series")).status_code == 200
        assert (await http.get("/no-such-page")).status_code == 404
        for _ in range(3):  # monitoring: neither counted nor logged
            assert (await http.get("/readyz")).status_code == 200
            assert (await http.get("/metrics")).status_code == 200

    client = await Client.connect(server.ws_url)
    sub_id = new_id()
    await client.subscribe({sub_id: subscription(series_node(), {"x": channel_variable(rid, "p")}, 600)})
    await client.update(sub_id)
    live = await until_summary(server, lambda s: s["connections"] == 1 and s["subscriptions"] == 1)
    assert live["message"].endswith("now 1 connections, 1 subscriptions")
    await client.close()
    assert server.stop(signal.SIGTERM) == 0  # the last summary line covers up to the shutdown

    lines = summaries(server)
    assert len(lines) >= 3  # periodic ones, and the last one at shutdown
    totals = {field: sum(line[field] for line in lines) for field in COUNTED}
    assert totals == {
        "requests": 9,  # 5 writes, 2 refused writes, /series, the 404
        "requests_2xx": 6,
        "requests_4xx": 3,
        "requests_5xx": 0,
        "points_ingested": 15,
        "ingest_requests_rejected": 2,
        "points_rejected_invalid": 3,
        "connections_opened": 1,
    }
    assert all(line["level"] == "INFO" and line["interval_s"] > 0 for line in lines)

    everything = records(server)
    assert not [r for r in everything if r["logger"] == "uvicorn.access"]
    handshakes = [
        r for r in everything if "[accepted]" in r["message"] or r["message"].startswith("connection ")
    ]
    assert handshakes == []
    # No line per probe or scrape; the one start-up line that names /readyz (Spark warming up) is
    # not about a request.
    probes = [r for r in everything if "/readyz" in r["message"] or "/metrics" in r["message"]]
    assert [r["message"] for r in probes if not r["message"].startswith("Spark is warming up")] == []

    refused = [r for r in everything if r["level"] == "WARNING" and r["logger"] == "app.api.request_summary"]
    assert [(r["status"], r["method"], r["path"]) for r in refused] == [
        (400, "POST", "/storage/writer/v1"),
        (400, "POST", "/storage/writer/v1"),
        (404, "GET", "/no-such-page"),
    ]
    assert all(r["client"] == "127.0.0.1" for r in refused)
    assert all("Default:InvalidArgument: " in r["message"] for r in refused[:2])
    assert "body is not JSON" in refused[1]["message"]
    assert "Default:NotFound: " in refused[2]["message"]


async def test_the_access_log_comes_back_when_asked_for(tmp_path: Path) -> None:
    env = {"SPARKWIRE_LOG_FORMAT": "json", "SPARKWIRE_ACCESS_LOG": "true", "SPARKWIRE_SUMMARY_INTERVAL": "0"}
    server = start_server(tmp_path / "data", tmp_path / "server.log", env=env)
    try:
        await write_points(
            server.base_url, f"ri.summary.access.{time.time_ns()}", "p", [(time.time_ns(), 1.0)]
        )
        client = await Client.connect(server.ws_url)
        await client.close()
    finally:
        assert server.stop(signal.SIGTERM) == 0
    everything = records(server)
    access = [r["message"] for r in everything if r["logger"] == "uvicorn.access"]
    assert any('"POST /storage/writer/v1 HTTP/1.1" 200' in m for m in access)
    assert any('"WebSocket /persistent-compute/ws" [accepted]' in r["message"] for r in everything)
    assert not [r for r in everything if r["logger"] == "app.api.request_summary"]  # interval 0: no summary
