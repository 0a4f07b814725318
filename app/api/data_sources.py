"""Nominal's DataSourceService reads over HTTP, in Conjure JSON (nominal-api's `datasource.api`):
`searchChannels` (`dataset.search_channels()`, and the channel listing of the SDK's
`datasource_to_dataframe` and `get_channels`), `getAvailableTagsForChannel`
(`channel.get_available_tags()`) and `batchGetSeriesCount` (the polars export's check of which
channels hold points: docs/decisions/0083-polars-export-and-polled-cost.md), answered from the
series catalog of the log; and the bounds of a data source (`get_dataset(rid).bounds`, filled in by
app/api/catalog.py).

A channel is a data source's channel name whatever its tags: its series (one per tag set) are one
channel here. Admitted before the body is read (app/api/admitted_route.py); with authentication on,
only the data sources of the token's `dataSourceRids` are seen (as `GET /series`).
The time range of the available tags and of the series counts and the bounds are read from the
embedded log's blocks (compute/storage/sqlite/spans.py); a log kept elsewhere (Kafka) has no
such index: there a range narrower than all of time is counted by a Spark job (refused by name in a
process that runs no Spark), and bounds are left out (docs/decisions/0074-sdk-reads.md, 0093)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from app.api.admitted_route import AdmittedRoute, admit_request
from app.api.log_reads import span_reader, spark_counts
from app.http.errors import HttpError
from compute.storage.contract import PointLog
from compute.storage.series import SeriesInfo, SeriesKind, TagCondition
from compute.storage.sqlite import spans

_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ConjureError"}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {
        "description": "an invalid body, or a field not honoured (the error's name says which)",
        "content": _ERROR,
    },
    401: {"description": "a missing or invalid bearer token (authentication on)", "content": _ERROR},
}
MAX_PAGE = 1000  # SearchChannelsRequest.pageSize: "Defaults to 1000. Will throw if larger than 1000."
MAX_ITEMS = 1000  # data sources or strings in one request
NANOS = 1_000_000_000
# nominal-api's SeriesDataType of each kind of series
DATA_TYPE = {
    SeriesKind.NUMERIC: "DOUBLE",
    SeriesKind.ENUM: "STRING",
    SeriesKind.LOG: "LOG",
    SeriesKind.DOUBLE_ARRAY: "DOUBLE_ARRAY",
    SeriesKind.STRING_ARRAY: "STRING_ARRAY",
    SeriesKind.STRUCT: "STRUCT",
}


class DataSourceRoute(AdmittedRoute):
    doing = "read the catalog"


router = APIRouter(
    prefix="/data-source/v1/data-sources",
    tags=["data sources"],
    responses=ERRORS,
    route_class=DataSourceRoute,
)


class SearchChannelsRequest(BaseModel):
    """nominal-api's datasource.api.SearchChannelsRequest."""

    fuzzySearchText: str = Field(default="", max_length=1000)
    prefix: str | None = Field(default=None, max_length=1000)
    exactMatch: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)
    dataSources: list[str] = Field(max_length=MAX_ITEMS)
    dataTypes: list[str] = Field(default_factory=list, max_length=16)
    # Only how results are ranked in Nominal: the set answered is the same without it.
    previouslySelectedChannels: dict[str, list[str]] | None = None
    nextPageToken: str | None = Field(default=None, max_length=32)
    pageSize: int | None = None


def _fuzzy(text: str, name: str) -> bool:
    """Every character of `text` appears in `name` in the same order, case aside (a subsequence)."""
    rest = iter(name.lower())
    return all(ch in rest for ch in text.lower())


def channels_of(infos: list[SeriesInfo]) -> dict[tuple[str, str], str]:
    """(data source, channel) -> its SeriesDataType (that of its first series)."""
    found: dict[tuple[str, str], str] = {}
    for info in sorted(infos, key=lambda i: i.id):
        found.setdefault((info.key.data_source_rid, info.key.channel), DATA_TYPE[info.kind])
    return found


