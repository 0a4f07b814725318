"""The log writer (app/ingest/logs.py, `POST /storage/writer/v1/logs/{dataSourceRid}`) and `contains`
(compute/evaluation/compiler/builders/logs.py) against a real server: log lines written as nominal-api's own
WriteLogsRequest (ConjureEncoder, unset optionals as null), then live WebSocket subscriptions to
`contains` over that channel, built with nominal-api's compute classes. Their FullResults must equal
the reference written from nominal-api's docs (tests/reference_logs.py); lines written afterwards,
merged from AppendResults, must equal a fresh subscription's FullResult. A refused request stores
nothing; the writers' auth applies before the body is read."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import zstandard
from conjure_python_client import ConjureEncoder
from nominal_api import api
from nominal_api import scout_compute_api as sc
from nominal_api import storage_writer_api as w

from compute.storage.contract import SeriesWrite, WriteRejected
from compute.storage.kafka.point_log import KafkaLog
from compute.storage.log_lines import log_text, read_log_text
from compute.storage.series import SeriesKey, SeriesKind
from tests.client_view import ResultView
from tests.conftest import ServerProcess, start_server
from tests.hostile import make_jwt
from tests.kafka_broker import KafkaBroker
from tests.log_file import stored_rows
from tests.reference_logs import contains
from tests.wire import NANOS, Client, channel_variable, full_entries, new_id, subscribe_message, write_points

pytestmark = pytest.mark.server

JSON = {"Content-Type": "application/json"}
WINDOW_S = 600
Line = tuple[int, str, dict[str, str]]


def new_rid() -> str:
    return f"ri.sparkwire.test.logs.{uuid.uuid4().hex}"


def logs_path(rid: str) -> str:
    return f"/storage/writer/v1/logs/{rid}"


def logs_body(lines: list[Line], channel: str | None = None) -> bytes:
    """nominal-api's WriteLogsRequest as its encoder writes it (an unset channel as null)."""
    points = [
        w.LogPoint(
            timestamp=api.Timestamp(seconds=t // NANOS, nanos=t % NANOS),
            value=w.LogValue(args=args, message=message),
        )
        for t, message, args in lines
    ]
    return json.dumps(ConjureEncoder().default(w.WriteLogsRequest(logs=points, channel=channel))).encode()


def post(server: ServerProcess, rid: str, body: bytes, headers: dict[str, str] = JSON) -> httpx.Response:
    return httpx.post(f"{server.base_url}{logs_path(rid)}", content=body, headers=headers, timeout=30)


def stored_lines(server: ServerProcess, rid: str) -> list[tuple[str, int, str, dict[str, str]]]:
    """(channel, timestamp, message, args) of every log line of the data source, in write order."""
    out = []
    for channel, _, t, value, text in stored_rows(server.data_dir, rid):
        assert value is None and text is not None
        out.append((channel, t, *read_log_text(text)))
    return out


# -- nominal-api's compute classes ------------------------------------------------------------------
def regex(pattern: str) -> sc.LogFilterOperator:
    return sc.LogFilterOperator(regex_filter=sc.LogRegexFilterOperator(regex=pattern))


def token(text: str) -> sc.LogFilterOperator:
    return sc.LogFilterOperator(
        exact_match_case_insensitive_filter=sc.LogExactMatchCaseInsensitiveFilter(token=text)
    )


def arg(key: str, pattern: str) -> sc.LogFilterOperator:
    return sc.LogFilterOperator(
        arg=sc.LogArgFilterOperator(
            key=sc.StringConstant(literal=key), operator=sc.LogRegexFilterOperator(regex=pattern)
        )
    )


def contains_node(operator: sc.LogFilterOperator, log: sc.LogSeries | None = None) -> Any:
    series = sc.NumericSeries(
        contains=sc.ContainsSeries(input=log or sc.LogSeries(raw=sc.Reference(name="x")), operator=operator)
    )
    return sc.ComputableNode(
        series=sc.SummarizeSeries(input=sc.Series(numeric=series), numeric_aggregations={})
    )


def channel_log_series(rid: str, channel: str) -> sc.LogSeries:
    literal = sc.StringConstant
    source = sc.DataSourceChannel(
        channel=literal(literal=channel),
        data_source_rid=literal(literal=rid),
        group_by_tags=[],
        tags={},
        tags_to_group_by=[],
    )
    return sc.LogSeries(channel=sc.ChannelSeries(data_source=source))


def request(node: Any, rid: str, channel: str = "logs") -> dict[str, Any]:
    return {
        "computeRequest": {
            "node": ConjureEncoder.do_encode(node),
            "windowWidth": {"seconds": WINDOW_S, "nanos": 0},
            "context": {"variables": {"x": channel_variable(rid, channel)}, "datasetReferences": {}},
        },
        "subscriptionOptions": {"minDelay": 0, "allowAppends": True},
    }


OPERATORS: dict[str, sc.LogFilterOperator] = {
    "regex_word": regex(r"err(or)?\b"),
    "regex_anchored": regex(r"^Disk"),
    "regex_unicode": regex(r"temp.rature"),
    "token": token("err"),
    "token_of_two_words": token("DISK FULL"),
    "arg_level": arg("level", r"^(?i:error)$"),
    "arg_missing_on_some_lines": arg("host", r"^a"),
    "and": sc.LogFilterOperator(and_=[token("err"), arg("host", r"^a1$")]),
    "or_not": sc.LogFilterOperator(or_=[regex(r"^all"), sc.LogFilterOperator(not_=arg("level", "INFO"))]),
    "not": sc.LogFilterOperator(not_=regex("e")),
}


def lines_from(t0: int, texts: list[tuple[str, dict[str, str]]]) -> list[Line]:
    return [(t0 + i * 250 * 1_000_000 + 7, message, args) for i, (message, args) in enumerate(texts)]


FIRST = [
    ("Disk full on /dev/sda1", {"level": "ERROR", "host": "a1"}),
    ("error: connection reset", {"level": "WARN", "host": "b2"}),
    ("all systems nominal", {"level": "INFO"}),
    ("Retrying after ERR-42", {"level": "error", "host": "a1"}),
    ("terrors of the deep", {}),
    ("Disk full on /dev/sda1", {"level": "ERROR", "host": "a1"}),  # the same line again: one label
    ("température élevée", {"unité": "°C", "host": "a7"}),
]
LATER = [
    ("ERR", {"host": "a1"}),
    ("disk full", {"level": "INFO"}),
    ("quiet", {"level": "DEBUG", "host": "c3"}),
]


async def test_contains_streams_over_log_lines_as_the_reference_says(server: ServerProcess) -> None:
    rid = new_rid()
    t0 = time.time_ns() - 60 * NANOS
    first = lines_from(t0, FIRST)
    r = post(server, rid, logs_body(first))  # channel unset (null): "logs"
    assert r.status_code == 200, r.text
    assert stored_lines(server, rid) == [("logs", t, m, a) for t, m, a in first]

    client = await Client.connect(server.ws_url)
    try:
        subs = {name: request(contains_node(op), rid) for name, op in OPERATORS.items()}
        subs["channel_variant"] = request(contains_node(token("err"), channel_log_series(rid, "logs")), rid)
        await client.ws.send(subscribe_message(subs))
        views: dict[str, ResultView] = {}
        for name in subs:
            creation = await client.creation(name, 60)
            assert creation["type"] == "success", (name, creation)
            update = await client.update(name, 60)
            kind, entries = full_entries(update)
            assert kind == "numeric"
            operator = ConjureEncoder.do_encode(OPERATORS[name if name in OPERATORS else "token"])
            assert entries == contains(operator, first), name
            views[name] = ResultView(WINDOW_S * NANOS)
            views[name].apply(update)

        later = lines_from(t0 + 10 * NANOS, LATER)
        assert post(server, rid, logs_body(later, channel="logs")).status_code == 200
        for name, view in views.items():
            while view.ungrouped().point_count() < len(first) + len(later):
                view.apply(await client.update(name, 60))
    finally:
        await client.close()

    fresh = await Client.connect(server.ws_url)
    try:
        await fresh.ws.send(subscribe_message({name: subs[name] for name in views}))
        for name, view in views.items():
            assert (await fresh.creation(name, 60))["type"] == "success"
            _, entries = full_entries(await fresh.update(name, 60))
            operator = ConjureEncoder.do_encode(OPERATORS[name if name in OPERATORS else "token"])
            assert entries == contains(operator, first + later), name
            assert view.ungrouped().normalized() == entries, name
    finally:
        await fresh.close()


async def _refusal(server: ServerProcess, node: Any, rid: str, channel: str = "logs") -> dict[str, Any]:
    client = await Client.connect(server.ws_url)
    try:
        sub = new_id()
        await client.ws.send(subscribe_message({sub: request(node, rid, channel)}))
        creation = await client.creation(sub, 60)
        if creation["type"] == "success":  # refused when evaluated: the first update says why
            return await client.update(sub, 60)
        return creation
    finally:
        await client.close()


async def test_what_contains_refuses_it_names(server: ServerProcess) -> None:
    rid = new_rid()
    t0 = time.time_ns() - 30 * NANOS
    assert post(server, rid, logs_body(lines_from(t0, FIRST[:2]))).status_code == 200
    await write_points(server.base_url, rid, "speed", [(t0, 1.0)])

    filtered = sc.LogSeries(
        filter=sc.LogFilterSeries(input=sc.LogSeries(raw=sc.Reference(name="x")), operator=token("err"))
    )
    text = json.dumps(await _refusal(server, contains_node(token("err"), filtered), rid))
    assert "PollingOnlyComputation" in text and "LOG_SERIES" in text and "filter" in text

    text = json.dumps(await _refusal(server, contains_node(regex("(a)\\1")), rid))
    assert "InvalidComputation" in text and "not an RE2 regular expression" in text and "regex" in text

    text = json.dumps(await _refusal(server, contains_node(token("err")), rid, channel="speed"))
    assert "'log' needs a log series, got a double channel" in text

    x = sc.NumericSeries(raw=sc.Reference(name="x"))  # a numeric node over the log channel
    node = sc.ComputableNode(series=sc.SummarizeSeries(input=sc.Series(numeric=x), numeric_aggregations={}))
    text = json.dumps(await _refusal(server, node, rid))
    assert "needs a numeric series, got a log channel" in text


def test_a_channel_keeps_its_kind(server: ServerProcess) -> None:
    """Log lines to a double channel, and doubles to a log channel, are refused whole: 400, nothing
    of the request stored."""
    rid = new_rid()
    t = time.time_ns() - 5 * NANOS
    assert post(server, rid, logs_body([(t, "up", {})], channel="events")).status_code == 200
    point = {"timestamp": {"seconds": t // NANOS, "nanos": 1}, "value": 1.0}
    doubles = {
        "dataSourceRid": rid,
        "batches": [{"channel": "events", "points": {"type": "double", "double": [point]}}],
    }
    r = httpx.post(f"{server.base_url}/storage/writer/v1", json=doubles, timeout=30)
    assert r.status_code == 400 and "holds log points; this request writes double points" in r.text, r.text
    r = httpx.post(
        f"{server.base_url}/storage/writer/v1",
        json={**doubles, "batches": [{**doubles["batches"][0], "channel": "speed"}]},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    r = post(server, rid, logs_body([(t + 1, "a line", {})], channel="speed"))
    assert r.status_code == 400 and "holds double points; this request writes log points" in r.text, r.text
    assert [(c, ts) for c, _, ts, _, _ in stored_rows(server.data_dir, rid)] == [
        ("events", t),
        ("speed", t // NANOS * NANOS + 1),
    ]


T = 1_700_000_000 * NANOS
GOOD = {"timestamp": {"seconds": T // NANOS, "nanos": 0}, "value": {"message": "fine", "args": {}}}
# Each with a good line first where the body has lines: nothing of the request may be stored.
REFUSALS: dict[str, tuple[Any, str]] = {
    "an unknown field": ({"logs": [GOOD], "channel": "x", "tags": {}}, "not a WriteLogsRequest"),
    "a point without a message": (
        {"logs": [GOOD, {"timestamp": {"seconds": 1, "nanos": 0}, "value": {"args": {}}}]},
        "message",
    ),
    "an arg that is not a string": (
        {
            "logs": [
                GOOD,
                {"timestamp": {"seconds": 1, "nanos": 0}, "value": {"message": "m", "args": {"n": 1}}},
            ]
        },
        "not a WriteLogsRequest",
    ),
    "nanos out of range": (
        {"logs": [GOOD, {"timestamp": {"seconds": 1, "nanos": NANOS}, "value": {"message": "m"}}]},
        "logs.1.timestamp",
    ),
    "an empty channel": ({"logs": [GOOD], "channel": ""}, "channel: must not be empty"),
    "not JSON": (None, "not a WriteLogsRequest"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refused_log_requests_store_nothing(server: ServerProcess, name: str) -> None:
    rid = new_rid()
    request_json, fragment = REFUSALS[name]
    body = b"{nope" if request_json is None else json.dumps(request_json).encode()
    r = post(server, rid, body)
    assert r.status_code == 400, r.text
    error = r.json()
    assert error["errorName"] == "Default:InvalidArgument" and fragment in error["message"], error
    assert stored_rows(server.data_dir, rid) == []


def test_a_compressed_body_is_read_and_the_ingest_limits_apply(server: ServerProcess) -> None:
    """Nominal's SDKs send zstd; the writers' limits (a channel's length, a point stamped far
    ahead of the clock) refuse a log request as they refuse any other, naming the setting."""
    rid = new_rid()
    t = time.time_ns() - 5 * NANOS
    lines = [(t, "compressed", {"codec": "zstd"})]
    body = zstandard.ZstdCompressor().compress(logs_body(lines))
    r = post(server, rid, body, {**JSON, "Content-Encoding": "zstd"})
    assert r.status_code == 200, r.text
    assert stored_lines(server, rid) == [("logs", t, "compressed", {"codec": "zstd"})]
    refused = new_rid()
    ahead = logs_body([(t, "now", {}), (time.time_ns() + 86_400 * NANOS, "tomorrow", {})])
    r = post(server, refused, ahead)
    assert r.status_code == 400 and "SPARKWIRE_MAX_FUTURE_SECONDS" in r.text, r.text
    r = post(server, refused, logs_body([(t, "long", {})], channel="c" * 1025))
    assert r.status_code == 400 and "SPARKWIRE_MAX_CHANNEL_LENGTH" in r.text, r.text
    assert stored_rows(server.data_dir, refused) == []


def test_the_log_writer_is_in_the_openapi_document(server: ServerProcess) -> None:
    paths = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()["paths"]
    body = paths["/storage/writer/v1/logs/{dataSourceRid}"]["post"]["requestBody"]["content"]
    assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/WriteLogsRequest"}


SECRET = "log-writer-secret-that-is-long-enough-for-hs256"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("logs-auth")
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_JWT_SECRET": SECRET})
    yield proc
    proc.stop()


def test_the_writers_auth_applies_before_the_body(guarded: ServerProcess) -> None:
    rid, other = new_rid(), new_rid()
    body = logs_body([(T, "fine", {"k": "v"})])
    assert post(guarded, rid, b"{not even JSON").status_code == 401  # refused before the body is read
    assert post(guarded, rid, body).status_code == 401
    wrong = {**JSON, "Authorization": f"Bearer {make_jwt(SECRET, [other], 600)}"}
    assert post(guarded, rid, body, wrong).status_code == 403
    assert stored_rows(guarded.data_dir, rid) == []
    right = {**JSON, "Authorization": f"Bearer {make_jwt(SECRET, [rid], 600)}"}
    assert post(guarded, rid, body, right).status_code == 200
    assert stored_lines(guarded, rid) == [("logs", T, "fine", {"k": "v"})]


def test_the_kafka_log_keeps_log_lines_and_their_kind(kafka_log: KafkaBroker) -> None:
    """The shared log (the session's broker, a topic of this test's own; no Spark): log lines are
    stored as the embedded log stores them, another process's catalog reads the series as a log
    series, and points of another kind on it are refused whole."""
    topic = f"log-lines-{uuid.uuid4().hex[:8]}"
    writer = KafkaLog(kafka_log.bootstrap, topic, 2, "writer")
    reader = KafkaLog(kafka_log.bootstrap, topic, 2, "reader")
    try:
        assert reader.read(1, 0).points.num_rows == 0  # its place: the log's end, before the writes
        key = SeriesKey.of("ri.kafka.logs", "logs", {})
        lines = [(T, "valve opened", {"valve": "v2"}), (T + 1, "valve closed", {})]
        texts = [log_text(message, args) for _, message, args in lines]
        assert (
            writer.submit([SeriesWrite(key, SeriesKind.LOG, [t for t, _, _ in lines], texts)]).result(30) == 2
        )
        with pytest.raises(WriteRejected, match="holds log points; this request writes double points"):
            writer.submit([SeriesWrite(key, SeriesKind.NUMERIC, [T + 2], [1.0])]).result(30)
        (info,) = reader.poll_new_series()  # the shared catalog (the compacted topic), at once
        assert (info.key, info.kind) == (key, SeriesKind.LOG)
        rows = reader.read(100, 10_000).points.to_pylist()
        assert [(r["series_id"], r["ts"], *read_log_text(r["str"])) for r in rows] == [
            (info.id, t, message, args) for t, message, args in lines
        ]
    finally:
        writer.close()
        reader.close()
