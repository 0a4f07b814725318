"""The dashboard's polled charts, in headless Chromium against a real server with authentication on:
mode `spectrum` polls Nominal's ComputeService (`POST /compute/v2/compute`) over the dashboard's
window for the first channel, and draws its amplitude spectrum beside the time chart and its
low-pass filtered version in it, beside the live channel.

References from the mathematics: x(t) = 2 sin(2 pi 5 t) + sin(2 pi 40 t), 100 points a second for
20 s, has a single-sided amplitude spectrum of 2 at 5 Hz and 1 at 40 Hz (both on bins of 0.05 Hz,
where a Hann window reads a sine's amplitude exactly and leaks nothing beyond the next bin); a
digital order-N Butterworth low-pass filter of cutoff fc (the bilinear transform of the analog one,
its cutoff prewarped) applied forwards and backwards (nominal-api: "bidirectional Butterworth
filters") has the gain |H(f)|^2 = 1 / (1 + (tan(pi f / fs) / tan(pi fc / fs))^(2N)), so with
fs = 100 Hz, fc = 10 Hz and N = 4 the 5 Hz part keeps 0.9968 of its amplitude and the 40 Hz part
1.5e-8."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import numpy as np
import pytest
from playwright.async_api import Page, expect

from tests.conftest import ServerProcess, start_server
from tests.server.test_dashboard import drawn_pixels, points_of, side_pixels, unique_rid, until
from tests.wire import NANOS, write_points

TOKEN = "spectrum-token"
F_LOW, A_LOW, F_HIGH, A_HIGH = 5.0, 2.0, 40.0, 1.0
RATE, SECONDS = 100, 20
CUTOFF, ORDER = 10.0, 4  # the dashboard's filter order (dashboard/app.js FILTER_ORDER)
FILTERED = f"x · low-pass {CUTOFF:g} Hz"


@pytest.fixture(scope="module")
def authed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the module, with a tokens file (the page must send its token on its polls)."""
    base = tmp_path_factory.mktemp("dashboard-spectrum")
    tokens = base / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"token": TOKEN, "sub": "viewer", "dataSourceRids": ["*"]}]}))
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_TOKENS_FILE": str(tokens)})
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
async def written(authed: ServerProcess) -> dict[str, Any]:
    """The two sines, the last 20 s up to now: inside a 60 s window for the next 40 s."""
    rid = unique_rid("spectrum")
    t0 = time.time_ns() - SECONDS * NANOS
    points = sines(t0, 0, SECONDS * RATE)
    await write_sines(authed, rid, points)
    return {"rid": rid, "t0": t0, "points": points}


def sines(t0: int, first: int, count: int) -> list[tuple[int, float]]:
    """Samples `first` to `first + count` of the two sines sampled from t0 at RATE."""
    return [
        (
            t0 + i * NANOS // RATE,
            A_LOW * math.sin(2 * math.pi * F_LOW * i / RATE)
            + A_HIGH * math.sin(2 * math.pi * F_HIGH * i / RATE),
        )
        for i in range(first, first + count)
    ]


async def write_sines(server: ServerProcess, rid: str, points: list[tuple[int, float]]) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60) as http:
        await write_points(server.base_url, rid, "x", points, client=http)


def query(rid: str, **extra: str) -> str:
    params = {"groupBy": "", "tags": "", "rid": rid, "channels": "x", "window": "60", "mode": "spectrum"}
    return urlencode({**params, "cutoff": f"{CUTOFF:g}", **extra})


def butterworth_two_way(f: float, cutoff: float = CUTOFF) -> float:
    return 1 / (1 + (math.tan(math.pi * f / RATE) / math.tan(math.pi * cutoff / RATE)) ** (2 * ORDER))


def amplitude_at(points: list[list[float]], t0: int, f: float) -> float:
    """The amplitude of the sine of frequency f in the plotted points, fitted by least squares over
    their middle (seconds 5 to 15: whole periods, far from the filter's edges)."""
    seconds = np.array([(t - t0 / 1e6) / 1000 for t, _ in points])
    values = np.array([v for _, v in points])
    middle = (seconds >= 5.0) & (seconds < 15.0)
    assert middle.sum() == 10 * RATE, middle.sum()
    basis = np.column_stack(
        [
            np.sin(2 * np.pi * f * seconds[middle]),
            np.cos(2 * np.pi * f * seconds[middle]),
            np.ones(middle.sum()),
        ]
    )
    (s, c, _), *_ = np.linalg.lstsq(basis, values[middle], rcond=None)
    return math.hypot(s, c)


