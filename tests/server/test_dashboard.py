"""The dashboard in a real browser (Debian's headless Chromium driven by Playwright) against the real
server: its chart's data (published on window.sparkwire) follows the points written, buckets carry
the reference min/max/mean, and the page reconnects by itself after losing its connection. Chromium's
own WebSocket also agrees to the server's deflate terms and has its deflated messages read."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import struct
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.conftest import ServerProcess, start_server
from tests.proxy import Proxy
from tests.reference import Store, bucket_width, evaluate, reference_buckets
from tests.wire import NANOS, write_points

VIEWPORT = {"width": 1100, "height": 700}  # what conftest.py's `page` opens


def unique_rid(name: str) -> str:
    return f"ri.test.dash.{name}.{time.time_ns()}"


async def open_dashboard(page: Page, base_url: str, **params: str) -> None:
    query = {"groupBy": "", "tags": "", **params}
    await page.goto(f"{base_url}/?{urlencode(query)}")


async def published(page: Page) -> dict[str, Any]:
    return await page.evaluate("() => JSON.parse(JSON.stringify(window.sparkwire))")


async def until(page: Page, check: Callable[[dict[str, Any]], bool], timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        data = await published(page)
        if check(data):
            return data
        assert time.monotonic() < deadline, f"the page never got there: {data}"
        await asyncio.sleep(0.2)


def ms(ns: int) -> float:
    return ns / 1e6


def points_of(data: dict[str, Any], label: str) -> list[list[Any]]:
    entry = data["series"].get(label)
    return entry["points"] if entry else []


async def drawn_pixels(page: Page, label: str) -> int:
    """Canvas pixels in a series' colour: the chart really drew it."""
    color = (await published(page))["colors"][label]
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return int(
        await page.evaluate(
            """([r, g, b]) => {
                const c = document.getElementById("chart");
                const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
                const near = (i) => Math.abs(d[i] - r) < 30 && Math.abs(d[i + 1] - g) < 30
                    && Math.abs(d[i + 2] - b) < 30;
                let n = 0;
                for (let i = 0; i < d.length; i += 4) if (near(i)) n++;
                return n;
            }""",
            rgb,
        )
    )


async def test_the_chart_follows_written_points(server: ServerProcess, page: Page) -> None:
    rid = unique_rid("raw")
    now = time.time_ns()
    history = [(now - (60 - i) * NANOS + 123_456, float(i % 7)) for i in range(40)]
    modes = [(now - (50 - i) * NANOS, ["PARK", "DRIVE"][i % 2]) for i in range(5)]
    await write_points(server.base_url, rid, "p", history)
    await write_points(server.base_url, rid, "mode", modes)
    await open_dashboard(page, server.base_url, rid=rid, channels="p,mode", window="300", mode="raw")

    data = await until(page, lambda d: len(points_of(d, "p")) == len(history) and points_of(d, "mode"))
    assert [v for _, v in points_of(data, "p")] == [v for _, v in history]
    assert all(
        math.isclose(t, ms(ns), abs_tol=1e-3)
        for (t, _), (ns, _) in zip(points_of(data, "p"), history, strict=True)
    )
    assert data["series"]["mode"]["kind"] == "enum"
    assert [v for _, v in points_of(data, "mode")] == [m for _, m in modes]
    assert data["state"] == "open"

    fresh = [(time.time_ns() + i * 1_000_000, 100.0 + i) for i in range(3)]
    await write_points(server.base_url, rid, "p", fresh)
    data = await until(page, lambda d: [v for _, v in points_of(d, "p")[-3:]] == [100.0, 101.0, 102.0])
    assert len(points_of(data, "p")) == len(history) + 3
    assert data["latencyMs"] is not None  # the appends' latency readout
    # The readout is painted after the state it reads: wait for the paint, not just the state.
    await expect(page.locator("#latency")).not_to_have_text("latency —", timeout=10_000)

    await page.wait_for_timeout(300)  # at least one redraw after the last update
    assert await drawn_pixels(page, "p") > 100
    png = await page.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (VIEWPORT["width"], VIEWPORT["height"])
    assert len(png) > 10_000  # a blank page of this size compresses to a few kilobytes


