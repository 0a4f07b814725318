"""Prometheus remote write (app/ingest/prometheus.py) against a real server: nominal-api-protos' own
WriteRequest, snappy-compressed as the remote write specification says, and Debian's real
`prometheus` scraping Sparkwire's /metrics with `remote_write` to it, its samples charted live by a
subscription. Also the auth of both agents' writers (this one and Telegraf's) and the health check."""

from __future__ import annotations

import math
import os
import shutil
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import cramjam
import httpx
import pytest
from nominal.protos.write import prometheus_remote_write_pb2 as pb

from tests.client_view import ResultView
from tests.conftest import ServerProcess, free_port, start_server
from tests.hostile import make_jwt
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

# what Prometheus sends with every remote write request
REMOTE_WRITE = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
}
STALE_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]


def new_rid() -> str:
    return f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"


def path(rid: str) -> str:
    return f"/storage/writer/v1/prometheus/{rid}"


def series(labels: dict[str, str], samples: list[tuple[int, float]]) -> pb.TimeSeries:
    """A TimeSeries; `samples` as (milliseconds since the epoch, value)."""
    return pb.TimeSeries(
        labels=[pb.Label(name=k, value=v) for k, v in sorted(labels.items())],
        samples=[pb.Sample(value=v, timestamp=t) for t, v in samples],
    )


def snappy_body(*timeseries: pb.TimeSeries) -> bytes:
    return bytes(
        cramjam.snappy.compress_raw(pb.WriteRequest(timeseries=list(timeseries)).SerializeToString())
    )


def post(
    server: ServerProcess, rid: str, body: bytes, headers: dict[str, str] = REMOTE_WRITE
) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path(rid)}", content=body, headers=headers, timeout=30)


async def test_labels_become_channel_and_tags_and_samples_points(server: ServerProcess) -> None:
    rid = new_rid()
    t0 = time.time_ns() // 1_000_000 - 60_000  # remote write timestamps are milliseconds
    labels = {"__name__": "node_load1", "instance": "h1:9100", "job": "node", "empty": ""}
    load = [(t0 + i * 15_000, 0.5 + i) for i in range(3)]
    cpu = {"__name__": "node_cpu_seconds_total", "cpu": "0", "mode": "idle", "job": "node"}
    body = snappy_body(
        series(labels, load),
        series(cpu, [(t0, 1234.5), (t0 + 1, STALE_NAN)]),  # a staleness marker: no point
        series({"__name__": "nan_gauge"}, [(t0, math.nan)]),
    )
    r = post(server, rid, body)
    assert r.status_code == 200, r.text
    tags = {"instance": "h1:9100", "job": "node"}  # an empty label is no label (Prometheus' rule)
    assert await seen_by_subscriber(server, rid, "node_load1", tags) == [(t * 1_000_000, v) for t, v in load]
    cpu_tags = {"cpu": "0", "mode": "idle", "job": "node"}
    assert await seen_by_subscriber(server, rid, "node_cpu_seconds_total", cpu_tags) == [
        (t0 * 1_000_000, 1234.5)
    ]
    assert [(c, ts, v) for c, _, ts, v, _ in stored_rows(server.data_dir, rid) if c == "nan_gauge"] == [
        ("nan_gauge", t0 * 1_000_000, None)  # a NaN other than the staleness marker is a NaN point
    ]


def test_nominal_apis_client_headers_are_accepted(server: ServerProcess) -> None:
    """nominal-api's write_prometheus_batches sends application/octet-stream and no version header."""
    rid = new_rid()
    body = snappy_body(series({"__name__": "x"}, [(1_700_000_000_000, 2.0)]))
    r = post(server, rid, body, {"Content-Type": "application/octet-stream", "Content-Encoding": "snappy"})
    assert r.status_code == 200, r.text
    assert [(c, ts, v) for c, _, ts, v, _ in stored_rows(server.data_dir, rid)] == [
        ("x", 1_700_000_000_000 * 1_000_000, 2.0)
    ]


T = 1_700_000_000_000
GOOD = series({"__name__": "fine"}, [(T, 1.0)])

