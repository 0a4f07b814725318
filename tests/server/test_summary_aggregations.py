"""`SummarizeSeries.numericAggregations` over a real server, built with nominal-api's classes: each
named extra column of every bucket (percentiles, sum, root mean square, count) equals the reference
computed here from nominal-api's docs ("additional numeric aggregations per decimation bucket",
keyed by the column's name; a percentile is "the value at the specified percentile", p in [0, 1],
between two ranks interpolated linearly), in LEGACY (`NumericBucket.aggregations`) and in Arrow
(one float64 column per name after the fields' columns), after live and late points, and equal to
a fresh FullResult."""

from __future__ import annotations

import asyncio
import math
import random
import time
from typing import Any

import pytest
from conjure_python_client import ConjureEncoder
from nominal_api import scout_compute_api as sc

from tests.client_view import ResultView
from tests.conftest import ServerProcess
from tests.reference import bucket_width
from tests.wire import NANOS, Client, channel_variable, subscription, write_points

WINDOW_S = 1200.0
WINDOW_NS = int(WINDOW_S * NANOS)
BUCKETS = 8


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between the closest ranks of the sorted values (rank p * (n - 1))."""
    s = sorted(values)
    rank = p * (len(s) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(s) - 1)
    return s[low] + (s[high] - s[low]) * (rank - low)


REFERENCE = {
    "p50": lambda v: percentile(v, 0.5),
    "p90": lambda v: percentile(v, 0.9),
    "p0": lambda v: percentile(v, 0.0),
    "total": sum,
    "rms": lambda v: math.sqrt(sum(x * x for x in v) / len(v)),
    "n": lambda v: float(len(v)),
}


def operators() -> dict[str, sc.NumericAggregationOperator]:
    def pct(p: float) -> sc.NumericAggregationOperator:
        return sc.NumericAggregationOperator(
            percentile=sc.Percentile(percentile=sc.DoubleConstant(literal=p))
        )

    return {
        "p50": pct(0.5),
        "p90": pct(0.9),
        "p0": pct(0.0),
        "total": sc.NumericAggregationOperator(sum=sc.Summation()),
        "rms": sc.NumericAggregationOperator(root_mean_square=sc.RootMeanSquare()),
        "n": sc.NumericAggregationOperator(count=sc.Count()),
    }


def node(**fields: Any) -> dict[str, Any]:
    x = sc.NumericSeries(raw=sc.Reference(name="x"))
    fields.setdefault("numeric_aggregations", operators())
    summarize = sc.SummarizeSeries(input=sc.Series(numeric=x), buckets=BUCKETS, **fields)
    return dict(ConjureEncoder.do_encode(sc.ComputableNode(series=summarize)))


def v2_percentile(p: float, name: str | None = None) -> sc.NumericOutputFieldV2:
    literal = sc.DoubleConstant(literal=p)
    return sc.NumericOutputFieldV2(
        percentile=sc.NumericOutputPercentile(percentile=literal, output_name=name)
    )


# numericOutputFieldsV2's percentile columns: "Defaults to pXX, e.g. p95 for 0.95", or outputName
V2_REFERENCE = {
    "p90": REFERENCE["p90"],
    "q1": lambda v: percentile(v, 0.25),
    "p99.5": lambda v: percentile(v, 0.995),
}


def expected_buckets(
    points: list[tuple[int, float]], cutoff: int, reference: dict[str, Any]
) -> dict[int, dict[str, float]]:
    width = bucket_width(WINDOW_NS, BUCKETS)
    by_end: dict[int, list[float]] = {}
    for t, v in sorted(points):
        by_end.setdefault((t // width + 1) * width, []).append(v)
    return {
        end: {k: f(v) for k, f in reference.items()} for end, v in by_end.items() if end - width >= cutoff
    }


def extras(view: ResultView, cutoff: int, reference: dict[str, Any]) -> dict[int, dict[str, float]]:
    width = bucket_width(WINDOW_NS, BUCKETS)
    snapshot = view.snapshot()
    (kind, buckets) = snapshot[()]
    assert kind == "bucketedNumeric", kind
    out = {}
    for end, b in buckets:
        if end - width < cutoff:
            continue
        out[end] = dict(b["aggregations"]) if "aggregations" in b else {k: b[k] for k in reference}
    return out


def same(got: dict[int, dict[str, float]], want: dict[int, dict[str, float]]) -> bool:
    return set(got) == set(want) and all(
        set(got[e]) == set(want[e])
        and all(math.isclose(got[e][k], want[e][k], rel_tol=1e-9, abs_tol=1e-9) for k in want[e])
        for e in want
    )


@pytest.mark.timeout(600)
async def test_extra_bucket_columns_equal_the_reference_in_legacy_and_arrow(server: ServerProcess) -> None:
    rid = f"ri.test.aggregations.{time.time_ns()}"
    variables = {"x": channel_variable(rid, "x")}
    rng = random.Random(7)
    now = time.time_ns()
    points = [
        (now - 1100 * NANOS + i * 5 * NANOS + rng.randint(0, 10**9), round(rng.gauss(10, 4), 3))
        for i in range(200)
    ]
    await write_points(server.base_url, rid, "x", points)
    cases = {
        "legacy": node(),
        "arrow": node(
            output_format=sc.OutputFormat.ARROW_V3, numeric_output_fields=[sc.NumericOutputField.MEAN]
        ),
        "arrow_v2_percentiles": node(
            numeric_aggregations={},
            output_format=sc.OutputFormat.ARROW_V4,
            numeric_output_fields_v2=[
                sc.NumericOutputFieldV2(field=sc.NumericOutputFieldV2Name.MEAN),
                v2_percentile(0.9),
                v2_percentile(0.25, "q1"),
                v2_percentile(0.995),
            ],
        ),
    }
    references = {"legacy": REFERENCE, "arrow": REFERENCE, "arrow_v2_percentiles": V2_REFERENCE}
    client = await Client.connect(server.ws_url)
    try:
        ids = {k: f"agg-{k}-{time.time_ns()}" for k in cases}
        await client.subscribe(
            {ids[k]: subscription(v, variables, WINDOW_S, lateness_s=WINDOW_S) for k, v in cases.items()}
        )
        views = {}
        for k, sub_id in ids.items():
            assert (await client.creation(sub_id, timeout=120))["type"] == "success", k
            views[k] = ResultView(WINDOW_NS)
            views[k].apply(await client.update(sub_id, timeout=300))
        for _ in range(3):  # fresh and late points
            batch = [
                (time.time_ns(), round(rng.gauss(10, 4), 3)),
                (now - rng.randint(30, 1000) * NANOS, 99.5),
            ]
            await write_points(server.base_url, rid, "x", batch)
            points += batch
            await asyncio.sleep(0.4)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            for k, sub_id in ids.items():
                queue = client.updates.setdefault(sub_id, asyncio.Queue())
                while not queue.empty():
                    views[k].apply(queue.get_nowait())
            cutoff = max(v.applied_at for v in views.values()) - WINDOW_NS + 60 * NANOS
            want = {k: expected_buckets(points, cutoff, references[k]) for k in cases}
            if all(same(extras(v, cutoff, references[k]), want[k]) for k, v in views.items()):
                break
            await asyncio.sleep(1.0)
        for k, view in views.items():
            assert same(extras(view, cutoff, references[k]), want[k]), (
                k,
                extras(view, cutoff, references[k]),
            )
            assert view.appends, f"{k}: no AppendResult"
        assert views["arrow"].groups[()].kind == "arrowBucketedNumeric"

        fresh_ids = {k: f"fresh-{k}-{time.time_ns()}" for k in cases}
        extra_vars = {**variables, "unused": channel_variable(rid, "unused")}
        await client.subscribe(
            {
                fresh_ids[k]: subscription(v, extra_vars, WINDOW_S, lateness_s=WINDOW_S)
                for k, v in cases.items()
            }
        )
        for k, sub_id in fresh_ids.items():
            assert (await client.creation(sub_id, timeout=120))["type"] == "success"
            fresh = ResultView(WINDOW_NS)
            fresh.apply(await client.update(sub_id, timeout=300))
            assert same(extras(fresh, cutoff, references[k]), want[k]), (k, "fresh")
    finally:
        await client.close()
