"""The one SparkSession of a Sparkwire process: local[2] by default, quiet, sized to the cores."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from compute.cluster import executor_code_origin, is_cluster, ship_code

log = logging.getLogger(__name__)
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
FILESYSTEM_CHECKPOINT_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def build_session(
    master: str, shuffle_partitions: int | None = None, jvm_output: Path | None = None
) -> SparkSession:
    """`jvm_output`: a file for the JVM's own console output (log4j, JVM warnings, the Python
    workers it starts), which would otherwise interleave with the server's logs."""
    # Executors' Python must be ours, so the data source and evaluators import the same code.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    cores = os.cpu_count() or 2
    partitions = shuffle_partitions or max(1, min(cores, 8))
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
        # The checkpoint is written twice per micro-batch and never resumed (compute/checkpoint.py).
        # Spark's default manager writes it through Hadoop's FileContext, which (without Hadoop's
        # native library) starts a `chmod` and two `readlink` processes per file; the FileSystem
        # manager over raw local files starts only the `chmod` and writes no .crc files (0012).
        .set("spark.sql.streaming.checkpointFileManagerClass", FILESYSTEM_CHECKPOINT_MANAGER)
        .set("spark.hadoop.fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
        .set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}")
    )
    if jvm_output is not None and SparkContext._active_spark_context is None:
        jvm_output.parent.mkdir(parents=True, exist_ok=True)
        with jvm_output.open("ab") as sink:  # the JVM keeps its own copy of the descriptor
            gateway = launch_gateway(conf, popen_kwargs={"stdout": sink, "stderr": sink})
        SparkContext(conf=conf, gateway=gateway)
        log.info("Spark's console output goes to %s", jvm_output)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if is_cluster(master):
        ship_code(spark)
        log.info("executors import compute from %s", executor_code_origin(spark))
    log.info("spark session up: master=%s shuffle_partitions=%d", master, partitions)
    return spark
