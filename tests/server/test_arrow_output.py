"""`SummarizeSeries.outputFormat` ARROW_V3 / ARROW_V4 over a real server: Nominal's ArrowPlot, its
Arrow IPC stream decoded with pyarrow as a Nominal client decodes it (every frame also decodes with
nominal-api: tests/wire.py's strict client).

The shared node scenario of tests/server/test_compute_nodes.py (history, late points, an overwrite,
a tag group appearing, points older than all others) feeds each node three times: LEGACY, ARROW_V3
with every `numericOutputFields` field, ARROW_V4 with the same fields as `numericOutputFieldsV2`.
The Arrow results, merged from their FullResult and AppendResults, must equal the LEGACY result of
the same node (same buckets, same values), the reference evaluation and a fresh FullResult. Then the
columns themselves: names, order and types, the V2-only statistics against the points, the default
column, raw points, `groupByKeys`, and an enum channel refused by name."""

from __future__ import annotations

import copy
import json
import math
import random
import statistics
import time
from typing import Any

import pyarrow as pa
import pytest

from schemas.server import server_message_adapter
from tests import node_json as n
from tests.client_view import arrow_table, first_difference
from tests.conftest import ServerProcess
from tests.keepalive import keep_alive
from tests.server.test_compute_nodes import (
    A,
    B,
    G,
    Outcome,
    context,
    merged_equals_reference_and_fresh,
    play_scenario,
    reached_by_an_append,
)
from tests.wire import NANOS, Client, new_id, subscription, write_points

V1_FIELDS = ["MIN", "MAX", "MEAN", "COUNT", "VARIANCE", "FIRST_POINT", "LAST_POINT"]

LEGACY: dict[str, dict[str, Any]] = {
    "raw": n.series(n.numeric_series(A)),
    "bucketed": n.series(n.numeric_series(A), buckets=20),
    "bucketed_derived": n.series(n.numeric_series(n.binary("subtract", A, B)), buckets=25),
    "grouped_raw": n.series(n.numeric_series(G)),
    "grouped_bucketed": n.series(n.numeric_series(G), buckets=10),
}
BUCKETED = {"bucketed", "bucketed_derived", "grouped_bucketed"}