async def test_the_merged_view_keeps_points_that_share_a_timestamp(server: ServerProcess, page: Page) -> None:
    """The page's own merge (dashboard/protocol.js, as served): a union or a selectTags merging groups
    sends every point of a shared timestamp, and an append replaces whatever lies in its span."""
    await open_dashboard(page, server.base_url, rid=unique_rid("shared"), channels="p", window="300")
    seen = await page.evaluate(
        """async () => {
            const { MergedView } = await import("./dashboard/protocol.js");
            const ts = (s) => ({ seconds: s, nanos: 0 });
            const numeric = (points) => ({ type: "numeric", numeric: {
                timestamps: points.map(([s]) => ts(s)), values: points.map(([, v]) => v) } });
            const append = (start, end, points) => ({ type: "append",
                append: { start: ts(start), end: ts(end), result: numeric(points) } });
            const view = new MergedView(100_000);
            const values = () => view.groups.get("").sorted().map(([, v]) => v);
            const seen = [];
            view.apply({ type: "full", full: { result: numeric([[10, 1], [10, 5], [11, 2]]) } });
            seen.push(values());
            view.apply(append(12, 12, [[12, 7], [12, 8]]));
            seen.push(values());
            view.apply(append(10, 10, [[10, 6]]));
            seen.push(values());
            return seen;
        }"""
    )
    assert seen == [[1, 5, 2], [1, 5, 2, 7, 8], [6, 2, 7, 8]]


async def test_buckets_show_the_reference_min_max_and_mean(server: ServerProcess, page: Page) -> None:
    rid = unique_rid("buckets")
    now = time.time_ns()
    points = [(now - 100 * NANOS + i * 500_000_000, math.sin(i / 9) * 10) for i in range(200)]
    await write_points(server.base_url, rid, "p", points)
    await open_dashboard(
        page, server.base_url, rid=rid, channels="p", window="300", mode="buckets", buckets="20"
    )

    expected = reference_buckets(points, bucket_width(300 * NANOS, 20))
    data = await until(page, lambda d: len(d["series"].get("p", {}).get("buckets", [])) == len(expected))
    assert data["series"]["p"]["kind"] == "bucketedNumeric"
    for (t, mn, mx, mean, count), (end, ref) in zip(data["series"]["p"]["buckets"], expected, strict=True):
        assert math.isclose(t, ms(end), abs_tol=1e-3)
        assert count == ref["count"]
        for got, want in ((mn, ref["min"]), (mx, ref["max"]), (mean, ref["mean"])):
            assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    assert await drawn_pixels(page, "p") > 100


@contextlib.asynccontextmanager
async def reconnected_after_a_point_written_while_away(
    server: ServerProcess, page: Page, rid: str
) -> AsyncIterator[dict[str, Any]]:
    """The page, through a proxy, shows point 1.0 of `rid`; its connection is cut (new ones
    refused), 2.0 is written while it is away, then it may connect again: what it publishes once
    it shows both points (the proxy stays up until the block ends)."""
    await write_points(server.base_url, rid, "p", [(time.time_ns() - NANOS, 1.0)])
    proxy = Proxy(server.port)
    await proxy.start()
    try:
        await open_dashboard(page, proxy.base_url, rid=rid, channels="p", window="300", mode="raw")
        await until(page, lambda d: [v for _, v in points_of(d, "p")] == [1.0])

        proxy.refusing = True
        proxy.cut()
        await until(page, lambda d: d["state"] == "reconnecting", timeout=30)
        await write_points(server.base_url, rid, "p", [(time.time_ns(), 2.0)])  # while the page is away
        await asyncio.sleep(1.0)
        proxy.refusing = False

        yield await until(page, lambda d: [v for _, v in points_of(d, "p")] == [1.0, 2.0])
    finally:
        await proxy.close()


async def test_the_page_reconnects_after_losing_its_connection(server: ServerProcess, page: Page) -> None:
    async with reconnected_after_a_point_written_while_away(server, page, unique_rid("reconnect")) as data:
        assert data["state"] == "open"
        assert await page.locator("#state").inner_text() == "open"


