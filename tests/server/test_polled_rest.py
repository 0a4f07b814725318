"""The last polled variants, on a real server through nominal-api's generated `ComputeService`
client: Bode's `alignmentConfiguration`, then `tagByIntervals`.

Bode's references, from the mathematics and nominal-api's docstrings: the input 2.5 sin(2 pi 50 t)
+ 1 at 1 kHz over 4 s and the output 1.25 sin(2 pi 50 t + 0.7) written at 500 Hz (every other
instant of the input). nominal-api: "When absent, Bode ... requires the input and output value
arrays to have equal length" (4,000 and 2,000: refused); "FIRST uses the input timestamps and
SECOND uses the output timestamps", the other series read by forward fill within
`interpolationRadius`. Driven by the output (SECOND), or by the input (FIRST) with a radius of 0
(the input's odd instants have no output point at or 0 s before them, so they are left out), the
pair is the two sines at the output's 2,000 instants: at 50 Hz a gain of 0.5 (20 log10 0.5 dB) and
a phase of 0.7 rad. FIRST with a 1 s radius holds each output value over the next input instant:
every input instant is kept (1 kHz: 51 frequencies of 10 Hz bins)."""

from __future__ import annotations

import math
import time
import uuid

import httpx
import numpy as np
import pytest
from conjure_python_client import ConjureEncoder, ConjureHTTPError

from tests import node_json as n
from tests.server.test_compute_service import TOKEN, channel, ns, request, secured, service
from tests.server.test_log_writer import logs_body
from tests.wire import NANOS, write_points

__all__ = ["secured"]

MS = 1_000_000
F0, AMPLITUDE, OFFSET, SECONDS = 50.0, 2.5, 1.0, 4
GAIN, LAG = 0.5, 0.7


@pytest.fixture(scope="module")
async def pair(secured: object) -> dict[str, int | str]:
    base_url: str = secured.base_url  # type: ignore[attr-defined]
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 600) * NANOS
    sine = [
        (t0 + i * MS, OFFSET + AMPLITUDE * math.sin(2 * math.pi * F0 * i / 1000))
        for i in range(SECONDS * 1000)
    ]
    echo = [
        (t0 + i * MS, GAIN * AMPLITUDE * math.sin(2 * math.pi * F0 * i / 1000 + LAG))
        for i in range(0, SECONDS * 1000, 2)
    ]
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": TOKEN}, timeout=120) as c:
        await write_points(base_url, rid, "sine", sine, client=c)
        await write_points(base_url, rid, "echo500", echo, client=c)
    return {"rid": rid, "t0": t0}


def bode(rid: str, **extra: object) -> dict[str, object]:
    body = {
        "input": channel(rid, "sine"),
        "output": channel(rid, "echo500"),
        # 100-point segments at 500 Hz: 5 Hz bins, 50 Hz on bin 10 where a Hann window leaks nothing
        "stftOptions": {"window": "HANN", "nperseg": 100, "noverlap": 50},
        "unwrapPhase": False,
        **extra,
    }
    return n.union("frequencyV2", n.union("bode", body))


def alignment(driver: str, radius_ns: int) -> dict[str, object]:
    radius = n.union("literal", n.duration(radius_ns))
    return {
        "driverSeries": driver,
        "interpolationConfiguration": n.union("forwardFillInterpolation", {"interpolationRadius": radius}),
    }


