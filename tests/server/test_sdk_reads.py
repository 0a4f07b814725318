"""The `nominal` SDK's reads that need no compute service, over a real server: points written with
tags on several channels, then read back through the SDK's own calls (run from `.venv-nominal`, as
tests/server/test_nominal_sdk.py does): `search_channels`, `channel.get_available_tags`,
`channel_to_series`, `datasource_to_dataframe`, `get_dataset(rid).bounds`; and through nominal-api's
requests (Conjure JSON) where a field is easier to drive by hand: the time range, the tag filters,
relative timestamps, and each refusal by name (docs/decisions/0074-sdk-reads.md)."""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import textwrap
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import zstandard
from conjure_python_client import ConjureEncoder
from nominal.protos.write import nominal_write_pb2 as pb
from nominal_api import api
from nominal_api import scout_compute_api as sc
from nominal_api import scout_dataexport_api as de

from app.api.export import MAX_EXPORT_POINTS
from tests.conftest import ROOT, ServerProcess, start_secured_server
from tests.wire import NANOS, write_points
from tests.wire import ts as ts_json

NOMINAL_PYTHON = ROOT / ".venv-nominal" / "bin" / "python"
Json = dict[str, Any]


def five_part_rid() -> str:
    return f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"


SDK_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from nominal.core import NominalClient
    from nominal.thirdparty.pandas import channel_to_series, datasource_to_dataframe

    base_url, rid, t_mid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = NominalClient.from_token("a-token", base_url=base_url)
    dataset = client.get_dataset(rid)
    b = dataset.bounds
    out = {"bounds": None if b is None else [b.start, b.end]}
    channels = {c.name: c for c in dataset.search_channels()}
    out["channels"] = sorted((c.name, str(c.data_type)) for c in channels.values())
    out["exact"] = sorted(c.name for c in dataset.search_channels(exact_match=["SPEED"]))
    out["tags"] = {k: sorted(v) for k, v in channels["speed"].get_available_tags().items()}
    out["tags_a"] = {
        k: sorted(v) for k, v in channels["speed"].get_available_tags(initial_tags={"vehicle": "a"}).items()
    }
    s = channel_to_series(channels["speed"], tags={"vehicle": "a"})
    out["series"] = [[int(t.value), float(v)] for t, v in s.items()]
    later = channel_to_series(channels["speed"], start=t_mid, tags={"vehicle": "b"}, enable_gzip=False)
    out["series_later"] = [[int(t.value), float(v)] for t, v in later.items()]
    df = datasource_to_dataframe(dataset, channel_exact_match=["mode"])
    out["frame"] = [[int(t.value), str(v)] for t, v in df["drive.mode"].items()]
    both = datasource_to_dataframe(dataset, tags={"vehicle": "b"}, channel_batch_size=1)
    out["both_columns"] = sorted(both.columns)
    out["both_speed"] = [[int(t.value), float(v)] for t, v in both["speed"].dropna().items()]
    out["both_mode"] = int(both["drive.mode"].notna().sum())
    print("RESULT" + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
async def written(server: ServerProcess) -> Json:
    rid = five_part_rid()
    t0 = (time.time_ns() // NANOS - 120) * NANOS + 123
    speed_a = [(t0 + i * 250_000_001, 10.0 + i / 4) for i in range(40)]
    speed_b = [(t0 + i * 600_000_000 + 7, -3.5 * i) for i in range(20)]
    mode = [(t0, "park"), (t0 + 2 * NANOS, "drive, fast"), (t0 + 5 * NANOS, "park")]
    await write_points(server.base_url, rid, "speed", speed_a, {"vehicle": "a", "site": "north"})
    await write_points(server.base_url, rid, "speed", speed_b, {"vehicle": "b", "site": "south"})
    await write_points(server.base_url, rid, "drive.mode", mode)
    return {"rid": rid, "t0": t0, "a": speed_a, "b": speed_b, "mode": mode}


def run_sdk(server: ServerProcess, tmp_path: Path, rid: str, t_mid: int) -> Json:
    assert NOMINAL_PYTHON.exists(), "the nominal SDK's environment is missing: run `make install`"
    script = tmp_path / "read_with_nominal.py"
    script.write_text(SDK_SCRIPT)
    done = subprocess.run(
        [str(NOMINAL_PYTHON), str(script), server.base_url, rid, str(t_mid)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT"))
    result: Json = json.loads(line.removeprefix("RESULT"))
    return result


async def test_the_nominal_sdk_reads_back_what_was_written(
    server: ServerProcess, written: Json, tmp_path: Path
) -> None:
    a, b, mode = written["a"], written["b"], written["mode"]
    t_mid = b[10][0]
    out = run_sdk(server, tmp_path, written["rid"], t_mid)
    every = [t for t, _ in a + b + mode]
    assert out["bounds"] == [min(every), max(every)]
    assert out["channels"] == [["drive.mode", "ChannelDataType.STRING"], ["speed", "ChannelDataType.DOUBLE"]]
    assert out["exact"] == ["speed"]  # case-insensitive, every string a substring
    assert out["tags"] == {"site": ["north", "south"], "vehicle": ["a", "b"]}
    assert out["tags_a"] == {"site": ["north"], "vehicle": ["a"]}
    assert [tuple(p) for p in out["series"]] == a  # exact timestamps (ns) and values
    assert [tuple(p) for p in out["series_later"]] == [p for p in b if p[0] >= t_mid]
    assert [tuple(p) for p in out["frame"]] == mode  # a comma inside a value survives the CSV
    # every channel, tags {"vehicle": "b"}: b's speeds; the mode has no such tag, so no point
    assert out["both_columns"] == ["drive.mode", "speed"]
    assert [tuple(p) for p in out["both_speed"]] == b
    assert out["both_mode"] == 0


# -- through nominal-api's requests ---------------------------------------------------------------
def enc(value: Any) -> Any:
    return ConjureEncoder.do_encode(value)


def ts(ns: int) -> api.Timestamp:
    return api.Timestamp(seconds=ns // NANOS, nanos=ns % NANOS)


def export_request(
    rid: str,
    columns: dict[str, tuple[str, str, dict[str, str]]],
    start: int,
    end: int,
    timestamps: de.TimestampFormat | None = None,
    resolution: de.ResolutionOption | None = None,
) -> Json:
    def node(kind: str, channel: str, tags: dict[str, str]) -> sc.Series:
        cs = sc.ChannelSeries(
            data_source=sc.DataSourceChannel(
                channel=sc.StringConstant(literal=channel),
                data_source_rid=sc.StringConstant(literal=rid),
                tags={k: sc.StringConstant(literal=v) for k, v in tags.items()},
                tags_to_group_by=[],
                group_by_tags=[],
            )
        )
        return (
            sc.Series(numeric=sc.NumericSeries(channel=cs))
            if kind == "numeric"
            else sc.Series(enum=sc.EnumSeries(channel=cs))
        )

    request = de.ExportDataRequest(
        channels=de.ExportChannels(
            time_domain=de.ExportTimeDomainChannels(
                channels=[
                    de.TimeDomainChannel(column_name=n, compute_node=node(*c)) for n, c in columns.items()
                ],
                merge_timestamp_strategy=de.MergeTimestampStrategy(none=de.NoneStrategy()),
                output_timestamp_format=timestamps or de.TimestampFormat(iso8601=de.Iso8601TimestampFormat()),
            )
        ),
        start_time=ts(start),
        end_time=ts(end),
        context=sc.Context(dataset_references={}, variables={}, function_variables={}),
        format=de.ExportFormat(csv=de.Csv()),
        resolution=resolution or de.ResolutionOption(undecimated=de.UndecimatedResolution()),
        compression=de.CompressionFormat.GZIP,
    )
    body: Json = enc(request)
    return body


def export(server: ServerProcess, body: Json) -> httpx.Response:
    return httpx.post(f"{server.base_url}/export/v1/export", json=body, timeout=60)


def test_export_honours_range_tags_and_relative_timestamps(server: ServerProcess, written: Json) -> None:
    rid, a, b, mode = written["rid"], written["a"], written["b"], written["mode"]
    start, end = a[4][0], a[12][0]  # start inclusive, end exclusive
    relative_to = written["t0"] - 123
    seconds = de.TimestampFormat(
        relative=de.RelativeTimestampFormat(relative_to=ts(relative_to), time_unit=api.TimeUnit.MILLISECONDS)
    )
    body = export_request(
        rid,
        {
            "va": ("numeric", "speed", {"vehicle": "a"}),
            "vb": ("numeric", "speed", {"site": "south"}),
            "m": ("enum", "drive.mode", {}),
        },
        start,
        end,
        seconds,
    )
    r = export(server, body)
    assert r.status_code == 200, r.text
    header, *rows = list(csv.reader(gzip.decompress(r.content).decode().splitlines()))
    assert header == ["timestamp", "va", "vb", "m"]
    want: dict[int, list[str]] = {}
    for col, points in enumerate([a, b, mode]):
        for t, v in points:
            if start <= t < end:
                want.setdefault(t, ["", "", ""])[col] = repr(float(v)) if col < 2 else str(v)
    # milliseconds since relative_to, exactly (a decimal of the nanoseconds)
    expected = [(Decimal(t - relative_to) / 1_000_000, want[t]) for t in sorted(want)]
    got = [(Decimal(first), rest) for first, *rest in rows]
    assert got == expected
    assert len(got) == 13  # 8 of a, 4 of b, 1 of the mode: the range is [a[4], a[12])


def test_export_decimation_needs_a_positive_step_and_a_known_option(
    server: ServerProcess, written: Json
) -> None:
    """Decimation is served (tests/server/test_polars_export.py checks its values); a step that is
    not positive is invalid, and a resolution this nominal-api does not define is refused by name."""
    rid = written["rid"]
    for resolution in (de.ResolutionOption(buckets=0), de.ResolutionOption(nanoseconds=-5)):
        body = export_request(rid, {"s": ("numeric", "speed", {})}, 0, 2**62, resolution=resolution)
        r = export(server, body)
        assert r.status_code == 400
        assert r.json()["errorName"] == "Default:InvalidArgument"
    body = export_request(rid, {"s": ("numeric", "speed", {})}, 0, 2**62)
    body["resolution"] = {"type": "perPixel", "perPixel": 3}
    r = export(server, body)
    assert r.status_code == 400
    assert r.json()["errorName"] == "Sparkwire:ExportOptionNotSupported"
    assert r.json()["parameters"]["field"] == "resolution"


def test_export_refuses_other_options_by_name(server: ServerProcess, written: Json) -> None:
    rid = written["rid"]
    base = export_request(rid, {"s": ("numeric", "speed", {})}, 0, 2**62)
    for path, value, field in [
        (("format",), {"type": "arrow", "arrow": {}}, "format"),
        (("compression",), "ZIP", "compression"),
        (
            ("channels", "timeDomain", "mergeTimestampStrategy"),
            {"type": "allTimestampsForwardFill", "allTimestampsForwardFill": {"lookBackPeriod": {}}},
            "channels.timeDomain.mergeTimestampStrategy",
        ),
    ]:
        body = json.loads(json.dumps(base))
        target = body
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        r = export(server, body)
        assert r.status_code == 400, (field, r.text)
        assert r.json()["errorName"] == "Sparkwire:ExportOptionNotSupported", r.text
        assert r.json()["parameters"]["field"] == field
    # an enum channel asked for as numeric
    r = export(server, export_request(rid, {"m": ("numeric", "drive.mode", {})}, 0, 2**62))
    assert r.status_code == 400 and r.json()["errorName"] == "Sparkwire:ExportSeriesTypeMismatch", r.text


def protobuf_doubles(channel: str, points: list[tuple[int, float]]) -> bytes:
    """A WriteRequestNominal of one double series, as Nominal's writers send it."""
    series = pb.Series(channel=pb.Channel(name=channel))
    for t, v in points:
        p = series.points.double_points.points.add(value=v)
        p.timestamp.seconds, p.timestamp.nanos = divmod(t, NANOS)
    return bytes(pb.WriteRequestNominal(series=[series]).SerializeToString())


def test_export_beyond_the_point_bound_is_refused_by_name(server: ServerProcess) -> None:
    rid = five_part_rid()
    t0 = time.time_ns() - 600 * NANOS
    chunk = 200_000
    for part in range(MAX_EXPORT_POINTS // chunk + 1):
        pts = [(t0 + (part * chunk + i) * 1000, float(i)) for i in range(chunk)]
        r = httpx.post(
            f"{server.base_url}/storage/writer/v1/nominal/{rid}",
            content=zstandard.ZstdCompressor().compress(protobuf_doubles("fast", pts)),
            headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "zstd"},
            timeout=120,
        )
        assert r.status_code == 200, r.text
    r = export(server, export_request(rid, {"f": ("numeric", "fast", {})}, 0, 2**62))
    assert r.status_code == 400, r.text[:300]
    assert r.json()["errorName"] == "Sparkwire:ExportTooLarge"
    assert int(r.json()["parameters"]["points"]) == MAX_EXPORT_POINTS + chunk
    # a range holding fewer points is served, exactly those
    r = export(server, export_request(rid, {"f": ("numeric", "fast", {})}, t0, t0 + chunk * 1000))
    assert r.status_code == 200, r.text[:300]
    assert len(gzip.decompress(r.content).decode().splitlines()) == chunk + 1


def test_search_channels_pages_and_get_available_tags_time_range(
    server: ServerProcess, written: Json
) -> None:
    rid, a, b = written["rid"], written["a"], written["b"]
    url = f"{server.base_url}/data-source/v1/data-sources"
    r = httpx.post(
        f"{url}/search-channels",
        json={"dataSources": [rid], "exactMatch": [], "fuzzySearchText": "", "dataTypes": [], "pageSize": 1},
    )
    assert r.status_code == 200, r.text
    first = r.json()
    assert [c["name"] for c in first["results"]] == ["drive.mode"]
    r = httpx.post(
        f"{url}/search-channels",
        json={
            "dataSources": [rid],
            "exactMatch": [],
            "fuzzySearchText": "",
            "dataTypes": [],
            "pageSize": 1,
            "nextPageToken": first["nextPageToken"],
        },
    )
    assert r.json() == {"results": [{"name": "speed", "dataSource": rid, "dataType": "DOUBLE"}]}
    for fuzzy, names in [("spd", ["speed"]), ("dvmode", ["drive.mode"]), ("sdp", [])]:
        r = httpx.post(f"{url}/search-channels", json={"dataSources": [rid], "fuzzySearchText": fuzzy})
        assert [c["name"] for c in r.json()["results"]] == names, fuzzy
    r = httpx.post(f"{url}/search-channels", json={"dataSources": [rid], "dataTypes": ["STRING"]})
    assert [c["name"] for c in r.json()["results"]] == ["drive.mode"]
    r = httpx.post(f"{url}/search-channels", json={"dataSources": [rid], "pageSize": 1001})
    assert r.status_code == 400
    # vehicle b's points only after a's last one: a range past a's end has b's tags alone
    after = a[-1][0] + 1
    assert b[-1][0] >= after
    body = {
        "channelWithTagFilters": {"dataSourceRid": rid, "channel": "speed", "tagFilters": {}},
        "startTime": {"secondsSinceEpoch": after // NANOS, "offsetNanoseconds": after % NANOS},
        "endTime": {"secondsSinceEpoch": 2**40},
    }
    r = httpx.post(f"{url}/get-available-tags", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["availableTags"]["availableTags"] == {"site": ["south"], "vehicle": ["b"]}


def test_the_reads_are_listed_in_openapi(server: ServerProcess) -> None:
    paths = httpx.get(f"{server.base_url}/openapi.json").json()["paths"]
    for path in (
        "/data-source/v1/data-sources/search-channels",
        "/data-source/v1/data-sources/get-available-tags",
        "/export/v1/export",
    ):
        operation = paths[path]["post"]
        assert "requestBody" in operation and "400" in operation["responses"], path
    assert "application/octet-stream" in paths["/export/v1/export"]["post"]["responses"]["200"]["content"]


# -- the same admission as every route ---------------------------------------------------------------
@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with a tokens file; these reads need no Spark, so it is used once it serves HTTP."""
    base = tmp_path_factory.mktemp("secured-reads")
    entries: list[dict[str, object]] = [
        {"token": "all-token", "sub": "all", "dataSourceRids": ["*"]},
        {"token": "mine-token", "sub": "mine", "dataSourceRids": ["ri.mine.*"]},
    ]
    proc = start_secured_server(base, entries)
    yield proc
    proc.stop()


async def test_the_reads_need_a_token_and_see_only_what_it_reaches(secured: ServerProcess) -> None:
    mine, theirs = f"ri.mine.{uuid.uuid4().hex}", f"ri.theirs.{uuid.uuid4().hex}"
    t0 = time.time_ns() - 60 * NANOS
    all_token = {"Authorization": "Bearer all-token"}
    for rid in (mine, theirs):
        body = {
            "dataSourceRid": rid,
            "batches": [
                {
                    "channel": "p",
                    "tags": {"k": rid},
                    "points": {"type": "double", "double": [{"timestamp": ts_json(t0), "value": 1.0}]},
                }
            ],
        }
        r = httpx.post(f"{secured.base_url}/storage/writer/v1", json=body, headers=all_token)
        assert r.status_code == 200, r.text
    url = f"{secured.base_url}/data-source/v1/data-sources"
    search = {"dataSources": [mine, theirs]}
    export_body = export_request(theirs, {"p": ("numeric", "p", {})}, 0, 2**62)
    for path, body in [
        (f"{url}/search-channels", search),
        (f"{secured.base_url}/export/v1/export", export_body),
    ]:
        r = httpx.post(path, json=body)
        assert r.status_code == 401, r.text
    headers = {"Authorization": "Bearer mine-token"}
    r = httpx.post(f"{url}/search-channels", json=search, headers=headers)
    assert r.json() == {"results": [{"name": "p", "dataSource": mine, "dataType": "DOUBLE"}]}
    tags = {"channelWithTagFilters": {"dataSourceRid": theirs, "channel": "p", "tagFilters": {}}}
    span = {"startTime": {"secondsSinceEpoch": 0}, "endTime": {"secondsSinceEpoch": 2**40}}
    r = httpx.post(f"{url}/get-available-tags", json={**tags, **span}, headers=headers)
    assert r.json()["availableTags"]["availableTags"] == {}
    r = httpx.post(f"{secured.base_url}/export/v1/export", json=export_body, headers=headers)
    assert r.status_code == 403, r.text
    r = httpx.post(f"{secured.base_url}/catalog/v1/datasets/multiple", json=[mine, theirs], headers=headers)
    assert [(d["rid"], d["bounds"]["start"]) for d in r.json()] == [
        (mine, {"seconds": t0 // NANOS, "nanos": t0 % NANOS})
    ]


# -- on the Kafka log, read by a Spark batch job ---------------------------------------------------------
async def test_export_from_the_kafka_log_reads_as_back_fill_does(kafka_log_server: ServerProcess) -> None:
    server, rid = kafka_log_server, five_part_rid()
    t0 = time.time_ns() - 60 * NANOS
    a = [(t0 + i * 1_000_003, 0.5 * i) for i in range(30)]
    b = [(t0 + i * 2_000_000, 100.0 + i) for i in range(15)]
    await write_points(server.base_url, rid, "x", a, {"unit": "a"})
    await write_points(server.base_url, rid, "x", b, {"unit": "b"})
    start, end = a[5][0], a[25][0]
    body = export_request(rid, {"xa": ("numeric", "x", {"unit": "a"})}, start, end)
    r = export(server, body)
    assert r.status_code == 200, r.text
    header, *rows = list(csv.reader(gzip.decompress(r.content).decode().splitlines()))
    assert header == ["timestamp", "xa"]
    iso = [(np.datetime_as_string(np.datetime64(t, "ns"), unit="ns") + "Z", repr(v)) for t, v in a[5:25]]
    assert [tuple(row) for row in rows] == iso
    # the tags are honoured: b's points are not in a's column, and b's own are all there
    r = export(server, export_request(rid, {"xb": ("numeric", "x", {"unit": "b"})}, 0, 2**62))
    rows = list(csv.reader(gzip.decompress(r.content).decode().splitlines()))[1:]
    assert [float(v) for _, v in rows] == [v for _, v in b]
