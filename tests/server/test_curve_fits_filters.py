"""Curve fits and signal filters, which Nominal only polls, on a real server: points written over
HTTP, then polled through nominal-api's generated `ComputeService` client (Conjure JSON, decoded
into nominal-api's `CurveFitResultV2`, `CurveFitResult` and `NumericPlot`), values checked against
the mathematics: a line's slope, intercept and R^2 = 1; an exponential's a and b, closed form
and by a custom formula; a zero-phase
Butterworth low-pass's gain 1 / (1 + (tan(pi f / fs) / tan(pi fc / fs))^(2N)) at a passed and an
attenuated frequency. The same nodes subscribed live are refused with Nominal's
PollingOnlyComputation types (docs/protocol.md)."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from conjure_python_client import ConjureHTTPError

from tests import node_json as n
from tests.conftest import ServerProcess, start_secured_server
from tests.server.test_compute_service import TOKEN, ns, present, request, service
from tests.wire import NANOS, Client, new_id, subscription, write_points

MS = 1_000_000
Json = dict[str, Any]
FS = 1000.0


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("curve-fits-filters")
    proc = start_secured_server(base, [{"token": "all-token", "sub": "all", "dataSourceRids": ["*"]}])
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
async def written(secured: ServerProcess) -> Json:
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 600) * NANOS
    line = [(t0 + i * 10 * MS, 2.5 * (i * 0.01) + 1.0) for i in range(1000)]  # y = 2.5 t + 1, 100 Hz
    growth = [(t0 + i * 10 * MS, 3.0 * math.exp(0.4 * i * 0.01)) for i in range(1000)]  # y = 3 e^(0.4 t)
    t = np.arange(4000) / FS  # 4 s at 1 kHz: a 10 Hz and an 80 Hz sine of amplitude 1
    mix = np.sin(2 * np.pi * 10 * t) + np.sin(2 * np.pi * 80 * t)
    wave = [(t0 + i * MS, float(v)) for i, v in enumerate(mix)]
    async with httpx.AsyncClient(
        base_url=secured.base_url, headers={"Authorization": TOKEN}, timeout=120
    ) as c:
        await write_points(secured.base_url, rid, "line", line, client=c)
        await write_points(secured.base_url, rid, "growth", growth, client=c)
        for k in range(0, len(wave), 2000):
            await write_points(secured.base_url, rid, "wave", wave[k : k + 2000], client=c)
    return {"rid": rid, "t0": t0, "line": line, "wave": wave}


def stamp(t: int) -> Json:
    return n.literal({"seconds": t // NANOS, "nanos": t % NANOS})


def fit_v2(rid: str, channel: str, curve: Json, start: int, end: int) -> Json:
    return n.union(
        "curveV2",
        {
            "target": n.union("numeric", {"series": n.channel(rid, channel)}),
            "fitRange": {"startTime": stamp(start), "endTime": stamp(end)},
            "curveToFit": curve,
        },
    )


def test_curve_fits_polled_return_a_lines_and_an_exponentials_coefficients(
    secured: ServerProcess, written: Json
) -> None:
    rid, t0, line = written["rid"], written["t0"], written["line"]
    client = service(secured.base_url)
    start, end = t0 + 2 * NANOS, t0 + 6 * NANOS  # fit from 2 s to 6 s: x = 0 at the first point there
    degree_one = n.union("polynomial", {"independentVariable": n.union("time", {}), "degree": n.literal(1)})
    got = present(
        client.compute(TOKEN, request(fit_v2(rid, "line", degree_one, start, end), t0, t0 + 10 * NANOS))
    )
    result = present(got.curve_fit_v2)
    a = present(result.curve_result_details.polynomial).a
    # y = 2.5 (t' + 2) + 1 = 6 + 2.5 t' with t' the seconds since the point at 2 s
    assert a == pytest.approx([6.0, 2.5], rel=1e-9)
    assert result.r2 == pytest.approx(1.0, abs=1e-12)
    assert result.max_absolute_error == pytest.approx(0.0, abs=1e-9)
    assert result.sample_count == sum(1 for t, _ in line if start <= t <= end)  # 401
    exponential = n.union("exponential", {"independentVariable": n.union("time", {})})
    got = client.compute(
        TOKEN, request(fit_v2(rid, "growth", exponential, t0, t0 + 10 * NANOS), t0, t0 + 10 * NANOS)
    )
    details = present(present(got.curve_fit_v2).curve_result_details.exponential)
    assert (details.a, details.b) == (pytest.approx(3.0, rel=1e-9), pytest.approx(0.4, rel=1e-9))
    # a custom formula, y = a e^(b t) written out, fit from a = b = 1 by the optimizer
    formula = n.union(
        "custom",
        {
            "formula": n.literal("a * exp(b * t)"),
            "variables": {"t": n.union("time", {})},
            "parameters": {"a": n.literal(1.0), "b": n.literal(1.0)},
        },
    )
    got = client.compute(
        TOKEN, request(fit_v2(rid, "growth", formula, t0, t0 + 10 * NANOS), t0, t0 + 10 * NANOS)
    )
    fitted = present(present(got.curve_fit_v2).curve_result_details.custom)
    assert fitted.converged and fitted.iterations >= 1
    assert fitted.parameters == pytest.approx({"a": 3.0, "b": 0.4}, rel=1e-6)
    # the deprecated CurveFit answers the deprecated CurveFitResult
    v1 = n.union(
        "curve",
        {
            "curveFitPlotType": n.union("timeSeries", {"series": n.channel(rid, "line"), "options": {}}),
            "curveFitDetails": n.union("polynomial", {"degree": n.literal(1)}),
            "curveFitOptions": {"startTime": stamp(t0), "endTime": stamp(t0 + 10 * NANOS)},
        },
    )
    old = present(client.compute(TOKEN, request(v1, t0, t0 + 10 * NANOS)).curve_fit)
    assert present(old.curve_result_details.polynomial).a == pytest.approx([1.0, 2.5], rel=1e-9)
    assert old.sample_count == 1000


def gain(f: float, fc: float, order: int) -> float:
    """A zero-phase (forward-backward) digital Butterworth low-pass's |H(f)|^2."""
    return 1.0 / (1.0 + (math.tan(math.pi * f / FS) / math.tan(math.pi * fc / FS)) ** (2 * order))


