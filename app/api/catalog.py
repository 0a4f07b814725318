"""The series catalog, two ways.

- `GET /series`: the series the log holds (data source, channel, tags, point type), so a dashboard
  or a program can offer what there is to subscribe to.
- `POST /catalog/v1/datasets/multiple`: Nominal's `CatalogService.getEnrichedDatasets`, which the
  `nominal` SDK calls from `client.get_dataset(rid)` before it writes to a dataset. Each data source
  rid asked for is answered as an `EnrichedDataset` (nominal_api.scout_catalog).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import re
import uuid
from collections import Counter
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from app.api.data_sources import bounds as data_source_bounds
from app.http.errors import HttpError
from app.http.request_body import read_body
from app.protocol.admission import Refused
from app.protocol.limits import MAX_JSON_DEPTH, json_depth

router = APIRouter()

MAX_DATASETS_PER_REQUEST = 1000
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


@router.get(
    "/series",
    summary="List the series written so far (those of the data sources the token reaches)",
    responses={401: {"description": "a missing or invalid bearer token (authentication on)"}},
)
async def list_series(request: Request) -> list[dict[str, Any]]:
    """With authentication on, the catalog is read as points are: a request needs a token, and sees
    only the series of the data sources its `dataSourceRids` claim reaches (a rid, a channel name or
    a tag value names a tenant's data)."""
    state = request.app.state.sparkwire
    try:
        principal = state.admission.admit(request.headers, "read the catalog")
    except Refused as refused:
        raise HttpError(refused.status, refused.message) from None
    infos = [i for i in await asyncio.to_thread(state.log.series) if principal.allows(i.key.data_source_rid)]
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


class GetDatasetsRequest(BaseModel):
    """nominal_api.scout_catalog.GetDatasetsRequest."""

    datasetRids: list[str] = Field(max_length=MAX_DATASETS_PER_REQUEST)


_REQUEST: TypeAdapter[GetDatasetsRequest | list[str]] = TypeAdapter(GetDatasetsRequest | list[str])


def dataset_uuid(rid: str) -> str:
    """A Nominal dataset rid ends with the dataset's UUID (`ri.catalog.main.dataset.<uuid>`); any
    other rid gets a stable UUID derived from it."""
    match = _UUID.search(rid)
    return match.group(0).lower() if match else str(uuid.uuid5(uuid.NAMESPACE_URL, f"sparkwire:{rid}"))


def enriched_dataset(
    rid: str, series_count: int, now: str, retention_seconds: float, bounds: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An EnrichedDataset for a data source: its required fields, filled with what Sparkwire knows.
    Sparkwire keeps no per-dataset metadata: name and display name are the rid, the ingest date is
    the time of the answer, properties and labels are empty, timestamps are absolute nanoseconds;
    `bounds` (app/api/data_sources.py) span the points it holds, absent without points."""
    if retention_seconds > 0:
        retention: dict[str, Any] = {
            "type": "KEEP_UNTIL_EXPIRY",
            "expiryDays": max(1, math.ceil(retention_seconds / 86400)),
        }
    else:
        retention = {"type": "KEEP_FOREVER"}
    return {
        "rid": rid,
        "uuid": dataset_uuid(rid),
        "name": rid,
        "displayName": rid,
        "description": f"Sparkwire data source ({series_count} series)",
        "ingestDate": now,
        "originMetadata": {},
        "lastIngestStatus": {"type": "success", "success": {}},
        "retentionPolicy": retention,
        "timestampType": "ABSOLUTE",
        "labels": [],
        "properties": {},
        "typedProperties": {},
        "granularity": "NANOSECONDS",
        "allowStreaming": True,
        "isArchived": False,
        "channelSearchSplitTagKeys": [],
        **({"bounds": bounds} if bounds is not None else {}),
    }


@router.post(
    "/catalog/v1/datasets/multiple",
    summary="Nominal's getEnrichedDatasets: the datasets (data sources) with these rids",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _REQUEST.json_schema()}},
        }
    },
)
async def get_enriched_datasets(request: Request) -> JSONResponse:
    state = request.app.state.sparkwire
    try:
        principal = state.admission.admit(request.headers, "read the catalog")
    except Refused as refused:
        raise HttpError(refused.status, refused.message) from None
    # Read like an ingest body (the `nominal` SDK zstd-compresses every body it sends), under the
    # JSON bodies' limit: 1,000 rids of at most 256 characters are ~260 KB.
    raw = await read_body(request, state.settings.max_json_body_bytes, "max_json_body_bytes")
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise HttpError(400, f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        body = _REQUEST.validate_json(raw)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"]) or "body"
        raise HttpError(400, f"{where}: {problem['msg']} (a GetDatasetsRequest or a list of rids)") from None
    rids = body.datasetRids if isinstance(body, GetDatasetsRequest) else body
    if len(rids) > MAX_DATASETS_PER_REQUEST:
        raise HttpError(400, f"at most {MAX_DATASETS_PER_REQUEST} dataset rids per request")
    longest = state.settings.max_data_source_rid_length
    if too_long := [r for r in rids if len(r) > longest]:
        raise HttpError(
            400,
            f"a dataset rid is {len(too_long[0])} characters, more than the limit of {longest} "
            "(SPARKWIRE_MAX_DATA_SOURCE_RID_LENGTH)",
            params={"limit": str(longest), "setting": "SPARKWIRE_MAX_DATA_SOURCE_RID_LENGTH"},
        )
    infos = await asyncio.to_thread(state.log.series)
    series = Counter(info.key.data_source_rid for info in infos)
    now = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
    retention = state.settings.retention
    # Every rid asked for is answered, with or without points: Sparkwire has no "create dataset"
    # step (any rid names a data source, and its first write creates it), so a new user's
    # `client.get_dataset(rid)`, which the SDK calls before writing to it, must find the dataset
    # or the first write could never happen. As in Nominal, rids the token does not reach and
    # empty rids are left out, not refused.
    reached = [rid for rid in dict.fromkeys(rids) if rid and principal.allows(rid)]
    spans = await data_source_bounds(state.log, reached)
    answered = [enriched_dataset(rid, series[rid], now, retention, spans.get(rid)) for rid in reached]
    return JSONResponse(answered)


# -- searchDatasets ---------------------------------------------------------------------------------
# The one workspace every data source is in (WorkspaceService answers it over gRPC, app/api/grpc_metadata.py).
WORKSPACE_RID = "ri.workspace.sparkwire.workspace.default"
MAX_SEARCH_PAGE = 1000
# Query fields that compare with what Sparkwire does not keep (an ingest date: it reports the time of
# the answer): refused by name rather than answered as if they matched or not.
_NOT_HONOURED = ("ingestedBeforeInclusive", "ingestedAfterInclusive")


def _query_matches(query: Any, dataset: dict[str, Any], depth: int = 0) -> bool:
    """Whether an EnrichedDataset satisfies a scout_catalog.SearchDatasetsQuery (Conjure JSON)."""
    if not isinstance(query, dict) or not isinstance(query.get("type"), str) or depth > MAX_JSON_DEPTH:
        raise HttpError(400, "query: a SearchDatasetsQuery is an object with a `type`")
    kind = query["type"]
    value = query.get("and" if kind == "and" else "or" if kind == "or" else kind)
    if kind in ("and", "or"):
        if not isinstance(value, list):
            raise HttpError(400, f"query.{kind}: a list of queries")
        found = (_query_matches(q, dataset, depth + 1) for q in value)
        return all(found) if kind == "and" else any(found)
    if kind == "not":
        return not _query_matches(value, dataset, depth + 1)
    if kind in _NOT_HONOURED:
        raise HttpError(
            400,
            f"query.{kind}: Sparkwire keeps no ingest date for a data source (it has no ingest step)",
            name="Sparkwire:SearchOptionNotSupported",
            params={"field": kind},
        )
    texts = [dataset["name"], dataset["description"]]
    if kind == "searchText":  # every word of it in the name or description, case aside
        return all(any(w in t.lower() for t in texts) for w in str(value).lower().split())
    if kind == "exactMatch":  # a substring of the name, description, labels or properties
        return str(value).lower() in "\n".join(texts).lower()
    if kind in ("label", "properties", "numericProperty", "numericPropertyRange"):
        return False  # no labels nor properties are kept
    if kind == "archiveStatus":
        return bool(value) == dataset["isArchived"]
    if kind == "derived":
        return bool(value) is False
    if kind == "workspace":
        return value == WORKSPACE_RID
    if kind == "ingestStatus":
        return value == "COMPLETED"  # every data source's points are in once written
    raise HttpError(400, f"query: unknown SearchDatasetsQuery type {kind!r}")


_SEARCH_BODY = {
    "type": "object",
    "description": "nominal_api.scout_catalog.SearchDatasetsRequest",
    "required": ["query"],
    "properties": {
        "query": {
            "type": "object",
            "description": "a SearchDatasetsQuery (a Conjure union: `type` names it)",
        },
        "pageSize": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_PAGE},
        "token": {"type": "string", "description": "the nextPageToken of the previous page"},
        "sortOptions": {
            "type": "object",
            "description": "field (INGEST_DATE, START_TIME, ...), isDescending",
        },
    },
}
_SEARCH_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ConjureError"}}}


@router.post(
    "/catalog/v1/search-datasets-v2",
    summary="Nominal's searchDatasets: the data sources matching a query (`client.search_datasets()`)",
    responses={
        400: {"description": "an invalid body, or a query field not honoured", "content": _SEARCH_ERROR},
        401: {
            "description": "a missing or invalid bearer token (authentication on)",
            "content": _SEARCH_ERROR,
        },
    },
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": _SEARCH_BODY}}}
    },
)
async def search_datasets(request: Request) -> JSONResponse:
    """Every data source with points (those the token reaches) is a dataset in the one workspace,
    named by its rid (enriched_dataset). Paged by `pageSize` (default and most 1,000); `token` is
    the offset of the next page. Sorted by rid (every ingest date is the same: the answer's time),
    or by the bounds' start or end (START_TIME, END_TIME), in the order `sortOptions` asks."""
    state = request.app.state.sparkwire
    try:
        principal = state.admission.admit(request.headers, "read the catalog")
    except Refused as refused:
        raise HttpError(refused.status, refused.message) from None
    raw = await read_body(request, state.settings.max_json_body_bytes, "max_json_body_bytes")
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise HttpError(400, f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        body = json.loads(raw)
    except ValueError:
        raise HttpError(400, "body: not JSON (a SearchDatasetsRequest)") from None
    if not isinstance(body, dict) or "query" not in body:
        raise HttpError(400, "body: a SearchDatasetsRequest, with a `query`")
    size = body.get("pageSize") or MAX_SEARCH_PAGE
    if not isinstance(size, int) or not 1 <= size <= MAX_SEARCH_PAGE:
        raise HttpError(400, f"pageSize: {size!r}, not between 1 and {MAX_SEARCH_PAGE}")
    token = body.get("token") or "0"
    if not isinstance(token, str) or not token.isdigit():
        raise HttpError(400, f"token: {token!r} is no token this server gave")
    infos = await asyncio.to_thread(state.log.series)
    series = Counter(i.key.data_source_rid for i in infos if principal.allows(i.key.data_source_rid))
    now = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
    spans = await data_source_bounds(state.log, sorted(series))
    retention = state.settings.retention
    found = [
        d
        for d in (
            enriched_dataset(rid, n, now, retention, spans.get(rid)) for rid, n in sorted(series.items())
        )
        if _query_matches(body["query"], d)
    ]
    sort = body.get("sortOptions") or {}
    edge = {"START_TIME": "start", "END_TIME": "end"}.get(sort.get("field", ""))
    descending = bool(sort.get("isDescending"))
    if edge is None:
        found.sort(key=lambda d: str(d["rid"]), reverse=descending)
    else:  # data sources without bounds last either way
        bounded = [d for d in found if "bounds" in d]
        bounded.sort(
            key=lambda d: (d["bounds"][edge]["seconds"], d["bounds"][edge]["nanos"]), reverse=descending
        )
        found = bounded + [d for d in found if "bounds" not in d]
    offset = int(token)
    page = found[offset : offset + size]
    more = offset + size < len(found)
    return JSONResponse({"results": page, **({"nextPageToken": str(offset + size)} if more else {})})