async def test_without_a_token_the_polls_are_refused_and_said(
    authed: ServerProcess, written: dict[str, Any], page: Page
) -> None:
    await page.goto(f"{authed.base_url}/?{query(written['rid'])}")
    data = await until(
        page, lambda d: bool(d["pollErrors"].get("spectrum") and d["pollErrors"].get("filter"))
    )
    assert data["auth"] == "token needed"
    assert data["spectrum"] is None and FILTERED not in data["series"]
    assert data["polled"]["spectrum"]["ok"] is False
    # shown under the chart, not only kept in the page's state
    await expect(page.locator("#errors li[data-polled]")).to_have_count(2)
    await expect(page.locator("#notice")).to_contain_text("needs a token")


@pytest.mark.timeout(600)  # its polls back off to 10 times their own time: minutes on a loaded machine
async def test_the_spectrum_peaks_at_the_sines_frequency_and_the_filter_attenuates_the_high_one(
    authed: ServerProcess, written: dict[str, Any], page: Page, tmp_path: Path
) -> None:
    rid, t0, points = written["rid"], written["t0"], written["points"]
    await page.goto(f"{authed.base_url}/?{query(rid)}#token={TOKEN}")
    await expect(page.locator("#cutoff-field")).to_be_visible()
    data = await until(
        page,
        lambda d: (
            bool(d["spectrum"] and d["spectrum"]["peaks"].get("") and d["polled"]["tookMs"])
            and len(points_of(d, FILTERED)) == len(points)
            and len(points_of(d, "x")) == len(points)
        ),
        timeout=90,
    )
    assert data["auth"] is None and data["pollErrors"] == {} and data["errors"] == []
    # a 60 s window: 1/60 of it, at least 1 s, and at least 10 times what the last poll took
    polled = data["polled"]
    assert polled["periodMs"] == pytest.approx(max(1000, 10 * polled["tookMs"]))

    # the spectrum: its peak at the low sine's frequency and amplitude; the high sine's bin reads 1
    spectrum = data["spectrum"]
    assert spectrum["channel"] == "x"
    peak = spectrum["peaks"][""]
    assert peak["frequency"] == pytest.approx(F_LOW, abs=1e-9)
    assert peak["from"] <= F_LOW < peak["to"]
    assert peak["amplitude"] == pytest.approx(A_LOW, rel=1e-6)
    curve = spectrum["groups"][""]
    nyquist = RATE / 2
    assert curve[0][0] <= 0.05 and curve[-1][0] == pytest.approx(nyquist)  # 0 Hz to Nyquist
    high = min(curve, key=lambda row: abs(row[0] - F_HIGH))
    assert high[0] == pytest.approx(F_HIGH, abs=1e-9) and high[2] == pytest.approx(A_HIGH, rel=1e-6)
    elsewhere = [mx for f, _, mx in curve if abs(f - F_LOW) > 0.2 and abs(f - F_HIGH) > 0.2 and f > 0]
    assert max(elsewhere) < 1e-6  # nothing but the two sines (a bin away from each: Hann's own lobe)

    # the filtered channel: the written instants, the 5 Hz part kept, the 40 Hz part gone
    filtered = points_of(data, FILTERED)
    assert data["series"][FILTERED]["kind"] == "numeric" and data["series"][FILTERED]["polled"] is True
    assert all(
        math.isclose(t, ns / 1e6, abs_tol=1e-3) for (t, _), (ns, _) in zip(filtered, points, strict=True)
    )
    assert amplitude_at(filtered, t0, F_LOW) == pytest.approx(A_LOW * butterworth_two_way(F_LOW), abs=1e-3)
    assert amplitude_at(filtered, t0, F_HIGH) == pytest.approx(A_HIGH * butterworth_two_way(F_HIGH), abs=1e-3)
    raw = points_of(data, "x")  # the live channel beside it still carries the 40 Hz sine
    assert amplitude_at(raw, t0, F_HIGH) == pytest.approx(A_HIGH, abs=1e-6)

    # drawn: the filtered line in its own colour in the time chart, the spectrum beside it
    await page.wait_for_timeout(400)
    assert await drawn_pixels(page, FILTERED) > 300
    assert await side_pixels(page) > 300
    legend = await page.inner_text(f'#legend [data-series="{FILTERED}"]')
    assert re.search(r"polled every \d+(\.\d)? s\)", legend) and "order 4 Butterworth" in legend, legend
    (tmp_path / "spectrum.png").write_bytes(await page.screenshot())

    # refreshed: a later poll covers a later window. The page waits 10 times what the last poll took
    # (asserted above): on a loaded machine a cold first poll took 9.3 s, and the next came 93 s on,
    # when the points written first had left the 60 s window: the sines go on, up to now.
    upto = (time.time_ns() - t0) * RATE // NANOS
    if upto > len(points):
        await write_sines(authed, rid, sines(t0, len(points), upto - len(points)))
    first = data["spectrum"]["at"]
    later = await until(
        page,
        lambda d: bool(d["spectrum"]) and d["spectrum"]["at"] >= first + 1000,
        timeout=60 + 2 * polled["periodMs"] / 1000,
    )
    assert later["spectrum"]["peaks"][""]["frequency"] == pytest.approx(F_LOW, abs=0.1)

    # a cutoff the server refuses (above Nyquist): its error is shown, the spectrum still drawn
    await page.fill("#cutoff", "80")
    await page.click("button[type=submit]")
    data = await until(
        page, lambda d: bool(d["pollErrors"].get("filter")) and bool(d["spectrum"]), timeout=60
    )
    said = data["pollErrors"]["filter"]
    assert "InvalidComputation" in said and "Nyquist" in said, said
    assert not any(s.startswith("x · low-pass") for s in data["series"])
    await expect(page.locator("#errors li[data-polled]")).to_contain_text("Nyquist")

    # a cutoff that is not a frequency is refused beside the form, as the other fields are
    await page.fill("#cutoff", "0")
    await page.click("button[type=submit]")
    data = await until(page, lambda d: bool(d["formErrors"]))
    assert "cutoff" in data["formErrors"][0]


