"""Every HTTP error is a Conjure error: conjure_python_client's own services (the generated
`NominalChannelWriterService` and `CatalogService` of nominal-api, or a bare `Service` for paths
they do not call) turn each refusal into a `ConjureHTTPError`, whose error code and name are read
from the body as any Conjure client reads them. Also `POST /catalog/v1/datasets/multiple`, decoded
by ConjureDecoder into nominal-api's `EnrichedDataset`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import pytest
import requests
from conjure_python_client import ConjureDecoder, RequestsClient, Service, ServiceConfiguration
from conjure_python_client._http.requests_client import ConjureHTTPError
from nominal_api import api, scout_catalog, storage_writer_api

from tests.conftest import ROOT, ServerProcess, free_port
from tests.ingest_server import LIMITS, TOKEN, authorized, limited, limited_rid
from tests.log_file import stored_rows
from tests.wire import NANOS, write_points

__all__ = ["limited"]  # the fixture, imported so pytest finds it

S = TypeVar("S")


class Raw(Service):
    """A Conjure service without endpoints of its own: `call` goes through `Service._request`, the
    method every generated endpoint calls, which raises ConjureHTTPError on an error status."""

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self._request(method, self._uri + path, **kwargs)


def client(service: type[S], base_url: str) -> S:
    return RequestsClient.create(
        service, "sparkwire-tests", ServiceConfiguration(uris=[base_url], max_num_retries=0)
    )


def refused(call: Callable[[], object]) -> ConjureHTTPError:
    with pytest.raises(ConjureHTTPError) as info:
        call()
    return info.value


def assert_conjure(error: ConjureHTTPError, status: int, code: str, name: str) -> None:
    assert error.response is not None
    assert error.response.status_code == status
    assert (error.error_code, error.error_name) == (code, name), error
    assert error.error_instance_id and len(error.error_instance_id) == 36
    assert isinstance(error.parameters, dict)
    body = error.response.json()  # the fields Sparkwire answered before stand beside Conjure's
    assert (body["name"], body["statusCode"], body["params"]) == (name, status, error.parameters)
    assert body["message"]


def write_request(rid: str, seconds: int = 1_700_000_000) -> storage_writer_api.WriteBatchesRequestExternal:
    point = storage_writer_api.DoublePoint(timestamp=api.Timestamp(seconds=seconds, nanos=0), value=1.5)
    batch = storage_writer_api.RecordsBatchExternal(
        channel="p", tags={}, points=storage_writer_api.PointsExternal(double=[point])
    )
    return storage_writer_api.WriteBatchesRequestExternal(batches=[batch], data_source_rid=rid)


def test_write_batches_through_nominal_apis_service(server: ServerProcess) -> None:
    rid = f"ri.errors.ok.{time.time_ns()}"
    client(storage_writer_api.NominalChannelWriterService, server.base_url).write_batches(
        "", write_request(rid)
    )
    assert [(t, v) for _, _, t, v, _ in stored_rows(server.data_dir, rid)] == [(1_700_000_000 * NANOS, 1.5)]


def test_400_invalid_argument(server: ServerProcess) -> None:
    writer = client(storage_writer_api.NominalChannelWriterService, server.base_url)
    rid = f"ri.errors.400.{time.time_ns()}"
    error = refused(lambda: writer.write_batches("", write_request(rid, seconds=10**12)))
    assert_conjure(error, 400, "INVALID_ARGUMENT", "Default:InvalidArgument")
    assert stored_rows(server.data_dir, rid) == []


def test_401_unauthorized(limited: ServerProcess) -> None:
    writer = client(storage_writer_api.NominalChannelWriterService, limited.base_url)
    for auth_header in ("", "Bearer not-a-token"):
        error = refused(lambda h=auth_header: writer.write_batches(h, write_request(limited_rid("401"))))
        assert_conjure(error, 401, "UNAUTHORIZED", "Default:Unauthorized")
        assert error.response is not None and error.response.headers["WWW-Authenticate"] == "Bearer"


def test_403_permission_denied(limited: ServerProcess, server: ServerProcess) -> None:
    writer = client(storage_writer_api.NominalChannelWriterService, limited.base_url)
    error = refused(lambda: writer.write_batches(f"Bearer {TOKEN}", write_request("ri.elsewhere.ds")))
    assert_conjure(error, 403, "PERMISSION_DENIED", "Default:PermissionDenied")
    assert "ri.elsewhere.ds" in error.response.json()["message"]
    origin = {"Origin": "https://elsewhere.example"}
    error = refused(
        lambda: client(Raw, server.base_url).call("POST", "/storage/writer/v1", json={}, headers=origin)
    )
    assert_conjure(error, 403, "PERMISSION_DENIED", "Default:PermissionDenied")


def test_403_and_401_of_a_websocket_handshake(limited: ServerProcess) -> None:
    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    }
    raw = client(Raw, limited.base_url)
    error = refused(lambda: raw.call("GET", "/persistent-compute/ws", headers=upgrade))
    assert_conjure(error, 401, "UNAUTHORIZED", "Default:Unauthorized")
    foreign = {**upgrade, **authorized(), "Origin": "https://elsewhere.example"}
    error = refused(lambda: raw.call("GET", "/persistent-compute/ws", headers=foreign))
    assert_conjure(error, 403, "PERMISSION_DENIED", "Default:PermissionDenied")


def test_404_and_405_from_the_router(server: ServerProcess) -> None:
    raw = client(Raw, server.base_url)
    error = refused(lambda: raw.call("GET", "/no/such/route"))
    assert_conjure(error, 404, "NOT_FOUND", "Default:NotFound")
    error = refused(lambda: raw.call("GET", "/storage/writer/v1"))
    assert_conjure(error, 405, "CUSTOM_CLIENT", "Sparkwire:MethodNotAllowed")
    assert error.response is not None and error.response.headers["Allow"] == "POST"


def test_413_request_entity_too_large(limited: ServerProcess) -> None:
    raw = client(Raw, limited.base_url)
    body = b" " * (LIMITS["max_request_bytes"] + 1)
    error = refused(lambda: raw.call("POST", "/storage/writer/v1", data=body, headers=authorized()))
    assert_conjure(error, 413, "REQUEST_ENTITY_TOO_LARGE", "Default:RequestEntityTooLarge")
    assert error.parameters["limit"] == str(LIMITS["max_request_bytes"])


def test_415_unsupported_content_encoding(server: ServerProcess) -> None:
    raw = client(Raw, server.base_url)
    error = refused(
        lambda: raw.call("POST", "/storage/writer/v1", data=b"{}", headers={"Content-Encoding": "br"})
    )
    assert_conjure(error, 415, "CUSTOM_CLIENT", "Sparkwire:UnsupportedContentEncoding")


def test_request_validation_is_400_not_422(server: ServerProcess) -> None:
    raw = client(Raw, server.base_url)
    error = refused(lambda: raw.call("POST", "/catalog/v1/datasets/multiple", json={"datasetRids": 5}))
    assert_conjure(error, 400, "INVALID_ARGUMENT", "Default:InvalidArgument")
    assert "datasetRids" in error.response.json()["message"]


def test_500_internal_from_an_unhandled_exception(tmp_path: Any) -> None:
    """The handlers on a small app of their own, served by uvicorn in its own process: the server's
    routes have no way to fail on purpose."""
    port = free_port()
    program = textwrap.dedent(
        f"""
        import uvicorn
        from fastapi import FastAPI
        from app.http.errors import install_error_handlers

        app = FastAPI()
        install_error_handlers(app)

        @app.get("/boom")
        async def boom() -> None:
            raise RuntimeError("a bug")

        uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning")
        """
    )
    log = tmp_path / "uvicorn.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", program], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{base}/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        error = refused(lambda: client(Raw, base).call("GET", "/boom"))
        assert_conjure(error, 500, "INTERNAL", "Default:Internal")
        assert "a bug" not in error.response.text  # the cause stays in the server's log
    finally:
        process.terminate()
        process.wait(30)
    logged = log.read_text()
    assert error.error_instance_id in logged
    assert "RuntimeError: a bug" in logged


# -- POST /catalog/v1/datasets/multiple -------------------------------------------------------------


async def test_enriched_datasets_decode_as_nominal_apis_type(server: ServerProcess) -> None:
    written = f"ri.catalog.main.dataset.{time.time_ns()}"
    await write_points(server.base_url, written, "p", [(time.time_ns(), 1.0)])
    await write_points(server.base_url, written, "q", [(time.time_ns(), 2.0)])
    new = "ri.catalog.main.dataset.6f1d5d1c-3b7a-4c1e-9a53-0c2a7f0e9b11"
    catalog = client(scout_catalog.CatalogService, server.base_url)
    datasets = catalog.get_enriched_datasets(
        "", scout_catalog.GetDatasetsRequest(dataset_rids=[written, new, written])
    )
    assert [type(d) for d in datasets] == [scout_catalog.EnrichedDataset] * 2
    first, second = datasets
    assert (first.rid, first.name, first.display_name) == (written, written, written)
    assert first.description == "Sparkwire data source (2 series)"
    assert first.allow_streaming and not first.is_archived
    assert first.timestamp_type == scout_catalog.WeakTimestampType.ABSOLUTE
    assert first.granularity == api.Granularity.NANOSECONDS
    assert first.last_ingest_status.type == "success"
    # A dataset without points yet is answered too, so a new user can start writing to it.
    assert (second.rid, second.uuid) == (new, "6f1d5d1c-3b7a-4c1e-9a53-0c2a7f0e9b11")
    assert second.description == "Sparkwire data source (0 series)"


def test_enriched_datasets_from_a_plain_list_of_rids(server: ServerProcess) -> None:
    r = httpx.post(f"{server.base_url}/catalog/v1/datasets/multiple", json=["ri.a", "ri.b"])
    assert r.status_code == 200, r.text
    datasets = ConjureDecoder().decode(r.json(), list[scout_catalog.EnrichedDataset])
    assert [d.rid for d in datasets] == ["ri.a", "ri.b"]
    assert datasets[0].uuid != datasets[1].uuid


def test_enriched_datasets_leave_out_what_the_token_does_not_reach(limited: ServerProcess) -> None:
    catalog = client(scout_catalog.CatalogService, limited.base_url)
    mine = limited_rid("catalog")
    request = scout_catalog.GetDatasetsRequest(dataset_rids=[mine, "ri.elsewhere.ds"])
    assert [d.rid for d in catalog.get_enriched_datasets(f"Bearer {TOKEN}", request)] == [mine]
    error = refused(lambda: catalog.get_enriched_datasets("Bearer nope", request))
    assert_conjure(error, 401, "UNAUTHORIZED", "Default:Unauthorized")
