"""Nominal's DataExportService `exportChannelData` over HTTP (`POST /export/v1/export`): what the
`nominal` SDK's `channel_to_series` and `datasource_to_dataframe` ask for, answered from the log as
back-fill reads history: the embedded log read by this process itself (compute/storage/sqlite), the
Kafka log by a Spark batch job (compute/spark/history.py; not on an edge, which runs no Spark).

Served: time-domain channels, each a channel of a data source (`numeric` or `enum`, a `dataSource`
channel with literal rid, channel and tags), undecimated or decimated to a step (`nanoseconds`, or
`buckets` over the range, as the SDK's polars export asks: each bucket [startTime + i * step,
startTime + (i + 1) * step) a row at its start, the mean of a numeric column's points in it and the
mode of an enum column's), with no merge strategy (`none`: a row per timestamp (bucket) of any
column, a column empty where it has no point), as CSV, gzip-compressed or not, with
ISO 8601 or relative timestamps (to any instant, in any TimeUnit). Points with startTime <= ts <
endTime. A column is every series of its channel whose tags include the asked tags; at a timestamp
where it has several points, the one written last. Anything else that would change the answer is
refused by name, never ignored (docs/decisions/0074-sdk-reads.md).

Its cost is bounded before a point reaches this process: the blocks the request would read are
counted (compute/storage/sqlite/spans.py; on the Kafka log, a Spark job counts the points) and more
than MAX_EXPORT_POINTS is refused (ExportTooLarge)."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from app.api.admitted_route import AdmittedRoute, admit_request
from app.api.log_reads import read_embedded, span_reader, spark_counts, spark_read, spark_series
from app.http.errors import HttpError
from compute.storage.contract import PointLog
from compute.storage.series import SeriesInfo, SeriesKind
from compute.storage.sqlite import spans

_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ConjureError"}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the CSV (gzip-compressed when compression is GZIP)",
        "content": {"application/octet-stream": {}},
    },
    400: {
        "description": "an invalid body, a field not honoured, or too many points (the name says which)",
        "content": _ERROR,
    },
    401: {"description": "a missing or invalid bearer token (authentication on)", "content": _ERROR},
    501: {
        "description": "Sparkwire:ExportNeedsSpark: the Kafka log read while this process's Spark is still "
        "starting (an edge has the compute tier answer: app/api/forwarded_reads.py)",
        "content": _ERROR,
    },
    503: {
        "description": "on an edge, Sparkwire:ComputeTierUnreachable: no compute process answered the "
        "export it forwards",
        "content": _ERROR,
    },
}
MAX_EXPORT_POINTS = 1_000_000  # points one export may read (a block counts whole)
MAX_COLUMNS = 1000
NANOS = 1_000_000_000
UNIT_NS = {
    "NANOSECONDS": 1,
    "MICROSECONDS": 1_000,
    "MILLISECONDS": 1_000_000,
    "SECONDS": NANOS,
    "MINUTES": 60 * NANOS,
    "HOURS": 3600 * NANOS,
    "DAYS": 86400 * NANOS,
}
KIND_OF = {"numeric": SeriesKind.NUMERIC, "enum": SeriesKind.ENUM}


class ExportRoute(AdmittedRoute):
    doing = "read points"
    reads_log_points = True  # an edge has the compute tier answer (app/api/forwarded_reads.py)


router = APIRouter(prefix="/export/v1", tags=["export"], responses=ERRORS, route_class=ExportRoute)


class Timestamp(BaseModel):
    seconds: int
    nanos: int = Field(ge=0, lt=NANOS)

    def ns(self) -> int:
        return self.seconds * NANOS + self.nanos


class ExportDataRequest(BaseModel):
    """nominal-api's scout.dataexport.api.ExportDataRequest (its unions read below)."""

    channels: dict[str, Any]
    startTime: Timestamp
    endTime: Timestamp
    context: dict[str, Any] = Field(default_factory=dict)
    format: dict[str, Any]
    resolution: dict[str, Any]
    compression: str | None = None


