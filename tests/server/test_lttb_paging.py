"""LTTB, paging and truncation computed when polled (decision 0080), on a real server through
nominal-api's generated `ComputeService` client: points written over HTTP, then read back as
`largestTriangleThreeBuckets` (the NumericSeries and the summarization strategy, per group),
paged with the tokens the server returns until the end (forwards and backwards), and truncated.
References come from the written points and the definitions: Steinarsson's LTTB
(tests/lttb_reference.py) and nominal-api's PageInfo / nextPageToken / TruncateStrategy docs."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest
from conjure_python_client import ConjureHTTPError

from tests import node_json as n
from tests.conftest import ServerProcess, start_secured_server
from tests.lttb_reference import steinarsson
from tests.server.test_compute_service import TOKEN, ns, present, request, service
from tests.wire import NANOS, write_points

Json = dict[str, Any]
MS = 1_000_000
COUNT = 4000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("lttb-paging")
    proc = start_secured_server(base, [{"token": "all-token", "sub": "all", "dataSourceRids": ["*"]}])
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
async def written(server: ServerProcess) -> Json:
    """A random walk at irregular times (1 to 9 ms apart), and the same channel under two tag values."""
    rid = f"ri.sparkwire.test.lttb.{uuid.uuid4().hex}"
    rng = np.random.default_rng(80)
    t0 = (time.time_ns() // NANOS - 600) * NANOS
    ts = (t0 + np.cumsum(rng.integers(1, 10, COUNT)) * MS).tolist()
    walk = list(zip(ts, rng.normal(size=COUNT).cumsum().round(6).tolist(), strict=True))
    by_unit = {u: [(t, v * k) for t, v in walk[:1500]] for u, k in (("a", 1.0), ("b", -2.0))}
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"Authorization": TOKEN}, timeout=120
    ) as c:
        await write_points(server.base_url, rid, "walk", walk, client=c)
        for unit, pts in by_unit.items():
            await write_points(server.base_url, rid, "split", pts, tags={"unit": unit}, client=c)
        states = [(t, ("idle", "run", "stop")[i % 3]) for i, (t, _) in enumerate(walk[:40])]
        await write_points(server.base_url, rid, "state", states, client=c)
    return {
        "rid": rid,
        "walk": walk,
        "by_unit": by_unit,
        "states": states,
        "start": t0,
        "end": walk[-1][0] + 1,
    }


def reference_lttb(points: list[tuple[int, float]], n_out: int) -> list[tuple[int, float]]:
    kept = steinarsson([float(t - points[0][0]) for t, _ in points], [v for _, v in points], n_out)
    return [points[i] for i in kept]


def pairs(plot: Any) -> list[tuple[int, float]]:
    return [(ns(t), v) for t, v in zip(plot.timestamps, plot.values, strict=True)]


def strategy_node(series: Json, kind: str, value: Any) -> Json:
    return n.union(
        "series", {"input": series, "numericAggregations": {}, "summarizationStrategy": n.union(kind, value)}
    )


def test_lttb_strategy_and_series_node_select_steinarssons_points(
    server: ServerProcess, written: Json
) -> None:
    client, rid, walk = service(server.base_url), written["rid"], written["walk"]
    start, end = written["start"], written["end"]
    walk_series = n.numeric_series(n.channel(rid, "walk"))
    got = client.compute(
        TOKEN,
        request(
            strategy_node(walk_series, "largestTriangleThreeBuckets", {"maxPointsPerGroup": 100}), start, end
        ),
    )
    assert pairs(present(got.numeric)) == reference_lttb(walk, 100)
    node = n.union(
        "largestTriangleThreeBuckets", {"input": n.channel(rid, "walk"), "maxPointsToReturn": n.literal(50)}
    )
    got = client.compute(TOKEN, request(n.series(n.numeric_series(node)), start, end))
    assert pairs(present(got.numeric)) == reference_lttb(walk, 50)
    # a period inside the data: the LTTB of its own points only
    inner = [(t, v) for t, v in walk if walk[1000][0] <= t < walk[3000][0]]
    got = client.compute(TOKEN, request(n.series(n.numeric_series(node)), walk[1000][0], walk[3000][0]))
    assert pairs(present(got.numeric)) == reference_lttb(inner, 50)
    # per group: each tag value's series downsampled on its own
    grouped = n.numeric_series(n.channel(rid, "split", group_by=["unit"]))
    answer = client.compute(
        TOKEN,
        request(strategy_node(grouped, "largestTriangleThreeBuckets", {"maxPointsPerGroup": 30}), start, end),
    )
    responses = present(answer.grouped).responses
    by_group = {r.grouping.tags_with_values["unit"]: pairs(present(r.response.numeric)) for r in responses}
    assert by_group == {u: reference_lttb(pts, 30) for u, pts in written["by_unit"].items()}
    with pytest.raises(ConjureHTTPError) as refused:
        client.compute(
            TOKEN,
            request(
                strategy_node(walk_series, "largestTriangleThreeBuckets", {"maxPointsPerGroup": 10_001}),
                start,
                end,
            ),
        )
    assert refused.value.error_name == "Compute:InvalidComputation"


def page_through(
    server: ServerProcess, series: Json, start: int, end: int, size: int
) -> tuple[list[tuple[int, float]], list[int]]:
    """Every page of the period, each request carrying the last response's nextPageToken."""
    client, token, got, sizes = service(server.base_url), None, [], []
    for _ in range(COUNT):
        info: Json = {"pageSize": size}
        if token is not None:
            info["pageToken"] = token
        answer = client.compute(
            TOKEN, request(strategy_node(series, "page", n.union("pageInfo", info)), start, end)
        )
        plot = present(answer.numeric)
        page = pairs(plot)
        got.append(page)
        sizes.append(len(page))
        if plot.next_page_token is None:
            assert len(page) < abs(size) or not page
            flat = [p for pg in (got if size > 0 else reversed(got)) for p in pg]
            return flat, sizes
        assert len(page) == abs(size)
        tid = present(plot.next_page_token.timestamp_and_id)
        token = n.union(
            "timestampAndId",
            {"timestamp": {"seconds": tid.timestamp.seconds, "nanos": tid.timestamp.nanos}, "id": tid.id},
        )
    raise AssertionError("paging did not end")


