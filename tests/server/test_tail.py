"""`sparkwire tail` and the Python client as a user meets them on a real server (issue 50, items 10,
13 and 14): `sparkwire tail` run as a subprocess and its output read; the client's notice for a
mistyped channel; a refusal's message in human units."""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from sparkwire_client import Client, SubscriptionError, numeric_channel, series
from sparkwire_client.client import Subscription
from tests.conftest import ROOT, ServerProcess
from tests.proxy import Proxy
from tests.wire import NANOS, write_points

BUCKET_LINE = re.compile(r"^(\S+Z) mean=(\S+) min=(\S+) max=(\S+) count=(\d+)$")


def unique_rid(name: str) -> str:
    return f"ri.test.tail.{name}.{time.time_ns()}"


async def read_until(stream: asyncio.StreamReader, done: object, timeout: float = 120) -> list[str]:
    lines: list[str] = []
    async with asyncio.timeout(timeout):
        while not done(lines):  # type: ignore[operator]
            line = await stream.readline()
            assert line, f"the stream ended: {lines}"
            lines.append(line.decode().rstrip("\n"))
    return lines


async def quiet_for(stream: asyncio.StreamReader, seconds: float) -> list[str]:
    """The lines `stream` gives within `seconds` (none expected)."""
    lines: list[str] = []
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(seconds):
            while line := await stream.readline():
                lines.append(line.decode().rstrip("\n"))
    return lines


