"""Assets and runs in Sparkwire's catalog (`/assets/v1`), which asset and run channels resolve
against (`nodes.asset_channel`, `nodes.run_channel`).

    catalog = Catalog("http://127.0.0.1:8000", token=admin_token)
    car = catalog.create_asset("car a1", [DataScope("main", "ri.demo", {"vehicle": "a1"})])
    lap = catalog.create_run("lap 3", [car["rid"]], start_ns=time.time_ns())
    rig = catalog.create_asset("rig", [], typed_properties={"gain": 2.5, "fluid": "LOX"})

Typed properties (`typed_properties`: a name to a float or a str, Nominal's `TypedPropertyValue`
numericValue or stringValue) are what `nodes.select_numeric_property` and
`nodes.select_categorical_property` read; `typed_values` turns an answer's back into that form.

Calls are synchronous (the standard library's HTTP client); a refusal raises `CatalogError` with
the server's Conjure error body. Creating, updating and deleting need a token with the `admin`
claim; an update or delete reaches the live subscriptions over that asset or run."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

NANOS = 1_000_000_000
Json = dict[str, Any]


class CatalogError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"catalog request refused ({status}): {body}")
        self.status = status
        self.body = body


@dataclass(frozen=True)
class DataScope:
    name: str
    data_source_rid: str
    series_tags: dict[str, str] = field(default_factory=dict)

    def json(self) -> Json:
        return {
            "dataScopeName": self.name,
            "dataSourceRid": self.data_source_rid,
            "seriesTags": self.series_tags,
        }


TypedValue = float | int | str


def typed_json(values: dict[str, TypedValue]) -> dict[str, Json]:
    """`{"gain": 2.5, "fluid": "LOX"}` as Nominal's `TypedPropertyValue` unions."""
    out: dict[str, Json] = {}
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            raise TypeError(f"typed property {name!r}: a float or a str, not {type(v).__name__}")
        kind = "stringValue" if isinstance(v, str) else "numericValue"
        out[name] = {"type": kind, kind: v if isinstance(v, str) else float(v)}
    return out


def typed_values(answer: Json) -> dict[str, float | str]:
    """An asset's or run's `typedProperties` as plain values."""
    return {name: u[u["type"]] for name, u in (answer.get("typedProperties") or {}).items()}


def _time(ns: int) -> Json:
    return {"seconds": ns // NANOS, "nanos": ns % NANOS}


class JsonService:
    """One of the server's JSON HTTP services under `PREFIX`: the bearer token, Conjure errors as
    `CatalogError`."""

    PREFIX = ""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{self.base_url}{self.PREFIX}{path}", data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                text = answer.read().decode()
        except urllib.error.HTTPError as exc:
            raise CatalogError(exc.code, exc.read().decode(errors="replace")) from None
        return json.loads(text) if text else None


class Catalog(JsonService):
    PREFIX = "/assets/v1/"

    def create_asset(
        self,
        title: str,
        data_scopes: list[DataScope],
        properties: dict[str, str] | None = None,
        typed_properties: dict[str, TypedValue] | None = None,
    ) -> Json:
        body = {
            "title": title,
            "dataScopes": [s.json() for s in data_scopes],
            "properties": properties or {},
            "typedProperties": typed_json(typed_properties or {}),
        }
        result: Json = self._call("POST", "assets", body)
        return result

    def asset(self, rid: str) -> Json:
        result: Json = self._call("GET", f"assets/{urllib.parse.quote(rid, safe='')}")
        return result

    def assets(self) -> list[Json]:
        result: list[Json] = self._call("GET", "assets")
        return result

    def update_asset(
        self,
        rid: str,
        title: str | None = None,
        data_scopes: list[DataScope] | None = None,
        properties: dict[str, str] | None = None,
        typed_properties: dict[str, TypedValue] | None = None,
    ) -> Json:
        """What is given replaces the asset's (`data_scopes` all at once); live subscriptions over
        the asset follow the change with a fresh FullResult (or the error it now causes)."""
        body: Json = {}
        if title is not None:
            body["title"] = title
        if data_scopes is not None:
            body["dataScopes"] = [s.json() for s in data_scopes]
        if properties is not None:
            body["properties"] = properties
        if typed_properties is not None:
            body["typedProperties"] = typed_json(typed_properties)
        result: Json = self._call("PUT", f"assets/{urllib.parse.quote(rid, safe='')}", body)
        return result

    def delete_asset(self, rid: str) -> None:
        self._call("DELETE", f"assets/{urllib.parse.quote(rid, safe='')}")

    def create_run(
        self,
        title: str,
        asset_rids: list[str],
        start_ns: int,
        end_ns: int | None = None,
        data_scopes: list[DataScope] | None = None,
        properties: dict[str, str] | None = None,
        typed_properties: dict[str, TypedValue] | None = None,
    ) -> Json:
        body: Json = {
            "title": title,
            "assetRids": asset_rids,
            "start": _time(start_ns),
            "dataScopes": [s.json() for s in data_scopes or []],
            "properties": properties or {},
            "typedProperties": typed_json(typed_properties or {}),
        }
        if end_ns is not None:
            body["end"] = _time(end_ns)
        result: Json = self._call("POST", "runs", body)
        return result

    def run(self, rid: str) -> Json:
        result: Json = self._call("GET", f"runs/{urllib.parse.quote(rid, safe='')}")
        return result

    def runs(self) -> list[Json]:
        result: list[Json] = self._call("GET", "runs")
        return result

    def update_run(
        self,
        rid: str,
        title: str | None = None,
        asset_rids: list[str] | None = None,
        start_ns: int | None = None,
        end_ns: int | None = None,
        data_scopes: list[DataScope] | None = None,
        properties: dict[str, str] | None = None,
        typed_properties: dict[str, TypedValue] | None = None,
    ) -> Json:
        """What is given replaces the run's; `end_ns` ends a run that was still going (its live
        subscriptions then end with RUN_WITH_FIXED_END)."""
        body: Json = {}
        if title is not None:
            body["title"] = title
        if asset_rids is not None:
            body["assetRids"] = asset_rids
        if start_ns is not None:
            body["start"] = _time(start_ns)
        if end_ns is not None:
            body["end"] = _time(end_ns)
        if data_scopes is not None:
            body["dataScopes"] = [s.json() for s in data_scopes]
        if properties is not None:
            body["properties"] = properties
        if typed_properties is not None:
            body["typedProperties"] = typed_json(typed_properties)
        result: Json = self._call("PUT", f"runs/{urllib.parse.quote(rid, safe='')}", body)
        return result

    def delete_run(self, rid: str) -> None:
        self._call("DELETE", f"runs/{urllib.parse.quote(rid, safe='')}")
