"""`GET /metrics` in Prometheus text format: the gauges that describe the current state are read
here, at scrape time, then the whole registry (app/metrics.py) is rendered."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.api.state import ServerState
from app.metrics import Metrics
from app.tiers.edge import RemoteComputations

router = APIRouter()

# The caps a client's use counts against, each shown as `sparkwire_limit{name=...}`.
CAPS = (
    "max_connections",
    "max_subscriptions_per_connection",
    "max_lingering_per_connection",
    "max_lingering_computations",
    "max_replays_per_connection",
    "max_replays",
)


async def render(metrics: Metrics, state: ServerState) -> bytes:
    writer = state.log.local_writer  # the embedded log's (compute/storage/sqlite); None for Kafka
    if writer is not None:
        metrics.observe_log(writer)
    metrics.connections.set(len(state.connections))
    metrics.subscriptions.set(state.hub.subscriber_count() + len(state.replays))  # a replay's own hub
    metrics.replays.set(len(state.replays))
    metrics.lingering.set(state.hub.lingering_count())
    for cap in CAPS:
        metrics.limits.labels(cap).set(getattr(state.settings, cap))
    if state.supervisor is not None:
        metrics.observe_supervisor(state.supervisor.failures, state.supervisor.restarts)
    if state.tier is not None:
        tier = state.tier
        metrics.observe_tier(tier.edges_alive, tier.started, tier.snapshots, tier.changes)
    engine = state.engine
    if engine is not None:  # Spark calls and the engine's lock stay off the event loop
        computations, pending = await asyncio.to_thread(
            lambda: (len(engine.computations()), engine.pending_points())
        )
        metrics.computations.set(computations)
        metrics.source_pending.set(pending)
        followed = engine.followed
        if followed is not None:
            metrics.observe_followed(followed.served, await asyncio.to_thread(followed.held_points))
    elif isinstance(state.hub.computations, RemoteComputations):  # an edge: its mirrors
        metrics.computations.set(state.hub.computations.count())
        metrics.observe_edge(state.hub.computations.resyncs)
    return generate_latest(metrics.registry)


@router.api_route("/metrics", methods=["GET", "HEAD"], include_in_schema=False)  # HEAD: probes, curl -I
async def metrics(request: Request) -> Response:
    state: ServerState = request.app.state.sparkwire
    return Response(await render(state.metrics, state), media_type=CONTENT_TYPE_LATEST)
