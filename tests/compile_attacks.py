"""Requests that cost the compiler far more than their size (issue 44, findings 1, 4, 5 and 13),
shared by tests/unit/test_compile_budget.py (the compiler alone) and
tests/hostile/test_compile_budget.py (a real server)."""

from __future__ import annotations

from typing import Any

Json = Any


def lit(s: str) -> Json:
    return {"type": "literal", "literal": s}


def channel(rid: str, name: str = "x") -> Json:
    source = {"dataSourceRid": lit(rid), "channel": lit(name), "tags": {}}
    return {"type": "channel", "channel": {"type": "dataSource", "dataSource": source}}


def summarize(numeric: Json) -> Json:
    return {
        "type": "series",
        "series": {"input": {"type": "numeric", "numeric": numeric}, "numericAggregations": {}},
    }


def raw(name: str) -> Json:
    return {"type": "raw", "raw": {"name": name}}


# -- finding 1: datasetReferences doubling at each level ---------------------------------------------
def doubling_datasets(rid: str, levels: int) -> tuple[Json, dict[str, Json]]:
    """`d_i = combine([reference d_{i-1}, reference d_{i-1}])`, d_0 a saved dataset of `rid`, read
    with `selectNumeric(d_levels)`: 2^levels resolutions, in a few hundred bytes per level."""
    references: dict[str, Json] = {"d0": {"type": "saved", "saved": {"rid": lit(rid)}}}
    for i in range(1, levels + 1):
        ref = {"type": "reference", "reference": {"name": lit(f"d{i - 1}")}}
        references[f"d{i}"] = {"type": "combine", "combine": {"inputs": [ref, ref]}}
    dataset = {"type": "reference", "reference": {"name": lit(f"d{levels}")}}
    node = summarize({"type": "selectNumeric", "selectNumeric": {"dataset": dataset, "name": lit("x")}})
    return node, references


# -- finding 13: a chain of computeNode variables ----------------------------------------------------
def compute_node_chain(rid: str, length: int) -> tuple[Json, dict[str, Json]]:
    """v_0 a channel, v_i = computeNode(abs(v_{i-1})): nesting `length` deep through variables."""
    variables: dict[str, Json] = {"v0": channel(rid)}
    for i in range(1, length + 1):
        node = {"type": "numeric", "numeric": {"type": "abs", "abs": {"x": raw(f"v{i - 1}")}}}
        variables[f"v{i}"] = {
            "type": "computeNode",
            "computeNode": {"seriesNode": node, "context": {"variables": {}}},
        }
    return summarize(raw(f"v{length}")), variables


# -- finding 5: a deep `arithmetic` expression -----------------------------------------------------
def arithmetic(expression: str) -> Json:
    """`arithmetic` over one input `x` (the variable `x`)."""
    return summarize(
        {"type": "arithmetic", "arithmetic": {"inputs": {"x": raw("x")}, "expression": expression}}
    )


def nested_expression(depth: int) -> str:
    """`x+x+...+x`: a left-deep tree `depth` levels deep, without parentheses (Python's parser
    refuses more than 200 nested ones)."""
    return "x" + "+x" * (depth - 1)


# -- finding 4: module functions fanning out twice per level ------------------------------------------
def function(name: str, parameters: dict[str, str], node: Json) -> Json:
    return {
        "name": name,
        "description": "",
        "parameters": [{"name": n, "type": t} for n, t in parameters.items()],
        "functionNode": {"type": "numeric", "numeric": node},
        "isExported": True,
    }


def applied(module: str, name: str, args: dict[str, Json], version: str = "1") -> Json:
    """`NumericSeries.derived`: `module` v`version`'s function `name` applied to `args`."""
    body = {
        "moduleName": lit(module),
        "functionName": lit(name),
        "versionReference": {"type": "pinned", "pinned": {"version": lit(version)}},
        "functionArgs": args,
    }
    return {"type": "derived", "derived": {"type": "function", "function": body}}


def fan_out_functions(module: str, levels: int) -> list[Json]:
    """f0(x) = abs(x); f_i(x) = f_{i-1}(x) + f_{i-1}(x): applying f_levels expands 2^levels
    functions, each defined in one line."""
    param = {"x": "NUMERIC_SERIES"}
    args = {"x": {"type": "variable", "variable": "x"}}
    out = [function("f0", param, {"type": "abs", "abs": {"x": raw("x")}})]
    for i in range(1, levels + 1):
        inner = applied(module, f"f{i - 1}", args)
        out.append(function(f"f{i}", param, {"type": "add", "add": {"left": inner, "right": inner}}))
    return out


def apply_top(module: str, levels: int, rid: str) -> Json:
    """A subscription's node applying f_levels to a channel."""
    return summarize(applied(module, f"f{levels}", {"x": {"type": "value", "value": channel(rid)}}))


def self_applying_functions(module: str) -> list[Json]:
    """loop(x) = loop(x), and ping(x) = pong(x), pong(x) = ping(x)."""
    param = {"x": "NUMERIC_SERIES"}
    args = {"x": {"type": "variable", "variable": "x"}}
    return [
        function("loop", param, applied(module, "loop", args)),
        function("ping", param, applied(module, "pong", args)),
        function("pong", param, applied(module, "ping", args)),
    ]
