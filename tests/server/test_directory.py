"""The directory of live computations (docs/extensions.md): `GET /computations` and
`GET /computations/{id}` against the real server with real subscriptions, its Conjure 404, the
`admin` claim when authentication is on, the OpenAPI document, and the dashboard's page in
Chromium."""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest
from playwright.async_api import Page, expect

from tests.conftest import ServerProcess, start_server
from tests.server.test_end_to_end import subscribe_one, unique_rid
from tests.wire import NANOS, Client, channel_variable, series_node, subscription, write_points

WINDOW_S = 3600.0
SECRET = "directory-test-secret-long-enough-for-hs256"
ADMIN_TOKEN = "static-admin-token"
PLAIN_TOKEN = "static-plain-token"


def entries_reading(directory: list[dict[str, Any]], rid: str) -> list[dict[str, Any]]:
    return [e for e in directory if any(s["dataSourceRid"] == rid for s in e["series"])]


async def directory_until(
    base_url: str, rid: str, check: Any, timeout: float = 30, headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The entries reading `rid` once `check(entries)` holds."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=base_url, headers=headers) as http:
        while True:
            response = await http.get("/computations")
            assert response.status_code == 200, response.text
            entries = entries_reading(response.json(), rid)
            if check(entries):
                return entries
            assert time.monotonic() < deadline, f"the directory never got there: {entries}"
            await asyncio.sleep(0.2)


async def test_the_directory_lists_and_describes_live_computations(server: ServerProcess) -> None:
    rid = unique_rid("directory")
    now = time.time_ns()
    points = [(now - 30 * NANOS + i * NANOS, float(i)) for i in range(10)]
    await write_points(server.base_url, rid, "p", points)
    variables = {"x": channel_variable(rid, "p")}
    shared = subscription(series_node(), variables, WINDOW_S, lateness_s=5)
    bucketed = subscription(series_node(buckets=4), variables, 600)
    a, b = await Client.connect(server.ws_url), await Client.connect(server.ws_url)
    try:
        a_id, _ = await subscribe_one(a, shared)
        b_id, _ = await subscribe_one(b, shared)  # the same computation, from another connection
        b2_id, _ = await subscribe_one(b, shared)  # and a second subscription on that connection
        await subscribe_one(a, bucketed)

        # Two dropped as late (two minutes old against 5 s of allowed lateness).
        late = [(time.time_ns() - 120 * NANOS + i, 5.0) for i in range(2)]
        await write_points(server.base_url, rid, "p", late)
        entries = await directory_until(
            server.base_url, rid, lambda es: len(es) == 2 and all(e["late"]["droppedPoints"] == 2 for e in es)
        )
        assert len(entries) == 2
        raw = next(e for e in entries if e["window"] == {"seconds": 3600, "nanos": 0})
        buckets = next(e for e in entries if e is not raw)

        assert len(raw["id"]) == 12 and int(raw["id"], 16) >= 0
        assert raw["id"] != buckets["id"]
        assert raw["nodeKind"] == buckets["nodeKind"] == "series"
        assert raw["series"] == [{"dataSourceRid": rid, "channel": "p", "tags": {}, "groupByTags": []}]
        assert raw["seriesRouted"] == 1
        assert raw["allowedLateness"] == {"seconds": 5, "nanos": 0}
        assert buckets["window"] == {"seconds": 600, "nanos": 0} and buckets["allowedLateness"] is None
        assert raw["state"] == buckets["state"] == "live" and raw["error"] is None
        assert (raw["subscribers"], raw["connections"]) == (3, 2)
        assert (buckets["subscribers"], buckets["connections"]) == (1, 1)
        assert raw["pointsHeld"] == {"window": 10, "output": 10}  # the late two are not held
        assert buckets["pointsHeld"]["window"] == 10 and 1 <= buckets["pointsHeld"]["output"] <= 4
        updated = datetime.datetime.fromisoformat(raw["lastUpdate"])
        assert abs(updated.timestamp() - time.time()) < 60
        newest_late = late[-1][0]
        assert raw["late"] == {
            "droppedPoints": 2,
            "newestDroppedTimestamp": {"seconds": newest_late // NANOS, "nanos": newest_late % NANOS},
            "byDataSource": {rid: 2},
        }
        # No allowed lateness: 100 ms behind the series' newest point, which they are far behind too.
        assert buckets["late"]["droppedPoints"] == 2 and buckets["late"]["byDataSource"] == {rid: 2}
        assert isinstance(raw["lag"]["points"], int) and raw["lag"]["points"] >= 0
        assert raw["lag"]["appliedSeq"] > 0

        async with httpx.AsyncClient(base_url=server.base_url) as http:
            one = (await http.get(f"/computations/{raw['id']}")).json()
            assert {k: v for k, v in one.items() if k not in ("key", "subscriptions")}.keys() == raw.keys()
            assert one["id"] == raw["id"] and one["subscribers"] == 3
            key = json.loads(one["key"])  # node, window, context, lateness, result options
            assert key[0]["series"]["input"] == series_node()["series"]["input"]
            assert key[1] == 3600 * NANOS and key[3] == 5 * NANOS
            assert sorted(s["subscriptionId"] for s in one["subscriptions"]) == sorted([a_id, b_id, b2_id])
            assert len({s["connection"] for s in one["subscriptions"]}) == 2

            missing = await http.get("/computations/000000000000")
            assert missing.status_code == 404
            error = missing.json()
            assert error["errorCode"] == "NOT_FOUND" and error["errorName"] == "Default:NotFound"
            assert error["parameters"] == {"id": "000000000000"}
    finally:
        await a.close()
        await b.close()
    # Nobody subscribes any more: they leave the directory.
    await directory_until(server.base_url, rid, lambda es: es == [])


async def test_the_openapi_document_describes_the_directory(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        document = (await http.get("/openapi.json")).json()
    listing = document["paths"]["/computations"]["get"]
    one = document["paths"]["/computations/{computation_id}"]["get"]
    assert listing["responses"]["200"]["content"]["application/json"]["schema"] == {
        "type": "array",
        "items": {"$ref": "#/components/schemas/ComputationEntry"},
        "title": "Response List Computations Computations Get",
    }
    assert one["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ComputationDetail"
    }
    conjure = {"$ref": "#/components/schemas/ConjureError"}
    assert one["responses"]["404"]["content"]["application/json"]["schema"] == conjure
    assert listing["responses"]["403"]["content"]["application/json"]["schema"] == conjure
    entry = document["components"]["schemas"]["ComputationEntry"]["properties"]
    for field in ("id", "nodeKind", "series", "window", "subscribers", "connections", "pointsHeld"):
        assert field in entry
    for field in ("lastUpdate", "late", "lag"):
        assert field in entry
    assert "ConjureError" in document["components"]["schemas"]


# -- authentication on --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with tokens; the directory's checks need no Spark, so it is not waited for."""
    base = tmp_path_factory.mktemp("directory-auth")
    tokens = base / "tokens.json"
    entries = [
        {"token": ADMIN_TOKEN, "sub": "operator", "dataSourceRids": [], "admin": True},
        {"token": PLAIN_TOKEN, "sub": "viewer", "dataSourceRids": ["*"]},
    ]
    tokens.write_text(json.dumps({"tokens": entries}))
    env = {"SPARKWIRE_JWT_SECRET": SECRET, "SPARKWIRE_TOKENS_FILE": str(tokens)}
    proc = start_server(base / "data", base / "server.log", env=env, ready_path="/healthz")
    yield proc
    proc.stop()


def _jwt(**claims: Any) -> str:
    return jwt.encode({"sub": "j", "exp": int(time.time()) + 600, **claims}, SECRET, algorithm="HS256")


def test_the_directory_needs_the_admin_claim_when_authentication_is_on(secured: ServerProcess) -> None:
    def get(path: str, token: str | None) -> httpx.Response:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        return httpx.get(f"{secured.base_url}{path}", headers=headers, timeout=10)

    for path in ("/computations", "/computations/000000000000"):
        missing = get(path, None)
        assert missing.status_code == 401 and missing.json()["errorCode"] == "UNAUTHORIZED"
        assert missing.headers["WWW-Authenticate"] == "Bearer"
        for token in (PLAIN_TOKEN, _jwt(dataSourceRids=["*"]), _jwt(admin=False)):
            denied = get(path, token)
            assert denied.status_code == 403, denied.text
            body = denied.json()
            assert body["errorCode"] == "PERMISSION_DENIED"
            assert body["errorName"] == "Default:PermissionDenied"
            assert body["parameters"] == {"claim": "admin"}
        assert get(path, _jwt(admin="yes")).status_code == 401  # a malformed claim: a bad token
    for token in (ADMIN_TOKEN, _jwt(admin=True)):
        listing = get("/computations", token)
        assert listing.status_code == 200 and listing.json() == []
        assert get("/computations/000000000000", token).status_code == 404


# -- the dashboard's page --------------------------------------------------------------------------
async def test_the_dashboard_page_shows_the_directory_and_keeps_it_fresh(
    server: ServerProcess, page: Page
) -> None:
    rid = unique_rid("dir-page")
    await write_points(server.base_url, rid, "p", [(time.time_ns() - i * NANOS, float(i)) for i in range(5)])
    sub = subscription(series_node(), {"x": channel_variable(rid, "p")}, WINDOW_S)
    a, b = await Client.connect(server.ws_url), await Client.connect(server.ws_url)
    try:
        await subscribe_one(a, sub)
        (entry,) = await directory_until(server.base_url, rid, lambda es: len(es) == 1)

        await page.set_viewport_size({"width": 1300, "height": 700})  # the table's columns
        await page.goto(f"{server.base_url}/")  # linked from the main page
        await page.click("text=computations")
        await page.wait_for_url(f"{server.base_url}/dashboard/computations.html")
        row = page.locator(f'#computations tr[data-id="{entry["id"]}"]')
        await expect(row).to_have_count(1, timeout=15_000)
        await expect(row.locator('[data-field="series"]')).to_have_text(f"{rid} / p")
        await expect(row.locator('[data-field="nodeKind"]')).to_have_text("series")
        await expect(row.locator('[data-field="window"]')).to_have_text("60 min")
        await expect(row.locator('[data-field="state"]')).to_have_text("live")
        await expect(row.locator('[data-field="subscribers"]')).to_have_text("1")
        await expect(row.locator('[data-field="pointsHeld"]')).to_have_text("5 in / 5 out")

        # A second subscriber appears on the page by itself (it refreshes every few seconds).
        await subscribe_one(b, sub)
        await expect(row.locator('[data-field="subscribers"]')).to_have_text("2", timeout=15_000)
        await expect(row.locator('[data-field="connections"]')).to_have_text("2")
        published = await page.evaluate("() => window.sparkwireDirectory")
        assert published["error"] is None and published["refreshes"] >= 2
    finally:
        await a.close()
        await b.close()
    row = page.locator(f'#computations tr[data-id="{entry["id"]}"]')
    await expect(row).to_have_count(0, timeout=15_000)  # gone once nobody subscribes
