"""Nominal's ComputeService over HTTP (app/api/compute_service.py) on a real server with a tokens
file: a 1 kHz sine and a 100 Hz ramp written, then read back through nominal-api's generated
`ComputeService` client (Conjure JSON over requests) and through the `nominal` SDK's own calls
(`compute_buckets`, `batch_compute_buckets`, `channel_to_dataframe_decimated`, run from
`.venv-nominal`). Values are checked against references computed from the written points with the
rules docs/protocol.md states (epoch-aligned buckets of ceil(window / buckets) rounded up to whole
milliseconds, each stamped with its exclusive end; a threshold's range from the first point meeting
it to the first point that does not, open at the end); refusals by their Conjure names
(docs/decisions/0078-compute-service.md)."""

from __future__ import annotations

import json
import math
import subprocess
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from conjure_python_client import (
    ConjureDecoder,
    ConjureEncoder,
    ConjureHTTPError,
    RequestsClient,
    ServiceConfiguration,
)
from nominal_api import scout_compute_api as sc

from tests import node_json as n
from tests.conftest import ROOT, ServerProcess, start_secured_server
from tests.wire import NANOS, write_points

NOMINAL_PYTHON = ROOT / ".venv-nominal" / "bin" / "python"
MS = 1_000_000
Json = dict[str, Any]
TOKEN = "Bearer all-token"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with a tokens file; the embedded log is read by this process, so no Spark is waited for."""
    base = tmp_path_factory.mktemp("compute-service")
    entries: list[dict[str, object]] = [
        {"token": "all-token", "sub": "all", "dataSourceRids": ["*"]},
        {"token": "other-token", "sub": "other", "dataSourceRids": ["ri.other.*"]},
    ]
    proc = start_secured_server(base, entries)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
async def written(secured: ServerProcess) -> Json:
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 600) * NANOS  # a whole second: bucket edges fall on it
    wave = [(t0 + i * MS, 10.0 * math.sin(2 * math.pi * i / 4000)) for i in range(20_000)]
    ramp = [(t0 + i * 10 * MS, 0.5 * i) for i in range(2000)]
    async with httpx.AsyncClient(
        base_url=secured.base_url, headers={"Authorization": TOKEN}, timeout=120
    ) as c:
        for k in range(0, len(wave), 5000):
            await write_points(secured.base_url, rid, "wave", wave[k : k + 5000], client=c)
        await write_points(secured.base_url, rid, "ramp", ramp, client=c)
    return {"rid": rid, "t0": t0, "wave": wave, "ramp": ramp}


def service(base_url: str) -> sc.ComputeService:
    return RequestsClient.create(
        sc.ComputeService, "sparkwire-tests", ServiceConfiguration(uris=[base_url], max_num_retries=0)
    )


def channel(rid: str, name: str) -> Json:
    return n.channel(rid, name)


def array_plot(rid: str) -> Json:
    """A node Nominal computes only when polled and Sparkwire refuses either way: an array series
    itself (live: PollingOnlyComputation ARRAY; polled: InvalidComputation, no arrow array plot)."""
    return n.series(n.union("array", n.union("numeric1d", channel(rid, "wave"))))


def request_body(node: Json, start: int, end: int) -> Json:
    """A ComputeNodeRequest as JSON: `node` over start <= ts < end, no variables."""
    return {
        "node": node,
        "start": {"seconds": start // NANOS, "nanos": start % NANOS},
        "end": {"seconds": end // NANOS, "nanos": end % NANOS},
        "context": {"variables": {}, "datasetReferences": {}},
    }


def request(node: Json, start: int, end: int) -> sc.ComputeNodeRequest:
    decoded: sc.ComputeNodeRequest = ConjureDecoder().decode(
        request_body(node, start, end), sc.ComputeNodeRequest
    )
    return decoded


def present(x: Any) -> Any:
    """An optional field of nominal-api's types that must be there."""
    assert x is not None
    return x


