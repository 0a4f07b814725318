"""A past period of some series, read from the log as the back-fill reads it (compute/spark/engine.py):
the embedded log by the driver itself, the Kafka log by one Spark batch job (Spark's Kafka source).
What a replay (app/fanout/replay.py, docs/extensions.md) plays back."""

from __future__ import annotations

import pyarrow.compute as pc
from pyspark.sql import functions as F

from compute.evaluation.computation import Batch
from compute.spark.engine import Engine, split_by_series
from compute.storage.series import SeriesInfo


def known_series(engine: Engine) -> list[SeriesInfo]:
    """Every series in the log's catalog now, series other servers (or this one's writer) added
    since the last micro-batch included. The catch-up goes through the engine's routing, so the
    live computations are routed to those series too, exactly as the next micro-batch would do
    (a shared log's new series are announced once: nobody else may take them)."""
    engine.routes.catch_up()
    return engine.log.series()


def read_period(engine: Engine, series_ids: list[int], from_ts: int, to_ts: int) -> Batch:
    """These series' points with from_ts <= ts <= to_ts that the log holds now, per series in seq
    order. Blocking: a log read or a Spark job."""
    if not series_ids:
        return {}
    log = engine.log
    upto_seq = log.end_offset()  # everything written so far
    if log.driver_reads:
        table = log.read_history(series_ids, from_ts, upto_seq)
        table = table.filter(pc.less_equal(table.column("ts"), to_ts))
    else:  # the back-fill's Spark batch read, cut at to_ts before the rows reach the driver
        table = engine.history_points(series_ids, from_ts, upto_seq).where(F.col("ts") <= to_ts).toArrow()
    return split_by_series(table)
