"""The dashboard reads true (issue 50), in headless Chromium against the real server: no false
connection alarm after a refused subscription; string channels in a colour per value with a key
that matches the strips; a visible refusal or notice instead of a silent wrong answer (a Group by
tag no series has, an empty threshold, a window of 0 s); readouts that say when they are stale or
the page is away; lines broken across an outage; colours by series identity; a y-axis per channel
when their scales are far apart; the threshold drawn; a 390 px wide page that does not scroll
sideways; side panels whose labels stay clear of their data; computations kept for a resume shown
as idle; and the way between the dashboard and the API pages."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.conftest import ServerProcess, start_server
from tests.proxy import Proxy
from tests.server.test_dashboard import open_dashboard, points_of, published, unique_rid, until
from tests.wire import NANOS, write_points

GEARS = ["PARK", "DRIVE", "REVERSE", "NEUTRAL"]


def rgb(color: str) -> tuple[int, int, int]:
    return (int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16))


async def pixels_near(page: Page, color: str, box: tuple[float, float, float, float]) -> int:
    """Canvas pixels of the time chart within 30 of `color` in the CSS-pixel box (x0, y0, x1, y1)."""
    return int(
        await page.evaluate(
            """([[r, g, b], [x0, y0, x1, y1]]) => {
                const c = document.getElementById("chart");
                const dpr = window.devicePixelRatio || 1;
                const [left, top] = [Math.round(x0 * dpr), Math.round(y0 * dpr)];
                const w = Math.max(1, Math.round((x1 - x0) * dpr));
                const h = Math.max(1, Math.round((y1 - y0) * dpr));
                const d = c.getContext("2d").getImageData(left, top, w, h).data;
                let n = 0;
                for (let i = 0; i < d.length; i += 4) {
                    const near = Math.abs(d[i] - r) < 30 && Math.abs(d[i + 1] - g) < 30;
                    if (near && Math.abs(d[i + 2] - b) < 30) n++;
                }
                return n;
            }""",
            [rgb(color), list(box)],
        )
    )


def x_of(drawn: dict[str, Any], ms: float) -> float:
    return float(
        drawn["x0"]
        + (ms - drawn["startMs"]) / (drawn["endMs"] - drawn["startMs"]) * (drawn["x1"] - drawn["x0"])
    )


# -- 5: a refused subscription, then Apply ------------------------------------------------------------
async def test_after_a_refused_subscription_the_next_apply_shows_no_connection_error(
    server: ServerProcess, page: Page
) -> None:
    rid = unique_rid("refused")
    history = [(time.time_ns() - (20 - i) * NANOS, float(i)) for i in range(20)]
    await write_points(server.base_url, rid, "p", history)
    await open_dashboard(
        page, server.base_url, rid=rid, channels="p", window="300", mode="raw", formula="expression",
        expression="system(x)",
    )  # fmt: skip
    data = await until(page, lambda d: bool(d["errors"]), timeout=60)
    assert any("unknown function 'system'" in e for e in data["errors"]), data["errors"]

    # the user puts the expression right and applies: the refused subscription was never the
    # server's, and nothing says the connection broke
    await page.fill("#expression", "x * 2")
    await page.click("button[type=submit]")
    data = await until(page, lambda d: len(points_of(d, "p")) == len(history))
    assert [v for _, v in points_of(data, "p")] == [v * 2 for _, v in history]
    await page.wait_for_timeout(2_000)  # time for any answer to the Apply's unsubscribe to arrive
    data = await published(page)
    assert data["errors"] == [], data["errors"]
    assert await page.locator("#errors li").count() == 0
    assert data["state"] == "open"


# -- 6: string channels ---------------------------------------------------------------------------------
async def test_a_string_channel_has_a_colour_per_value_labels_and_a_key_that_matches(
    server: ServerProcess, page: Page, tmp_path: Path
) -> None:
    rid = unique_rid("enum")
    now = time.time_ns()
    # 20 Hz for 40 s, a gear each 10 s: single points are 50 ms apart, far narrower than a label
    gear = [(now - 40 * NANOS + i * 50_000_000, GEARS[i // 200]) for i in range(800)]
    await write_points(server.base_url, rid, "gear", gear)
    await open_dashboard(page, server.base_url, rid=rid, channels="gear", window="60", mode="raw")
    data = await until(page, lambda d: len(d["valueColors"].get("gear", {})) == 4)
    colors = data["valueColors"]["gear"]
    assert len(set(colors.values())) == 4, colors  # PARK, DRIVE, REVERSE and NEUTRAL all apart

    # the key: a swatch per value in the legend, in the very colour of the value's blocks
    await page.wait_for_timeout(300)
    keyed = await page.eval_on_selector_all(
        '#legend [data-series="gear"] [data-value]',
        "spans => spans.map(s => [s.dataset.value, getComputedStyle(s.querySelector('i')).backgroundColor])",
    )
    assert sorted(v for v, _ in keyed) == sorted(GEARS)
    for value, css in keyed:
        assert css == "rgb({}, {}, {})".format(*rgb(colors[value])), (value, css)
    data = await published(page)
    drawn = data["drawn"]
    assert drawn["panels"] == []  # no empty numeric axis above the strip
    ((strip),) = drawn["strips"]
    assert strip["y1"] - strip["y0"] >= 20  # alone, the strip takes room to be read
    for k, value in enumerate(GEARS):
        # the middle of each 10 s run is that value's colour on the canvas, and its label is
        # written there: ink of another colour inside the run's block
        start = gear[k * 200][0] / 1e6
        end = gear[k * 200 + 199][0] / 1e6
        a, b = x_of(drawn, start), x_of(drawn, end)
        box = (a + 1, strip["y0"] + 1, b - 1, strip["y1"] - 1)
        area = (box[2] - box[0]) * (box[3] - box[1])
        own = await pixels_near(page, colors[value], box)
        assert own > 0.5 * area, (value, own, area)
        assert own < area - 20, (value, "no label written in the block")
    (tmp_path / "enum.png").write_bytes(await page.screenshot())


# -- 7: no silent wrong answers --------------------------------------------------------------------------
async def test_a_group_by_tag_no_series_has_gets_a_notice(server: ServerProcess, page: Page) -> None:
    rid = unique_rid("groupby")
    now = time.time_ns()
    for vehicle in ("a1", "b2"):
        points = [(now - (10 - i) * NANOS, float(i)) for i in range(10)]
        await write_points(server.base_url, rid, "p", points, tags={"vehicle": vehicle})
    await open_dashboard(
        page, server.base_url, rid=rid, channels="p", window="300", mode="raw", groupBy="vehicel"
    )
    data = await until(page, lambda d: bool(d["notices"]), timeout=60)
    (notice,) = data["notices"]
    assert 'has the tag "vehicel"' in notice and "their tags: vehicle" in notice, notice
    await expect(page.locator("#notice")).to_contain_text('No series of p has the tag "vehicel"')
    # spelled right: grouped, and no notice
    await page.fill("#groupBy", "vehicle")
    await page.click("button[type=submit]")
    data = await until(page, lambda d: len(d["series"]) == 2)
    assert data["notices"] == []
    await expect(page.locator("#notice")).to_be_hidden()


async def test_an_empty_threshold_and_a_window_of_0_s_are_refused_in_the_form(
    server: ServerProcess, page: Page
) -> None:
    rid = unique_rid("refusals")
    points = [(time.time_ns() - (10 - i) * NANOS, 100.0 if i % 4 == 0 else 0.0) for i in range(10)]
    await write_points(server.base_url, rid, "p", points)

    # an empty threshold from the address: refused, said beside the form, nothing shaded
    await open_dashboard(
        page, server.base_url, rid=rid, channels="p", window="300", mode="ranges", threshold=""
    )
    await expect(page.locator("#form-errors")).to_contain_text("Threshold needs a number")
    await page.wait_for_timeout(1_500)
    data = await published(page)
    assert data["ranges"] == {} and data["series"] == {}
    assert await page.locator("#threshold").evaluate("e => e.validity.valid") is False

    # a number given: applied, the ranges come
    await page.fill("#threshold", "50")
    await page.click("button[type=submit]")
    data = await until(page, lambda d: bool(d["ranges"].get("p")))
    assert len(data["ranges"]["p"]) == 3 and data["formErrors"] == []
    await expect(page.locator("#form-errors")).to_be_hidden()
    # emptied again in the form: refused, and what runs goes on running
    await page.fill("#threshold", "")
    await page.click("button[type=submit]")
    await expect(page.locator("#form-errors")).to_contain_text("Threshold needs a number")
    data = await published(page)
    assert len(data["ranges"]["p"]) == 3 and data["config"]["threshold"] == "50"

    # a window of 0 s (or less): refused with a message, never subscribed
    for width in ("0", "-5"):
        await open_dashboard(page, server.base_url, rid=rid, channels="p", window=width, mode="raw")
        await expect(page.locator("#form-errors")).to_contain_text("Window must be more than 0 s")
        await page.wait_for_timeout(1_000)
        assert (await published(page))["series"] == {}


# -- 8: stale readouts, gaps ------------------------------------------------------------------------------
async def test_the_header_says_when_nothing_arrives_and_while_reconnecting(
    server: ServerProcess, page: Page
) -> None:
    rid = unique_rid("stale")
    await write_points(server.base_url, rid, "p", [(time.time_ns() - NANOS, 1.0)])
    proxy = Proxy(server.port)
    await proxy.start()
    try:
        await open_dashboard(page, proxy.base_url, rid=rid, channels="p", window="300", mode="raw")
        await until(page, lambda d: points_of(d, "p") != [])
        await write_points(server.base_url, rid, "p", [(time.time_ns(), 2.0)])
        await expect(page.locator("#latency")).to_have_text(
            re.compile(r"^latency \d+ ms \(median \d+ ms\)$"), timeout=30_000
        )
        # nothing more arrives: after 5 s the old number goes, and the readout says for how long
        await expect(page.locator("#latency")).to_contain_text("no update for", timeout=10_000)
        assert await page.locator("#latency").get_attribute("data-stale") == "true"
        await expect(page.locator("#live")).to_have_text("live")

        proxy.refusing = True
        proxy.cut()
        await until(page, lambda d: d["state"] == "reconnecting", timeout=30)
        await expect(page.locator("#live")).to_have_text("reconnecting")
        await expect(page.locator("#latency")).to_have_text("latency — (not connected)")
        proxy.refusing = False
        await until(page, lambda d: d["state"] == "open", timeout=30)
        await expect(page.locator("#live")).to_have_text("live")
    finally:
        await proxy.close()


async def test_lines_and_strips_break_across_an_outage(
    server: ServerProcess, page: Page, tmp_path: Path
) -> None:
    rid = unique_rid("gap")
    now = time.time_ns()
    # 1 Hz, with nothing written for 40 s in the middle (an outage)
    seconds = [s for s in range(100) if not 30 <= s < 70]
    p = [(now - (100 - s) * NANOS, 10.0 + (s % 5)) for s in seconds]
    gear = [(t, GEARS[s // 25]) for (t, _), s in zip(p, seconds, strict=True)]
    await write_points(server.base_url, rid, "p", p)
    await write_points(server.base_url, rid, "gear", gear)
    await open_dashboard(page, server.base_url, rid=rid, channels="p,gear", window="300", mode="raw")
    await until(page, lambda d: len(points_of(d, "p")) == len(p) and len(points_of(d, "gear")) == len(gear))
    await page.wait_for_timeout(300)
    data = await published(page)
    drawn, colors = data["drawn"], data["colors"]
    ((panel),) = drawn["panels"]
    ((strip),) = drawn["strips"]
    gap_mid = x_of(drawn, (now - 50 * NANOS) / 1e6)
    data_mid = x_of(drawn, (now - 15 * NANOS) / 1e6)
    in_park = x_of(drawn, (now - 80 * NANOS) / 1e6)  # in PARK's run, past its label
    line_box = lambda x: (x - 4, panel["y0"], x + 4, panel["y1"])  # noqa: E731
    assert await pixels_near(page, colors["p"], line_box(data_mid)) > 0  # the line where there are points
    assert await pixels_near(page, colors["p"], line_box(gap_mid)) == 0  # none drawn across the gap
    # the state strip is blank in the outage, not the last state stretched across it
    strip_box = lambda x: (x - 4, strip["y0"] + 2, x + 4, strip["y1"] - 2)  # noqa: E731
    white = await pixels_near(page, "#ffffff", strip_box(gap_mid))
    assert white > 0.9 * 8 * (strip["y1"] - strip["y0"] - 4), white
    assert await pixels_near(page, "#ffffff", strip_box(in_park)) < 20
    (tmp_path / "gap.png").write_bytes(await page.screenshot())


# -- 9: layout -------------------------------------------------------------------------------------
async def test_colours_follow_the_series_and_far_apart_scales_get_an_axis_each(
    server: ServerProcess, page: Page
) -> None:
    rid = unique_rid("colours")
    now = time.time_ns()
    names = [f"s{k:02d}" for k in range(12)]
    for k, name in enumerate(names):
        await write_points(
            server.base_url, rid, name, [(now - (10 - i) * NANOS, k + i * 0.1) for i in range(10)]
        )
    await open_dashboard(page, server.base_url, rid=rid, channels=",".join(names), window="300", mode="raw")
    data = await until(page, lambda d: len(d["colors"]) == 12 and all(points_of(d, n) for n in names))
    many = data["colors"]
    assert len(set(many.values())) == 12, many  # twelve series, twelve colours
    await page.wait_for_timeout(300)
    # merely offset from each other (0-0.9 up to 11-11.9): one shared axis, not twelve slivers
    assert len((await published(page))["drawn"]["panels"]) == 1
    # the same series in another configuration: the same colour
    await open_dashboard(page, server.base_url, rid=rid, channels="s07,s03", window="300", mode="raw")
    data = await until(page, lambda d: set(d["colors"]) == {"s07", "s03"})
    assert data["colors"] == {"s07": many["s07"], "s03": many["s03"]}

    # rpm beside a temperature: an axis each (a panel per channel), said in the legend
    await write_points(
        server.base_url, rid, "rpm", [(now - (10 - i) * NANOS, 3000.0 + 100 * i) for i in range(10)]
    )
    await write_points(
        server.base_url, rid, "temp", [(now - (10 - i) * NANOS, 85.0 + 0.5 * i) for i in range(10)]
    )
    await open_dashboard(page, server.base_url, rid=rid, channels="rpm,temp", window="300", mode="raw")
    data = await until(page, lambda d: len(points_of(d, "rpm")) == 10 and len(points_of(d, "temp")) == 10)
    await page.wait_for_timeout(300)
    panels = (await published(page))["drawn"]["panels"]
    assert sorted(p["names"][0] for p in panels) == ["rpm", "temp"]
    temp = next(p for p in panels if p["names"] == ["temp"])
    assert temp["hi"] - temp["lo"] < 10  # temperature's own scale, not flattened under rpm's
    await expect(page.locator("#legend [data-axes]")).to_be_visible()
    # two channels of one scale share one axis
    await open_dashboard(page, server.base_url, rid=rid, channels="s03,s04", window="300", mode="raw")
    await until(page, lambda d: len(points_of(d, "s03")) == 10 and len(points_of(d, "s04")) == 10)
    await page.wait_for_timeout(300)
    assert len((await published(page))["drawn"]["panels"]) == 1


async def test_the_threshold_is_drawn(server: ServerProcess, page: Page) -> None:
    rid = unique_rid("threshold")
    points = [(time.time_ns() - (20 - i) * NANOS, 100.0 if i % 5 == 0 else 10.0) for i in range(20)]
    await write_points(server.base_url, rid, "p", points)
    await open_dashboard(
        page, server.base_url, rid=rid, channels="p", window="300", mode="ranges", threshold="50"
    )
    await until(page, lambda d: bool(d["ranges"].get("p")) and len(points_of(d, "p")) == 20)
    await page.wait_for_timeout(300)
    data = await published(page)
    drawn = data["drawn"]
    ((panel),) = drawn["panels"]
    # the dashed line at 50 on the axis's own scale, in the page's ink colour
    expected = panel["y1"] - (50 - panel["lo"]) / (panel["hi"] - panel["lo"]) * (panel["y1"] - panel["y0"])
    assert drawn["thresholdY"] is not None and abs(drawn["thresholdY"] - expected) < 1
    ink = await pixels_near(
        page, "#1b2631", (drawn["x0"], drawn["thresholdY"] - 1, drawn["x1"], drawn["thresholdY"] + 1)
    )
    assert ink > 0.3 * (drawn["x1"] - drawn["x0"]), ink
    await expect(page.locator("#legend [data-threshold]")).to_have_text("threshold > 50")


async def test_at_390_px_the_page_does_not_scroll_sideways_and_time_labels_stay_apart(
    server: ServerProcess, page: Page, tmp_path: Path
) -> None:
    rid = unique_rid("phone")
    now = time.time_ns()
    await write_points(
        server.base_url, rid, "engine.temp", [(now - (60 - i) * NANOS, 80.0 + i % 7) for i in range(60)]
    )
    await write_points(
        server.base_url, rid, "gear", [(now - (60 - i) * NANOS, GEARS[i // 15]) for i in range(60)]
    )
    await page.set_viewport_size({"width": 390, "height": 844})
    for mode in ("raw", "multivariate"):
        await open_dashboard(
            page, server.base_url, rid=rid, channels="engine.temp,gear", window="300", mode=mode
        )
        await until(page, lambda d: len(points_of(d, "engine.temp")) == 60)
        await page.wait_for_timeout(500)
        widths = await page.evaluate(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth,"
            " document.body.scrollWidth]"
        )
        assert widths[0] <= widths[1] and widths[2] <= widths[1], widths
        labels = (await published(page))["drawn"]["timeLabels"]
        assert len(labels) >= 2
        assert all(a["right"] + 4 <= b["left"] for a, b in itertools.pairwise(labels)), labels
        (tmp_path / f"phone-{mode}.png").write_bytes(await page.screenshot(full_page=True))


async def test_side_panels_keep_titles_and_axis_labels_clear(server: ServerProcess, page: Page) -> None:
    rid = unique_rid("sidelabels")
    now = time.time_ns()
    for k, name in enumerate(("a.long.channel.name", "b.another.long.name", "c")):
        await write_points(
            server.base_url,
            rid,
            name,
            [(now - (60 - i) * NANOS, float((i * (k + 3)) % 11)) for i in range(60)],
        )
    channels = "a.long.channel.name,b.another.long.name,c"
    await open_dashboard(page, server.base_url, rid=rid, channels=channels, window="300", mode="multivariate")
    data = await until(page, lambda d: bool(d["sideDrawn"] and d["side"] and d["side"]["groups"].get("")))
    rows = data["sideDrawn"]
    # baselines of 11 px text: title, names and top values each a row of their own
    assert rows["titleY"] + 12 <= rows["namesY"] and rows["namesY"] + 11 <= rows["topValuesY"]
    assert rows["topValuesY"] < rows["axisTop"]
    width = await page.evaluate("() => document.getElementById('side').clientWidth")
    assert rows["names"][0] > 0 and rows["names"][-1] < width

    await open_dashboard(page, server.base_url, rid=rid, channels=channels, window="300", mode="scatter3d")
    for azimuth in (-0.6, 0.9, 2.4):
        await page.evaluate(f"() => {{ window.sparkwire.view3d.azimuth = {azimuth}; }}")
        data = await until(
            page,
            lambda d: bool(d["sideDrawn"] and "labels" in d["sideDrawn"] and d["sideDrawn"]["dots"]),
        )
        await page.wait_for_timeout(400)  # redrawn at the new turn
        drawn = (await published(page))["sideDrawn"]
        assert len(drawn["labels"]) == 3
        for label in drawn["labels"]:
            inside = [
                (x, y)
                for x, y in drawn["dots"]
                if label["left"] - 2 <= x <= label["right"] + 2
                and label["top"] - 2 <= y <= label["bottom"] + 2
            ]
            assert inside == [], (azimuth, label, inside[:5])


# -- 11: the computations page ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lingering(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server that keeps a computation for 120 s after its last subscriber, for a resume."""
    base = tmp_path_factory.mktemp("dashboard-linger")
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_RESUME_LINGER_SECONDS": "120"})
    yield proc
    proc.stop()