async def test_chromium_compresses_each_message_on_its_own_and_is_answered(
    page: Page, server: ServerProcess
) -> None:
    """The server asks browsers for client_no_context_takeover (docs/decisions/0020): Chromium must
    accept it, and its compressed messages, each inflated on its own, must still be read."""
    await page.goto(server.base_url + "/")
    result = await page.evaluate(
        """(url) => new Promise((resolve, reject) => {
            setTimeout(() => reject(new Error("no pong within 30 s")), 30000);
            const ws = new WebSocket(url);
            const sentAt = new Date().toISOString();
            ws.onerror = () => reject(new Error("websocket error"));
            ws.onclose = (event) => reject(new Error(`closed with ${event.code}`));
            const firstIds = [];
            const answered = [];
            ws.onopen = () => {
                // two ~3.8 KB messages, which Chromium sends deflated, then a ping; each unsubscribe
                // names ids no subscription has, so the server's answer quotes the first of them:
                // proof that it inflated and read that very message
                for (let i = 0; i < 2; i++) {
                    const ids = Array.from({length: 100}, () => crypto.randomUUID());
                    firstIds.push(ids[0]);
                    ws.send(JSON.stringify({type: "unsubscribe", unsubscribe: ids}));
                }
                ws.send(JSON.stringify({type: "ping", ping: {sentAt}}));
            };
            ws.onmessage = (event) => {
                const frame = JSON.parse(event.data);
                if (frame.type !== "health") return;
                if (frame.health.type === "clientMessageError") {
                    const id = firstIds[answered.length];
                    const named = event.data.includes("no live subscription has the id(s)");
                    if (!named || !event.data.includes(id)) {
                        reject(new Error(event.data));
                    }
                    answered.push(event.data);
                    return;
                }
                const echoed = frame.health.type === "pong" && frame.health.pong.pingOriginallySentAt;
                if (echoed && Date.parse(echoed) === Date.parse(sentAt)) {
                    ws.onclose = null;
                    resolve({extensions: ws.extensions, answered: answered.length});
                    ws.close();
                }
            };
        })""",
        server.ws_url,
    )
    assert result["extensions"].startswith("permessage-deflate")
    assert "client_no_context_takeover" in result["extensions"]
    assert result["answered"] == 2  # both deflated messages were read and answered, before the pong


def _iso(ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // NANOS)) + f".{ns % NANOS // 1_000_000:03d}Z"


async def test_the_page_replays_a_past_test_run_then_follows_live(server: ServerProcess, page: Page) -> None:
    """Re-watching a test run on the same dashboard (docs/extensions.md, replay): the chart shows the
    window ending where the replay is, and the period's last window at its end; or then live."""
    rid = unique_rid("replay")
    run_start = time.time_ns() - 900 * NANOS  # a run 15 minutes ago, 30 s long
    run = [(run_start + i * NANOS + 500_000_000, float(i)) for i in range(30)]
    await write_points(server.base_url, rid, "p", run)
    period = {"replayFrom": _iso(run_start + 10 * NANOS), "replayTo": _iso(run_start + 40 * NANOS)}
    shown = {"rid": rid, "channels": "p", "window": "30", "mode": "raw", **period}
    await open_dashboard(page, server.base_url, speed="10", then="stop", **shown)
    first = await until(page, lambda d: len(points_of(d, "p")) > 0, timeout=60)
    assert first["replay"]["ended"] is None  # still playing: at 10x the 30 s take ~3 s
    assert [v for _, v in points_of(first, "p")][:10] == [float(i) for i in range(10)]
    ended = await until(page, lambda d: d["replay"]["ended"] == "stop", timeout=60)
    # The window ending at the period's end: the run's last 30 s, from the first point on.
    assert [v for _, v in points_of(ended, "p")] == [v for _, v in run]
    await page.wait_for_timeout(300)  # a redraw after the last update
    assert await drawn_pixels(page, "p") > 50  # drawn on the replay's time axis, not today's

    # The same, as fast as possible, then following live: a 30 s window of now.
    await open_dashboard(page, server.base_url, speed="max", then="live", **shown)
    await until(page, lambda d: d["replay"] is not None and d["replay"]["ended"] == "live", timeout=60)
    await write_points(server.base_url, rid, "p", [(time.time_ns(), 99.0)])
    live = await until(page, lambda d: [v for _, v in points_of(d, "p")] == [99.0], timeout=60)
    assert live["state"] == "open"


async def test_a_formula_charts_the_channel_through_a_numeric_node(server: ServerProcess, page: Page) -> None:
    rid = unique_rid("formula")
    now = time.time_ns()
    history = [(now - (30 - i) * NANOS, float(i) * 0.7 - 5) for i in range(20)]
    await write_points(server.base_url, rid, "p", history)
    for formula, f in (
        ("sin", math.sin),
        ("degFtoCel", lambda v: (v - 32) / 1.8),
        ("bit0", lambda v: float(int(v) & 1)),
        ("squared", lambda v: v * v),
        # history is one point a second: every point carries the mean of itself and the 9 before it
        ("rollingMean10s", None),
    ):
        await open_dashboard(
            page, server.base_url, rid=rid, channels="p", window="300", mode="raw", formula=formula
        )
        data = await until(page, lambda d: len(points_of(d, "p")) == len(history))
        got = [v for _, v in points_of(data, "p")]
        values = [v for _, v in history]
        want = [
            f(v) if f is not None else sum(values[max(0, i - 9) : i + 1]) / len(values[max(0, i - 9) : i + 1])
            for i, v in enumerate(values)
        ]
        assert all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-9) for g, w in zip(got, want, strict=True)), (
            formula
        )


