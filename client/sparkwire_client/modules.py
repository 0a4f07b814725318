"""Nominal modules kept by Sparkwire (`/scout/v2/module`, Nominal's ModuleService), and the
`derived` series that apply their functions.

    modules = Modules("http://127.0.0.1:8000", token=admin_token)
    v = numeric_parameter("v")
    modules.create("physics", "Physics", [function("squared", {"v": "NUMERIC_SERIES"}, v * v)])
    speed2 = derived_numeric("physics", "squared", "1", {"v": numeric_channel("ri.demo", "speed")})

Calls are synchronous (the standard library's HTTP client); a refusal raises `CatalogError` with
the server's Conjure error body. Creating, updating, archiving and unarchiving need a token with
the `admin` claim. An update makes a new version; a derived series pins one."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from sparkwire_client.assets import JsonService
from sparkwire_client.nodes import EnumSeries, NumericSeries, RangeSeries

Json = dict[str, Any]
Argument = NumericSeries | EnumSeries | float | int | str


def function(
    name: str,
    parameters: Mapping[str, str],
    body: NumericSeries | EnumSeries | RangeSeries,
    description: str = "",
) -> Json:
    """A module `Function`: `parameters` maps each name to its ValueType (NUMERIC_SERIES,
    DOUBLE_CONSTANT, ...); `body` refers to them as variables (`nodes.variable(name)` and friends)."""
    kind = (
        "numeric" if isinstance(body, NumericSeries) else "enum" if isinstance(body, EnumSeries) else "ranges"
    )
    return {
        "name": name,
        "description": description,
        "parameters": [{"name": n, "type": t} for n, t in parameters.items()],
        "functionNode": {"type": kind, kind: body.json},
        "isExported": True,
    }


def numeric_parameter(name: str) -> NumericSeries:
    """A function body's reference to its NUMERIC_SERIES parameter `name`."""
    return NumericSeries({"type": "raw", "raw": {"name": name}})


def enum_parameter(name: str) -> EnumSeries:
    return EnumSeries({"type": "raw", "raw": {"name": name}})


def _argument(value: Argument) -> tuple[Json, Mapping[str, Json]]:
    if isinstance(value, NumericSeries | EnumSeries):
        kind = "numeric" if isinstance(value, NumericSeries) else "enum"
        bound = {
            "seriesNode": {"type": kind, kind: value.json},
            "context": {"variables": {}, "datasetReferences": {}},
        }
        return {"type": "value", "value": {"type": "computeNode", "computeNode": bound}}, value.variables
    if isinstance(value, bool):
        raise TypeError("a module function takes no booleans")
    if isinstance(value, int):
        return {"type": "value", "value": {"type": "integer", "integer": value}}, {}
    if isinstance(value, float):
        return {"type": "value", "value": {"type": "double", "double": value}}, {}
    return {"type": "value", "value": {"type": "string", "string": value}}, {}


def _derived(
    module: str, name: str, version: str, args: Mapping[str, Argument]
) -> tuple[Json, dict[str, Json]]:
    variables: dict[str, Json] = {}
    function_args = {}
    for key, value in args.items():
        function_args[key], used = _argument(value)
        variables.update(used)
    body = {
        "moduleName": {"type": "literal", "literal": module},
        "functionName": {"type": "literal", "literal": name},
        "versionReference": {
            "type": "pinned",
            "pinned": {"version": {"type": "literal", "literal": version}},
        },
        "functionArgs": function_args,
    }
    return {"type": "derived", "derived": {"type": "function", "function": body}}, variables


def derived_numeric(module: str, name: str, version: str, args: Mapping[str, Argument]) -> NumericSeries:
    """`NumericSeries.derived`: function `name` of `module` at `version` ("1", "2", ...)."""
    return NumericSeries(*_derived(module, name, version, args))


def derived_enum(module: str, name: str, version: str, args: Mapping[str, Argument]) -> EnumSeries:
    return EnumSeries(*_derived(module, name, version, args))


def derived_ranges(module: str, name: str, version: str, args: Mapping[str, Argument]) -> RangeSeries:
    return RangeSeries(*_derived(module, name, version, args))


class Modules(JsonService):
    PREFIX = "/scout/v2/module"

    def create(self, api_name: str, title: str, functions: list[Json], description: str = "") -> Json:
        """A new module (its version "1"); the answer is Nominal's `Module`."""
        body = {
            "apiName": api_name,
            "title": title,
            "description": description,
            "definition": {"functions": functions},
        }
        result: Json = self._call("POST", "", body)
        return result

    def update(self, rid: str, title: str, functions: list[Json], description: str = "") -> Json:
        """The module's next version."""
        body = {"title": title, "description": description, "definition": {"functions": functions}}
        result: Json = self._call("PUT", f"/{urllib.parse.quote(rid, safe='')}", body)
        return result

    def get(self, rid: str, version: str | None = None) -> Json:
        query = "" if version is None else f"?version={urllib.parse.quote(version)}"
        result: Json = self._call("GET", f"/{urllib.parse.quote(rid, safe='')}{query}")
        return result

    def by_name(self, api_name: str, version: str | None = None) -> Json:
        """Through batch-get: the latest version, or a pinned one."""
        strategy = (
            {"type": "latest", "latest": {}}
            if version is None
            else {"type": "pinned", "pinned": {"version": version}}
        )
        ref = {"type": "name", "name": {"apiName": api_name, "versionStrategy": strategy}}
        result: list[Json] = self._call("POST", "/batch-get", {"requests": [ref]})
        return result[0]

    def search(self, text: str = "", archived: bool = False, page_size: int = 100) -> list[Json]:
        """ModuleSummaries whose name, title or description holds `text` (every page)."""
        statuses = ["NOT_ARCHIVED", "ARCHIVED"] if archived else ["NOT_ARCHIVED"]
        out: list[Json] = []
        token = None
        while True:
            body: Json = {"query": {"type": "searchText", "searchText": text}, "pageSize": page_size}
            body["archivedStatuses"] = statuses
            if token is not None:
                body["nextPageToken"] = token
            page = self._call("POST", "/search", body)
            out += page["results"]
            token = page.get("nextPageToken")
            if token is None:
                return out

    def archive(self, *rids: str) -> list[str]:
        result: list[str] = self._call("POST", "/archive", {"requests": list(rids)})["archivedModuleRids"]
        return result

    def unarchive(self, *rids: str) -> list[str]:
        result: list[str] = self._call("POST", "/unarchive", {"requests": list(rids)})["unarchivedModuleRids"]
        return result
