"""The one SparkSession of a Sparkwire process: local[2] by default, quiet, sized to the cores."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from compute.cluster import executor_code_origin, is_cluster, ship_code

log = logging.getLogger(__name__)
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def build_session(master: str, shuffle_partitions: int | None = None) -> SparkSession:
    # Executors' Python must be ours, so the data source and evaluators import the same code.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    cores = os.cpu_count() or 2
    partitions = shuffle_partitions or max(1, min(cores, 8))
    spark = (
        SparkSession.builder.master(master)
        .appName("sparkwire")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Stored in each checkpoint at the first start: the default 200 makes stateful work 25-45x slower.
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.default.parallelism", str(partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    if is_cluster(master):
        ship_code(spark)
        log.info("executors import compute from %s", executor_code_origin(spark))
    log.info("spark session up: master=%s shuffle_partitions=%d", master, partitions)
    return spark