@router.post("/search-channels", summary="Nominal's searchChannels: the channels of data sources")
async def search_channels(body: SearchChannelsRequest, request: Request) -> dict[str, Any]:
    principal = admit_request(request, DataSourceRoute.doing)
    size = MAX_PAGE if body.pageSize is None else body.pageSize
    if not 1 <= size <= MAX_PAGE:
        raise HttpError(
            400, f"pageSize: {size}, not between 1 and {MAX_PAGE}", params={"limit": str(MAX_PAGE)}
        )
    try:
        offset = int(body.nextPageToken or "0")
        if offset < 0:
            raise ValueError
    except ValueError:
        raise HttpError(400, f"nextPageToken: {body.nextPageToken!r} is no token this server gave") from None
    state = request.app.state.sparkwire
    wanted = {rid for rid in body.dataSources if principal.allows(rid)}
    types = set(body.dataTypes)
    infos = [i for i in await asyncio.to_thread(state.log.series) if i.key.data_source_rid in wanted]
    exact = [s.lower() for s in body.exactMatch]
    found = [
        {"name": channel, "dataSource": rid, "dataType": data_type}
        for (rid, channel), data_type in sorted(channels_of(infos).items())
        if all(s in channel.lower() for s in exact)
        and _fuzzy(body.fuzzySearchText, channel)
        and (body.prefix is None or channel.startswith(body.prefix))
        and (not types or data_type in types)
    ]
    page = found[offset : offset + size]
    more = offset + size < len(found)
    return {"results": page, **({"nextPageToken": str(offset + size)} if more else {})}


class UtcTimestamp(BaseModel):
    """nominal-api's scout.run.api.UtcTimestamp."""

    secondsSinceEpoch: int
    offsetNanoseconds: int | None = Field(default=None, ge=0, lt=NANOS)

    def ns(self) -> int:
        return self.secondsSinceEpoch * NANOS + (self.offsetNanoseconds or 0)


class ChannelWithTagFilters(BaseModel):
    dataSourceRid: str = Field(max_length=1000)
    channel: str = Field(max_length=1000)
    tagFilters: dict[str, str] = Field(default_factory=dict, max_length=MAX_ITEMS)


class GetAvailableTagsForChannelRequest(BaseModel):
    """nominal-api's datasource.api.GetAvailableTagsForChannelRequest."""

    channelWithTagFilters: ChannelWithTagFilters
    startTime: UtcTimestamp
    endTime: UtcTimestamp


# The SDK's "beginning and end of time" (nominal.ts._MIN_TIMESTAMP / _MAX_TIMESTAMP) and wider: a
# range this wide holds every point a log can hold, so a log with no time index answers it.
ALL_TIME = (0, 2**63 - 1)


def covers_all_time(start: int, end: int) -> bool:
    return start <= ALL_TIME[0] and end >= 9_000_000_000 * NANOS  # past the year 2255


async def counted_by_spark(state: Any, ids: list[int], start: int, end: int, field: str) -> dict[int, int]:
    """Per series, its points with start <= ts <= end on a log with no time index (Kafka):
    one Spark job counts them where they are. A process that runs no Spark yet cannot, and refuses a
    range narrower than all of time by name rather than answer for all of time (an edge has the
    compute tier answer the request instead: app/api/forwarded_reads.py)."""
    if state.engine is None:
        raise HttpError(
            400,
            f"{field}: this server's log keeps no index of the series' times, and this process's Spark, "
            "which counts them, is still starting: ask for the whole of time, or retry once /readyz "
            "says 200",
            name="Sparkwire:TimeRangeNotHonoured",
        )
    return await asyncio.to_thread(spark_counts, state.engine, ids, start, end + 1)


