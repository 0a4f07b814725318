"""The dashboard's panels beyond the time chart, in headless Chromium against the real server: a 3D
scatter (a projection the pointer turns) and a multivariate panel (parallel coordinates of the
time buckets), each showing what the server computed (checked against the reference evaluator);
current-value tiles from `lastValuePoint` (a `singlePoint`), following new points; and threshold
ranges carrying each range's mean (`rangeNumericAggregation`) written in their lanes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from playwright.async_api import Page, expect

from tests.conftest import ServerProcess
from tests.reference import Store, evaluate
from tests.server.test_dashboard import open_dashboard, published, side_pixels, unique_rid, until
from tests.wire import NANOS, write_points

WINDOW_NS = 300 * NANOS


def channel_variables(rid: str, names: list[str]) -> dict[str, Any]:
    return {
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
        for i, name in enumerate(names)
    }


def raw(i: int) -> dict[str, Any]:
    return {"type": "raw", "raw": {"name": f"c{i}"}}


async def side_image(page: Page) -> list[int]:
    return list(
        await page.evaluate(
            """() => {
                const c = document.getElementById("side");
                const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
                return Array.from(d.filter((_, i) => i % 16 === 0));
            }"""
        )
    )


async def test_the_3d_scatter_and_multivariate_panels_show_the_servers_charts(
    server: ServerProcess, page: Page, tmp_path: Path
) -> None:
    rid = unique_rid("panels")
    now = time.time_ns()
    store = Store()
    xs = [(now - (50 - i) * NANOS, float(i % 10)) for i in range(50)]
    written = {
        "x": xs,
        "y": [(t, v * 2 + 1) for t, v in xs],
        "z": [(t, float(i % 7)) for i, (t, _) in enumerate(xs)],
    }
    for channel, points in written.items():
        await write_points(server.base_url, rid, channel, points)
        store.write(rid, channel, points)
    variables = channel_variables(rid, ["x", "y", "z"])

    await open_dashboard(page, server.base_url, rid=rid, channels="x,y,z", window="300", mode="scatter3d")
    data = await until(page, lambda d: bool(d["side"] and d["side"]["groups"].get("")))
    node = {
        "type": "cartesian3d",
        "cartesian3d": {
            "input": {"type": "scatter3d", "scatter3d": {"x": raw(0), "y": raw(1), "z": raw(2)}},
            "maxPoints": 500,
        },
    }
    ((kind, buckets),) = evaluate(node, variables, store, WINDOW_NS, now - WINDOW_NS).values()
    assert data["side"]["kind"] == kind == "bucketedCartesian3d"
    expected = sorted((*means, count) for means, _, _, _, count in buckets)
    assert sorted(tuple(row) for row in data["side"]["groups"][""]) == expected
    assert len(expected) == len({(x, y, z) for (_, x), (_, y), (_, z) in zip(*written.values(), strict=True)})
    await page.wait_for_timeout(300)
    assert await side_pixels(page) > 300  # the dots, in the set's colour
    before = await side_image(page)
    (tmp_path / "scatter3d.png").write_bytes(await page.screenshot())
    # dragging across the panel turns the projection: the same dots, drawn elsewhere
    box = await page.locator("#side").bounding_box()
    assert box is not None
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    await page.mouse.move(cx, cy)
    await page.mouse.down()
    await page.mouse.move(cx + 120, cy + 30, steps=6)
    await page.mouse.up()
    view = (await published(page))["view3d"]
    assert abs(view["azimuth"] - (-0.6 + 1.2)) < 1e-6 and abs(view["elevation"] - (0.45 + 0.3)) < 1e-6, view
    await page.wait_for_timeout(300)
    assert await side_image(page) != before
    assert await side_pixels(page) > 300
    (tmp_path / "scatter3d-turned.png").write_bytes(await page.screenshot())

    await open_dashboard(page, server.base_url, rid=rid, channels="x,y", window="300", mode="multivariate")
    data = await until(
        page,
        lambda d: bool(d["side"] and d["side"]["kind"] == "multivariate" and d["side"]["groups"].get("")),
    )
    node = {
        "type": "multivariate",
        "multivariate": {
            "inputs": [
                {"type": "numeric", "numeric": {"series": raw(0), "aggregations": ["MEAN"]}},
                {"type": "numeric", "numeric": {"series": raw(1), "aggregations": ["MEAN"]}},
            ],
            "bucketCount": 120,
        },
    }
    ((kind, rows),) = evaluate(node, variables, store, WINDOW_NS, now - WINDOW_NS).values()
    assert kind == "multivariate" and rows
    got = [(round(t * 1e6), mx, my) for t, mx, my in data["side"]["groups"][""]]
    assert [(mx, my) for _, mx, my in got] == [values for _, values in rows]
    assert all(
        abs(g[0] - end) < 1_000 for g, (end, _) in zip(got, rows, strict=True)
    )  # ms floats in the page
    await page.wait_for_timeout(300)
    assert await side_pixels(page) > 500  # a coloured line per time bucket across the two axes
    labels = await page.evaluate("() => document.getElementById('side').getAttribute('hidden')")
    assert labels is None
    (tmp_path / "multivariate.png").write_bytes(await page.screenshot())


async def test_current_value_tiles_and_range_means_in_their_lanes(
    server: ServerProcess, page: Page, tmp_path: Path
) -> None:
    rid = unique_rid("values")
    now = time.time_ns()
    a = [(now - (30 - i) * NANOS, 100.0 + i if 5 <= i < 12 else 0.0) for i in range(30)]
    b = [(now - (30 - i) * NANOS, 60.0 if 20 <= i < 24 else 1.0) for i in range(30)]
    await write_points(server.base_url, rid, "a", a)
    await write_points(server.base_url, rid, "b", b)

    await open_dashboard(page, server.base_url, rid=rid, channels="a,b", window="300", mode="value")
    data = await until(page, lambda d: set(d["values"]) == {"a", "b"} and all(d["values"].values()))
    assert data["values"]["a"][1] == 0.0 and data["values"]["b"][1] == 1.0
    assert abs(data["values"]["a"][0] * 1e6 - a[-1][0]) < 1_000
    # a tile per channel, in the channel's colour, its value as a person reads it
    await expect(page.locator("#tiles .tile .name")).to_have_text(["a", "b"])
    await expect(page.locator("#tiles .tile .value")).to_have_text(["0", "1"])
    # a new point: its tile follows
    await write_points(server.base_url, rid, "a", [(time.time_ns(), 42.5)])
    await until(page, lambda d: d["values"]["a"][1] == 42.5)
    await expect(page.locator('#tiles .tile[data-tile="a"] .value')).to_have_text("42.5")
    await expect(page.locator("#tiles")).to_be_visible()
    (tmp_path / "tiles.png").write_bytes(await page.screenshot())

    await open_dashboard(
        page, server.base_url, rid=rid, channels="a,b", window="60", mode="rangeValues", threshold="50"
    )
    data = await until(page, lambda d: len(d["ranges"]) == 2 and all(d["ranges"].values()))
    a_mean = sum(100.0 + i for i in range(5, 12)) / 7
    ((as_, ae, av),) = data["ranges"]["a"]
    assert abs(as_ * 1e6 - a[5][0]) < 1_000 and abs(ae * 1e6 - a[12][0]) < 1_000 and abs(av - a_mean) < 1e-9
    ((bs, be, bv),) = data["ranges"]["b"]
    assert abs(bs * 1e6 - b[20][0]) < 1_000 and abs(be * 1e6 - b[24][0]) < 1_000 and bv == 60.0
    await page.wait_for_timeout(300)
    # each lane holds its series' colour and, inside its range, white text: the mean written there
    colors = (await published(page))["colors"]
    for lane, channel in enumerate(("a", "b")):
        seen = await page.evaluate(
            """(y) => {
                const c = document.getElementById("chart");
                const dpr = window.devicePixelRatio || 1;
                const seen = new Set();
                for (let dy = 0; dy < 14; dy++) {
                    const d = c.getContext("2d").getImageData(0, Math.round((y + dy) * dpr), c.width, 1).data;
                    for (let i = 0; i < d.length; i += 4) seen.add(`${d[i]},${d[i + 1]},${d[i + 2]}`);
                }
                return [...seen];
            }""",
            12 + lane * 16,  # PAD.top + lane * VALUE_LANE
        )
        own = ",".join(str(int(colors[channel][i : i + 2], 16)) for i in (1, 3, 5))
        assert own in seen, (channel, seen[:20])
        assert "255,255,255" in seen  # the value's text (and the white page beside the range)
        assert len(seen) > 10, (channel, seen)  # anti-aliased glyph edges between white and the colour
    (tmp_path / "range-values.png").write_bytes(await page.screenshot())
