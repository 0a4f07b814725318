"""Retention of the embedded log on a real server: expired points and, past the byte cap, the oldest
ones leave the log in small steps, the file really shrinks, the newest points stay served, and a
restart after pruning keeps counting offsets up (a new point still reaches the stream)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx

from tests.conftest import ServerProcess, start_server
from tests.log_file import stored_rows
from tests.wire import NANOS, Client, channel_variable, full_entries, new_id, series_node, subscription

RID = "ri.sparkwire.test.dataset.retention"


def log_size(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("log.db*") if p.is_file())


def write(server: ServerProcess, channel: str, first_ns: int, count: int, step_ns: int = 1_000_000) -> None:
    stamps = [first_ns + i * step_ns for i in range(count)]
    points = [
        {"timestamp": {"seconds": t // NANOS, "nanos": t % NANOS}, "value": float(i)}
        for i, t in enumerate(stamps)
    ]
    body = {
        "dataSourceRid": RID,
        "batches": [{"channel": channel, "points": {"type": "double", "double": points}}],
    }
    r = httpx.post(f"{server.base_url}/storage/writer/v1", json=body, timeout=60)
    assert r.status_code == 200, r.text


def wait_for(condition: object, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.5)


async def full_result(server: ServerProcess, channel: str) -> list[tuple[int, float]]:
    client = await Client.connect(server.ws_url)
    try:
        sub_id = new_id()
        variables = {
            "x": channel_variable(RID, channel),
            f"u{time.time_ns()}": {"type": "double", "double": 1.0},
        }
        await client.subscribe({sub_id: subscription(series_node(), variables, 3600)})
        assert (await client.creation(sub_id))["type"] == "success"
        kind, entries = full_entries(await client.update(sub_id))
        assert kind == "numeric"
        return entries
    finally:
        await client.close()


async def test_expired_points_leave_the_log_and_the_file_shrinks(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # Written while nothing expires (retention 0 = forever), so the log's full size can be seen.
    server = start_server(data, tmp_path / "server.log", {"SPARKWIRE_RETENTION_SECONDS": "0"})
    hours_ago = time.time_ns() - 2 * 3600 * NANOS
    for i in range(40):  # 40 requests of 20,000 points two hours old: 40 blocks, ~13 MB of log
        write(server, "old", hours_ago + i * 20 * NANOS, 20_000)
    now = time.time_ns()
    write(server, "fresh", now - NANOS, 3)
    assert server.stop(signal.SIGTERM) == 0
    big = log_size(data)
    assert big > 8_000_000, big

    server = start_server(data, tmp_path / "server2.log", {"SPARKWIRE_RETENTION_SECONDS": "600"})
    try:
        wait_for(lambda: {c for c, *_ in stored_rows(data, RID)} == {"fresh"}, "the expired blocks pruned")
        wait_for(lambda: log_size(data) < big / 4, f"the log file below a quarter of {big} bytes")
        fresh = [(now - NANOS + i * 1_000_000, float(i)) for i in range(3)]
        assert await full_result(server, "fresh") == fresh
        assert "sparkwire_log_pruned_points_total 800000.0" in httpx.get(f"{server.base_url}/metrics").text

        # Offsets keep counting up after pruning: a new point still reaches a live subscriber.
        client = await Client.connect(server.ws_url)
        sub_id = new_id()
        sub = subscription(series_node(), {"x": channel_variable(RID, "fresh")}, 3600)
        await client.subscribe({sub_id: sub})
        assert (await client.creation(sub_id))["type"] == "success"
        await client.update(sub_id)  # the FullResult
        write(server, "fresh", time.time_ns(), 1)
        deadline = time.monotonic() + 60
        while True:
            update = await client.update(sub_id, timeout=max(1, deadline - time.monotonic()))
            if update["type"] == "append" and update["append"]["result"]["numeric"]["timestamps"]:
                break
        assert update["append"]["result"]["numeric"]["values"] == [0.0]
        await client.close()
    finally:
        server.stop(signal.SIGTERM)


async def test_the_byte_cap_prunes_the_oldest_points_first(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data, tmp_path / "server.log", {"SPARKWIRE_MAX_LOG_BYTES": str(2 << 20)})
    try:
        start = time.time_ns() - 1800 * NANOS
        for i in range(30):  # ~10 MB of recent points, one block per request
            write(server, "cap", start + i * 30 * NANOS, 20_000)
        wait_for(lambda: log_size(data) < 3 << 20, "the log under its 2 MiB cap (plus a page margin)")
        kept = [t for c, _, t, _, _ in stored_rows(data, RID) if c == "cap"]
        assert kept and len(kept) < 30 * 20_000
        # The oldest went first: what is left is exactly the newest blocks, through the last point.
        last = start + 29 * 30 * NANOS + 19_999 * 1_000_000
        assert max(kept) == last
        assert kept == sorted(kept) and min(kept) > start
    finally:
        server.stop(signal.SIGTERM)