# name: (body, headers, status, errorName, a part of the message); bodies hold a valid series too
REFUSALS: dict[str, tuple[bytes, dict[str, str], int, str, str]] = {
    "no __name__": (
        snappy_body(GOOD, series({"job": "j"}, [(T, 1.0)])),
        REMOTE_WRITE,
        400,
        "Default:InvalidArgument",
        "no __name__ label",
    ),
    "a label twice": (
        snappy_body(
            GOOD,
            pb.TimeSeries(
                labels=[pb.Label(name="__name__", value="a"), pb.Label(name="a", value="1")] * 2,
                samples=[pb.Sample(value=1.0, timestamp=T)],
            ),
        ),
        REMOTE_WRITE,
        400,
        "Default:InvalidArgument",
        "given twice",
    ),
    "a timestamp before the epoch": (
        snappy_body(GOOD, series({"__name__": "old"}, [(-5000, 1.0)])),
        REMOTE_WRITE,
        400,
        "Default:InvalidArgument",
        "seconds -5",
    ),
    "not a protobuf": (
        bytes(cramjam.snappy.compress_raw(b"\xff\xff\xff\xff")),
        REMOTE_WRITE,
        400,
        "Default:InvalidArgument",
        "not a remote write WriteRequest",
    ),
    "not snappy": (
        b"\x05not snappy at all",
        REMOTE_WRITE,
        400,
        "Default:InvalidArgument",
        "not valid snappy data",
    ),
    "snappy's framed format": (
        bytes(cramjam.snappy.compress(pb.WriteRequest(timeseries=[GOOD]).SerializeToString())),
        REMOTE_WRITE,
        400,
        "Default:InvalidArgument",
        "snappy",
    ),
    "a snappy block declaring 1 GiB": (
        b"\x80\x80\x80\x80\x04" + b"\x00" * 16,
        REMOTE_WRITE,
        413,
        "Default:RequestEntityTooLarge",
        "a snappy block of 1073741824 bytes",
    ),
    "gzip": (
        snappy_body(GOOD),
        {**REMOTE_WRITE, "Content-Encoding": "gzip"},
        415,
        "Sparkwire:UnsupportedContentEncoding",
        "snappy",
    ),
    "no Content-Encoding": (
        pb.WriteRequest(timeseries=[GOOD]).SerializeToString(),
        {k: v for k, v in REMOTE_WRITE.items() if k != "Content-Encoding"},
        415,
        "Sparkwire:UnsupportedContentEncoding",
        "Content-Encoding none",
    ),
    "JSON": (
        b'{"timeseries": []}',
        {**REMOTE_WRITE, "Content-Type": "application/json"},
        415,
        "Sparkwire:UnsupportedMediaType",
        "application/json",
    ),
    "remote write 2.0": (
        snappy_body(GOOD),
        {
            **REMOTE_WRITE,
            "Content-Type": "application/x-protobuf;proto=io.prometheus.write.v2.Request",
            "X-Prometheus-Remote-Write-Version": "2.0.0",
        },
        415,
        "Sparkwire:UnsupportedMediaType",
        "remote write 2.0",
    ),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refused_remote_writes_store_nothing(server: ServerProcess, name: str) -> None:
    rid = new_rid()
    body, headers, status, error_name, fragment = REFUSALS[name]
    r = post(server, rid, body, headers)
    assert r.status_code == status, r.text
    error = r.json()
    assert error["errorName"] == error_name and fragment in error["message"], error
    assert stored_rows(server.data_dir, rid) == []


def test_remote_write_and_its_health_check_are_in_the_openapi_document(server: ServerProcess) -> None:
    paths = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()["paths"]
    operations = paths["/storage/writer/v1/prometheus/{dataSourceRid}"]
    assert "application/x-protobuf" in operations["post"]["requestBody"]["content"]
    assert operations["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "type": "boolean"
    }


SECRET = "agents-secret-that-is-long-enough-for-hs256"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("agents-auth")
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_JWT_SECRET": SECRET})
    yield proc
    proc.stop()


def test_the_writers_auth_applies_to_both_agents(guarded: ServerProcess) -> None:
    rid, other = new_rid(), new_rid()
    body = snappy_body(GOOD)
    telegraf = f"{guarded.base_url}/storage/writer/v1/telegraf/{rid}"
    metric = b'{"metrics": [{"fields": {"v": 1}, "name": "m", "tags": {}, "timestamp": 5}]}'
    wrong = f"Bearer {make_jwt(SECRET, [other], 600)}"
    right = f"Bearer {make_jwt(SECRET, [rid], 600)}"
    # before a byte of the body is read: the health check, the remote write, Telegraf's
    health = httpx.get(f"{guarded.base_url}{path(rid)}", timeout=10)
    assert health.status_code == 401 and health.json()["errorName"] == "Default:Unauthorized", health.text
    assert post(guarded, rid, body).status_code == 401
    assert httpx.post(telegraf, content=metric, timeout=10).status_code == 401
    assert post(guarded, rid, body, {**REMOTE_WRITE, "Authorization": wrong}).status_code == 403
    assert (
        httpx.post(telegraf, content=metric, headers={"Authorization": wrong}, timeout=10).status_code == 403
    )
    assert stored_rows(guarded.data_dir, rid) == []
    ok = httpx.get(f"{guarded.base_url}{path(rid)}", headers={"Authorization": right}, timeout=10)
    assert ok.status_code == 200 and ok.json() is True
    assert post(guarded, rid, body, {**REMOTE_WRITE, "Authorization": right}).status_code == 200
    assert (
        httpx.post(telegraf, content=metric, headers={"Authorization": right}, timeout=10).status_code == 200
    )
    assert sorted((c, ts, v) for c, _, ts, v, _ in stored_rows(guarded.data_dir, rid)) == [
        ("fine", T * 1_000_000, 1.0),
        ("m.v", 5, 1.0),
    ]


# --- Debian's real Prometheus ---------------------------------------------------------------------

PROMETHEUS = shutil.which("prometheus")


def _prometheus_or_skip() -> str:
    """The binary; in CI (make test installs it, .ci/system-deps) its absence fails the test."""
    if PROMETHEUS is not None:
        return PROMETHEUS
    if os.environ.get("CI"):
        pytest.fail("prometheus is not installed; `make system-deps` installs Debian's package")
    pytest.skip("prometheus is not installed (apt-get install --no-install-recommends prometheus)")


def _config(scrape_port: int, write_url: str) -> str:
    return f"""
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: sparkwire
    static_configs:
      - targets: ["127.0.0.1:{scrape_port}"]
remote_write:
  - url: "{write_url}"
    remote_timeout: 10s
    queue_config:
      batch_send_deadline: 500ms
      min_backoff: 100ms
      max_backoff: 1s
    metadata_config:
      send: false
"""


@pytest.fixture
def prometheus_writing(
    server: ServerProcess, tmp_path: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A real Prometheus in the foreground scraping the server's /metrics every second and remote
    writing to a fresh data source; yields the rid; stopped (and killed if it lingers) after."""
    binary = _prometheus_or_skip()
    rid = new_rid()
    port = int(server.base_url.rsplit(":", 1)[1])
    config = tmp_path / "prometheus.yml"
    config.write_text(_config(port, f"{server.base_url}{path(rid)}"))
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{free_port()}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        yield rid, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        print((tmp_path / "prometheus.log").read_text()[-3000:])  # shown when the test failed


async def test_a_real_prometheus_remote_writes_series_a_subscription_charts_live(
    server: ServerProcess, prometheus_writing: tuple[str, subprocess.Popen[bytes]]
) -> None:
    rid, proc = prometheus_writing
    port = server.base_url.rsplit(":", 1)[1]
    tags = {"instance": f"127.0.0.1:{port}", "job": "sparkwire"}
    client = await Client.connect(server.ws_url)
    try:
        sub_id = new_id()
        variables = {"x": channel_variable(rid, "up", tags)}  # Prometheus' own series per target
        await client.subscribe({sub_id: subscription(series_node(), variables, 600, lateness_s=600)})
        assert (await client.creation(sub_id))["type"] == "success"
        view = ResultView(600 * NANOS)
        view.apply(await client.update(sub_id))
        started = time.time_ns()
        deadline = time.monotonic() + 90
        counts: list[int] = []
        # live: the first scrapes' samples arrive, then newer ones in later updates
        while len(set(counts)) < 3:
            assert time.monotonic() < deadline, (
                f"points seen per update: {counts}; prometheus rc {proc.poll()}"
            )
            view.apply(await client.update(sub_id, timeout=60))
            counts.append(view.ungrouped().point_count())
        points = view.ungrouped().normalized()
        assert all(v == 1.0 for _, v in points), points  # the target was up at every scrape
        stamps = [t for t, _ in points]
        assert stamps == sorted(stamps) and stamps[-1] > started - 5 * NANOS
        assert all(t % 1_000_000 == 0 for t in stamps)  # Prometheus' milliseconds, in nanoseconds
    finally:
        await client.close()
    # Sparkwire's own metrics, scraped from its /metrics, are channels of the data source too
    assert await seen_by_subscriber(server, rid, "sparkwire_points_ingested_total", tags)
    # and every series is listed where the dashboard's pickers find them (GET /series)
    listed = httpx.get(f"{server.base_url}/series", timeout=30).json()
    mine = {
        (s["channel"], tuple(sorted(s["tags"].items())), s["type"])
        for s in listed
        if s["dataSourceRid"] == rid
    }
    assert ("up", tuple(sorted(tags.items())), "double") in mine
    assert ("scrape_duration_seconds", tuple(sorted(tags.items())), "double") in mine
