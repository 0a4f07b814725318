"""The streaming engine: ONE Structured Streaming query over the log, ONE Spark job per micro-batch
(the batch filtered to the series in use, collected once through Arrow), then every live
computation updated on the driver (compute/evaluation/). New computations are back-filled before they
join the stream: the embedded log's history read by the driver itself, the Kafka log's by one Spark
batch job whose executors read its partitions (through Spark's own Kafka source).

The series in use are data: an `IN` set over series ids, rebuilt only when that set changes (a
broadcast join's table is rebuilt by every micro-batch: ~0.5 s against ~0.1 s per batch,
docs/decisions/0009-driver-side-stream-read.md)."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from compute.evaluation.computation import Batch, Change, Computation, Rows
from compute.evaluation.errors import ComputeError
from compute.evaluation.routing import Routes
from compute.evaluation.window import spare_room
from compute.spark.arrow_collect import collect_arrow
from compute.spark.backfill import BackfillQueue
from compute.spark.followed_series import FollowedSeries
from compute.spark.session import jvm_exit_status
from compute.storage import records
from compute.storage.contract import PointLog

logger = logging.getLogger(__name__)

ChangeListener = Callable[[list[tuple[Computation, Change | ComputeError]]], None]


@dataclass
class BatchStats:
    batch_id: int
    rows: int
    seconds: float
    late_points: int = 0  # points live computations refused as too late
    evaluation_cpu_s: float = 0.0  # this thread's CPU time applying the batch to the computations


class Engine:
    def __init__(
        self,
        spark: SparkSession,
        log: PointLog,
        checkpoint_dir: Path,
        trigger_ms: int,
        on_changes: ChangeListener,
        followed_points: int = 0,
    ) -> None:
        """`followed_points`: how many points of the series it follows a process reading the Kafka log
        keeps, so that a new computation over them is back-filled without a Spark job (0: none)."""
        self.spark = spark
        self.log = log
        self.checkpoint_dir = checkpoint_dir
        self.trigger_ms = trigger_ms
        self.on_changes = on_changes
        self.routes = Routes(log)  # which computations read which series
        self._series_filter: Column | None = None  # series_id IN (the series in use)
        self._query: StreamingQuery | None = None
        self.last_batch: BatchStats | None = None
        self.degraded = False  # the query failed and is being restarted (compute/spark/supervisor.py)
        # The embedded log is read by the driver: per computation, overlapping the loads (backfill.py).
        self._backfills = BackfillQueue(self._read_history, split_reads=log.driver_reads)
        # The embedded log's back-fill reads only its series already (SQLite, per series).
        self.followed = None if log.driver_reads or followed_points <= 0 else FollowedSeries(followed_points)
        self._trimmed_at = 0.0
        self.on_batch: Callable[[BatchStats], None] | None = None  # e.g. metrics
        # Stopping the query cancels the micro-batch's job under way: that batch's SPARK_JOB_CANCELLED
        # is expected then, logged as one INFO line, not as py4j's ERROR and ~130 lines of trace.
        self._stopping = False
        logging.getLogger("py4j.clientserver").addFilter(self._hide_cancelled_batch)
        # The Kafka log is read by Spark's own Kafka source; the embedded one by its Python data source.
        self._frames = log.spark_frames
        if self._frames is None:
            spark.dataSource.register(log.data_source)
            self._source = log.data_source.name()
        else:
            self._source = "kafka"

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the query at the log's current end: history reaches computations by back-fill."""
        options = self.log.stream_options()
        if self._frames is not None:
            stream = self._frames.stream(self.spark, options)
        else:
            stream = self.spark.readStream.format(self._source).options(**options).load()
        self._stopping = False
        self._query = (
            stream.writeStream.foreachBatch(self._on_batch)
            .trigger(processingTime=f"{self.trigger_ms} milliseconds")
            .option("checkpointLocation", str(self.checkpoint_dir))
            .queryName("sparkwire")
            .start()
        )
        logger.info("streaming query started on %s %s", self._source, options)

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
                logger.info("streaming query not stopped: Spark's JVM had already exited (status %d)", status)
                return
            self._stopping = True
            try:
                query.stop()
            except Exception as exc:  # stopping may race with a dying JVM; nothing left to save
                logger.warning("stopping the streaming query failed: %s", _first_line(exc))

    def recover(self) -> None:
        """Replace a failed query with a new one at the log's end and rebuild every computation
        from the log (points written while the query was down included). Blocking: Spark jobs."""
        self.stop()
        if self.followed is not None:
            self.followed.clear()  # the new query starts at the log's end: what was followed has a gap
        computations = self.routes.computations()
        for computation in computations:
            computation.reset()  # until rebuilt, stream rows wait in the computation
            computation.backfill_marks = None
        # A checkpoint holds nothing worth resuming (the stream starts at the log's end), and the
        # old one may be what broke the query.
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
        self.start()
        if not self.first_trigger_ran(timeout=120):
            reason = self.failure_reason()
            raise RuntimeError(f"the restarted query did not get through its first trigger: {reason}")
        if self.followed is not None:
            # Again: a series expected before the new query fixed its start offsets may have missed
            # rows between its back-fill's mark and that start.
            self.followed.clear()
        # Taken after the stream's start offset: every point is in the back-fill or the stream
        # (points in both are skipped in the stream by each computation's back-fill mark).
        snapshot = self.log.end_offset()  # I/O: outside the lock
        for computation in computations:
            computation.backfill_seq = snapshot
        for computation, error in self._backfills.run_all(computations):
            if error is None:
                continue
            if not isinstance(error, ComputeError):
                logger.error("rebuilding a computation failed: %s", error)
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
        return error_line(exc)

    def warm_up(self) -> None:
        """Run one tiny job so the first subscriber does not pay the JVM's start-up."""
        self.spark.range(1).toArrow()

    # -- computations ------------------------------------------------------------------------------
    def find(self, key: str) -> Computation | None:
        return self.routes.find(key)

    def add(self, computation: Computation) -> Computation:
        """Register a computation (or return the live one with its key), then back-fill it.

        Blocking (log reads, maybe a Spark job): call it off the event loop. Back-fills asked
        meanwhile share its Spark job (compute/spark/backfill.py).
        """
        ((live, error),) = self.add_all([computation])
        if error is not None:
            raise error
        return live

    def add_all(self, computations: list[Computation]) -> list[tuple[Computation, BaseException | None]]:
        """`add` for several at once, their back-fills in the same Spark jobs however few threads
        ask: for each, the live computation (an earlier one with its key, or this one) and what its
        back-fill raised (it is then removed). Raises, none of them added, if the log's end cannot
        be read. Blocking."""
        live = [self.routes.register(c) for c in computations]
        fresh = [c for c, registered in zip(computations, live, strict=True) if registered is c]
        now = time.time_ns()
        epochs = {id(c): c.epoch for c in fresh}  # a reset meanwhile (recover) makes a served one stale
        served = {id(c): self._served(c, now) for c in fresh}
        unserved = [c for c in fresh if served[id(c)] is None]
        expected = sorted({sid for c in unserved for sid in c.routes})
        if self.followed is not None:
            self.followed.expect(expected)  # before the mark: their stream rows above it are recorded
        # Taken after the registrations: a micro-batch whose series filter was built before them had
        # its offsets planned earlier still, so it ends at or below this snapshot (its rows are
        # history); every later batch filters for their series. Rows at or below the snapshot that a
        # later batch carries too are skipped by each computation (its mark).
        try:
            snapshot = self.log.end_offset() if unserved else 0
        except Exception:
            if self.followed is not None:
                self.followed.abandon(expected)
            for computation in fresh:
                self.remove(computation)
            raise
        if self.followed is not None and unserved:
            self.followed.marked(expected, snapshot)
        for computation in unserved:
            computation.backfill_seq = snapshot
        errors = {id(c): error for c, error in self._backfills.run_all(unserved)} if unserved else {}
        for computation in fresh:
            held = served[id(computation)]
            if held is not None:
                errors[id(computation)] = _load(computation, held, now, epochs[id(computation)])
            if errors[id(computation)] is not None:
                self.remove(computation)
        return [(registered, errors.get(id(registered))) for registered in live]

    def _served(self, computation: Computation, now: int) -> tuple[Batch, dict[int, int]] | None:
        """A registered computation's back-fill from the series this process follows, with its
        per-series marks, when every one of its series is held from its window's start."""
        if self.followed is None or not computation.routes:
            return None
        from_ts = now - computation.plan.window_ns - computation.plan.history_ns
        return self.followed.serve(sorted(computation.routes), from_ts)

    def remove(self, computation: Computation) -> None:
        self.routes.remove(computation)

    def computations(self) -> list[Computation]:
        return self.routes.computations()

    def _read_history(self, series_ids: list[int], from_ts: int, upto_seq: int) -> Batch:
        """These series, ts >= from_ts, seq <= upto_seq. A log the driver can read itself (the embedded
        one) is read directly: a Spark batch read through the Python data source costs ~0.75 s even
        for no rows (decision record 0016); any other is one Spark batch job over its data source."""
        if self.log.driver_reads:  # per series already, no table to split...
            # ...each in buffers with a window's spare room, for the window to take without a copy
            columns = self.log.read_history_columns(series_ids, from_ts, upto_seq, spare_room)
            return {sid: Rows(c.seq, c.ts, c.values, c.buffers) for sid, c in columns.items()}
        try:
            rows = split_by_series(self.history_points(series_ids, from_ts, upto_seq).toArrow())
        except BaseException:
            if self.followed is not None:
                self.followed.abandon(series_ids)
            raise
        if self.followed is not None:
            self.followed.seeded_by(series_ids, rows, from_ts, upto_seq)
        return rows

    def history_points(self, series_ids: list[int], from_ts: int, upto_seq: int) -> DataFrame:
        """The Spark batch read of the log's history (the data source's batch reader), as points."""
        if self._frames is not None:
            return self._frames.history(self.spark, series_ids, from_ts, upto_seq)
        options = self.log.backfill_options(series_ids, from_ts, upto_seq)
        reader = self.spark.read.format(self._source).schema(records.POINT_SCHEMA_DDL)
        return reader.options(**options).load()

    def _stop_cause(self, exc: BaseException) -> str | None:
        """How the query's stop ended this batch's job, or None when the stop did not."""
        if not self._stopping:
            return None
        try:  # a Py4JJavaError's text comes from the JVM, which may be gone by now
            text = str(exc)
        except Exception:
            return None
        # Under load the stop can land while the collect waits: the JVM then reports an interrupt
        # of the batch's thread instead of a cancelled job. The same stop, the same uncommitted batch.
        for cause in ("SPARK_JOB_CANCELLED", "java.lang.InterruptedException"):
            if cause in text:
                return cause
        return None

    def _hide_cancelled_batch(self, record: logging.LogRecord) -> bool:
        """py4j's ERROR for the batch `_on_batch` already logged as cancelled by the stop: dropped."""
        exc = record.exc_info[1] if record.exc_info else None
        return exc is None or self._stop_cause(exc) is None

    # -- the micro-batch ---------------------------------------------------------------------------
    def _refresh_series(self) -> bool:
        """Bring the series filter up to date; False when no series is in use."""
        if self.followed is not None:
            self.followed.begin_refresh()  # no back-fill is served from a series leaving the filter
        ids: list[int] | None = None
        try:
            ids = self.routes.series_in_use()
            if ids is not None:
                # Only this (the batch) thread builds the filter, so nothing races the swap. Spark turns
                # a long IN list into a hash set (OptimizeIn); built once, reused by every batch.
                self._series_filter = F.col("series_id").isin(ids) if ids else None
        finally:
            if self.followed is not None:
                self.followed.end_refresh(ids)
        return self._series_filter is not None

    def _on_batch(self, batch: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        if not self._refresh_series():
            return
        assert self._series_filter is not None  # set whenever a series is in use
        in_use = batch.where(self._series_filter)
        try:
            if self._frames is not None:  # Kafka's records cross to Python as bytes; numpy unpacks them
                table = self._frames.points(collect_arrow(in_use, self._frames.block_schema))
            else:  # the embedded log's blocks (sqlite/spark_source.py) cross as they are; numpy unpacks them
                table = records.points_of_blocks(collect_arrow(in_use, records.BLOCK_SCHEMA))
        except Exception as exc:
            cause = self._stop_cause(exc)
            if cause is not None:
                logger.info("micro-batch %d cancelled by the query's stop (%s), as expected", batch_id, cause)
            raise  # the batch is not committed, whatever the reason

        now = time.time_ns()
        evaluating = time.thread_time()  # CPU, not wall: their cost however busy the machine is
        by_series = split_by_series(table)
        if self.followed is not None:
            self.followed.record(by_series)  # before any new computation can be handed them
            self._trim_followed(now)
        targets = self.routes.targets(by_series)
        changes: list[tuple[Computation, Change | ComputeError]] = []
        late_before = sum(c.late_dropped for c in targets)
        for computation, rows in targets.items():
            try:
                change = computation.apply_batch(rows, now)
            except ComputeError as exc:  # one computation failing leaves the others running
                changes.append((computation, exc))
                continue
            except Exception as exc:
                logger.exception("computation failed")
                changes.append((computation, ComputeError("ComputeFailed", str(exc), status_code=500)))
                continue
            if change is not None:
                changes.append((computation, change))
        evaluation_cpu = time.thread_time() - evaluating
        if changes:
            self.on_changes(changes)
        late = sum(c.late_dropped for c in targets) - late_before
        seconds = time.perf_counter() - started
        self.last_batch = BatchStats(batch_id, table.num_rows, seconds, late, evaluation_cpu)
        if self.on_batch is not None:
            self.on_batch(self.last_batch)

    def _trim_followed(self, now: int) -> None:
        """Every few seconds: keep each followed series from the oldest start of a window reading it."""
        assert self.followed is not None
        if time.monotonic() - self._trimmed_at < FOLLOWED_TRIM_S:
            return
        self._trimmed_at = time.monotonic()
        keep_from: dict[int, int] = {}
        for computation in self.routes.computations():
            start = now - computation.plan.window_ns - computation.plan.history_ns
            for sid in computation.routes:
                keep_from[sid] = min(keep_from.get(sid, start), start)
        self.followed.trim(keep_from)

    def pending_points(self) -> int:
        """Points in the log the stream has not processed yet (Numaflow's Pending). Not on the loop."""
        return self.log.pending()


FOLLOWED_TRIM_S = 5.0


def _load(
    computation: Computation, held: tuple[Batch, dict[int, int]], now: int, epoch: int
) -> BaseException | None:
    """Back-fill a computation with rows served from the followed series; what it raised."""
    rows, marks = held
    with computation.lock:  # the batch thread reads the marks of a computation not yet ready
        computation.backfill_marks = marks
        computation.backfill_seq = max(marks.values())
    try:
        computation.load_backfill(rows, now, epoch)
    except Exception as exc:
        return exc
    return None


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


PYTHON_TRACEBACK = "Traceback (most recent call last):"


def error_line(exc: BaseException | str) -> str:
    """An error in one line, for a log line, /readyz and a subscriber's error. A Spark error from a
    Python data source carries the worker's Python traceback (and the JVM's stack after it): its
    first line ends in "Traceback (most recent call last):", which says nothing, so the traceback's
    own last line, the Python exception (e.g. the embedded log's reader failing with
    `sqlite3.OperationalError: ...`), stands in for it."""
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    first = lines[0]
    if PYTHON_TRACEBACK in first:
        # the traceback's frames are indented; the first line after them is its exception
        raised = next((line for line in lines[1:] if line and not line[0].isspace()), "")
        first = first.replace(PYTHON_TRACEBACK, "").rstrip(": ") + (f": {raised.strip()}" if raised else "")
    return first[:300]
