"""Polling-only nodes streamed live under `sparkwire.streamPolled` (docs/extensions.md, decision
0082), on a real server with Spark: a subscription made through `sparkwire_client` with
`stream_polled=True` before any point exists, then points written in chunks of one second each
(200 Hz: a 10 Hz sine of amplitude 1 plus a 60 Hz one of amplitude 0.5). After each chunk the
subscription's view, merged from the frames it received, must equal, value for value (float
equality), what Nominal's ComputeService answers over a period holding the same points: a
zero-phase Butterworth low-pass (`signalFilter`), 50 points selected by LTTB
(`largestTriangleThreeBuckets`, the series variant and the `series` root's summarization strategy),
the spectrogram and the window's amplitude spectrum (`frequency` `fft`), whose
peaks are also checked against the mathematics (a rectangular window over whole periods:
amplitude 1 at 10 Hz, 0.5 at 60 Hz). A curve fit (`curveV2`, a line against time) streams the
same way: each FullResult's `curveFitV2` is, as JSON, the ComputeService's over the same points,
and its coefficients those of the line written; subscribed through `sparkwire_client`
(`nodes.curve_fit`), the view's row holds the line's coefficients and the points fit so far. A bode
of two channels written apart is the ComputeService's answer once their counts agree, and its answer
over the complete pairs while they do not (where it refuses the whole period). The
same nodes subscribed without the option keep Nominal's `PollingOnlyComputation` refusal."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from sparkwire_client import Client, Subscription, View, curve_fit, numeric_channel, raw_node
from sparkwire_client.view import ResultView
from tests import node_json as n
from tests.conftest import ServerProcess, start_server
from tests.server.test_compute_service import TOKEN, ns, present, request, request_body, service
from tests.wire import NANOS, composite_batch, new_id, subscription, write_points
from tests.wire import Client as WireClient

Json = dict[str, Any]
FS = 200  # Hz
CHUNK = FS  # one second per chunk
CHUNKS = 4
WINDOW_S = 3600.0


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("streamed-polled")
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_RESUME_LINGER_SECONDS": "0"})
    yield proc
    proc.stop()


def wave(t0: int, count: int) -> list[tuple[int, float]]:
    step = NANOS // FS
    return [
        (t0 + i * step, math.sin(2 * math.pi * 10 * i / FS) + 0.5 * math.sin(2 * math.pi * 60 * i / FS))
        for i in range(count)
    ]


def low_pass(rid: str) -> Json:
    node = n.union(
        "signalFilter",
        {
            "input": n.channel(rid, "wave"),
            "signalFilterConfiguration": n.union("lowPass", {"cutoffFrequency": n.literal(30.0)}),
            "order": n.literal(4),
        },
    )
    return n.series(n.numeric_series(node), buckets=10_000)


def lttb(rid: str) -> Json:
    node = n.union(
        "largestTriangleThreeBuckets", {"input": n.channel(rid, "wave"), "maxPointsToReturn": n.literal(50)}
    )
    return n.series(n.numeric_series(node))


def lttb_strategy(rid: str) -> Json:
    """The `series` root summarized by the LTTB strategy: at most 50 points per group."""
    strategy = n.union("largestTriangleThreeBuckets", {"maxPointsPerGroup": 50})
    return n.union(
        "series", {"input": n.numeric_series(n.channel(rid, "wave")), "summarizationStrategy": strategy}
    )


async def settled(sub: Subscription, ready: Callable[[View], bool], what: str) -> View:
    """The subscription's view once `ready`, or a failure saying what it held instead."""
    try:
        return await sub.wait_for(ready, timeout=120)
    except TimeoutError:
        rows = sub.view.rows() if sub.view is not None else []
        pytest.fail(
            f"{what}: not reached in 120 s; the view holds {len(rows)} rows after {sub.version} updates"
        )


def rows_are(want: list[Json]) -> Callable[[View], bool]:
    return lambda view: view.rows() == want


def holds(rows: int) -> Callable[[View], bool]:
    return lambda view: len(view.rows()) == rows


def ends_at(ts: int) -> Callable[[View], bool]:
    return lambda view: bool(view.rows()) and view.rows()[-1]["timestamp"] == ts


def spectrum(rid: str) -> Json:
    return n.union("frequency", n.union("fft", {"input": n.channel(rid, "wave")}))


def points_of(view: View) -> list[tuple[int, float]]:
    return [(int(r["timestamp"]), float(r["value"])) for r in view.rows()]


