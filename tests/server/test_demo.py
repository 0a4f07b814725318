"""`sparkwire demo` against the real server: several channels and tags, a string channel, and late
points that a live computation sees arrive after newer ones."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx

from sparkwire_client import Client, numeric_channel, series
from tests.conftest import ROOT, ServerProcess
from tests.server.test_operations import scrape, value


async def test_the_demo_feeds_tagged_channels_a_string_channel_and_late_points(server: ServerProcess) -> None:
    rid = f"ri.test.demo.{time.time_ns()}"
    async with Client(server.base_url) as client:
        # a live computation with the default lateness (100 ms) notices the late points
        sub = await client.subscribe(
            series(numeric_channel(rid, "engine.temp", tags={"vehicle": "a1"})), window=60
        )
        await sub.wait_for(lambda v: v.updates >= 1, timeout=120)
        before = await scrape(server)
        demo = subprocess.run(
            [
                sys.executable,
                "-m",
                "app.runtime.cli",
                "demo",
                "--url",
                server.base_url,
                "--data-source-rid",
                rid,
                "--vehicles",
                "2",
                "--rate",
                "20",
                "--duration",
                "4",
                "--late-fraction",
                "0.2",
                "--seed",
                "7",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert demo.returncode == 0, demo.stderr
        await sub.wait_for(lambda v: len(v.values) >= 20, timeout=120)

    async with httpx.AsyncClient(base_url=server.base_url) as http:
        listed = [s for s in (await http.get("/series")).json() if s["dataSourceRid"] == rid]
    channels = {(s["channel"], s["tags"]["vehicle"], s["type"]) for s in listed}
    numeric = {"engine.temp", "engine.rpm", "battery.voltage", "speed"}
    assert channels == {(c, v, "double") for c in numeric for v in ("a1", "a2")} | {
        ("drive.mode", v, "string") for v in ("a1", "a2")
    }
    summary = re.search(r"(\d+) points \((\d+) late\)", demo.stderr)
    assert summary is not None, demo.stderr
    points, late_points = int(summary[1]), int(summary[2])
    assert points > 0 and late_points > 0
    late, ingested = "sparkwire_points_rejected_total", "sparkwire_points_ingested_total"
    after = await scrape(server)
    assert value(after, ingested) - value(before, ingested) == points  # every point it sent is durable
    assert value(after, late, reason="late") > value(before, late, reason="late")
