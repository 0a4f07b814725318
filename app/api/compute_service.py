"""Nominal's ComputeService over HTTP in Conjure JSON (nominal-api 0.1505.0's `scout.compute.api`):
`compute`, `computeWithUnits`, `batchComputeWithUnits`, `computeUnits`, `batchComputeUnits` and
`parameterizedCompute`. A request's node is compiled by the compiler a subscription uses, with the
period `end - start` as its window, and evaluated once over the points of that period as a new
subscription's FullResult is built from history (compute/evaluation/polled.py); its result is the
FullResult's ComputeNodeResponse (app/protocol/frames.py). What the compiler refuses (Nominal's
polling-only nodes among them) is refused with its error, named `Compute:<name>`
(docs/decisions/0078-compute-service.md).

History is read as export and back-fill read it: the embedded log by this process, the Kafka log by
a Spark batch job (not on an edge, which runs no Spark); the points a request would read are
counted first and more than MAX_POLLED_POINTS in one evaluation, or more than
SPARKWIRE_MAX_POLLED_REQUEST_POINTS over a batch's or a parameterized request's items, is refused
before any is read. A request evaluates on a thread of a pool of its own, at most
SPARKWIRE_MAX_POLLED_COMPUTATIONS at once, within SPARKWIRE_POLLED_TIME_BUDGET_SECONDS
(app/api/polled_gate.py; docs/decisions/0083-polars-export-and-polled-cost.md)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import orjson
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from app.api.admitted_route import AdmittedRoute, admit_request
from app.api.export import Timestamp
from app.api.log_reads import Points, read_embedded, span_reader, spark_counts, spark_read, spark_series
from app.api.polled_gate import gate_of
from app.http.errors import HttpError
from app.protocol import frames
from app.protocol.auth import Principal
from compute.evaluation import cost
from compute.evaluation.compiler.builder import refuse_unhonoured_context
from compute.evaluation.compiler.plan import Plan
from compute.evaluation.computation import Batch, Rows
from compute.evaluation.errors import ComputeError, MalformedNode
from compute.evaluation.polled import PolledComputation
from compute.evaluation.request import ComputationRequest
from compute.storage.catalog_reach import Reach
from compute.storage.contract import PointLog
from compute.storage.series import SeriesInfo
from compute.storage.sqlite import spans

_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ConjureError"}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {
        "description": "an invalid body, or a node Sparkwire does not compute (the name says which: "
        "Compute:PollingOnlyComputation, Compute:InvalidComputation, Compute:TooManyPoints, ...)",
        "content": _ERROR,
    },
    401: {"description": "a missing or invalid bearer token (authentication on)", "content": _ERROR},
    403: {"description": "the token does not reach a data source the node reads", "content": _ERROR},
    501: {
        "description": "Sparkwire:ComputeNeedsSpark: the Kafka log read while this process's Spark is still "
        "starting (an edge has the compute tier answer: app/api/forwarded_reads.py)",
        "content": _ERROR,
    },
    503: {
        "description": "Compute:ComputeBusy (every evaluation slot taken and the queue full) or "
        "Compute:ComputeTimedOut (the request evaluated past its time budget and was stopped); on an "
        "edge, Sparkwire:ComputeTierUnreachable (no compute process answered the request it forwards)",
        "content": _ERROR,
    },
}
MAX_POLLED_POINTS = 10_000_000  # points one evaluation may read (a block counts whole): ~240 MB held
MAX_BATCH = 100  # requests in one batch or parameter inputs in one parameterized request
UNITS_WINDOW_NS = 60 * 1_000_000_000  # the window a units request (which has no period) compiles with


class ComputeRoute(AdmittedRoute):
    doing = "compute"
    reads_log_points = True  # an edge has the compute tier answer (app/api/forwarded_reads.py)


router = APIRouter(prefix="/compute/v2", tags=["compute"], responses=ERRORS, route_class=ComputeRoute)


class ComputeNodeRequest(BaseModel):
    """nominal-api's scout.compute.api.ComputeNodeRequest (node and context read as the WebSocket's)."""

    node: dict[str, Any]
    start: Timestamp
    end: Timestamp
    context: dict[str, Any] = Field(default_factory=dict)
    sourceRid: str | None = None
    requestId: str | None = None


class ComputeUnitsRequest(BaseModel):
    node: dict[str, Any]
    context: dict[str, Any] = Field(default_factory=dict)


class BatchComputeWithUnitsRequest(BaseModel):
    requests: list[ComputeNodeRequest] = Field(max_length=MAX_BATCH)


class BatchComputeUnitsRequest(BaseModel):
    requests: list[ComputeUnitsRequest] = Field(max_length=MAX_BATCH)


class OptionalRange(BaseModel):
    start: Timestamp | None = None
    end: Timestamp | None = None


class ParameterInput(BaseModel):
    variables: dict[str, Any] = Field(default_factory=dict)
    timeRange: OptionalRange | None = None


class ParameterizedContext(BaseModel):
    parameterInputs: list[ParameterInput] = Field(max_length=MAX_BATCH)


class ParameterizedComputeNodeRequest(BaseModel):
    node: dict[str, Any]
    start: Timestamp
    end: Timestamp
    context: dict[str, Any] = Field(default_factory=dict)
    sourceRid: str | None = None
    parameterizedContext: ParameterizedContext


# -- errors ------------------------------------------------------------------------------------------
def refused(err: ComputeError) -> HttpError:
    """A ComputeError (the compiler's or an evaluation's) as the Conjure error of this service."""
    return HttpError(err.status_code, err.message, name=f"Compute:{err.name}", params=dict(err.params))


def _malformed(exc: MalformedNode) -> HttpError:
    return HttpError(400, f"node: {exc}", name="Default:InvalidArgument")


def serializable(err: HttpError) -> dict[str, Any]:
    """A refusal as nominal-api's api.SerializableError (inside a batch's per-item result)."""
    return {
        "name": err.name,
        "message": err.message,
        "errorInstanceId": str(uuid.uuid4()),
        "statusCode": err.status,
        "params": err.params,
    }


def error_result(err: HttpError) -> dict[str, Any]:
    """A ComputeNodeResult's `error` (ErrorResult: errorType, code)."""
    return {"type": "error", "error": {"errorType": err.name, "code": err.status}}


