"""The contract every point log under Sparkwire implements, so a third source is one new module.

Modelled on Numaflow's user-defined source (`source.v1`: Read, Ack, Pending, Partitions, IsReady),
plus what ingest and the engine need from a log: a durable `submit`, the series catalog, and the
Spark data source (name and options) that reads the log for the stream and for back-fill.

Offsets are int64 `seq` numbers, ordered within a partition. A back-fill snapshot is one `seq`
(`end_offset`) that splits every partition in two: points at or below it are history (back-fill),
points above it reach a computation through the stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind

if TYPE_CHECKING:  # the contract imports no Spark (an edge without PySpark writes through it), nor Arrow
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.datasource import DataSource

    from compute.storage.sqlite.blocks import SeriesColumns
    from compute.storage.sqlite.writer import DurableLog


class WriteRejected(ValueError):
    """A request the log refuses as a whole (e.g. string points on a double series)."""


class InsufficientStorage(Exception):
    """The log refuses a request because the disk is below its free-space floor; nothing of it is
    stored, and writes are accepted again once space returns (ingest answers 507)."""


class LogUnavailable(Exception):
    """The log cannot be reached (a Kafka outage): nothing of the request is stored, and the same
    request may be sent again once it is back (ingest answers 503 with Retry-After)."""


@dataclass
class SeriesWrite:
    key: SeriesKey
    kind: SeriesKind
    ts: list[int] | np.ndarray  # int64 nanoseconds; the protobuf decoder hands numpy columns
    values: list[float] | list[str] | np.ndarray  # a numeric series' float64 column, or strings


Offsets = dict[int, int]  # partition -> seq of the last record read (the next read starts after it)


@dataclass
class ReadResult:
    points: pa.Table  # POINT_SCHEMA rows (seq, series_id, ts, value, str), seq order per partition
    offsets: Offsets  # where this reader stands after the read: commit them once processed


class SparkFrames(Protocol):
    """A log Spark reads with a source of its own (the Kafka log: Spark's built-in Kafka source)
    rather than a Python data source: the frames of the stream and of a back-fill, and the jars the
    session needs for them."""

    @property
    def jars(self) -> list[str]:
        """Files for `spark.jars` (the session must start with them)."""
        ...

    @property
    def block_schema(self) -> pa.Schema:
        """The stream's rows as the driver collects them."""
        ...

    def stream(self, spark: SparkSession, options: dict[str, str]) -> DataFrame:
        """The streaming read (`stream_options` of the log), rows of `block_schema` with `series_id`."""
        ...

    def points(self, blocks: pa.Table) -> pa.Table:
        """A micro-batch's collected `block_schema` rows as POINT_SCHEMA rows."""
        ...

    def history(
        self, spark: SparkSession, series_ids: Sequence[int], from_ts: int, upto_seq: int
    ) -> DataFrame:
        """A back-fill's batch read: POINT_SCHEMA rows of these series, ts >= from_ts, seq <= upto_seq."""
        ...


class PointLog(Protocol):
    # -- the source contract (Numaflow's Read / Ack / Pending / Partitions / IsReady) --------------
    def partitions(self) -> list[int]:
        """The log's partitions; a series always lives in exactly one."""
        ...

    def read(self, limit: int, timeout_ms: int) -> ReadResult:
        """Up to `limit` records after this reader's position (initially its committed offsets),
        waiting at most `timeout_ms` for the first one; an empty result when none arrived. A record
        is one series' points of one request (a block) in both logs; the result holds their points."""
        ...

    def commit(self, offsets: Offsets) -> None:
        """Everything at or below these offsets is processed (the stream commits the same way once
        a micro-batch's results are published)."""
        ...

    def pending(self) -> int:
        """Points written but not yet committed by this server's consumer; -1 if unknown."""
        ...

    def ready(self) -> bool:
        """Whether the log answers (the heartbeat)."""
        ...

    # -- ingest ------------------------------------------------------------------------------------
    def submit(self, writes: list[SeriesWrite]) -> Future[int]:
        """Store one request's points, all or nothing. The future resolves to the point count once
        they are durable (acknowledged by the log), or fails with `WriteRejected`."""
        ...

    # -- the series catalog ------------------------------------------------------------------------
    def series(self) -> list[SeriesInfo]:
        """Every series in the catalog as of this call, other servers' included (every write answered
        before it); `LogUnavailable` when the catalog cannot be read that far."""
        ...

    def poll_new_series(self) -> list[SeriesInfo]:
        """Series that reached the catalog (from any server) since the last call, each returned
        once. A series is in the catalog before any of its points can be read."""
        ...

    # -- what the engine hands Spark ---------------------------------------------------------------
    @property
    def data_source(self) -> type[DataSource]:
        """The PySpark data source class to register (its `name()` is the format)."""
        ...

    def stream_options(self) -> dict[str, str]:
        """Options of the streaming read: it starts at the log's current end."""
        ...

    def end_offset(self) -> int:
        """A back-fill snapshot: every point at or below it is readable now, every point written
        from now on is above it."""
        ...

    def backfill_options(self, series_ids: Sequence[int], from_ts: int, upto_seq: int) -> dict[str, str]:
        """Options of the batch read of these series' points with ts >= from_ts and seq <= upto_seq."""
        ...

    # -- history read by the driver itself -----------------------------------------------------------
    @property
    def driver_reads(self) -> bool:
        """Whether the driver can read history itself (`read_history`); without it every back-fill
        is a Spark batch job over `backfill_options`."""
        ...

    def read_history(self, series_ids: Sequence[int], from_ts: int, upto_seq: int) -> pa.Table:
        """What the back-fill's batch read returns (`backfill_options`), read by the driver itself:
        (seq, series_id, ts, value, str) of these series with ts >= from_ts and seq <= upto_seq."""
        ...

    def read_history_columns(
        self,
        series_ids: Sequence[int],
        from_ts: int,
        upto_seq: int,
        spare: Callable[[int], int] | None = None,
    ) -> dict[int, SeriesColumns]:
        """`read_history` as numpy columns per series, in seq order (the engine's back-fill, with no
        table to split); `spare`: room to leave after each series' points for a window to grow into."""
        ...

    # -- optional capabilities: every log declares them, None where it has none ----------------------
    @property
    def spark_frames(self) -> SparkFrames | None:
        """How Spark reads a log without a Python data source (Kafka); None: through `data_source`."""
        ...

    @property
    def local_writer(self) -> DurableLog | None:
        """The writer of a log kept in this process's own files (the embedded log): its disk floor
        (/readyz), its size and pruning (/metrics). None for a log kept elsewhere (Kafka)."""
        ...

    def held_from(self, series_ids: Sequence[int]) -> int | None:
        """The oldest timestamp the log still holds for these series (compute/storage/horizon.py),
        None when it cannot tell (nothing trimmed yet). Blocking: a read of the log."""
        ...

    def close(self) -> None: ...
