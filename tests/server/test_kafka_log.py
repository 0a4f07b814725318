"""Kafka as the point log (`--source kafka`): a throwaway broker from deploy/kafka.sh (the same script
as `make kafka`), a real server whose stream and back-fill are Spark's built-in Kafka source, HTTP
writes, WebSocket subscribers; then the broker stopped (writes answered 503, nothing stored) and
started again (writes succeed). The outage tests run last: they stop the module's broker."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from compute.storage.contract import SeriesWrite
from compute.storage.kafka.layout import seq_at_ms
from compute.storage.kafka.point_log import KafkaLog
from compute.storage.series import SeriesKey, SeriesKind
from tests.client_view import ResultView
from tests.conftest import ROOT, ServerProcess, free_port, start_server
from tests.kafka_broker import KafkaBroker, start_kafka
from tests.server.test_end_to_end import subscribe_one, unique_rid
from tests.server.test_operations import scrape, value
from tests.wire import (
    NANOS,
    Client,
    channel_variable,
    composite_batch,
    series_node,
    subscription,
    write_points,
)

# A broker (fetched on a fresh machine), a server and its Spark on a busy 2-core machine.
pytestmark = pytest.mark.timeout(900)

PARTITIONS = 3
TOPIC = "sparkwire-test-points"
WINDOW_S = 3600.0


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = start_kafka(tmp_path_factory.mktemp("kafka"))
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, kafka: KafkaBroker) -> Iterator[ServerProcess]:
    """Overrides the session's embedded server for this module."""
    base = tmp_path_factory.mktemp("on-kafka")
    env = {
        "SPARKWIRE_SOURCE": "kafka",
        "SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap,
        "SPARKWIRE_KAFKA_TOPIC": TOPIC,
        "SPARKWIRE_KAFKA_PARTITIONS": str(PARTITIONS),
        "SPARKWIRE_RESUME_LINGER_SECONDS": "0",
    }
    proc = start_server(base / "data", base / "server.log", env=env, ready_timeout=600)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def second_server(tmp_path_factory: pytest.TempPathFactory, kafka: KafkaBroker) -> Iterator[ServerProcess]:
    """Another server on the same topic, with its own Spark and its own producer."""
    base = tmp_path_factory.mktemp("on-kafka-second")
    env = {
        "SPARKWIRE_SOURCE": "kafka",
        "SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap,
        "SPARKWIRE_KAFKA_TOPIC": TOPIC,
        "SPARKWIRE_KAFKA_PARTITIONS": str(PARTITIONS),
        "SPARKWIRE_RESUME_LINGER_SECONDS": "0",
    }
    proc = start_server(base / "data", base / "server.log", env=env, ready_timeout=600)
    yield proc
    proc.stop()


def _stamps(numeric: dict) -> list[int]:
    return [t["seconds"] * NANOS + t["nanos"] for t in numeric["timestamps"]]