async def test_grouped_by_a_tag_each_group_has_its_spectrum_and_filtered_line(
    authed: ServerProcess, page: Page
) -> None:
    """Group by (the demo's default, `vehicle`): a spectrum and a filtered line per group."""
    rid = unique_rid("spectrum-groups")
    t0 = time.time_ns() - SECONDS * NANOS
    sines = {"a": (3.0, 1.0), "b": (8.0, 0.5)}  # vehicle -> (frequency, amplitude)
    cutoff = 5.0
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=authed.base_url, headers=headers, timeout=60) as http:
        for vehicle, (f, a) in sines.items():
            points = [
                (t0 + i * NANOS // RATE, a * math.sin(2 * math.pi * f * i / RATE))
                for i in range(SECONDS * RATE)
            ]
            await write_points(authed.base_url, rid, "x", points, tags={"vehicle": vehicle}, client=http)
    await page.goto(f"{authed.base_url}/?{query(rid, groupBy='vehicle', cutoff=f'{cutoff:g}')}#token={TOKEN}")
    filtered = {v: f"x {{vehicle={v}}} · low-pass {cutoff:g} Hz" for v in sines}
    data = await until(
        page,
        lambda d: (
            bool(d["spectrum"])
            and set(d["spectrum"]["peaks"]) == {"vehicle=a", "vehicle=b"}
            and all(len(points_of(d, name)) == SECONDS * RATE for name in filtered.values())
        ),
        timeout=90,
    )
    assert data["pollErrors"] == {} and data["errors"] == []
    for vehicle, (f, a) in sines.items():
        peak = data["spectrum"]["peaks"][f"vehicle={vehicle}"]
        assert peak["frequency"] == pytest.approx(f, abs=1e-9) and peak["amplitude"] == pytest.approx(
            a, rel=1e-6
        )
        line = points_of(data, filtered[vehicle])
        assert amplitude_at(line, t0, f) == pytest.approx(a * butterworth_two_way(f, cutoff), abs=1e-3)
    # 3 Hz under the 5 Hz cutoff keeps nearly all of it, 8 Hz above it keeps under a tenth
    assert butterworth_two_way(3.0, cutoff) > 0.95 and butterworth_two_way(8.0, cutoff) < 0.05
    await page.wait_for_timeout(400)
    for name in filtered.values():
        assert await drawn_pixels(page, name) > 100


async def test_streamed_the_spectrum_and_the_filter_come_over_the_websocket_and_follow_new_points(
    authed: ServerProcess, page: Page
) -> None:
    """Spectrum "streamed" (docs/extensions.md, `streamPolled`): the page subscribes to the same two
    nodes instead of polling them; the server pushes each micro-batch's spectrum and filtered window.
    The same references as the polls, then a point written later reaches both without a poll."""
    rid = unique_rid("spectrum-streamed")
    t0 = time.time_ns() - SECONDS * NANOS
    signal = [
        A_LOW * math.sin(2 * math.pi * F_LOW * i / RATE) + A_HIGH * math.sin(2 * math.pi * F_HIGH * i / RATE)
        for i in range((SECONDS + 1) * RATE)
    ]
    points = [(t0 + i * NANOS // RATE, v) for i, v in enumerate(signal)]
    first, later = points[: SECONDS * RATE], points[SECONDS * RATE :]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if "compute/v2/compute" in r.url else None)
    async with httpx.AsyncClient(base_url=authed.base_url, headers=headers, timeout=60) as http:
        await write_points(authed.base_url, rid, "x", first, client=http)
        await page.goto(f"{authed.base_url}/?{query(rid, spectrumBy='stream')}#token={TOKEN}")
        await expect(page.locator("#spectrumBy-field")).to_be_visible()
        data = await until(
            page,
            lambda d: (
                bool(d["spectrum"] and d["spectrum"]["peaks"].get(""))
                and len(points_of(d, FILTERED)) == len(first)
                and len(points_of(d, "x")) == len(first)
            ),
            timeout=90,
        )
        assert data["polled"] is None and data["pollErrors"] == {} and data["errors"] == []
        peak = data["spectrum"]["peaks"][""]
        assert peak["frequency"] == pytest.approx(F_LOW, abs=1e-9)
        assert peak["amplitude"] == pytest.approx(A_LOW, rel=1e-6)
        high = min(data["spectrum"]["groups"][""], key=lambda row: abs(row[0] - F_HIGH))
        assert high[0] == pytest.approx(F_HIGH, abs=1e-9) and high[2] == pytest.approx(A_HIGH, rel=1e-6)
        filtered = points_of(data, FILTERED)
        assert amplitude_at(filtered, t0, F_LOW) == pytest.approx(
            A_LOW * butterworth_two_way(F_LOW), abs=1e-3
        )
        assert amplitude_at(filtered, t0, F_HIGH) == pytest.approx(
            A_HIGH * butterworth_two_way(F_HIGH), abs=1e-3
        )
        legend = await page.inner_text(f'#legend [data-series="{FILTERED}"]')
        assert "streamed at each micro-batch" in legend and "order 4 Butterworth" in legend, legend

        # one more second of the sines: both follow it, pushed
        pushed_at = data["spectrum"]["at"]
        await write_points(authed.base_url, rid, "x", later, client=http)
        data = await until(
            page,
            lambda d: len(points_of(d, FILTERED)) == len(points) and d["spectrum"]["at"] > pushed_at,
            timeout=60,
        )
    # 2,100 points: 1,051 bins in 512 buckets, some of 3 bins, drawn at their centre; the bucket
    # holding 5 Hz (a bin again) reads its amplitude
    peak = data["spectrum"]["peaks"][""]
    assert peak["from"] <= F_LOW < peak["to"] and peak["to"] - peak["from"] < 0.2, peak
    assert peak["amplitude"] == pytest.approx(A_LOW, rel=1e-6)
    refiltered = points_of(data, FILTERED)
    assert all(
        math.isclose(t, ns / 1e6, abs_tol=1e-3) for (t, _), (ns, _) in zip(refiltered, points, strict=True)
    )
    assert amplitude_at(refiltered, t0, F_HIGH) == pytest.approx(
        A_HIGH * butterworth_two_way(F_HIGH), abs=1e-3
    )
    await page.wait_for_timeout(400)
    assert await drawn_pixels(page, FILTERED) > 300 and await side_pixels(page) > 300
    assert polls == []  # nothing was polled
