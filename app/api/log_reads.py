"""How the HTTP reads (export, the ComputeService, the data source reads) take points from the log,
as back-fill does: the embedded log by this process itself (its span index says what a range holds
without a point read), a log the driver cannot read (Kafka) by Spark batch jobs, which only a
process that runs Spark can start (never an edge)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from compute.storage.contract import PointLog
from compute.storage.series import SeriesInfo


class Points(Protocol):
    """One series' points as read (compute/storage/sqlite/blocks.SeriesColumns, or the Rows of a
    Spark read: compute/spark/history.py), in seq order."""

    seq: np.ndarray
    ts: np.ndarray
    values: np.ndarray


def span_reader(log: PointLog) -> Any:
    """The embedded log's path for spans (compute/storage/sqlite/spans.py), None for another log."""
    writer = log.local_writer
    return None if writer is None else writer.path


def read_embedded(log: PointLog, ids: list[int], start: int, end: int) -> Mapping[int, Points]:
    """Blocking: the embedded log read by this process, as back-fill reads it."""
    return log.read_history_columns(ids, start, 2**63 - 1) if ids else {}


def spark_series(engine: Any) -> list[SeriesInfo]:
    """Blocking: every series in the log's catalog now, those other processes added since the last
    micro-batch included (as a replay finds them: compute/spark/history.py)."""
    from compute.spark.history import known_series  # only where Spark runs: never loaded by an edge

    return known_series(engine)


def spark_counts(engine: Any, ids: list[int], start: int, end: int) -> dict[int, int]:
    """Blocking: per series, its points in [start, end), counted by one Spark job on the executors
    (only the counts reach the driver); a series with none is left out."""
    if not ids:
        return {}
    from pyspark.sql import functions as F  # only where Spark runs: never loaded by an edge

    points = engine.history_points(ids, start, engine.log.end_offset()).where(F.col("ts") < end)
    return {int(row["series_id"]): int(row["count"]) for row in points.groupBy("series_id").count().collect()}


def spark_read(engine: Any, ids: list[int], start: int, end: int) -> Mapping[int, Points]:
    """Blocking: the points of these series in [start, end) as back-fill reads a log the driver
    cannot read (compute/spark/history.py: one Spark batch job)."""
    from compute.spark.history import read_period  # only where Spark runs: never loaded by an edge

    return read_period(engine, ids, start, end - 1) if ids else {}