async def test_computations_kept_for_resume_show_as_idle_and_a_formula_lists_its_channel_once(
    lingering: ServerProcess, page: Page
) -> None:
    rid = unique_rid("kept")
    await write_points(
        lingering.base_url, rid, "p", [(time.time_ns() - i * NANOS, float(i)) for i in range(5)]
    )
    # the dashboard subscribes (asking for resume tokens) through if/else, which reads x twice
    await open_dashboard(
        page,
        lingering.base_url,
        rid=rid,
        channels="p",
        window="300",
        mode="raw",
        formula="ifElse",
        threshold="2",
    )
    await until(page, lambda d: len(points_of(d, "p")) == 5)
    await page.goto(f"{lingering.base_url}/dashboard/computations.html")
    row = page.locator(f'#computations tr:has(td[data-field="series"]:has-text("{rid}"))')
    await expect(row).to_have_count(1, timeout=30_000)
    await expect(row.locator('[data-field="series"]')).to_have_text(f"{rid} / p")  # once
    # the page that subscribed is gone: no subscriber, kept for a resume, with the time left
    state = row.locator('[data-field="state"]')
    await expect(state).to_have_text(re.compile(r"^idle, kept for resume \(\d+ s left\)$"), timeout=15_000)
    left = int(re.findall(r"\d+", await state.inner_text())[0])
    assert 60 <= left <= 120, left
    await expect(row.locator('[data-field="subscribers"]')).to_have_text("0")
    await expect(page.locator("#state")).to_contain_text("kept for resume")
    entry = next(
        e
        for e in (await page.evaluate("() => window.sparkwireDirectory"))["computations"]
        if e["series"][0]["dataSourceRid"] == rid
    )
    assert entry["keptForResume"]["seconds"] <= 120 and len(entry["series"]) == 1


