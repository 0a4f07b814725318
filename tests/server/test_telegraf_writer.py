"""The Telegraf writer (app/ingest/telegraf.py) against a real server: nominal-api's own
WriteTelegrafBatchesRequest, encoded by conjure_python_client's ConjureEncoder, and Telegraf's single
metric form. What it wrote must reach a live subscriber as nominal-api names it (measurement name and
field concatenated, tags as tags, nanosecond timestamps); a refused request stores nothing. Its auth
(401, 403) is tested beside the remote write's in tests/server/test_prometheus_writer.py."""

from __future__ import annotations

import gzip
import json
import time
import uuid
from typing import Any

import httpx
import pytest
from conjure_python_client import ConjureEncoder
from nominal_api import storage_writer_api as w

from tests.client_view import ResultView
from tests.conftest import ServerProcess
from tests.log_file import stored_rows
from tests.wire import (
    NANOS,
    Client,
    channel_variable,
    new_id,
    seen_by_subscriber,
    series_node,
    subscription,
)

JSON = {"Content-Type": "application/json"}


def new_rid() -> str:
    return f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"


def path(rid: str) -> str:
    return f"/storage/writer/v1/telegraf/{rid}"


def metric(name: str, fields: dict[str, Any], t: int, tags: dict[str, str] | None = None) -> Any:
    return w.TelegrafMetric(fields=fields, name=name, tags=tags or {}, timestamp=t)


def conjure_body(*metrics: Any) -> bytes:
    request = w.WriteTelegrafBatchesRequest(metrics=list(metrics))
    return json.dumps(ConjureEncoder().default(request)).encode()


def post(server: ServerProcess, rid: str, body: bytes, headers: dict[str, str] = JSON) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path(rid)}", content=body, headers=headers, timeout=30)


async def test_a_live_subscriber_sees_telegraf_metrics_as_they_are_written(server: ServerProcess) -> None:
    rid = new_rid()
    host = {"host": "raynor", "cpu": "cpu-total"}
    client = await Client.connect(server.ws_url)
    try:
        sub_id = new_id()
        variables = {"x": channel_variable(rid, "cpu.usage_idle", host)}
        await client.subscribe({sub_id: subscription(series_node(), variables, 600, lateness_s=600)})
        assert (await client.creation(sub_id))["type"] == "success"
        view = ResultView(600 * NANOS)
        view.apply(await client.update(sub_id))
        t0 = time.time_ns() - 30 * NANOS
        idle = [(t0 + i * 500_000_001, 90.0 + i / 8) for i in range(20)]
        body = conjure_body(*(metric("cpu", {"usage_idle": v, "usage_user": 1.0}, t, host) for t, v in idle))
        r = post(server, rid, gzip.compress(body), {**JSON, "Content-Encoding": "gzip"})
        assert r.status_code == 200, r.text
        while view.ungrouped().point_count() < len(idle):
            view.apply(await client.update(sub_id, timeout=60))
        assert view.ungrouped().normalized() == idle
    finally:
        await client.close()


async def test_every_field_kind_and_the_single_metric_form(server: ServerProcess) -> None:
    rid = new_rid()
    t0 = time.time_ns() - 60 * NANOS + 7  # nanoseconds kept as sent
    tags = {"host": "h1"}
    body = conjure_body(
        metric("disk", {"used_percent": 12.5, "inodes": 2**53, "ro": True, "state": "ok"}, t0, tags),
        metric("disk", {"used_percent": 13.0, "inodes": -3, "ro": False, "state": "full"}, t0 + 1, tags),
    )
    assert post(server, rid, body).status_code == 200
    # Telegraf's standard (single metric) form, as its json serializer writes it without batching
    single = {"fields": {"load1": 0.25}, "name": "system", "tags": {"host": "h1"}, "timestamp": t0 + 2}
    r = post(server, rid, json.dumps(single).encode())
    assert r.status_code == 200, r.text
    assert await seen_by_subscriber(server, rid, "disk.used_percent", tags) == [(t0, 12.5), (t0 + 1, 13.0)]
    assert await seen_by_subscriber(server, rid, "disk.inodes", tags) == [(t0, float(2**53)), (t0 + 1, -3.0)]
    assert await seen_by_subscriber(server, rid, "disk.ro", tags) == [(t0, 1.0), (t0 + 1, 0.0)]
    assert await seen_by_subscriber(server, rid, "disk.state", tags, kind="enum") == [
        (t0, "ok"),
        (t0 + 1, "full"),
    ]
    assert await seen_by_subscriber(server, rid, "system.load1", tags) == [(t0 + 2, 0.25)]
    # the tags are the series': another host's holds nothing
    assert await seen_by_subscriber(server, rid, "disk.used_percent", {"host": "h2"}) == []


