"""`sparkwire_client.compute` / `compute_frame` on a real server: a past period computed once by the
ComputeService and read as a View and a DataFrame, for a node that streams (bucket means checked
against the written points), for nodes only a poll computes (a spectrum peaking at the written
sine's frequency, a running sum equal to numpy's), and a refusal raised with the server's name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sparkwire_client import ComputeError, compute, compute_frame, numeric_channel, series, spectrum
from tests.conftest import ServerProcess
from tests.server.test_compute_service import TOKEN, secured, written
from tests.wire import NANOS

__all__ = ["secured", "written"]  # the module-scoped server and points of test_compute_service

Json = dict[str, Any]
KEY = TOKEN.removeprefix("Bearer ")


async def test_compute_frame_of_buckets_and_of_a_running_sum(secured: ServerProcess, written: Json) -> None:
    rid, t0 = str(written["rid"]), int(written["t0"])
    wave: list[tuple[int, float]] = written["wave"]
    start, end = t0, t0 + 20 * NANOS
    frame = await compute_frame(
        secured.base_url,
        series(numeric_channel(rid, "wave"), buckets=20),
        start / NANOS,
        end / NANOS,
        token=KEY,
    )
    assert len(frame) == 20 and frame["count"].sum() == len(wave)
    values = np.array([v for _, v in wave])
    assert np.allclose(frame["mean"].to_numpy(), values.reshape(20, -1).mean(axis=1))

    ramp: list[tuple[int, float]] = written["ramp"]
    summed = series(numeric_channel(rid, "ramp").cumulative_sum(t0))
    view = await compute(secured.base_url, summed, start / NANOS, (t0 + 5 * NANOS) / NANOS, token=KEY)
    rows = view.rows()
    inside = [v for t, v in ramp if t0 <= t < t0 + 5 * NANOS]
    assert [r["value"] for r in rows] == pytest.approx(np.cumsum(inside).tolist())


async def test_a_spectrum_peaks_at_the_sines_frequency(secured: ServerProcess, written: Json) -> None:
    rid, t0 = str(written["rid"]), int(written["t0"])
    frame = await compute_frame(
        secured.base_url,
        spectrum(numeric_channel(rid, "wave")),
        t0 / NANOS,
        (t0 + 20 * NANOS) / NANOS,
        token=KEY,
    )
    # the wave: 10 sin(2 pi i / 4000) at 1 kHz, a 0.25 Hz sine over exactly five periods
    assert {"frequency", "amplitude"} <= set(frame.columns)
    peak = frame.loc[frame["amplitude"].idxmax()]
    assert peak["frequency"] == pytest.approx(0.25, abs=0.05)


async def test_a_refusal_is_raised_with_the_servers_name(secured: ServerProcess, written: Json) -> None:
    rid, t0 = str(written["rid"]), int(written["t0"])
    with pytest.raises(ComputeError) as refused:
        await compute(
            secured.base_url,
            series(numeric_channel(rid, "wave")),
            t0 / NANOS,
            (t0 + NANOS) / NANOS,
            token="wrong",
        )
    assert refused.value.status == 401
    with pytest.raises(ComputeError) as later:
        await compute(
            secured.base_url,
            series(numeric_channel(rid, "wave")),
            (t0 + NANOS) / NANOS,
            t0 / NANOS,
            token=KEY,
        )
    assert later.value.status == 400
