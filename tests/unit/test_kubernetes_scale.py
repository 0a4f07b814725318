"""deploy/kubernetes-scale.yaml: Kafka, compute processes sharing the computations with the settings
tests/server/test_sharded_compute.py runs, and edges behind a Service; each pod stops the way the
server drains."""

from __future__ import annotations

from typing import Any

import yaml

from tests.conftest import ROOT
from tests.infra import PUBSUB_BUFFER_LIMIT
from tests.server.test_sharded_compute import SLOTS, sharded_env
from tests.server.test_two_tier import SHARDING_SETTINGS, SHARED_LOG_SETTINGS

MANIFEST = ROOT / "deploy" / "kubernetes-scale.yaml"


def objects() -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(MANIFEST.read_text())}


def container(workload: dict[str, Any]) -> dict[str, Any]:
    (only,) = workload["spec"]["template"]["spec"]["containers"]
    return dict(only)


def env_of(workload: dict[str, Any]) -> dict[str, str]:
    """Its literal values (one taken from the pod, `valueFrom`, is left out)."""
    return {e["name"]: e["value"] for e in container(workload)["env"] if "value" in e}


def selects(service: dict[str, Any], workload: dict[str, Any]) -> bool:
    labels = workload["spec"]["template"]["metadata"]["labels"]
    return bool(service["spec"]["selector"].items() <= labels.items())


def host_port(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def test_compute_processes_share_the_computations_as_the_sharded_test_runs_them() -> None:
    found = objects()
    compute = found[("Deployment", "sparkwire-compute")]
    assert compute["spec"]["replicas"] >= 2
    assert container(compute)["command"] == ["sparkwire", "serve", "--role", "compute"]
    env = env_of(compute)
    tested = sharded_env("redis://redis:6379/0", "kafka:9092")
    assert set(tested) <= set(env)
    assert set(SHARDING_SETTINGS) == set(tested) - set(SHARED_LOG_SETTINGS)
    assert env["SPARKWIRE_SOURCE"] == tested["SPARKWIRE_SOURCE"] == "kafka"
    assert env["SPARKWIRE_COMPUTE_SLOTS"] == str(SLOTS) and SLOTS > 0
    assert compute["spec"]["replicas"] <= SLOTS  # a process beyond the slots would hold none

    # the bootstrap is the manifest's Kafka Service, which selects the broker, which advertises
    # an address under that Service, in KRaft mode
    host, port = host_port(env["SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS"])
    service, broker = found[("Service", host)], found[("StatefulSet", host)]
    assert selects(service, broker) and broker["spec"]["serviceName"] == host
    assert port in {p["port"] for p in service["spec"]["ports"]}
    assert broker["spec"]["replicas"] == 1
    assert container(broker)["image"].startswith("apache/kafka:4.")
    kafka = env_of(broker)
    assert kafka["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert kafka["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{host}-0.{host}:{port}"
    mounts = {m["mountPath"] for m in container(broker)["volumeMounts"]}
    assert any(kafka["KAFKA_LOG_DIRS"].startswith(m) for m in mounts)  # its data outlives the pod

    # Redis between the tiers is the manifest's, append-only (the catalogs)
    redis_host = env["SPARKWIRE_REDIS_URL"].removeprefix("redis://").split("/")[0]
    host, port = host_port(redis_host)
    redis_service, redis = found[("Service", host)], found[("StatefulSet", host)]
    assert selects(redis_service, redis) and port in {p["port"] for p in redis_service["spec"]["ports"]}
    assert "--appendonly" in container(redis)["command"]
    command = container(redis)["command"]
    assert command[command.index("--client-output-buffer-limit") + 1] == PUBSUB_BUFFER_LIMIT


def test_the_edges_share_the_log_and_need_no_sharding_setting() -> None:
    found = objects()
    edge = found[("Deployment", "sparkwire-edge")]
    assert edge["spec"]["replicas"] >= 2
    assert container(edge)["command"] == ["sparkwire", "serve", "--role", "edge"]
    env = env_of(edge)
    compute = env_of(found[("Deployment", "sparkwire-compute")])
    for key in SHARED_LOG_SETTINGS:  # the same point log, topic and Redis
        assert env[key] == compute[key]
    assert not set(SHARDING_SETTINGS) & set(env)
    service = found[("Service", "sparkwire")]
    assert selects(service, edge)
    assert not selects(service, found[("Deployment", "sparkwire-compute")])  # clients reach edges only


def test_every_sparkwire_pod_stops_the_way_the_server_drains() -> None:
    found = objects()
    for name in ("sparkwire-compute", "sparkwire-edge"):
        workload = found[("Deployment", name)]
        spec, pod = workload["spec"], workload["spec"]["template"]["spec"]
        assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
        one = container(workload)
        ports = {p["name"] for p in one["ports"]}
        assert one["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"} and "http" in ports
        assert one["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        pre_stop = one["lifecycle"]["preStop"]["exec"]["command"]
        assert pre_stop[0] == "sleep"
        drain = int(pre_stop[1]) + float(env_of(workload)["SPARKWIRE_SHUTDOWN_GRACE"])
        assert pod["terminationGracePeriodSeconds"] >= drain + 20, name
        volumes = {v["name"] for v in pod["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in one["volumeMounts"]}
        assert set(mounts) <= volumes and env_of(workload)["SPARKWIRE_DATA_DIR"] in mounts.values()


def test_each_compute_pod_tells_the_edges_its_own_address() -> None:
    """The edges forward the reads only Spark does to a compute process's advertised URL: each pod's
    own IP (the downward API), defined before the variable that refers to it."""
    compute = objects()[("Deployment", "sparkwire-compute")]
    names = [e["name"] for e in container(compute)["env"]]
    pod_ip = next(e for e in container(compute)["env"] if e["name"] == "POD_IP")
    assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    port = container(compute)["ports"][0]["containerPort"]
    assert env_of(compute)["SPARKWIRE_ADVERTISE_URL"] == f"http://$(POD_IP):{port}"
    assert names.index("POD_IP") < names.index("SPARKWIRE_ADVERTISE_URL")