@router.post(
    "/get-available-tags",
    summary="Nominal's getAvailableTagsForChannel: the tags of a channel's points in a time range",
)
async def get_available_tags(body: GetAvailableTagsForChannelRequest, request: Request) -> Any:
    principal = admit_request(request, DataSourceRoute.doing)
    state = request.app.state.sparkwire
    asked = body.channelWithTagFilters
    start, end = body.startTime.ns(), body.endTime.ns()
    if end < start:
        raise HttpError(400, "endTime is before startTime")
    infos = []
    if principal.allows(asked.dataSourceRid):
        infos = [
            i
            for i in await asyncio.to_thread(state.log.series)
            if i.key.data_source_rid == asked.dataSourceRid
            and i.key.channel == asked.channel
            and all(dict(i.key.tags).get(k) == v for k, v in asked.tagFilters.items())
        ]
    path = span_reader(state.log)
    if infos and path is not None:
        covered = await asyncio.to_thread(spans.spans, path, [i.id for i in infos])
        infos = [
            i for i in infos if i.id in covered and covered[i.id][0] <= end and covered[i.id][1] >= start
        ]
    elif infos and not covers_all_time(start, end):
        if state.forwarded_reads is not None:  # an edge: the compute tier counts them with Spark
            return await state.forwarded_reads.forward(request, await request.body())
        found = await counted_by_spark(state, [i.id for i in infos], start, end, "startTime/endTime")
        infos = [i for i in infos if found.get(i.id, 0) > 0]
    tags: dict[str, set[str]] = defaultdict(set)
    for info in infos:
        for k, v in info.key.tags:
            tags[k].add(v)
    return {
        "availableTags": {
            "dataSourceRid": asked.dataSourceRid,
            "channel": asked.channel,
            "availableTags": {k: sorted(v) for k, v in sorted(tags.items())},
        }
    }


def timestamp(ns: int) -> dict[str, int]:
    """nominal-api's api.Timestamp."""
    seconds, nanos = divmod(ns, NANOS)
    return {"seconds": seconds, "nanos": nanos}


async def bounds(log: PointLog, rids: list[str]) -> dict[str, dict[str, Any]]:
    """Each data source's scout_catalog.Bounds: the earliest and latest timestamp of the points it
    holds now; left out for one without points, and for every one on a log with no time index."""
    path = span_reader(log)
    if path is None or not rids:
        return {}
    wanted = set(rids)
    infos = [i for i in await asyncio.to_thread(log.series) if i.key.data_source_rid in wanted]
    covered = await asyncio.to_thread(spans.spans, path, [i.id for i in infos])
    per_rid: dict[str, tuple[int, int]] = {}
    for info in infos:
        if info.id not in covered:
            continue
        lo, hi = covered[info.id]
        old = per_rid.get(info.key.data_source_rid)
        per_rid[info.key.data_source_rid] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    return {
        rid: {"start": timestamp(lo), "end": timestamp(hi), "type": "ABSOLUTE"}
        for rid, (lo, hi) in per_rid.items()
    }


class Range(BaseModel):
    """nominal-api's api.Range (api.Timestamp ends)."""

    start: dict[str, int]
    end: dict[str, int]


class GetSeriesCountRequest(BaseModel):
    """nominal-api's datasource.api.GetSeriesCountRequest."""

    dataSourceRid: str = Field(max_length=1000)
    channel: str = Field(max_length=1000)
    range: Range
    tagFilters: dict[str, Any] | None = None
    context: dict[str, Any] | None = None


class BatchGetSeriesCountRequest(BaseModel):
    requests: list[GetSeriesCountRequest] = Field(max_length=MAX_ITEMS)


def _api_ns(value: dict[str, int], field: str) -> int:
    if not isinstance(value.get("seconds"), int) or not 0 <= int(value.get("nanos", 0)) < NANOS:
        raise HttpError(400, f"{field}: an api.Timestamp (seconds, nanos)")
    return value["seconds"] * NANOS + int(value.get("nanos", 0))


def _literal_of(value: Any, field: str) -> str:
    if (
        not isinstance(value, dict)
        or value.get("type") != "literal"
        or not isinstance(value.get("literal"), str)
    ):
        raise HttpError(
            400,
            f"{field}: only a literal StringConstant is served (a variable would need the request's context)",
            name="Sparkwire:SeriesCountOptionNotSupported",
            params={"field": field},
        )
    return str(value["literal"])


