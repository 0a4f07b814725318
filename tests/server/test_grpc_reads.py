"""The `nominal` SDK's reads over gRPC, on the same port as HTTP (app/transport/preface.py,
app/api/grpc_metadata.py, docs/decisions/0077-grpc-on-the-same-port.md): `dataset.get_channel(name)`,
`dataset.get_channels()` (ChannelMetadataService) and `client.search_datasets()` (WorkspaceService,
then CatalogService.searchDatasets over HTTP), run from `.venv-nominal` as the user runs them, after
points were written; a wrong token refused UNAUTHENTICATED; and HTTP/1.1 and WebSockets served on the
same port meanwhile, a gRPC connection open beside them."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from nominal.protos.channelmetadata.v1 import channel_metadata_pb2 as cm
from nominal.protos.channelmetadata.v1 import channel_metadata_pb2_grpc as cm_grpc
from nominal.protos.types.series import series_pb2

from tests.conftest import ROOT, ServerProcess, start_server
from tests.wire import (
    NANOS,
    Client,
    channel_variable,
    full_entries,
    new_id,
    series_node,
    subscription,
    write_points,
)

NOMINAL_PYTHON = ROOT / ".venv-nominal" / "bin" / "python"
Json = dict[str, Any]
ALL = {"Authorization": "Bearer all-token"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with a tokens file, ready once Spark runs (the WebSocket test subscribes)."""
    base = tmp_path_factory.mktemp("grpc-reads")
    tokens = base / "tokens.json"
    entries = [
        {"token": "all-token", "sub": "all", "dataSourceRids": ["*"]},
        {"token": "mine-token", "sub": "mine", "dataSourceRids": ["ri.mine.*"]},
    ]
    tokens.write_text(json.dumps({"tokens": entries}))
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_TOKENS_FILE": str(tokens)})
    yield proc
    proc.stop()


SDK_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from nominal.core import NominalClient

    base_url, token, rid, other = sys.argv[1:5]
    client = NominalClient.from_token(token, base_url=base_url)
    out = {}
    try:
        # first: its workspace over gRPC (WorkspaceService), then searchDatasets over HTTP
        out["search"] = sorted(d.rid for d in client.search_datasets())
        dataset = client.get_dataset(rid)
        started = time.monotonic()
        speed = dataset.get_channel("speed")
        out["seconds"] = time.monotonic() - started
        out["speed"] = [speed.name, speed.data_source, str(speed.data_type), speed.unit, speed.description]
        try:
            dataset.get_channel("no.such.channel")
            out["missing"] = "found"
        except ValueError as exc:
            out["missing"] = str(exc)
        out["channels"] = sorted((c.name, c.data_source, str(c.data_type)) for c in dataset.get_channels())
        out["named"] = sorted(c.name for c in dataset.get_channels(names=["drive.mode", "nope"]))
        out["exact"] = [d.rid for d in client.search_datasets(exact_match=rid[-12:].upper())]
        out["labelled"] = [d.rid for d in client.search_datasets(labels=["a-label"])]
        try:
            out["other_channels"] = [c.name for c in client.get_dataset(other).get_channels()]
        except Exception as exc:
            out["other_channels"] = [type(exc).__name__]
    except Exception as exc:
        out["error"] = [type(exc).__name__, str(exc)]
    print("RESULT" + json.dumps(out))
    """
)


def run_sdk(server: ServerProcess, tmp_path: Path, token: str, rid: str, other: str) -> Json:
    assert NOMINAL_PYTHON.exists(), "the nominal SDK's environment is missing: run `make install`"
    script = tmp_path / "grpc_reads_with_nominal.py"
    script.write_text(SDK_SCRIPT)
    done = subprocess.run(
        [str(NOMINAL_PYTHON), str(script), server.base_url, token, rid, other],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT"))
    result: Json = json.loads(line.removeprefix("RESULT"))
    return result


async def subscribed(server: ServerProcess, rid: str, channel: str) -> list[tuple[int, Any]]:
    """A fresh subscription's FullResult over the last hour of a channel, with the token."""
    client = await Client.connect(server.ws_url, additional_headers=ALL)
    try:
        sub_id = new_id()
        await client.subscribe(
            {sub_id: subscription(series_node(), {"x": channel_variable(rid, channel)}, 3600)}
        )
        creation = await client.creation(sub_id)
        assert creation["type"] == "success", creation
        kind, entries = full_entries(await client.update(sub_id))
        assert kind == "numeric"
        return entries
    finally:
        await client.close()


