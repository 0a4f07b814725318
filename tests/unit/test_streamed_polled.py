"""`sparkwire.streamPolled` in process (decision 0082): which polling-only variants a live compile
builds under the option, that Nominal's refusal stays without it, that the option travels with the
request to the compute tier, and a live computation of a streamed low-pass: empty while the window
holds no more points than the filter's padding (where a poll refuses), then at each micro-batch the
zero-phase Butterworth filter nominal-api describes ("bidirectional Butterworth filters, with
fixed-size padding based on SciPy output": scipy.signal.butter in sections and sosfiltfilt) of
every point held, with their timestamps."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import signal

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.evaluation.errors import ComputeError
from compute.evaluation.request import ComputationRequest
from compute.evaluation.results import NumericPoints
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests import node_json as n

pytestmark = pytest.mark.unit

S = 1_000_000_000
MS = 1_000_000
RID = "ri.sparkwire.test.dataset.streamed"
Json = dict[str, Any]
FS = 200.0


def low_pass(order: int = 4, cutoff: float = 30.0) -> Json:
    node = n.union(
        "signalFilter",
        {
            "input": n.channel(RID, "x"),
            "signalFilterConfiguration": n.union("lowPass", {"cutoffFrequency": n.literal(cutoff)}),
            "order": n.literal(order),
        },
    )
    return n.series(n.numeric_series(node), buckets=10_000)


def fft() -> Json:
    return n.union("frequency", n.union("fft", {"input": n.channel(RID, "x")}))


def cpsd() -> Json:
    return n.union("frequencyV2", n.union("cpsd", {"x": n.channel(RID, "x"), "y": n.channel(RID, "y")}))


def spectrogram() -> Json:
    return n.union("spectrogram", {"input": n.channel(RID, "x")})


def lttb() -> Json:
    node = n.union(
        "largestTriangleThreeBuckets", {"input": n.channel(RID, "x"), "maxPointsToReturn": n.literal(10)}
    )
    return n.series(n.numeric_series(node))


def lttb_strategy() -> Json:
    strategy = n.union("largestTriangleThreeBuckets", {"maxPointsPerGroup": 10})
    return n.union(
        "series", {"input": n.numeric_series(n.channel(RID, "x")), "summarizationStrategy": strategy}
    )


def compile_live(node: Json, streamed: bool) -> Any:
    return compile_plan(node, 3600 * S, {}, Limits(), ResultOptions(), streamed=streamed)


@pytest.mark.parametrize(
    "make, kind",
    [(low_pass, "SIGNAL_FILTER"), (fft, "FREQUENCY_DOMAIN"), (lttb, "LARGEST_TRIANGLE_THREE_BUCKETS_SERIES")],
)
def test_streamed_only_when_asked(make: Any, kind: str) -> None:
    with pytest.raises(ComputeError) as err:
        compile_live(make(), streamed=False)
    assert err.value.name == "PollingOnlyComputation" and err.value.params["pollingOnlyTypes"] == kind
    compile_live(make(), streamed=True)  # built


@pytest.mark.parametrize(
    "make, kind",
    [
        (cpsd, "FREQUENCY_DOMAIN"),
        (spectrogram, "FREQUENCY_DOMAIN"),
        (lttb_strategy, "LTTB_SUMMARIZATION_STRATEGY"),
    ],
)
def test_what_is_not_streamed_keeps_the_refusal_under_the_option(make: Any, kind: str) -> None:
    with pytest.raises(ComputeError) as err:
        compile_live(make(), streamed=True)
    assert err.value.name == "PollingOnlyComputation" and err.value.params["pollingOnlyTypes"] == kind
    compile_plan(make(), 3600 * S, {}, Limits(), ResultOptions(), polled=True)  # a poll still builds it


def test_the_option_travels_with_the_request_and_keys_its_own_computation() -> None:
    asked = ComputationRequest(low_pass(), 3600 * S, {}, None, stream_polled=True)
    plain = ComputationRequest(low_pass(), 3600 * S, {}, None)
    assert asked.key != plain.key
    again = ComputationRequest.from_json(asked.to_json())
    assert again == asked and again.stream_polled
    assert ComputationRequest.from_json(plain.to_json()) == plain
    again.compile(Limits())  # the compute tier compiles it as the edge did
    with pytest.raises(ComputeError):
        plain.compile(Limits())


def _rows(values: np.ndarray, first: int, t0: int) -> dict[int, Rows]:
    i = np.arange(first, first + len(values), dtype=np.int64)
    return {0: Rows(i + 1, t0 + i * (S // int(FS)), values)}


def test_a_live_low_pass_is_empty_until_it_can_filter_then_the_zero_phase_filter_of_every_point() -> None:
    plan = compile_live(low_pass(), streamed=True)
    c = Computation("streamed", plan, allowed_lateness_ns=None)
    c.route(SeriesInfo(0, SeriesKey.of(RID, "x", {}), SeriesKind.NUMERIC))
    t0 = 1_700_000_000 * S
    k = np.arange(1000)
    x = np.sin(2 * math.pi * 10 * k / FS) + 0.5 * np.sin(2 * math.pi * 60 * k / FS)
    sos = signal.butter(4, 30.0, btype="lowpass", fs=FS, output="sos")
    c.backfill_seq = 5
    c.load_backfill(_rows(x[:5], 0, t0), t0 + 5 * S // int(FS))
    out = c.snapshot(None)[()]
    assert isinstance(out, NumericPoints) and len(out) == 0  # 5 points: fewer than the padding (27)
    held = 5
    for size in (10, 20, 300, 665):  # 15 points (still too few), 35, 335, 1000
        c.apply_batch(_rows(x[held : held + size], held, t0), t0 + (held + size) * S // int(FS))
        held += size
        out = c.snapshot(None)[()]
        assert isinstance(out, NumericPoints)
        if held <= 27:
            assert len(out) == 0
            continue
        want = signal.sosfiltfilt(sos, x[:held])
        assert out.ts.tolist() == (t0 + k[:held] * (S // int(FS))).tolist()
        np.testing.assert_array_equal(out.values, want)
    # and the filter does what it says: 10 Hz passes (gain ~1), 60 Hz is gone (gain 1e-4)
    middle = slice(200, 800)
    residual = out.values[middle] - np.sin(2 * math.pi * 10 * k[middle] / FS)
    assert np.max(np.abs(residual)) < 1e-3


@pytest.mark.parametrize("v2, bucketed", [(False, False), (True, False), (True, True)])
def test_a_streamed_spectrum_reaches_an_edge_as_the_compute_tier_holds_it(v2: bool, bucketed: bool) -> None:
    """The compute tier sends an edge each computation's outputs (compute/evaluation/deltas.py);
    a streamed spectrum's must arrive whole and equal, at each batch."""
    from compute.evaluation import deltas

    body: Json = {"input": n.channel(RID, "x")}
    if bucketed:
        body["summarizationStrategy"] = n.union("buckets", {"buckets": 10})
    node = n.union("frequencyV2" if v2 else "frequency", n.union("fft", body))
    plan = compile_live(node, streamed=True)
    c = Computation("streamed", plan, allowed_lateness_ns=None)
    c.route(SeriesInfo(0, SeriesKey.of(RID, "x", {}), SeriesKind.NUMERIC))
    t0 = 1_700_000_000 * S
    x = np.sin(2 * math.pi * 10 * np.arange(400) / FS)
    c.backfill_seq = 200
    c.load_backfill(_rows(x[:200], 0, t0), t0 + 200 * S // int(FS))
    edge = deltas.apply({}, deltas.whole(c.snapshot(None)))
    before = c.snapshot(None)
    c.apply_batch(_rows(x[200:], 200, t0), t0 + 400 * S // int(FS))
    after = c.snapshot(None)
    edge = deltas.apply(edge, deltas.diff(before, after))
    (got,) = edge.values()
    (want,) = after.values()
    assert type(got) is type(want) and want.kind in (
        "frequencyDomain",
        "frequencyDomainV2",
        "bucketedFrequencyDomain",
    )
    for name in vars(want):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    assert len(want) == (10 if bucketed else 201)
