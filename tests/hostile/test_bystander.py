"""The bystander (tests/hostile/bystander.py) is the yardstick of every bounded-cost test: it must pass
on a quiet server and fail when the server stalls, or the attack tests it guards prove nothing."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from tests.conftest import ServerProcess
from tests.hostile.bystander import Bystander

pytestmark = pytest.mark.server


async def test_a_quiet_server_leaves_the_bystander_unharmed(server: ServerProcess) -> None:
    async with Bystander(server.base_url, server.ws_url) as b:
        await asyncio.sleep(3)
    b.assert_unharmed()
    assert len(b.update_latencies()) >= 8, b.summary()  # 3 s at 4 points/s, less the last second


async def test_a_stalled_server_fails_the_bystander(server: ServerProcess) -> None:
    """A 3 s stall (the server process stopped) is more than either budget allows."""
    async with Bystander(server.base_url, server.ws_url) as b:
        await asyncio.sleep(1)
        os.kill(server.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(3)
        finally:
            os.kill(server.pid, signal.SIGCONT)
        await asyncio.sleep(2)
    with pytest.raises(AssertionError, match="bystander"):
        b.assert_unharmed()