def test_bode_aligns_its_series_as_configured(secured: object, pair: dict[str, int | str]) -> None:
    rid, t0 = str(pair["rid"]), int(pair["t0"])
    client = service(secured.base_url)  # type: ignore[attr-defined]
    end = t0 + SECONDS * NANOS
    with pytest.raises(ConjureHTTPError) as strict:  # no alignment: 4,000 and 2,000 points
        client.compute(TOKEN, request(bode(rid), t0, end))
    assert strict.value.error_name == "Compute:InvalidComputation"
    for driver, radius in (("SECOND", NANOS), ("FIRST", 0)):
        got = client.compute(
            TOKEN, request(bode(rid, alignmentConfiguration=alignment(driver, radius)), t0, end)
        )
        plot = got.frequency_domain_v2
        assert plot is not None and plot.magnitude_and_phase is not None, driver
        f = np.array(plot.magnitude_and_phase.frequencies)
        assert len(f) == 51 and f[1] == pytest.approx(5.0), driver  # 500 Hz: 51 bins of 5 Hz
        k = int(np.argmin(np.abs(f - F0)))
        assert f[k] == pytest.approx(F0)
        assert plot.magnitude_and_phase.magnitudes[k] == pytest.approx(20 * math.log10(GAIN), abs=1e-6)
        assert plot.magnitude_and_phase.phases[k] == pytest.approx(LAG, abs=1e-6)
    held = client.compute(
        TOKEN, request(bode(rid, alignmentConfiguration=alignment("FIRST", NANOS)), t0, end)
    ).frequency_domain_v2
    assert held is not None and held.magnitude_and_phase is not None
    f = np.array(held.magnitude_and_phase.frequencies)
    assert len(f) == 51 and f[1] == pytest.approx(10.0)  # every input instant kept: 1 kHz, 10 Hz bins
    # nominal-api's cpsd has no alignmentConfiguration (its generated client drops it): sent as raw
    # JSON, it is refused by name, not ignored
    body = ConjureEncoder().default(request(bode(rid), t0, end))
    cpsd = {
        "x": channel(rid, "sine"),
        "y": channel(rid, "sine"),
        "alignmentConfiguration": alignment("FIRST", 0),
    }
    body["node"] = n.union("frequencyV2", n.union("cpsd", cpsd))
    r = httpx.post(
        f"{secured.base_url}/compute/v2/compute",  # type: ignore[attr-defined]
        json=body,
        headers={"Authorization": TOKEN},
        timeout=30,
    )
    assert r.status_code == 400 and r.json()["parameters"]["field"] == "alignmentConfiguration", r.text


def _timestamp(t: int) -> dict[str, object]:
    return n.union("literal", n.duration(t))


@pytest.fixture(scope="module")
async def level(secured: object) -> dict[str, int | str]:
    """A channel at 10 Hz over 10 s, its i-th point (i / 10 s after t0) of value i."""
    base_url: str = secured.base_url  # type: ignore[attr-defined]
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 900) * NANOS
    points = [(t0 + i * 100 * MS, float(i)) for i in range(100)]
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": TOKEN}, timeout=120) as c:
        await write_points(base_url, rid, "level", points, client=c)
    return {"rid": rid, "t0": t0}


def tagged(
    rid: str, spans: list[tuple[int, int | None]], tag_by: list[str], shift: str | None = None
) -> dict[str, object]:
    literal = {
        "literalRanges": [
            {"startTimestamp": _timestamp(a), **({} if b is None else {"endTimestamp": _timestamp(b)})}
            for a, b in spans
        ]
    }
    body: dict[str, object] = {
        "input": channel(rid, "level"),
        "intervals": n.union(
            "ranges",
            {"ranges": n.union("literalRanges", literal), "tagBy": [n.union(t, {}) for t in tag_by]},
        ),
    }
    if shift is not None:
        body["timeShift"] = n.union(shift, {})
    return n.series(n.numeric_series(n.union("tagByIntervals", body)))


def groups(got: object) -> dict[tuple[tuple[str, str], ...], list[tuple[int, float]]]:
    grouped = got.grouped  # type: ignore[attr-defined]
    assert grouped is not None
    out = {}
    for r in grouped.responses:
        tags = tuple(sorted(r.grouping.tags_with_values.items()))
        numeric = r.response.numeric
        assert numeric is not None
        out[tags] = [(ns(t), v) for t, v in zip(numeric.timestamps, numeric.values, strict=True)]
    return out