async def test_written_points_reach_a_subscriber_as_a_full_result_then_appends(server: ServerProcess) -> None:
    """History (several series, so several partitions in one request) is back-filled by a Spark batch
    job over Kafka; points written afterwards arrive through the stream, each value exact."""
    rid = unique_rid("kafka")
    now = time.time_ns()
    history = [(now - 600 * NANOS + i * NANOS, float(i) * 0.5) for i in range(40)]
    body = {
        "dataSourceRid": rid,
        "batches": [
            {
                "channel": channel,
                "tags": {},
                "points": {
                    "type": "double",
                    "double": [
                        {"timestamp": {"seconds": t // NANOS, "nanos": t % NANOS}, "value": v * k}
                        for t, v in history
                    ],
                },
            }
            for k, channel in enumerate(["a", "b", "c", "d"], start=1)
        ],
    }
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        written = await http.post("/storage/writer/v1", json=body)
        assert written.status_code == 200, written.text

    client = await Client.connect(server.ws_url)
    try:
        sub_id, full = await subscribe_one(
            client, subscription(series_node(), {"x": channel_variable(rid, "c")}, WINDOW_S)
        )
        numeric = full["full"]["result"]["numeric"]
        assert list(zip(_stamps(numeric), numeric["values"], strict=True)) == [(t, v * 3) for t, v in history]

        later = time.time_ns()
        live = [(later, 1.25), (later + 1, -2.5), (later + 2, math.pi)]
        await write_points(server.base_url, rid, "c", live)
        received: list[tuple[int, float]] = []
        while len(received) < len(live):
            update = await client.update(sub_id)
            assert update["type"] == "append", update
            result = update["append"]["result"]["numeric"]
            received += list(zip(_stamps(result), result["values"], strict=True))
        assert received == live
    finally:
        await client.close()


async def test_a_computation_over_a_followed_series_is_back_filled_without_a_read_and_misses_nothing(
    server: ServerProcess,
) -> None:
    """A second computation over a series the server already follows is back-filled from the points it
    keeps (no Spark job reads the partition from the window's start: the back-fill trap of
    docs/decisions/0076), while writes go on: its FullResult merged with its appends is exactly every
    point written, none twice, none missing, and the first computation's view is the same."""
    rid = unique_rid("kafka-followed")
    now = time.time_ns()
    written = [(now - 300 * NANOS + i * NANOS, float(i)) for i in range(200)]
    await write_points(server.base_url, rid, "f", written)

    async def served() -> float:
        samples = await scrape(server)
        return value(samples, "sparkwire_backfills_from_followed_series_total")

    first_client = await Client.connect(server.ws_url)
    second_client = await Client.connect(server.ws_url)
    stop = asyncio.Event()

    async def write_on() -> None:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            while not stop.is_set():
                t = time.time_ns()
                points = [(t + k, float(len(written) + k)) for k in range(3)]
                await write_points(server.base_url, rid, "f", points, client=http)
                written.extend(points)
                await asyncio.sleep(0.02)

    try:
        first_id, first_full = await subscribe_one(
            first_client, subscription(series_node(), {"x": channel_variable(rid, "f")}, WINDOW_S)
        )
        first = ResultView(int(WINDOW_S * NANOS))
        first.apply(first_full)
        before = await served()
        writer = asyncio.create_task(write_on())
        await asyncio.sleep(1.0)
        variables = {"x": channel_variable(rid, "f"), "unused": {"type": "double", "double": 1.0}}
        second_sub = subscription(series_node(), variables, WINDOW_S)
        second_id, second_full = await subscribe_one(second_client, second_sub)
        second = ResultView(int(WINDOW_S * NANOS))
        second.apply(second_full)
        await asyncio.sleep(1.5)
        stop.set()
        await writer
        for sub_id, view, client in ((first_id, first, first_client), (second_id, second, second_client)):
            while view.ungrouped().normalized()[-1:] != written[-1:]:
                view.apply(await client.update(sub_id))
        assert second.ungrouped().normalized() == written
        assert first.ungrouped().normalized() == written
        assert second.fulls == 1
        assert await served() == before + 1
    finally:
        stop.set()
        await first_client.close()
        await second_client.close()


async def test_string_points_round_trip_through_kafka(server: ServerProcess) -> None:
    rid = unique_rid("kafka-enum")
    now = time.time_ns()
    points = [(now - 5 * NANOS, "idle"), (now - 4 * NANOS, "armed"), (now - 3 * NANOS, "idle")]
    await write_points(server.base_url, rid, "state", points)
    client = await Client.connect(server.ws_url)
    try:
        _, full = await subscribe_one(
            client, subscription(series_node(kind="enum"), {"x": channel_variable(rid, "state")}, WINDOW_S)
        )
        enum = full["full"]["result"]["enum"]
        categories = enum["categories"]
        stamps = [t["seconds"] * NANOS + t["nanos"] for t in enum["timestamps"]]
        assert list(zip(stamps, [categories[i] for i in enum["values"]], strict=True)) == points
    finally:
        await client.close()


async def test_array_and_struct_points_round_trip_through_kafka(server: ServerProcess) -> None:
    """Decision 0104's kinds, JSON texts in the Kafka log's string blocks, read back by a Spark job
    (the ComputeService on the Kafka log) through select1dArrayIndex and extractFromStruct."""
    rid = unique_rid("kafka-composite")
    t0 = (time.time_ns() // NANOS - 60) * NANOS

    def at(t: int) -> dict[str, int]:
        return {"seconds": t // NANOS, "nanos": t % NANOS}

    arrays = [[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]]
    structs = ['{"engine": {"temp": 80.5}}', '{"engine": {}}', '{"engine": {"temp": 82}}']
    body = {
        "dataSourceRid": rid,
        "batches": [
            composite_batch("vector", "double", [(t0 + i, a) for i, a in enumerate(arrays)]),
            composite_batch("record", "struct", [(t0 + i, s) for i, s in enumerate(structs)]),
        ],
    }
    assert httpx.post(f"{server.base_url}/storage/writer/v1", json=body, timeout=60).status_code == 200
    source = {"dataSourceRid": {"type": "literal", "literal": rid}, "tags": {}}

    def polled(node: dict) -> list[tuple[int, float]]:
        request = {
            "node": {
                "type": "series",
                "series": {"input": {"type": "numeric", "numeric": node}, "numericAggregations": {}},
            },
            "start": at(t0),
            "end": at(t0 + NANOS),
            "context": {"variables": {}, "datasetReferences": {}},
        }
        r = httpx.post(f"{server.base_url}/compute/v2/compute", json=request, timeout=300)
        assert r.status_code == 200, r.text
        numeric = r.json()["numeric"]
        return [
            (t["seconds"] * NANOS + t["nanos"], v)
            for t, v in zip(numeric["timestamps"], numeric["values"], strict=True)
        ]

    def channel(name: str) -> dict:
        inner = {**source, "channel": {"type": "literal", "literal": name}}
        return {"type": "channel", "channel": {"type": "dataSource", "dataSource": inner}}

    second = {"input": channel("vector"), "index": {"type": "literal", "literal": 1}}
    assert polled({"type": "select1dArrayIndex", "select1dArrayIndex": second}) == [(t0, 2.0), (t0 + 2, 5.0)]
    temp = {"input": channel("record"), "fieldPath": [{"type": "literal", "literal": "engine.temp"}]}
    assert polled({"type": "extractFromStruct", "extractFromStruct": temp}) == [(t0, 80.5), (t0 + 2, 82.0)]


async def test_series_counts_over_a_range_are_counted_by_spark_on_the_kafka_log(
    server: ServerProcess,
) -> None:
    """The polars export's first question (batchGetSeriesCount) over a range narrower than all of
    time: the Kafka log keeps no index of the series' times, so a Spark job counts them (decision
    0093); before, the 400 made the SDK export nothing."""
    rid = unique_rid("kafka-counts")
    now = time.time_ns()
    await write_points(
        server.base_url, rid, "speed", [(now - 100 * NANOS + i, 1.0) for i in range(10)], {"v": "a"}
    )
    await write_points(
        server.base_url, rid, "speed", [(now - 10 * NANOS + i, 2.0) for i in range(10)], {"v": "b"}
    )

    def asked(lo: int, hi: int) -> dict:
        def at(t: int) -> dict:
            return {"seconds": t // NANOS, "nanos": t % NANOS}

        return {"dataSourceRid": rid, "channel": "speed", "range": {"start": at(lo), "end": at(hi)}}

    ranges = [(-200, 0), (-50, 0), (-200, -60), (-300, -150)]
    requests = [asked(now + lo * NANOS, now + hi * NANOS) for lo, hi in ranges]
    r = httpx.post(
        f"{server.base_url}/data-source/v1/data-sources/batch-get-series-count",
        json={"requests": requests},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert [x["seriesCount"] for x in r.json()["responses"]] == [2, 1, 1, 0]


async def test_points_written_to_one_server_reach_subscribers_on_the_other(
    server: ServerProcess, second_server: ServerProcess
) -> None:
    """One log for both: a series new to the reader (its catalog record from the compacted topic,
    read before the micro-batch is filtered) reaches the reader's subscriber through its stream."""
    for writer, reader in [(server, second_server), (second_server, server)]:
        rid = unique_rid("kafka-cross")
        client = await Client.connect(reader.ws_url)
        try:
            sub = subscription(series_node(), {"x": channel_variable(rid, "p", tags={"unit": "a"})}, WINDOW_S)
            sub_id, full = await subscribe_one(client, sub)
            assert full["full"]["result"]["numeric"]["values"] == []
            now = time.time_ns()
            await write_points(writer.base_url, rid, "p", [(now, 1.25), (now + 1, 2.5)], tags={"unit": "a"})
            update = await client.update(sub_id)
            assert update["type"] == "append", update
            numeric = update["append"]["result"]["numeric"]
            assert list(zip(_stamps(numeric), numeric["values"], strict=True)) == [
                (now, 1.25),
                (now + 1, 2.5),
            ]
        finally:
            await client.close()


def test_a_snapshot_waits_for_another_writers_open_transaction(kafka: KafkaBroker) -> None:
    """Two writers on one log (two servers): one holds a transaction open, with a record appended
    before the other's back-fill snapshot. The snapshot (`end_offset`) must not return until that
    transaction ends: a back-fill reading committed records would leave the record out, and the
    stream would then skip it as back-filled (its seq, from its append time, is at or below the
    snapshot's). It returns once the record is committed, and the record lies within it."""
    topic = f"sparkwire-test-snapshot-{time.time_ns()}"
    log = KafkaLog(kafka.bootstrap, topic, 2, "snapshot-reader")
    other = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"{topic}-other"})
    try:
        other.init_transactions(30)
        other.begin_transaction()
        other.produce(topic, key=b"1", value=b"a block", partition=0)
        assert other.flush(30) == 0  # appended to the partition, not committed
        snapshot: list[int] = []
        taking = threading.Thread(target=lambda: snapshot.append(log.end_offset()))
        taking.start()
        taking.join(3.0)
        assert taking.is_alive() and snapshot == [], "the snapshot did not wait for the open transaction"
        other.commit_transaction(30)
        taking.join(30)
        assert not taking.is_alive() and len(snapshot) == 1
        reader = Consumer(
            {
                "bootstrap.servers": kafka.bootstrap,
                "group.id": f"{topic}-check",
                "isolation.level": "read_committed",
            }
        )
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records = [m for m in reader.consume(10, timeout=10) if m.error() is None and m.value() == b"a block"]
        reader.close()
        assert len(records) == 1
        appended_ms = records[0].timestamp()[1]
        assert seq_at_ms(appended_ms) <= snapshot[0]  # within the snapshot: a back-fill must read it
    finally:
        log.close()


def test_a_series_another_writer_acknowledged_is_in_the_catalog_at_once(kafka: KafkaBroker) -> None:
    """Two servers on one log: a series whose write the other answered is in this one's catalog at
    its next read, as the micro-batch's poll and a subscription's routing read it. A write is
    answered once its transaction commits, a moment before the commit markers reach the catalog
    partition; and the end the catalog consumer reports can be one an earlier read queued. Either
    way the read stopped short: the series was missed in 22 of these 40 rounds, and with it a
    subscription's back-fill (its points then skipped as back-filled)."""
    topic = f"sparkwire-test-catalog-{time.time_ns()}"
    writer = KafkaLog(kafka.bootstrap, topic, 2, "catalog-writer")
    reader = KafkaLog(kafka.bootstrap, topic, 2, "catalog-reader")
    try:
        assert reader.poll_new_series() == []
        missed = []
        for i in range(40):
            key = SeriesKey.of("ri.catalog", f"c{i}", {})
            assert writer.submit([SeriesWrite(key, SeriesKind.NUMERIC, [1_000 + i], [1.0])]).result(30) == 1
            # a subscription's routing, or a micro-batch's poll (which also announces what the
            # routing read before it)
            read = reader.series() if i % 2 else reader.poll_new_series()
            if key not in {info.key for info in read}:
                missed.append(i)
            time.sleep(0.2 if i % 4 < 2 else 0.0)  # the consumer at its end for a while, or not
        assert missed == [], f"series missed by the catalog in rounds {missed}"
    finally:
        writer.close()
        reader.close()


def test_a_server_without_its_brokers_refuses_to_start_with_one_line(tmp_path: Path) -> None:
    """Checked before Spark starts: exit status 1 and a line naming the brokers, no traceback."""
    nobody = f"127.0.0.1:{free_port()}"
    argv = [sys.executable, "-m", "app.runtime.cli", "serve", "--source", "kafka"]
    argv += ["--kafka-bootstrap-servers", nobody, "--port", str(free_port()), "--data-dir", str(tmp_path)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert f"cannot reach Kafka at {nobody} (--kafka-bootstrap-servers)" in output, output
    assert "Traceback" not in output, output


async def test_with_the_broker_stopped_a_write_gets_503_and_nothing_is_stored_then_writes_succeed(
    server: ServerProcess, kafka: KafkaBroker
) -> None:
    rid = unique_rid("kafka-outage")
    now = time.time_ns()
    before = [(now - 30 * NANOS, 1.0), (now - 29 * NANOS, 2.0)]
    await write_points(server.base_url, rid, "p", before)

    kafka.stop()
    refused_points = [(now - 20 * NANOS, 99.0), (now - 19 * NANOS, 98.0)]
    body = {
        "dataSourceRid": rid,
        "batches": [
            {
                "channel": channel,  # two series: likely two partitions, one transaction
                "tags": {},
                "points": {
                    "type": "double",
                    "double": [
                        {"timestamp": {"seconds": t // NANOS, "nanos": t % NANOS}, "value": v}
                        for t, v in refused_points
                    ],
                },
            }
            for channel in ("p", "q")
        ],
    }
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        refused = await http.post("/storage/writer/v1", json=body)
    assert refused.status_code == 503, refused.text
    assert refused.headers.get("Retry-After"), refused.headers
    error = refused.json()
    assert error["errorName"] == "Storage:LogUnavailable", error
    assert "Kafka" in error["parameters"].get("message", refused.text) or "Kafka" in refused.text
    # A read of the catalog is refused the same way, not answered with part of it
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        listing = await http.get("/series")
    assert listing.status_code == 503, listing.text
    assert listing.json()["errorName"] == "Storage:LogUnavailable", listing.text
    assert listing.headers.get("Retry-After"), listing.headers

    kafka.start()
    # Back: a write succeeds (the writer makes a new producer, fencing the old one's transaction).
    after = [(now - 10 * NANOS, 3.0)]
    deadline = time.monotonic() + 120
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        while True:
            body_after = {
                "dataSourceRid": rid,
                "batches": [
                    {
                        "channel": "p",
                        "tags": {},
                        "points": {
                            "type": "double",
                            "double": [
                                {"timestamp": {"seconds": t // NANOS, "nanos": t % NANOS}, "value": v}
                                for t, v in after
                            ],
                        },
                    }
                ],
            }
            response = await http.post("/storage/writer/v1", json=body_after)
            if response.status_code == 200:
                break
            assert response.status_code == 503, response.text
            assert time.monotonic() < deadline, "writes did not succeed within 120 s of the broker's return"
            time.sleep(1)
    # Nothing of the refused request is readable (read_committed): only the points acknowledged
    # before and after it, and no series "q" at all.
    client = await Client.connect(server.ws_url)
    try:
        deadline = time.monotonic() + 300
        while True:  # the stream may be restarting after the outage: a subscription can fail meanwhile
            try:
                for channel, expected in (("p", before + after), ("q", [])):
                    _, full = await subscribe_one(
                        client, subscription(series_node(), {"x": channel_variable(rid, channel)}, WINDOW_S)
                    )
                    numeric = full["full"]["result"]["numeric"]
                    assert list(zip(_stamps(numeric), numeric["values"], strict=True)) == expected
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)
    finally:
        await client.close()