def tag_conditions(value: Any, field: str) -> list[TagCondition]:
    """nominal-api's TagFilters: IN / NOT_IN on one key (`single`), combined with `and`; a key named
    twice is refused, as Nominal does ("throws if any one tag key is specified in more than one filter")."""
    if not isinstance(value, dict) or value.get("type") not in ("single", "and"):
        raise HttpError(400, f"{field}: a TagFilters union (single or and)")
    if value["type"] == "and":
        parts = value.get("and")
        if not isinstance(parts, list):
            raise HttpError(400, f"{field}.and: a list of TagFilters")
        out = [c for i, part in enumerate(parts) for c in tag_conditions(part, f"{field}.and.{i}")]
    else:
        single = value.get("single")
        if not isinstance(single, dict) or single.get("operator") not in ("IN", "NOT_IN"):
            raise HttpError(400, f"{field}.single: a TagFilter (key, values, operator IN or NOT_IN)")
        values = single.get("values")
        if not isinstance(values, list):
            raise HttpError(400, f"{field}.single.values: a list of StringConstants")
        out = [
            TagCondition(
                _literal_of(single.get("key"), f"{field}.single.key"),
                frozenset(_literal_of(v, f"{field}.single.values.{i}") for i, v in enumerate(values)),
                negate=single["operator"] == "NOT_IN",
            )
        ]
    keys = [c.key for c in out]
    if len(set(keys)) != len(keys):
        raise HttpError(400, f"{field}: a tag key in more than one filter: {sorted(keys)}")
    return out


@router.post(
    "/batch-get-series-count",
    summary="Nominal's batchGetSeriesCount: per request, the series of a channel with points in a range",
)
async def batch_get_series_count(body: BatchGetSeriesCountRequest, request: Request) -> Any:
    """A series counts when its tags pass the tag filters and it has points in [range.start,
    range.end]: on the embedded log, when a block of its points overlaps the range
    (compute/storage/sqlite/spans.py, no point read); on a log with no time index (Kafka),
    counted by one Spark job per distinct range (docs/decisions/0093-series-counts-by-spark.md)."""
    principal = admit_request(request, DataSourceRoute.doing)
    state = request.app.state.sparkwire
    asked = []
    for i, item in enumerate(body.requests):
        start = _api_ns(item.range.start, f"requests.{i}.range.start")
        end = _api_ns(item.range.end, f"requests.{i}.range.end")
        if end < start:
            raise HttpError(400, f"requests.{i}.range: end is before start")
        conditions = (
            [] if item.tagFilters is None else tag_conditions(item.tagFilters, f"requests.{i}.tagFilters")
        )
        asked.append((item, start, end, conditions))
    known = await asyncio.to_thread(state.log.series) if asked else []
    path = span_reader(state.log)
    matched: list[list[SeriesInfo]] = []
    for item, _, _, conditions in asked:
        infos = []
        if principal.allows(item.dataSourceRid):
            infos = [
                i
                for i in known
                if i.key.data_source_rid == item.dataSourceRid
                and i.key.channel == item.channel
                and all(c.holds(dict(i.key.tags)) for c in conditions)
            ]
        matched.append(infos)
    # On a log with no time index, the series of every request over one range in one count.
    by_range: dict[tuple[int, int], set[int]] = defaultdict(set)
    for (_, start, end, _), infos in zip(asked, matched, strict=True):
        if path is None and infos and not covers_all_time(start, end):
            by_range[(start, end)].update(i.id for i in infos)
    if by_range and state.forwarded_reads is not None:  # an edge: the compute tier counts them with Spark
        return await state.forwarded_reads.forward(request, await request.body())
    counted = {
        (start, end): await counted_by_spark(state, sorted(ids), start, end, "requests.range")
        for (start, end), ids in by_range.items()
    }
    responses: list[dict[str, Any]] = []
    for (_, start, end, _), infos in zip(asked, matched, strict=True):
        if infos and path is not None:
            found = await asyncio.to_thread(spans.points_between, path, [i.id for i in infos], start, end)
            infos = [i for i in infos if found.get(i.id, 0) > 0]
        elif (start, end) in counted:
            infos = [i for i in infos if counted[(start, end)].get(i.id, 0) > 0]
        responses.append({"seriesCount": len(infos)})
    return {"responses": responses}
