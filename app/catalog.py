"""`GET /series`: the series the log holds (data source, channel, tags, point type), so a dashboard
or a program can offer what there is to subscribe to."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

router = APIRouter()


@router.get("/series", summary="List the series written so far")
async def list_series(request: Request) -> list[dict[str, Any]]:
    infos = request.app.state.sparkwire.log.series()
    return sorted(
        (
            {
                "dataSourceRid": info.key.data_source_rid,
                "channel": info.key.channel,
                "tags": dict(info.key.tags),
                "type": info.kind.value,
            }
            for info in infos
        ),
        key=lambda s: (s["dataSourceRid"], s["channel"], sorted(s["tags"].items())),
    )
