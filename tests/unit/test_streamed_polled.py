"""`sparkwire.streamPolled` in process (decision 0082): which polling-only variants a live compile
builds under the option, that Nominal's refusal stays without it, that the option travels with the
request to the compute tier, and a live computation of a streamed low-pass: empty while the window
holds no more points than the filter's padding (where a poll refuses), then at each micro-batch the
zero-phase Butterworth filter nominal-api describes ("bidirectional Butterworth filters, with
fixed-size padding based on SciPy output": scipy.signal.butter in sections and sosfiltfilt) of
every point held, with their timestamps. cpsd, nyquist and bode of two series written apart: at each
batch the poll over the window when the two hold as many points, the poll over the pairs both hold
when they do not (a poll of the window then refused)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
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


def nyquist() -> Json:
    body = {"input": n.channel(RID, "x"), "output": n.channel(RID, "y")}
    return n.union("frequencyV2", n.union("nyquist", body))


def bode() -> Json:
    body = {"input": n.channel(RID, "x"), "output": n.channel(RID, "y")}
    return n.union("frequencyV2", n.union("bode", body))


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


def truncate_strategy() -> Json:
    strategy = n.union("truncate", {"type": "maxPointsToReturn", "maxPointsToReturn": 10})
    return n.union(
        "series", {"input": n.numeric_series(n.channel(RID, "x")), "summarizationStrategy": strategy}
    )


def compile_live(node: Json, streamed: bool) -> Any:
    return compile_plan(node, 3600 * S, {}, Limits(), ResultOptions(), streamed=streamed)


@pytest.mark.parametrize(
    "make, kind",
    [
        (low_pass, "SIGNAL_FILTER"),
        (fft, "FREQUENCY_DOMAIN"),
        (lttb, "LARGEST_TRIANGLE_THREE_BUCKETS_SERIES"),
        (lttb_strategy, "LTTB_SUMMARIZATION_STRATEGY"),
        (spectrogram, "FREQUENCY_DOMAIN"),
        (cpsd, "FREQUENCY_DOMAIN"),
        (nyquist, "FREQUENCY_DOMAIN"),
        (bode, "FREQUENCY_DOMAIN"),
    ],
)
def test_streamed_only_when_asked(make: Any, kind: str) -> None:
    with pytest.raises(ComputeError) as err:
        compile_live(make(), streamed=False)
    assert err.value.name == "PollingOnlyComputation" and err.value.params["pollingOnlyTypes"] == kind
    compile_live(make(), streamed=True)  # built


@pytest.mark.parametrize(
    "make, kind",
    [(truncate_strategy, "TRUNCATE_SUMMARIZATION_STRATEGY")],
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


# -- cpsd, nyquist, bode: the poll once the two counts agree, the complete pairs between -----------
def _polled_pair(
    node: Json, window: int, end: int, t: np.ndarray, x: np.ndarray, y: np.ndarray, hy: int
) -> Any:
    """What the ComputeService answers for `node` over [end - window, end) when x holds the points
    written and y its first `hy` of them."""
    from compute.evaluation.polled import evaluate_period

    plan = compile_plan(node, window, {}, Limits(), ResultOptions(), polled=True)
    known = [SeriesInfo(i, SeriesKey.of(RID, name, {}), SeriesKind.NUMERIC) for i, name in enumerate("xy")]

    def read(ids: list[int], lo: int, hi: int) -> dict[int, Rows]:
        out = {}
        for i, (values, written) in enumerate(((x, len(t)), (y, hy))):
            keep = (t[:written] >= lo) & (t[:written] <= hi)
            out[i] = Rows(
                np.arange(1, int(keep.sum()) + 1, dtype=np.int64), t[:written][keep], values[:written][keep]
            )
        return {i: out[i] for i in ids}

    return evaluate_period(plan, known, read, end)


@pytest.mark.parametrize("make", [cpsd, nyquist, bode])
def test_a_streamed_two_series_transform_is_the_poll_once_counts_agree_and_the_complete_pairs_between(
    make: Any,
) -> None:
    """A 1 s window of x (10 Hz of amplitude 1 and 60 Hz of 0.5, 200 Hz) and y = 2 x at the same
    instants, written apart, the output sometimes behind the input, until points leave the window's
    start. Whenever the window holds as many points of each, the frame is, float for float, the poll
    over the same points; while it does not, a poll of that period is refused (InvalidComputation,
    `variant` the transform) and the frame is the poll over the pairs both hold (y's points and x's
    at the same instants)."""
    from app.protocol import frames

    window, step, t0 = S, S // int(FS), 1_700_000_000 * S
    count = 330
    k = np.arange(count)
    t = t0 + k * step
    x = np.sin(2 * math.pi * 10 * k / FS) + 0.5 * np.sin(2 * math.pi * 60 * k / FS)
    y = 2.0 * x
    node = make()
    kind = node["frequencyV2"]["type"]
    plan = compile_plan(node, window, {}, Limits(), ResultOptions(), streamed=True)
    c = Computation("streamed", plan, allowed_lateness_ns=None)
    for sid, name in enumerate("xy"):
        c.route(SeriesInfo(sid, SeriesKey.of(RID, name, {}), SeriesKind.NUMERIC))
    seq = iter(range(1, 10 * count))

    def rows(sid: int, lo: int, hi: int) -> Rows:
        return Rows(np.array([next(seq) for _ in range(lo, hi)], np.int64), t[lo:hi], (x, y)[sid][lo:hi])

    c.backfill_seq = 40
    c.load_backfill({0: rows(0, 0, 20), 1: rows(1, 0, 20)}, t[19] + step)
    written = [20, 20]
    unequal = 0
    # (series, points): y behind x by 80, then 40, then caught up, three times; past 200 points
    # the window slides
    for sid, size in ((0, 80), (1, 40), (1, 40), (0, 130), (1, 70), (1, 60), (0, 100), (1, 50), (1, 50)):
        lo = written[sid]
        now = t[max(written[0], lo + size) - 1] + step
        c.apply_batch({sid: rows(sid, lo, lo + size)}, now)
        written[sid] += size
        hx, hy = written
        (live,) = c.snapshot(None).values()
        assert type(live).__name__ == ("FrequencyComplex" if kind == "nyquist" else "FrequencyMagnitudePhase")
        if hx != hy and (t[hy:hx] >= now - window).any():  # the window holds more of x than of y
            unequal += 1
            with pytest.raises(ComputeError) as err:
                _polled_pair(node, window, now, t[:hx], x, y, hy)
            assert err.value.name == "InvalidComputation" and err.value.params["variant"] == kind
            want = _polled_pair(node, window, now, t[:hy], x, y, hy)  # the pairs: x cut where y ends
        else:
            want = _polled_pair(node, window, now, t[:hx], x, y, hy)
        (polled,) = want.values()
        assert len(live) == len(polled) > 0
        for name in vars(polled):
            np.testing.assert_array_equal(
                getattr(live, name), getattr(polled, name), err_msg=f"{hx}, {hy}: {name}"
            )
        wire = (orjson.dumps(frames.response(o, grouped=False)) for o in ({(): live}, want))
        assert next(wire) == next(wire)  # and the same JSON on the wire
    assert unequal == 6 and written == [count, count]
    # and the transform it says: y = 2 x, so H = 2 (6.02 dB, phase 0) where x has power (10 Hz)
    (last,) = c.snapshot(None).values()
    at = int(np.argmin(np.abs(last.frequencies - 10.0)))
    assert last.frequencies[at] == pytest.approx(10.0)
    if kind == "bode":
        assert last.magnitudes[at] == pytest.approx(20 * math.log10(2.0), abs=1e-9)
        assert last.phases[at] == pytest.approx(0.0, abs=1e-9)
    if kind == "nyquist":
        assert (last.real[at], last.imaginary[at]) == pytest.approx((2.0, 0.0), abs=1e-9)


# -- curve fits: each frame the poll's fit over the window's points ---------------------------------
def _ts(t: int) -> Json:
    return n.literal({"seconds": t // S, "nanos": t % S})


def _fit_v2(curve: Json) -> Json:
    target = n.union("numeric", {"series": n.channel(RID, "y")})
    fit_range = {"startTime": _ts(1_700_000_000 * S), "endTime": _ts(1_700_001_000 * S)}
    return n.union("curveV2", {"target": target, "fitRange": fit_range, "curveToFit": curve})


def _against(kind: str, x: Json, **more: Json) -> Json:
    return _fit_v2(n.union(kind, {"independentVariable": x, **more}))


def _x() -> Json:
    return n.union("numeric", {"series": n.channel(RID, "x")})


def quadratic_in_time() -> Json:
    return _against("polynomial", n.union("time", {}), degree=n.literal(2))


def power_against_x() -> Json:
    return _against("power", _x())


def custom_against_x() -> Json:
    custom = {
        "formula": n.literal("a * exp(b * x)"),
        "variables": {"x": _x()},
        "parameters": {"a": n.literal(1.0), "b": n.literal(0.0)},
    }
    return _fit_v2(n.union("custom", custom))


def exponential_scatter_v1() -> Json:
    scatter = n.union("scatter", {"scatter": {"x": n.channel(RID, "x"), "y": n.channel(RID, "y")}})
    options = {"startTime": _ts(1_700_000_000 * S), "endTime": _ts(1_700_001_000 * S)}
    return n.union(
        "curve",
        {
            "curveFitPlotType": scatter,
            "curveFitDetails": n.union("exponential", {}),
            "curveFitOptions": options,
        },
    )


FITS = [quadratic_in_time, power_against_x, custom_against_x, exponential_scatter_v1]


@pytest.mark.parametrize("make", FITS)
def test_a_curve_fit_streams_only_when_asked(make: Any) -> None:
    with pytest.raises(ComputeError) as err:
        compile_live(make(), streamed=False)
    assert (
        err.value.name == "PollingOnlyComputation" and err.value.params["pollingOnlyTypes"] == "CURVE_FITTING"
    )
    compile_live(make(), streamed=True)  # built


def _polled_fit(node: Json, window: int, end: int, x: np.ndarray, y: np.ndarray, t: np.ndarray) -> Any:
    """What the ComputeService answers for `node` over [end - window, end) of the points (t, x), (t, y)."""
    from compute.evaluation.polled import evaluate_period

    plan = compile_plan(node, window, {}, Limits(), ResultOptions(), polled=True)
    known = [SeriesInfo(i, SeriesKey.of(RID, name, {}), SeriesKind.NUMERIC) for i, name in enumerate("xy")]

    def read(ids: list[int], lo: int, hi: int) -> dict[int, Rows]:
        keep = (t >= lo) & (t <= hi)
        columns = (x, y)
        return {
            i: Rows(np.arange(1, int(keep.sum()) + 1, dtype=np.int64), t[keep], columns[i][keep]) for i in ids
        }

    return evaluate_period(plan, known, read, end)


@pytest.mark.parametrize("make", FITS)
def test_a_streamed_curve_fit_is_the_polled_fit_over_the_window_at_each_batch(make: Any) -> None:
    """A 3 s window of points every 100 ms: no fit (NaN, no sample) while the window holds too few
    points, where a poll refuses; then at each batch, as points arrive and (past 30) leave the
    window's start, the frame of the fit equals, float for float, the poll over the same period."""
    from app.protocol import frames
    from compute.evaluation.curve_fit_results import CurveFitOutput

    window, step, t0 = 3 * S, 100 * MS, 1_700_000_000 * S
    count = 100
    i = np.arange(count)
    t = t0 + i * step
    x = 1.0 + 0.05 * i
    y = 3.0 * np.exp(-0.2 * x) * (1.0 + 0.01 * np.sin(7.0 * i))  # an exponential, slightly off
    node = make()
    plan = compile_plan(node, window, {}, Limits(), ResultOptions(), streamed=True)
    c = Computation("streamed", plan, allowed_lateness_ns=None)
    for sid, name in enumerate("xy"):
        c.route(SeriesInfo(sid, SeriesKey.of(RID, name, {}), SeriesKind.NUMERIC))

    def rows(lo: int, hi: int) -> dict[int, Rows]:
        seq = np.arange(lo, hi, dtype=np.int64) + 1
        return {0: Rows(2 * seq - 1, t[lo:hi], x[lo:hi]), 1: Rows(2 * seq, t[lo:hi], y[lo:hi])}

    c.backfill_seq = 2
    c.load_backfill(rows(0, 1), t[0] + step)
    (first,) = c.snapshot(None).values()
    assert isinstance(first, CurveFitOutput) and first.sample_count == 0
    assert all(math.isnan(v) for v in (first.r2, first.rmse, *first.coefficients, *first.parameters.values()))
    with pytest.raises(ComputeError) as err:
        _polled_fit(node, window, t[0] + step, x, y, t)
    assert err.value.name == "InvalidComputation"
    held, fitted = 1, 0
    for size in (1, 3, 10, 25, 40, 20):  # 2, 5, 15, 40 (10 left), 80, 100 points written
        now = t[held + size - 1] + step
        c.apply_batch(rows(held, held + size), now)
        held += size
        live = c.snapshot(None)
        if live[()].sample_count == 0:  # 2 points: too few for the quadratic's 3 coefficients
            assert held == 2 and math.isnan(live[()].r2)
            with pytest.raises(ComputeError):
                _polled_fit(node, window, now, x, y, t)
            continue
        want = _polled_fit(node, window, now, x, y, t)
        assert live == want
        assert frames.response(live, grouped=False) == frames.response(want, grouped=False)
        fitted = live[()].sample_count
        assert fitted == min(held, 30)  # the window's points, the oldest gone once it is full
    # and it is the fit it says, over the last 3 s (x from 3.5 to 4.95) of y = 3 e^(-0.2 x) off by 1%
    (last,) = c.snapshot(None).values()
    assert fitted == 30 and last.r2 > 0.9
    if last.curve == "exponential":  # a, b of y = a e^(b x)
        assert last.coefficients == pytest.approx((3.0, -0.2), rel=0.05)
    if last.curve == "custom":  # the same curve, a * exp(b * x), by least squares from a = 1, b = 0
        assert last.converged and (last.parameters["a"], last.parameters["b"]) == pytest.approx(
            (3.0, -0.2), rel=0.05
        )
