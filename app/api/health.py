"""Liveness, readiness and the persistent-compute "enabled" probe."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.state import ServerState
from app.tiers.edge import RemoteComputations

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    state = request.app.state.sparkwire
    if state.ready:
        # Below the free-space floor writes are refused (507) but subscriptions are served from what
        # is stored, so the server stays ready (in rotation) and says why writes fail.
        writer = state.log.local_writer
        if writer is not None and writer.floor.below():
            return JSONResponse({"status": "ready", "writes": "refused", "reason": writer.floor.describe()})
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "not ready", "reason": not_ready_reason(state)}, status_code=503)


def not_ready_reason(state: ServerState) -> str:
    """Why /readyz answers 503 (also logged by app/runtime/readiness_log.py)."""
    if state.draining:
        return "shutting down"
    if state.startup_error:
        return f"startup failed: {state.startup_error}"
    if not state.ready_event.is_set():
        return "starting: Spark session warming up"
    if state.supervisor is not None and state.engine is not None and state.engine.degraded:
        return state.supervisor.status
    if isinstance(state.hub.computations, RemoteComputations):  # an edge: Redis, or the compute tier
        return state.hub.computations.status
    return "streaming query not running"


@router.get("/persistent-compute/enabled")
async def enabled(request: Request) -> JSONResponse:
    return JSONResponse({}, status_code=200 if request.app.state.sparkwire.ready else 503)
