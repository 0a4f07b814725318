"""`GET /`: the built-in live dashboard, and `GET /dashboard/<file>` for its scripts and styles."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

from dashboard import STATIC_DIR, STATIC_SUFFIXES

router = APIRouter()

# Served fresh on every load: the files are small, and an upgraded server must not meet old scripts.
_HEADERS = {"Cache-Control": "no-cache"}


@router.get("/", include_in_schema=False)
async def index() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", headers=_HEADERS)


@router.get("/dashboard/{name}", include_in_schema=False)
async def static_file(name: str) -> FileResponse:
    path = STATIC_DIR / name
    if "/" in name or path.suffix not in STATIC_SUFFIXES or not path.is_file():
        raise HTTPException(status_code=404)
    return FileResponse(path, headers=_HEADERS)
