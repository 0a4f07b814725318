"""Nominal's EventService on a real server, spoken with nominal-api's own `event` beans (encoded and
decoded by conjure_python_client): create, get, batch get, search, update, archive and unarchive;
bad input refused by name; authentication; the events across a kill -9 and a restart. Then
`eventsSearch` and `eventAggregation` over a live WebSocket subscription, checked against a
reference written from nominal-api's docs, and an event created, edited or archived while
subscribed reaching the subscriber as a FullResult. Last, with the rows shared in Redis (no Spark):
a change stored by one process is read by another and announced to its feed once, as kind `event`."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from conjure_python_client import ConjureDecoder, ConjureEncoder
from nominal_api import api, event, scout_rids_api, scout_run_api
from nominal_api import scout_compute_api as sc

from app.fanout.catalog_edits import CatalogEdits
from app.tiers.catalog_feed import CatalogFeed
from compute.storage.events import Event, EventStore
from compute.storage.redis.catalog_rows import connect_rows
from tests.client_view import ResultView
from tests.conftest import ServerProcess, start_server
from tests.hostile import make_jwt
from tests.infra import start_redis
from tests.wire import NANOS, Client, channel_variable, subscription, write_points

WINDOW_S = 3600.0
WINDOW_NS = int(WINDOW_S * NANOS)
Json = dict[str, Any]
DECODER = ConjureDecoder()
SECRET = "events-test-secret-of-thirty-two-bytes"


def enc(value: Any) -> Any:
    return ConjureEncoder.do_encode(value)


async def call(base: str, path: str, body: Any, token: str | None = None) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60) as http:
        return await http.post(f"{base}{path}", json=body, headers=headers)


async def make_asset(base: str, data_source: str, token: str | None = None) -> str:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    body = {"title": "rig", "dataScopes": [{"dataScopeName": "main", "dataSourceRid": data_source}]}
    async with httpx.AsyncClient(timeout=60) as http:
        r = await http.post(f"{base}/assets/v1/assets", json=body, headers=headers)
    assert r.status_code == 200, r.text
    rid: str = r.json()["rid"]
    return rid


def stamp(ns: int) -> api.Timestamp:
    return api.Timestamp(seconds=ns // NANOS, nanos=ns % NANOS)


def length(ns: int) -> scout_run_api.Duration:
    return scout_run_api.Duration(seconds=ns // NANOS, nanos=ns % NANOS)


def create_request(
    asset: str,
    start: int,
    duration: int,
    name: str,
    kind: event.EventType = event.EventType.INFO,
    labels: list[str] | None = None,
    properties: dict[str, str] | None = None,
) -> event.CreateEvent:
    return event.CreateEvent(
        asset_rids=[asset],
        origins=[],
        timestamp=stamp(start),
        duration=length(duration),
        name=name,
        description=f"{name} happened",
        type=kind,
        labels=labels or [],
        properties=properties or {},
        typed_properties={},
    )


async def create(base: str, request: event.CreateEvent, token: str | None = None) -> event.Event:
    r = await call(base, "/event/v1/events", enc(request), token)
    assert r.status_code == 200, r.text
    made: event.Event = DECODER.decode(r.json(), event.Event)
    return made


async def search(
    base: str, query: event.SearchQuery, token: str | None = None, archived: bool = False
) -> list[event.Event]:
    statuses = [api.ArchivedStatus.ARCHIVED, api.ArchivedStatus.NOT_ARCHIVED] if archived else None
    request = event.SearchEventsRequest(
        sort=event.SortOptions(field=event.SortField.START_TIME, is_descending=False),
        page_size=100,
        query=query,
        archived_statuses=statuses,
    )
    r = await call(base, "/event/v1/search-events", enc(request), token)
    assert r.status_code == 200, r.text
    found: event.SearchEventsResponse = DECODER.decode(r.json(), event.SearchEventsResponse)
    return found.results


def refusal(r: httpx.Response, status: int, name: str) -> Json:
    assert r.status_code == status, r.text
    body: Json = r.json()
    assert body["errorName"] == name, body
    return body


@pytest.fixture
async def client(server: ServerProcess) -> Any:
    c = await Client.connect(server.ws_url)
    yield c
    await c.close()


async def test_create_get_search_update_and_archive_events(server: ServerProcess) -> None:
    base, t0 = server.base_url, time.time_ns() - 600 * NANOS
    asset = await make_asset(base, f"ri.test.events.{uuid.uuid4().hex}")
    tag = uuid.uuid4().hex
    burn = await create(
        base,
        create_request(
            asset, t0, 30 * NANOS, f"burn {tag}", event.EventType.FLAG, ["hot"], {"phase": "ignition"}
        ),
    )
    assert burn.asset_rids == [asset] and burn.name == f"burn {tag}" and not burn.is_archived
    assert burn.rid.endswith(burn.uuid) and burn.duration.seconds == 30
    assert burn.origins[0].type == "api"  # "If empty, will default to set<EventOrigin.api>"
    assert burn.description == f"burn {tag} happened"
    mark = await create(base, create_request(asset, t0 + 60 * NANOS, 0, f"mark {tag}"))

    r = await call(base, "/event/v1/get-events", enc(event.GetEvents(uuids=[mark.uuid, burn.uuid])))
    assert r.status_code == 200, r.text
    assert [e.uuid for e in DECODER.decode(r.json(), list[event.Event])] == [mark.uuid, burn.uuid]
    r = await call(base, "/event/v1/events/batch-get", [burn.rid])
    assert r.status_code == 200, r.text
    assert enc(DECODER.decode(r.json(), list[event.Event])[0]) == enc(burn)

    by_text = await search(base, event.SearchQuery(search_text=tag))
    assert [e.uuid for e in by_text] == [burn.uuid, mark.uuid]  # START_TIME ascending
    flags = event.SearchQuery(
        and_=[event.SearchQuery(search_text=tag), event.SearchQuery(event_type=event.EventType.FLAG)]
    )
    assert [e.uuid for e in await search(base, flags)] == [burn.uuid]
    # after T is exclusive and takes an event that ends after T: burn spans t0 + 10 s
    spanning = event.SearchQuery(
        and_=[event.SearchQuery(search_text=tag), event.SearchQuery(after=stamp(t0 + 10 * NANOS))]
    )
    assert [e.uuid for e in await search(base, spanning)] == [burn.uuid, mark.uuid]
    before = event.SearchQuery(
        and_=[event.SearchQuery(search_text=tag), event.SearchQuery(before=stamp(t0 + 60 * NANOS))]
    )
    assert [e.uuid for e in await search(base, before)] == [burn.uuid]  # mark starts at it: exclusive
    labelled = event.SearchQuery(
        and_=[
            event.SearchQuery(asset=asset),
            event.SearchQuery(property=api.Property(name="phase", value="ignition")),
        ]
    )
    assert [e.uuid for e in await search(base, labelled)] == [burn.uuid]

    update = event.UpdateEvent(uuid=mark.uuid, name=f"marker {tag}", labels=["seen"])
    r = await call(base, "/event/v1/update-event", enc(update))
    assert r.status_code == 200, r.text
    updated: event.Event = DECODER.decode(r.json(), event.Event)
    assert updated.name == f"marker {tag}" and updated.labels == ["seen"]
    assert enc(updated.timestamp) == enc(mark.timestamp)  # "Empty fields are left unchanged"

    r = await call(base, "/event/v1/archive-event", enc(event.ArchiveEvent(uuid=burn.uuid)))
    assert r.status_code in (200, 204), r.text
    assert [e.uuid for e in await search(base, event.SearchQuery(search_text=tag))] == [mark.uuid]
    both = await search(base, event.SearchQuery(search_text=tag), archived=True)
    assert [(e.uuid, e.is_archived) for e in both] == [(burn.uuid, True), (mark.uuid, False)]
    r = await call(base, "/event/v1/batch-unarchive-events", [burn.rid])
    assert r.status_code in (200, 204), r.text
    assert len(await search(base, event.SearchQuery(search_text=tag))) == 2

    # bad input, refused by name
    negative = enc(create_request(asset, t0, 0, "x"))
    negative["duration"] = {"seconds": -1, "nanos": 0}
    refusal(await call(base, "/event/v1/events", negative), 400, "Event:InvalidDuration")
    no_asset = enc(create_request(asset, t0, 0, "x"))
    no_asset["assetRids"] = []
    refusal(await call(base, "/event/v1/events", no_asset), 400, "Event:InvalidAssetRids")
    unknown_asset = enc(create_request("ri.scout.main.asset.nope", t0, 0, "x"))
    refusal(await call(base, "/event/v1/events", unknown_asset), 400, "Event:InvalidAssetRids")
    refusal(
        await call(base, "/event/v1/get-events", enc(event.GetEvents(uuids=[str(uuid.uuid4())]))),
        404,
        "Event:EventsNotFound",
    )
    workbook = event.SearchEventsRequest(
        sort=event.SortOptions(field=event.SortField.START_TIME, is_descending=False),
        page_size=10,
        query=event.SearchQuery(workbook="ri.scout.main.notebook.x"),
    )
    body = refusal(
        await call(base, "/event/v1/search-events", enc(workbook)), 400, "Event:InvalidSearchQuery"
    )
    assert body["parameters"]["term"] == "workbook"
    many = enc(workbook)
    half = event.SearchQuery(or_=[event.SearchQuery(label=str(i)) for i in range(600)])
    many["query"] = enc(event.SearchQuery(and_=[half, half]))  # each list short, 1,203 terms in all
    body = refusal(await call(base, "/event/v1/search-events", many), 400, "Event:InvalidSearchQuery")
    assert "more than 1000 terms" in body["message"], body
    too_big = enc(workbook)
    too_big["pageSize"], too_big["query"] = 10_001, enc(event.SearchQuery(search_text="x"))
    refusal(await call(base, "/event/v1/search-events", too_big), 400, "Event:InvalidPageSize")

    huge = enc(create_request(asset, t0, 0, "x"))
    huge["description"] = "x" * (1 << 20)  # past SPARKWIRE_MAX_JSON_BODY_BYTES' 1 MiB
    refusal(await call(base, "/event/v1/events", huge), 413, "Default:RequestEntityTooLarge")

    paths = httpx.get(f"{base}/openapi.json").json()["paths"]
    assert {
        "/event/v1/events",
        "/event/v1/get-events",
        "/event/v1/events/batch-get",
        "/event/v1/update-event",
        "/event/v1/search-events",
        "/event/v1/archive-event",
        "/event/v1/batch-archive-events",
        "/event/v1/batch-unarchive-events",
    } <= set(paths)


# -- the nodes over events -------------------------------------------------------------------------
def lit(s: str) -> sc.StringConstant:
    return sc.StringConstant(literal=s)


def ranges_node(query: scout_rids_api.ComputeEventQuery) -> Json:
    node = sc.RangeSeries(events_search=sc.EventsSearchRanges(query=query))
    return dict(enc(sc.ComputableNode(ranges=sc.SummarizeRanges(input=node))))


def enum_node(query: scout_rids_api.ComputeEventQuery, source: sc.EventsEnumValueSource) -> Json:
    node = sc.EnumSeries(event_aggregation=sc.EventsEnumSeries(query=query, value_source=source))
    summary = sc.SummarizeSeries(input=sc.Series(enum=node), numeric_aggregations={})
    return dict(enc(sc.ComputableNode(series=summary)))


async def subscribe(client: Client, sub_id: str, node: Json) -> ResultView:
    await client.subscribe({sub_id: subscription(node, {}, WINDOW_S)})
    creation = await client.creation(sub_id, timeout=120)
    assert creation["type"] == "success", creation
    view = ResultView(WINDOW_NS)
    full = await client.update(sub_id, timeout=300)
    assert full["type"] == "full", full
    view.apply(full)
    return view


def snapshot(view: ResultView) -> dict[Any, Any]:
    return {k: [tuple(p) for p in pts] for k, (_, pts) in view.snapshot().items()}


class Reference:
    """What nominal-api's docs say the two nodes give, over the events as the test made them:
    EventsSearchRanges "a range for each event matching the query", [timestamp, timestamp +
    duration) (EventIntervalSource's words for an event's interval); EventsEnumSeries "each data
    point corresponds to an event and the enum value is derived from a single event field", the
    named property's value, or the level, "This field corresponds to the event type". Archived
    events are not searched (SearchEventsRequest: "Default search status is NOT_ARCHIVED")."""

    def __init__(self) -> None:
        self.events: dict[str, Json] = {}

    def put(self, e: event.Event) -> None:
        self.events[e.uuid] = {
            "start": e.timestamp.seconds * NANOS + e.timestamp.nanos,
            "duration": e.duration.seconds * NANOS + e.duration.nanos,
            "labels": list(e.labels),
            "properties": dict(e.properties),
            "type": e.type.value,
            "archived": e.is_archived,
        }

    def _found(self, label: str) -> list[Json]:
        return sorted(
            (e for e in self.events.values() if label in e["labels"] and not e["archived"]),
            key=lambda e: e["start"],
        )

    def ranges(self, label: str) -> dict[Any, Any]:
        return {(): [(e["start"], e["start"] + e["duration"]) for e in self._found(label)]}

    def levels(self, label: str) -> dict[Any, Any]:
        return {(): [(e["start"], e["type"]) for e in self._found(label)]}

    def property(self, label: str, name: str) -> dict[Any, Any]:
        return {
            (): [(e["start"], e["properties"][name]) for e in self._found(label) if name in e["properties"]]
        }


async def test_events_search_and_aggregation_live(server: ServerProcess, client: Client) -> None:
    base, t0 = server.base_url, time.time_ns() - 1200 * NANOS
    asset = await make_asset(base, f"ri.test.events.{uuid.uuid4().hex}")
    label, other = f"run-{uuid.uuid4().hex}", f"other-{uuid.uuid4().hex}"
    ref = Reference()
    specs = [
        (t0, 30, event.EventType.INFO, {"phase": "fill"}, [label]),
        (t0 + 100 * NANOS, 0, event.EventType.FLAG, {}, [label]),  # an instant
        (t0 + 200 * NANOS, 50, event.EventType.ERROR, {"phase": "burn"}, [label]),
        (t0 + 300 * NANOS, 10, event.EventType.SUCCESS, {"phase": "vent"}, [other]),  # not found
    ]
    made = []
    for start, seconds, kind, props, labels in specs:
        e = await create(base, create_request(asset, start, seconds * NANOS, "step", kind, labels, props))
        ref.put(e)
        made.append(e)

    query = scout_rids_api.ComputeEventQuery(label=lit(label))
    level = sc.EventsEnumValueSource(level=api.Empty())
    phase = sc.EventsEnumValueSource(property=lit("phase"))
    ranges_view = await subscribe(client, "ranges", ranges_node(query))
    levels_view = await subscribe(client, "levels", enum_node(query, level))
    phase_view = await subscribe(client, "phase", enum_node(query, phase))
    assert snapshot(ranges_view) == ref.ranges(label)
    assert snapshot(levels_view) == ref.levels(label)
    assert snapshot(phase_view) == ref.property(label, "phase")
    assert len(ref.ranges(label)[()]) == 3 and ref.property(label, "phase")[()][-1][1] == "burn"

    # a query over an asset and a time, and one Sparkwire cannot match, refused by name
    q = scout_rids_api.ComputeEventQuery(
        and_=[
            scout_rids_api.ComputeEventQuery(asset=lit(asset)),
            scout_rids_api.ComputeEventQuery(after=sc.TimestampConstant(literal=stamp(t0 + 100 * NANOS))),
        ]
    )
    later = await subscribe(client, "later", ranges_node(q))
    expected = [
        (e["start"], e["start"] + e["duration"])
        for e in ref.events.values()
        if e["start"] + e["duration"] > t0 + 100 * NANOS
    ]
    assert snapshot(later) == {(): sorted(expected)}
    await client.subscribe(
        {"wb": subscription(ranges_node(scout_rids_api.ComputeEventQuery(workbook=lit("x"))), {}, WINDOW_S)}
    )
    creation = await client.creation("wb", timeout=60)
    assert creation["type"] == "error", creation
    error = creation["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:InvalidComputation", error
    assert error["params"]["variant"] == "eventsSearch" and error["params"]["field"] == "query.workbook"

    # live: an event created with the label, one edited into it, one archived: each reaches the
    # subscribers as a FullResult equal to the reference
    created = await create(
        base,
        create_request(
            asset, t0 + 400 * NANOS, 5 * NANOS, "step", event.EventType.FLAG, [label], {"phase": "hold"}
        ),
    )
    ref.put(created)
    await _expect_full(client, {"ranges": ranges_view, "levels": levels_view, "phase": phase_view})
    assert snapshot(ranges_view) == ref.ranges(label)
    assert snapshot(levels_view) == ref.levels(label)
    assert snapshot(phase_view) == ref.property(label, "phase")

    r = await call(base, "/event/v1/update-event", enc(event.UpdateEvent(uuid=made[3].uuid, labels=[label])))
    assert r.status_code == 200, r.text
    ref.put(DECODER.decode(r.json(), event.Event))
    await _expect_full(client, {"ranges": ranges_view, "levels": levels_view, "phase": phase_view})
    assert snapshot(ranges_view) == ref.ranges(label) and len(ref.ranges(label)[()]) == 5
    assert snapshot(phase_view) == ref.property(label, "phase")

    r = await call(base, "/event/v1/archive-event", enc(event.ArchiveEvent(uuid=made[0].uuid)))
    assert r.status_code in (200, 204), r.text
    ref.events[made[0].uuid]["archived"] = True
    await _expect_full(client, {"ranges": ranges_view, "levels": levels_view})
    assert snapshot(ranges_view) == ref.ranges(label)
    assert snapshot(levels_view) == ref.levels(label)

    # a fresh subscription agrees with the live one
    fresh = await subscribe(client, "fresh", ranges_node(query))
    assert snapshot(fresh) == snapshot(ranges_view)


def threshold_ranges(points: list[tuple[int, float]], level: float) -> list[tuple[int, float]]:
    """docs/protocol.md's ranges of `threshold` (GREATER_THAN): a range starts at the first point
    above the level and ends (exclusive) at the first later point that is not; still above at the
    newest point: no end (inf here)."""
    out: list[tuple[int, float]] = []
    start: int | None = None
    for t, v in sorted(points):
        if v > level and start is None:
            start = t
        elif not v > level and start is not None:
            out.append((start, t))
            start = None
    if start is not None:
        out.append((start, float("inf")))
    return out


def intersection(a: Sequence[tuple[int, float]], b: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """Where both hold (ranges of positive length; `intersectRange`)."""
    out = []
    for s1, e1 in a:
        for s2, e2 in b:
            s, e = max(s1, s2), min(e1, e2)
            if s < e:
                out.append((s, e))
    return sorted(out)


async def test_events_under_a_threshold_move_with_the_channel_live(
    server: ServerProcess, client: Client
) -> None:
    """eventsSearch intersected with a threshold over a channel: the events stand still, the
    channel's points move the result, as an append whose merge equals a fresh FullResult."""
    base, t0 = server.base_url, time.time_ns() - 1200 * NANOS
    rid = f"ri.test.events.{uuid.uuid4().hex}"
    asset = await make_asset(base, rid)
    label = f"hot-{uuid.uuid4().hex}"
    spans = [(t0 + 20 * NANOS, 30 * NANOS), (t0 + 100 * NANOS, 30 * NANOS)]
    for start, duration in spans:
        await create(base, create_request(asset, start, duration, "window", labels=[label]))
    xs = [(t0 + i * 10 * NANOS, 1.0) for i in range(12)] + [(t0 + 115 * NANOS, 1.0)]
    await write_points(base, rid, "x", xs)
    events_ranges = sc.RangeSeries(
        events_search=sc.EventsSearchRanges(query=scout_rids_api.ComputeEventQuery(label=lit(label)))
    )
    above = sc.RangeSeries(
        threshold=sc.ThresholdingRanges(
            input=sc.NumericSeries(raw=sc.Reference(name="x")),
            operator=sc.ThresholdOperator.GREATER_THAN,
            threshold=sc.DoubleConstant(literal=0.0),
        )
    )
    node = dict(
        enc(
            sc.ComputableNode(
                ranges=sc.SummarizeRanges(
                    input=sc.RangeSeries(intersect_range=sc.IntersectRanges(inputs=[events_ranges, above]))
                )
            )
        )
    )
    variables = {"x": channel_variable(rid, "x")}
    await client.subscribe({"both": subscription(node, variables, WINDOW_S, lateness_s=WINDOW_S)})
    creation = await client.creation("both", timeout=120)
    assert creation["type"] == "success", creation
    view = ResultView(WINDOW_NS)
    full = await client.update("both", timeout=300)
    assert full["type"] == "full", full
    view.apply(full)
    event_spans = [(s, s + d) for s, d in spans]
    assert snapshot(view) == {(): intersection(event_spans, threshold_ranges(xs, 0.0))}

    late = [(t0 + 112 * NANOS, -1.0), (t0 + 125 * NANOS, 2.0)]  # the channel dips inside event B
    await write_points(base, rid, "x", late)
    update = await client.update("both", timeout=120)
    view.apply(update)
    expected = intersection(event_spans, threshold_ranges(xs + late, 0.0))
    assert len(expected) == 3, expected
    deadline = time.monotonic() + 60
    while snapshot(view) != {(): expected}:  # both points may come in one update or two
        assert time.monotonic() < deadline, (snapshot(view), expected)
        view.apply(await client.update("both", timeout=60))
    fresh = await subscribe_with(client, "both-fresh", node, variables)
    assert snapshot(fresh) == snapshot(view)


