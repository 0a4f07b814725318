"""The directory of live computations (docs/extensions.md), as Kafka's ListGroups/DescribeGroups
are for consumer groups: `GET /computations` lists the shared computations this server runs (or,
on an edge, mirrors), `GET /computations/{id}` describes one.

What an entry says comes from the computation itself (`Computation` in this process, or an
edge's `ResultMirror`) and the hub's subscribers of it; the lag is the point log's own count of
what the stream has not processed yet (`PointLog.pending`), read off the event loop. With
authentication on, a token needs the `admin` claim (app/protocol/auth.py): a computation's series name data
sources the token might not reach.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from app.api.openapi import REF
from app.api.state import ServerState
from app.http.errors import HttpError
from app.protocol.admission import Refused
from app.protocol.auth import ADMIN_CLAIM
from app.tiers import wire
from app.tiers.mirror import ResultMirror
from compute.evaluation.computation import Computation
from compute.evaluation.request import ComputationRequest
from schemas.timestamps import split_nanos

router = APIRouter()

ID_LENGTH = 12  # hex digits of the key's digest (app/tiers/wire.py's, which names its result channel)


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class Time(_Model):
    """A Conjure timestamp or duration: whole seconds and nanoseconds (0 <= nanos < 10^9)."""

    seconds: int
    nanos: int


class SeriesRead(_Model):
    """One channel the computation reads: every series of it whose tags include `tags`."""

    data_source_rid: str
    channel: str
    tags: dict[str, str]
    group_by_tags: list[str]


class PointsHeld(_Model):
    window: int | None = Field(description="input points in its windows (null on an edge: it holds none)")
    output: int = Field(description="points, buckets or ranges in its current result")


class LateDrops(_Model):
    dropped_points: int = Field(
        description="points left out as later than the allowed lateness, since it started (on an edge: "
        "since the edge mirrored it); they stay in the log"
    )
    newest_dropped_timestamp: Time | None
    by_data_source: dict[str, int] | None = Field(description="the same per data source (null on an edge)")


class Lag(_Model):
    points: int | None = Field(
        description="points written to the log that the stream has not processed yet, so not in this "
        "computation's result yet (the point log's consumer lag, counted in points; the same for "
        "every live computation of a server, which all read one stream). Null while it back-fills, "
        "on an edge, or if the log cannot tell (the Kafka log: its offsets are Spark's)"
    )
    applied_seq: int | None = Field(
        description="the newest log position (seq) among the points it applied (null on an edge)"
    )


class Subscription(_Model):
    subscription_id: str
    connection: int
    late_reports: bool


class ComputationEntry(_Model):
    id: str = Field(
        description="a short stable id: the first 12 hex digits of a digest of its key (a replay's: of "
        "its key, connection and subscription id)"
    )
    replay: bool = Field(
        False, description="a replay's private computation (docs/extensions.md), not shared: one subscriber"
    )
    node_kind: str = Field(description="the type of its top-level node, e.g. `series`")
    series: list[SeriesRead]
    series_routed: int | None = Field(description="series it reads now (null on an edge)")
    window: Time
    allowed_lateness: Time | None = Field(description="null: 100 ms behind the newest point of a series")
    state: str = Field(description="`live`, `starting` (back-filling or waiting for a snapshot), `failed`")
    error: str | None
    subscribers: int
    kept_for_resume: Time | None = Field(
        None,
        description="with no subscriber left, kept live for a resume (`SPARKWIRE_RESUME_LINGER_SECONDS`): "
        "the time left before it is released; null while it has subscribers or is not kept",
    )
    connections: int
    points_held: PointsHeld
    last_update: str | None = Field(description="when its result was last evaluated (ISO-8601, UTC)")
    late: LateDrops
    lag: Lag


class ComputationDetail(ComputationEntry):
    key: str = Field(description="the whole key: node, window, context, lateness, result options")
    subscriptions: list[Subscription]


def short_id(key: str) -> str:
    return wire.digest(key)[:ID_LENGTH]


def _time(ns: int | None) -> Time | None:
    if ns is None:
        return None
    seconds, nanos = split_nanos(ns)
    return Time(seconds=seconds, nanos=nanos)


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    moment = datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _state(result: Any) -> str:
    if result.error is not None:
        return "failed"
    ready = result.ready if isinstance(result, Computation) else getattr(result, "synced", True)
    return "live" if ready else "starting"


def _id(result: Any, subscribers: set[Any], replay: bool) -> str:
    if not replay:
        return short_id(result.key)
    (subscriber,) = subscribers
    return short_id(f"{result.key}#replay:{subscriber.sink.id}:{subscriber.subscription_id}")


def _series(result: Any) -> list[SeriesRead]:
    """Each channel it reads, once (a formula that reads its channel twice, as ifElse does, reads
    the same series)."""
    read = dict.fromkeys(
        (s.data_source_rid, s.channel, tuple(sorted(dict(s.tags).items())), tuple(s.group_by))
        for s in result.plan.selectors
    )
    return [
        SeriesRead(data_source_rid=rid, channel=channel, tags=dict(tags), group_by_tags=list(group_by))
        for rid, channel, tags, group_by in read
    ]


def _linger_left(state: ServerState, result: Any) -> int | None:
    """Nanoseconds until a computation kept for a resume is released (None: it is not kept)."""
    left = state.hub.linger_left_s(result)
    return None if left is None else round(left * 1e9)


def _entry(
    result: Any,
    subscribers: set[Any],
    pending: int | None,
    detail: bool,
    replay: bool = False,
    linger_ns: int | None = None,
) -> ComputationEntry:
    request = result.request if isinstance(result, ResultMirror) else ComputationRequest.from_json(result.key)
    local = isinstance(result, Computation)
    window_points, output_points = (
        result.points_held() if local or isinstance(result, ResultMirror) else (None, 0)
    )
    state = _state(result)
    fields: dict[str, Any] = {
        "id": _id(result, subscribers, replay),
        "replay": replay,
        "node_kind": str(request.node.get("type", "?")) if isinstance(request.node, dict) else "?",
        "series": _series(result),
        "series_routed": len(result.routes) if local else None,
        "window": _time(request.window_ns),
        "allowed_lateness": _time(request.allowed_lateness_ns),
        "state": state,
        "error": None if result.error is None else f"{result.error.name}: {result.error.message}",
        "subscribers": len(subscribers),
        "kept_for_resume": None if subscribers else _time(linger_ns),
        "connections": len({s.sink for s in subscribers}),
        "points_held": PointsHeld(window=window_points, output=output_points),
        "last_update": _iso(getattr(result, "updated_at", None)),
        "late": LateDrops(
            dropped_points=result.late_dropped,
            newest_dropped_timestamp=_time(result.late_newest_since(0)),
            by_data_source=result.late_by_source() if local else None,
        ),
        "lag": Lag(
            points=pending
            if local and not replay and state == "live" and pending is not None and pending >= 0
            else None,
            applied_seq=result.applied_seq if local else None,
        ),
    }
    if not detail:
        return ComputationEntry(**fields)
    subscriptions = [
        Subscription(
            subscription_id=s.subscription_id, connection=s.sink.id, late_reports=s.options.late_reports
        )
        for s in sorted(subscribers, key=lambda s: (s.sink.id, s.subscription_id))
    ]
    return ComputationDetail(**fields, key=result.key, subscriptions=subscriptions)


def _authorize(request: Request, state: ServerState) -> None:
    try:
        principal = state.admission.admit(request.headers, "read the directory of computations")
    except Refused as refused:
        raise HttpError(refused.status, refused.message) from None
    if not principal.admin:  # ANONYMOUS (authentication off) is an admin
        raise HttpError(
            403,
            f"the directory of live computations needs a token with the '{ADMIN_CLAIM}' claim",
            params={"claim": ADMIN_CLAIM},
        )


def _replays(state: ServerState) -> list[tuple[Any, set[Any]]]:
    """Each running replay's private computation and its one subscriber."""
    views = (run.live_view() for run in list(state.replays))
    return [
        (computation, {subscriber})
        for view in views
        if view is not None
        for computation, subscriber in [view]
    ]