def not_honoured(field: str, what: str) -> HttpError:
    return HttpError(
        400,
        f"{field}: {what} is not served by this server (docs/decisions/0074-sdk-reads.md)",
        name="Sparkwire:ExportOptionNotSupported",
        params={"field": field},
    )


def _variant(value: Any, field: str) -> tuple[str, Any]:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise HttpError(400, f"{field}: a Conjure union (an object with `type`)")
    kind = value["type"]
    return kind, value.get(kind)


def _literal(value: Any, field: str) -> str:
    kind, inner = _variant(value, field)
    if kind != "literal" or not isinstance(inner, str):
        raise not_honoured(field, f"a StringConstant of type {kind!r} (only literals)")
    return inner


class Column:
    def __init__(self, name: str, kind: SeriesKind, rid: str, channel: str, tags: dict[str, str]) -> None:
        self.name, self.kind, self.rid, self.channel, self.tags = name, kind, rid, channel, tags

    def selects(self, info: SeriesInfo) -> bool:
        key = info.key
        if key.data_source_rid != self.rid or key.channel != self.channel:
            return False
        have = dict(key.tags)
        return all(have.get(k) == v for k, v in self.tags.items())


def _column(item: Any, i: int) -> Column:
    where = f"channels.timeDomain.channels.{i}"
    if not isinstance(item, dict) or not isinstance(item.get("columnName"), str):
        raise HttpError(400, f"{where}: a TimeDomainChannel (columnName, computeNode)")
    series_type, series = _variant(item.get("computeNode"), f"{where}.computeNode")
    if series_type not in KIND_OF:
        raise not_honoured(
            f"{where}.computeNode", f"a {series_type!r} series (only numeric and enum channels)"
        )
    node_type, node = _variant(series, f"{where}.computeNode.{series_type}")
    if node_type != "channel":
        raise not_honoured(f"{where}.computeNode.{series_type}", f"a {node_type!r} node (only a channel)")
    source_type, source = _variant(node, f"{where}.computeNode.{series_type}.channel")
    base = f"{where}.computeNode.{series_type}.channel.{source_type}"
    if source_type != "dataSource" or not isinstance(source, dict):
        raise not_honoured(base, f"a {source_type!r} channel (only a data source's)")
    for field in ("tagsToGroupBy", "groupByTags"):
        if source.get(field):
            raise not_honoured(f"{base}.{field}", "grouping by tags")
    for field in ("tagFilters", "storage"):
        if source.get(field) is not None:
            raise not_honoured(f"{base}.{field}", field)
    tags = source.get("tags") or {}
    if not isinstance(tags, dict):
        raise HttpError(400, f"{base}.tags: a map of tag name to StringConstant")
    return Column(
        item["columnName"],
        KIND_OF[series_type],
        _literal(source.get("dataSourceRid"), f"{base}.dataSourceRid"),
        _literal(source.get("channel"), f"{base}.channel"),
        {str(k): _literal(v, f"{base}.tags.{k}") for k, v in tags.items()},
    )


def _timestamp_format(value: Any) -> tuple[int, int] | None:
    """None for ISO 8601; (relative to ns, unit ns) for relative timestamps."""
    field = "channels.timeDomain.outputTimestampFormat"
    kind, inner = _variant(value, field)
    if kind == "iso8601":
        return None
    if kind == "relative" and isinstance(inner, dict):
        unit = inner.get("timeUnit")
        if unit not in UNIT_NS:
            raise not_honoured(f"{field}.relative.timeUnit", repr(unit))
        return Timestamp.model_validate(inner.get("relativeTo")).ns(), UNIT_NS[unit]
    raise not_honoured(field, repr(kind))


