"""Liveness, readiness and the persistent-compute "enabled" probe."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

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
    if state.draining:
        reason = "shutting down"
    elif state.startup_error:
        reason = f"startup failed: {state.startup_error}"
    elif not state.ready_event.is_set():
        reason = "starting: Spark session warming up"
    elif state.supervisor is not None and state.engine is not None and state.engine.degraded:
        reason = state.supervisor.status
    elif state.settings.role == "edge":
        reason = state.hub.computations.status  # app/tiers/edge.py: Redis, or the compute tier
    else:
        reason = "streaming query not running"
    return JSONResponse({"status": "not ready", "reason": reason}, status_code=503)


@router.get("/persistent-compute/enabled")
async def enabled(request: Request) -> JSONResponse:
    return JSONResponse({}, status_code=200 if request.app.state.sparkwire.ready else 503)
