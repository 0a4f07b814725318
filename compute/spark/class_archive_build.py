"""Record Spark's class-data archive (compute/spark/class_archive.py): one short run of what a server
does at start and per micro-batch, in a throwaway data directory, with the JVM told to write the
classes it loaded as it exits. `sparkwire spark-archive` runs it; `make test` once per machine.

The run: a session, the warm-up job, the streaming query over the embedded log with one live
computation, points written and carried to it by a micro-batch. Classes a later run needs beyond
these are loaded from the jars as before; the archive only saves the recorded ones' loading.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation
from compute.spark.class_archive import archive_path
from compute.spark.engine import Engine
from compute.spark.session import build_session, jvm_process, stop_session
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesKey, SeriesKind
from compute.storage.sqlite.point_log import EmbeddedLog
from compute.storage.sqlite.writer import DurableLog

logger = logging.getLogger(__name__)
RID = "ri.sparkwire.main.dataset.class-archive"
NANOS = 1_000_000_000
WINDOW_NS = 60 * NANOS
BATCH_WAIT_S = 120  # for the micro-batch that carries the points; far above a busy machine's
EXIT_WAIT_S = 300  # the JVM writes ~140 MB as it exits: ~20 s on a 2-core machine


def record(target: Path | None = None) -> Path:
    """Record the archive to `target` (default: class_archive.archive_path()); its path. Written
    beside it and renamed once the JVM has exited 0, so a reader never maps half a file."""
    target = target or archive_path()
    if target is None:
        raise RuntimeError("no JDK found (JAVA_HOME or `java` on PATH): nothing to record an archive for")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="sparkwire-class-archive-") as tmp:
        work = Path(tmp)
        spark = build_session("local[2]", jvm_output=work / "spark.log", record_classes_to=partial)
        jvm = jvm_process(spark)
        _run_a_server_s_start(spark, work)
        stop_session(spark)
        if jvm is None:
            raise RuntimeError("the session's JVM was not started by this process: no archive to record")
        assert jvm.stdin is not None
        jvm.stdin.close()  # PySpark's gateway exits when its stdin closes; the archive is written then
        status = jvm.wait(EXIT_WAIT_S)
        if status != 0 or not partial.is_file():
            output = (work / "spark.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"Spark's JVM exited {status} without writing the archive:\n{output}")
    partial.replace(target)
    return target


def _run_a_server_s_start(spark: object, work: Path) -> None:
    log = EmbeddedLog(DurableLog(work / "log.db"), "class-archive")
    engine = Engine(spark, log, work / "checkpoint", 100, lambda *_: None)  # type: ignore[arg-type]
    try:
        key = SeriesKey.of(RID, "x", {})
        now = time.time_ns()
        ts = now - np.arange(1000, 0, -1, dtype=np.int64) * 1_000_000
        log.submit([SeriesWrite(key, SeriesKind.NUMERIC, ts, np.sin(np.arange(1000.0)))]).result()
        engine.warm_up()
        engine.start()
        if not engine.first_trigger_ran(BATCH_WAIT_S):
            raise RuntimeError("the streaming query did not get through its first trigger")
        engine.add(_mean_of_x())
        log.submit([SeriesWrite(key, SeriesKind.NUMERIC, [time.time_ns()], [1.0])]).result()
        deadline = time.monotonic() + BATCH_WAIT_S
        while (engine.last_batch is None or engine.last_batch.rows == 0) and time.monotonic() < deadline:
            time.sleep(0.1)
        if engine.last_batch is None or engine.last_batch.rows == 0:
            raise RuntimeError("no micro-batch carried the written point")
    finally:
        engine.stop()
        log.close()


def _mean_of_x() -> Computation:
    variable = {
        "type": "channel",
        "channel": {
            "type": "dataSource",
            "dataSource": {
                "dataSourceRid": {"type": "literal", "literal": RID},
                "channel": {"type": "literal", "literal": "x"},
                "tags": {},
                "tagsToGroupBy": [],
                "groupByTags": [],
            },
        },
    }
    node = {
        "type": "series",
        "series": {"input": {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": "x"}}}},
    }
    plan = compile_plan(node, WINDOW_NS, {"x": variable}, Limits(), ResultOptions())
    return Computation("class-archive", plan, None)