async def test_the_expression_and_if_else_formulas_chart_and_a_refused_expression_shows_why(
    server: ServerProcess, page: Page
) -> None:
    rid = unique_rid("expression")
    now = time.time_ns()
    history = [(now - (30 - i) * NANOS, float(i) * 0.7 - 5) for i in range(20)]
    await write_points(server.base_url, rid, "p", history)
    values = [v for _, v in history]
    for params, want in (
        ({"formula": "expression", "expression": "sin(x) * 2 + 1"}, [math.sin(v) * 2 + 1 for v in values]),
        ({"formula": "expression", "expression": "max(x, 0) ** 2"}, [max(v, 0.0) ** 2 for v in values]),
        (
            {"formula": "ifElse", "op": "GREATER_THAN", "threshold": "1.5"},
            [v if v > 1.5 else 0.0 for v in values],
        ),
        (
            {"formula": "ifElse", "op": "LESS_THAN_OR_EQUAL_TO", "threshold": "-2.2"},
            [v if v <= -2.2 else 0.0 for v in values],
        ),
    ):
        await open_dashboard(page, server.base_url, rid=rid, channels="p", window="300", mode="raw", **params)
        data = await until(page, lambda d: len(points_of(d, "p")) == len(history))
        got = [v for _, v in points_of(data, "p")]
        assert all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-9) for g, w in zip(got, want, strict=True)), (
            params
        )
        assert data["errors"] == []
    # the fields follow the formula: the expression box for expression, the threshold for if/else
    await expect(page.locator("#threshold-field")).to_be_visible()
    await expect(page.locator("#expression-field")).to_be_hidden()
    await page.select_option("#formula", "expression")
    await expect(page.locator("#expression-field")).to_be_visible()
    await expect(page.locator("#threshold-field")).to_be_hidden()

    # an expression the server refuses: the page says what the server said, and charts nothing
    await open_dashboard(
        page,
        server.base_url,
        rid=rid,
        channels="p",
        window="300",
        mode="raw",
        formula="expression",
        expression="system(x)",
    )
    data = await until(page, lambda d: bool(d["errors"]), timeout=60)
    assert any("InvalidComputation" in e and "unknown function 'system'" in e for e in data["errors"]), data[
        "errors"
    ]
    await expect(page.locator("#errors")).to_contain_text("unknown function 'system'")
    assert points_of(data, "p") == []


