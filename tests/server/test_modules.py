"""Nominal modules on a real server: made over HTTP with nominal-api's ModuleService beans (encoded
and decoded by conjure_python_client), then applied by `derived` numeric, enum and range series and
by a `VariableValue.derived`, live; pinned versions, arguments refused by name, archiving reaching a
live subscription, authentication, and the modules across a kill -9 and a restart."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest
from conjure_python_client import ConjureDecoder, ConjureEncoder
from nominal_api import api, scout_run_api
from nominal_api import module as nm
from nominal_api import scout_compute_api as sc

from sparkwire_client import Modules, derived_numeric, numeric_channel
from sparkwire_client import nodes as client_nodes
from sparkwire_client.modules import function, numeric_parameter
from tests.client_view import ResultView
from tests.conftest import ServerProcess, start_server
from tests.hostile import make_jwt
from tests.wire import NANOS, Client, subscription, write_points

WINDOW_S = 3600.0
WINDOW_NS = int(WINDOW_S * NANOS)
Json = dict[str, Any]
DECODER = ConjureDecoder()


def enc(value: Any) -> Any:
    return ConjureEncoder.do_encode(value)


def lit(s: str) -> sc.StringConstant:
    return sc.StringConstant(literal=s)


def raw(name: str) -> sc.NumericSeries:
    return sc.NumericSeries(raw=sc.Reference(name=name))


def param(name: str, kind: nm.ValueType) -> nm.FunctionParameter:
    return nm.FunctionParameter(name=name, type=kind)


def scaled_body(plus: float | None = None) -> sc.NumericSeries:
    """x * k (+ plus): a function of a NUMERIC_SERIES x and a DOUBLE_CONSTANT k."""
    k = sc.NumericSeries(constant=sc.ConstantNumericSeries(double=sc.DoubleConstant(variable="k")))
    body = sc.NumericSeries(multiply=sc.Multiply(left=raw("x"), right=k))
    if plus is None:
        return body
    c = sc.NumericSeries(constant=sc.ConstantNumericSeries(double=sc.DoubleConstant(literal=plus)))
    return sc.NumericSeries(add=sc.Add(left=body, right=c))


def definition(plus: float | None = None) -> nm.ModuleVersionDefinition:
    numeric, enum = nm.ValueType.NUMERIC_SERIES, nm.ValueType.ENUM_SERIES
    return nm.ModuleVersionDefinition(
        functions=[
            nm.Function(
                name="scaled",
                description="x times k",
                parameters=[param("x", numeric), param("k", nm.ValueType.DOUBLE_CONSTANT)],
                function_node=nm.FunctionNode(numeric=scaled_body(plus)),
                is_exported=True,
            ),
            nm.Function(
                name="above",
                description="where x is above level",
                parameters=[param("x", numeric), param("level", nm.ValueType.DOUBLE_CONSTANT)],
                function_node=nm.FunctionNode(
                    ranges=sc.RangeSeries(
                        threshold=sc.ThresholdingRanges(
                            input=raw("x"),
                            operator=sc.ThresholdOperator.GREATER_THAN,
                            threshold=sc.DoubleConstant(variable="level"),
                        )
                    )
                ),
                is_exported=True,
            ),
            nm.Function(
                name="delayed",
                description="the mode, later by d",
                parameters=[param("e", enum), param("d", nm.ValueType.DURATION_CONSTANT)],
                function_node=nm.FunctionNode(
                    enum=sc.EnumSeries(
                        time_shift=sc.EnumTimeShiftSeries(
                            input=sc.EnumSeries(raw=sc.Reference(name="e")),
                            duration=sc.DurationConstant(variable="d"),
                        )
                    )
                ),
                is_exported=True,
            ),
        ]
    )


def derived(
    module: str, function: str, version: str, args: dict[str, sc.FunctionParameterValue]
) -> sc.DerivedSeries:
    return sc.DerivedSeries(
        function=sc.FunctionDerivedSeries(
            module_name=lit(module),
            function_name=lit(function),
            version_reference=sc.ModuleVersionReference(
                pinned=sc.PinnedModuleVersionReference(version=lit(version))
            ),
            function_args=args,
        )
    )


def variable(name: str) -> sc.FunctionParameterValue:
    return sc.FunctionParameterValue(variable=name)


def double(value: float) -> sc.FunctionParameterValue:
    return sc.FunctionParameterValue(value=sc.VariableValue(double=value))


def channel(data_source: str, name: str) -> Json:
    source = sc.DataSourceChannel(
        data_source_rid=lit(data_source), channel=lit(name), tags={}, tags_to_group_by=[], group_by_tags=[]
    )
    return dict(enc(sc.VariableValue(channel=sc.ChannelSeries(data_source=source))))


def numeric_node(n: sc.NumericSeries) -> Json:
    summary = sc.SummarizeSeries(input=sc.Series(numeric=n), numeric_aggregations={})
    return dict(enc(sc.ComputableNode(series=summary)))


def enum_node(n: sc.EnumSeries) -> Json:
    summary = sc.SummarizeSeries(input=sc.Series(enum=n), numeric_aggregations={})
    return dict(enc(sc.ComputableNode(series=summary)))


def ranges_node(r: sc.RangeSeries) -> Json:
    return dict(enc(sc.ComputableNode(ranges=sc.SummarizeRanges(input=r))))


async def http_call(method: str, url: str, body: Any = None, token: str | None = None) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60) as http:
        return await http.request(method, url, json=body, headers=headers)


async def create_module(
    base_url: str, request: nm.CreateModuleRequest, token: str | None = None
) -> nm.Module:
    response = await http_call("POST", f"{base_url}/scout/v2/module", enc(request), token)
    assert response.status_code == 200, response.text
    module: nm.Module = DECODER.decode(response.json(), nm.Module)
    return module


async def batch_get(
    base_url: str, name: str, version: str | None, token: str | None = None
) -> list[nm.Module]:
    strategy = (
        nm.VersionStrategy(latest=nm.LatestVersionStrategy())
        if version is None
        else nm.VersionStrategy(pinned=nm.PinnedVersionStrategy(version=version))
    )
    ref = nm.RequestModuleRef(name=nm.RequestModuleNameRef(api_name=name, version_strategy=strategy))
    body = enc(nm.BatchGetModulesRequest(requests=[ref]))
    response = await http_call("POST", f"{base_url}/scout/v2/module/batch-get", body, token)
    assert response.status_code == 200, response.text
    modules: list[nm.Module] = DECODER.decode(response.json(), list[nm.Module])
    return modules


async def subscribe(client: Client, sub_id: str, node: Json, variables: Json) -> ResultView:
    await client.subscribe({sub_id: subscription(node, variables, WINDOW_S, lateness_s=WINDOW_S)})
    creation = await client.creation(sub_id, timeout=120)
    assert creation["type"] == "success", creation
    view = ResultView(WINDOW_NS)
    full = await client.update(sub_id, timeout=300)
    assert full["type"] == "full", full
    view.apply(full)
    return view


async def refused(client: Client, sub_id: str, node: Json, variables: Json) -> Json:
    await client.subscribe({sub_id: subscription(node, variables, WINDOW_S)})
    creation = await client.creation(sub_id, timeout=60)
    assert creation["type"] == "error", creation
    error: Json = creation["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:InvalidComputation", error
    return error["params"]


def snapshot(view: ResultView) -> dict[Any, Any]:
    return {k: [tuple(p) for p in pts] for k, (_, pts) in view.snapshot().items()}


@pytest.fixture
async def client(server: ServerProcess) -> Any:
    c = await Client.connect(server.ws_url)
    yield c
    await c.close()


async def test_derived_numeric_enum_and_range_series_compute_live(
    server: ServerProcess, client: Client
) -> None:
    r, t0, name = f"ri.test.modules.{uuid.uuid4().hex}", time.time_ns() - 60 * NANOS, f"m_{uuid.uuid4().hex}"
    xs = [(t0, 1.0), (t0 + NANOS, 2.0), (t0 + 2 * NANOS, 3.0)]
    await write_points(server.base_url, r, "x", xs)
    modes = [(t0, "idle"), (t0 + 2 * NANOS, "run")]
    await write_points(server.base_url, r, "mode", modes)

    created = await create_module(
        server.base_url,
        nm.CreateModuleRequest(api_name=name, title="Physics", description="test", definition=definition()),
    )
    assert created.version_metadata.version == "1" and created.metadata.api_name == name
    assert [f.name for f in created.definition.functions] == ["scaled", "above", "delayed"]

    variables = {"c": channel(r, "x")}
    scaled = derived(name, "scaled", "1", {"x": variable("c"), "k": double(3.0)})
    view = await subscribe(client, "num", numeric_node(sc.NumericSeries(derived=scaled)), variables)
    assert snapshot(view) == {(): [(t, 3 * v) for t, v in xs]}

    # a variable bound to the derived series, referenced twice: d + d
    as_variable = {**variables, "d": dict(enc(sc.VariableValue(derived=scaled)))}
    doubled = sc.NumericSeries(add=sc.Add(left=raw("d"), right=raw("d")))
    variable_view = await subscribe(client, "var", numeric_node(doubled), as_variable)
    assert snapshot(variable_view) == {(): [(t, 6 * v) for t, v in xs]}

    above = derived(name, "above", "1", {"x": variable("c"), "level": double(1.5)})
    ranges_view = await subscribe(client, "rng", ranges_node(sc.RangeSeries(derived=above)), variables)
    assert snapshot(ranges_view) == {(): [(t0 + NANOS, float("inf"))]}

    one_second = sc.FunctionParameterValue(
        value=sc.VariableValue(duration=scout_run_api.Duration(seconds=1, nanos=0))
    )
    enum_args = {
        "e": sc.FunctionParameterValue(
            value=sc.VariableValue(
                channel=sc.ChannelSeries(
                    data_source=sc.DataSourceChannel(
                        data_source_rid=lit(r),
                        channel=lit("mode"),
                        tags={},
                        tags_to_group_by=[],
                        group_by_tags=[],
                    )
                )
            )
        ),
        "d": one_second,
    }
    delayed = derived(name, "delayed", "1", enum_args)
    enum_view = await subscribe(client, "enm", enum_node(sc.EnumSeries(derived=delayed)), {})
    assert snapshot(enum_view) == {(): [(t + NANOS, v) for t, v in modes]}

    # live: a new point reaches every derived subscription, and the merged frames equal a fresh
    # FullResult of the same computation
    await write_points(server.base_url, r, "x", [(t0 + 3 * NANOS, 1.0)])
    await write_points(server.base_url, r, "mode", [(t0 + 3 * NANOS, "stop")])
    for sub_id, v, node, vs in (
        ("num", view, numeric_node(sc.NumericSeries(derived=scaled)), variables),
        ("var", variable_view, numeric_node(doubled), as_variable),
        ("rng", ranges_view, ranges_node(sc.RangeSeries(derived=above)), variables),
        ("enm", enum_view, enum_node(sc.EnumSeries(derived=delayed)), {}),
    ):
        update = await client.update(sub_id, timeout=120)
        assert update["type"] == "append", update
        v.apply(update)
        fresh = await subscribe(client, f"{sub_id}-fresh", node, vs)
        assert snapshot(v) == snapshot(fresh), sub_id
    assert snapshot(view) == {(): [(t, 3 * v) for t, v in [*xs, (t0 + 3 * NANOS, 1.0)]]}
    assert snapshot(ranges_view) == {(): [(t0 + NANOS, t0 + 3 * NANOS)]}


async def test_versions_arguments_archiving_and_search(server: ServerProcess, client: Client) -> None:
    r, t0, name = f"ri.test.modules.{uuid.uuid4().hex}", time.time_ns() - 60 * NANOS, f"m_{uuid.uuid4().hex}"
    xs = [(t0, 1.0), (t0 + NANOS, 2.0)]
    await write_points(server.base_url, r, "x", xs)
    created = await create_module(
        server.base_url,
        nm.CreateModuleRequest(api_name=name, title="Physics", description="test", definition=definition()),
    )
    rid = created.metadata.rid
    variables = {"c": channel(r, "x")}
    v1 = numeric_node(
        sc.NumericSeries(derived=derived(name, "scaled", "1", {"x": variable("c"), "k": double(2.0)}))
    )
    pinned = await subscribe(client, "v1", v1, variables)
    assert snapshot(pinned) == {(): [(t, 2 * v) for t, v in xs]}

    # an update is a new version: the subscription pinned to version 1 goes on (its next frame is an
    # append of version 1's answer), version 2 computes the new body, and batch-get finds both
    update = nm.UpdateModuleRequest(
        title="Physics 2", description="plus ten", definition=definition(plus=10.0)
    )
    response = await http_call("PUT", f"{server.base_url}/scout/v2/module/{rid}", enc(update))
    assert response.status_code == 200, response.text
    assert DECODER.decode(response.json(), nm.Module).version_metadata.version == "2"
    await write_points(server.base_url, r, "x", [(t0 + 2 * NANOS, 5.0)])
    append = await client.update("v1", timeout=120)
    assert append["type"] == "append", append
    pinned.apply(append)
    assert snapshot(pinned) == {(): [(t, 2 * v) for t, v in [*xs, (t0 + 2 * NANOS, 5.0)]]}
    v2 = numeric_node(
        sc.NumericSeries(derived=derived(name, "scaled", "2", {"x": variable("c"), "k": double(2.0)}))
    )
    latest = await subscribe(client, "v2", v2, variables)
    assert snapshot(latest) == {(): [(t, 2 * v + 10) for t, v in [*xs, (t0 + 2 * NANOS, 5.0)]]}
    [newest] = await batch_get(server.base_url, name, None)
    [first] = await batch_get(server.base_url, name, "1")
    assert (newest.version_metadata.version, first.version_metadata.version) == ("2", "1")
    assert newest.metadata.title == "Physics 2" and first.definition == created.definition

    # every argument is checked against the function's parameters, and refused by name
    def scaled(
        args: dict[str, sc.FunctionParameterValue], function: str = "scaled", version: str = "1"
    ) -> Json:
        return numeric_node(sc.NumericSeries(derived=derived(name, function, version, args)))

    cases: dict[str, tuple[Json, Json]] = {
        "missing": (scaled({"x": variable("c")}), {"field": "functionArgs.k", "parameter": "k"}),
        "extra": (
            scaled({"x": variable("c"), "k": double(1.0), "z": double(1.0)}),
            {"field": "functionArgs.z", "parameter": "z"},
        ),
        "wrong-type": (
            scaled({"x": variable("c"), "k": sc.FunctionParameterValue(value=sc.VariableValue(string="a"))}),
            {
                "field": "functionArgs.k",
                "parameter": "k",
                "parameterType": "DOUBLE_CONSTANT",
                "argument": "string",
            },
        ),
        "unknown-function": (
            scaled({}, function="nope"),
            {"field": "functionName", "moduleName": name, "moduleVersion": "1", "functionName": "nope"},
        ),
        "unknown-version": (
            scaled({}, version="9"),
            {"field": "versionReference", "moduleName": name, "moduleVersion": "9", "latestVersion": "2"},
        ),
        "ranges-as-numeric": (
            scaled({"x": variable("c"), "level": double(1.0)}, function="above"),
            {"field": "functionName", "moduleName": name, "functionName": "above", "functionNode": "ranges"},
        ),
    }
    for sub_id, (node, params) in cases.items():
        assert await refused(client, sub_id, node, variables) == {
            "invalidTypes": "",
            "variant": "derived",
            **params,
        }

    # archiving ends the live subscriptions over the module, naming it; search leaves it out
    # until asked for archived modules; unarchiving makes it computable again
    response = await http_call(
        "POST",
        f"{server.base_url}/scout/v2/module/archive",
        enc(nm.BatchArchiveModulesRequest(requests=[rid])),
    )
    assert response.status_code == 200, response.text
    for sub_id in ("v1", "v2"):
        while (frame := await client.update(sub_id, timeout=120))["type"] != "error":
            pass
        error = frame["error"]["serializableError"]
        assert error["params"] == {
            "invalidTypes": "",
            "variant": "derived",
            "field": "moduleName",
            "moduleName": name,
            "moduleRid": rid,
        }, error
    search = nm.SearchModulesRequest(query=nm.SearchModulesQuery(search_text=name), page_size=10)
    response = await http_call("POST", f"{server.base_url}/scout/v2/module/search", enc(search))
    assert DECODER.decode(response.json(), nm.SearchModulesResponse).results == []
    search = nm.SearchModulesRequest(
        query=nm.SearchModulesQuery(search_text=name),
        page_size=10,
        archived_statuses=[api.ArchivedStatus.ARCHIVED, api.ArchivedStatus.NOT_ARCHIVED],
    )
    response = await http_call("POST", f"{server.base_url}/scout/v2/module/search", enc(search))
    [found] = DECODER.decode(response.json(), nm.SearchModulesResponse).results
    assert (
        found.metadata.rid == rid and found.metadata.archived_at is not None and found.latest.version == "2"
    )
    response = await http_call(
        "POST",
        f"{server.base_url}/scout/v2/module/unarchive",
        enc(nm.BatchUnarchiveModulesRequest(requests=[rid])),
    )
    assert response.json() == {"unarchivedModuleRids": [rid]}
    assert snapshot(await subscribe(client, "again", v1, variables)) == {
        (): [(t, 2 * v) for t, v in [*xs, (t0 + 2 * NANOS, 5.0)]]
    }

    # Nominal's own errors for a bad module
    taken = await http_call(
        "POST",
        f"{server.base_url}/scout/v2/module",
        enc(nm.CreateModuleRequest(api_name=name, title="t", description="", definition=definition())),
    )
    assert (taken.status_code, taken.json()["errorName"]) == (409, "Module:ModuleNameConflict")
    bad_name = await http_call(
        "POST",
        f"{server.base_url}/scout/v2/module",
        enc(nm.CreateModuleRequest(api_name="1bad", title="t", description="", definition=definition())),
    )
    assert (bad_name.status_code, bad_name.json()["errorName"]) == (400, "Module:InvalidModuleApiName")
    missing = await http_call(
        "PUT", f"{server.base_url}/scout/v2/module/ri.scout.main.module.nope", enc(update)
    )
    assert (missing.status_code, missing.json()["errorName"]) == (404, "Module:ModuleRidsNotFound")
    # a function node that is no Nominal node is refused when the module is made, naming the function
    broken = enc(
        nm.CreateModuleRequest(api_name=f"{name}_b", title="t", description="", definition=definition())
    )
    broken["definition"]["functions"][0]["functionNode"]["numeric"] = {"type": "multiply", "multiply": {}}
    refused_body = await http_call("POST", f"{server.base_url}/scout/v2/module", broken)
    assert refused_body.status_code == 400, refused_body.text
    assert refused_body.json()["parameters"] == {"functionName": "scaled"}


async def test_the_python_client_makes_modules_and_derived_series(
    server: ServerProcess, client: Client
) -> None:
    r, t0, name = f"ri.test.modules.{uuid.uuid4().hex}", time.time_ns() - 60 * NANOS, f"m_{uuid.uuid4().hex}"
    xs = [(t0, 1.0), (t0 + NANOS, 2.5)]
    await write_points(server.base_url, r, "x", xs)
    modules = Modules(server.base_url)
    body = numeric_parameter("x") * 2.0 + 1.0
    created = await asyncio.to_thread(
        modules.create, name, "t", [function("twice", {"x": "NUMERIC_SERIES"}, body)]
    )
    assert DECODER.decode(created, nm.Module).version_metadata.version == "1"
    assert (await asyncio.to_thread(modules.by_name, name))["metadata"] == created["metadata"]
    assert (await asyncio.to_thread(modules.get, created["metadata"]["rid"], "1")) == created
    assert [s["metadata"]["apiName"] for s in await asyncio.to_thread(modules.search, name)] == [name]
    computable = client_nodes.series(derived_numeric(name, "twice", "1", {"x": numeric_channel(r, "x")}))
    view = await subscribe(client, "py", computable.json, dict(computable.variables))
    assert snapshot(view) == {(): [(t, 2 * v + 1) for t, v in xs]}


SECRET = "test-secret-that-is-long-enough-for-hs256"


async def test_modules_need_a_token_and_admin_to_change_and_survive_kill_9(tmp_path: Any) -> None:
    env = {"SPARKWIRE_JWT_SECRET": SECRET}
    server = start_server(tmp_path / "data", tmp_path / "a.log", env=env, own_process_group=True)
    admin = make_jwt(SECRET, ["*"], 3600, sub="ops", admin=True)
    reader = make_jwt(SECRET, ["ri.open.*"], 3600, sub="car")
    request = nm.CreateModuleRequest(
        api_name="physics", title="Physics", description="", definition=definition()
    )
    try:
        no_token = await http_call("POST", f"{server.base_url}/scout/v2/module/batch-get", {"requests": []})
        assert no_token.status_code == 401, no_token.text
        not_admin = await http_call("POST", f"{server.base_url}/scout/v2/module", enc(request), reader)
        assert not_admin.status_code == 403, not_admin.text
        created = await create_module(server.base_url, request, admin)
        assert created.metadata.created_by.endswith("ops")
        [read] = await batch_get(server.base_url, "physics", None, reader)
        assert read.metadata.rid == created.metadata.rid
        paths = httpx.get(f"{server.base_url}/openapi.json").json()["paths"]
        assert "post" in paths["/scout/v2/module"] and "put" in paths["/scout/v2/module/{moduleRid}"]
        assert {"/scout/v2/module/batch-get", "/scout/v2/module/search", "/scout/v2/module/archive"} <= set(
            paths
        )

        as_admin = httpx.AsyncClient(base_url=server.base_url, headers={"Authorization": f"Bearer {admin}"})
        async with as_admin:
            await write_points(
                server.base_url, "ri.open.a", "x", [(time.time_ns() - NANOS, 4.0)], client=as_admin
            )
        server.kill_all()
        server = start_server(tmp_path / "data", tmp_path / "b.log", env=env, own_process_group=True)
        [after] = await batch_get(server.base_url, "physics", "1", reader)
        assert enc(after) == enc(created)
        ws = await Client.connect(server.ws_url, additional_headers={"Authorization": f"Bearer {reader}"})
        try:
            node = numeric_node(
                sc.NumericSeries(
                    derived=derived("physics", "scaled", "1", {"x": variable("c"), "k": double(0.5)})
                )
            )
            view = await subscribe(ws, "after-restart", node, {"c": channel("ri.open.a", "x")})
            assert [v for _, v in snapshot(view)[()]] == [2.0]
        finally:
            await ws.close()
    finally:
        server.kill_all()