def unit_error(err: HttpError) -> dict[str, Any]:
    """A ComputeUnitResult whose computation failed: noUnitAvailable with the error."""
    failed = [{"type": "error", "error": serializable(err)}]
    return {"type": "single", "single": {"type": "noUnitAvailable", "noUnitAvailable": failed}}


# -- compiling ---------------------------------------------------------------------------------------
def compile_node(
    state: Any,
    principal: Principal,
    node: dict[str, Any],
    context: Mapping[str, Any],
    window_ns: int,
    variables: Mapping[str, Any] | None = None,
) -> Plan:
    """Blocking: the node's plan over a window of `window_ns`, compiled as a subscription's is (this
    server's limits and catalogs, the token's reach checked at each read); HttpError when refused."""
    if not principal.admin and not principal.data_source_patterns:
        raise HttpError(403, "the token reaches no data source", name="Compute:PermissionDenied")
    try:
        refuse_unhonoured_context(context)
        merged = {**(context.get("variables") or {}), **(variables or {})}
        request = ComputationRequest(
            node, window_ns, merged, None, dataset_references=dict(context.get("datasetReferences") or {})
        )
        reach = Reach(principal.data_source_patterns, everything=principal.admin)
        plan = request.compile(
            state.settings.compute_limits, principal.allows, reach, state.catalogs, polled=True
        )
        if (
            why := cost.refusal(cost.estimate(plan.root, plan.window_ns, plan.history_ns), cost.budget())
        ) is not None:
            raise why
    except ComputeError as err:
        raise refused(err) from None
    except MalformedNode as exc:
        raise _malformed(exc) from None
    if denied := principal.denied(s.data_source_rid for s in plan.selectors):
        raise HttpError(
            403, f"the token does not reach data source {denied[0]!r}", name="Compute:PermissionDenied"
        )
    return plan


# -- reading and evaluating --------------------------------------------------------------------------
class History:
    """How this server reads the log's history (export's and back-fill's way); blocking methods."""

    def __init__(self, state: Any) -> None:
        self.log: PointLog = state.log
        self.path = span_reader(self.log)
        self.engine = state.engine
        self.by_spark = self.path is None or not self.log.driver_reads
        if self.by_spark and self.engine is None:
            raise HttpError(
                501,
                "this server's log (Kafka) is read by Spark's batch jobs, and this process's Spark is "
                "still starting: retry once /readyz says 200",
                name="Sparkwire:ComputeNeedsSpark",
            )
        self._known: list[SeriesInfo] | None = None

    def known(self) -> list[SeriesInfo]:
        if self._known is None:
            self._known = spark_series(self.engine) if self.by_spark else self.log.series()
        return self._known

    def count(self, ids: list[int], start: int, end: int) -> int:
        """At least the points of these series with start <= ts <= end (a block counts whole)."""
        if self.by_spark:
            return sum(spark_counts(self.engine, ids, start, end + 1).values())
        return sum(spans.points_between(self.path, ids, start, end).values())

    def read(self, ids: list[int], start: int, end: int) -> Batch:
        """These series' points with start <= ts <= end, per series in seq order."""
        if not ids:
            return {}
        if self.by_spark:
            read = spark_read(self.engine, ids, start, end + 1)
        else:
            read = read_embedded(self.log, ids, start, end + 1)
        return {sid: _cut(p, end) for sid, p in read.items()}


