"""Stopping under any supervisor, each case on a server process of its own, with real signals.

Three ways a SIGTERM arrives, and the drain must be the same in each (docs/protocol.md, "On SIGTERM"):
- to the main process only: `kill PID`, Kubernetes (PID 1 of the container), systemd KillMode=mixed;
- to the whole process group: `kill -TERM -- -PGID`, a terminal's Ctrl+C does the same with SIGINT;
- to every process at once, the JVM and the Python workers included, whatever their group:
  systemd's default KillMode=control-group, emulated here by signalling every process of the
  server's tree in one go.
Also: no client, no wait; the last client leaving ends the grace; Spark's JVM goes when Python is
killed; a JVM that dies under a running server makes it drain and exit 1 for its supervisor.
The deploy/ files that rely on this are checked here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ServerProcess, start_server
from tests.processes import alive, process_tree
from tests.wire import Client, channel_variable, new_id, series_node, subscription, write_points

GRACE_S = 20  # the tests' updates during the grace arrive well within it, even on a busy machine
LONG_GRACE_S = 120  # a stop long before it ends was not the grace running out
GONE_S = 60  # generous: Spark's shutdown on two shared, busy cores


def ignores(pid: int, sig: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(int(mask, 16) >> (sig - 1) & 1)


def jvm_of(server: ServerProcess) -> int:
    for pid in process_tree(server.process.pid):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"/java"):
                return pid
    raise AssertionError("no JVM under the server")


def send(server: ServerProcess, sig: int, how: str) -> None:
    if how == "main":
        server.process.send_signal(sig)
    elif how == "group":
        os.killpg(server.process.pid, sig)
    else:  # "cgroup": every process of the tree, in one go
        for pid in process_tree(server.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)


async def until_gone(pids: list[int], timeout: float = GONE_S) -> None:
    deadline = time.monotonic() + timeout
    while left := [p for p in pids if alive(p)]:
        assert time.monotonic() < deadline, f"still running: {left}"
        await asyncio.sleep(0.2)


async def exit_status(server: ServerProcess, timeout: float = GONE_S) -> int:
    return await asyncio.to_thread(server.process.wait, timeout)


@contextlib.contextmanager
def own_server(tmp_path: Path, grace: float, **env: str) -> Iterator[ServerProcess]:
    settings = {"SPARKWIRE_SHUTDOWN_GRACE": str(grace), **env}
    server = start_server(tmp_path / "data", tmp_path / "server.log", env=settings, own_process_group=True)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.kill_all()
        with contextlib.suppress(ProcessLookupError):  # whatever the test left of the group
            os.killpg(server.process.pid, signal.SIGKILL)


async def live_subscriber(server: ServerProcess, rid: str) -> tuple[Client, str]:
    """A client whose subscription already got a FullResult and an append (the stream is warm)."""
    client = await Client.connect(server.ws_url)
    sub_id = new_id()
    await client.subscribe({sub_id: subscription(series_node(), {"x": channel_variable(rid, "p")}, 600)})
    assert (await client.creation(sub_id))["type"] == "success"
    assert (await client.update(sub_id))["type"] == "full"
    await write_points(server.base_url, rid, "p", [(time.time_ns(), 1.0)])
    assert (await client.update(sub_id))["type"] == "append"
    return client, sub_id


@pytest.mark.parametrize("how", ["main", "group", "cgroup"])
async def test_sigterm_drains_the_same_whoever_receives_it(tmp_path: Path, how: str) -> None:
    with own_server(tmp_path, GRACE_S) as server:
        jvm = jvm_of(server)
        assert ignores(jvm, signal.SIGTERM), "Spark's JVM must leave SIGTERM to the Python process"
        rid = f"ri.signals.{how}.{time.time_ns()}"
        client, sub_id = await live_subscriber(server, rid)
        tree = process_tree(server.process.pid)

        signalled = time.monotonic()
        send(server, signal.SIGTERM, how)
        notice = await asyncio.wait_for(client.health.get(), 30)
        assert notice["type"] == "shutdownNotice"
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            assert (await http.get("/readyz")).status_code == 503
            assert (await http.get("/persistent-compute/enabled")).status_code == 503
        await write_points(server.base_url, rid, "p", [(time.time_ns(), 7.0)])
        update = await client.update(sub_id, timeout=GRACE_S - 5)  # the stream still runs
        assert update["append"]["result"]["numeric"]["values"] == [7.0]

        await asyncio.wait_for(client.ws.wait_closed(), GRACE_S + 30)
        assert client.ws.close_code == 1012
        assert await exit_status(server) == 0
        stopped = time.monotonic() - signalled
        await until_gone(tree)  # the JVM and PySpark's workers went with the server

        log = server.log_text()
        assert "Traceback" not in log
        assert "restarting the streaming query" not in log
        assert "streaming query stopped during shutdown" not in log
        assert "Application shutdown complete." in log
        assert stopped >= GRACE_S - 1, "the client stayed: the grace period ran its course"


@pytest.mark.parametrize(
    ("sig", "how"),
    [
        pytest.param(signal.SIGTERM, "main", id="SIGTERM-main"),
        pytest.param(signal.SIGINT, "group", id="SIGINT-group"),
    ],
)
async def test_without_clients_the_server_stops_at_once(tmp_path: Path, sig: int, how: str) -> None:
    """SIGINT to the group is a terminal's Ctrl+C."""
    with own_server(tmp_path, LONG_GRACE_S) as server:
        tree = process_tree(server.process.pid)
        send(server, sig, how)
        assert await exit_status(server, LONG_GRACE_S / 2) == 0  # long before the grace would end
        await until_gone(tree)
        log = server.log_text()
        assert "draining: no connections, stopping now" in log
        assert "Traceback" not in log


