"""The FastAPI application and its lifespan: the log opens at once, Spark warms up in the background
(/readyz says 503 until it runs), and everything stops in order on the way out.

By role (app/tiers/): `all` runs Spark and serves WebSockets; `compute` runs Spark and publishes
results to the edges (its HTTP is health, metrics and the catalog); `edge` serves WebSockets
and ingest from the compute tier's results, and never imports PySpark."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
from collections.abc import AsyncIterator

from fastapi import FastAPI

from app.api import (
    assets,
    asyncapi,
    catalog,
    compute_service,
    dashboard,
    data_sources,
    directory,
    docs_pages,
    events,
    export,
    health,
    metrics_route,
    modules,
    openapi,
)
from app.api.forwarded_reads import ForwardedReads
from app.api.request_summary import RequestLog, Summary
from app.api.state import ServerState
from app.api.ws import WS_PATH, WebSocketFastPath, websocket_endpoint
from app.config import Settings
from app.fanout.hub import Hub
from app.fanout.late_reports import LateReports
from app.http.errors import install_error_handlers
from app.ingest.columnar import (
    COLUMNAR_PATH,
    NOMINAL_COLUMNAR_PATH,
    write_columnar,
    write_nominal_columnar,
)
from app.ingest.logs import LOGS_PATH, write_logs
from app.ingest.nominal import write_nominal
from app.ingest.prometheus import PROMETHEUS_PATH, prometheus_health, write_prometheus
from app.ingest.telegraf import TELEGRAF_PATH, write_telegraf
from app.ingest.workers import DecodeWorkers
from app.ingest.writes import write_points
from app.metrics import Metrics
from app.runtime.early_stop import end_starting_jvms, end_worker_processes, signals_ignored_by_new_processes
from app.runtime.logging_setup import spark_output_path
from app.runtime.open_log import open_point_log
from app.runtime.readiness_log import ReadinessLog
from app.tiers.catalog_feed import CatalogFeed
from app.tiers.edge import RemoteComputations
from compute.evaluation.compiler.catalogs import Catalogs

logger = logging.getLogger(__name__)
START_ATTEMPTS = 3
STARTER_JOIN_SECONDS = 1.0  # how long a stop waits for Spark's start-up to reach its next step


def _start_spark(state: ServerState, loop: asyncio.AbstractEventLoop) -> None:
    """Runs in a thread: the session takes ~10 s, and the event loop must keep serving meanwhile."""
    from compute.spark.checkpoint import checkpoint_dir
    from compute.spark.engine import BatchStats, Engine
    from compute.spark.session import build_session
    from compute.spark.supervisor import StreamSupervisor

    try:
        settings = state.settings
        frames = state.log.spark_frames  # the Kafka log: Spark's Kafka connector, as files
        spark = build_session(
            settings.spark_master,
            jvm_output=spark_output_path(settings.data_dir),
            driver_memory=settings.driver_memory,
            jars=frames.jars if frames is not None else None,
        )
        checkpoint = checkpoint_dir(settings.checkpoint_dir, settings.data_dir)
        engine = Engine(
            spark,
            state.log,
            checkpoint,
            settings.trigger_ms,
            state.hub.on_changes,
            followed_points=settings.kafka_followed_points,
        )
        on_failed, on_recovered = state.hub.on_stream_failed, state.hub.on_stream_recovered
        if settings.role == "compute":
            from app.tiers.compute import ComputeTier, Sharding

            sharding = None
            if settings.compute_slots > 0:  # shared with other compute processes (app/tiers/shards.py)
                topic = f"{settings.kafka_topic}-compute"
                sharding = Sharding(settings.kafka_bootstrap_servers, topic, settings.compute_slots)
            tier = ComputeTier(
                engine,
                settings.redis_url,
                settings.redis_prefix,
                settings.compute_limits,
                state.catalogs,
                sharding,
                url=settings.reachable_url,
            )
            engine.on_changes = tier.on_changes
            on_failed, on_recovered = tier.on_stream_failed, tier.on_stream_recovered
            state.tier = tier
        from app.tiers.local import LocalComputations

        state.hub.computations = LocalComputations(engine)
        metrics = state.metrics

        def on_batch(stats: BatchStats) -> None:  # on the batch thread, after each micro-batch
            metrics.observe_batch(stats)
            metrics.observe_late(engine.computations())

        engine.on_batch = on_batch
        state.engine = engine
        if _shutting_down(state):
            return
        engine.warm_up()
        if _shutting_down(state):
            return
        for attempt in range(1, START_ATTEMPTS + 1):  # ready only once the query really runs
            engine.start()
            if engine.first_trigger_ran(timeout=120):
                break
            logger.warning("streaming query did not get through its first trigger (attempt %d)", attempt)
            engine.stop()
            checkpoint_dir(settings.checkpoint_dir, settings.data_dir)  # empty it for the next attempt
        else:
            raise RuntimeError(f"the streaming query failed to start {START_ATTEMPTS} times")
        # From now on a query that dies is restarted (compute/spark/supervisor.py).
        state.supervisor = StreamSupervisor(
            engine,
            on_failed,
            on_recovered,
            settings.stream_restart_delay,
            settings.stream_restart_max_delay,
        )
        state.supervisor.start()
        if state.tier is not None:
            state.tier.start()
        # What exists now (Spark's py4j client, the app, pydantic's schemas: ~130,000 objects) lives
        # as long as the server. Frozen, full collections stop rescanning it each time requests
        # allocate; that rescan tripled the cost of parsing a write (docs/decisions/0011).
        gc.collect()
        gc.freeze()
        logger.info(
            "memory: %d objects made at start-up left out of garbage-collection passes "
            "(they live as long as the server; this keeps request handling fast)",
            gc.get_freeze_count(),
        )
        logger.info("streaming query running")
        loop.call_soon_threadsafe(state.ready_event.set)
    except Exception as exc:
        if state.draining:  # stopped under it by a shutdown (the lifespan did not wait): no news
            logger.info("Spark start-up ended by the shutdown (%s)", exc)
            return
        logger.exception("Spark failed to start")
        state.startup_error = str(exc)


def _shutting_down(state: ServerState) -> bool:
    """A SIGTERM during start-up: the rest of it is skipped (the lifespan stops what was started)."""
    if state.draining:
        logger.info("shutting down: Spark start-up stops here")
    return state.draining


async def _stop_spark(state: ServerState) -> None:
    """What _start_spark started, in order (none of it in the edge role)."""
    if state.tier is not None:
        await asyncio.to_thread(state.tier.stop)
    if state.supervisor is not None:
        await asyncio.to_thread(state.supervisor.stop)
    if state.engine is not None:
        from compute.spark.session import stop_session  # as in _start_spark: pyspark loads late

        await asyncio.to_thread(state.engine.stop)
        await asyncio.to_thread(stop_session, state.engine.spark)


async def _spark_start_ended(starter: threading.Thread) -> bool:
    """Whether the start-up thread has ended (or ends within a moment), so what it started can be
    stopped in order."""
    await asyncio.to_thread(starter.join, STARTER_JOIN_SECONDS)
    return not starter.is_alive()


def _start_edge(state: ServerState) -> RemoteComputations:
    """An edge's computations are the compute tier's, mirrored through Redis; no Spark here."""
    settings = state.settings
    remote = RemoteComputations(settings.redis_url, settings.redis_prefix, state.hub)
    state.hub.computations = remote
    if not state.log.driver_reads:  # its points are read by Spark jobs (Kafka): the compute tier's
        state.forwarded_reads = ForwardedReads(remote.compute_urls)
    remote.start()
    state.ready_event.set()  # ready from now on whenever the compute tier is (app/api/state.py)
    logger.info("edge %s: serving from the compute tier (no Spark in this process)", remote.edge_id)
    return remote


def create_app(settings: Settings) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        log = await asyncio.to_thread(open_point_log, settings)
        metrics = Metrics(settings.metrics_tenant_labels)
        # The hub's computations are the role's: Spark's (set once it runs) or the compute tier's.
        hub = Hub(
            None,
            loop,
            metrics,
            settings.resume_linger_seconds,
            settings.max_lingering_per_connection,
            settings.max_lingering_computations,
        )
        if settings.role != "compute":  # the edges take the writes
            with signals_ignored_by_new_processes():
                decoders = DecodeWorkers(
                    settings.ingest_decode_workers, settings.ingest_decode_min_bytes, metrics.bodies_decoded
                )
        else:
            decoders = DecodeWorkers(0, 0, metrics.bodies_decoded)  # every body decoded inline
        assets.open_store(app, settings)  # the asset and run catalog beside the log (app/api/assets.py)
        modules.open_store(app, settings)  # the modules derived series apply (app/api/modules.py)
        events.open_store(app, settings)  # the events eventsSearch reads (app/api/events.py)
        state = ServerState(settings, log, hub, metrics, decoders)
        state.catalogs = Catalogs(app.state.assets, app.state.modules, app.state.events)
        app.state.sparkwire = state
        remote: RemoteComputations | None = None
        starter: threading.Thread | None = None
        feed: CatalogFeed | None = None
        if settings.shared_catalog and settings.role != "compute":  # a shared catalog: hear its edits
            feed = CatalogFeed(settings.redis_url, settings.redis_prefix, state.catalog_edits)
            feed.start()
        if settings.role == "edge":
            remote = _start_edge(state)
        else:
            starter = threading.Thread(
                target=_start_spark, args=(state, loop), name="spark-start", daemon=True
            )
            starter.start()
        summary = Summary(state, settings.summary_interval)
        summary.start()
        readiness = ReadinessLog(state)
        readiness.start()
        late_reports = LateReports(state.hub)  # lateReport messages (docs/extensions.md)
        if settings.role != "compute":
            late_reports.start()
        try:
            yield
        finally:
            await summary.stop()  # the last summary line: up to the end of the drain
            await readiness.stop()
            await state.liveness.stop()
            await late_reports.stop()
            if remote is not None:
                await remote.stop()
            if state.forwarded_reads is not None:
                await state.forwarded_reads.close()
            if feed is not None:
                await feed.stop()
            state.draining = True  # also when uvicorn stopped before a drain began: Spark's start stops
            if starter is not None and not await _spark_start_ended(starter):
                # A stop (SIGTERM, Ctrl+C) while Spark starts: its steps cannot be interrupted (a
                # session takes 10-30 s), so the process stops without waiting for them.
                logger.info("Spark was still starting: stopping without waiting for it")
                end_starting_jvms()
                end_worker_processes()
            else:
                await _stop_spark(state)
            await asyncio.to_thread(state.decoders.close)
            log.close()
            logger.info("stopped")

    # /docs: app/api/docs_pages.py's, which fetches nothing from a CDN (and no /redoc: decision 0045)
    app = FastAPI(title="Sparkwire", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.include_router(health.router)
    app.include_router(docs_pages.router)
    app.include_router(metrics_route.router)
    app.include_router(catalog.router)
    app.include_router(directory.router)  # the directory of live computations (admin)
    app.include_router(assets.router)  # assets and runs (app/api/assets.py)
    app.include_router(modules.router)  # Nominal's ModuleService (app/api/modules.py)
    app.include_router(events.router)  # Nominal's EventService (app/api/events.py)
    app.include_router(data_sources.router)  # Nominal's DataSourceService reads (app/api/data_sources.py)
    app.include_router(export.router)  # Nominal's DataExportService (app/api/export.py)
    app.include_router(compute_service.router)  # Nominal's ComputeService (app/api/compute_service.py)
    app.add_middleware(RequestLog)  # per-request counts and a line per refusal (app/api/request_summary.py)
    install_error_handlers(app)  # every HTTP error body in Conjure's format (app/http/errors.py)
    if settings.role != "compute":  # the compute tier serves no clients: the edges do
        app.include_router(asyncapi.router)
        app.include_router(docs_pages.websocket_docs)
        app.include_router(dashboard.router)
        app.add_api_route("/storage/writer/v1", write_points, methods=["POST"])
        app.add_api_route("/storage/writer/v1/nominal/{dataSourceRid}", write_nominal, methods=["POST"])
        app.add_api_route(COLUMNAR_PATH, write_columnar, methods=["POST"])  # app/ingest/columnar.py
        app.add_api_route(NOMINAL_COLUMNAR_PATH, write_nominal_columnar, methods=["POST"])
        app.add_api_route(LOGS_PATH, write_logs, methods=["POST"])  # app/ingest/logs.py
        app.add_api_route(TELEGRAF_PATH, write_telegraf, methods=["POST"])  # app/ingest/telegraf.py
        app.add_api_route(PROMETHEUS_PATH, write_prometheus, methods=["POST"])  # app/ingest/prometheus.py
        app.add_api_route(PROMETHEUS_PATH, prometheus_health, methods=["GET"])
        app.add_api_websocket_route(WS_PATH, websocket_endpoint)  # documented; served by the fast path
        app.add_middleware(WebSocketFastPath)  # added last: the outermost (app/api/ws.py)
    else:
        app.include_router(docs_pages.compute_index)  # `/`: where the clients go instead
    openapi.install(app)
    return app
