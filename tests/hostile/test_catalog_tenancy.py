"""Issue 44, finding 10: the catalogs (assets, runs, modules) are tenant data. Any token used to list
every tenant's assets, runs and modules, and a subscription of tenant B over `selectNumericProperty`
of tenant A's asset returned A's values (no data-source check applies to a query that reads no
channel). Now an entry is seen only by the tokens that reach the data sources behind it
(compute/storage/catalog_reach.py): at every HTTP route (an entry out of reach is answered as one
that does not exist) and through every node that reads the catalog (a named asset or run out of
reach is PermissionDenied naming its rid; a search never finds it; a module is not found), also when
a catalog edit re-resolves a live subscription.

One server with authentication on: tokens of tenants A and B, A's operator (an admin token whose
data sources are A's: what it creates is A's) and the operators' admin (`*`)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import jwt
import pytest
from nominal_api import module as nm
from nominal_api import scout_compute_api as sc
from nominal_api import scout_rids_api

from compute.evaluation.request import ComputationRequest
from compute.storage.catalog_reach import Reach
from tests.client_view import ResultView
from tests.conftest import ServerProcess, start_server
from tests.hostile import make_jwt
from tests.server.test_modules import channel, definition, derived, double, enc, variable
from tests.server.test_nominal_datasets import (
    WINDOW_S,
    next_error,
    numeric_node,
    points,
    saved,
    select,
    series_var,
)
from tests.server.test_property_selectors import asset_ds, numeric_property, run_ds, times
from tests.wire import NANOS, Client, subscription, write_points

SECRET = "catalog-tenancy-secret-long-enough-for-hs256"
TENANT = uuid.uuid4().hex[:10]
A_PREFIX, B_PREFIX = f"ri.test.tenant-a.{TENANT}.", f"ri.test.tenant-b.{TENANT}."
A_SOURCE, B_SOURCE = A_PREFIX + "car", B_PREFIX + "car"
SITE = f"site-{TENANT}"  # a string property both tenants' assets share: what a search matches
Json = dict[str, Any]


def token(patterns: list[str], admin: bool = False, sub: str = "reader") -> str:
    if not admin:
        return make_jwt(SECRET, patterns, 3600, sub=sub)
    claims = {"sub": sub, "dataSourceRids": patterns, "admin": True, "exp": int(time.time()) + 3600}
    return jwt.encode(claims, SECRET, algorithm="HS256")


ADMIN = token(["*"], admin=True, sub="ops")
A_OPS = token([A_PREFIX + "*"], admin=True, sub="a-ops")
READER_A = token([A_PREFIX + "*"], sub="a")
READER_B = token([B_PREFIX + "*"], sub="b")


def headers(tok: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tok}"}


@pytest.fixture(scope="module")
def tenancy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("catalog-tenancy")
    proc = start_server(base / "data", base / "server.log", env={"SPARKWIRE_JWT_SECRET": SECRET})
    yield proc
    proc.stop()
    assert "Traceback" not in proc.log_text(), proc.log_text()[-4000:]


def call(server: ServerProcess, tok: str, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(method, server.base_url + path, json=body, headers=headers(tok), timeout=60)


def made(response: httpx.Response) -> Json:
    assert response.status_code == 200, response.text
    created: Json = response.json()
    return created


def scope(source: str) -> Json:
    return {"dataScopeName": "main", "dataSourceRid": source, "seriesTags": {}}


def gain(value: float) -> Json:
    return {"gain": {"type": "numericValue", "numericValue": value}}


@pytest.fixture(scope="module")
def catalog(tenancy: ServerProcess) -> dict[str, Json]:
    """What the admin made: an asset of each tenant (sharing a string property), a run of A through
    its asset only and a run of B through its own scope, and an asset standing on no data source."""
    start = {"seconds": int(time.time()) - 3600}
    asset_a = made(
        call(
            tenancy,
            ADMIN,
            "POST",
            "/assets/v1/assets",
            {"title": "A's car", "dataScopes": [scope(A_SOURCE)], "properties": {"site": SITE}}
            | {"typedProperties": gain(2.5)},
        )
    )
    asset_b = made(
        call(
            tenancy,
            ADMIN,
            "POST",
            "/assets/v1/assets",
            {"title": "B's car", "dataScopes": [scope(B_SOURCE)], "properties": {"site": SITE}}
            | {"typedProperties": gain(-1.0)},
        )
    )
    run_a = made(
        call(
            tenancy,
            ADMIN,
            "POST",
            "/assets/v1/runs",
            {"title": "A's lap", "assetRids": [asset_a["rid"]], "start": start, "typedProperties": gain(7.0)},
        )
    )
    run_b = made(
        call(
            tenancy,
            ADMIN,
            "POST",
            "/assets/v1/runs",
            {"title": "B's lap", "start": start, "dataScopes": [scope(B_SOURCE)]},
        )
    )
    nowhere = made(call(tenancy, ADMIN, "POST", "/assets/v1/assets", {"title": "nowhere", "dataScopes": []}))
    return {"asset_a": asset_a, "asset_b": asset_b, "run_a": run_a, "run_b": run_b, "nowhere": nowhere}


def rids(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {entry["rid"] for entry in response.json()}


# -- HTTP: assets and runs ------------------------------------------------------------------------
def test_assets_and_runs_are_seen_only_by_the_tokens_that_reach_their_data(
    tenancy: ServerProcess, catalog: dict[str, Json]
) -> None:
    a, b = catalog["asset_a"]["rid"], catalog["asset_b"]["rid"]
    run_a, run_b, nowhere = catalog["run_a"]["rid"], catalog["run_b"]["rid"], catalog["nowhere"]["rid"]
    # lists
    assert rids(call(tenancy, READER_B, "GET", "/assets/v1/assets")) & {a, b, nowhere} == {b}
    assert rids(call(tenancy, READER_A, "GET", "/assets/v1/assets")) & {a, b, nowhere} == {a}
    assert rids(call(tenancy, ADMIN, "GET", "/assets/v1/assets")) >= {a, b, nowhere}
    assert rids(call(tenancy, READER_B, "GET", "/assets/v1/runs")) & {run_a, run_b} == {run_b}
    assert rids(call(tenancy, READER_A, "GET", "/assets/v1/runs")) & {run_a, run_b} == {run_a}  # by its asset
    assert rids(call(tenancy, ADMIN, "GET", "/assets/v1/runs")) >= {run_a, run_b}
    listed = (
        call(tenancy, READER_B, "GET", "/assets/v1/assets").text
        + call(tenancy, READER_B, "GET", "/assets/v1/runs").text
    )
    assert A_SOURCE not in listed and "2.5" not in listed

    # gets: another tenant's entry is answered exactly as a rid no entry has
    for what, theirs, mine in (("assets", a, b), ("runs", run_a, run_b)):
        unknown = call(tenancy, READER_B, "GET", f"/assets/v1/{what}/{theirs[:-4]}0000")
        hidden = call(tenancy, READER_B, "GET", f"/assets/v1/{what}/{theirs}")
        assert hidden.status_code == unknown.status_code == 404, hidden.text
        assert hidden.json()["errorName"] == unknown.json()["errorName"], hidden.text
        assert A_SOURCE not in hidden.text
        assert call(tenancy, READER_B, "GET", f"/assets/v1/{what}/{mine}").status_code == 200
        assert call(tenancy, READER_A, "GET", f"/assets/v1/{what}/{theirs}").status_code == 200
        assert call(tenancy, ADMIN, "GET", f"/assets/v1/{what}/{theirs}").status_code == 200
    assert call(tenancy, READER_A, "GET", f"/assets/v1/assets/{nowhere}").status_code == 404
    assert call(tenancy, ADMIN, "GET", f"/assets/v1/assets/{nowhere}").status_code == 200

    # changes need the admin claim: refused alike whether the entry exists or not
    for method, body in (("PUT", {"title": "mine now"}), ("DELETE", None)):
        hidden = call(tenancy, READER_B, method, f"/assets/v1/assets/{a}", body)
        unknown = call(tenancy, READER_B, method, f"/assets/v1/assets/{a[:-4]}0000", body)
        assert hidden.status_code == unknown.status_code == 403, hidden.text
        assert {**hidden.json(), "errorInstanceId": ""} == {**unknown.json(), "errorInstanceId": ""}
    assert call(tenancy, ADMIN, "GET", f"/assets/v1/assets/{a}").json()["title"] == "A's car"


# -- HTTP: modules --------------------------------------------------------------------------------
def create_module(server: ServerProcess, tok: str, name: str) -> Json:
    request = nm.CreateModuleRequest(api_name=name, title=name, description="", definition=definition())
    return made(call(server, tok, "POST", "/scout/v2/module", enc(request)))


def batch_get(server: ServerProcess, tok: str, name: str) -> httpx.Response:
    latest = {"type": "latest", "latest": {}}
    ref = {"type": "name", "name": {"apiName": name, "versionStrategy": latest}}
    return call(server, tok, "POST", "/scout/v2/module/batch-get", {"requests": [ref]})


def found_by_search(server: ServerProcess, tok: str) -> set[str]:
    body = {"query": {"type": "searchText", "searchText": TENANT}, "pageSize": 100}
    response = call(server, tok, "POST", "/scout/v2/module/search", body)
    assert response.status_code == 200, response.text
    return {r["metadata"]["apiName"] for r in response.json()["results"]}


@pytest.fixture(scope="module")
def modules(tenancy: ServerProcess) -> dict[str, Json]:
    """A module made by A's operator (A's) and one made by the operators' admin (everyone's)."""
    return {
        "a": create_module(tenancy, A_OPS, f"tenantA_{TENANT}"),
        "shared": create_module(tenancy, ADMIN, f"shared_{TENANT}"),
    }


async def test_a_tenants_modules_are_seen_only_by_its_tokens(
    tenancy: ServerProcess, modules: dict[str, Json]
) -> None:
    mine, shared = modules["a"]["metadata"], modules["shared"]["metadata"]
    assert found_by_search(tenancy, READER_B) == {shared["apiName"]}
    assert found_by_search(tenancy, READER_A) == {mine["apiName"], shared["apiName"]}
    assert found_by_search(tenancy, ADMIN) == {mine["apiName"], shared["apiName"]}

    nobody = f"nobody_{TENANT}"
    hidden, unknown = batch_get(tenancy, READER_B, mine["apiName"]), batch_get(tenancy, READER_B, nobody)
    assert hidden.status_code == unknown.status_code == 404, hidden.text
    assert hidden.json()["errorName"] == unknown.json()["errorName"] == "Module:ModulesNotFound"
    assert batch_get(tenancy, READER_A, mine["apiName"]).status_code == 200
    assert batch_get(tenancy, READER_B, shared["apiName"]).status_code == 200
    by_rid = call(tenancy, READER_B, "GET", f"/scout/v2/module/{mine['rid']}")
    assert by_rid.status_code == 404 and by_rid.json()["errorName"] == "Module:ModulesNotFound"
    assert call(tenancy, READER_A, "GET", f"/scout/v2/module/{mine['rid']}").status_code == 200
    assert call(tenancy, ADMIN, "GET", f"/scout/v2/module/{mine['rid']}").status_code == 200

    # a derived series over A's module: for B, no module has that name (as for one that does not exist)
    for tok, expect_found in ((READER_B, False), (READER_A, True)):
        source = B_SOURCE if tok == READER_B else A_SOURCE
        client = await Client.connect(tenancy.ws_url, additional_headers=headers(tok))
        try:
            for sub_id, module in (("theirs", mine["apiName"]), ("nobody", nobody)):
                applied = sc.NumericSeries(
                    derived=derived(module, "scaled", "1", {"x": variable("c"), "k": double(0.5)})
                )
                node = numeric_node(applied)
                await client.subscribe({sub_id: subscription(node, {"c": channel(source, "x")}, WINDOW_S)})
                creation = await client.creation(sub_id, timeout=120)
                if sub_id == "theirs" and expect_found:
                    assert creation["type"] == "success", creation
                    continue
                error = creation["error"]["serializableError"]
                assert error["name"] == "PersistentCompute:InvalidComputation", error
                assert error["params"]["field"] == "moduleName" and error["params"]["moduleName"] == module
        finally:
            await client.close()


# -- through the nodes that read the catalog -------------------------------------------------------
async def creation_error(client: Client, sub_id: str, node: Json, variables: Json | None = None) -> Json:
    await client.subscribe({sub_id: subscription(node, variables or {}, WINDOW_S)})
    creation = await client.creation(sub_id, timeout=120)
    assert creation["type"] == "error", creation
    error: Json = creation["error"]["serializableError"]
    return error


async def test_a_property_of_another_tenants_asset_or_run_is_permission_denied(
    tenancy: ServerProcess, catalog: dict[str, Json]
) -> None:
    t0 = time.time_ns() - 60 * NANOS
    async with httpx.AsyncClient(base_url=tenancy.base_url, headers=headers(ADMIN)) as http:
        await write_points(tenancy.base_url, B_SOURCE, "speed", [(t0, 1.0), (t0 + NANOS, 2.0)], client=http)
        await write_points(tenancy.base_url, A_SOURCE, "speed", [(t0, 10.0)], client=http)
    mine = sc.NumericSeries(select_numeric=select(saved(B_SOURCE), "speed"))
    client = await Client.connect(tenancy.ws_url, additional_headers=headers(READER_B))
    try:
        for sub_id, dataset, rid in (
            ("asset", asset_ds(catalog["asset_a"]["rid"]), catalog["asset_a"]["rid"]),
            ("run", run_ds(catalog["run_a"]["rid"]), catalog["run_a"]["rid"]),
        ):
            node = numeric_node(times(mine, numeric_property("gain", dataset)))
            error = await creation_error(client, f"their-{sub_id}", node)
            assert error["name"] == "PersistentCompute:PermissionDenied", error
            assert error["params"] == {"rids": rid}, error
            assert A_SOURCE not in str(error) and "2.5" not in str(error) and "7.0" not in str(error)

        # B's own asset: its property scales B's channel
        own = numeric_node(times(mine, numeric_property("gain", asset_ds(catalog["asset_b"]["rid"]))))
        await client.subscribe({"own": subscription(own, {}, WINDOW_S, lateness_s=WINDOW_S)})
        assert (await client.creation("own", timeout=120))["type"] == "success"
        full = await client.update("own", timeout=300)
        assert full["type"] == "full", full
        values = full["full"]["result"]["numeric"]["values"]
        assert values == [-1.0, -2.0], full
    finally:
        await client.close()

    # a token reaching both tenants reads B's channel scaled by A's property; its updateToken to B's
    # claim alone reads no data source of A's, but A's asset it may no longer see: the subscription ends
    both = token([A_PREFIX + "*", B_PREFIX + "*"], sub="both")
    client = await Client.connect(tenancy.ws_url, additional_headers=headers(both))
    try:
        theirs = numeric_node(times(mine, numeric_property("gain", asset_ds(catalog["asset_a"]["rid"]))))
        await client.subscribe({"narrowed": subscription(theirs, {}, WINDOW_S, lateness_s=WINDOW_S)})
        assert (await client.creation("narrowed", timeout=120))["type"] == "success"
        full = await client.update("narrowed", timeout=300)
        assert full["full"]["result"]["numeric"]["values"] == [2.5, 5.0], full
        await client.ws.send(json.dumps({"type": "updateToken", "updateToken": {"token": READER_B}}))
        error = await next_error(client, "narrowed")
        assert error["name"] == "PersistentCompute:PermissionDenied", error
        assert error["params"] == {"rids": catalog["asset_a"]["rid"]}, error
    finally:
        await client.close()


def search_assets() -> sc.Dataset:
    query = sc.ResourceSearchQuery(properties=scout_rids_api.PropertiesFilter(name="site", values=[SITE]))
    target = sc.SearchTarget(assets=sc.AssetsSearchTarget(query=query))
    return sc.Dataset(search=sc.SearchDataset(target=target, max_results=None))


async def next_update(client: Client, sub_id: str) -> Json:
    update: Json = await client.update(sub_id, timeout=300)
    return update


async def test_a_search_finds_only_the_tokens_own_entries_and_edits_do_not_leak(
    tenancy: ServerProcess, catalog: dict[str, Json]
) -> None:
    a, b = catalog["asset_a"]["rid"], catalog["asset_b"]["rid"]
    t0 = time.time_ns() - 30 * NANOS
    async with httpx.AsyncClient(base_url=tenancy.base_url, headers=headers(ADMIN)) as http:
        await write_points(tenancy.base_url, B_SOURCE, "level", [(t0, 3.0)], client=http)
        await write_points(tenancy.base_url, A_SOURCE, "level", [(t0, 30.0)], client=http)
    # Before: B's search found A's asset too (its data then refused by A's data source rid, naming it)
    found = {"s": series_var(select(search_assets(), "level"), ["ASSET_RID"])}
    ref = numeric_node(sc.NumericSeries(raw=sc.Reference(name="s")))
    property_of_b = numeric_node(
        times(
            sc.NumericSeries(select_numeric=select(saved(B_SOURCE), "level")),
            numeric_property("gain", asset_ds(b)),
        )
    )
    client = await Client.connect(tenancy.ws_url, additional_headers=headers(READER_B))
    try:
        await client.subscribe({"search": subscription(ref, found, WINDOW_S, lateness_s=WINDOW_S)})
        assert (await client.creation("search", timeout=120))["type"] == "success"
        view = ResultView(int(WINDOW_S * NANOS))
        full = await next_update(client, "search")
        assert full["type"] == "full", full
        view.apply(full)
        assert points(view) == {(("ASSET_RID", b),): [(t0, 3.0)]}

        await client.subscribe({"prop": subscription(property_of_b, {}, WINDOW_S, lateness_s=WINDOW_S)})
        assert (await client.creation("prop", timeout=120))["type"] == "success"
        assert (await next_update(client, "prop"))["type"] == "full"

        # A new asset of A that the search would match re-resolves B's search, which still finds B's only
        more_of_a = {"title": "A's second car", "dataScopes": [scope(A_SOURCE)], "properties": {"site": SITE}}
        made(call(tenancy, ADMIN, "POST", "/assets/v1/assets", more_of_a))
        await asyncio.sleep(2)
        async with httpx.AsyncClient(base_url=tenancy.base_url, headers=headers(READER_B)) as http:
            await write_points(tenancy.base_url, B_SOURCE, "level", [(t0 + NANOS, 4.0)], client=http)
        while True:  # the next update to carry B's new point: nothing of A's before or in it
            update = await next_update(client, "search")
            view.apply(update)
            assert all(dict(key).get("ASSET_RID") == b for key in view.snapshot()), update
            if (t0 + NANOS, 4.0) in points(view).get((("ASSET_RID", b),), []):
                break

        # B's asset moved onto A's data source: B's live subscription over it ends, refused by the
        # asset's rid (which B named), never by A's data source
        moved = call(tenancy, ADMIN, "PUT", f"/assets/v1/assets/{b}", {"dataScopes": [scope(A_SOURCE)]})
        assert moved.status_code == 200, moved.text
        error = await next_error(client, "prop")
        assert error["name"] == "PersistentCompute:PermissionDenied", error
        assert error["params"] == {"rids": b}, error
        assert A_SOURCE not in str(error)
        assert call(tenancy, READER_B, "GET", f"/assets/v1/assets/{b}").status_code == 404
        assert call(tenancy, READER_A, "GET", f"/assets/v1/assets/{b}").status_code == 200
        assert a != b
    finally:
        await client.close()
        call(tenancy, ADMIN, "PUT", f"/assets/v1/assets/{b}", {"dataScopes": [scope(B_SOURCE)]})


def test_a_search_carries_its_reach_to_the_compute_tier_and_into_its_key() -> None:
    """The compute tier compiles a request again from its JSON (app/tiers/compute.py): a search
    must find there what it found at the edge, so the reach travels with the request, and two
    tokens of different reach never share the computation of a search."""
    reach_a = Reach((A_PREFIX + "*",))
    request = ComputationRequest({"n": 1}, 10, {}, None, resolution="d1", reach=reach_a)
    again = ComputationRequest.from_json(request.to_json())
    assert again.reach == reach_a and again.key == request.key
    assert again.key != replace(request, reach=Reach((B_PREFIX + "*",))).key
    plain = ComputationRequest({"n": 1}, 10, {}, None, resolution="d1")  # no search: key as before
    assert ComputationRequest.from_json(plain.to_json()).reach is None
    assert plain.key == '[{"n":1},10,{},null,[false,true],{},"d1"]'