async def _live(state: ServerState) -> tuple[list[tuple[Any, set[Any]]], int | None]:
    """Every live computation with its subscribers here, and the stream's pending points."""
    subscribed: dict[Any, set[Any]] = {r: set(s) for r, s in state.hub.live().items()}
    engine = state.engine
    if engine is None:  # an edge (its mirrors with subscribers), or Spark not started yet
        return list(subscribed.items()), None
    computations, pending = await asyncio.to_thread(lambda: (engine.computations(), engine.pending_points()))
    results = list(dict.fromkeys([*computations, *subscribed]))  # with those still being created
    return [(r, subscribed.get(r, set())) for r in results], pending


_ERRORS = {
    "401": "a missing or invalid bearer token (authentication on)",
    "403": f"a token without the '{ADMIN_CLAIM}' claim (Default:PermissionDenied)",
}


def _responses(*statuses: str) -> dict[int | str, dict[str, Any]]:
    error = {"application/json": {"schema": {"$ref": REF.format(model="ConjureError")}}}
    descriptions = {**_ERRORS, "404": "no live computation has this id (Default:NotFound)"}
    return {status: {"description": descriptions[status], "content": error} for status in statuses}


@router.get(
    "/computations",
    summary="The directory of live computations (admin)",
    description="Every live shared computation, as Kafka's ListGroups: what it reads, its window, "
    "subscribers, points held, late drops and lag. Identical subscriptions share one computation.",
    response_model=list[ComputationEntry],
    response_model_by_alias=True,
    responses=_responses("401", "403"),
)
async def list_computations(request: Request) -> list[ComputationEntry]:
    state: ServerState = request.app.state.sparkwire
    _authorize(request, state)
    live, pending = await _live(state)
    entries = [
        _entry(result, subscribers, pending, detail=False, linger_ns=_linger_left(state, result))
        for result, subscribers in live
    ]
    entries += [_entry(result, subs, None, detail=False, replay=True) for result, subs in _replays(state)]
    return sorted(entries, key=lambda e: e.id)


@router.get(
    "/computations/{computation_id}",
    summary="One live computation (admin)",
    description="As an entry of `GET /computations`, with its whole key and its subscriptions.",
    response_model=ComputationDetail,
    response_model_by_alias=True,
    responses=_responses("401", "403", "404"),
)
async def describe_computation(request: Request, computation_id: str) -> ComputationDetail:
    state: ServerState = request.app.state.sparkwire
    _authorize(request, state)
    live, pending = await _live(state)
    for result, subscribers, replay in [
        *((r, s, False) for r, s in live),
        *((r, s, True) for r, s in _replays(state)),
    ]:
        if _id(result, subscribers, replay) == computation_id:
            linger = None if replay else _linger_left(state, result)
            entry = _entry(result, subscribers, pending, detail=True, replay=replay, linger_ns=linger)
            assert isinstance(entry, ComputationDetail)
            return entry
    raise HttpError(404, f"no live computation has the id {computation_id!r}", params={"id": computation_id})
