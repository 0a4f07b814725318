"""The API documentation pages, served with nothing fetched from elsewhere (they work offline and
behind a firewall): `/docs` (Swagger UI) over /openapi.json, under a bar that links back to the
dashboard, `/docs/asyncapi` (a viewer of /asyncapi.json), `/favicon.ico`, and, on a compute-tier
server, a `/` that points to the edges. Swagger UI's script and style come from the
`fastapi-offline` distribution, which ships them as package data
(docs/decisions/0045-offline-api-docs.md). No /redoc: ReDoc's page loads its logo from Redocly's
CDN whatever it is given, and Swagger UI covers the same document."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from dashboard import STATIC_DIR

# Swagger UI 5 (it renders OpenAPI 3.1, which FastAPI writes), as fastapi-offline ships it.
ASSETS_DIR = Path(str(importlib.resources.files("fastapi_offline") / "static"))
ASSETS = frozenset({"swagger-ui-bundle.js", "swagger-ui.css"})
FAVICON = STATIC_DIR / "favicon.svg"
TITLE = "Sparkwire"

router = APIRouter(include_in_schema=False)  # every role
websocket_docs = APIRouter(include_in_schema=False)  # the roles that serve WebSockets
compute_index = APIRouter(include_in_schema=False)  # --role compute


# A bar above Swagger UI with the way back: to the dashboard (and the WebSocket API's viewer) where
# this server serves them, else to the compute tier's own `/`.
_NAV = (
    '<nav style="font: 14px system-ui, sans-serif; padding: 8px 20px; background: #1b2631; color: #fff">'
    '<b style="margin-right: 1em">Sparkwire</b>{links}</nav>'
)
_LINK = '<a style="color: #aed6f1; margin-right: 1em" href="{href}">{text}</a>'


def _nav(request: Request) -> str:
    dashboard = request.app.state.sparkwire.settings.role != "compute"  # as app/runtime/server.py routes
    links = (
        [("/", "← dashboard"), ("/docs/asyncapi", "WebSocket API"), ("/metrics", "metrics")]
        if dashboard
        else [("/", "← this compute server"), ("/metrics", "metrics")]
    )
    return _NAV.format(links="".join(_LINK.format(href=href, text=text) for href, text in links))


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    page = get_swagger_ui_html(
        openapi_url="/openapi.json",
        title=f"{TITLE} · HTTP API",
        swagger_js_url="/docs/assets/swagger-ui-bundle.js",
        swagger_css_url="/docs/assets/swagger-ui.css",
        swagger_favicon_url="/favicon.ico",
    )
    html = bytes(page.body).decode().replace("<body>", f"<body>\n{_nav(request)}", 1)
    return HTMLResponse(html)


@router.get("/docs/assets/{name}")
async def asset(name: str) -> FileResponse:
    if name not in ASSETS:
        raise HTTPException(status_code=404)
    return FileResponse(ASSETS_DIR / name, headers={"Cache-Control": "max-age=86400"})


@router.get("/favicon.ico")
async def favicon() -> FileResponse:
    return FileResponse(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


@websocket_docs.get("/docs/asyncapi")
async def asyncapi_viewer() -> FileResponse:
    return FileResponse(STATIC_DIR / "asyncapi.html", headers={"Cache-Control": "no-cache"})


COMPUTE_INDEX = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sparkwire · compute tier</title>
<link rel="icon" href="/favicon.ico"></head>
<body style="font-family: system-ui, sans-serif; max-width: 42em; margin: 2em auto">
<h1>Sparkwire compute tier</h1>
<p>This server runs with <code>--role compute</code>: it runs Spark and every live computation,
and serves no clients. The dashboard, the WebSocket API and ingest are on the <b>edges</b>
(<code>sparkwire serve --role edge</code>, on the same Redis): open one of those instead.</p>
<p>Here: <a href="/readyz">/readyz</a> · <a href="/metrics">/metrics</a> · <a href="/series">/series</a> ·
<a href="/docs">/docs</a></p>
</body></html>
"""


@compute_index.get("/")
async def index() -> HTMLResponse:
    return HTMLResponse(COMPUTE_INDEX)