def test_tag_by_intervals_groups_the_points_of_each_range(
    secured: object, level: dict[str, int | str]
) -> None:
    """nominal-api: "Points within an interval get tagged; points outside all intervals are
    dropped"; each interval is a group tagged INTERVAL_INDEX (its position) and INTERVAL_START;
    "Optional time shift subtracts a per-interval anchor from timestamps after matching"."""
    rid, t0 = str(level["rid"]), int(level["t0"])
    client = service(secured.base_url)  # type: ignore[attr-defined]
    end = t0 + 10 * NANOS
    first, second = (t0 + NANOS, t0 + 2 * NANOS), (t0 + 5 * NANOS, t0 + 6500 * MS)
    node = tagged(rid, [first, second], ["intervalIndex", "rangeStartTimestamp"])
    got = groups(client.compute(TOKEN, request(node, t0, end)))
    assert got == {
        (("INTERVAL_INDEX", "0"), ("INTERVAL_START", str(first[0]))): [
            (t0 + i * 100 * MS, float(i)) for i in range(10, 20)
        ],
        (("INTERVAL_INDEX", "1"), ("INTERVAL_START", str(second[0]))): [
            (t0 + i * 100 * MS, float(i)) for i in range(50, 65)
        ],
    }
    # shifted by each interval's start: each group's points from 0 s on
    shifted = groups(
        client.compute(
            TOKEN, request(tagged(rid, [first, second], ["intervalIndex"], "intervalStart"), t0, end)
        )
    )
    assert shifted == {
        (("INTERVAL_INDEX", "0"),): [(i * 100 * MS, float(10 + i)) for i in range(10)],
        (("INTERVAL_INDEX", "1"),): [(i * 100 * MS, float(50 + i)) for i in range(15)],
    }
    # by its end: a range open at the period's end has none to resolve
    with pytest.raises(ConjureHTTPError) as open_end:
        client.compute(
            TOKEN, request(tagged(rid, [(t0 + 8 * NANOS, None)], ["intervalIndex"], "intervalEnd"), t0, end)
        )
    assert open_end.value.error_name == "Compute:InvalidComputation"


def log_channel(rid: str, name: str) -> dict[str, object]:
    source = {"dataSourceRid": n.literal(rid), "channel": n.literal(name), "tags": {}}
    return n.union("channel", n.union("dataSource", source))


def paged(client: object, log: dict[str, object], start: int, end: int) -> list[tuple[int, str]]:
    node = n.union(
        "series",
        {
            "input": n.union("log", log),
            "numericAggregations": {},
            "summarizationStrategy": n.union("page", n.union("pageInfo", {"pageSize": 100})),
        },
    )
    plot = client.compute(TOKEN, request(node, start, end)).paged_log  # type: ignore[attr-defined]
    assert plot is not None and plot.next_page_token is None
    return [(ns(t), v.message) for t, v in zip(plot.timestamps, plot.values, strict=True)]


def test_log_series_variants_computed_when_polled(secured: object) -> None:
    """References from nominal-api's docstrings: `union` KEEP_ALL keeps every input's lines (in time
    order); `timeShift` moves each line by the duration; `toStartOfInterval` rewrites "a point at
    timestamp `t` ... to `floor(t / window) * window`", colliding lines all kept; `selectLogs`
    selects one channel of a dataset by name."""
    base_url: str = secured.base_url  # type: ignore[attr-defined]
    rid = f"ri.sparkwire.test.logs.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 1200) * NANOS
    app = [(t0 + i * 250 * MS, f"app {i}", {"i": str(i)}) for i in range(8)]  # 0, 250, ... 1750 ms
    db: list[tuple[int, str, dict[str, str]]] = [
        (t0 + i * 400 * MS, f"db {i}", {}) for i in range(5)
    ]  # 0, 400, ... 1600 ms
    for name, lines in (("app.log", app), ("db.log", db)):
        r = httpx.post(
            f"{base_url}/storage/writer/v1/logs/{rid}",
            content=logs_body(lines, channel=name),
            headers={"Content-Type": "application/json", "Authorization": TOKEN},
            timeout=60,
        )
        assert r.status_code == 200, r.text
    client = service(base_url)
    start, end = t0, t0 + 2 * NANOS
    union = n.union(
        "union", {"input": [log_channel(rid, "app.log"), log_channel(rid, "db.log")], "operation": "KEEP_ALL"}
    )
    want = sorted([(t, m) for t, m, _ in app + db], key=lambda p: p[0])  # stable: app's line first at t0
    assert paged(client, union, start, end) == want
    shifted = n.union(
        "timeShift", {"input": log_channel(rid, "db.log"), "duration": n.union("literal", n.duration(NANOS))}
    )
    assert paged(client, shifted, start, end) == [(t + NANOS, m) for t, m, _ in db if t + NANOS < end]
    window = n.union("nanoseconds", {"nanoseconds": n.literal(500 * MS)})
    snapped = n.union("toStartOfInterval", {"input": log_channel(rid, "app.log"), "window": window})
    assert paged(client, snapped, start, end) == [((t // (500 * MS)) * 500 * MS, m) for t, m, _ in app]
    dataset = {"type": "saved", "saved": {"rid": n.literal(rid)}}
    selected = n.union("selectLogs", {"dataset": dataset, "name": n.literal("db.log")})
    assert paged(client, selected, start, end) == [(t, m) for t, m, _ in db]
