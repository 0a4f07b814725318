"""Edits of the asset and run catalog reach a connection's live subscriptions (app/protocol/ws_session.py
`catalog_changed`), without a server: a subscription that resolved through the edited asset or run
is compiled again and moved to its new resolution's computation, or ends with the error its creation
would get now; one that did not read it, or resolves as before, is left alone. Dataset references
(`Context.datasetReferences`) and the Context fields Sparkwire refuses are compiled here too."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from app.protocol.ws_session import SessionConfig, StartSubscription, StopSubscription
from compute.evaluation.compiler.builder import UNHONOURED_CONTEXT
from compute.evaluation.compiler.catalogs import Catalogs
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.errors import ComputeError, MalformedNode
from compute.evaluation.request import ComputationRequest
from compute.storage.assets import Asset, DataScope, Run
from schemas.client import Context
from tests.unit.test_nominal_names import conjure_ir
from tests.unit.test_session import (
    at,
    creation,
    error_update,
    new_session,
    of_type,
    principal,
    sent,
    subscribe,
)
from tests.wire import series_node, subscription

pytestmark = pytest.mark.unit

ASSET = "ri.scout.main.asset.a"
OTHER_ASSET = "ri.scout.main.asset.b"
RUN = "ri.scout.main.run.r"
MINE, ALSO_MINE, THEIRS = "ri.session.one", "ri.session.two", "ri.elsewhere.three"


class Catalog:
    """The catalog plans resolve against, edited in place by the tests."""

    def __init__(self) -> None:
        self.assets_by_rid: dict[str, Asset] = {
            ASSET: Asset(ASSET, "car", [DataScope("main", MINE, {"car": "a1"})], {"fleet": "x"}),
            OTHER_ASSET: Asset(OTHER_ASSET, "stand", [DataScope("main", ALSO_MINE)]),
        }
        self.runs_by_rid: dict[str, Run] = {RUN: Run(RUN, "lap", [ASSET], 0, None)}

    def asset(self, rid: str) -> Asset | None:
        return self.assets_by_rid.get(rid)

    def run(self, rid: str) -> Run | None:
        return self.runs_by_rid.get(rid)

    def assets(self) -> list[Asset]:
        return [self.assets_by_rid[r] for r in sorted(self.assets_by_rid)]

    def runs(self) -> list[Run]:
        return [self.runs_by_rid[r] for r in sorted(self.runs_by_rid)]


@pytest.fixture
def catalog() -> Catalog:
    return Catalog()


def over_catalog(catalog: Catalog) -> SessionConfig:
    """A session whose plans look up `catalog`."""
    return SessionConfig(catalogs=Catalogs(assets=catalog))


def lit(value: str) -> dict[str, Any]:
    return {"type": "literal", "literal": value}


def scope_channel(kind: str, rid: str) -> dict[str, Any]:
    body = {
        f"{kind}Rid": lit(rid),
        "dataScopeName": lit("main"),
        "channel": lit("speed"),
        "additionalTags": {},
        "tagsToGroupBy": [],
        "groupByTags": [],
    }
    return {"type": "channel", "channel": {"type": kind, kind: body}}


def over(variable: dict[str, Any]) -> dict[str, Any]:
    return subscription(series_node(), {"x": variable}, 60)


def searched(fleet: str) -> dict[str, Any]:
    query = {"type": "properties", "properties": {"name": "fleet", "values": [fleet]}}
    target = {"type": "assets", "assets": {"query": query}}
    dataset = {"type": "search", "search": {"target": target}}
    select = {"name": lit("speed"), "dataset": dataset}
    return over({"type": "series", "series": {"select": select, "groupByTags": []}})


def at_time() -> Any:
    return at(2)


def started(actions: list[Any]) -> StartSubscription:
    [start] = of_type(actions, StartSubscription)
    return start


def test_an_asset_edit_moves_its_subscriptions_to_the_new_resolution(catalog: Catalog) -> None:
    session = new_session(config=over_catalog(catalog))
    first = subscribe(session, {"a": over(scope_channel("asset", ASSET))})
    assert creation(sent(first)[0], "a")["type"] == "success"
    before = started(first)
    assert [s.data_source_rid for s in before.plan.selectors] == [MINE]

    catalog.assets_by_rid[ASSET] = replace(
        catalog.assets_by_rid[ASSET], data_scopes=[DataScope("main", ALSO_MINE)]
    )
    actions = session.catalog_changed("asset", ASSET, at_time())
    after = started(actions)
    assert sent(actions) == []  # no creation frame: the subscription goes on, its FullResult follows
    assert after.subscription_id == "a" and after.resume_token is None
    assert [(s.data_source_rid, s.tags) for s in after.plan.selectors] == [(ALSO_MINE, ())]
    assert after.key != before.key  # a computation of its own, not the old one found by its key
    assert of_type(actions, StopSubscription) == []  # the old one is let go once the new one attaches


def test_edits_that_do_not_change_a_resolution_leave_it_alone(catalog: Catalog) -> None:
    session = new_session(config=over_catalog(catalog))
    subscribe(session, {"a": over(scope_channel("asset", ASSET))})
    assert session.catalog_changed("asset", OTHER_ASSET, at_time()) == []  # it never read that asset
    catalog.assets_by_rid[ASSET] = replace(catalog.assets_by_rid[ASSET], title="renamed")
    assert session.catalog_changed("asset", ASSET, at_time()) == []  # a title resolves nothing


def test_a_search_re_resolves_when_any_asset_of_its_kind_changes(catalog: Catalog) -> None:
    session = new_session(config=over_catalog(catalog))
    first = started(subscribe(session, {"s": searched("x")}))
    assert [s.data_source_rid for s in first.plan.selectors] == [MINE]
    catalog.assets_by_rid[OTHER_ASSET] = replace(
        catalog.assets_by_rid[OTHER_ASSET], properties={"fleet": "x"}
    )
    after = started(session.catalog_changed("asset", OTHER_ASSET, at_time()))
    assert sorted(s.data_source_rid for s in after.plan.selectors) == [MINE, ALSO_MINE]
    assert session.catalog_changed("run", RUN, at_time()) == []  # it searched assets, not runs


def test_a_deleted_asset_or_an_ended_run_ends_the_subscription_with_its_creation_error(
    catalog: Catalog,
) -> None:
    session = new_session(config=over_catalog(catalog))
    subscribe(session, {"a": over(scope_channel("asset", ASSET)), "r": over(scope_channel("run", RUN))})

    catalog.runs_by_rid[RUN] = replace(catalog.runs_by_rid[RUN], end_ns=10)
    actions = session.catalog_changed("run", RUN, at_time())
    assert [a.subscription_id for a in of_type(actions, StopSubscription)] == ["r"]
    error = error_update(sent(actions)[0], "r")
    assert error["name"] == "PersistentCompute:InvalidComputation"
    assert error["params"] == {"invalidTypes": "RUN_WITH_FIXED_END", "rid": RUN}
    assert session.live == ["a"]

    del catalog.assets_by_rid[ASSET]
    actions = session.catalog_changed("asset", ASSET, at_time())
    assert [a.subscription_id for a in of_type(actions, StopSubscription)] == ["a"]
    error = error_update(sent(actions)[0], "a")
    assert error["params"] == {"invalidTypes": "", "variant": "asset", "rid": ASSET}
    assert session.live == []
    assert session.catalog_changed("asset", ASSET, at_time()) == []  # nothing left to tell


def test_an_edit_to_a_data_source_the_token_does_not_reach_is_permission_denied(catalog: Catalog) -> None:
    session = new_session(principal("ri.session.*"), config=over_catalog(catalog))
    subscribe(session, {"a": over(scope_channel("asset", ASSET))})
    catalog.assets_by_rid[ASSET] = replace(
        catalog.assets_by_rid[ASSET], data_scopes=[DataScope("main", THEIRS)]
    )
    actions = session.catalog_changed("asset", ASSET, at_time())
    assert of_type(actions, StartSubscription) == []
    error = error_update(sent(actions)[0], "a")
    # the asset now stands on no data source the token reaches: it is refused by its rid, which the
    # token named, not by the data sources behind it, which are another tenant's (catalog_reach.py)
    assert error["name"] == "PersistentCompute:PermissionDenied" and error["params"] == {"rids": ASSET}
    assert THEIRS not in error["message"]
    assert session.live == []


def test_a_replay_keeps_the_resolution_it_started_with(catalog: Catalog) -> None:
    session = new_session(config=over_catalog(catalog))
    replay = over(scope_channel("asset", ASSET))
    period = {"start": {"seconds": 1_799_999_000, "nanos": 0}, "end": {"seconds": 1_799_999_100, "nanos": 0}}
    replay["sparkwire"] = {"replay": period}
    assert started(session.receive(_raw_subscribe({"p": replay}), at_time())).replay is not None
    catalog.assets_by_rid[ASSET] = replace(
        catalog.assets_by_rid[ASSET], data_scopes=[DataScope("main", ALSO_MINE)]
    )
    assert session.catalog_changed("asset", ASSET, at_time()) == []


# -- Context.datasetReferences and the Context fields refused by name ----------------------------------
def saved(rid: str) -> dict[str, Any]:
    return {"type": "saved", "saved": {"rid": lit(rid)}}


def reference(name: str) -> dict[str, Any]:
    return {"type": "reference", "reference": {"name": lit(name)}}


def select_numeric(dataset: dict[str, Any]) -> dict[str, Any]:
    numeric = {"type": "selectNumeric", "selectNumeric": {"name": lit("speed"), "dataset": dataset}}
    return {
        "type": "series",
        "series": {"input": {"type": "numeric", "numeric": numeric}, "numericAggregations": {}},
    }


def compiled(
    node: dict[str, Any], references: dict[str, Any], variables: dict[str, Any] | None = None
) -> Any:
    return compile_plan(node, 60 * 10**9, variables or {}, Limits(), ResultOptions(), references)


def test_a_dataset_reference_resolves_from_the_context_and_inner_contexts_win() -> None:
    plan = compiled(select_numeric(reference("d")), {"d": saved(MINE), "e": reference("d")})
    assert [s.data_source_rid for s in plan.selectors] == [MINE]
    plan = compiled(select_numeric(reference("e")), {"d": saved(MINE), "e": reference("d")})
    assert [s.data_source_rid for s in plan.selectors] == [MINE]
    # a computeNode variable's own context binds `d` anew inside it
    inner = {
        "type": "computeNode",
        "computeNode": {
            "seriesNode": {
                "type": "numeric",
                "numeric": select_numeric(reference("d"))["series"]["input"]["numeric"],
            },
            "context": {"variables": {}, "datasetReferences": {"d": saved(ALSO_MINE)}},
        },
    }
    node = {
        "type": "series",
        "series": {
            "input": {"type": "numeric", "numeric": {"type": "raw", "raw": {"name": "v"}}},
            "numericAggregations": {},
        },
    }
    plan = compiled(node, {"d": saved(MINE)}, {"v": inner})
    assert [s.data_source_rid for s in plan.selectors] == [ALSO_MINE]


def test_a_dataset_reference_that_cannot_resolve_is_refused_by_name() -> None:
    with pytest.raises(ComputeError) as unknown:
        compiled(select_numeric(reference("nope")), {"d": saved(MINE)})
    assert unknown.value.params == {"invalidTypes": "", "variant": "reference", "name": "nope"}
    assert "known: d" in str(unknown.value)
    with pytest.raises(ComputeError) as loop:
        compiled(select_numeric(reference("a")), {"a": reference("b"), "b": reference("a")})
    assert (loop.value.params["invalidTypes"], loop.value.params["variant"]) == ("", "reference")
    with pytest.raises(MalformedNode):  # not a Dataset at all: a bad message, even unreferenced
        compiled(select_numeric(saved(MINE)), {"d": {"type": "nonsense", "nonsense": {}}})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("defaultFillStrategy", {"type": "forwardFill", "forwardFill": {}}),
        ("defaultAlignmentStrategy", {"type": "union", "union": {}}),
        ("resolveAssetsThroughDatasets", True),
        ("functionVariables", {"f": {"variables": {"x": {"type": "double", "double": 1.0}}}}),
    ],
)
def test_context_fields_that_change_the_answer_are_refused_by_name(field: str, value: Any) -> None:
    session = new_session()
    sub = over(scope_channel("asset", ASSET))
    sub["computeRequest"]["context"][field] = value
    actions = session.receive(_raw_subscribe({"c": sub}), at_time())
    result = creation(sent(actions)[0], "c")
    assert result["type"] == "error"
    error = result["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:InvalidComputation" and error["params"] == {
        "invalidTypes": "",
        "variant": field,
    }


def _raw_subscribe(subs: dict[str, Any]) -> str:
    """Sent as is: nominal-api's Context has these fields, the test's subscription helper not."""
    return json.dumps({"type": "subscribe", "subscribe": subs})


def test_every_field_of_nominal_apis_context_is_read() -> None:
    """Each field of nominal-api's Context is decoded by the server (none dropped unseen), and each
    is honoured or in the table of those refused by name."""
    ir = conjure_ir()
    fields = {f["fieldName"] for f in ir[("io.nominal.scout.compute.api", "Context")]["fields"]}
    assert fields == {f.alias for f in Context.model_fields.values()}
    handled = {"variables", "datasetReferences", "applyDataScopeOffsets"}
    assert fields == handled | set(UNHONOURED_CONTEXT)


def test_a_request_with_references_and_a_resolution_travels_to_the_compute_tier_unchanged(
    catalog: Catalog,
) -> None:
    """An edge sends the request as JSON and the compute tier keys it by what it reads back
    (app/tiers/): the references and the resolution come through, and the key is the same."""
    node = select_numeric(reference("d"))
    request = ComputationRequest(node, 60 * 10**9, {}, None, ResultOptions(), {"d": saved(MINE)})
    plan = request.compile(Limits(), catalogs=Catalogs(assets=catalog))
    assert plan.catalog is None and request.resolved(plan).key == request.key  # reads no asset
    over_asset = {"d": {"type": "asset", "asset": {"rid": lit(ASSET)}}}
    request = ComputationRequest(node, 60 * 10**9, {}, None, ResultOptions(), over_asset)
    plan = request.compile(Limits(), catalogs=Catalogs(assets=catalog))
    assert plan.catalog is not None and plan.catalog.rids == {ASSET}
    resolved = request.resolved(plan)
    again = ComputationRequest.from_json(resolved.to_json())
    assert again == resolved and again.key == resolved.key != request.key
    assert [
        s.data_source_rid for s in again.compile(Limits(), catalogs=Catalogs(assets=catalog)).selectors
    ] == [MINE]
    plain = ComputationRequest(node, 60 * 10**9, {}, None)
    assert ComputationRequest.from_json(plain.to_json()) == plain  # the older form reads back too