def spectrogram(rid: str) -> Json:
    """A spectrogram (PSD, the default window) of windows of 64 points overlapping by 32."""
    return n.union(
        "spectrogram", {"input": n.channel(rid, "wave"), "stftOptions": {"nperseg": 64, "noverlap": 32}}
    )


def polled_rows(http_answer: httpx.Response, kind: str) -> list[Json]:
    """A ComputeService answer (JSON) read as the client reads a frame of that kind."""
    assert http_answer.status_code == 200, http_answer.text
    view = ResultView()
    view.replace(kind, http_answer.json()[kind])
    return view.rows()


def spectrum_of(view: View) -> list[tuple[float, float]]:
    return [(float(r["frequency"]), float(r["amplitude"])) for r in view.rows()]


async def test_streamed_filter_and_spectrum_equal_the_polled_answer_at_each_chunk(
    live_server: ServerProcess,
) -> None:
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 120) * NANOS
    points = wave(t0, CHUNK * CHUNKS)
    polled = service(live_server.base_url)
    async with Client(live_server.base_url, extensions=False, explain_empty=False) as client:
        filtered = await client.subscribe(raw_node(low_pass(rid)), WINDOW_S, stream_polled=True)
        spectral = await client.subscribe(raw_node(spectrum(rid)), WINDOW_S, stream_polled=True)
        selected = await client.subscribe(raw_node(lttb(rid)), WINDOW_S, stream_polled=True)
        summarized = await client.subscribe(raw_node(lttb_strategy(rid)), WINDOW_S, stream_polled=True)
        sliced = await client.subscribe(raw_node(spectrogram(rid)), WINDOW_S, stream_polled=True)
        async with httpx.AsyncClient(base_url=live_server.base_url, timeout=60) as http:
            for k in range(CHUNKS):
                await write_points(
                    live_server.base_url, rid, "wave", points[k * CHUNK : (k + 1) * CHUNK], client=http
                )
                held = points[: (k + 1) * CHUNK]
                count = len(held)
                start, end = t0 - 60 * NANOS, held[-1][0] + 1
                view = await settled(filtered, holds(count), f"chunk {k}: filter")
                got = present(polled.compute(TOKEN, request(low_pass(rid), start, end)).numeric)
                want = [(ns(t), float(v)) for t, v in zip(got.timestamps, got.values, strict=True)]
                assert [t for t, _ in want] == [t for t, _ in held]
                assert points_of(view) == want, f"chunk {k}: the streamed filter differs from the polled one"

                bins = count // 2 + 1
                view = await settled(spectral, holds(bins), f"chunk {k}: spectrum")
                plot = present(polled.compute(TOKEN, request(spectrum(rid), start, end)).frequency_domain)
                want_spectrum = list(
                    zip(map(float, plot.frequencies), map(float, plot.amplitudes), strict=True)
                )
                assert spectrum_of(view) == want_spectrum, f"chunk {k}: the streamed spectrum differs"
                f, a = np.array(want_spectrum).T
                for freq, amplitude in ((10.0, 1.0), (60.0, 0.5)):
                    at = int(np.argmin(np.abs(f - freq)))
                    assert f[at] == pytest.approx(freq) and a[at] == pytest.approx(amplitude, rel=1e-9)

                last = held[-1][0]  # LTTB keeps the first and the last point, 50 in all
                view = await settled(
                    selected,
                    ends_at(last),
                    f"chunk {k}: LTTB",
                )
                got = present(polled.compute(TOKEN, request(lttb(rid), start, end)).numeric)
                want = [(ns(t), float(v)) for t, v in zip(got.timestamps, got.values, strict=True)]
                assert len(want) == 50 and want[0] == held[0] and want[-1] == held[-1]
                assert set(want) <= set(held)  # points of the series, as written
                assert points_of(view) == want, f"chunk {k}: the streamed LTTB differs from the polled one"

                view = await settled(summarized, ends_at(last), f"chunk {k}: LTTB strategy")
                got = present(polled.compute(TOKEN, request(lttb_strategy(rid), start, end)).numeric)
                strategy_want = [(ns(t), float(v)) for t, v in zip(got.timestamps, got.values, strict=True)]
                assert strategy_want == want  # the same selection as the series variant's, per Nominal
                assert points_of(view) == strategy_want, f"chunk {k}: the streamed strategy differs"

                body = request_body(spectrogram(rid), start, end)
                answer = await http.post("/compute/v2/compute", json=body, headers={"Authorization": TOKEN})
                slices = polled_rows(answer, "spectrogram")
                # windows of 64 every 32 points over the points held: (count - 64) // 32 + 1 slices
                assert len({r["start"] for r in slices}) == (count - 64) // 32 + 1
                await settled(sliced, rows_are(slices), f"chunk {k}: the spectrogram")
        for sub in (filtered, spectral, selected, summarized, sliced):
            assert sub.version >= CHUNKS  # one update per chunk at least