@pytest.fixture(scope="module")
async def written(secured: ServerProcess) -> Json:
    mine, theirs = f"ri.mine.dataset.{uuid.uuid4().hex}", f"ri.theirs.dataset.{uuid.uuid4().hex}"
    t0 = time.time_ns() - 60 * NANOS
    async with httpx.AsyncClient(base_url=secured.base_url, headers=ALL) as c:
        for rid in (mine, theirs):
            speed = [(t0 + i * NANOS, 1.5 * i) for i in range(5)]
            await write_points(secured.base_url, rid, "speed", speed, {"vehicle": "a"}, client=c)
            await write_points(secured.base_url, rid, "speed", speed, {"vehicle": "b"}, client=c)
            await write_points(secured.base_url, rid, "drive.mode", [(t0, "park")], client=c)
    return {"mine": mine, "theirs": theirs, "t0": t0}


async def test_the_nominal_sdk_reads_channels_and_datasets_over_grpc(
    secured: ServerProcess, written: Json, tmp_path: Path
) -> None:
    mine, theirs = written["mine"], written["theirs"]
    out = await asyncio.to_thread(run_sdk, secured, tmp_path, "all-token", mine, theirs)
    assert "error" not in out, out
    # a channel is a data source's name whatever its tags; no unit or description is stored
    assert out["speed"] == ["speed", mine, "ChannelDataType.DOUBLE", None, None]
    assert out["seconds"] < 3.0, out  # answered, not the ~4 s of a connection the server cannot speak
    assert out["missing"] == f"channel 'no.such.channel' not found in dataset {mine!r}"
    assert out["channels"] == [
        ["drive.mode", mine, "ChannelDataType.STRING"],
        ["speed", mine, "ChannelDataType.DOUBLE"],
    ]
    assert out["named"] == ["drive.mode"]  # a name without a channel is left out
    assert mine in out["search"] and theirs in out["search"]  # (the module's server holds only these)
    assert out["exact"] == [mine]  # case-insensitive substring of the name
    assert out["labelled"] == []  # no data source has labels
    assert out["other_channels"] == ["drive.mode", "speed"]


