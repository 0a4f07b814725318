"""What a new user and an operator meet first, against the real server: the demo from the server's
distribution alone, the "ready" log line, /docs and the AsyncAPI viewer rendered in Chromium with no
network, the favicon, the default process metrics and HEAD /metrics, `sparkwire tail`, the client's
loop ending after a stopped replay, and the dashboard's empty and error states in Chromium."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from typing import Any

import httpx
from playwright.async_api import Page, Route, expect

from sparkwire_client import Client, Replay, Writer, numeric_channel, series
from tests.conftest import ROOT, ServerProcess
from tests.server.test_dashboard import open_dashboard, until
from tests.wire import NANOS, write_points


def unique_rid(name: str) -> str:
    return f"ri.test.first.{name}.{time.time_ns()}"


# -- the server's own lines and pages ----------------------------------------------------------------
def test_the_server_logs_ready_when_readyz_turns_200(server: ServerProcess) -> None:
    assert httpx.get(f"{server.base_url}/readyz", timeout=10).status_code == 200
    line = f"INFO app.ready: ready: serving on {server.base_url} (role all); the readiness probe answers 200"
    deadline = time.monotonic() + 5  # the line follows within a poll (app/runtime/readiness_log.py)
    while line not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = server.log_text()
    assert log.count(line) == 1
    assert "startup objects frozen" not in log
    assert "objects made at start-up left out of garbage-collection passes" in log


def test_the_demo_runs_from_the_servers_distribution_alone(server: ServerProcess) -> None:
    rid = unique_rid("demo")
    code = (
        "import sys; sys.modules['sparkwire_client'] = None\n"  # as if client/ were not installed
        "from app.runtime.cli import main\n"
        f"main(['demo', '--url', {server.base_url!r}, '--data-source-rid', {rid!r},"
        " '--duration', '2', '--rate', '5', '--seed', '1'])\n"
    )
    answer = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert answer.returncode == 0, answer.stderr
    assert "Traceback" not in answer.stderr
    assert "demo feed stopped:" in answer.stderr
    listed = httpx.get(f"{server.base_url}/series", timeout=10).json()
    channels = {s["channel"] for s in listed if s["dataSourceRid"] == rid}
    assert channels == {"engine.temp", "engine.rpm", "battery.voltage", "speed", "drive.mode"}


def test_metrics_carry_the_process_collectors_and_answer_head(server: ServerProcess) -> None:
    text = httpx.get(f"{server.base_url}/metrics", timeout=10).text
    for name in (
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "python_info",
        "python_gc_objects_collected_total",
    ):
        assert f"\n{name}" in text, name
    assert "# TYPE sparkwire_log_pruned_points_total counter" in text
    assert "\nsparkwire_log_pruned_points_total " in text
    assert "\nsparkwire_log_pruned_blocks_total " in text
    head = httpx.head(f"{server.base_url}/metrics", timeout=10)
    assert head.status_code == 200
    assert head.headers["content-type"].startswith("text/plain")
    assert head.content == b""


def test_the_favicon_is_served(server: ServerProcess) -> None:
    answer = httpx.get(f"{server.base_url}/favicon.ico", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "image/svg+xml"
    assert answer.text.startswith("<svg")


async def offline(page: Page, server: ServerProcess) -> list[str]:
    """Everything but the server itself is refused (as with no network); returns what was tried."""
    refused: list[str] = []

    async def only_the_server(route: Route) -> None:
        if route.request.url.startswith(server.base_url):
            await route.continue_()
        else:
            refused.append(route.request.url)
            await route.abort("internetdisconnected")

    await page.context.route("**/*", only_the_server)
    return refused


async def test_docs_render_in_chromium_with_no_network(server: ServerProcess, page: Page) -> None:
    refused = await offline(page, server)
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.on("response", lambda response: response.status >= 400 and failed.append(response.url))

    await page.goto(f"{server.base_url}/docs")
    await expect(page.locator(".swagger-ui .info .title")).to_contain_text("Sparkwire", timeout=60_000)
    await expect(page.locator(".opblock-summary-path", has_text="/storage/writer/v1").first).to_be_visible()
    await expect(page.locator(".opblock-summary-path", has_text="/readyz")).to_be_visible()

    await page.goto(f"{server.base_url}/docs/asyncapi")
    await expect(page.locator("#title")).to_have_text("Sparkwire persistent compute 0.1.0", timeout=30_000)
    await expect(page.locator(".channel h3")).to_contain_text("/persistent-compute/ws")
    await expect(page.locator("summary", has_text="ClientMessage").first).to_be_visible()
    await expect(page.locator("summary", has_text="ServerMessage").first).to_be_visible()
    assert await page.locator(".operation").count() == 2

    assert refused == [], refused
    assert failed == [], failed


# -- sparkwire tail ------------------------------------------------------------------------------------
async def read_until(stream: asyncio.StreamReader, done: Any, timeout: float = 120) -> list[str]:
    lines: list[str] = []
    async with asyncio.timeout(timeout):
        while not done(lines):
            line = await stream.readline()
            assert line, f"the stream ended: {lines}"
            lines.append(line.decode().rstrip("\n"))
    return lines


async def tail(*args: str, stdin: bytes | None = None) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.runtime.cli",
        "tail",
        *args,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE if stdin is not None else None,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    if stdin is not None:
        assert process.stdin is not None
        process.stdin.write(stdin)
        process.stdin.close()
    return process


async def test_tail_prints_each_new_point_and_ends_cleanly_on_ctrl_c(server: ServerProcess) -> None:
    rid = unique_rid("tail")
    start = time.time_ns() - 5 * NANOS
    await write_points(server.base_url, rid, "temp", [(start, 20.5)], tags={"vehicle": "a1"})
    await write_points(server.base_url, rid, "temp", [(start, 30.25)], tags={"vehicle": "b2"})
    process = await tail(
        "--url", server.base_url, "--data-source", rid, "--channel", "temp", "--group-by", "vehicle",
        "--tag", "fleet=x", "--window", "3600",
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    try:
        # --tag fleet=x selects nothing: the tail says so rather than print nothing
        warning = await read_until(process.stderr, lambda lines: lines)
        assert warning == [
            f"# No series of temp in {rid} has the tags fleet=x (its series: vehicle=a1, vehicle=b2)."
        ]
    finally:
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 60) == 0

    process = await tail(
        "--url", server.base_url, "--data-source", rid, "--channel", "temp", "--group-by", "vehicle",
        "--window", "3600",
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    stamp = "T".join(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start // NANOS)).split(" "))
    try:
        lines = await read_until(process.stdout, lambda lines: len(lines) == 2)
        assert sorted(lines) == [
            f"{stamp}.{start % NANOS // 1000:06d}Z vehicle=a1 20.5",
            f"{stamp}.{start % NANOS // 1000:06d}Z vehicle=b2 30.25",
        ]
        later = time.time_ns()
        await write_points(server.base_url, rid, "temp", [(later, 21.0)], tags={"vehicle": "a1"})
        (line,) = await read_until(process.stdout, lambda lines: len(lines) == 1)
        assert line.endswith("Z vehicle=a1 21")
    finally:
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 60) == 0
    assert (await process.stderr.read()).decode() == ""  # no traceback, nothing else


async def test_tail_follows_a_node_given_as_json_as_a_table(server: ServerProcess) -> None:
    rid = unique_rid("tail-node")
    now = time.time_ns()
    await write_points(server.base_url, rid, "rpm", [(now - 2 * NANOS, 800.0), (now - NANOS, 900.0)])
    node = series(numeric_channel(rid, "rpm") * 2)
    request = node.request(600)
    process = await tail(
        "--url", server.base_url, "--node", "-", "--table", stdin=json.dumps(request).encode()
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        lines = await read_until(process.stdout, lambda lines: len(lines) == 3)
        assert lines[0].split() == ["group", "time", "(UTC)", "value"]
        assert lines[1].split()[0] == "-" and lines[1].split()[-1] == "1800"  # the newest row, doubled
        assert lines[2] == ""
    finally:
        process.terminate()  # SIGTERM ends it as cleanly as Ctrl+C
        assert await asyncio.wait_for(process.wait(), 60) == 0
    assert (await process.stderr.read()).decode() == ""


# -- the client ----------------------------------------------------------------------------------------
async def test_iterating_a_replay_with_then_stop_ends_after_its_period(server: ServerProcess) -> None:
    rid = unique_rid("replay-stop")
    start = time.time_ns() - 600 * NANOS
    # Iterating skips to the newest view, so the replay's first new point comes 3 s of wall time
    # (30 s of replay at 10x) after its FullResult: the first view is that FullResult's even on a
    # loaded machine (as fast as possible, CI once saw the two merged into one view).
    seconds = [*range(10), *range(40, 50)]
    async with Writer(server.base_url, rid) as writer:
        for i, second in enumerate(seconds):
            writer.add("p", start + second * NANOS, float(i))
    async with Client(server.base_url) as client:
        begin, end = (start + 9.5 * NANOS) / 1e9, (start + 50.5 * NANOS) / 1e9
        replay = Replay(start=begin, end=end, speed=10, then="stop")
        sub = await client.subscribe(series(numeric_channel(rid, "p")), window=120, replay=replay)
        views = []

        async def follow() -> None:
            async for view in sub:
                views.append(view)

        await asyncio.wait_for(follow(), timeout=90)  # the loop ends by itself
        assert sub.replay_ended == "stop"
        assert views[0].values == [float(i) for i in range(10)]  # the window ending at its start
        assert views[-1].values == [float(i) for i in range(20)]  # the window ending at its end
        assert len({id(v) for v in views}) == len(views)


# -- the dashboard's empty and error states --------------------------------------------------------------
async def test_the_dashboard_says_why_its_chart_is_empty(server: ServerProcess, page: Page) -> None:
    rid = unique_rid("dash-empty")
    now = time.time_ns()
    await write_points(server.base_url, rid, "engine.temp", [(now - NANOS, 80.0)])
    await write_points(server.base_url, rid, "old", [(now - 7200 * NANOS, 1.0)])

    await open_dashboard(page, server.base_url, rid=rid, channels="engine.tmep", window="60", mode="raw")
    data = await until(page, lambda d: d["notices"])
    assert data["notices"] == [f'No channel "engine.tmep" in {rid} (its channels: engine.temp, old).']
    await expect(page.locator("#notice")).to_have_text(data["notices"][0])

    await open_dashboard(page, server.base_url, rid="ri.nobody.wrote.here", channels="x", window="60")
    data = await until(page, lambda d: d["notices"])
    assert data["notices"][0].startswith('No data source "ri.nobody.wrote.here" has been written to yet')
    await expect(page.locator("#notice")).to_be_visible()

    await open_dashboard(page, server.base_url, rid=rid, channels="old", window="60", mode="raw")
    data = await until(page, lambda d: d["notices"])
    assert data["notices"] == ["No points of old in the last 60 s."]

    await open_dashboard(page, server.base_url, rid=rid, channels="engine.temp", window="60", mode="raw")
    data = await until(page, lambda d: d["series"].get("engine.temp", {}).get("points"))
    assert data["notices"] == []
    await expect(page.locator("#notice")).to_be_hidden()
    assert data["state"] == "open" and data["ready"] == {"ready": True, "reason": ""}
    await expect(page.locator("#state")).to_have_text("open")


async def test_the_dashboard_form_fits_its_mode_and_shows_the_whole_rid(
    server: ServerProcess, page: Page
) -> None:
    rid = "ri.sparkwire.main.dataset.a-data-source-with-a-long-name-" + str(time.time_ns())
    await open_dashboard(page, server.base_url, rid=rid, channels="x", mode="raw")
    await expect(page.locator("#buckets-field")).to_be_hidden()
    await expect(page.locator("#threshold-field")).to_be_hidden()
    fits = "e => e.scrollWidth <= e.clientWidth"
    assert await page.locator("#rid").evaluate(fits), "the data source box cuts the rid"
    await page.select_option("#mode", "buckets")
    await expect(page.locator("#buckets-field")).to_be_visible()
    await expect(page.locator("#threshold-field")).to_be_hidden()
    await page.select_option("#mode", "ranges")
    await expect(page.locator("#buckets-field")).to_be_hidden()
    await expect(page.locator("#threshold-field")).to_be_visible()


async def test_the_dashboard_labels_a_replay_as_a_replay(server: ServerProcess, page: Page) -> None:
    rid = unique_rid("dash-replay")
    start = time.time_ns() - 600 * NANOS
    await write_points(server.base_url, rid, "p", [(start + i * NANOS, float(i)) for i in range(20)])
    iso = lambda ns: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns // NANOS))  # noqa: E731
    await open_dashboard(page, server.base_url, rid=rid, channels="p", window="60")
    await until(page, lambda d: d["mode"] == "live")
    await expect(page.locator("#live")).to_have_text("live")
    await open_dashboard(
        page, server.base_url, rid=rid, channels="p", window="60",
        replayFrom=iso(start + 5 * NANOS), replayTo=iso(start + 600 * NANOS), speed="1", then="stop",
    )  # fmt: skip
    data = await until(page, lambda d: d["mode"] == "replay")
    assert data["replay"]["ended"] is None
    await expect(page.locator("#live")).to_contain_text("replay ")
    await expect(page.locator("#live")).to_contain_text("UTC at 1x")
    assert await page.locator("#live").get_attribute("data-mode") == "replay"


async def test_the_computations_page_shows_every_time_in_utc(server: ServerProcess, page: Page) -> None:
    rid = unique_rid("dash-utc")
    await write_points(server.base_url, rid, "p", [(time.time_ns(), 1.0)])
    async with Client(server.base_url) as client:
        sub = await client.subscribe(series(numeric_channel(rid, "p")), window=60)
        await sub.wait_for(lambda v: v.values == [1.0], timeout=60)
        await page.goto(f"{server.base_url}/dashboard/computations.html")
        row = page.locator(f'#computations tr:has(td[data-field="series"]:has-text("{rid}"))')
        await expect(row).to_have_count(1, timeout=30_000)
        await expect(page.locator("#updated")).to_have_text(
            re.compile(r"^updated \d\d:\d\d:\d\d\.\d{3} UTC$")
        )
        last = await row.locator('td[data-field="lastUpdate"]').text_content()
        assert last is not None and (last == "—" or last.endswith(" UTC")), last
        await expect(page.locator("th", has_text="last update (UTC)")).to_be_visible()
