"""The client's newer builders against a real server: an if/else, an expression, a range node, enum
nodes and a node built with nominal-api's own classes (`raw_node`), subscribed through the client
and checked against values worked out here from the points written."""

from __future__ import annotations

import math
import statistics
import time

import pytest
from nominal_api import scout_compute_api as sc

from sparkwire_client import Client, Writer, expression, if_else, numeric_channel, raw_node, series
from sparkwire_client import nodes as n
from sparkwire_client import range_nodes as r
from tests.conftest import ServerProcess
from tests.reference import bucket_width, reference_buckets
from tests.wire import NANOS

WINDOW_S = 3600.0
VALUES = [1.0, 2.0, 6.0, 7.0, 8.0, 9.0, 3.0, 6.0, 2.0, 1.0]


async def test_new_builders_compute_what_their_nodes_mean(server: ServerProcess) -> None:
    rid = f"ri.test.builders.{time.time_ns()}"
    base = (time.time_ns() - 300 * NANOS) // NANOS * NANOS
    stamps = [base + i * NANOS for i in range(len(VALUES))]
    async with Writer(server.base_url, rid) as writer:
        for t, v in zip(stamps, VALUES, strict=True):
            writer.add("temp", t, v)
    temp = numeric_channel(rid, "temp")
    (name,) = temp.variables

    # an offset of 10 built with nominal-api's classes, sent as is
    offset = sc.NumericSeries(
        offset=sc.OffsetSeries(
            input=sc.NumericSeries(raw=sc.Reference(name=name)), scalar=sc.DoubleConstant(literal=10.0)
        )
    )
    nominal_node = sc.ComputableNode(
        series=sc.SummarizeSeries(input=sc.Series(numeric=offset), numeric_aggregations={})
    )

    async with Client(server.base_url) as client:
        subs = {
            "if_else": await client.subscribe(series(if_else(temp.gt(5), temp, 0)), window=WINDOW_S),
            "expression": await client.subscribe(
                series(expression("sin(x) * 2 + 1", {"x": temp})), window=WINDOW_S
            ),
            "held": await client.subscribe(n.ranges(r.held_for(temp.above(5), 2)), window=WINDOW_S),
            "labels": await client.subscribe(
                series(r.value_map(temp, [(None, 5, "low"), (5, None, "high")])), window=WINDOW_S
            ),
            "labels_back": await client.subscribe(
                series(
                    n.enum_to_numeric(r.value_map(temp, [(None, 5, "low"), (5, None, "high")]), {"high": 1})
                ),
                window=WINDOW_S,
            ),
            "newest": await client.subscribe(series(temp.newest_points(3)), window=WINDOW_S),
            "nominal_api": await client.subscribe(raw_node(nominal_node, temp.variables), window=WINDOW_S),
            "fields_v2": await client.subscribe(
                series(temp, buckets=4, arrow="ARROW_V4", fields_v2=["SUM", ("median", 0.5)]), window=WINDOW_S
            ),
        }
        views = {k: await s.wait_for(lambda v: v.updates >= 1, timeout=120) for k, s in subs.items()}

    def points(key: str) -> list[tuple[int, object]]:
        return list(zip(views[key].timestamps, views[key].values, strict=True))

    assert points("if_else") == [(t, v if v > 5 else 0.0) for t, v in zip(stamps, VALUES, strict=True)]
    got = points("expression")
    assert [t for t, _ in got] == stamps
    for (_, value), v in zip(got, VALUES, strict=True):
        assert value == pytest.approx(math.sin(v) * 2 + 1, rel=1e-12)
    # above 5 from the third point to the seventh (4 s), and from the eighth to the ninth (1 s):
    # only the first lasts more than 2 s
    assert views["held"].rows() == [{"start": stamps[2], "end": stamps[6]}]
    labels = ["high" if v >= 5 else "low" for v in VALUES]
    assert points("labels") == list(zip(stamps, labels, strict=True))
    # an unmapped label without a default is dropped
    assert points("labels_back") == [(t, 1.0) for t, lab in zip(stamps, labels, strict=True) if lab == "high"]
    assert points("newest") == list(zip(stamps[-3:], VALUES[-3:], strict=True))
    assert points("nominal_api") == [(t, v + 10) for t, v in zip(stamps, VALUES, strict=True)]
    # numericOutputFieldsV2: each bucket's sum and median (a percentile column named as asked)
    written = list(zip(stamps, VALUES, strict=True))
    ends = [end for end, _ in reference_buckets(written, bucket_width(int(WINDOW_S * NANOS), 4))]
    want = []
    for end in ends:
        inside = [v for t, v in written if t < end and not any(t < e for e in ends if e < end)]
        want.append({"timestamp": end, "sum": sum(inside), "median": statistics.median(inside)})
    assert views["fields_v2"].kind == "arrowBucketedNumeric"
    got_buckets = views["fields_v2"].rows()
    assert [r["timestamp"] for r in got_buckets] == [w["timestamp"] for w in want]
    for got_row, want_row in zip(got_buckets, want, strict=True):
        assert set(got_row) == {"timestamp", "sum", "median"}
        assert got_row["sum"] == pytest.approx(want_row["sum"], rel=1e-12)
        assert got_row["median"] == pytest.approx(want_row["median"], rel=1e-12)