def test_paging_returns_every_point_exactly_once_in_order(server: ServerProcess, written: Json) -> None:
    rid, walk, start, end = written["rid"], written["walk"], written["start"], written["end"]
    series = n.numeric_series(n.channel(rid, "walk"))
    forward, sizes = page_through(server, series, start, end, 700)
    assert forward == walk and sizes == [700] * 5 + [COUNT - 3500]
    backward, sizes = page_through(server, series, start, end, -1000)
    assert backward == walk and sizes == [1000] * 4 + [0]  # the last full page's token leads to an empty one
    inner = [(t, v) for t, v in walk if walk[10][0] <= t < walk[2500][0]]
    assert page_through(server, series, walk[10][0], walk[2500][0], 5000)[0] == inner


def test_truncate_returns_the_first_points(server: ServerProcess, written: Json) -> None:
    rid, walk, start, end = written["rid"], written["walk"], written["start"], written["end"]
    series = n.numeric_series(n.channel(rid, "walk"))
    got = service(server.base_url).compute(
        TOKEN, request(strategy_node(series, "truncate", n.union("maxPointsToReturn", 25)), start, end)
    )
    assert pairs(present(got.numeric)) == walk[:25]
    got = service(server.base_url).compute(
        TOKEN, request(strategy_node(series, "truncate", n.union("maxPointsToReturn", 10_000)), start, end)
    )
    assert pairs(present(got.numeric)) == walk


