"""On a real server through nominal-api's generated `ComputeService` client: tagByIntervals over
events (created through Nominal's EventService with nominal-api's `event` beans) and its
`eventTimeShift`, then the LogSeries `filterByTag`, `selectTags` and `derived` when polled.
References from nominal-api's docstrings (tests/unit/test_tag_by_events.py and test_log_tags.py give
them in full): each event "defines [timestamp, timestamp+duration)", its points tagged by the
`tagBy` sources; the anchor is "the start timestamp of the event at the configured zero-based index
from this query whose event time lies in the anchor window [start, end)"; NOMINAL_CHANNEL "carries the
channel name, so channels can be filtered and grouped the same way tags are"."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conjure_python_client import ConjureHTTPError
from nominal_api import event

from tests import node_json as n
from tests.conftest import ServerProcess, start_secured_server
from tests.server.test_compute_service import ns, request, service
from tests.server.test_events import create, create_request, make_asset
from tests.server.test_log_writer import logs_body
from tests.server.test_polled_rest import groups
from tests.wire import NANOS, write_points

MS = 1_000_000
RAW_TOKEN = "admin-token"  # the events helpers add "Bearer "
TOKEN = f"Bearer {RAW_TOKEN}"
Json = dict[str, Any]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with a tokens file whose one token may change the catalog (events need `admin`)."""
    base = tmp_path_factory.mktemp("polled-tags")
    entries = [{"token": "admin-token", "sub": "operator", "dataSourceRids": ["*"], "admin": True}]
    proc = start_secured_server(base, entries)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
async def written(server: ServerProcess) -> Json:
    """A channel at 10 Hz over 10 s (its i-th point, i / 10 s after t0, of value i), two log
    channels, and events named with this run's word: burns (FLAG at 1 s for 1 s, labelled
    `reviewed`, phase climb; INFO at 3 s for 0.5 s, phase cruise; FLAG at 6 s for 1 s, no phase) and
    two instants `go` at 1.5 s and 6.2 s."""
    base, word = server.base_url, uuid.uuid4().hex[:8]
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 900) * NANOS
    points = [(t0 + i * 100 * MS, float(i)) for i in range(100)]
    headers = {"Authorization": TOKEN}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as c:
        await write_points(base, rid, "level", points, client=c)
        logs: list[tuple[str, list[tuple[int, str, dict[str, str]]]]] = [
            ("app.log", [(t0 + i * 250 * MS, f"app {i}", {}) for i in range(8)]),
            ("db.log", [(t0 + 100 * MS + i * 400 * MS, f"db {i}", {}) for i in range(5)]),
        ]
        for name, lines in logs:
            r = await c.post(
                f"/storage/writer/v1/logs/{rid}",
                content=logs_body(lines, channel=name),
                headers={"Content-Type": "application/json"},
            )
            assert r.status_code == 200, r.text
    asset = await make_asset(base, rid, RAW_TOKEN)
    burns = [
        (t0 + NANOS, NANOS, event.EventType.FLAG, ["reviewed"], {"phase": "climb"}),
        (t0 + 3 * NANOS, 500 * MS, event.EventType.INFO, [], {"phase": "cruise"}),
        (t0 + 6 * NANOS, NANOS, event.EventType.FLAG, [], {}),
    ]
    for i, (start, duration, kind, labels, properties) in enumerate(burns):
        body = create_request(asset, start, duration, f"burn-{word} {i}", kind, labels, properties)
        await create(base, body, RAW_TOKEN)
    for start in (t0 + 1500 * MS, t0 + 6200 * MS):
        await create(base, create_request(asset, start, 0, f"go-{word}", event.EventType.INFO), RAW_TOKEN)
    return {"rid": rid, "t0": t0, "word": word}


def text(s: str) -> Json:
    return n.union("searchText", n.literal(s))


def tagged(rid: str, query: Json, tag_by: list[Json], shift: Json | None = None) -> Json:
    body: Json = {
        "input": n.channel(rid, "level"),
        "intervals": n.union("events", {"query": query, "tagBy": tag_by}),
    }
    if shift is not None:
        body["timeShift"] = shift
    return n.series(n.numeric_series(n.union("tagByIntervals", body)))


