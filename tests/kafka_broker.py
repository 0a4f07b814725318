"""A throwaway single-node Kafka for tests, started by the same script as `make kafka`
(deploy/kafka.sh: the broker fetched with Maven into the cache on first use, KRaft, 127.0.0.1)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.conftest import ROOT, free_port
from tests.infra import Daemon, _spawn, _wait

SCRIPT = ROOT / "deploy" / "kafka.sh"


@dataclass
class KafkaBroker:
    workdir: Path
    port: int
    controller_port: int
    daemon: Daemon | None = None
    cluster_id: str = ""  # formats an empty data dir with this cluster id (random if empty)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start (or start again, same port, same data) and wait until it answers."""
        argv = [str(SCRIPT), "run", str(self.port), str(self.workdir / "data")]
        env = {"KAFKA_CONTROLLER_PORT": str(self.controller_port), "KAFKA_CLUSTER_ID": self.cluster_id}
        self.daemon = _spawn("kafka", argv, self.workdir / "kafka.log", env)
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 2})
        _wait(self.daemon, lambda: admin.list_topics(timeout=2).brokers, 120)

    def stop(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()
            self.daemon = None


def fetch_kafka() -> None:
    """The broker and Spark's connector in the cache (a fresh machine fetches them: minutes). A fetch
    that fails fails the test: nothing is skipped."""
    done = subprocess.run([str(SCRIPT), "fetch"], capture_output=True, text=True, check=False, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"deploy/kafka.sh fetch failed (Maven and Maven Central needed):\n{done.stderr[-2000:]}")


def start_kafka(workdir: Path) -> KafkaBroker:
    fetch_kafka()
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    controller = free_port()
    while controller == port:
        controller = free_port()
    broker = KafkaBroker(workdir, port, controller)
    broker.start()
    return broker