async def subscribe_with(client: Client, sub_id: str, node: Json, variables: Json) -> ResultView:
    await client.subscribe({sub_id: subscription(node, variables, WINDOW_S)})
    creation = await client.creation(sub_id, timeout=120)
    assert creation["type"] == "success", creation
    view = ResultView(WINDOW_NS)
    view.apply(await client.update(sub_id, timeout=300))
    return view


async def _expect_full(client: Client, views: dict[str, ResultView]) -> None:
    for sub_id, view in views.items():
        update = await client.update(sub_id, timeout=120)
        assert update["type"] == "full", (sub_id, update)
        view.apply(update)


async def test_events_need_a_token_and_admin_to_change_and_survive_kill_9(tmp_path: Any) -> None:
    env = {"SPARKWIRE_JWT_SECRET": SECRET}
    server = start_server(tmp_path / "data", tmp_path / "a.log", env=env, own_process_group=True)
    admin = make_jwt(SECRET, ["*"], 3600, sub="ops", admin=True)
    reader = make_jwt(SECRET, ["ri.open.*"], 3600, sub="car")
    try:
        base = server.base_url
        asset = await make_asset(base, "ri.open.a", admin)
        request = create_request(asset, time.time_ns() - 60 * NANOS, NANOS, "kept", labels=["k"])
        refusal(await call(base, "/event/v1/events", enc(request)), 401, "Default:Unauthorized")
        refusal(
            await call(
                base,
                "/event/v1/search-events",
                {
                    "sort": {"isDescending": False, "field": "START_TIME"},
                    "pageSize": 1,
                    "query": {"type": "label", "label": "k"},
                },
            ),
            401,
            "Default:Unauthorized",
        )
        refusal(await call(base, "/event/v1/events", enc(request), reader), 403, "Default:PermissionDenied")
        kept = await create(base, request, admin)
        assert kept.created_by is not None and kept.created_by.endswith("ops")
        [seen] = await search(base, event.SearchQuery(label="k"), reader)
        assert seen.uuid == kept.uuid

        server.kill_all()
        server = start_server(tmp_path / "data", tmp_path / "b.log", env=env, own_process_group=True)
        base = server.base_url
        r = await call(base, "/event/v1/get-events", enc(event.GetEvents(uuids=[kept.uuid])), reader)
        assert r.status_code == 200, r.text
        assert enc(DECODER.decode(r.json(), list[event.Event])[0]) == enc(kept)
        ws = await Client.connect(server.ws_url, additional_headers={"Authorization": f"Bearer {reader}"})
        try:
            view = await subscribe(
                ws, "after-restart", ranges_node(scout_rids_api.ComputeEventQuery(label=lit("k")))
            )
            start = kept.timestamp.seconds * NANOS + kept.timestamp.nanos
            assert snapshot(view) == {(): [(start, start + NANOS)]}
        finally:
            await ws.close()
    finally:
        server.kill_all()