def test_an_enum_series_is_paged_and_truncated_too(server: ServerProcess, written: Json) -> None:
    client, rid, states = service(server.base_url), written["rid"], written["states"]
    start, end = written["start"], written["end"]
    series = n.enum_series(n.channel(rid, "state"))
    got: list[tuple[int, str]] = []
    token = None
    for _ in range(10):
        info: Json = {"pageSize": 7} if token is None else {"pageSize": 7, "pageToken": token}
        plot = present(
            client.compute(
                TOKEN, request(strategy_node(series, "page", n.union("pageInfo", info)), start, end)
            ).enum
        )
        got += [(ns(t), plot.categories[v]) for t, v in zip(plot.timestamps, plot.values, strict=True)]
        if plot.next_page_token is None:
            break
        tid = present(plot.next_page_token.timestamp_and_id)
        token = n.union(
            "timestampAndId",
            {"timestamp": {"seconds": tid.timestamp.seconds, "nanos": tid.timestamp.nanos}, "id": tid.id},
        )
    assert got == states
    plot = present(
        client.compute(
            TOKEN, request(strategy_node(series, "truncate", n.union("maxPointsToReturn", 4)), start, end)
        ).enum
    )
    assert [(ns(t), plot.categories[v]) for t, v in zip(plot.timestamps, plot.values, strict=True)] == states[
        :4
    ]


def arrow_pairs(plot: Any) -> list[tuple[int, float]]:
    """An ArrowPlot's points (its `arrowBinary`, an Arrow IPC stream of timestamp and value)."""
    data = plot.arrow_binary
    raw = base64.b64decode(data) if isinstance(data, str) else bytes(data)
    with pa.ipc.open_stream(raw) as reader:
        table = reader.read_all()
    return list(zip(table.column("timestamp").to_pylist(), table.column("value").to_pylist(), strict=True))


def test_arrow_output_carries_the_same_points_and_page_tokens(server: ServerProcess, written: Json) -> None:
    client, rid, walk = service(server.base_url), written["rid"], written["walk"]
    start, end = written["start"], written["end"]
    series = n.numeric_series(n.channel(rid, "walk"))
    lttb = strategy_node(series, "largestTriangleThreeBuckets", {"maxPointsPerGroup": 100})
    lttb["series"]["outputFormat"] = "ARROW_V3"
    got = client.compute(TOKEN, request(lttb, start, end))
    assert arrow_pairs(present(got.arrow_numeric)) == reference_lttb(walk, 100)
    seen: list[tuple[int, float]] = []
    token = None
    for _ in range(10):
        info: Json = {"pageSize": 1500} if token is None else {"pageSize": 1500, "pageToken": token}
        node = strategy_node(series, "page", n.union("pageInfo", info))
        node["series"]["outputFormat"] = "ARROW_V4"
        plot = present(client.compute(TOKEN, request(node, start, end)).arrow_numeric)
        seen += arrow_pairs(plot)
        if plot.next_page_token is None:
            break
        tid = present(plot.next_page_token.timestamp_and_id)
        token = n.union(
            "timestampAndId",
            {"timestamp": {"seconds": tid.timestamp.seconds, "nanos": tid.timestamp.nanos}, "id": tid.id},
        )
    assert seen == walk


def test_compute_with_units_reports_the_unit_of_the_selected_points(
    server: ServerProcess, written: Json
) -> None:
    rid, walk, start, end = written["rid"], written["walk"], written["start"], written["end"]
    metres = n.numeric_series(n.union("unitOverride", {"input": n.channel(rid, "walk"), "unit": "m"}))
    node = strategy_node(metres, "truncate", n.union("maxPointsToReturn", 3))
    answer = service(server.base_url).compute_with_units(TOKEN, request(node, start, end))
    assert present(answer.compute_unit.single).success == "m"
    assert pairs(present(answer.compute_result.numeric)) == walk[:3]