def test_tag_by_intervals_over_events(server: ServerProcess, written: Json) -> None:
    rid, t0, word = written["rid"], written["t0"], written["word"]
    client = service(server.base_url)
    end = t0 + 10 * NANOS

    def inside(lo: int, hi: int, shift: int = 0) -> list[tuple[int, float]]:
        return [(t0 + i * 100 * MS - shift, float(i)) for i in range(100) if lo <= t0 + i * 100 * MS < hi]

    tag_by = [
        n.union("intervalIndex", {}),
        n.union("level", {}),
        n.union("property", {"propertyName": n.literal("phase")}),
        n.union("label", {"label": n.literal("reviewed")}),
    ]
    got = groups(client.compute(TOKEN, request(tagged(rid, text(f"burn-{word}"), tag_by), t0, end)))
    assert got == {
        (
            ("EVENT_LABEL_PREFIX:reviewed", "true"),
            ("EVENT_LEVEL", "FLAG"),
            ("INTERVAL_INDEX", "0"),
            ("phase", "climb"),
        ): inside(t0 + NANOS, t0 + 2 * NANOS),
        (
            ("EVENT_LABEL_PREFIX:reviewed", "false"),
            ("EVENT_LEVEL", "INFO"),
            ("INTERVAL_INDEX", "1"),
            ("phase", "cruise"),
        ): inside(t0 + 3 * NANOS, t0 + 3500 * MS),
        (
            ("EVENT_LABEL_PREFIX:reviewed", "false"),
            ("EVENT_LEVEL", "FLAG"),
            ("INTERVAL_INDEX", "2"),
            ("phase", "NOMINAL_ABSENT"),
        ): inside(t0 + 6 * NANOS, t0 + 7 * NANOS),
    }
    # the FLAG burns, each shifted by the first `go` inside it (1.5 s, 6.2 s)
    flags = n.union("and", [text(f"burn-{word}"), n.union("eventType", "FLAG")])
    anchor = n.union("eventTimeShift", {"query": text(f"go-{word}")})
    shifted = groups(
        client.compute(TOKEN, request(tagged(rid, flags, [n.union("intervalIndex", {})], anchor), t0, end))
    )
    assert shifted == {
        (("INTERVAL_INDEX", "0"),): inside(t0 + NANOS, t0 + 2 * NANOS, t0 + 1500 * MS),
        (("INTERVAL_INDEX", "1"),): inside(t0 + 6 * NANOS, t0 + 7 * NANOS, t0 + 6200 * MS),
    }
    # the INFO burn holds no `go`: its anchor cannot be resolved
    with pytest.raises(ConjureHTTPError) as none:
        client.compute(
            TOKEN, request(tagged(rid, text(f"burn-{word}"), [n.union("intervalIndex", {})], anchor), t0, end)
        )
    assert none.value.error_name == "Compute:InvalidComputation"


def selected(log: Json) -> Json:
    return n.union("selectTags", {"input": log, "tagKeys": [n.literal("NOMINAL_CHANNEL")]})


def test_log_series_across_groups_and_derived(server: ServerProcess, written: Json) -> None:
    rid, t0 = written["rid"], written["t0"]
    client = service(server.base_url)
    end = t0 + 2 * NANOS
    every = n.union("selectLogs", {"dataset": {"type": "saved", "saved": {"rid": n.literal(rid)}}})
    names = n.literal([n.literal("app.log"), n.literal("db.log")])
    both = n.union(
        "filterByTag",
        {"input": every, "predicate": n.union("in", {"key": n.literal("NOMINAL_CHANNEL"), "values": names})},
    )
    node = n.union(
        "series",
        {
            "input": n.union("log", selected(both)),
            "numericAggregations": {},
            "summarizationStrategy": n.union("page", n.union("pageInfo", {"pageSize": 100})),
        },
    )
    got = client.compute(TOKEN, request(node, t0, end)).grouped
    assert got is not None
    lines: dict[str, list[tuple[int, str]]] = {}
    for r in got.responses:
        plot, tags = r.response.paged_log, r.grouping.tags_with_values
        assert plot is not None and plot.next_page_token is None and tags is not None
        lines[tags["NOMINAL_CHANNEL"]] = [
            (ns(t), v.message) for t, v in zip(plot.timestamps, plot.values, strict=True)
        ]
    assert lines == {
        "app.log": [(t0 + i * 250 * MS, f"app {i}") for i in range(8)],
        "db.log": [(t0 + 100 * MS + i * 400 * MS, f"db {i}") for i in range(5)],
    }
    # a derived log series names a module function, which never computes log lines: refused by name
    function = {
        "moduleName": n.literal("no-such-module"),
        "functionName": n.literal("lines"),
        "versionReference": n.union("pinned", {"version": n.literal("1")}),
        "functionArgs": {},
    }
    derived = n.union("derived", n.union("function", function))
    node["series"]["input"] = n.union("log", derived)
    with pytest.raises(ConjureHTTPError) as refused:
        client.compute(TOKEN, request(node, t0, end))
    assert refused.value.error_name == "Compute:InvalidComputation"
    assert refused.value.parameters.get("field") == "moduleName"
