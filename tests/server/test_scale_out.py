"""Scale out: Sparkwire on a Spark standalone cluster, reading the Kafka log with Spark's Kafka
source on the cluster's executors (the connector's jars and Sparkwire's code shipped to them),
passes the same end-to-end checks as with the embedded defaults. Everything runs here on
127.0.0.1: the session's broker, a Spark master and worker, one server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import ServerProcess
from tests.infra import SparkCluster, server_on_kafka_log, start_spark_cluster
from tests.kafka_broker import KafkaBroker
from tests.server import test_end_to_end, test_ingest

# Cluster start-up (two JVMs) plus a server on it take minutes on a busy 2-core machine.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    cluster = start_spark_cluster(tmp_path_factory.mktemp("spark-cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, kafka_log: KafkaBroker, spark_cluster: SparkCluster
) -> Iterator[ServerProcess]:
    """Overrides the session's embedded server for this module: the end-to-end checks imported
    below run against Sparkwire on the cluster, reading Kafka (a topic of this module's own)."""
    base = tmp_path_factory.mktemp("on-cluster")
    settings = {"SPARKWIRE_SPARK_MASTER": spark_cluster.url}
    with server_on_kafka_log(base, kafka_log, "scale-out-points", settings) as proc:
        yield proc


# The same end-to-end checks as with the embedded defaults, collected again in this module so that
# they use the `server` above: every test of tests/server/test_end_to_end.py, and the ingest tests that
# go through the stream (enum strings and NaN/infinities cross the Kafka encoding).
for _name, _test in vars(test_end_to_end).items():
    if _name.startswith("test_"):
        globals()[_name] = _test
test_string_channel_streams_as_an_enum_series = test_ingest.test_string_channel_streams_as_an_enum_series
test_nan_and_infinities_round_trip_as_conjure_doubles = (
    test_ingest.test_nan_and_infinities_round_trip_as_conjure_doubles
)


def test_the_stream_runs_on_the_cluster_with_code_shipped_to_executors(
    server: ServerProcess, spark_cluster: SparkCluster
) -> None:
    apps = spark_cluster.state()["activeapps"]
    assert [app["name"] for app in apps] == ["sparkwire"]
    assert apps[0]["cores"] >= 1
    log = server.log_text()
    origin = [line for line in log.splitlines() if "executors import compute from" in line]
    assert origin, "the server did not report where executors load its code from"
    assert "sparkwire-code.zip" in origin[0], origin[0]  # the shipped zip, not the driver's checkout