T = 1_700_000_000 * NANOS
GOOD = {"fields": {"v": 1.0}, "name": "m", "tags": {}, "timestamp": T}


def batch(*metrics: dict[str, Any]) -> bytes:
    return json.dumps({"metrics": [GOOD, *metrics]}).encode()


# name: (body, status, errorName, a part of the message); each beside a valid metric
REFUSALS: dict[str, tuple[bytes, int, str, str]] = {
    "a timestamp in seconds as a float": (
        batch({**GOOD, "timestamp": 1700000000.5}),
        400,
        "Default:InvalidArgument",
        'json_timestamp_units = "1ns"',
    ),
    "a timestamp as a string": (
        batch({**GOOD, "timestamp": "2023-11-14T22:13:20Z"}),
        400,
        "Default:InvalidArgument",
        "is not an integer of nanoseconds",
    ),
    "a negative timestamp": (batch({**GOOD, "timestamp": -1}), 400, "Default:InvalidArgument", "is outside"),
    "a null field": (batch({**GOOD, "fields": {"x": None}}), 400, "Default:InvalidArgument", "null"),
    "an object field": (batch({**GOOD, "fields": {"x": {"a": 1}}}), 400, "Default:InvalidArgument", "object"),
    "an integer a double cannot hold": (
        batch({**GOOD, "fields": {"big": 2**53 + 1}}),
        400,
        "Default:InvalidArgument",
        "9007199254740993 has no exact double",
    ),
    "an unknown member": (
        batch({**GOOD, "unit": "s"}),
        400,
        "Default:InvalidArgument",
        "unknown field `unit`",
    ),
    "no name": (batch({"fields": {"x": 1}, "timestamp": T}), 400, "Default:InvalidArgument", "name"),
    "neither form": (b'{"tags": {}}', 400, "Default:InvalidArgument", "neither `metrics` nor a metric"),
    "not JSON": (b"cpu,host=a usage=1 1700000000", 400, "Default:InvalidArgument", "not Telegraf's JSON"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refused_telegraf_requests_store_nothing(server: ServerProcess, name: str) -> None:
    rid = new_rid()
    body, status, error_name, fragment = REFUSALS[name]
    r = post(server, rid, body)
    assert r.status_code == status, r.text
    error = r.json()
    assert error["errorName"] == error_name and fragment in error["message"], error
    assert stored_rows(server.data_dir, rid) == []


def test_an_unknown_content_encoding_is_refused_by_name(server: ServerProcess) -> None:
    rid = new_rid()
    r = post(server, rid, batch(), {**JSON, "Content-Encoding": "br"})
    assert r.status_code == 415 and r.json()["errorName"] == "Sparkwire:UnsupportedContentEncoding", r.text
    assert stored_rows(server.data_dir, rid) == []


def test_too_many_points_is_refused_whole(tmp_path_factory: pytest.TempPathFactory) -> None:
    """SPARKWIRE_MAX_POINTS_PER_REQUEST counts a metric's fields as points (413, nothing stored)."""
    from tests.conftest import start_server

    base = tmp_path_factory.mktemp("telegraf-limits")
    env = {"SPARKWIRE_MAX_POINTS_PER_REQUEST": "5"}
    proc = start_server(base / "data", base / "server.log", env=env)
    try:
        rid = new_rid()
        three = {**GOOD, "fields": {"a": 1, "b": 2, "c": 3}}
        r = post(proc, rid, json.dumps({"metrics": [three, {**three, "timestamp": T + 1}]}).encode())
        assert r.status_code == 413 and r.json()["errorName"] == "Default:RequestEntityTooLarge", r.text
        assert stored_rows(proc.data_dir, rid) == []
        assert post(proc, rid, json.dumps({"metrics": [three]}).encode()).status_code == 200
        assert len(stored_rows(proc.data_dir, rid)) == 3
    finally:
        proc.stop()


def test_the_telegraf_writer_is_in_the_openapi_document(server: ServerProcess) -> None:
    paths = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()["paths"]
    operation = paths["/storage/writer/v1/telegraf/{dataSourceRid}"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TelegrafBody"
    }
    assert "413" in operation["responses"]