def bode(rid: str) -> Json:
    """The frequency response from the channel `input` to `output` (no alignment: Nominal requires
    the two to hold as many points)."""
    body = {"input": n.channel(rid, "input"), "output": n.channel(rid, "output")}
    return n.union("frequencyV2", n.union("bode", body))


async def test_a_streamed_bode_is_the_poll_once_counts_agree_and_the_complete_pairs_between(
    live_server: ServerProcess,
) -> None:
    """The input (the wave) and the output, half the input at the same instants, written apart in
    chunks of one second: each chunk of the input whole, then the output's in two halves. While the
    output is half a chunk behind, the ComputeService refuses the period holding both (Nominal: bode
    without alignment "requires the input and output value arrays to have equal length"), and the
    streamed view is its answer over the pairs both hold (the period up to the output's last point);
    once the output catches up, its answer over every point. H = 0.5: -6.02 dB, phase 0."""
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 120) * NANOS
    inputs = wave(t0, CHUNK * 3)
    outputs = [(t, 0.5 * v) for t, v in inputs]
    start = t0 - 60 * NANOS
    async with Client(live_server.base_url, extensions=False, explain_empty=False) as client:
        sub = await client.subscribe(raw_node(bode(rid)), WINDOW_S, stream_polled=True)
        async with httpx.AsyncClient(base_url=live_server.base_url, timeout=60) as http:

            async def poll(end: int) -> httpx.Response:
                body = request_body(bode(rid), start, end)
                return await http.post("/compute/v2/compute", json=body, headers={"Authorization": TOKEN})

            for k in range(3):
                chunk = slice(k * CHUNK, (k + 1) * CHUNK)
                await write_points(live_server.base_url, rid, "input", inputs[chunk], client=http)
                half = (k * CHUNK + CHUNK // 2, (k + 1) * CHUNK)
                for h, upto in enumerate(half):
                    lo = k * CHUNK if h == 0 else half[0]
                    await write_points(live_server.base_url, rid, "output", outputs[lo:upto], client=http)
                    if h == 0:  # the output half a chunk behind: a poll of the whole is refused
                        refused = await poll(inputs[chunk][-1][0] + 1)
                        assert refused.status_code == 400, refused.text
                        error = refused.json()
                        assert error["errorName"] == "Compute:InvalidComputation", error
                        assert error["parameters"]["variant"] == "bode", error
                    want = polled_rows(await poll(outputs[upto - 1][0] + 1), "frequencyDomainV2")
                    nperseg = min(256, upto)  # Welch's segments: bins of FS / nperseg
                    assert len(want) == nperseg // 2 + 1
                    view = await settled(sub, rows_are(want), f"chunk {k}, {upto} pairs")
                    for freq in (10.0, 60.0):
                        row = min(view.rows(), key=lambda r: abs(r["frequency"] - freq))
                        assert row["magnitude"] == pytest.approx(20 * math.log10(0.5), abs=1e-9), freq
                        assert row["phase"] == pytest.approx(0.0, abs=1e-9), freq
        assert view.kind == "frequencyDomainV2"


def line_fit(rid: str, t0: int) -> Json:
    """curveV2: a first-degree polynomial of the channel `line` against its relative time (s)."""
    fit_range = {
        "startTime": n.literal({"seconds": t0 // NANOS - 60, "nanos": 0}),
        "endTime": n.literal({"seconds": t0 // NANOS + 3600, "nanos": 0}),
    }
    curve = n.union("polynomial", {"independentVariable": n.union("time", {}), "degree": n.literal(1)})
    target = n.union("numeric", {"series": n.channel(rid, "line")})
    return n.union("curveV2", {"target": target, "fitRange": fit_range, "curveToFit": curve})


async def test_a_streamed_curve_fit_equals_the_polled_fit_at_each_chunk(live_server: ServerProcess) -> None:
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 120) * NANOS
    line = [(t0 + i * NANOS // 10, 2.0 + 0.5 * (i / 10)) for i in range(60)]  # y = 2 + 0.5 t, 10 Hz
    node = line_fit(rid, t0)
    client = await WireClient.connect(live_server.ws_url)
    try:
        sub_id = new_id()
        await client.subscribe(
            {sub_id: {**subscription(node, {}, WINDOW_S), "sparkwire": {"streamPolled": True}}}
        )
        assert (await client.creation(sub_id))["type"] == "success"
        async with httpx.AsyncClient(base_url=live_server.base_url, timeout=60) as http:
            for k in range(3):
                await write_points(
                    live_server.base_url, rid, "line", line[k * 20 : (k + 1) * 20], client=http
                )
                held = line[: (k + 1) * 20]
                fit: Json = {}
                while fit.get("sampleCount") != len(held):  # no fit (NaN, 0 samples) before the first
                    update = await client.update(sub_id, timeout=120)
                    assert update["type"] == "full", update  # a fit has no append form
                    fit = update["full"]["result"]["curveFitV2"]
                start, end = t0 - 60 * NANOS, held[-1][0] + 1
                body = request_body(node, start, end)
                answer = await http.post("/compute/v2/compute", json=body, headers={"Authorization": TOKEN})
                assert answer.status_code == 200, answer.text
                assert fit == answer.json()["curveFitV2"], (
                    f"chunk {k}: the streamed fit differs from the polled one"
                )
                assert fit["curveResultDetails"]["polynomial"]["a"] == pytest.approx([2.0, 0.5], rel=1e-9)
                assert fit["r2"] == pytest.approx(1.0, abs=1e-12)
    finally:
        await client.close()


def fit_over(count: int) -> Callable[[View], bool]:
    return lambda view: [r["sampleCount"] for r in view.rows()] == [count]


async def test_the_client_reads_a_streamed_fit_of_a_line(live_server: ServerProcess) -> None:
    """y = 2 + 0.5 t (t in seconds since the first point, Nominal's time variable), written in two
    chunks: the client's single row is a first-degree polynomial of exactly those coefficients, an
    exact fit (r2 1, no error), over every point written so far."""
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 120) * NANOS
    line = [(t0 + i * NANOS // 10, 2.0 + 0.5 * (i / 10)) for i in range(40)]
    node = curve_fit(numeric_channel(rid, "line"), t0 - 60 * NANOS, t0 + 3600 * NANOS, degree=1)
    async with Client(live_server.base_url, extensions=False, explain_empty=False) as client:
        sub = await client.subscribe(node, WINDOW_S, stream_polled=True)
        async with httpx.AsyncClient(base_url=live_server.base_url, timeout=60) as http:
            for k in range(2):
                await write_points(
                    live_server.base_url, rid, "line", line[k * 20 : (k + 1) * 20], client=http
                )
                count = (k + 1) * 20
                view = await settled(sub, fit_over(count), f"chunk {k}: fit")
                (row,) = view.rows()
                assert view.kind == "curveFitV2" and row["curve"] == "polynomial"
                assert row["coefficients"] == pytest.approx([2.0, 0.5], rel=1e-9)
                assert row["r2"] == pytest.approx(1.0, abs=1e-12)
                for error in ("mae", "mse", "rmse", "maxAbsoluteError"):
                    assert row[error] == pytest.approx(0.0, abs=1e-9), error


async def test_without_the_option_they_keep_nominals_refusal(live_server: ServerProcess) -> None:
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    client = await WireClient.connect(live_server.ws_url)
    try:
        refused = (
            ("SIGNAL_FILTER", low_pass(rid)),
            ("FREQUENCY_DOMAIN", spectrum(rid)),
            ("CURVE_FITTING", line_fit(rid, time.time_ns())),
        )
        for kind, node in refused:
            sub_id = new_id()
            await client.subscribe({sub_id: subscription(node, {}, WINDOW_S)})
            creation = await client.creation(sub_id)
            assert creation["type"] == "error", creation
            error = creation["error"]["serializableError"]
            assert error["name"] == "PersistentCompute:PollingOnlyComputation"
            assert error["params"]["pollingOnlyTypes"] == kind
    finally:
        await client.close()


async def test_the_option_streams_only_what_it_keeps_exact(live_server: ServerProcess) -> None:
    """The truncate summarization strategy (the first points of a period, by position) is not
    streamed: under the option too it is refused with Nominal's type."""
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    strategy = n.union("truncate", {"type": "maxPointsToReturn", "maxPointsToReturn": 100})
    node = n.union(
        "series", {"input": n.numeric_series(n.channel(rid, "wave")), "summarizationStrategy": strategy}
    )
    client = await WireClient.connect(live_server.ws_url)
    try:
        sub_id = new_id()
        await client.subscribe(
            {sub_id: {**subscription(node, {}, WINDOW_S), "sparkwire": {"streamPolled": True}}}
        )
        creation = await client.creation(sub_id)
        assert creation["type"] == "error", creation
        error = creation["error"]["serializableError"]
        assert error["name"] == "PersistentCompute:PollingOnlyComputation"
        assert error["params"]["pollingOnlyTypes"] == "TRUNCATE_SUMMARIZATION_STRATEGY"
    finally:
        await client.close()


def array_element(rid: str) -> Json:
    select = {"input": n.channel(rid, "vector"), "index": n.literal(2)}
    return n.series(n.numeric_series(n.union("select1dArrayIndex", select)), buckets=10_000)


def struct_field(rid: str) -> Json:
    extract = {"input": n.channel(rid, "state"), "fieldPath": [n.literal("engine.temp")]}
    return n.series(n.numeric_series(n.union("extractFromStruct", extract)), buckets=10_000)


async def test_an_array_element_and_a_struct_field_stream_as_they_poll(live_server: ServerProcess) -> None:
    """Decision 0104's numeric nodes under the option: point by point, so each chunk's arrays and
    structs reach the view as an append, which merges to the ComputeService's answer and to the
    reference (arrays of varied length: the index out of bounds omits the point; a struct without
    the field, or with a string there, is filtered out)."""
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 120) * NANOS
    step = NANOS // 100
    arrays = [[float(i), i / 2, i / 4, -i][: 2 + i % 3] for i in range(60)]  # 2, 3 or 4 long
    structs = [{"engine": {"temp": 20.0 + i}} if i % 5 else {"engine": {"temp": "n/a"}} for i in range(60)]
    polled = service(live_server.base_url)
    async with Client(live_server.base_url, extensions=False, explain_empty=False) as client:
        element = await client.subscribe(raw_node(array_element(rid)), WINDOW_S, stream_polled=True)
        field = await client.subscribe(raw_node(struct_field(rid)), WINDOW_S, stream_polled=True)
        async with httpx.AsyncClient(base_url=live_server.base_url, timeout=60) as http:
            for k in range(3):
                part = range(k * 20, (k + 1) * 20)
                stamps = [t0 + i * step for i in part]
                body = {
                    "dataSourceRid": rid,
                    "batches": [
                        composite_batch(
                            "vector", "double", [(t, arrays[i]) for t, i in zip(stamps, part, strict=True)]
                        ),
                        composite_batch(
                            "state", "struct", [(t, structs[i]) for t, i in zip(stamps, part, strict=True)]
                        ),
                    ],
                }
                r = await http.post("/storage/writer/v1", json=body)
                assert r.status_code == 200, r.text
                held = range((k + 1) * 20)
                start, end = t0 - 60 * NANOS, t0 + held[-1] * step + 1
                for sub, node, want in (
                    (
                        element,
                        array_element(rid),
                        [(t0 + i * step, arrays[i][2]) for i in held if len(arrays[i]) > 2],
                    ),
                    (field, struct_field(rid), [(t0 + i * step, 20.0 + i) for i in held if i % 5]),
                ):
                    view = await settled(sub, holds(len(want)), f"chunk {k}")
                    got = present(polled.compute(TOKEN, request(node, start, end)).numeric)
                    answer = [(ns(t), float(v)) for t, v in zip(got.timestamps, got.values, strict=True)]
                    assert answer == want, f"chunk {k}: the poll differs from the reference"
                    assert points_of(view) == want, (
                        f"chunk {k}: the streamed points differ from the polled ones"
                    )
                    assert sub.version >= k + 1
    # their enum forms are not streamed: a label numbering read point by point depends on history
    client = await WireClient.connect(live_server.ws_url)
    try:
        node = n.series(
            n.enum_series(
                n.union(
                    "extractFromStruct", {"input": n.channel(rid, "state"), "fieldPath": [n.literal("a")]}
                )
            )
        )
        sub_id = new_id()
        await client.subscribe(
            {sub_id: {**subscription(node, {}, WINDOW_S), "sparkwire": {"streamPolled": True}}}
        )
        creation = await client.creation(sub_id)
        assert creation["type"] == "error", creation
        assert creation["error"]["serializableError"]["params"]["pollingOnlyTypes"] == "STRUCT"
    finally:
        await client.close()