def ns(t: Any) -> int:
    return int(t.seconds) * NANOS + int(t.nanos)


def reference_buckets(points: list[tuple[int, float]], start: int, end: int, buckets: int) -> list[Json]:
    """docs/protocol.md's decimation: width ceil((end - start) / buckets) rounded up to whole ms,
    edges at multiples of it since the epoch, each bucket stamped with its exclusive end."""
    width = max(MS, math.ceil(math.ceil((end - start) / buckets) / MS) * MS)
    ts = np.array([t for t, _ in points if start <= t < end])
    vs = np.array([v for t, v in points if start <= t < end])
    out = []
    for edge in np.unique(ts // width):
        inside = vs[ts // width == edge]
        out.append(
            {
                "end": int((edge + 1) * width),
                "count": len(inside),
                "min": float(inside.min()),
                "max": float(inside.max()),
                "mean": float(inside.mean()),
            }
        )
    return out


def reference_ranges(points: list[tuple[int, float]], start: int, end: int, above: float) -> list[Json]:
    """A threshold's ranges: from the first point above it to the first point not, open at the end."""
    out: list[Json] = []
    began: int | None = None
    for t, v in points:
        if not start <= t < end:
            continue
        if v > above and began is None:
            began = t
        elif v <= above and began is not None:
            out.append({"start": began, "end": t})
            began = None
    if began is not None:
        out.append({"start": began, "end": None})
    return out


def buckets_of(plot: sc.BucketedNumericPlot) -> list[Json]:
    return [
        {"end": ns(t), "count": b.count, "min": b.min, "max": b.max, "mean": b.mean}
        for t, b in zip(plot.timestamps, plot.buckets, strict=True)
    ]


def assert_buckets(got: list[Json], want: list[Json]) -> None:
    assert [(g["end"], g["count"]) for g in got] == [(w["end"], w["count"]) for w in want]
    for g, w in zip(got, want, strict=True):
        assert g["min"] == w["min"] and g["max"] == w["max"]
        assert g["mean"] == pytest.approx(w["mean"], rel=1e-9, abs=1e-9)


# -- nominal-api's generated client -------------------------------------------------------------------
def test_compute_summarizes_a_period_into_buckets(secured: ServerProcess, written: Json) -> None:
    rid, t0, wave = written["rid"], written["t0"], written["wave"]
    client = service(secured.base_url)
    node = n.series(n.numeric_series(channel(rid, "wave")), buckets=100)
    whole = client.compute(TOKEN, request(node, t0, t0 + 20 * NANOS))
    assert whole.bucketed_numeric is not None
    got = buckets_of(whole.bucketed_numeric)
    assert len(got) == 100
    assert_buckets(got, reference_buckets(wave, t0, t0 + 20 * NANOS, 100))
    # a period inside the data: only its points, history before it never counted
    start, end = t0 + 5 * NANOS + 300 * MS, t0 + 13 * NANOS
    part = client.compute(TOKEN, request(node, start, end))
    assert part.bucketed_numeric is not None
    assert_buckets(buckets_of(part.bucketed_numeric), reference_buckets(wave, start, end, 100))


def test_compute_answers_raw_points_below_the_bucket_count(secured: ServerProcess, written: Json) -> None:
    rid, t0, ramp = written["rid"], written["t0"], written["ramp"]
    start, end = t0 + 2 * NANOS, t0 + 3 * NANOS  # 100 points of the 100 Hz ramp, fewer than 1,000 buckets
    got = service(secured.base_url).compute(
        TOKEN, request(n.series(n.numeric_series(channel(rid, "ramp"))), start, end)
    )
    assert got.numeric is not None
    pairs = [(ns(t), v) for t, v in zip(got.numeric.timestamps, got.numeric.values, strict=True)]
    assert pairs == [(t, v) for t, v in ramp if start <= t < end]
    # a channel nothing was written to: no points, as a subscription's first FullResult has none
    empty = service(secured.base_url).compute(
        TOKEN, request(n.series(n.numeric_series(channel(rid, "never-written"))), start, end)
    )
    assert empty.numeric is not None and empty.numeric.timestamps == []


def test_compute_threshold_ranges_of_a_period(secured: ServerProcess, written: Json) -> None:
    rid, t0, wave = written["rid"], written["t0"], written["wave"]
    node = n.ranges(n.threshold(channel(rid, "wave"), "GREATER_THAN", n.literal(5.0)))
    for start, end in ((t0, t0 + 20 * NANOS), (t0 + 2 * NANOS, t0 + 11 * NANOS)):
        got = service(secured.base_url).compute(TOKEN, request(node, start, end))
        assert got.range is not None
        ranges = [{"start": ns(r.start), "end": None if r.end is None else ns(r.end)} for r in got.range]
        want = reference_ranges(wave, start, end, 5.0)
        assert len(want) >= 2 and ranges == want


def test_compute_with_units_and_the_units_endpoints(secured: ServerProcess, written: Json) -> None:
    rid, t0, ramp = written["rid"], written["t0"], written["ramp"]
    client = service(secured.base_url)
    named = n.union("unitOverride", {"input": channel(rid, "ramp"), "unit": "m"})
    node = n.series(n.numeric_series(named))
    start, end = t0, t0 + NANOS
    answer = client.compute_with_units(TOKEN, request(node, start, end))
    assert answer.compute_unit.single is not None and answer.compute_unit.single.success == "m"
    assert answer.compute_result.numeric is not None
    assert list(answer.compute_result.numeric.values) == [v for t, v in ramp if start <= t < end]
    bare = n.series(n.numeric_series(channel(rid, "ramp")))
    units = sc.ComputeUnitsRequest(
        node=ConjureDecoder().decode(node, sc.ComputableNode),
        context=sc.Context(variables={}, dataset_references={}),
    )
    assert present(client.compute_units(TOKEN, units).single).success == "m"
    polling = array_plot(rid)  # polled or live: Sparkwire answers no array plot
    batch = client.batch_compute_units(
        TOKEN,
        sc.BatchComputeUnitsRequest(
            requests=[
                units,
                sc.ComputeUnitsRequest(
                    node=ConjureDecoder().decode(bare, sc.ComputableNode), context=units.context
                ),
                sc.ComputeUnitsRequest(
                    node=ConjureDecoder().decode(polling, sc.ComputableNode), context=units.context
                ),
            ]
        ),
    )
    first, second, third = (present(r.single) for r in batch.results)
    assert first.success == "m"
    assert second.success is None and second.no_unit_available == []
    (failure,) = present(third.no_unit_available)
    error = present(failure.error)
    assert error.name == "Compute:InvalidComputation"
    assert error.params["variant"] == "array"


def test_batch_and_parameterized_compute_answer_each_item(secured: ServerProcess, written: Json) -> None:
    rid, t0, wave, ramp = written["rid"], written["t0"], written["wave"], written["ramp"]
    client = service(secured.base_url)
    good = n.series(n.numeric_series(channel(rid, "wave")), buckets=50)
    polling = array_plot(rid)  # polled or live: Sparkwire answers no array plot
    start, end = t0, t0 + 10 * NANOS
    batch = client.batch_compute_with_units(
        TOKEN,
        sc.BatchComputeWithUnitsRequest(requests=[request(good, start, end), request(polling, start, end)]),
    )
    ok, bad = batch.results
    assert ok.compute_result.success is not None and ok.compute_result.success.bucketed_numeric is not None
    assert_buckets(
        buckets_of(ok.compute_result.success.bucketed_numeric), reference_buckets(wave, start, end, 50)
    )
    assert present(ok.unit_result.single).no_unit_available == []
    assert bad.compute_result.error is not None
    assert bad.compute_result.error.error_type == "Compute:InvalidComputation"
    assert bad.compute_result.error.code == 400
    # parameterized: a variable per input, and a time range of its own
    node = n.series(n.numeric_series(n.raw("x")))
    base = request(node, start, end)
    ranges = [(t0, t0 + NANOS), (t0 + 3 * NANOS, t0 + 4 * NANOS)]
    body = {
        "node": node,
        "start": {"seconds": start // NANOS, "nanos": 0},
        "end": {"seconds": end // NANOS, "nanos": 0},
        "context": ConjureEncoder().default(base.context),
        "parameterizedContext": {
            "parameterInputs": [
                {
                    "variables": {"x": channel(rid, name)},  # a VariableValue `channel`
                    "timeRange": {
                        "start": {"seconds": a // NANOS, "nanos": 0},
                        "end": {"seconds": b // NANOS, "nanos": 0},
                    },
                }
                for name, (a, b) in (("ramp", ranges[0]), ("ramp", ranges[1]))
            ]
            + [{"variables": {}}],
        },
    }
    answer = client.parameterized_compute(
        TOKEN, ConjureDecoder().decode(body, sc.ParameterizedComputeNodeRequest)
    )
    one, two, missing = answer.results
    for result, (a, b) in zip((one, two), ranges, strict=True):
        assert result.success is not None and result.success.numeric is not None
        assert list(result.success.numeric.values) == [v for t, v in ramp if a <= t < b]
    assert missing.error is not None and missing.error.code == 400


def test_refusals_by_name(secured: ServerProcess, written: Json) -> None:
    rid, t0 = written["rid"], written["t0"]
    client = service(secured.base_url)
    good = request(n.series(n.numeric_series(channel(rid, "wave"))), t0, t0 + NANOS)
    with pytest.raises(ConjureHTTPError) as bad_token:
        client.compute("Bearer not-a-token", good)
    assert present(bad_token.value.response).status_code == 401
    with pytest.raises(ConjureHTTPError) as other:
        client.compute("Bearer other-token", good)
    assert present(other.value.response).status_code == 403
    polling = array_plot(rid)  # polled or live: Sparkwire answers no array plot
    with pytest.raises(ConjureHTTPError) as refused:
        client.compute(TOKEN, request(polling, t0, t0 + NANOS))
    assert refused.value.error_name == "Compute:InvalidComputation"
    assert refused.value.parameters["variant"] == "array"
    # the frequency domain is computed when polled: tests/server/test_frequency_service.py
    # LTTB, page and truncate summaries are computed when polled: tests/server/test_lttb_paging.py
    # not a node at all (raw JSON: the client would not encode it)
    body = ConjureEncoder().default(good)
    body["node"] = {"type": "noSuchNode", "noSuchNode": {}}
    r = httpx.post(
        f"{secured.base_url}/compute/v2/compute", json=body, headers={"Authorization": TOKEN}, timeout=30
    )
    assert r.status_code == 400 and r.json()["errorName"] == "Default:InvalidArgument", r.text
    body["node"] = good.node and ConjureEncoder().default(good.node)
    body["end"] = {"seconds": t0 // NANOS - 1, "nanos": 0}
    r = httpx.post(
        f"{secured.base_url}/compute/v2/compute", json=body, headers={"Authorization": TOKEN}, timeout=30
    )
    assert r.status_code == 400 and "end is before start" in r.text


def test_the_endpoints_are_in_openapi(secured: ServerProcess) -> None:
    paths = httpx.get(f"{secured.base_url}/openapi.json").json()["paths"]
    for path in (
        "/compute/v2/compute",
        "/compute/v2/computeWithUnits",
        "/compute/v2/compute/batch",
        "/compute/v2/compute/units",
        "/compute/v2/compute/batch-units",
        "/compute/v2/compute/parameterized",
    ):
        operation = paths[path]["post"]
        assert "requestBody" in operation and "400" in operation["responses"], path


# -- the nominal SDK's own calls ----------------------------------------------------------------------
SDK_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from nominal.core import NominalClient
    from nominal.experimental.compute import batch_compute_buckets, compute_buckets
    from nominal.experimental.compute.dsl import exprs
    from nominal.thirdparty.pandas import channel_to_dataframe_decimated

    base_url, rid, start, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    client = NominalClient.from_token("all-token", base_url=base_url)
    wave = exprs.NumericExpr.datasource_channel(rid, "wave")
    ramp = exprs.NumericExpr.datasource_channel(rid, "ramp")
    def rows(buckets):
        return [[b.timestamp, b.count, b.min, b.max, b.mean] for b in buckets]
    out = {"buckets": rows(compute_buckets(client, wave, start, end, buckets=100))}
    out["batch"] = [rows(b) for b in batch_compute_buckets(client, [wave, ramp], start, end, buckets=100)]
    channels = {c.name: c for c in client.get_dataset(rid).search_channels()}
    df = channel_to_dataframe_decimated(channels["wave"], start, end, buckets=100)
    out["frame"] = [[int(t.value), int(r["count"]), r["min"], r["max"], r["mean"]] for t, r in df.iterrows()]
    print("RESULT" + json.dumps(out))
    """
)


def test_the_nominal_sdk_computes_buckets(secured: ServerProcess, written: Json, tmp_path: Path) -> None:
    assert NOMINAL_PYTHON.exists(), "the nominal SDK's environment is missing: run `make install`"
    rid, t0 = written["rid"], written["t0"]
    start, end = t0 + NANOS, t0 + 19 * NANOS
    script = tmp_path / "compute_with_nominal.py"
    script.write_text(SDK_SCRIPT)
    done = subprocess.run(
        [str(NOMINAL_PYTHON), str(script), secured.base_url, rid, str(start), str(end)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(
        next(x for x in done.stdout.splitlines() if x.startswith("RESULT")).removeprefix("RESULT")
    )

    def as_json(rows: list[list[Any]]) -> list[Json]:
        return [{"end": e, "count": c, "min": lo, "max": hi, "mean": m} for e, c, lo, hi, m in rows]

    wave_ref = reference_buckets(written["wave"], start, end, 100)
    assert_buckets(as_json(out["buckets"]), wave_ref)
    assert_buckets(as_json(out["batch"][0]), wave_ref)
    assert_buckets(as_json(out["batch"][1]), reference_buckets(written["ramp"], start, end, 100))
    assert_buckets(as_json(out["frame"]), wave_ref)


# -- on the Kafka log, read by a Spark batch job ---------------------------------------------------------
async def test_compute_on_the_kafka_log_reads_as_back_fill_does(kafka_log_server: ServerProcess) -> None:
    server, rid = kafka_log_server, f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 120) * NANOS
    wave = [(t0 + i * 5 * MS, 10.0 * math.sin(2 * math.pi * i / 400)) for i in range(4000)]
    await write_points(server.base_url, rid, "wave", wave)
    client = service(server.base_url)
    start, end = t0 + NANOS, t0 + 19 * NANOS
    got = client.compute(
        "", request(n.series(n.numeric_series(channel(rid, "wave")), buckets=90), start, end)
    )
    assert got.bucketed_numeric is not None
    assert_buckets(buckets_of(got.bucketed_numeric), reference_buckets(wave, start, end, 90))
    node = n.ranges(n.threshold(channel(rid, "wave"), "GREATER_THAN", n.literal(5.0)))
    ranges = client.compute("", request(node, start, end)).range
    assert ranges is not None
    want = reference_ranges(wave, start, end, 5.0)
    assert len(want) >= 2
    assert [{"start": ns(r.start), "end": None if r.end is None else ns(r.end)} for r in ranges] == want