def _cut(p: Points, end: int) -> Rows:
    keep = p.ts <= end
    if bool(np.all(keep)):
        return Rows(p.seq, p.ts, p.values)
    return Rows(p.seq[keep], p.ts[keep], p.values[keep])


class Counted:
    """A compiled plan routed to its series, and the points its period would read (counted, not read)."""

    def __init__(self, history: History, plan: Plan, end: int) -> None:
        self.plan, self.end = plan, end
        self.polled = PolledComputation(plan, end)
        self.ids = self.polled.route(history.known())
        self.points = history.count(self.ids, self.polled.read_from, end - 1) if self.ids else 0


def refuse_request_points(counted: list[Counted], limit: int) -> None:
    """A batch's or parameterized request's items read at most `limit` points in all."""
    total = sum(c.points for c in counted)
    if total > limit:
        raise HttpError(
            400,
            f"the request's {len(counted)} computations would read {total:,} points in all, more than "
            f"this server's {limit:,} (SPARKWIRE_MAX_POLLED_REQUEST_POINTS): ask for fewer computations "
            "or shorter periods",
            name="Compute:TooManyPoints",
            params={
                "limit": str(limit),
                "asked": str(total),
                "setting": "SPARKWIRE_MAX_POLLED_REQUEST_POINTS",
            },
        )


# One item of a batch or parameterized request: node, context, start, end, variables over the context's
_Item = tuple[dict[str, Any], Mapping[str, Any], Timestamp, Timestamp, Mapping[str, Any] | None]


def _counted_items(
    state: Any, principal: Principal, history: History, items: Iterable[_Item]
) -> list[Counted | HttpError]:
    """Every item compiled and counted before any is read, a refusal kept in its item's place; more
    than SPARKWIRE_MAX_POLLED_REQUEST_POINTS in all refuses the whole request."""
    prepared: list[Counted | HttpError] = []
    for node, context, start_at, end_at, variables in items:
        try:
            start, end = _period(start_at, end_at)
            plan = compile_node(state, principal, node, context, end - start, variables)
            prepared.append(Counted(history, plan, end))
        except HttpError as err:
            prepared.append(err)
    refuse_request_points(
        [c for c in prepared if isinstance(c, Counted)], state.settings.max_polled_request_points
    )
    return prepared


def evaluate(history: History, plan: Plan, end: int, counted: Counted | None = None) -> Any:
    """Blocking: the plan's ComputeNodeResponse over the period ending at `end`, its points those
    with ts < end (HttpError when refused)."""
    counted = counted or Counted(history, plan, end)
    polled, ids, points = counted.polled, counted.ids, counted.points
    last = end - 1  # the period's points: start <= ts < end
    if points > MAX_POLLED_POINTS:
        raise HttpError(
            400,
            f"the computation would read {points:,} points, more than {MAX_POLLED_POINTS:,}: ask for a "
            "shorter period",
            name="Compute:TooManyPoints",
            params={"limit": str(MAX_POLLED_POINTS), "asked": str(points)},
        )
    try:
        outputs = polled.evaluate(history.read(ids, polled.read_from, last))
    except ComputeError as err:
        raise refused(err) from None
    # tagByIntervals groups an ungrouped plan's output by the intervals' tags (none: no group at all)
    grouped = plan.grouped or set(outputs) != {()}
    return frames.response(outputs, grouped, plan.arrow)


def _period(start: Timestamp, end: Timestamp) -> tuple[int, int]:
    s, e = start.ns(), end.ns()
    if e < s:
        raise HttpError(400, "end is before start")
    return s, e


def compute_one(
    state: Any, principal: Principal, body: ComputeNodeRequest, history: History | None = None
) -> tuple[Any, str | None]:
    """Blocking: (ComputeNodeResponse, the result's unit) of one request; HttpError when refused."""
    start, end = _period(body.start, body.end)
    plan = compile_node(state, principal, body.node, body.context, end - start)
    return evaluate(history or History(state), plan, end), plan.unit


def unit_of(state: Any, principal: Principal, body: ComputeUnitsRequest) -> Any:
    """Blocking: the ComputeUnitResult of a node (HttpError when refused)."""
    plan = compile_node(state, principal, body.node, body.context, UNITS_WINDOW_NS)
    return frames.unit_result(plan.unit)


def _json(value: Any) -> Response:
    return Response(orjson.dumps(value), media_type="application/json")