# -- shared in Redis: one store for every process, each change announced ------------------------------
class Recorder:
    """A connection whose every subscription searched the events: it records what it is asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str | None, tuple[str, ...]]] = []

    def catalog_affected(self, kind: str | None, rids: Any) -> list[str]:
        self.asked.append((kind, tuple(rids)))
        return []

    def re_resolve(self, sub_id: str) -> None:
        raise AssertionError("nothing to re-resolve")


async def test_events_in_redis_are_shared_and_each_change_is_announced_once(tmp_path: Any) -> None:
    redis_server = start_redis(tmp_path / "redis", persistent=True)
    prefix = "eventstest"
    writer = EventStore(rows=connect_rows(redis_server.url, prefix, {}, what="the event store"))
    edits, listener = CatalogEdits(), Recorder()
    edits.add(listener)
    feed = CatalogFeed(redis_server.url, prefix, edits)  # another process's
    feed.start()
    try:
        deadline = time.monotonic() + 20
        while feed.links < 1:
            assert time.monotonic() < deadline, "the feed did not link"
            await asyncio.sleep(0.05)
        await edits.idle()
        listener.asked.clear()
        draft = Event("", "", ["ri.scout.main.asset.a"], 5 * NANOS, NANOS, "burn", "", "FLAG", ["x"])
        made = await asyncio.to_thread(writer.create, draft)
        await asyncio.to_thread(writer.update, made.uuid, name="burn 2")
        assert await asyncio.to_thread(writer.set_archived, [made.uuid], True) == []
        assert await asyncio.to_thread(writer.set_archived, [made.uuid], True) == []  # already: no change
        assert await asyncio.to_thread(writer.set_archived, ["nope"], False) == ["nope"]
        deadline = time.monotonic() + 20
        while len(listener.asked) < 3:
            assert time.monotonic() < deadline, listener.asked
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # longer than a blocking read: nothing more comes
        assert listener.asked == [("event", (made.rid,))] * 3
        reader = EventStore(rows=connect_rows(redis_server.url, prefix, {}, what="the event store"))
        seen = await asyncio.to_thread(reader.event, made.uuid)
        assert seen is not None and seen.name == "burn 2" and seen.archived and seen.labels == ["x"]
    finally:
        await asyncio.wait_for(feed.stop(), 15)
        redis_server.daemon.stop()
