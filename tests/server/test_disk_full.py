"""A full disk, for real: a server whose data directory is a small tmpfs. Below its free-space floor
ingest answers 507 `Storage:InsufficientStorage` and stores nothing, subscriptions keep being served
from what is stored, /readyz and /metrics say why; once space returns, writes resume by themselves."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import start_server
from tests.log_file import stored_rows
from tests.wire import NANOS, Client, channel_variable, full_entries, new_id, series_node, subscription, ts

RID = "ri.sparkwire.test.dataset.diskfull"
MIB = 1 << 20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def post(base_url: str, t: int, value: float) -> httpx.Response:
    body = {
        "dataSourceRid": RID,
        "batches": [
            {
                "channel": "level",
                "points": {"type": "double", "double": [{"timestamp": ts(t), "value": value}]},
            }
        ],
    }
    return httpx.post(f"{base_url}/storage/writer/v1", json=body, timeout=30)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


async def test_below_the_floor_writes_are_refused_and_resume_when_space_returns(small_disk: Path) -> None:
    data = small_disk / "data"
    env = {"SPARKWIRE_MIN_FREE_BYTES": str(16 * MIB)}
    server = start_server(data, small_disk.parent / "server.log", env)
    client = None
    try:
        t0 = time.time_ns() - 10 * NANOS
        assert post(server.base_url, t0, 1.0).status_code == 200
        client = await Client.connect(server.ws_url)
        sub_id = new_id()
        await client.subscribe(
            {sub_id: subscription(series_node(), {"x": channel_variable(RID, "level")}, 600)}
        )
        assert (await client.creation(sub_id))["type"] == "success"
        assert full_entries(await client.update(sub_id))[1] == [(t0, 1.0)]

        # Fill the disk to 8 MiB free: below the 16 MiB floor, far from really full.
        filler = small_disk / "filler"
        with filler.open("wb") as f:
            f.write(b"\0" * max(0, free_bytes(small_disk) - 8 * MIB))
        # The floor reads free space at most every 100 ms: /readyz says when it has seen the change.
        deadline = time.monotonic() + 10
        while httpx.get(f"{server.base_url}/readyz").json().get("writes") != "refused":
            assert time.monotonic() < deadline, "the server never saw the disk below its floor"
            time.sleep(0.05)
        refused = post(server.base_url, t0 + NANOS, 2.0)
        assert refused.status_code == 507, refused.text
        error = refused.json()
        assert error["errorName"] == "Storage:InsufficientStorage"
        assert "SPARKWIRE_MIN_FREE_BYTES" in error["message"]
        assert [v for _, _, _, v, _ in stored_rows(data, RID)] == [1.0]  # nothing of it stored
        ready = httpx.get(f"{server.base_url}/readyz").json()
        assert ready["status"] == "ready" and ready["writes"] == "refused"
        assert "SPARKWIRE_MIN_FREE_BYTES" in ready["reason"]
        metrics = httpx.get(f"{server.base_url}/metrics").text
        free_line = next(
            line for line in metrics.splitlines() if line.startswith("sparkwire_data_dir_free_bytes")
        )
        assert float(free_line.split()[1]) < 16 * MIB
        # Subscriptions are still served from what is stored: a new one gets its FullResult.
        other = await Client.connect(server.ws_url)
        other_id = new_id()
        unique = {f"u{time.time_ns()}": {"type": "double", "double": 1.0}}
        variables = {"x": channel_variable(RID, "level"), **unique}
        await other.subscribe({other_id: subscription(series_node(), variables, 600)})
        assert (await other.creation(other_id))["type"] == "success"
        assert full_entries(await other.update(other_id))[1] == [(t0, 1.0)]
        await other.close()

        # Space returns: writes resume by themselves and reach the live subscriber.
        filler.unlink()
        deadline = time.monotonic() + 30
        while (r := post(server.base_url, t0 + 2 * NANOS, 3.0)).status_code == 507:
            assert time.monotonic() < deadline, "writes never resumed"
            time.sleep(0.2)
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 60
        while True:
            update = await client.update(sub_id, timeout=max(1, deadline - time.monotonic()))
            result = update.get("append", {}).get("result", {}).get("numeric", {})
            if result.get("values"):
                break
        assert result["values"] == [3.0]
        assert httpx.get(f"{server.base_url}/readyz").json() == {"status": "ready"}
    finally:
        if client is not None:
            await client.close()
        with contextlib.suppress(Exception):
            server.stop(signal.SIGTERM)
