"""Spark's class-data archive (compute/spark/class_archive.py), as a server uses it: the JVM of a
server started after `make spark-archive` maps the recorded file, and an archive the JDK refuses
only costs a warning (the JDK's -Xshare:auto), never a start."""

from __future__ import annotations

import subprocess
from pathlib import Path

from compute.spark.class_archive import archive_in_use, java_binary, java_option
from tests.conftest import ServerProcess
from tests.processes import process_tree

SPARK_MAIN_CLASS = b"org.apache.spark.deploy.SparkSubmit"


def spark_jvm(server: ServerProcess) -> int:
    for pid in process_tree(server.pid):
        try:
            if SPARK_MAIN_CLASS in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    raise AssertionError("the server runs no Spark JVM")


def test_the_server_s_spark_jvm_maps_the_recorded_archive(server: ServerProcess) -> None:
    archive = archive_in_use()
    assert archive is not None, "no class archive recorded: `make spark-archive` (make test runs it)"
    assert f"class archive={archive}" in server.log_text()
    maps = Path(f"/proc/{spark_jvm(server)}/maps").read_text()
    assert str(archive) in maps


def test_an_archive_the_jdk_refuses_costs_only_its_sharing(tmp_path: Path) -> None:
    """The JDK's own word: `-version` ends "mixed mode, sharing" when it maps an archive."""
    java, recorded = java_binary(), archive_in_use()
    assert java is not None and recorded is not None
    refused = tmp_path / "not-an-archive.jsa"
    refused.write_bytes(b"\0" * 4096)
    for archive, sharing in ((recorded, True), (refused, False)):
        done = subprocess.run(
            [java, java_option(archive), "-version"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert ("sharing" in done.stderr.splitlines()[-1]) is sharing, done.stderr