# -- 12: navigation --------------------------------------------------------------------------------
async def test_the_dashboard_and_the_api_pages_link_each_other(server: ServerProcess, page: Page) -> None:
    await page.goto(f"{server.base_url}/")
    await page.click("text=WebSocket API")
    await page.wait_for_url(f"{server.base_url}/docs/asyncapi")
    await expect(page.locator("#title")).to_have_text("Sparkwire persistent compute 0.1.0", timeout=30_000)
    # the repository file the description names is said to be one, and the page's own part linked
    source = page.locator("code.source-file")
    await expect(source).to_have_text("docs/extensions.md")
    await expect(source).to_have_attribute("title", "a file in Sparkwire's source repository")
    await page.locator("#doc pre a[href='#messages']").click()
    await expect(page.locator("h2#messages")).to_be_in_viewport()
    await page.click("text=HTTP API")
    await page.wait_for_url(f"{server.base_url}/docs")
    await expect(page.locator(".swagger-ui .info .title")).to_contain_text("Sparkwire", timeout=60_000)
    # and back from Swagger UI to the dashboard
    await page.click("nav >> text=← dashboard")
    await page.wait_for_url(f"{server.base_url}/")
    await expect(page.locator("#form")).to_be_visible()


async def test_a_point_far_past_is_a_dot_not_joined(server: ServerProcess, page: Page) -> None:
    """One lone point after an outage is still shown (as a dot), with no line to it."""
    rid = unique_rid("lone")
    now = time.time_ns()
    p = [(now - (100 - s) * NANOS, 5.0) for s in range(20)] + [(now - 10 * NANOS, 5.0)]
    await write_points(server.base_url, rid, "p", p)
    await open_dashboard(page, server.base_url, rid=rid, channels="p", window="300", mode="raw")
    await until(page, lambda d: len(points_of(d, "p")) == len(p))
    await asyncio.sleep(0.3)
    data = await published(page)
    drawn, color = data["drawn"], data["colors"]["p"]
    ((panel),) = drawn["panels"]
    lone = x_of(drawn, (now - 10 * NANOS) / 1e6)
    between = x_of(drawn, (now - 45 * NANOS) / 1e6)
    assert await pixels_near(page, color, (lone - 3, panel["y0"], lone + 3, panel["y1"])) >= 4
    assert await pixels_near(page, color, (between - 3, panel["y0"], between + 3, panel["y1"])) == 0