async def test_the_z_score_formula_charts_each_group_against_the_others(
    server: ServerProcess, page: Page
) -> None:
    """Two vehicles 4 apart at every shared timestamp: a1 is one deviation below their mean, b2 one above."""
    rid, now = unique_rid("zscore"), time.time_ns()
    stamps = [now - (30 - i) * NANOS for i in range(10)]
    for vehicle, offset in (("a1", 0.0), ("b2", 4.0)):
        points = [(t, i * 0.5 + offset) for i, t in enumerate(stamps)]
        await write_points(server.base_url, rid, "p", points, tags={"vehicle": vehicle})
    await open_dashboard(
        page,
        server.base_url,
        rid=rid,
        channels="p",
        window="300",
        mode="raw",
        formula="zScore",
        groupBy="vehicle",
    )

    def scores(d: dict[str, Any]) -> dict[str, list[float]]:
        return {k: [v for _, v in e["points"]] for k, e in d["series"].items() if k.startswith("p ")}

    data = await until(page, lambda d: sorted(len(v) for v in scores(d).values()) == [10, 10])
    by_group = scores(data)
    assert [v for k, v in by_group.items() if "a1" in k] == [[-1.0] * 10]
    assert [v for k, v in by_group.items() if "b2" in k] == [[1.0] * 10]


async def test_the_page_picks_an_assets_channels(server: ServerProcess, page: Page) -> None:
    rid, now = unique_rid("asset"), time.time_ns()
    mine = [(now - (30 - i) * NANOS, float(i)) for i in range(5)]
    await write_points(server.base_url, rid, "speed", mine, tags={"vehicle": "a1"})
    await write_points(server.base_url, rid, "speed", [(now - 10 * NANOS, 99.0)], tags={"vehicle": "b2"})
    await write_points(server.base_url, rid, "other", [(now - 10 * NANOS, 1.0)], tags={"vehicle": "b2"})
    scope = {"dataScopeName": "main", "dataSourceRid": rid, "seriesTags": {"vehicle": "a1"}}
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{server.base_url}/assets/v1/assets", json={"title": "car a1", "dataScopes": [scope]}
        )
    asset = f"{answer.json()['rid']}/main"
    await open_dashboard(page, server.base_url, asset=asset, channels="speed", window="300", mode="raw")

    data = await until(page, lambda d: len(points_of(d, "speed")) == len(mine))
    assert [v for _, v in points_of(data, "speed")] == [v for _, v in mine]  # a1's series only
    offered = await page.eval_on_selector_all("#assets option", "os => os.map(o => o.value)")
    assert asset in offered
    channels = await page.eval_on_selector_all("#channel-list option", "os => os.map(o => o.value)")
    assert channels == ["speed"]  # the scope's channels: b2's `other` is outside it


