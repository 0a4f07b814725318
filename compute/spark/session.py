"""The one SparkSession of a Sparkwire process: local[2] by default, quiet, sized to the cores.

Stopping belongs to the Python process. Spark's JVM is started ignoring SIGTERM (PySpark already
starts it ignoring SIGINT), so a SIGTERM sent to the whole process group (`kill -TERM -- -PGID`) or
to every process of a cgroup at once (systemd's KillMode=control-group) leaves it running while the
server drains; the server then stops the query and the session itself. The JVM still goes when the
Python process goes, however it goes: PySpark's gateway exits when its stdin pipe from Python closes
(docs/decisions/0025-stopping-under-any-supervisor.md).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from compute.spark.class_archive import archive_in_use, java_option, mapped_by, recording_option
from compute.spark.cluster import executor_code_origin, is_cluster, ship_code

logger = logging.getLogger(__name__)
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
FILESYSTEM_CHECKPOINT_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


DRIVER_MEMORY = "1g"


def build_session(
    master: str,
    shuffle_partitions: int | None = None,
    jvm_output: Path | None = None,
    driver_memory: str = DRIVER_MEMORY,
    jars: list[str] | None = None,
    record_classes_to: Path | None = None,
) -> SparkSession:
    """`jvm_output`: a file for the JVM's own console output (log4j, JVM warnings, the Python
    workers it starts), which would otherwise interleave with the server's logs.

    `driver_memory`: the driver JVM's heap, taken whole at start (-Xms = -Xmx, pre-touched): a heap
    that grows into its cap over hours looks like a leak to an operator, one taken at start does not
    grow (docs/decisions/0027-driver-heap-taken-at-start.md).

    `jars`: files for `spark.jars` (the Kafka log's connector, fetched by deploy/kafka.sh). Never
    `spark.jars.packages`: Spark's own resolver would reach for Maven Central at every start.

    The JVM starts from the machine's class-data archive when one is recorded
    (compute/spark/class_archive.py); `record_classes_to`: record one there instead, as it exits."""
    # Executors' Python must be ours, so the data source and evaluators import the same code.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    cores = os.cpu_count() or 2
    partitions = shuffle_partitions or max(1, min(cores, 8))
    java_options = [
        f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}",
        f"-Xms{driver_memory}",
        "-XX:+AlwaysPreTouch",
    ]
    archive = archive_in_use() if record_classes_to is None else None
    if record_classes_to is not None:
        java_options.append(recording_option(record_classes_to))
    elif archive is not None:
        java_options.append(java_option(archive))
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName("sparkwire")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        # Stored in each checkpoint at the first start: the default 200 makes stateful work 25-45x slower.
        .set("spark.sql.shuffle.partitions", str(partitions))
        .set("spark.default.parallelism", str(partitions))
        .set("spark.sql.execution.arrow.pyspark.enabled", "true")
        .set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        .set("spark.python.worker.reuse", "true")
        # The stream reader's rows are stored in the block manager and read back by the batch's task,
        # through spark.serializer: Java serialization could not keep up at 200,000 points/s (0014).
        .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        # The checkpoint is written twice per micro-batch and never resumed (compute/spark/checkpoint.py).
        # Spark's default manager writes it through Hadoop's FileContext, which (without Hadoop's
        # native library) starts a `chmod` and two `readlink` processes per file; the FileSystem
        # manager over raw local files starts only the `chmod` and writes no .crc files (0012).
        .set("spark.sql.streaming.checkpointFileManagerClass", FILESYSTEM_CHECKPOINT_MANAGER)
        .set("spark.hadoop.fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
        .set("spark.driver.memory", driver_memory)
        .set("spark.driver.extraJavaOptions", " ".join(java_options))
    )
    if jars:
        conf.set("spark.jars", ",".join(jars))
    if jvm_output is not None and SparkContext._active_spark_context is None:
        jvm_output.parent.mkdir(parents=True, exist_ok=True)
        with jvm_output.open("ab") as sink:  # the JVM keeps its own copy of the descriptor
            popen_kwargs = _JvmPopenKwargs(stdout=sink, stderr=sink)
            gateway = launch_gateway(conf, popen_kwargs=popen_kwargs)
        SparkContext(conf=conf, gateway=gateway)
        logger.info("Spark's console output goes to %s", jvm_output)
        if not jvm_ignores_sigterm(gateway.proc):
            logger.warning(
                "Spark's JVM does not ignore SIGTERM: a signal to the process group stops it at once"
            )
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if is_cluster(master):
        ship_code(spark)
        logger.info("executors import compute from %s", executor_code_origin(spark))
    logger.info(
        "spark session up: master=%s shuffle_partitions=%d class archive=%s",
        master,
        partitions,
        _archive_state(spark, archive),
    )
    return spark


def _archive_state(spark: SparkSession, archive: Path | None) -> str:
    """What the log says of the class archive: the file the JVM maps, or why none."""
    if archive is None:
        return "none (`sparkwire spark-archive` records one)"
    jvm = jvm_process(spark)
    if jvm is None or mapped_by(jvm.pid, archive) is not False:
        return str(archive)
    return f"{archive} refused by the JVM (recorded for other jars: `sparkwire spark-archive --again`)"


class _JvmPopenKwargs(dict[str, Any]):
    """`launch_gateway`'s Popen arguments. PySpark sets its own `preexec_fn` in them (the JVM ignores
    SIGINT, so Ctrl+C in a terminal reaches only Python); this one adds SIGTERM to it.

    A signal ignored when a program starts stays ignored across exec (spark-submit is a shell
    script that execs the JVM), and HotSpot installs no shutdown handler for a SIGHUP, SIGINT or
    SIGTERM that is ignored at start-up (the `nohup` convention), so the JVM and the Python
    processes it starts with that disposition (the streaming source's runner) ignore SIGTERM.
    """

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "preexec_fn":
            value = _also_ignoring_sigterm(value)
        super().__setitem__(key, value)


def _also_ignoring_sigterm(preexec: Callable[[], None] | None) -> Callable[[], None]:
    def preexec_fn() -> None:  # runs in the forked child, before exec
        if preexec is not None:
            preexec()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    return preexec_fn


def jvm_ignores_sigterm(process: subprocess.Popen[bytes] | None) -> bool:
    """Whether the JVM process ignores SIGTERM (True where it cannot be told: not Linux, no process)."""
    if process is None:
        return True
    try:
        status = Path(f"/proc/{process.pid}/status").read_text()
    except OSError:
        return True
    ignored = next((line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), None)
    return ignored is None or bool(int(ignored, 16) >> (signal.SIGTERM - 1) & 1)


def jvm_process(spark: SparkSession) -> subprocess.Popen[bytes] | None:
    """The JVM this process started for the session (None: a gateway it did not start)."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    return getattr(gateway, "proc", None)


def jvm_exit_status(spark: SparkSession) -> int | None:
    """The JVM's exit status once it has exited; None while it runs (or when it is not ours)."""
    process = jvm_process(spark)
    return None if process is None else process.poll()


def stop_session(spark: SparkSession) -> None:
    """Stop the session, or say in one line why there is nothing left to stop (a JVM that exited on
    its own, killed or crashed, leaves nothing to save; no traceback for it)."""
    status = jvm_exit_status(spark)
    if status is not None:
        logger.warning("Spark's JVM had already exited (status %d); nothing to stop", status)
        return
    try:
        spark.stop()
    except Exception as exc:
        status = jvm_exit_status(spark)
        if status is None:
            logger.warning("stopping the Spark session failed: %s", exc)
        else:
            logger.warning("Spark's JVM exited while the session stopped (status %d)", status)