def test_a_low_pass_polled_attenuates_the_high_sine_by_its_gain(
    secured: ServerProcess, written: Json
) -> None:
    rid, t0, wave = written["rid"], written["t0"], written["wave"]
    low_pass = n.union(
        "signalFilter",
        {
            "input": n.channel(rid, "wave"),
            "signalFilterConfiguration": n.union("lowPass", {"cutoffFrequency": n.literal(50.0)}),
            "order": n.literal(4),
        },
    )
    node = n.series(n.numeric_series(low_pass), buckets=5000)
    got = present(service(secured.base_url).compute(TOKEN, request(node, t0, t0 + 4 * NANOS)).numeric)
    ts = np.array([ns(t) for t in got.timestamps])
    assert ts.tolist() == [t for t, _ in wave]  # the input's timestamps, one value each
    values = np.array(got.values)
    seconds = (ts - t0) / 1e9
    middle = (seconds >= 1.0) & (seconds < 3.0)  # whole periods of both sines, far from the edges
    for f, want in ((10.0, gain(10.0, 50.0, 4)), (80.0, gain(80.0, 50.0, 4))):
        basis = np.column_stack(
            [np.sin(2 * np.pi * f * seconds[middle]), np.cos(2 * np.pi * f * seconds[middle])]
        )
        (s, c), *_ = np.linalg.lstsq(basis, values[middle], rcond=None)
        assert math.hypot(s, c) == pytest.approx(want, abs=1e-3), f
        assert abs(math.atan2(c, s)) < 0.05  # zero phase


def test_a_cutoff_above_nyquist_is_refused_by_name(secured: ServerProcess, written: Json) -> None:
    rid, t0 = written["rid"], written["t0"]
    bad = n.union(
        "signalFilter",
        {
            "input": n.channel(rid, "wave"),
            "signalFilterConfiguration": n.union("lowPass", {"cutoffFrequency": n.literal(900.0)}),
            "order": n.literal(2),
        },
    )
    with pytest.raises(ConjureHTTPError) as err:
        service(secured.base_url).compute(TOKEN, request(n.series(n.numeric_series(bad)), t0, t0 + 4 * NANOS))
    assert err.value.error_name == "Compute:InvalidComputation"
    assert err.value.parameters["variant"] == "signalFilter"
    response = present(present(err.value.cause).response)
    assert "Nyquist" in response.json()["message"]


async def test_subscribed_live_they_are_refused_as_nominal_refuses_them(
    secured: ServerProcess, written: Json
) -> None:
    rid, t0 = written["rid"], written["t0"]
    degree_one = n.union("polynomial", {"independentVariable": n.union("time", {}), "degree": n.literal(1)})
    low_pass = n.union(
        "signalFilter",
        {
            "input": n.channel(rid, "wave"),
            "signalFilterConfiguration": n.union("lowPass", {"cutoffFrequency": n.literal(50.0)}),
            "order": n.literal(4),
        },
    )
    cases = {
        "CURVE_FITTING": fit_v2(rid, "line", degree_one, t0, t0 + 10 * NANOS),
        "SIGNAL_FILTER": n.series(n.numeric_series(low_pass)),
    }
    client = await Client.connect(secured.ws_url, additional_headers={"Authorization": TOKEN})
    try:
        for kind, node in cases.items():
            sub_id = new_id()
            await client.subscribe({sub_id: subscription(node, {}, 3600)})
            creation = await client.creation(sub_id)
            assert creation["type"] == "error", creation
            error = creation["error"]["serializableError"]
            assert error["name"] == "PersistentCompute:PollingOnlyComputation"
            assert error["params"]["pollingOnlyTypes"] == kind
    finally:
        await client.close()
