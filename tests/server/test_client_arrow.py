"""sparkwire_client asks for Nominal's Arrow output (`series(..., arrow=..., fields=...)`) and its
view decodes the `ArrowPlot` (an Arrow IPC stream) into buckets and points, over a real server:
the merged view equals the buckets computed the plain way (tests/reference.py) after live and late
points, and the raw-point form equals the points written."""

from __future__ import annotations

import asyncio
import math
import random
import time

import pytest

from sparkwire_client import Client, View, Writer, numeric_channel, series
from tests.conftest import ServerProcess
from tests.reference import bucket_width, reference_buckets
from tests.wire import NANOS

WINDOW_S = 1800.0


def unique_rid(what: str) -> str:
    return f"ri.test.client-arrow.{what}.{time.time_ns()}"


def test_fields_without_arrow_or_an_unknown_format_are_refused_by_the_builder() -> None:
    x = numeric_channel("ri.x", "p")
    with pytest.raises(ValueError, match="Arrow"):
        series(x, fields=["MEAN"])
    with pytest.raises(ValueError, match="ARROW_V3"):
        series(x, arrow="ARROW_V5")  # type: ignore[arg-type]
    body = series(x, buckets=10, arrow="ARROW_V4", fields=["MIN", "COUNT"]).json["series"]
    assert (body["outputFormat"], body["numericOutputFields"]) == ("ARROW_V4", ["MIN", "COUNT"])


@pytest.mark.timeout(600)
async def test_arrow_buckets_and_points_decode_into_the_view_and_merge_live(server: ServerProcess) -> None:
    rid = unique_rid("buckets")
    now = time.time_ns()
    rng = random.Random(11)
    written = [
        (now - 1500 * NANOS + i * 9 * NANOS + rng.randint(0, 10**9), rng.gauss(50, 8)) for i in range(150)
    ]
    async with Writer(server.base_url, rid) as writer:
        for t, v in written:
            writer.add("p", t, v)

    buckets = 15
    fields = ["MEAN", "MIN", "MAX", "COUNT", "VARIANCE", "FIRST_POINT", "LAST_POINT"]
    width = bucket_width(int(WINDOW_S * NANOS), buckets)
    async with Client(server.base_url) as client:
        sub = await client.subscribe(
            series(numeric_channel(rid, "p"), buckets=buckets, arrow="ARROW_V3", fields=fields),
            window=WINDOW_S,
            allowed_lateness=WINDOW_S,
        )
        raw = await client.subscribe(
            series(numeric_channel(rid, "p"), buckets=10_000, arrow="ARROW_V4", fields=["MEAN"]),
            window=WINDOW_S,
            allowed_lateness=WINDOW_S,
        )
        view = await sub.wait_for(lambda v: v.updates >= 1, timeout=120)
        assert view.kind == "arrowBucketedNumeric"
        async with Writer(server.base_url, rid) as writer:
            for _ in range(3):
                for t in (time.time_ns(), now - rng.randint(10, 1400) * NANOS):  # one fresh, one late
                    v = rng.gauss(50, 8)
                    written.append((t, v))
                    writer.add("p", t, v)
                await writer.flush()
                await asyncio.sleep(0.3)
        expected = reference_buckets(written, width)

        def matches(v: View) -> bool:
            got = sorted(v.result.entries.items())
            if [t for t, _ in got] != [t for t, _ in expected]:
                return False
            for (_, bucket), (_, want) in zip(got, expected, strict=True):
                if bucket["count"] != want["count"] or (bucket["first"], bucket["last"]) != (
                    want.get("first"),
                    want.get("last"),
                ):
                    return False
                if not all(
                    math.isclose(bucket[f], want[f], rel_tol=1e-9, abs_tol=1e-9)
                    for f in ("min", "max", "mean", "variance")
                ):
                    return False
            return True

        view = await sub.wait_for(matches, timeout=120)
        assert view.updates > 1, "the view caught up through AppendResults"
        rows = view.rows()
        assert set(rows[0]) == {"timestamp", "mean", "min", "max", "count", "variance"}

        points = await raw.wait_for(
            lambda v: sorted(zip(v.timestamps, v.values, strict=True)) == sorted(written), timeout=120
        )
        assert points.kind == "arrowNumeric"