def resolution_step(value: Any, start: int, end: int) -> int | None:
    """The decimation step in nanoseconds of a ResolutionOption, None for `undecimated`."""
    kind, inner = _variant(value, "resolution")
    if kind == "undecimated":
        return None
    if kind not in ("nanoseconds", "buckets"):
        raise not_honoured("resolution", repr(kind))
    if not isinstance(inner, int) or isinstance(inner, bool) or inner <= 0:
        raise HttpError(400, f"resolution.{kind}: a positive integer")
    if kind == "nanoseconds":
        return inner
    return max(1, -(-(end - start) // inner))  # the least step that cuts [start, end) into `inner` buckets


@router.post(
    "/export",
    summary="Nominal's exportChannelData: channels' points in a time range, as CSV",
    response_class=Response,
)
async def export_channel_data(body: ExportDataRequest, request: Request) -> Response:
    principal = admit_request(request, ExportRoute.doing)
    state = request.app.state.sparkwire
    fmt_kind, _ = _variant(body.format, "format")
    if fmt_kind != "csv":
        raise not_honoured("format", repr(fmt_kind))
    if body.compression not in (None, "GZIP"):
        raise not_honoured("compression", repr(body.compression))
    channels_kind, domain = _variant(body.channels, "channels")
    if channels_kind != "timeDomain" or not isinstance(domain, dict):
        raise not_honoured("channels", repr(channels_kind))
    merge_kind, _ = _variant(
        domain.get("mergeTimestampStrategy"), "channels.timeDomain.mergeTimestampStrategy"
    )
    if merge_kind != "none":
        raise not_honoured("channels.timeDomain.mergeTimestampStrategy", repr(merge_kind))
    fmt = _timestamp_format(domain.get("outputTimestampFormat"))
    items = domain.get("channels")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_COLUMNS:
        raise HttpError(400, f"channels.timeDomain.channels: 1 to {MAX_COLUMNS} channels")
    columns = [_column(item, i) for i, item in enumerate(items)]
    if len({c.name for c in columns}) < len(columns):
        raise HttpError(400, "channels.timeDomain.channels: two columns share a columnName")
    start, end = body.startTime.ns(), body.endTime.ns()
    if end < start:
        raise HttpError(400, "endTime is before startTime")
    step = resolution_step(body.resolution, start, end)
    if denied := principal.denied(c.rid for c in columns):
        raise HttpError(403, f"the token does not reach data source {denied[0]!r}")
    log: PointLog = state.log
    path = span_reader(log)
    engine = state.engine
    if (path is None or not log.driver_reads) and engine is None:
        raise HttpError(
            501,
            "this server's log (Kafka) is read by Spark's batch jobs, and this process's Spark is still "
            "starting: retry once /readyz says 200",
            name="Sparkwire:ExportNeedsSpark",
        )
    by_spark = path is None or not log.driver_reads
    known = await asyncio.to_thread(spark_series, engine) if by_spark else await asyncio.to_thread(log.series)
    infos = [i for i in known if any(c.selects(i) for c in columns)]
    for column in columns:
        if wrong := [i for i in infos if column.selects(i) and i.kind is not column.kind]:
            raise HttpError(
                400,
                f"column {column.name!r}: channel {column.channel!r} holds {wrong[0].kind.value} points, "
                f"asked for as {column.kind.value}",
                name="Sparkwire:ExportSeriesTypeMismatch",
            )
    ids = sorted(i.id for i in infos)
    if not by_spark:
        assert path is not None
        counted = await asyncio.to_thread(spans.points_between, path, ids, start, end)
        total = sum(counted.values())
    else:  # the back-fill's Spark batch read, counted by the executors before the driver takes any
        total = sum((await asyncio.to_thread(spark_counts, engine, ids, start, end)).values())
    if total > MAX_EXPORT_POINTS:
        raise HttpError(
            400,
            f"the export would read {total} points, more than {MAX_EXPORT_POINTS}: ask for a shorter "
            "time range or fewer channels",
            name="Sparkwire:ExportTooLarge",
            params={"limit": str(MAX_EXPORT_POINTS), "points": str(total)},
        )
    if not by_spark:
        read = await asyncio.to_thread(read_embedded, log, ids, start, end)
    else:
        read = await asyncio.to_thread(spark_read, engine, ids, start, end)
    from app.api.export_csv import build_csv  # imported when first asked: Arrow is ~35 MB of an edge's RSS

    data = await asyncio.to_thread(build_csv, read, columns, infos, start, end, fmt, step)
    if body.compression == "GZIP":
        data = await asyncio.to_thread(gzip.compress, data, 1)  # a quarter of level 6's time, ~1.3x the size
    return Response(data, media_type="application/octet-stream")
