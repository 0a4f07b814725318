"""Processes the scale-out tests run beside Sparkwire, all bound to 127.0.0.1: a redis-server and a
Spark standalone master with one worker, started from pyspark's own launcher (`bin/spark-class`)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pyspark
import pytest
import redis

from tests.conftest import ServerProcess, free_port, start_server

if TYPE_CHECKING:
    from tests.kafka_broker import KafkaBroker  # which imports this module

SPARK_HOME = Path(pyspark.__file__).resolve().parent


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self, timeout: float = 30) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def _spawn(name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> Daemon:
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        argv, stdout=log_file, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )
    return Daemon(name, process, log_path)


def _wait(daemon: Daemon, ready: Callable[[], object], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemon.process.poll() is not None:
            raise RuntimeError(f"{daemon.name} exited with {daemon.process.returncode}:\n{daemon.log_tail()}")
        try:
            if ready():
                return
        except Exception:  # not up yet
            pass
        time.sleep(0.25)
    daemon.stop()
    raise RuntimeError(f"{daemon.name} not ready in {timeout}s:\n{daemon.log_tail()}")


@dataclass
class RedisServer:
    daemon: Daemon
    url: str


# Redis closes a subscriber whose unread output passes 32 MB (8 MB for 60 s) by default: an edge
# taking 2,000 first snapshots at once was cut off, and every mirror re-synced, again and again
# (docs/decisions/0091). The deploy recipes set the same.
PUBSUB_BUFFER_LIMIT = "pubsub 512mb 128mb 60"


def start_redis(workdir: Path, port: int | None = None, persistent: bool = False) -> RedisServer:
    """A throwaway redis-server. Missing binary fails the test (it must not skip): CI installs it.
    `persistent`: an append-only file in `workdir`, so a restart on the same port keeps the data
    (`free_port` picks a port no outgoing connection can take meanwhile)."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail(
            "redis-server is not installed: apt-get install -y --no-install-recommends redis-server "
            "(.ci/run installs it)",
            pytrace=False,
        )
    workdir.mkdir(parents=True, exist_ok=True)
    if port is None:
        port = free_port()
    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    argv += ["--client-output-buffer-limit", PUBSUB_BUFFER_LIMIT]
    argv += ["--appendonly", "yes", "--appendfsync", "always"] if persistent else ["--appendonly", "no"]
    daemon = _spawn("redis-server", [*argv, "--dir", str(workdir)], workdir / "redis.log")
    url = f"redis://127.0.0.1:{port}/0"
    _wait(daemon, lambda: redis.Redis.from_url(url).ping(), 30)
    return RedisServer(daemon, url)


@contextmanager
def server_on_kafka_log(
    base: Path, broker: KafkaBroker, topic: str, settings: dict[str, str] | None = None
) -> Iterator[ServerProcess]:
    """An all-in-one server on the Kafka log (`broker`, its points in `topic`; more SPARKWIRE_
    `settings` if given), stopped on the way out: the shared log with no index of which series
    hold points in a range, whose history Spark's batch jobs read by time."""
    env = {
        "SPARKWIRE_SOURCE": "kafka",
        "SPARKWIRE_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
        "SPARKWIRE_KAFKA_TOPIC": topic,
        **(settings or {}),
    }
    proc = start_server(base / "data", base / "server.log", env=env, ready_timeout=600)
    try:
        yield proc
    finally:
        proc.stop()


@dataclass
class SparkCluster:
    master: Daemon
    worker: Daemon
    url: str
    web_url: str

    def state(self) -> dict:
        return dict(httpx.get(f"{self.web_url}/json/", timeout=5).json())

    def stop(self) -> None:
        self.worker.stop()
        self.master.stop()


@dataclass
class RoleStarter:
    """Starts `sparkwire serve --role ROLE` processes with one environment, each in a directory of
    its own under `workdir`, and keeps them for the fixture to stop."""

    workdir: Path
    env: dict[str, str]
    processes: list[ServerProcess]

    def __call__(self, name: str, role: str, timeout: float) -> ServerProcess:
        base = self.workdir / name
        process = start_server(
            base / "data", base.with_suffix(".log"), self.env, timeout, command=["serve", "--role", role]
        )
        self.processes.append(process)
        return process


def start_spark_cluster(
    workdir: Path, cores: int = 2, memory: str = "2g", timeout: float = 300
) -> SparkCluster:
    workdir.mkdir(parents=True, exist_ok=True)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    env = {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(workdir)}
    port, web_port, worker_web_port = free_port(), free_port(), free_port()
    master_argv = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
    master = _spawn(
        "spark master",
        [*master_argv, "--port", str(port), "--webui-port", str(web_port)],
        workdir / "master.log",
        env,
    )
    url = f"spark://127.0.0.1:{port}"
    web_url = f"http://127.0.0.1:{web_port}"
    worker_argv = [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"]
    worker_argv += ["--cores", str(cores), "--memory", memory, "--webui-port", str(worker_web_port)]
    worker = _spawn(
        "spark worker",
        [*worker_argv, "--work-dir", str(workdir / "work")],
        workdir / "worker.log",
        env,
    )
    cluster = SparkCluster(master, worker, url, web_url)
    try:
        _wait(master, lambda: cluster.state()["status"] == "ALIVE", timeout)
        _wait(worker, lambda: cluster.state()["aliveworkers"] >= 1, timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster
