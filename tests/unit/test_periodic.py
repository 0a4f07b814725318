"""app/periodic.py: the one periodic task late reports, liveness and the summary line run on."""

from __future__ import annotations

import asyncio

import pytest

from app.periodic import Periodic


async def test_ticks_until_stopped_and_a_failing_tick_does_not_end_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ticks: list[int] = []

    def tick() -> None:
        ticks.append(len(ticks))
        if len(ticks) == 2:
            raise RuntimeError("one bad tick")

    periodic = Periodic("test-ticks", 0.01, tick)
    periodic.start()
    periodic.start()  # already running: nothing more
    while len(ticks) < 5:
        await asyncio.sleep(0.01)
    await periodic.stop()
    assert not periodic.running
    stopped_at = len(ticks)
    await asyncio.sleep(0.05)
    assert len(ticks) == stopped_at
    assert "test-ticks: a tick failed" in caplog.text


async def test_keep_going_false_ends_it_and_start_runs_it_again() -> None:
    items = {"a"}
    ticks: list[int] = []
    periodic = Periodic("test-while", 0.01, lambda: ticks.append(1), keep_going=lambda: bool(items))
    periodic.start()
    while not ticks:
        await asyncio.sleep(0.01)
    items.clear()
    while periodic.running:
        await asyncio.sleep(0.01)
    items.add("b")
    periodic.start()
    before = len(ticks)
    while len(ticks) == before:
        await asyncio.sleep(0.01)
    await periodic.stop()
