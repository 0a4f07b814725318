"""The server's Prometheus registry: counters bumped where things happen (hub, ingest, the engine's
batch hook), and the gauges that `GET /metrics` (app/api/metrics_route.py) sets at scrape time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from compute.evaluation.computation import Computation
    from compute.spark.engine import BatchStats
    from compute.storage.sqlite.writer import DurableLog

disable_created_metrics()  # no `_created` series beside every counter: scrapers rarely want them

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_ROWS = (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)


class Metrics:
    """One registry per server, so several apps in one process never share counters."""

    def __init__(self, tenant_labels: bool = False) -> None:
        """`tenant_labels` (SPARKWIRE_METRICS_TENANT_LABELS): metrics may carry a data source rid as a
        label. Off by default: `/metrics` needs no token, and a rid names a tenant's data."""
        self.tenant_labels = tenant_labels
        r = self.registry = CollectorRegistry()
        self.pruned_seen = (0, 0)  # the embedded log's pruning totals at the last scrape
        # What the default registry would have (process_* CPU, memory, open fds; python_info;
        # python_gc_*), which an operator's dashboards expect of any Python service.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.connections = Gauge("sparkwire_connections", "open WebSocket connections", registry=r)
        self.subscriptions = Gauge(
            "sparkwire_subscriptions", "live subscriptions, all connections", registry=r
        )
        self.computations = Gauge(
            "sparkwire_computations",
            "distinct live computations (identical subscriptions share one)",
            registry=r,
        )
        self.batch_seconds = Histogram(
            "sparkwire_microbatch_duration_seconds",
            "time one micro-batch spends in the engine (the narrow Spark job and the evaluators)",
            buckets=_SECONDS,
            registry=r,
        )
        self.batch_rows = Histogram(
            "sparkwire_microbatch_rows",
            "rows one micro-batch hands to live computations",
            buckets=_ROWS,
            registry=r,
        )
        self.evaluation_cpu = Counter(
            "sparkwire_evaluation_cpu_seconds",
            "CPU time the micro-batch thread spent applying batches to the live computations",
            registry=r,
        )
        self.points_ingested = Counter(
            "sparkwire_points_ingested", "points made durable by POST /storage/writer/v1", registry=r
        )
        self.bodies_decoded = Counter(
            "sparkwire_ingest_bodies_decoded",
            "JSON write bodies decoded, by where: worker (a decode process, app/ingest/workers.py) or "
            "event_loop (small bodies, bodies the strict decoder declines, or no workers configured)",
            ["where"],
            registry=r,
        )
        self.points_rejected = Counter(
            "sparkwire_points_rejected",
            "points refused: reason=invalid (a 400 ingest request), reason=late (older than a live "
            "computation's allowed lateness: kept in the log, not in that live result)",
            ["reason"],
            registry=r,
        )
        self.late_points_dropped = Counter(
            "sparkwire_late_points_dropped",
            "points left out of live results as later than a computation's allowed lateness (kept in "
            "the log)"
            + (", by data source" if tenant_labels else "")
            + "; a point dropped by several computations counts once for each",
            ["data_source"] if tenant_labels else [],
            registry=r,
        )
        # Each computation's per-source drops at the last batch: counted by difference, and a
        # computation removed since is read one last time before it is let go.
        self._late_seen: dict[Computation, dict[str, int]] = {}
        self.requests_rejected = Counter(
            "sparkwire_ingest_requests_rejected", "ingest requests answered 400", registry=r
        )
        self.source_pending = Gauge(
            "sparkwire_source_pending_points",
            "points in the log the streaming query has not processed yet (as Numaflow's Pending)",
            registry=r,
        )
        self.frames_sent = Counter(
            "sparkwire_frames_sent", "subscription updates (full or append) sent to clients", registry=r
        )
        self.frames_coalesced = Counter(
            "sparkwire_frames_coalesced",
            "updates not sent on their own: merged into a subscriber's next frame by minDelay",
            registry=r,
        )
        self.resumes = Counter(
            "sparkwire_resumes",
            "subscriptions made with a resume token (docs/extensions.md), by outcome: resumed, or "
            "the reason a FullResult was sent instead",
            ["outcome"],
            registry=r,
        )
        self.frame_latency = Histogram(
            "sparkwire_frame_latency_seconds",
            "from the end of the micro-batch that changed a result to its frame being queued for the "
            "client (includes minDelay waits)",
            buckets=_SECONDS,
            registry=r,
        )
        self.http_requests = Counter(
            "sparkwire_http_requests",
            "HTTP requests answered, by status class (2xx, 4xx, ...); health probes and scrapes not counted",
            ["status"],
            registry=r,
        )
        self.websocket_connections_opened = Counter(
            "sparkwire_websocket_connections_opened", "WebSocket handshakes accepted", registry=r
        )
        for reason in ("invalid", "late"):
            self.points_rejected.labels(reason)  # present (at 0) from the first scrape
        self._requests_by_class = {c: self.http_requests.labels(f"{c}xx") for c in range(1, 6)}

        # The caps on what a client leaves running (app/hub.py, app/replay.py): values and use.
        self.lingering = Gauge(
            "sparkwire_lingering_computations",
            "computations kept live with no subscriber, for resumes (SPARKWIRE_RESUME_LINGER_SECONDS)",
            registry=r,
        )
        self.limits = Gauge(
            "sparkwire_limit",
            "a configured cap, by name (the setting's, e.g. max_replays)",
            ["name"],
            registry=r,
        )
        self.lingering_released_early = Counter(
            "sparkwire_lingering_released_early",
            "lingering computations released before their linger, by the cap reached: connection "
            "(SPARKWIRE_MAX_LINGERING_PER_CONNECTION) or server (SPARKWIRE_MAX_LINGERING_COMPUTATIONS)",
            ["cap"],
            registry=r,
        )
        self.replays = Gauge(
            "sparkwire_replays", "replays running (also counted in sparkwire_subscriptions)", registry=r
        )
        self.replays_refused = Counter(
            "sparkwire_replays_refused",
            "replays refused TooManyReplays by the server-wide cap (SPARKWIRE_MAX_REPLAYS)",
            registry=r,
        )
        for cap in ("connection", "server"):
            self.lingering_released_early.labels(cap)

        self.stream_failures = Counter(
            "sparkwire_stream_failures",
            "streaming queries lost (failed or stopped unasked) since start-up",
            registry=r,
        )
        self.stream_restarts = Counter(
            "sparkwire_stream_restarts", "streaming queries restarted successfully since start-up", registry=r
        )
        self._supervisor_seen = (0, 0)  # the supervisor's (failures, restarts) at the last scrape

    # -- hooks -------------------------------------------------------------------------------------
    def observe_batch(self, stats: BatchStats) -> None:
        """The engine's per-batch hook (runs on the Spark batch thread)."""
        self.batch_seconds.observe(stats.seconds)
        self.batch_rows.observe(stats.rows)
        self.evaluation_cpu.inc(stats.evaluation_cpu_s)
        if stats.late_points:
            self.points_rejected.labels("late").inc(stats.late_points)

    def observe_late(self, computations: Iterable[Computation]) -> None:
        """After each micro-batch (on its thread, with the computations the engine runs): the points
        each dropped as late since the last call, per data source."""
        seen = self._late_seen
        live = {c: None for c in computations if c.late_dropped}  # (one that never dropped: nothing to do)
        for computation in [*live, *(c for c in seen if c not in live)]:
            before = seen.get(computation, {})
            now = computation.late_by_source()
            for source, count in now.items():
                if count > before.get(source, 0):
                    late = self.late_points_dropped
                    (late.labels(source) if self.tenant_labels else late).inc(count - before.get(source, 0))
            if computation in live:
                seen[computation] = now
            else:
                seen.pop(computation, None)

    def observe_supervisor(self, failures: int, restarts: int) -> None:
        """The supervisor's counts since start-up (they only grow), as counters at scrape time."""
        seen_failures, seen_restarts = self._supervisor_seen
        self.stream_failures.inc(max(0, failures - seen_failures))
        self.stream_restarts.inc(max(0, restarts - seen_restarts))
        self._supervisor_seen = (failures, restarts)

    def observe_tier(self, edges: int, started: int, snapshots: int, changes: int) -> None:
        """`--role compute`'s figures at scrape time (its metrics appear then): live edges, and since
        start-up the computations started (each a back-fill), snapshots and changes published."""
        if not hasattr(self, "tier_edges"):
            r = self.registry
            self.tier_edges = Gauge("sparkwire_tier_edges", "edges whose lease is alive", registry=r)
            self.tier_started = Counter(
                "sparkwire_tier_computations_started",
                "computations started for edges (back-filled)",
                registry=r,
            )
            self.tier_snapshots = Counter(
                "sparkwire_tier_snapshots", "whole results published (a new edge, a re-sync)", registry=r
            )
            self.tier_changes = Counter(
                "sparkwire_tier_changes", "result differences published, one per change", registry=r
            )
            self._tier_seen = (0, 0, 0)
        self.tier_edges.set(edges)
        for counter, now, seen in zip(
            (self.tier_started, self.tier_snapshots, self.tier_changes),
            (started, snapshots, changes),
            self._tier_seen,
            strict=True,
        ):
            counter.inc(max(0, now - seen))
        self._tier_seen = (started, snapshots, changes)

    def observe_edge(self, resyncs: dict[str, int]) -> None:
        """`--role edge`'s re-syncs of every mirror since start-up, by cause, at scrape time."""
        if not hasattr(self, "edge_resyncs"):
            self.edge_resyncs = Counter(
                "sparkwire_edge_resyncs",
                "times every mirror of the compute tier's results was re-synced (a snapshot each), "
                "by cause: subscription_closed (Redis closed this edge's subscription: it read too "
                "slowly), compute_lost, compute_restarted, edge_dropped (its lease had lapsed)",
                ["cause"],
                registry=self.registry,
            )
            self._edge_seen: dict[str, int] = {}
        for cause, count in resyncs.items():
            self.edge_resyncs.labels(cause).inc(max(0, count - self._edge_seen.get(cause, 0)))
        self._edge_seen = dict(resyncs)

    def observe_followed(self, served: int, points: int) -> None:
        """The Kafka log's followed series (compute/spark/followed_series.py) at scrape time."""
        if not hasattr(self, "followed_served"):
            self.followed_served = Counter(
                "sparkwire_backfills_from_followed_series",
                "computations back-filled from the recent points of the series this process follows "
                "(kafka source: no Spark job read their partitions)",
                registry=self.registry,
            )
            self.followed_points = Gauge(
                "sparkwire_followed_series_points",
                "points of the followed series kept for back-fills (kafka-followed-points caps them)",
                registry=self.registry,
            )
            self._followed_seen = 0
        self.followed_served.inc(max(0, served - self._followed_seen))
        self._followed_seen = served
        self.followed_points.set(points)

    def observe_log(self, durable: DurableLog) -> None:
        """The embedded log's disk and pruning figures, at scrape time (its gauges appear then)."""
        if not hasattr(self, "free_bytes"):
            self._storage_gauges()
        self.free_bytes.set(durable.floor.free_bytes())
        self.min_free_bytes.set(durable.floor.min_bytes)
        self.log_bytes.set(durable.size_bytes())
        # The log counts since start; the counters take what it added since the last scrape.
        points, blocks = durable.pruned.points, durable.pruned.blocks
        self.pruned_points.inc(max(0, points - self.pruned_seen[0]))
        self.pruned_blocks.inc(max(0, blocks - self.pruned_seen[1]))
        self.pruned_seen = (points, blocks)
        self.prune_step_seconds.set(durable.pruned.last_step_s)

    def count_request(self, status: int) -> None:
        """One HTTP answer (app/api/request_summary.py)."""
        counter = self._requests_by_class.get(status // 100)
        if counter is not None:
            counter.inc()

    def reject_request(self, body: bytes) -> None:
        self.requests_rejected.inc()
        self.points_rejected.labels("invalid").inc(_points_in(body))

    # -- scrape ------------------------------------------------------------------------------------
    def _storage_gauges(self) -> None:
        r = self.registry
        self.free_bytes = Gauge(
            "sparkwire_data_dir_free_bytes", "free bytes on the data directory's file system", registry=r
        )
        self.min_free_bytes = Gauge(
            "sparkwire_min_free_bytes",
            "the free-space floor below which writes are refused (507)",
            registry=r,
        )
        self.log_bytes = Gauge(
            "sparkwire_log_bytes", "the embedded log's files (database and WAL)", registry=r
        )
        self.pruned_points = Counter(
            "sparkwire_log_pruned_points", "points pruned by retention or the byte cap", registry=r
        )
        self.pruned_blocks = Counter("sparkwire_log_pruned_blocks", "log blocks pruned", registry=r)
        self.prune_step_seconds = Gauge(
            "sparkwire_log_prune_step_seconds", "duration of the last prune step", registry=r
        )


def _points_in(body: bytes) -> int:
    """How many points a refused request carried, as far as its JSON can be read."""
    try:
        request: Any = orjson.loads(body)
        total = 0
        for batch in request["batches"]:
            points = batch["points"]
            total += len(points[points["type"]])
        return total
    except Exception:
        return 0
