"""`derived` series resolved against a module store (compute/evaluation/compiler/builders/derived.py), no
server: a function's scope, nested functions, self-application, and where a function's node type
does not fit. The wire and the live behaviour are tested on a real server (tests/server/test_modules.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compute.evaluation.compiler.builders import derived as compile_derived
from compute.evaluation.compiler.catalogs import NO_CATALOGS, Catalogs
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.errors import ComputeError
from compute.storage.modules import ModuleStore

pytestmark = pytest.mark.unit
Json = Any
WINDOW = 60 * 10**9


def lit(s: str) -> Json:
    return {"type": "literal", "literal": s}


def raw(name: str) -> Json:
    return {"type": "raw", "raw": {"name": name}}


def constant_variable(name: str) -> Json:
    return {
        "type": "constant",
        "constant": {"type": "double", "double": {"type": "variable", "variable": name}},
    }


def function(name: str, parameters: dict[str, str], kind: str, node: Json) -> Json:
    return {
        "name": name,
        "description": "",
        "parameters": [{"name": n, "type": t} for n, t in parameters.items()],
        "functionNode": {"type": kind, kind: node},
        "isExported": True,
    }


def derived(module: str, name: str, args: dict[str, Json], version: str = "1") -> Json:
    body = {
        "moduleName": lit(module),
        "functionName": lit(name),
        "versionReference": {"type": "pinned", "pinned": {"version": lit(version)}},
        "functionArgs": args,
    }
    return {"type": "function", "function": body}


def channel(rid: str) -> Json:
    source = {"dataSourceRid": lit(rid), "channel": lit("x"), "tags": {}}
    return {"type": "channel", "channel": {"type": "dataSource", "dataSource": source}}


def summarize(numeric: Json) -> Json:
    return {
        "type": "series",
        "series": {"input": {"type": "numeric", "numeric": numeric}, "numericAggregations": {}},
    }


@pytest.fixture
def store(tmp_path: Path) -> ModuleStore:
    return ModuleStore(tmp_path / "modules.sqlite")


def plan(node: Json, variables: dict[str, Json], catalogs: Catalogs = NO_CATALOGS) -> Any:
    """The node compiled over `variables`, its modules looked up in `catalogs`."""
    return compile_plan(node, WINDOW, variables, Limits(), ResultOptions(), catalogs=catalogs)


def test_a_function_sees_only_its_parameters_and_arguments_close_over_the_callers_scope(
    store: ModuleStore,
) -> None:
    # the body names `c`, which is not a parameter: the caller's `c` must not leak in
    leaky = function(
        "leaky",
        {"x": "NUMERIC_SERIES"},
        "numeric",
        {"type": "add", "add": {"left": raw("x"), "right": raw("c")}},
    )
    scaled = function(
        "scaled",
        {"x": "NUMERIC_SERIES", "k": "DOUBLE_CONSTANT"},
        "numeric",
        {"type": "multiply", "multiply": {"left": raw("x"), "right": constant_variable("k")}},
    )
    store.create("m", "m", "", {"functions": [leaky, scaled]}, "u", 1)
    callers = {"c": channel("ri.a"), "k2": {"type": "double", "double": 2.0}}
    with pytest.raises(ComputeError) as leak:
        plan(
            summarize(
                {
                    "type": "derived",
                    "derived": derived("m", "leaky", {"x": {"type": "variable", "variable": "c"}}),
                }
            ),
            callers,
            Catalogs(modules=store),
        )
    assert leak.value.params["variable"] == "c"

    # a computeNode argument reads the caller's variables; a derived argument's own `variable`
    # arguments are the caller's too: scaled(scaled(c, k2), k2) reads ri.a once
    inner = {
        "type": "derived",
        "derived": derived(
            "m",
            "scaled",
            {"x": {"type": "variable", "variable": "c"}, "k": {"type": "variable", "variable": "k2"}},
        ),
    }
    outer = derived(
        "m", "scaled", {"x": {"type": "value", "value": inner}, "k": {"type": "variable", "variable": "k2"}}
    )
    built = plan(summarize({"type": "derived", "derived": outer}), callers, Catalogs(modules=store))
    assert [s.data_source_rid for s in built.selectors] == ["ri.a"]
    assert "Constant(value=2.0)" in repr(built.root) and repr(built.root).count("ChannelInput") == 1


def test_a_function_applying_itself_is_refused(store: ModuleStore) -> None:
    loop = function(
        "loop",
        {"x": "NUMERIC_SERIES"},
        "numeric",
        {"type": "derived", "derived": derived("m", "loop", {"x": {"type": "variable", "variable": "x"}})},
    )
    store.create("m", "m", "", {"functions": [loop]}, "u", 1)
    with pytest.raises(ComputeError) as refused:
        plan(
            summarize(
                {
                    "type": "derived",
                    "derived": derived("m", "loop", {"x": {"type": "value", "value": channel("ri.a")}}),
                }
            ),
            {},
            Catalogs(modules=store),
        )
    assert refused.value.params == {
        "invalidTypes": "",
        "variant": "derived",
        "field": "functionName",
        "moduleName": "m",
        "functionName": "loop",
    }
    assert "applies itself" in refused.value.message


def test_a_derived_variable_must_compute_what_its_reader_reads(store: ModuleStore) -> None:
    enum = function("mode", {"e": "ENUM_SERIES"}, "enum", raw("e"))
    store.create("m", "m", "", {"functions": [enum]}, "u", 1)
    variables = {
        "d": {
            "type": "derived",
            "derived": derived("m", "mode", {"e": {"type": "value", "value": channel("ri.a")}}),
        }
    }
    with pytest.raises(ComputeError) as refused:
        plan(summarize(raw("d")), variables, Catalogs(modules=store))
    assert refused.value.params == {
        "invalidTypes": "",
        "variant": "derived",
        "variable": "d",
        "field": "functionName",
        "functionNode": "enum",
    }
    enum_summary = {
        "type": "series",
        "series": {"input": {"type": "enum", "enum": raw("d")}, "numericAggregations": {}},
    }
    assert [s.data_source_rid for s in plan(enum_summary, variables, Catalogs(modules=store)).selectors] == [
        "ri.a"
    ]


def test_an_archived_module_and_a_version_not_a_number_are_refused_by_name(store: ModuleStore) -> None:
    module, _ = store.create(
        "m", "m", "", {"functions": [function("f", {}, "numeric", raw("nothing"))]}, "u", 1
    )
    with pytest.raises(ComputeError) as not_a_number:
        plan(
            summarize({"type": "derived", "derived": derived("m", "f", {}, version="1.0.0")}),
            {},
            Catalogs(modules=store),
        )
    assert not_a_number.value.params["field"] == "versionReference"
    store.set_archived([module.rid], 5)
    with pytest.raises(ComputeError) as archived:
        plan(summarize({"type": "derived", "derived": derived("m", "f", {})}), {}, Catalogs(modules=store))
    assert archived.value.params == {
        "invalidTypes": "",
        "variant": "derived",
        "field": "moduleName",
        "moduleName": "m",
        "moduleRid": module.rid,
    }


def test_a_function_node_is_checked_on_its_own_for_what_no_argument_can_mend() -> None:
    good = {"type": "multiply", "multiply": {"left": raw("x"), "right": constant_variable("k")}}
    parameters = {"x": "NUMERIC_SERIES", "k": "DOUBLE_CONSTANT"}
    assert compile_derived.malformation("numeric", good, parameters) is None
    broken = {"type": "multiply", "multiply": {"left": raw("x")}}
    assert "right is required" in str(compile_derived.malformation("numeric", broken, parameters))
    assert "unknown variant" in str(compile_derived.malformation("numeric", {"type": "nope", "nope": {}}, {}))
    # a node that is refused for its arguments' sake (here: no parameter `y`) is left to the subscription
    assert compile_derived.malformation("numeric", raw("y"), parameters) is None


def test_a_ranges_parameter_takes_a_derived_range_series(store: ModuleStore) -> None:
    above = function(
        "above",
        {"x": "NUMERIC_SERIES"},
        "ranges",
        {
            "type": "threshold",
            "threshold": {
                "input": raw("x"),
                "threshold": {"type": "literal", "literal": 1.0},
                "operator": "GREATER_THAN",
            },
        },
    )
    outside = function(
        "outside", {"r": "RANGES_SERIES"}, "ranges", {"type": "not", "not": {"input": raw("r")}}
    )
    store.create("m", "m", "", {"functions": [above, outside]}, "u", 1)
    inner = {
        "type": "derived",
        "derived": derived("m", "above", {"x": {"type": "variable", "variable": "c"}}),
    }
    node = {"type": "derived", "derived": derived("m", "outside", {"r": {"type": "value", "value": inner}})}
    built = plan(
        {"type": "ranges", "ranges": {"input": node}}, {"c": channel("ri.a")}, Catalogs(modules=store)
    )
    assert [s.data_source_rid for s in built.selectors] == ["ri.a"]
    assert "NotRanges(input=Threshold(" in repr(built.root)
