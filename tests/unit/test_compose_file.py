"""deploy/docker-compose.yml runs the roles tests/server/test_two_tier.py runs, and its compute
processes share the computations with the settings tests/server/test_sharded_compute.py runs."""

from __future__ import annotations

from typing import Any

import yaml

from tests.infra import PUBSUB_BUFFER_LIMIT
from tests.server.test_sharded_compute import SLOTS, sharded_env
from tests.server.test_two_tier import COMPOSE, SHARDING_SETTINGS, SHARED_LOG_SETTINGS, compose_service


def services() -> dict[str, dict[str, Any]]:
    return dict(yaml.safe_load(COMPOSE.read_text())["services"])


def services_of(role: str) -> list[str]:
    return [name for name, spec in services().items() if spec.get("command", [])[-2:] == ["--role", role]]


def test_the_compose_file_runs_the_roles_these_tests_run() -> None:
    assert compose_service("compute-a")["command"] == ["sparkwire", "serve", "--role", "compute"]
    compute = compose_service("compute-a")["environment"]
    for edge in ("edge-a", "edge-b"):
        spec = compose_service(edge)
        assert spec["command"] == ["sparkwire", "serve", "--role", "edge"]
        assert spec["environment"]["SPARKWIRE_SOURCE"] == "kafka"
        # the same point log, topic and Redis as the compute processes
        assert all(spec["environment"][k] == compute[k] for k in SHARED_LOG_SETTINGS)
        assert spec["depends_on"]["kafka"] == {"condition": "service_healthy"}
    assert {"redis", "kafka", "spark-master", "spark-worker"} <= set(services())
    # the subscriber buffer the tests' and benches' redis-server run with (an edge's first snapshots)
    redis = compose_service("redis")["command"]
    assert redis[redis.index("--client-output-buffer-limit") + 1] == PUBSUB_BUFFER_LIMIT


def test_every_compute_process_shares_the_computations_as_the_sharded_test_runs_them() -> None:
    computes = services_of("compute")
    assert len(computes) >= 2, computes
    tested = sharded_env("redis://redis:6379/0", "kafka:9092")
    # the keys the sharded test sets are those a compose compute process sets (less the Spark
    # cluster's master: the tests run local Spark), and test_two_tier drops exactly the sharding ones
    assert set(SHARDING_SETTINGS) == set(tested) - set(SHARED_LOG_SETTINGS)
    kafka = compose_service("kafka")
    listeners = kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    envs = []
    for name in computes:
        env = {
            k: str(v) for k, v in compose_service(name)["environment"].items() if k.startswith("SPARKWIRE_")
        }
        envs.append(env)
        assert set(env) - {"SPARKWIRE_SPARK_MASTER"} == set(tested), name
        assert env["SPARKWIRE_SOURCE"] == tested["SPARKWIRE_SOURCE"] == "kafka"
        assert env["SPARKWIRE_COMPUTE_SLOTS"] == str(SLOTS) and SLOTS > 0
        # the broker the compose file runs, on the listener it advertises
        host, port = env["SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS"].split(":")
        assert host in ("kafka", kafka.get("hostname")) and f"PLAINTEXT://{host}:{port}" in listeners.split(
            ","
        )
        assert "kafka" in compose_service(name)["depends_on"]
    assert all(env == envs[0] for env in envs), envs  # the same slots, broker, topic and log everywhere


def test_each_compute_process_is_its_own_spark_driver() -> None:
    computes = services_of("compute")
    for key in ("hostname", "volumes"):
        values = [str(compose_service(name)[key]) for name in computes]
        assert len(set(values)) == len(computes), (key, values)
    for name in computes:
        spec = compose_service(name)
        env = spec["environment"]
        # executors connect back to the driver by its own name
        assert env["SPARK_LOCAL_IP"] == env["SPARK_LOCAL_HOSTNAME"] == spec["hostname"]
        assert env["SPARKWIRE_SPARK_MASTER"] == "spark://spark-master:7077"
    # without a default core count per application the first driver takes every core of the worker
    assert (
        "-Dspark.deploy.defaultCores=" in compose_service("spark-master")["environment"]["SPARK_MASTER_OPTS"]
    )


def test_the_edges_need_no_sharding_setting() -> None:
    edges = services_of("edge")
    assert len(edges) >= 2, edges
    for name in edges:
        assert set(compose_service(name)["environment"]) == set(SHARED_LOG_SETTINGS)