# -- authentication on ------------------------------------------------------------------------------
ADMIN_TOKEN = "dashboard-admin-token"
VIEWER_TOKEN = "dashboard-viewer-token"
OUTSIDER_TOKEN = "dashboard-outsider-token"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with a tokens file: every route and the WebSocket need a token."""
    base = tmp_path_factory.mktemp("dashboard-auth")
    tokens = base / "tokens.json"
    entries = [
        {"token": ADMIN_TOKEN, "sub": "operator", "dataSourceRids": ["*"], "admin": True},
        {"token": VIEWER_TOKEN, "sub": "viewer", "dataSourceRids": ["ri.test.dash.*"]},
        {"token": OUTSIDER_TOKEN, "sub": "outsider", "dataSourceRids": ["ri.other.*"]},
    ]
    tokens.write_text(json.dumps({"tokens": entries}))
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_TOKENS_FILE": str(tokens)})
    yield proc
    proc.stop()


async def test_with_authentication_on_the_page_logs_in_and_picks_an_assets_channels(
    secured: ServerProcess, page: Page
) -> None:
    rid, now = unique_rid("asset-auth"), time.time_ns()
    mine = [(now - (30 - i) * NANOS, float(i)) for i in range(5)]
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(base_url=secured.base_url, headers=admin) as http:
        await write_points(secured.base_url, rid, "speed", mine, tags={"vehicle": "a1"}, client=http)
        await write_points(secured.base_url, rid, "other", [(now, 1.0)], tags={"vehicle": "b2"}, client=http)
        scope = {"dataScopeName": "main", "dataSourceRid": rid, "seriesTags": {"vehicle": "a1"}}
        answer = await http.post("/assets/v1/assets", json={"title": "car a1", "dataScopes": [scope]})
        assert answer.status_code == 200, answer.text
    asset = f"{answer.json()['rid']}/main"
    query = {"asset": asset, "channels": "speed", "window": "300", "mode": "raw"}

    # no token: the page says it needs one instead of an empty chart, and lists no asset
    await open_dashboard(page, secured.base_url, **query)
    data = await until(page, lambda d: any("needs a token" in n for n in d["notices"]), timeout=60)
    assert data["auth"] == "token needed" and "needs a token" in await page.inner_text("#notice")
    assert await page.eval_on_selector_all("#assets option", "os => os.length") == 0
    assert data["series"] == {}

    # logging in: the token typed into the form reaches /assets/v1, /series and the WebSocket
    await page.fill("#token", VIEWER_TOKEN)
    await page.click("button[type=submit]")
    data = await until(page, lambda d: len(points_of(d, "speed")) == len(mine))
    assert [v for _, v in points_of(data, "speed")] == [v for _, v in mine]  # a1's series only
    assert data["auth"] is None and data["errors"] == []
    offered = await page.eval_on_selector_all("#assets option", "os => os.map(o => o.value)")
    assert asset in offered
    channels = await page.eval_on_selector_all("#channel-list option", "os => os.map(o => o.value)")
    assert channels == ["speed"]
    assert VIEWER_TOKEN not in page.url  # kept in the tab, never in the address

    # a fresh page given the token in the address's fragment, as the computations page takes it:
    # it is used, then taken out of the address
    fresh = await page.context.new_page()
    try:
        await fresh.goto(
            f"{secured.base_url}/?{urlencode({'groupBy': '', 'tags': '', **query})}#token={VIEWER_TOKEN}"
        )
        data = await until(fresh, lambda d: len(points_of(d, "speed")) == len(mine))
        assert VIEWER_TOKEN not in fresh.url
        # a token that reaches another data source only: the asset's subscription is refused by name
        await fresh.fill("#token", OUTSIDER_TOKEN)
        await fresh.click("button[type=submit]")
        data = await until(fresh, lambda d: any("PermissionDenied" in e for e in d["errors"]), timeout=60)
        assert data["auth"] is None
        # a token the server does not know: said as such
        await fresh.fill("#token", "not-a-token")
        await fresh.click("button[type=submit]")
        data = await until(fresh, lambda d: any("refused the token" in n for n in d["notices"]), timeout=60)
        assert data["auth"] == "token refused" and "refused the token" in await fresh.inner_text("#notice")
    finally:
        await fresh.close()


async def side_pixels(page: Page) -> int:
    """Pixels of the side chart (histogram or scatter) that are neither white nor grid grey."""
    return int(
        await page.evaluate(
            """() => {
                const c = document.getElementById("side");
                const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
                let n = 0;
                for (let i = 0; i < d.length; i += 4) {
                    const [r, g, b] = [d[i], d[i + 1], d[i + 2]];
                    if (Math.max(r, g, b) - Math.min(r, g, b) > 60) n++;  // coloured, not grey
                }
                return n;
            }"""
        )
    )


async def test_the_histogram_and_scatter_panels_show_the_servers_charts(
    server: ServerProcess, page: Page, tmp_path: Path
) -> None:
    """Beside the time chart: a histogram of the channels and a scatter of y against x, as the
    server computed them (checked against the reference evaluator), drawn where a person sees them."""
    rid = unique_rid("charts")
    now = time.time_ns()
    store = Store()
    xs = [(now - (50 - i) * NANOS, float(i % 10)) for i in range(50)]
    ys = [(t + 1_000, v * 2 + 1) for t, v in xs]  # y a microsecond after x: paired by the 1 s fill
    for channel, points in (("x", xs), ("y", ys)):
        await write_points(server.base_url, rid, channel, points)
        store.write(rid, channel, points)
    variables = {
        f"c{i}": {
            "type": "channel",
            "channel": {
                "type": "dataSource",
                "dataSource": {
                    "dataSourceRid": {"type": "literal", "literal": rid},
                    "channel": {"type": "literal", "literal": name},
                    "tags": {},
                    "tagsToGroupBy": [],
                    "groupByTags": [],
                },
            },
        }
        for i, name in enumerate(("x", "y"))
    }
    raw = {"x": {"type": "raw", "raw": {"name": "c0"}}, "y": {"type": "raw", "raw": {"name": "c1"}}}

    await open_dashboard(
        page, server.base_url, rid=rid, channels="x,y", window="300", mode="histogram", buckets="8"
    )
    data = await until(page, lambda d: bool(d["side"] and d["side"]["groups"].get("")))
    count = {"type": "bucketCount", "bucketCount": {"type": "literal", "literal": 8}}
    histogram = {
        "type": "histogram",
        "histogram": {"type": "numeric", "numeric": {"inputs": raw, "bucketStrategy": count}},
    }
    ((kind, expected),) = evaluate(histogram, variables, store, 300 * NANOS, now - 300 * NANOS).values()
    assert data["side"]["kind"] == kind == "numericHistogram"
    assert [tuple(row) for row in data["side"]["groups"][""]] == expected
    await page.wait_for_timeout(300)  # a redraw after the last update
    assert await side_pixels(page) > 2_000  # the bars
    (tmp_path / "histogram.png").write_bytes(await page.screenshot())

    await open_dashboard(page, server.base_url, rid=rid, channels="x,y", window="300", mode="scatter")
    data = await until(page, lambda d: bool(d["side"] and d["side"]["groups"].get("")))
    scatter = {"type": "cartesian", "cartesian": {"input": {"type": "scatter", "scatter": raw}}}
    ((kind, pairs),) = evaluate(scatter, variables, store, 300 * NANOS, now - 300 * NANOS).values()
    assert data["side"]["kind"] == kind == "cartesian"
    got = [(round(t * 1e6), x, y) for t, x, y in data["side"]["groups"][""]]
    assert [(x, y) for _, x, y in got] == [(x, y) for _, x, y in pairs]
    assert all(abs(g[0] - p[0]) < 1_000 for g, p in zip(got, pairs, strict=True))  # ms floats in the page
    await page.wait_for_timeout(300)
    assert await side_pixels(page) > 300  # the dots
    (tmp_path / "scatter.png").write_bytes(await page.screenshot())


async def test_several_series_ranges_keep_a_lane_and_a_legend_each(
    server: ServerProcess, page: Page, tmp_path: Path
) -> None:
    rid = unique_rid("lanes")
    now = time.time_ns()
    for k, channel in enumerate(("a", "b", "c")):
        points = [(now - (40 - i) * NANOS, 100.0 if (i + 4 * k) % 12 < 5 else 0.0) for i in range(40)]
        await write_points(server.base_url, rid, channel, points)
    await open_dashboard(
        page, server.base_url, rid=rid, channels="a,b,c", window="300", mode="ranges", threshold="50"
    )
    await until(page, lambda d: len(d["ranges"]) == 3 and all(d["ranges"].values()))
    await page.wait_for_timeout(300)
    legend = await page.locator("#legend [data-lane]").all_inner_texts()
    assert legend == [f"{c} · ranges (lane {i + 1})" for i, c in enumerate(("a", "b", "c"))]
    colors = (await published(page))["colors"]
    # each lane, a row above the plot, holds its own series' colour and no other's
    for lane, channel in enumerate(("a", "b", "c")):
        row = await page.evaluate(
            """(y) => {
                const c = document.getElementById("chart");
                const dpr = window.devicePixelRatio || 1;
                const d = c.getContext("2d").getImageData(0, Math.round(y * dpr), c.width, 1).data;
                const seen = new Set();
                for (let i = 0; i < d.length; i += 4) seen.add(`${d[i]},${d[i + 1]},${d[i + 2]}`);
                return [...seen];
            }""",
            12 + lane * 8 + 3,  # PAD.top + lane * LANE + the middle of the lane
        )
        rgb = {",".join(str(int(colors[name][i : i + 2], 16)) for i in (1, 3, 5)) for name in ("a", "b", "c")}
        own = ",".join(str(int(colors[channel][i : i + 2], 16)) for i in (1, 3, 5))
        assert own in row, (channel, row)
        assert not (rgb - {own}) & set(row), (channel, row)
    (tmp_path / "lanes.png").write_bytes(await page.screenshot())