@router.post(
    "/compute",
    summary="Nominal's compute: a node's result over [start, end) (a ComputeNodeResponse)",
    response_class=Response,
)
async def compute(body: ComputeNodeRequest, request: Request) -> Response:
    principal = admit_request(request, ComputeRoute.doing)
    state = request.app.state.sparkwire
    result, _ = await gate_of(state).run(lambda: compute_one(state, principal, body))
    return _json(result)


@router.post(
    "/computeWithUnits",
    summary="Nominal's computeWithUnits: a node's result over [start, end) and its unit",
    response_class=Response,
)
async def compute_with_units(body: ComputeNodeRequest, request: Request) -> Response:
    principal = admit_request(request, ComputeRoute.doing)
    state = request.app.state.sparkwire
    result, unit = await gate_of(state).run(lambda: compute_one(state, principal, body))
    return _json({"computeResult": result, "computeUnit": frames.unit_result(unit)})


def _batch(state: Any, principal: Principal, requests: list[ComputeNodeRequest]) -> list[Any]:
    """Blocking: each request's ComputeWithUnitsResult, a refusal as its own item's error; every
    item compiled and counted before any is read (the request's points bounded in all)."""
    history = History(state)
    items = ((b.node, b.context, b.start, b.end, None) for b in requests)
    prepared = _counted_items(state, principal, history, items)
    results: list[Any] = []
    for item in prepared:
        try:
            if isinstance(item, HttpError):
                raise item
            result, unit = evaluate(history, item.plan, item.end, item), item.plan.unit
        except HttpError as err:
            results.append({"computeResult": error_result(err), "unitResult": unit_error(err)})
        else:
            results.append(
                {
                    "computeResult": {"type": "success", "success": result},
                    "unitResult": frames.unit_result(unit),
                }
            )
    return results


@router.post(
    "/compute/batch",
    summary="Nominal's batchComputeWithUnits: each request's result and unit, in order (errors per item)",
    response_class=Response,
)
async def batch_compute_with_units(body: BatchComputeWithUnitsRequest, request: Request) -> Response:
    principal = admit_request(request, ComputeRoute.doing)
    state = request.app.state.sparkwire
    results = await gate_of(state).run(lambda: _batch(state, principal, body.requests))
    return _json({"results": results})


@router.post(
    "/compute/units",
    summary="Nominal's computeUnits: the unit of a node's result (a ComputeUnitResult)",
)
async def compute_units(body: ComputeUnitsRequest, request: Request) -> Any:
    principal = admit_request(request, ComputeRoute.doing)
    return await asyncio.to_thread(unit_of, request.app.state.sparkwire, principal, body)


def _units(state: Any, principal: Principal, requests: list[ComputeUnitsRequest]) -> list[Any]:
    results: list[Any] = []
    for body in requests:
        try:
            results.append(unit_of(state, principal, body))
        except HttpError as err:
            results.append(unit_error(err))
    return results


@router.post(
    "/compute/batch-units",
    summary="Nominal's batchComputeUnits: each node's unit, in order (errors per item)",
)
async def batch_compute_units(body: BatchComputeUnitsRequest, request: Request) -> Any:
    principal = admit_request(request, ComputeRoute.doing)
    return {"results": await asyncio.to_thread(_units, request.app.state.sparkwire, principal, body.requests)}


def _parameterized(state: Any, principal: Principal, body: ParameterizedComputeNodeRequest) -> list[Any]:
    """Blocking: the node once per parameter input (its variables over the context's, its time
    range over the request's), each a ComputeNodeResult; every input compiled and counted before
    any is read (the request's points bounded in all)."""
    history = History(state)
    spans = [(p, p.timeRange or OptionalRange()) for p in body.parameterizedContext.parameterInputs]
    items = (
        (body.node, body.context, span.start or body.start, span.end or body.end, p.variables)
        for p, span in spans
    )
    prepared = _counted_items(state, principal, history, items)
    results: list[Any] = []
    for item in prepared:
        try:
            if isinstance(item, HttpError):
                raise item
            results.append({"type": "success", "success": evaluate(history, item.plan, item.end, item)})
        except HttpError as err:
            results.append(error_result(err))
    return results


@router.post(
    "/compute/parameterized",
    summary="Nominal's parameterizedCompute: the node once per parameter input, in order",
    response_class=Response,
)
async def parameterized_compute(body: ParameterizedComputeNodeRequest, request: Request) -> Response:
    principal = admit_request(request, ComputeRoute.doing)
    state = request.app.state.sparkwire
    results = await gate_of(state).run(lambda: _parameterized(state, principal, body))
    return _json({"results": results})