def arrow(node: dict[str, Any], output_format: str, **fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(node)
    out["series"]["outputFormat"] = output_format
    out["series"].update(fields)
    return out


def v2(*names: str) -> list[dict[str, Any]]:
    return [{"type": "field", "field": name} for name in names]


CASES: dict[str, dict[str, Any]] = {
    **LEGACY,
    **{f"v3_{k}": arrow(node, "ARROW_V3", numericOutputFields=V1_FIELDS) for k, node in LEGACY.items()},
    **{
        f"v4_{k}": arrow(node, "ARROW_V4", numericOutputFieldsV2=v2(*V1_FIELDS)) for k, node in LEGACY.items()
    },
}
ARROW_CASES = [name for name in CASES if name.startswith(("v3_", "v4_"))]


@pytest.fixture(scope="module")
async def outcome(server: ServerProcess) -> Outcome:
    rid = f"ri.test.arrow.{time.time_ns()}"
    return await play_scenario(server, CASES, rid, context(rid), seed=20261126)


@pytest.mark.timeout(900)  # the first test also runs the scenario; Spark shares the machine
@pytest.mark.parametrize("name", ARROW_CASES)
async def test_arrow_merged_equals_legacy_reference_and_a_fresh_full_result(
    outcome: Outcome, name: str
) -> None:
    merged = merged_equals_reference_and_fresh(outcome, name)
    reached_by_an_append(outcome, name)
    legacy_name = name[3:]
    legacy = merged_equals_reference_and_fresh(outcome, legacy_name)
    diff = first_difference(merged, legacy)
    assert diff is None, f"{name}: differs from the LEGACY result of the same node at {diff}"
    expected_kind = "arrowBucketedNumeric" if legacy_name in BUCKETED else "arrowNumeric"
    for view in (outcome.views[name], outcome.fresh[name]):
        assert {g.kind for g in view.groups.values()} == {expected_kind}, name
        assert not view.grouped or len(view.groups) == 3  # v1, v2 and v3 (appeared mid-stream)


# -- the columns ----------------------------------------------------------------------------------
WINDOW_S = 600.0  # long enough that no point leaves the window on a busy machine
WIDTH = 2 * NANOS  # 600 s / 300 buckets


def rows_by_end(points: list[tuple[int, float]]) -> dict[int, list[float]]:
    """Points per epoch-aligned bucket of WIDTH, keyed by the bucket's exclusive end."""
    out: dict[int, list[float]] = {}
    for t, v in points:
        out.setdefault((t // WIDTH + 1) * WIDTH, []).append(v)
    return out


def plot_of(response: dict[str, Any], kind: str) -> dict[str, Any]:
    assert response["type"] == kind, response["type"]
    plot: dict[str, Any] = response[kind]
    return plot


async def full_result(client: Client, sub_id: str) -> dict[str, Any]:
    creation = await client.creation(sub_id, timeout=120)
    assert creation["type"] == "success", creation
    update = await client.update(sub_id, timeout=300)
    assert update["type"] == "full", update
    result: dict[str, Any] = update["full"]["result"]
    return result


async def test_arrow_columns_types_and_v2_statistics(server: ServerProcess) -> None:
    rid, rng = f"ri.test.arrow.columns.{time.time_ns()}", random.Random(33)
    start = (time.time_ns() - 90 * NANOS) // WIDTH * WIDTH
    written: dict[str, list[tuple[int, float]]] = {}
    for vehicle in ("v1", "v2"):
        written[vehicle] = [
            (start + i * 200_000_000 + rng.randint(0, 999), rng.uniform(-50, 50)) for i in range(400)
        ]
        await write_points(server.base_url, rid, "x", written[vehicle], tags={"vehicle": vehicle})
    await write_points(server.base_url, rid, "e", [(start, "idle"), (start + NANOS, "run")])
    variables = {
        "x": n.channel(rid, "x", group_by=["vehicle"]),
        "y": n.channel(rid, "x", tags={"vehicle": "v1"}),
        "e": n.channel(rid, "e"),
    }
    stats = v2("SUM", "STANDARD_DEVIATION", "ROOT_MEAN_SQUARE", "COUNT", "MEAN", "MEAN")
    nodes = {
        "stats": arrow(
            n.series(n.numeric_series(n.num("x")), buckets=300), "ARROW_V4", numericOutputFieldsV2=stats
        ),
        "default": arrow(n.series(n.numeric_series(n.num("y")), buckets=300), "ARROW_V3"),
        "first_last": arrow(
            n.series(n.numeric_series(n.num("y")), buckets=300),
            "ARROW_V3",
            numericOutputFields=["LAST_POINT", "FIRST_POINT", "COUNT"],
        ),
        "raw": arrow(n.series(n.numeric_series(n.num("y"))), "ARROW_V4"),
        "enum": arrow(n.series(n.raw("e")), "ARROW_V3"),
    }
    ids = {name: new_id() for name in nodes}
    client = await Client.connect(server.ws_url)
    keepalive = keep_alive(client)
    try:
        await client.subscribe(
            {
                ids[k]: subscription(node, variables, WINDOW_S, lateness_s=WINDOW_S)
                for k, node in nodes.items()
            }
        )
        stats_result = await full_result(client, ids["stats"])
        default = plot_of(await full_result(client, ids["default"]), "arrowBucketedNumeric")
        first_last = plot_of(await full_result(client, ids["first_last"]), "arrowBucketedNumeric")
        raw = plot_of(await full_result(client, ids["raw"]), "arrowNumeric")
        enum_creation = await client.creation(ids["enum"], timeout=120)
        enum_error = (
            enum_creation if enum_creation["type"] == "error" else await client.update(ids["enum"], 300)
        )
        for frame in client.frames:  # as the published description (schemas/server.py, AsyncAPI) says
            server_message_adapter.validate_json(json.dumps(frame))
    finally:
        keepalive.cancel()
        await client.close()

    # V2 statistics of each bucket, against the points themselves; a field named twice is one column
    assert stats_result["type"] == "grouped"
    responses = stats_result["grouped"]["responses"]
    assert sorted(r["grouping"]["tagsWithValues"]["vehicle"] for r in responses) == ["v1", "v2"]
    for r in responses:
        plot = plot_of(r["response"], "arrowBucketedNumeric")
        assert plot["groupByKeys"] == ["vehicle"]
        table = arrow_table(plot)
        assert table.schema.names == [
            "end_bucket_timestamp",
            "sum",
            "standard_deviation",
            "root_mean_square",
            "count",
            "mean",
        ]
        assert table.schema.field("end_bucket_timestamp").type == pa.int64()
        assert table.schema.field("count").type == pa.uint32()
        assert {
            table.schema.field(c).type for c in ("sum", "standard_deviation", "root_mean_square", "mean")
        } == {pa.float64()}
        expected = rows_by_end(written[r["grouping"]["tagsWithValues"]["vehicle"]])
        got = {row.pop("end_bucket_timestamp"): row for row in table.to_pylist()}
        assert sorted(got) == sorted(expected)
        for end, values in expected.items():
            want = {
                "sum": math.fsum(values),
                "standard_deviation": statistics.pstdev(values),
                "root_mean_square": math.sqrt(math.fsum(v * v for v in values) / len(values)),
                "count": len(values),
                "mean": statistics.fmean(values),
            }
            for column, value in want.items():
                assert math.isclose(got[end][column], value, rel_tol=1e-9, abs_tol=1e-9), (end, column)

    # no fields: MEAN alone (nominal-api's default); not grouped: no groupByKeys
    table = arrow_table(default)
    assert table.schema.names == ["end_bucket_timestamp", "mean"]
    assert "groupByKeys" not in default
    v1_buckets = rows_by_end(written["v1"])
    assert table.column("end_bucket_timestamp").to_pylist() == sorted(v1_buckets)
    for got_mean, end in zip(table.column("mean").to_pylist(), sorted(v1_buckets), strict=True):
        assert math.isclose(got_mean, statistics.fmean(v1_buckets[end]), rel_tol=1e-12)

    # FIRST_POINT / LAST_POINT: a value and a timestamp column each, in the order asked for
    table = arrow_table(first_last)
    assert table.schema.names == [
        "end_bucket_timestamp",
        "last_value",
        "last_timestamp",
        "first_value",
        "first_timestamp",
        "count",
    ]
    assert table.schema.field("first_timestamp").type == pa.int64()
    points = sorted(written["v1"])
    for row in table.to_pylist():
        inside = [
            (t, v)
            for t, v in points
            if row["end_bucket_timestamp"] - WIDTH <= t < row["end_bucket_timestamp"]
        ]
        assert (row["first_timestamp"], row["first_value"]) == inside[0]
        assert (row["last_timestamp"], row["last_value"]) == inside[-1]
        assert row["count"] == len(inside)

    # few points for the buckets asked for: raw points, `timestamp` and `value`, exact
    table = arrow_table(raw)
    assert table.schema.names == ["timestamp", "value"]
    assert table.schema.field("timestamp").type == pa.int64()
    assert (
        list(zip(table.column("timestamp").to_pylist(), table.column("value").to_pylist(), strict=True))
        == points
    )

    # a channel variable that holds strings: Arrow of an enum series is refused by name
    error = enum_error["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:InvalidComputation", error
    assert error["params"] == {"invalidTypes": "", "variant": "SummarizeSeries", "field": "outputFormat"}