@asynccontextmanager
async def tail(*args: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """`sparkwire tail ARGS` as a user runs it; ended with Ctrl+C, which must exit 0."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.runtime.cli", "tail", *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            assert await asyncio.wait_for(process.wait(), 60) == 0


def twenty_hz(first_second: int, seconds: int) -> list[tuple[int, float]]:
    """20 points a second from the whole second `first_second`, each second's value its index."""
    return [
        ((first_second + s) * NANOS + i * NANOS // 20, float(s)) for s in range(seconds) for i in range(20)
    ]


# -- sparkwire tail ------------------------------------------------------------------------------------
async def test_tail_of_a_20_hz_channel_prints_the_newest_complete_seconds_once_each(
    server: ServerProcess,
) -> None:
    """The demo's case: 1,200 points a minute. Was: 1-point buckets (count=1), the whole window
    first (a line per point), and each bucket again as it filled."""
    rid = unique_rid("20hz")
    base = time.time_ns() // NANOS - 30  # 30 whole seconds of history, second 29 the newest
    await write_points(server.base_url, rid, "engine.temp", twenty_hz(base, 30))
    async with tail("--url", server.base_url, "--data-source", rid, "--channel", "engine.temp") as process:
        assert process.stdout is not None and process.stderr is not None
        lines = await read_until(process.stdout, lambda lines: len(lines) == 10)
        parsed = [BUCKET_LINE.match(line) for line in lines]
        assert all(parsed), lines
        # the newest 10 complete 1 s buckets of 20 points, oldest first; second 29 is still filling
        assert [(m[2], m[3], m[4], m[5]) for m in parsed if m] == [
            (f"{s}", f"{s}", f"{s}", "20") for s in range(19, 29)
        ]
        stamps = [m[1] for m in parsed if m]
        assert len(set(stamps)) == 10 and stamps == sorted(stamps)
        assert await quiet_for(process.stdout, 3) == []  # nothing reprinted while nothing changes

        await write_points(server.base_url, rid, "engine.temp", twenty_hz(base + 30, 1))
        (line,) = await read_until(process.stdout, lambda lines: len(lines) == 1)
        assert re.fullmatch(r"\S+Z mean=29 min=29 max=29 count=20", line), line  # second 29, now complete
        assert await quiet_for(process.stdout, 3) == []  # second 30 waits for its end
    assert (await process.stderr.read()).decode() == ""


async def test_tail_all_prints_the_whole_window_first(server: ServerProcess) -> None:
    rid = unique_rid("all")
    now = time.time_ns()
    await write_points(server.base_url, rid, "p", [(now - (20 - i) * NANOS, float(i)) for i in range(20)])
    async with tail("--url", server.base_url, "--data-source", rid, "--channel", "p", "--all") as process:
        assert process.stdout is not None
        lines = await read_until(process.stdout, lambda lines: len(lines) == 20)
        assert [line.split()[-1] for line in lines] == [str(i) for i in range(20)]  # raw: fewer than 60
    async with tail("--url", server.base_url, "--data-source", rid, "--channel", "p") as process:
        assert process.stdout is not None
        lines = await read_until(process.stdout, lambda lines: len(lines) == 10)
        assert [line.split()[-1] for line in lines] == [str(i) for i in range(10, 20)]  # --last 10


async def test_tail_enum_table_prints_each_value_and_its_count(server: ServerProcess) -> None:
    """Was: `{'PARK': 12, 'DRIVE': 28}`, a Python dict."""
    rid = unique_rid("enum")
    second = time.time_ns() // NANOS
    points = [(second * NANOS + i * NANOS // 100, "DRIVE" if i % 4 else "PARK") for i in range(80)]
    await write_points(server.base_url, rid, "drive.mode", points)  # 80 points in one second: a bucket
    async with tail(
        "--url", server.base_url, "--data-source", rid, "--channel", "drive.mode", "--enum", "--table"
    ) as process:
        assert process.stdout is not None
        lines = await read_until(process.stdout, lambda lines: len(lines) == 3)
        assert lines[0].split() == ["group", "time", "(UTC)", "value"]
        assert lines[1].endswith("DRIVE: 60, PARK: 20 (first PARK)"), lines[1]
        assert "{" not in lines[1]


async def test_tail_names_the_channels_written_when_the_channel_is_mistyped(server: ServerProcess) -> None:
    rid = unique_rid("typo")
    now = time.time_ns()
    await write_points(server.base_url, rid, "engine.temp", [(now - NANOS, 80.0)])
    await write_points(server.base_url, rid, "engine.rpm", [(now - NANOS, 900.0)])
    args = ("--url", server.base_url, "--data-source", rid, "--channel", "engine.tmep")
    async with tail(*args) as process:
        assert process.stderr is not None
        (line,) = await read_until(process.stderr, lambda lines: lines)
        assert line == f'# No channel "engine.tmep" in {rid} (its channels: engine.rpm, engine.temp).'


async def test_tail_says_on_stderr_while_the_server_is_away(server: ServerProcess) -> None:
    """Was: silence while the client reconnected."""
    rid = unique_rid("away")
    await write_points(server.base_url, rid, "p", [(time.time_ns() - NANOS, 1.0)])
    proxy = Proxy(server.port)
    await proxy.start()
    try:
        async with tail("--url", proxy.base_url, "--data-source", rid, "--channel", "p") as process:
            assert process.stdout is not None and process.stderr is not None
            await read_until(process.stdout, lambda lines: len(lines) == 1)
            proxy.refusing = True
            proxy.cut()
            (line,) = await read_until(process.stderr, lambda lines: lines, timeout=30)
            assert line == (
                f"# lost the connection to {proxy.base_url}: reconnecting (the view resumes when it is back)"
            )
            proxy.refusing = False
            (line,) = await read_until(process.stderr, lambda lines: lines, timeout=60)
            assert line == f"# connected to {proxy.base_url} again"
    finally:
        await proxy.close()


# -- the Python client -----------------------------------------------------------------------------------
async def notice_of(sub: Subscription, timeout: float = 60) -> str:
    async with asyncio.timeout(timeout):
        async for view in sub:
            assert view.rows() == []
            if sub.notice is not None:
                return sub.notice
    raise AssertionError("the subscription ended")


async def test_the_client_explains_an_empty_view_as_the_dashboard_does(
    server: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """Was: one empty view, then silence."""
    rid = unique_rid("client")
    now = time.time_ns()
    await write_points(server.base_url, rid, "engine.temp", [(now - NANOS, 80.0)], tags={"vehicle": "a1"})
    await write_points(server.base_url, rid, "old", [(now - 7200 * NANOS, 1.0)])
    caplog.set_level(logging.WARNING, logger="sparkwire_client.client")
    async with Client(server.base_url) as client:
        typo = await client.subscribe(series(numeric_channel(rid, "engine.tmep")), window=60)
        expected = f'No channel "engine.tmep" in {rid} (its channels: engine.temp, old).'
        assert await notice_of(typo) == expected
        assert f"subscription {typo.id}: {expected}" in caplog.text  # said even to a program that never looks

        nobody = await client.subscribe(series(numeric_channel("ri.nobody.wrote.here", "x")), window=60)
        assert (await notice_of(nobody)).startswith('No data source "ri.nobody.wrote.here" has been written')

        tags = await client.subscribe(
            series(numeric_channel(rid, "engine.temp", tags={"vehicle": "b2"})), window=60
        )
        assert await notice_of(tags) == (
            f"No series of engine.temp in {rid} has the tags vehicle=b2 (its series: vehicle=a1)."
        )

        old = await client.subscribe(series(numeric_channel(rid, "old")), window=60)
        assert await notice_of(old) == "No points of old in the last 60 s."

        # the notice goes once points arrive
        await write_points(server.base_url, rid, "old", [(time.time_ns(), 2.0)])
        view = await old.wait_for(lambda v: v.values == [2.0], timeout=60)
        assert view.values == [2.0] and old.notice is None

        right = await client.subscribe(series(numeric_channel(rid, "engine.temp")), window=60)
        await right.wait_for(lambda v: v.values == [80.0], timeout=60)
        assert right.notice is None


# -- durations in human units ------------------------------------------------------------------------------
async def test_a_refused_window_is_said_in_hours(server: ServerProcess) -> None:
    """Was: `windowWidth 100000000000000 ns exceeds 86400000000000 ns`."""
    async with Client(server.base_url) as client:
        sub = await client.subscribe(series(numeric_channel(unique_rid("wide"), "p")), window=100_000)
        with pytest.raises(SubscriptionError) as refused:
            await sub.next(timeout=60)
    error = refused.value.error
    assert error["name"] == "PersistentCompute:WindowTooLarge"
    assert error["message"] == "windowWidth 27.8 h exceeds the limit of 24 h (SPARKWIRE_MAX_WINDOW_SECONDS)"
    assert error["params"] == {"maxWindowNanos": "86400000000000"}  # the machine's params unchanged
