"""The streaming engine: ONE Structured Streaming query over the log, ONE Spark job per micro-batch
(the batch filtered to the series in use, collected once through Arrow), then every live
computation updated on the driver. New computations are back-filled by one Spark batch job over the
log before they join the stream.

The series in use are data: an `IN` set over series ids, rebuilt only when that set changes. With
pre-aggregation on (compute/preaggregate.py) they are a broadcast table that also carries each
series' bucket width (0 = raw): a series whose every reader holds buckets reaches the driver as
buckets. The filter, not a join, is the default because the join's broadcast is rebuilt by every
micro-batch: ~0.5 s against ~0.1 s per batch (docs/decisions/0009-driver-side-stream-read.md)."""

from __future__ import annotations

import logging
import math
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import ArrayType

from compute import log as durable_log
from compute import preaggregate
from compute.arrow_collect import collect_arrow
from compute.backend import PointLog
from compute.backfill import BackfillQueue
from compute.computation import Batch, Change, Computation, Rows
from compute.errors import ComputeError
from compute.session import jvm_exit_status

log = logging.getLogger(__name__)

ChangeListener = Callable[[list[tuple[Computation, Change | ComputeError]]], None]


@dataclass
class BatchStats:
    batch_id: int
    rows: int
    seconds: float
    late_points: int = 0  # points live computations refused as too late
    aggregated_series: int = 0  # series that reached the driver as buckets
    aggregated_buckets: int = 0  # rows of the result that were buckets
    aggregated_points: int = 0  # points those buckets summarize


