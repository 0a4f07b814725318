"""The compile budget (compute/evaluation/compiler/limits.py `CompileBudget`), no server: every expansion
step is charged before it recurses, so requests whose expansion is exponential or deep are refused
after a bounded amount of work, by name; requests within it compile as before. The same requests on
a real server: tests/hostile/test_compile_budget.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from compute.evaluation.compiler.builders import derived as compile_derived
from compute.evaluation.compiler.catalogs import NO_CATALOGS, Catalogs
from compute.evaluation.compiler.limits import CompileBudget, Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.errors import ComputeError
from compute.storage.modules import ModuleStore
from tests.compile_attacks import (
    apply_top,
    arithmetic,
    channel,
    compute_node_chain,
    doubling_datasets,
    fan_out_functions,
    nested_expression,
    self_applying_functions,
)

pytestmark = pytest.mark.unit
WINDOW = 60 * 10**9
RID = "ri.budget.a"
NODES = {"limit": "5000", "setting": "SPARKWIRE_MAX_COMPILE_NODES"}
DEPTH = {"limit": "100", "setting": "SPARKWIRE_MAX_COMPILE_DEPTH"}


def compiled(
    node: Any,
    variables: dict[str, Any] | None = None,
    references: Any = None,
    catalogs: Catalogs = NO_CATALOGS,
    **kw: Any,
) -> Any:
    return compile_plan(
        node, WINDOW, variables or {}, Limits(**kw), ResultOptions(), references, catalogs=catalogs
    )


def refusal(
    node: Any,
    variables: dict[str, Any] | None = None,
    references: Any = None,
    catalogs: Catalogs = NO_CATALOGS,
) -> tuple[ComputeError, float]:
    started = time.perf_counter()
    with pytest.raises(ComputeError) as refused:
        compiled(node, variables, references, catalogs)
    return refused.value, time.perf_counter() - started


@pytest.fixture
def store(tmp_path: Path) -> ModuleStore:
    return ModuleStore(tmp_path / "modules.sqlite")


def test_the_budget_counts_steps_and_nesting() -> None:
    budget = CompileBudget(max_nodes=3, max_depth=2)
    with budget, budget:
        assert (budget.nodes, budget.depth) == (2, 2)
        with pytest.raises(ComputeError) as deep, budget:
            pass
    assert deep.value.params == {"limit": "2", "setting": "SPARKWIRE_MAX_COMPILE_DEPTH"}
    assert budget.depth == 0  # every level left again
    with pytest.raises(ComputeError) as many:
        budget.charge()
    assert many.value.name == "ComputationTooComplex"
    assert many.value.params == {"limit": "3", "setting": "SPARKWIRE_MAX_COMPILE_NODES"}


def test_doubling_dataset_references_stop_at_the_budget_not_at_2_to_the_n() -> None:
    for levels in (12, 20, 40):
        error, elapsed = refusal(*doubling_datasets(RID, levels)[:1], None, doubling_datasets(RID, levels)[1])
        assert (error.name, error.params) == ("ComputationTooComplex", NODES)
        assert elapsed < 1.0, (levels, elapsed)  # the same work whatever N: ~5,000 steps
    node, references = doubling_datasets(RID, 8)  # 256 branches: within the budget, compiled
    assert len(compiled(node, None, references).selectors) == 256


def test_the_budget_is_a_setting() -> None:
    node, references = doubling_datasets(RID, 8)
    with pytest.raises(ComputeError) as refused:
        compiled(node, None, references, max_compile_nodes=100)
    assert refused.value.params == {"limit": "100", "setting": "SPARKWIRE_MAX_COMPILE_NODES"}


def test_a_token_is_refused_at_its_first_read_of_a_data_source_it_does_not_reach() -> None:
    node, references = doubling_datasets("ri.budget.theirs", 20)
    reads: list[str] = []

    def may_read(rid: str) -> bool:
        reads.append(rid)
        return rid == RID

    with pytest.raises(ComputeError) as refused:
        compile_plan(node, WINDOW, {}, Limits(), ResultOptions(), references, may_read)
    assert refused.value.name == "PermissionDenied"
    assert refused.value.params == {"rids": "ri.budget.theirs"}
    assert reads == ["ri.budget.theirs"]  # nothing expanded past the first leaf


def test_deep_chains_of_compute_node_variables_are_refused_by_depth() -> None:
    for length in (150, 2000):
        error, elapsed = refusal(*compute_node_chain(RID, length))
        assert (error.name, error.params) == ("ComputationTooComplex", DEPTH)
        assert elapsed < 1.0
    assert compiled(*compute_node_chain(RID, 30)).selectors  # about 33 levels of variables fit


def test_deep_expressions_are_refused_without_recursing() -> None:
    x = {"x": channel(RID)}
    error, _ = refusal(arithmetic(nested_expression(900)), x)
    assert (error.name, error.params) == ("ComputationTooComplex", DEPTH)
    error, _ = refusal(arithmetic(nested_expression(5000)), x)  # deeper than Python's parser nests
    assert error.name == "InvalidComputation" and error.params["field"] == "expression"
    assert "nested too deeply" in error.message
    error, _ = refusal(arithmetic("-" * 5000 + "x"), x)
    assert error.name == "InvalidComputation" and "nested too deeply" in error.message
    error, _ = refusal(arithmetic("x**" * 3000 + "x"), x)  # the parser's stack: a MemoryError inside
    assert error.name == "InvalidComputation" and "nested too deeply" in error.message
    assert compiled(arithmetic(nested_expression(60)), x).selectors  # a sum of 60 terms is fine


def test_an_expression_counts_its_operators_in_the_budget() -> None:
    x = {"x": channel(RID)}
    with pytest.raises(ComputeError) as refused:
        compiled(arithmetic("x+x+x+x+x+x"), x, None, max_compile_nodes=8)
    assert refused.value.params == {"limit": "8", "setting": "SPARKWIRE_MAX_COMPILE_NODES"}
    assert compiled(arithmetic("x+x+x+x+x+x"), x, None, max_compile_nodes=30).selectors


def test_a_module_fanning_out_is_refused_at_the_budget(store: ModuleStore) -> None:
    store.create("fan", "fan", "", {"functions": fan_out_functions("fan", 15)}, "u", 1)
    error, elapsed = refusal(apply_top("fan", 15, RID), catalogs=Catalogs(modules=store))
    assert (error.name, error.params) == ("ComputationTooComplex", NODES)
    assert elapsed < 1.0
    plan = compiled(
        apply_top("fan", 4, RID), catalogs=Catalogs(modules=store)
    )  # 2^4 applications: a small computation
    assert len(plan.selectors) == 16  # a channel argument is read where each application reads it


def test_a_cycle_in_a_definition_is_found_before_it_is_stored(store: ModuleStore) -> None:
    assert compile_derived.definition_cycle(store, "m", 1, self_applying_functions("m")) == [
        "m v1 loop",
        "m v1 loop",
    ]
    mutual = [f for f in self_applying_functions("m") if f["name"] != "loop"]
    assert compile_derived.definition_cycle(store, "m", 1, mutual) == ["m v1 ping", "m v1 pong", "m v1 ping"]
    assert compile_derived.definition_cycle(store, "m", 1, fan_out_functions("m", 15)) is None
    # another version of the same name is another function: v2 applying v1's loop is no cycle
    assert compile_derived.definition_cycle(store, "m", 2, self_applying_functions("m")[:1]) is None
    # through a stored module: other v1 g applies m v2 f, and m v2 f applies other v1 g
    args = {"x": {"type": "variable", "variable": "x"}}
    from tests.compile_attacks import applied, function

    g = function("g", {"x": "NUMERIC_SERIES"}, applied("m", "f", args, version="2"))
    store.create("other", "other", "", {"functions": [g]}, "u", 1)
    f = function("f", {"x": "NUMERIC_SERIES"}, applied("other", "g", args))
    assert compile_derived.definition_cycle(store, "m", 2, [f]) == ["m v2 f", "other v1 g", "m v2 f"]


def test_a_refreshed_token_of_the_same_reach_compiles_nothing_on_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """updateToken is handled on the event loop: only a token of another reach compiles the
    subscriptions that resolved through the catalog again (every one of them, up to the budget)."""
    from app.protocol.ws_session import Session, SessionConfig
    from tests.unit.test_catalog_edits import ASSET, Catalog, over, scope_channel
    from tests.unit.test_session import at, new_session, principal, subscribe, update_token

    # the session's plans look up the test's catalog
    same, narrower = principal("ri.session.*"), principal("ri.session.one")
    config = SessionConfig(catalogs=Catalogs(assets=Catalog()))
    session = new_session(
        principal("ri.session.*"), config=config, tokens={"same": same, "narrower": narrower}
    )
    subscribe(session, {"a": over(scope_channel("asset", ASSET))})
    compiles: list[str] = []
    real = Session._compile

    def counted(self: Session, sub: Any) -> Any:
        compiles.append("c")
        return real(self, sub)

    monkeypatch.setattr(Session, "_compile", counted)
    session.receive(update_token("same"), at(2))
    assert compiles == []
    session.receive(update_token("narrower"), at(3))
    assert compiles == ["c"]


def test_a_large_variable_referenced_often_is_written_out_once() -> None:
    """A computeNode variable with 15,000 variables of its own (a 760 KB message), referenced by
    2,000 inputs: each reference wrote the variable out as JSON for its key (150 s measured), now
    once (0.1 s)."""
    filler = {f"f{i}": {"type": "double", "double": 1.0} for i in range(15_000)}
    abs_x = {
        "type": "numeric",
        "numeric": {"type": "abs", "abs": {"x": {"type": "raw", "raw": {"name": "x"}}}},
    }
    big = {"type": "computeNode", "computeNode": {"seriesNode": abs_x, "context": {"variables": filler}}}
    inputs = {f"i{k}": {"type": "raw", "raw": {"name": "big"}} for k in range(2_000)}
    node = arithmetic("i0")
    node["series"]["input"]["numeric"]["arithmetic"]["inputs"] = inputs
    started = time.perf_counter()
    assert compiled(node, {"x": channel(RID), "big": big}).selectors
    assert time.perf_counter() - started < 5.0


def test_compiling_stops_at_its_cpu_time_limit() -> None:
    node, references = doubling_datasets(RID, 8)
    with pytest.raises(ComputeError) as refused:
        compiled(node, None, references, max_compile_seconds=1e-9)
    assert refused.value.name == "ComputationTooComplex"
    assert refused.value.params == {"limit": "1e-09", "setting": "SPARKWIRE_MAX_COMPILE_SECONDS"}


def test_combining_a_dataset_of_many_branches_charges_each_branch() -> None:
    """The doubling references over an asset of 1,000 data scopes: a few steps, but each combine
    copies every branch (2 s of CPU, to the time limit, before each branch was charged)."""
    from compute.storage.assets import Asset, DataScope

    asset = Asset("ri.budget.asset", "big", [DataScope(f"s{i}", RID, {"k": str(i)}) for i in range(1000)], {})

    class OneAsset:
        def asset(self, rid: str) -> Asset | None:
            return asset if rid == asset.rid else None

        def run(self, rid: str) -> None:
            return None

        def assets(self) -> list[Asset]:
            return [asset]

        def runs(self) -> list[Any]:
            return []

    # the plan looks up the one asset
    node, references = doubling_datasets(RID, 12)
    references["d0"] = {"type": "asset", "asset": {"rid": {"type": "literal", "literal": asset.rid}}}
    started = time.thread_time()
    with pytest.raises(ComputeError) as refused:
        compiled(node, None, references, Catalogs(assets=OneAsset()))
    assert refused.value.params == NODES
    assert time.thread_time() - started < 0.5
