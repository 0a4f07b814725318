"""The operational surface against the real server: /metrics counts what happened, /asyncapi.json
is valid AsyncAPI 3.0 and describes the frames the server really sends, /openapi.json describes
the writer's body, /series lists what was written."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ServerProcess
from tests.wire import (
    NANOS,
    Client,
    channel_variable,
    new_id,
    series_node,
    subscribe_message,
    subscription,
    write_points,
)

ASYNCAPI_SCHEMA = Path(__file__).parents[1] / "data" / "asyncapi-3.0.0.schema.json"


def unique_rid(name: str) -> str:
    return f"ri.test.ops.{name}.{time.time_ns()}"


async def scrape(server: ServerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


async def until_metric(server: ServerProcess, check: Any, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        samples = await scrape(server)
        if check(samples):
            return samples
        if time.monotonic() > deadline:
            shown = {k: v for k, v in samples.items() if not k[0].endswith("_bucket")}
            raise AssertionError(f"metrics never showed the change: {shown}")
        await asyncio.sleep(0.5)


async def test_metrics_count_ingest_and_refusals(server: ServerProcess) -> None:
    before = await scrape(server)
    rid = unique_rid("ingest")
    now = time.time_ns()
    await write_points(server.base_url, rid, "p", [(now + i, float(i)) for i in range(7)])
    bad = {
        "dataSourceRid": rid,
        "batches": [
            {
                "channel": "p",
                "points": {
                    "type": "string",
                    "string": [{"timestamp": {"seconds": 1, "nanos": 0}, "value": "x"}] * 3,
                },
            }
        ],
    }
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        assert (await http.post("/storage/writer/v1", json=bad)).status_code == 400
    after = await scrape(server)
    assert (
        value(after, "sparkwire_points_ingested_total") - value(before, "sparkwire_points_ingested_total")
        == 7
    )
    rejected = "sparkwire_points_rejected_total"
    assert value(after, rejected, reason="invalid") - value(before, rejected, reason="invalid") == 3
    requests = "sparkwire_ingest_requests_rejected_total"
    assert value(after, requests) - value(before, requests) == 1


async def test_metrics_follow_connections_subscriptions_and_the_stream(server: ServerProcess) -> None:
    rid = unique_rid("live")
    before = await scrape(server)
    a, b = await Client.connect(server.ws_url), await Client.connect(server.ws_url)
    shared = subscription(series_node(), {"x": channel_variable(rid, "p")}, 600)
    other = subscription(series_node(), {"x": channel_variable(rid, "q")}, 600)
    ids = [new_id() for _ in range(3)]
    await a.subscribe({ids[0]: shared, ids[1]: other})
    await b.subscribe({ids[2]: shared})
    await a.update(ids[0])
    await a.update(ids[1])
    await b.update(ids[2])

    live = await scrape(server)
    assert value(live, "sparkwire_connections") - value(before, "sparkwire_connections") == 2
    assert value(live, "sparkwire_subscriptions") - value(before, "sparkwire_subscriptions") == 3
    assert value(live, "sparkwire_computations") - value(before, "sparkwire_computations") == 2

    now = time.time_ns()
    await write_points(server.base_url, rid, "p", [(now, 1.0), (now + 1, 2.0)])
    await a.update(ids[0])
    await b.update(ids[2])
    # a point 10 s older than the newest: outside the default 100 ms lateness of the live computation
    await write_points(server.base_url, rid, "p", [(now - 10 * NANOS, 3.0)])
    late = "sparkwire_points_rejected_total"
    after = await until_metric(
        server, lambda s: value(s, late, reason="late") - value(before, late, reason="late") >= 1
    )
    assert value(after, late, reason="late") - value(before, late, reason="late") == 1  # one computation
    sent = "sparkwire_frames_sent_total"
    assert value(after, sent) - value(before, sent) >= 5  # 3 FullResults, 2 appends
    assert value(after, "sparkwire_frame_latency_seconds_count") > value(
        before, "sparkwire_frame_latency_seconds_count"
    )
    assert value(after, "sparkwire_microbatch_duration_seconds_count") > value(
        before, "sparkwire_microbatch_duration_seconds_count"
    )
    assert value(after, "sparkwire_microbatch_rows_sum") - value(before, "sparkwire_microbatch_rows_sum") >= 3
    evaluation = "sparkwire_evaluation_cpu_seconds_total"  # the batches applied to live computations
    assert value(after, evaluation) > value(before, evaluation)
    assert value(after, "sparkwire_source_pending_points") >= 0

    await a.close()
    await b.close()
    await until_metric(
        server,
        lambda s: (
            value(s, "sparkwire_connections") == value(before, "sparkwire_connections")
            and value(s, "sparkwire_computations") == value(before, "sparkwire_computations")
        ),
    )


async def test_min_delay_coalescing_is_counted(server: ServerProcess) -> None:
    rid = unique_rid("coalesce")
    client = await Client.connect(server.ws_url)
    sub_id = new_id()
    slow = subscription(series_node(), {"x": channel_variable(rid, "p")}, 600, min_delay_ms=600_000)
    await client.subscribe({sub_id: slow})
    await client.update(sub_id)  # the FullResult; the next frame is due in 10 minutes
    before = await scrape(server)
    batches, coalesced = "sparkwire_microbatch_duration_seconds_count", "sparkwire_frames_coalesced_total"
    for i in range(10):  # changes in successive micro-batches, all held back by minDelay
        seen = value(await scrape(server), batches)
        await write_points(server.base_url, rid, "p", [(time.time_ns(), float(i))])
        after = await until_metric(server, lambda s, seen=seen: value(s, batches) > seen)
        if value(after, coalesced) > value(before, coalesced):
            break
    assert value(after, coalesced) - value(before, coalesced) >= 1
    assert client.updates[sub_id].empty(), "minDelay held every change back"
    await client.close()


async def test_asyncapi_is_valid_and_describes_the_frames_the_server_sends(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        document = (await http.get("/asyncapi.json")).json()
    meta = json.loads(ASYNCAPI_SCHEMA.read_text())
    jsonschema.Draft7Validator(meta).validate(document)
    assert document["asyncapi"] == "3.0.0"
    assert document["channels"]["persistentCompute"]["address"] == "/persistent-compute/ws"
    assert document["servers"]["sparkwire"]["host"] == f"127.0.0.1:{server.port}"

    def validator(name: str) -> jsonschema.Draft202012Validator:
        schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
        return jsonschema.Draft202012Validator(schema)

    server_messages, client_messages = validator("ServerMessage"), validator("ClientMessage")

    rid = unique_rid("asyncapi")
    now = time.time_ns()
    await write_points(server.base_url, rid, "p", [(now - i * NANOS, float(i)) for i in range(30)])
    await write_points(server.base_url, rid, "m", [(now - i * NANOS, "AB"[i % 2]) for i in range(5)])
    client = await Client.connect(server.ws_url)
    subs = {
        new_id(): subscription(series_node(), {"x": channel_variable(rid, "p")}, 600),
        new_id(): subscription(series_node(buckets=5), {"x": channel_variable(rid, "p")}, 600),
        new_id(): subscription(series_node(kind="enum"), {"x": channel_variable(rid, "m")}, 600),
        new_id(): subscription(series_node(), {"x": channel_variable(rid, "p", group_by=["g"])}, 600),
        new_id(): subscription(series_node(variable="nope"), {}, 600),  # refused: unknown variable
    }
    message = subscribe_message(subs)
    client_messages.validate(json.loads(message))
    await client.ws.send(message)
    for sub_id in subs:
        await client.creation(sub_id)
    for sub_id in list(subs)[:4]:
        await client.update(sub_id)
    await write_points(server.base_url, rid, "p", [(time.time_ns(), 99.0)])
    await client.update(next(iter(subs)))  # an append
    ping = {"type": "ping", "ping": {"sentAt": "2026-01-01T00:00:00.000Z"}}
    client_messages.validate(ping)
    await client.ws.send(json.dumps(ping))
    await client.ws.send("{not json")
    await client.health.get()
    await client.health.get()

    kinds = {(f["type"], _variant(f)) for f in client.frames}
    assert {
        ("subscriptionCreation", "success"),
        ("subscriptionCreation", "error"),
        ("subscriptionUpdate", "full"),
        ("subscriptionUpdate", "append"),
        ("health", "pong"),
        ("health", "clientMessageError"),
    } <= kinds
    for frame in client.frames:
        server_messages.validate(frame)
    await client.close()


def _variant(frame: dict[str, Any]) -> str:
    body = frame[frame["type"]]
    if frame["type"] == "subscriptionUpdate":
        return str(body["update"]["type"])
    if frame["type"] == "subscriptionCreation":
        return str(body["creation"]["type"])
    return str(body["type"])


async def test_openapi_describes_the_writer_body_from_the_same_schemas(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        document = (await http.get("/openapi.json")).json()
    operation = document["paths"]["/storage/writer/v1"]["post"]
    body_ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = {"$ref": body_ref, "components": document["components"]}
    body_schema = jsonschema.Draft202012Validator(schema)
    good = {
        "dataSourceRid": "ri.x",
        "batches": [
            {
                "channel": "engine.temp",
                "tags": {"vehicle": "a1"},
                "points": {
                    "type": "double",
                    "double": [{"timestamp": {"seconds": 1, "nanos": 5}, "value": 21.5}],
                },
            }
        ],
    }
    body_schema.validate(good)
    assert not body_schema.is_valid({"batches": []})  # no data source
    assert "/series" in document["paths"]
    # Both writers document every refusal with Conjure's error body, and a real refusal matches it.
    nominal = document["paths"]["/storage/writer/v1/nominal/{dataSourceRid}"]["post"]
    assert "application/x-protobuf" in nominal["requestBody"]["content"]
    for op in (operation, nominal):
        assert {"200", "400", "401", "403", "413", "415", "507"} <= set(op["responses"])
    error_ref = operation["responses"]["400"]["content"]["application/json"]["schema"]["$ref"]
    error_schema = jsonschema.Draft202012Validator({"$ref": error_ref, "components": document["components"]})
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        refused = await http.post("/storage/writer/v1", content=b"{nope")
    assert refused.status_code == 400
    error_schema.validate(refused.json())
    assert not error_schema.is_valid({"name": "Default:InvalidArgument"})  # the old body alone


async def test_series_lists_what_was_written(server: ServerProcess) -> None:
    rid = unique_rid("series")
    now = time.time_ns()
    await write_points(server.base_url, rid, "temp", [(now, 1.0)], tags={"vehicle": "a1"})
    await write_points(server.base_url, rid, "mode", [(now, "PARK")], tags={"vehicle": "a1"})
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        listed = [s for s in (await http.get("/series")).json() if s["dataSourceRid"] == rid]
    assert listed == [
        {"dataSourceRid": rid, "channel": "mode", "tags": {"vehicle": "a1"}, "type": "string"},
        {"dataSourceRid": rid, "channel": "temp", "tags": {"vehicle": "a1"}, "type": "double"},
    ]