class Engine:
    def __init__(
        self,
        spark: SparkSession,
        durable: PointLog,
        checkpoint_dir: Path,
        trigger_ms: int,
        on_changes: ChangeListener,
        preaggregate_min_points: int = 0,
    ) -> None:
        self.spark = spark
        self.log = durable
        self.checkpoint_dir = checkpoint_dir
        self.trigger_ms = trigger_ms
        self.on_changes = on_changes
        self._lock = threading.Lock()  # guards the routing tables below
        self._computations: dict[str, Computation] = {}
        self._readers: dict[int, set[Computation]] = {}  # series id -> computations reading it
        self._series_df: DataFrame | None = None  # with pre-aggregation: (series_id, agg_width)
        self._series_filter: Column | None = None  # without: series_id IN (the series in use)
        self._series_dirty = True
        self._series_widths: dict[int, int] = {}  # the table's contents: series id -> agg width
        # 0: pre-aggregation off; else the points per bucket a summarized series needs for it
        self.preaggregate_min_points = preaggregate_min_points if durable.range_reads else 0
        self._query: StreamingQuery | None = None
        self._stream_blocks = False  # whether the stream's rows are blocks (BLOCK_SCHEMA), not points
        self.last_batch: BatchStats | None = None
        self.degraded = False  # the query failed and is being restarted (compute/supervisor.py)
        self._backfills = BackfillQueue(self._read_history)
        self.on_batch: Callable[[BatchStats], None] | None = None  # e.g. metrics
        spark.dataSource.register(durable.data_source)
        self._source = durable.data_source.name()

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the query at the log's current end: history reaches computations by back-fill."""
        options = self.log.stream_options()
        stream = self.spark.readStream.format(self._source).options(**options).load()
        # The embedded log's stream hands Spark blocks (compute/source.py), the Redis log's points.
        self._stream_blocks = isinstance(stream.schema["ts"].dataType, ArrayType)
        self._query = (
            stream.writeStream.foreachBatch(self._on_batch)
            .trigger(processingTime=f"{self.trigger_ms} milliseconds")
            .option("checkpointLocation", str(self.checkpoint_dir))
            .queryName("sparkwire")
            .start()
        )
        log.info("streaming query started on %s %s", self._source, options)

    @property
    def query(self) -> StreamingQuery | None:
        return self._query

    def query_active(self) -> bool:
        if self._query is None or jvm_exit_status(self.spark) is not None:
            return False
        try:
            return bool(self._query.isActive)
        except Exception:  # the JVM is going: a query it cannot answer for is not running
            return False

    @property
    def running(self) -> bool:
        return self.query_active() and not self.degraded

    def first_trigger_ran(self, timeout: float) -> bool:
        """Whether the query got through its first trigger (False: it died, or not yet in time)."""
        return self._query is not None and first_trigger_ran(self._query, timeout)

    def stop(self) -> None:
        if self._query is not None:
            query, self._query = self._query, None
            status = jvm_exit_status(self.spark)
            if status is not None:  # a JVM that exited took the query with it: nothing to stop
                log.info("streaming query not stopped: Spark's JVM had already exited (status %d)", status)
                return
            try:
                query.stop()
            except Exception as exc:  # stopping may race with a dying JVM; nothing left to save
                log.warning("stopping the streaming query failed: %s", _first_line(exc))

    def recover(self) -> None:
        """Replace a failed query with a new one at the log's end and rebuild every computation
        from the log (points written while the query was down included). Blocking: Spark jobs."""
        self.stop()
        with self._lock:
            computations = list(self._computations.values())
            for computation in computations:
                computation.reset()  # until rebuilt, stream rows wait in the computation
        # A checkpoint holds nothing worth resuming (the stream starts at the log's end), and the
        # old one may be what broke the query.
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
        self.start()
        if not self.first_trigger_ran(timeout=120):
            reason = self.failure_reason()
            raise RuntimeError(f"the restarted query did not get through its first trigger: {reason}")
        # Taken after the stream's start offset: every point is in the back-fill or the stream
        # (points in both are skipped in the stream by each computation's back-fill mark).
        with self._lock:
            snapshot = self.log.end_offset()
            for computation in computations:
                computation.backfill_seq = snapshot
        for computation, error in self._backfills.run_all(computations):
            if error is None:
                continue
            if not isinstance(error, ComputeError):
                log.error("rebuilding a computation failed: %s", error)
                error = ComputeError("ComputeFailed", str(error), status_code=500)
            computation.fail(error)

    def failure_reason(self) -> str:
        """Why the query stopped, in a line (for logs, /readyz and the subscribers' error)."""
        try:
            exc = self._query.exception() if self._query is not None else None
        except Exception:  # the JVM side may be gone too
            return "no reason available"
        if exc is None:
            return "stopped without an error" if self._query is not None else "no query"
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]

    def warm_up(self) -> None:
        """Run one tiny job so the first subscriber does not pay the JVM's start-up."""
        self.spark.range(1).toArrow()

    # -- computations ------------------------------------------------------------------------------
    def find(self, key: str) -> Computation | None:
        with self._lock:
            return self._computations.get(key)

    def add(self, computation: Computation) -> Computation:
        """Register a computation (or return the live one with its key), then back-fill it.

        Blocking (a Spark job): call it off the event loop.
        """
        with self._lock:
            existing = self._computations.get(computation.key)
            if existing is not None:
                return existing
            self._route_new_series()
            if self.preaggregate_min_points > 0:
                computation.enable_preaggregation(self.log.read_series_range, self.preaggregate_min_points)
            for info in self.log.series():
                if computation.route(info):
                    self._readers.setdefault(info.id, set()).add(computation)
                    self._series_dirty = True
            # Under the lock: a batch that planned before this point ends at or below this seq.
            computation.backfill_seq = self.log.end_offset()
            self._computations[computation.key] = computation
        try:
            self._backfill(computation)
        except Exception:
            self.remove(computation)
            raise
        return computation

    def remove(self, computation: Computation) -> None:
        with self._lock:
            if self._computations.get(computation.key) is computation:
                del self._computations[computation.key]
            for sid in list(computation.routes):
                readers = self._readers.get(sid)
                if readers is not None:
                    readers.discard(computation)
                    if not readers:
                        del self._readers[sid]
                        self._series_dirty = True

    def computations(self) -> list[Computation]:
        with self._lock:
            return list(self._computations.values())

    def _route_new_series(self) -> None:
        """Route series new to the catalog (from any server) to the computations reading them.
        Call with the lock held: a series reaches the catalog before its points can be read, so
        after this every series of a batch planned earlier is routed."""
        for info in self.log.poll_new_series():
            for computation in self._computations.values():
                if computation.route(info):
                    self._readers.setdefault(info.id, set()).add(computation)
                    self._series_dirty = True

    def _backfill(self, computation: Computation) -> None:
        self._backfills.run(computation)  # shares one Spark job with computations added meanwhile

    def _read_history(
        self, series_ids: list[int], from_ts: int, upto_seq: int, widths: dict[int, int]
    ) -> Batch:
        """These series, ts >= from_ts, seq <= upto_seq: one Spark batch job over the log, where series
        with a width come back pre-aggregated per (series, bucket of that width). Raw history of a log
        the driver can read itself (the embedded one) is read directly: a Spark batch read through
        the Python data source costs ~0.75 s even for no rows (decision record 0016)."""
        if not any(widths.values()):
            if self.log.range_reads:
                return dict(split_by_series(self.log.read_history(series_ids, from_ts, upto_seq)))
            return dict(split_by_series(self._history_points(series_ids, from_ts, upto_seq).toArrow()))
        points = self._history_points(series_ids, from_ts, upto_seq)
        table = self.spark.createDataFrame(
            [(sid, widths.get(sid, 0)) for sid in series_ids], "series_id long, agg_width long"
        )
        any_raw = not all(widths.get(sid, 0) for sid in series_ids)
        raw, agg = preaggregate.split(preaggregate.plan(points, F.broadcast(table), any_raw).toArrow())
        out: Batch = dict(split_by_series(raw))
        out.update(agg)
        return out

    def _history_points(self, series_ids: list[int], from_ts: int, upto_seq: int) -> DataFrame:
        """The Spark batch read of the log's history (the data source's batch reader), as points."""
        options = self.log.backfill_options(series_ids, from_ts, upto_seq)
        reader = self.spark.read.format(self._source).schema(durable_log.POINT_SCHEMA_DDL)
        return reader.options(**options).load()

    # -- the micro-batch ---------------------------------------------------------------------------
    def _widths(self) -> dict[int, int]:
        """Per series in use: its pre-aggregation width. A series is pre-aggregated when every
        computation reading it holds buckets dense enough (`agg_width`) and they accept the same
        points (same allowed lateness); the width is the gcd of theirs, so its buckets nest in each.
        Call with the lock held."""
        widths: dict[int, int] = {}
        for sid, readers in self._readers.items():
            width = 0
            if self.preaggregate_min_points > 0 and readers:
                asks = [c.agg_width for c in readers]
                lateness = {c.allowed_lateness_ns for c in readers}
                if all(asks) and len(lateness) == 1 and all(c.ready for c in readers):
                    width = math.gcd(*asks)
            widths[sid] = width
        return widths

    def _refresh_series(self) -> bool:
        """Bring the series filter and table up to date; False when no series is in use."""
        with self._lock:
            self._route_new_series()
            widths = self._widths()
            if not self._series_dirty and widths == self._series_widths:
                return bool(widths)
            self._series_dirty = False
        # The py4j calls run outside the lock: the event loop takes it (find, remove) and must never
        # wait on Spark. Only this (the batch) thread builds them, so nothing races the swap.
        ids = sorted(widths)
        aggregated = sum(1 for w in widths.values() if w)
        if aggregated != sum(1 for w in self._series_widths.values() if w):
            log.info("pre-aggregating %d of %d series in use", aggregated, len(widths))
        self._series_df = None
        if aggregated:
            rows = [(i, widths[i]) for i in ids]
            self._series_df = F.broadcast(self.spark.createDataFrame(rows, "series_id long, agg_width long"))
        # Spark turns a long IN list into a hash set (OptimizeIn); built once, reused by every batch.
        self._series_filter = F.col("series_id").isin(ids) if ids else None
        self._series_widths = widths
        return bool(ids)

    def _on_batch(self, batch: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        if not self._refresh_series():
            return
        agg: dict[int, preaggregate.AggRows] = {}
        if self._series_df is not None:
            any_raw = not all(self._series_widths.values())
            points = explode_blocks(batch) if self._stream_blocks else batch
            table, agg = preaggregate.split(preaggregate.plan(points, self._series_df, any_raw).toArrow())
        else:
            assert self._series_filter is not None  # set whenever a series is in use
            in_use = batch.where(self._series_filter)
            if self._stream_blocks:  # blocks cross to Python as they are; numpy unpacks them
                table = durable_log.points_of_blocks(collect_arrow(in_use, durable_log.BLOCK_SCHEMA))
            else:
                table = collect_arrow(in_use.select(*preaggregate.POINT_COLUMNS), durable_log.POINT_SCHEMA)
        now = time.time_ns()
        by_series: Batch = dict(split_by_series(table))
        by_series.update(agg)
        with self._lock:
            targets: dict[Computation, Batch] = {}
            for sid, series_rows in by_series.items():
                for computation in self._readers.get(sid, ()):
                    targets.setdefault(computation, {})[sid] = series_rows
        changes: list[tuple[Computation, Change | ComputeError]] = []
        late_before = sum(c.late_dropped for c in targets)
        for computation, rows in targets.items():
            try:
                change = computation.apply_batch(rows, now)
            except ComputeError as exc:  # one computation failing leaves the others running
                changes.append((computation, exc))
                continue
            except Exception as exc:
                log.exception("computation failed")
                changes.append((computation, ComputeError("ComputeFailed", str(exc), status_code=500)))
                continue
            if change is not None:
                changes.append((computation, change))
        if changes:
            self.on_changes(changes)
        late = sum(c.late_dropped for c in targets) - late_before
        self.last_batch = BatchStats(
            batch_id,
            table.num_rows + sum(len(a.min_seq) for a in agg.values()),
            time.perf_counter() - started,
            late,
            aggregated_series=len(agg),
            aggregated_buckets=sum(len(a.min_seq) for a in agg.values()),
            aggregated_points=sum(a.count for a in agg.values()),
        )
        if self.on_batch is not None:
            self.on_batch(self.last_batch)

    def pending_points(self) -> int:
        """Points in the log the stream has not processed yet (Numaflow's Pending). Not on the loop."""
        return self.log.pending()


_PAST_FIRST_TRIGGER = frozenset({"Waiting for data to arrive", "Waiting for next trigger"})


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def first_trigger_ran(query: StreamingQuery, timeout: float) -> bool:
    """Whether a query got through its first trigger (False: it died, or not yet in time).

    The first trigger starts the source's Python runner, which must connect back to the JVM
    within a window Spark fixes at 10 s; a busy machine can miss it, and the query dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not query.isActive:
            return False
        if query.lastProgress is not None or query.status["message"] in _PAST_FIRST_TRIGGER:
            return True
        time.sleep(0.2)
    return False


def explode_blocks(blocks: DataFrame) -> DataFrame:
    """BLOCK_SCHEMA rows -> POINT_SCHEMA rows in Spark, for plans over points (pre-aggregation)."""
    exploded = blocks.select("seq", "series_id", F.posexplode("ts").alias("pos", "ts"), "value", "str")
    pos = F.col("pos")
    return exploded.select(
        "seq", "series_id", "ts", F.get("value", pos).alias("value"), F.get("str", pos).alias("str")
    )


def split_by_series(table: pa.Table) -> dict[int, Rows]:
    """Arrow rows (seq, series_id, ts, value, str) -> per-series columns in seq order."""
    if table.num_rows == 0:
        return {}
    seq = table.column("seq").to_numpy()
    sid = table.column("series_id").to_numpy()
    ts = table.column("ts").to_numpy()
    value_col = table.column("value")
    str_col = table.column("str")
    order = np.lexsort((seq, sid))
    sid_sorted = sid[order]
    bounds = np.flatnonzero(np.r_[True, sid_sorted[1:] != sid_sorted[:-1], True])
    # A double series' NaN is stored as SQL NULL and comes back as NaN here.
    values_all = value_col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    str_all = np.asarray(str_col.to_pylist(), dtype=object) if str_col.null_count < table.num_rows else None
    out: dict[int, Rows] = {}
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        idx = order[a:b]
        s = int(sid_sorted[a])
        is_enum = str_all is not None and str_all[idx[0]] is not None  # string points are never NULL
        out[s] = Rows(seq[idx], ts[idx], str_all[idx] if is_enum else values_all[idx])  # type: ignore[index]
    return out