async def test_a_token_sees_only_what_it_reaches_and_a_wrong_one_is_refused(
    secured: ServerProcess, written: Json, tmp_path: Path
) -> None:
    mine, theirs = written["mine"], written["theirs"]
    out = await asyncio.to_thread(run_sdk, secured, tmp_path, "mine-token", mine, theirs)
    assert "error" not in out, out.get("error")
    assert out["search"] == [mine]
    assert out["other_channels"] == ["ValueError"], out  # get_dataset finds no such dataset
    wrong = await asyncio.to_thread(run_sdk, secured, tmp_path, "wrong-token", mine, theirs)
    assert wrong["error"][0] == "NominalAuthenticationError", wrong  # gRPC's UNAUTHENTICATED
    target = f"127.0.0.1:{secured.port}"
    ask = cm.BatchGetChannelMetadataRequest(
        channel_identifiers=[cm.ChannelIdentifier(data_source_rid=mine, channel_name="speed")]
    )
    with grpc.insecure_channel(target) as channel:
        stub = cm_grpc.ChannelMetadataServiceStub(channel)
        for metadata in [(("authorization", "Bearer wrong-token"),), ()]:
            with pytest.raises(grpc.RpcError) as refused:
                stub.BatchGetChannelMetadata(ask, metadata=metadata, timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, refused.value
        answer = stub.BatchGetChannelMetadata(
            ask, metadata=(("authorization", "Bearer all-token"),), timeout=10
        )
        assert [(m.channel_identifier.channel_name, m.data_type) for m in answer.channel_metadata] == [
            ("speed", series_pb2.DOUBLE)
        ]
        both = cm.BatchGetChannelMetadataRequest(
            channel_identifiers=[
                cm.ChannelIdentifier(data_source_rid=rid, channel_name="speed") for rid in (theirs, mine)
            ]
        )
        mine_token = (("authorization", "Bearer mine-token"),)
        answer = stub.BatchGetChannelMetadata(both, metadata=mine_token, timeout=10)
        assert [m.channel_identifier.data_source_rid for m in answer.channel_metadata] == [mine]


async def test_http_and_websockets_are_served_on_the_same_port_beside_grpc(
    secured: ServerProcess, written: Json
) -> None:
    target = f"127.0.0.1:{secured.port}"
    ask = cm.GetChannelMetadataRequest(
        channel_identifier=cm.ChannelIdentifier(data_source_rid=written["mine"], channel_name="drive.mode")
    )
    with grpc.insecure_channel(target) as channel:  # one HTTP/2 connection, kept open throughout
        stub = cm_grpc.ChannelMetadataServiceStub(channel)
        auth = (("authorization", "Bearer all-token"),)
        assert (
            stub.GetChannelMetadata(ask, metadata=auth, timeout=10).channel_metadata.data_type
            == series_pb2.STRING
        )
        rid = f"ri.mine.dataset.{uuid.uuid4().hex}"
        t0 = time.time_ns() - 30 * NANOS
        points = [(t0 + i * NANOS, float(i * i)) for i in range(10)]
        async with httpx.AsyncClient(base_url=secured.base_url, headers=ALL) as c:
            await write_points(secured.base_url, rid, "x", points, client=c)
        r = httpx.get(f"{secured.base_url}/series", headers=ALL)
        assert (
            r.status_code == 200
            and {"dataSourceRid": rid, "channel": "x", "tags": {}, "type": "double"} in r.json()
        )
        assert await subscribed(secured, rid, "x") == points
        with pytest.raises(grpc.RpcError) as missing:
            stub.GetChannelMetadata(
                cm.GetChannelMetadataRequest(
                    channel_identifier=cm.ChannelIdentifier(data_source_rid=rid, channel_name="y")
                ),
                metadata=auth,
                timeout=10,
            )
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        # a service Sparkwire does not serve is refused at once, by its status, not left to time out
        unserved = channel.unary_unary(
            "/nominal.asset.v2.AssetService/GetAssets",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.RpcError) as refused:
            unserved(b"", metadata=auth, timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
    # a preface split across writes is still recognised; a request that only begins like it is HTTP
    with socket.create_connection(("127.0.0.1", secured.port), timeout=10) as s:
        s.sendall(b"PRI * HT")
        time.sleep(0.2)
        s.sendall(b"TP/2.0\r\n\r\nSM\r\n\r\n")
        frame = s.recv(9)  # the server's first frame: its SETTINGS (type 4)
        assert len(frame) == 9 and frame[3] == 4, frame
    with socket.create_connection(("127.0.0.1", secured.port), timeout=10) as s:
        s.sendall(b"PRIX / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(12).startswith(b"HTTP/1.1 "), "an HTTP/1.1 answer"


def test_search_datasets_pages_and_refuses_an_ingest_date_by_name(
    secured: ServerProcess, written: Json
) -> None:
    url = f"{secured.base_url}/catalog/v1/search-datasets-v2"
    query = {"type": "and", "and": [{"type": "archiveStatus", "archiveStatus": False}]}
    r = httpx.post(url, json={"query": query}, headers=ALL)
    assert r.status_code == 200, r.text
    every = [d["rid"] for d in r.json()["results"]]
    assert {written["mine"], written["theirs"]} <= set(every) and every == sorted(every)
    seen, token = [], None
    while True:  # one a page, until no token comes back
        page = httpx.post(url, json={"query": query, "pageSize": 1, "token": token}, headers=ALL).json()
        seen += [d["rid"] for d in page["results"]]
        token = page.get("nextPageToken")
        if token is None:
            break
    assert seen == every
    refused = httpx.post(
        url,
        json={
            "query": {"type": "ingestedBeforeInclusive", "ingestedBeforeInclusive": "2030-01-01T00:00:00Z"}
        },
        headers=ALL,
    )
    assert refused.status_code == 400
    assert refused.json()["errorName"] == "Sparkwire:SearchOptionNotSupported"
    assert httpx.post(url, json={"query": query}).status_code == 401
    assert "/catalog/v1/search-datasets-v2" in httpx.get(f"{secured.base_url}/openapi.json").json()["paths"]


@pytest.fixture(scope="module")
def deadline_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A 4 s read deadline; no Spark is needed here, so it is used once it serves HTTP."""
    base = tmp_path_factory.mktemp("grpc-deadline")
    env = {"SPARKWIRE_HANDSHAKE_TIMEOUT": "4"}
    proc = start_server(base / "data", base / "server.log", env=env, ready_path="/healthz")
    yield proc
    proc.stop()


def _closed_after(port: int, first: bytes, wait: float = 0.0) -> float:
    """Seconds from opening a connection until the server closes it, `first` sent after `wait`."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        started = time.monotonic()
        if first:
            time.sleep(wait)
            s.sendall(first)
        assert s.recv(1024) == b"", "the server answered"
        return time.monotonic() - started


def test_a_silent_or_half_begun_connection_is_closed_at_the_read_deadline(
    deadline_server: ServerProcess,
) -> None:
    port = deadline_server.port
    for first in (b"", b"PRI * HTTP/2.0\r\n"):  # nothing; a part of the preface
        assert 3.5 < _closed_after(port, first) < 8
    # headers begun 3 s in: the deadline still counts from the connection's opening (4 s), not from
    # its first byte (which would close it at 7 s)
    assert 3.5 < _closed_after(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", wait=3.0) < 6