async def test_the_grace_period_ends_when_the_last_client_leaves(tmp_path: Path) -> None:
    with own_server(tmp_path, LONG_GRACE_S) as server:
        first, _ = await live_subscriber(server, f"ri.signals.leave.{time.time_ns()}")
        second = await Client.connect(server.ws_url)
        server.process.send_signal(signal.SIGTERM)
        for client in (first, second):
            assert (await asyncio.wait_for(client.health.get(), 30))["type"] == "shutdownNotice"
        await first.close()
        await asyncio.sleep(1)
        assert server.process.poll() is None, "one client is still connected: the grace goes on"
        await second.close()
        assert await exit_status(server, LONG_GRACE_S / 2) == 0
        log = server.log_text()
        assert "draining: every client left" in log
        assert "Traceback" not in log


async def test_a_second_sigterm_ends_the_grace_and_still_stops_cleanly(tmp_path: Path) -> None:
    """An impatient operator (or two supervisors) sends SIGTERM twice: the second ends the grace
    period at once, the client gets its 1012, and the server stops as cleanly as after one."""
    with own_server(tmp_path, LONG_GRACE_S) as server:
        client, _ = await live_subscriber(server, f"ri.signals.twice.{time.time_ns()}")
        tree = process_tree(server.process.pid)
        server.process.send_signal(signal.SIGTERM)
        assert (await asyncio.wait_for(client.health.get(), 30))["type"] == "shutdownNotice"
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(client.ws.wait_closed(), LONG_GRACE_S / 2)  # long before the grace ends
        assert client.ws.close_code == 1012
        assert await exit_status(server, LONG_GRACE_S / 2) == 0
        assert time.monotonic() - signalled < LONG_GRACE_S / 2
        await until_gone(tree)
        log = server.log_text()
        assert "second signal: ending the grace period now" in log
        assert "draining: a second signal, closing 1 connection(s) with 1012" in log
        assert "Application shutdown complete." in log
        assert "Traceback" not in log


async def test_spark_goes_when_the_python_process_is_killed(tmp_path: Path) -> None:
    """The JVM ignores SIGTERM, so it must not outlive its parent: PySpark's gateway exits when its
    stdin pipe from Python closes, whatever killed Python."""
    with own_server(tmp_path, GRACE_S) as server:
        tree = process_tree(server.process.pid)
        jvm = jvm_of(server)
        server.process.kill()  # the main process only, as an OOM kill would
        assert await exit_status(server) == -signal.SIGKILL
        await until_gone([jvm])
        await until_gone(tree)


async def test_a_jvm_that_dies_makes_the_server_drain_and_exit_1(tmp_path: Path) -> None:
    """The streaming query cannot be restarted without its JVM: the server says so, drains, and
    exits 1 so its supervisor (Restart=on-failure, Kubernetes) starts a fresh one. Until the JVM is
    gone PySpark prints its own errors about the broken connections; what the server logs from
    then on, its shutdown included, has no traceback."""
    with own_server(tmp_path, GRACE_S) as server:
        rid = f"ri.signals.jvm.{time.time_ns()}"
        client, sub_id = await live_subscriber(server, rid)
        os.kill(jvm_of(server), signal.SIGKILL)

        error = await client.update(sub_id, timeout=60)
        assert error["type"] == "error"
        assert error["error"]["serializableError"]["name"] == "PersistentCompute:JobInvalidState"
        assert (await asyncio.wait_for(client.health.get(), 30))["type"] == "shutdownNotice"
        await asyncio.wait_for(client.ws.wait_closed(), GRACE_S + 30)
        assert client.ws.close_code == 1012
        assert await exit_status(server) == 1

        log = server.log_text()
        marker = "the server stops, with exit status 1"
        assert marker in log
        after = log[log.index(marker) :]
        assert "Traceback" not in after
        assert "Spark's JVM had already exited" in after
        assert "Application shutdown complete." in after


# -- the deploy files --------------------------------------------------------------------------------
