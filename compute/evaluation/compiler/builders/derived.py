"""`derived` series: a function of a Nominal module, applied to arguments.

A `DerivedSeries.function` (as `NumericSeries.derived`, `EnumSeries.derived`, `RangeSeries.derived`
or a `VariableValue.derived`) names a module, a pinned version of it and one of its functions, and
gives an argument for each of the function's parameters. It is resolved against the modules
Sparkwire keeps (compute/storage/modules.py, passed in as `Catalogs.modules`) when a plan
is compiled: the function's node is compiled as if it were written in place, with its parameters
bound as variables to the arguments (and to nothing else: a function sees only its parameters), so
a derived series is made of the same incremental nodes as any other and reaches as far back as its
body does. The version read is recorded in the compilation's catalog reads, so archiving the module
reaches the live subscriptions over it (app/fanout/catalog_edits.py).

Registered by their Conjure variant name (registry.py) when this module loads
(docs/decisions/0062-modules-and-derived-series.md)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from compute.evaluation import nodes
from compute.evaluation.compiler.builder import Builder, VariableUse
from compute.evaluation.compiler.catalogs import ModuleCatalog
from compute.evaluation.compiler.datasets import CatalogUnreachable
from compute.evaluation.compiler.registry import builds, polls
from compute.evaluation.errors import ComputeError, MalformedNode
from compute.storage.assets import CatalogUnavailable
from compute.storage.modules import Module, ModuleVersion

Json = Any
T = TypeVar("T")

# Which VariableValue kinds an argument of each of Nominal's module ValueTypes may be.
ARGUMENT_KINDS: dict[str, tuple[str, ...]] = {
    "NUMERIC_SERIES": ("channel", "series", "computeNode", "derived"),
    "ENUM_SERIES": ("channel", "series", "computeNode", "derived"),
    "RANGES_SERIES": ("computeNode", "derived"),
    "STRING_CONSTANT": ("string",),
    "DURATION_CONSTANT": ("duration",),
    "TIMESTAMP_CONSTANT": ("timestamp",),
    "INTEGER_CONSTANT": ("integer",),
    "DOUBLE_CONSTANT": ("double", "integer"),
    "ASSET_RID": ("string",),
}
# A sub-computation's (`computeNode`'s) or a function's node kinds that give a series of each type.
SERIES_KINDS: dict[str, frozenset[str]] = {
    "NUMERIC_SERIES": frozenset(["numeric", "raw"]),
    "ENUM_SERIES": frozenset(["enum", "raw"]),
    "RANGES_SERIES": frozenset(["ranges"]),
}
FUNCTION_NODE_KINDS = frozenset(["numeric", "enum", "ranges", "udf"])
VERSION = re.compile(r"^(0|[1-9][0-9]{0,17})$")  # Nominal's module versions: a bare MAJOR number
MAX_DEPTH = 16  # functions whose bodies apply functions: deeper than this is refused


def _module_named(modules: ModuleCatalog | None, name: str) -> Module | None:
    """A module out of reach (shared rows, Redis away) is a passing trouble, as an asset's is."""
    try:
        return modules.module_named(name) if modules is not None else None
    except CatalogUnavailable as exc:
        raise CatalogUnreachable(str(exc)) from None


def _version_of(modules: ModuleCatalog | None, module: Module, version: int) -> ModuleVersion | None:
    try:
        return modules.version(module, version) if modules is not None else None
    except CatalogUnavailable as exc:
        raise CatalogUnreachable(str(exc)) from None


@dataclass(frozen=True)
class Application:
    """A derived series resolved: the function's node and its parameters' arguments."""

    module: ModuleVersion
    function: str
    kind: str  # the function node's kind: numeric, enum or ranges
    node: Json
    bindings: dict[str, Json]  # parameter name -> VariableValue, closed over the caller's variables

    @property
    def label(self) -> str:
        return f"{self.module.api_name} v{self.module.version} {self.function}"


def _refused(message: str, field: str, **params: str) -> ComputeError:
    return ComputeError(
        "InvalidComputation", message, {"invalidTypes": "", "variant": "derived", "field": field, **params}
    )


def _variant(b: Builder, value: Json, what: str, allowed: frozenset[str]) -> tuple[str, Json]:
    """A union of the module API, which nominal_variants.VARIANTS does not list."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise MalformedNode(f"{what}: expected a union object with a 'type'")
    kind = value["type"]
    if kind not in allowed or value.get(kind) is None:
        raise MalformedNode(f"{what}: not a variant of {what}: {kind!r}")
    return kind, value[kind]


def resolve(b: Builder, value: Json) -> Application:
    """The module function a `DerivedSeries` applies, with its arguments checked against the
    function's parameters; every way it can fail is refused by name (`field` says where). Each
    resolution is a step of the compile budget, however often the same function is applied."""
    with b.budget:
        return _resolve(b, value)


def _resolve(b: Builder, value: Json) -> Application:
    _, inner = _variant(b, value, "DerivedSeries", frozenset(["function"]))
    o = b.obj(inner, "FunctionDerivedSeries")
    module_name = b.string_constant(b.get(o, "moduleName", "FunctionDerivedSeries"))
    function_name = b.string_constant(b.get(o, "functionName", "FunctionDerivedSeries"))
    reference = b.get(o, "versionReference", "FunctionDerivedSeries")
    _, pinned = _variant(b, reference, "ModuleVersionReference", frozenset(["pinned"]))
    version_text = b.string_constant(
        b.get(b.obj(pinned, "PinnedModuleVersionReference"), "version", "pinned")
    )
    if not VERSION.match(version_text):
        raise _refused(
            f"module version {version_text!r} is not a version: Nominal's module versions are a bare number "
            '("1", "2", ...)',
            "versionReference",
            moduleName=module_name,
            moduleVersion=version_text,
        )
    module = _cached(b, ("module", module_name), lambda: _module_named(b.catalogs.modules, module_name))
    reach = b.catalog.reach
    if module is not None and reach is not None and not reach.sees_module(module.reach):
        module = None  # another tenant's (compute/storage/catalog_reach.py): as if none had the name
    if module is None:
        raise _refused(f"no module is named '{module_name}'", "moduleName", moduleName=module_name)
    if module.archived_at_ns is not None:
        raise _refused(
            f"module '{module_name}' is archived; unarchive it to compute with it",
            "moduleName",
            moduleName=module_name,
            moduleRid=module.rid,
        )
    found = module
    version = _cached(
        b,
        ("version", module.rid, version_text),
        lambda: _version_of(b.catalogs.modules, found, int(version_text)),
    )
    if version is None:
        raise _refused(
            f"module '{module_name}' has no version {version_text} (its latest is {module.latest})",
            "versionReference",
            moduleName=module_name,
            moduleVersion=version_text,
            latestVersion=str(module.latest),
        )
    b.catalog.found(version)  # its archiving or unarchiving re-resolves the subscription
    functions = {f.get("name"): f for f in version.definition.get("functions") or [] if isinstance(f, dict)}
    function = functions.get(function_name)
    if function is None:
        raise _refused(
            f"module '{module_name}' version {version_text} has no function '{function_name}' "
            f"(it has {sorted(str(n) for n in functions) or 'none'})",
            "functionName",
            moduleName=module_name,
            moduleVersion=version_text,
            functionName=function_name,
        )
    kind, node = _variant(b, function.get("functionNode"), "FunctionNode", FUNCTION_NODE_KINDS)
    if kind == "udf":
        raise _refused(
            f"function '{function_name}' of module '{module_name}' is a registered UDF (Rust compiled to "
            "WASM), which Sparkwire does not run",
            "functionName",
            moduleName=module_name,
            functionName=function_name,
        )
    _refuse_cycles(b, version, function_name, node)
    parameters = {p["name"]: p["type"] for p in function.get("parameters") or []}
    bindings = _arguments(b, o, parameters, function_name)
    return Application(version, function_name, kind, node, bindings)


def _applied_in(node: Json) -> Iterator[tuple[str, str, str]]:
    """The (module, version, function) every `derived` node inside a function's body names with
    literals (its arguments are the caller's, not part of the body)."""
    if isinstance(node, list):
        for item in node:
            yield from _applied_in(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "derived" and isinstance(node.get("derived"), dict):
        inner = node["derived"].get("function")
        if isinstance(inner, dict):
            names = [_literal(inner.get(k)) for k in ("moduleName", "functionName")]
            pinned = (inner.get("versionReference") or {}).get("pinned") or {}
            version = _literal(pinned.get("version") if isinstance(pinned, dict) else None)
            if names[0] is not None and names[1] is not None and version is not None:
                yield names[0], version, names[1]
            return  # its functionArgs belong to this body's scope, but apply nothing by themselves
    for value in node.values():
        yield from _applied_in(value)


def _literal(value: Json) -> str | None:
    if isinstance(value, dict) and value.get("type") == "literal" and isinstance(value.get("literal"), str):
        return str(value["literal"])
    return None


FunctionKey = tuple[str, str, str]  # (module name, version, function name)
Lookup = Callable[[str, str, str], Json | None]  # a function's node, None: no such function


class _Cycle(Exception):
    def __init__(self, path: list[FunctionKey]) -> None:
        self.path = path


class _TooDeep(Exception):
    pass


class _CallGraph:
    """The functions a function's body applies, walked once each: a function applied from many
    places is looked up and walked once, so a module whose functions fan out twice per level costs
    one step per function, not one per path (2^depth)."""

    def __init__(self, lookup: Lookup, charge: Callable[[], None]) -> None:
        self.lookup, self.charge = lookup, charge
        self.heights: dict[FunctionKey, int] = {}  # functions walked: how deep they nest
        self.stack: list[FunctionKey] = []  # the functions whose bodies led here, outermost first

    def height(self, key: FunctionKey, node: Json) -> int:
        """How many functions deep `key` nests (1: it applies none); raises _Cycle or _TooDeep."""
        if key in self.heights:
            return self.heights[key]
        if key in self.stack:
            raise _Cycle([*self.stack[self.stack.index(key) :], key])
        if len(self.stack) >= MAX_DEPTH:
            raise _TooDeep()
        self.charge()
        self.stack.append(key)
        height = 1
        for callee in dict.fromkeys(_applied_in(node)):  # each once, in order
            if callee in self.heights:
                height = max(height, 1 + self.heights[callee])
                continue
            body = self.lookup(*callee)
            if body is not None:  # one that does not resolve is refused where it is built
                height = max(height, 1 + self.height(callee, body))
        self.stack.pop()
        if height > MAX_DEPTH:
            raise _TooDeep()
        self.heights[key] = height
        return height


def _label(key: FunctionKey) -> str:
    return f"{key[0]} v{key[1]} {key[2]}"


def _refuse_cycles(b: Builder, version: ModuleVersion, function: str, node: Json) -> None:
    """A function whose body applies itself, directly or through other functions' bodies, or
    nests functions deeper than MAX_DEPTH, is refused by name (the outermost function named)
    before anything is built."""
    key = (version.api_name, str(version.version), function)
    graph = b.derived_cache.get("graph")
    if graph is None:  # one per compilation: a function applied again is not walked again
        graph = b.derived_cache["graph"] = _CallGraph(
            lambda *callee: _cached(
                b, ("function", *callee), lambda: _stored_function(b.catalogs.modules, *callee)
            ),
            b.budget.charge,
        )
    try:
        graph.height(key, node)
    except _Cycle as cycle:
        raise _refused(
            f"function {_label(key)} applies itself (through {' -> '.join(map(_label, cycle.path))})",
            "functionName",
            moduleName=version.api_name,
            functionName=function,
        ) from None
    except _TooDeep:
        raise _refused(
            f"function {_label(key)} nests functions more than {MAX_DEPTH} deep",
            "functionName",
            moduleName=version.api_name,
            functionName=function,
        ) from None


def _cached(b: Builder, key: tuple[str, ...], lookup: Callable[[], T]) -> T:
    """A catalog lookup, once per compilation (a module applied 5,000 times is read once)."""
    if key not in b.derived_cache:
        b.derived_cache[key] = lookup()
    found: T = b.derived_cache[key]
    return found


def _stored_function(
    modules: ModuleCatalog | None, module_name: str, version_text: str, function_name: str
) -> Json | None:
    found = _function_at(modules, module_name, version_text, function_name)
    return None if found is None else found[1]


def definition_cycle(
    modules: ModuleCatalog | None, api_name: str, version: int, functions: list[dict[str, Json]]
) -> list[str] | None:
    """A cycle among the functions of a module version about to be stored (`functions`: its
    definition's), through its own functions and those of the stored `modules`: the functions of the
    cycle, the first again at its end (each "module vN function"), or None. A definition applying
    itself is refused when it is created rather than when a subscription applies it."""
    own = {str(f.get("name")): f.get("functionNode") for f in functions}
    version_text = str(version)

    def lookup(module_name: str, version_of: str, function_name: str) -> Json | None:
        if module_name == api_name and version_of == version_text:
            return own.get(function_name)
        return _stored_function(modules, module_name, version_of, function_name)

    graph = _CallGraph(lookup, lambda: None)
    for name, node in own.items():
        try:
            graph.height((api_name, version_text, name), node)
        except _Cycle as cycle:
            return [_label(k) for k in cycle.path]
        except _TooDeep:  # nesting is refused where it is applied (its depth counts what it applies)
            graph.stack.clear()
    return None


def _function_at(
    modules: ModuleCatalog | None, module_name: str, version_text: str, function_name: str
) -> tuple[ModuleVersion, Json] | None:
    if modules is None or not VERSION.match(version_text):
        return None
    module = _module_named(modules, module_name)
    version = None if module is None else _version_of(modules, module, int(version_text))
    if version is None:
        return None
    for f in version.definition.get("functions") or []:
        if isinstance(f, dict) and f.get("name") == function_name:
            return version, f.get("functionNode")
    return None


def _arguments(b: Builder, o: dict[str, Json], parameters: dict[str, str], function: str) -> dict[str, Json]:
    args = b.obj(o.get("functionArgs") or {}, "FunctionDerivedSeries.functionArgs")
    for name in parameters:
        if name not in args:
            raise _refused(
                f"function '{function}' needs an argument for its parameter '{name}' ({parameters[name]})",
                f"functionArgs.{name}",
                parameter=name,
            )
    for name in args:
        if name not in parameters:
            raise _refused(
                f"function '{function}' has no parameter '{name}' (it has {sorted(parameters) or 'none'})",
                f"functionArgs.{name}",
                parameter=name,
            )
    bindings: dict[str, Json] = {}
    for name, arg in args.items():
        how, given = _variant(b, arg, "FunctionParameterValue", frozenset(["variable", "value"]))
        if how == "variable":
            kind, inner = b.variable(given)
            value: Json = {"type": kind, kind: inner}
        else:
            kind, inner = b.variant("VariableValue", given)
            value = given
        expected = parameters[name]
        if kind not in ARGUMENT_KINDS.get(expected, ()):
            raise _refused(
                f"the argument for '{name}' of function '{function}' is a {kind}, the parameter is a "
                f"{expected}",
                f"functionArgs.{name}",
                parameter=name,
                parameterType=expected,
                argument=kind,
            )
        series_kind = _series_kind(b, kind, inner)
        if series_kind is not None and series_kind not in SERIES_KINDS[expected]:
            raise _refused(
                f"the argument for '{name}' of function '{function}' computes {series_kind}, the parameter "
                f"is a {expected}",
                f"functionArgs.{name}",
                parameter=name,
                parameterType=expected,
                argument=series_kind,
            )
        bindings[name] = _closed(b, value, b.context)
        if expected == "RANGES_SERIES" and kind == "derived":
            # a body reads a ranges parameter with `RangeSeries.raw`, which takes a computeNode
            ranges = {"type": "ranges", "ranges": {"type": "derived", "derived": bindings[name]["derived"]}}
            bound = {"seriesNode": ranges, "context": {"variables": {}}}
            bindings[name] = {"type": "computeNode", "computeNode": bound}
    return bindings


def _series_kind(b: Builder, kind: str, inner: Json) -> str | None:
    """What a sub-computation or a derived series computes (numeric, enum, ranges); None for a
    channel or a selected series, whose type is the data's."""
    if kind == "computeNode":
        node = b.get(b.obj(inner, "ComputeNodeWithContext"), "seriesNode", "ComputeNodeWithContext")
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise MalformedNode("ComputeNodeWithContext.seriesNode must be a ComputeNode")
        return str(node["type"])
    if kind == "derived":
        return resolve(b, inner).kind
    return None


def _closed(b: Builder, value: Json, outer: Mapping[str, Json]) -> Json:
    """An argument as the function body will read it, where only its parameters are variables: a
    sub-computation keeps the caller's variables under its own (its own win), and a derived
    series' arguments that name the caller's variables are replaced by their values."""
    kind = value["type"]
    if kind == "computeNode":
        o = dict(value[kind])
        context = dict(o.get("context") or {})
        context["variables"] = {**outer, **(context.get("variables") or {})}
        o["context"] = context
        return {"type": kind, kind: o}
    if kind == "derived":
        _, inner = _variant(b, value[kind], "DerivedSeries", frozenset(["function"]))
        o = dict(b.obj(inner, "FunctionDerivedSeries"))
        args = {}
        for name, arg in (o.get("functionArgs") or {}).items():
            how, given = _variant(b, arg, "FunctionParameterValue", frozenset(["variable", "value"]))
            if how == "variable":
                vkind, vinner = b.variable(given)
                given = {"type": vkind, vkind: vinner}
            args[name] = {"type": "value", "value": _closed(b, given, outer)}
        o["functionArgs"] = args
        return {"type": kind, kind: {"type": "function", "function": o}}
    return value


def apply(b: Builder, application: Application, build: Callable[[Json], T]) -> T:
    """The function's node built by `build` with its parameters bound, and only them."""
    outer = b.context
    b.context = application.bindings
    try:
        return build(application.node)
    except MalformedNode as exc:  # the module's definition is at fault, not the request
        raise _refused(
            f"function {application.label} is not a valid Nominal node: {exc}",
            "functionName",
            moduleName=application.module.api_name,
            functionName=application.function,
        ) from None
    finally:
        b.context = outer


def _of_kind(b: Builder, value: Json, wanted: str, where: str) -> Application:
    application = resolve(b, value)
    if application.kind != wanted:
        raise _refused(
            f"function {application.label} computes {application.kind}, and is used as {where}",
            "functionName",
            moduleName=application.module.api_name,
            functionName=application.function,
            functionNode=application.kind,
        )
    return application


@builds("NumericSeries", "derived")
def _numeric(b: Builder, v: Json) -> nodes.SeriesNode:
    return apply(b, _of_kind(b, v, "numeric", "a NumericSeries"), b.numeric)


@builds("EnumSeries", "derived")
def _enum(b: Builder, v: Json) -> nodes.SeriesNode:
    return apply(b, _of_kind(b, v, "enum", "an EnumSeries"), b.enum)


@builds("RangeSeries", "derived")
def _ranges(b: Builder, v: Json) -> nodes.RangeNode:
    return apply(b, _of_kind(b, v, "ranges", "a RangeSeries"), b.ranges)


@polls("LogSeries", "derived")
def _log(b: Builder, v: Json) -> nodes.SeriesNode:
    """`LogSeries.derived`, polled (live, every LogSeries keeps PollingOnlyComputation `LOG_SERIES`):
    resolved as every derived series is, so a missing module, version, function or argument is
    refused as for the others. Then always refused by name: nominal-api's module functions compute
    an `EnumSeries`, a `NumericSeries` or a `RangeSeries` (`FunctionNode`: enum, numeric, ranges,
    or a udf) and take no log series (`ValueType` has none), so no function of a module can be a
    log series (docs/decisions/0084-the-last-polled-variants.md)."""
    application = resolve(b, v)
    raise _refused(
        f"function {application.label} computes {application.kind}, and is used as a LogSeries: "
        "nominal-api's module functions compute numeric, enum or range series (FunctionNode), never "
        "log lines",
        "functionName",
        moduleName=application.module.api_name,
        functionName=application.function,
        functionNode=application.kind,
    )


# What a parameter is bound to when a function's node is checked on its own (`malformation`).
PLACEHOLDERS: dict[str, Json] = {
    "NUMERIC_SERIES": {
        "type": "channel",
        "channel": {
            "type": "dataSource",
            "dataSource": {
                "dataSourceRid": {"type": "literal", "literal": "ri.placeholder"},
                "channel": {"type": "literal", "literal": "placeholder"},
                "tags": {},
            },
        },
    },
    "DOUBLE_CONSTANT": {"type": "double", "double": 1.0},
    "INTEGER_CONSTANT": {"type": "integer", "integer": 1},
    "DURATION_CONSTANT": {"type": "duration", "duration": {"seconds": 1, "nanos": 0}},
    "TIMESTAMP_CONSTANT": {"type": "timestamp", "timestamp": {"seconds": 0, "nanos": 0}},
    "STRING_CONSTANT": {"type": "string", "string": "placeholder"},
    "ASSET_RID": {"type": "string", "string": "placeholder"},
}
PLACEHOLDERS["ENUM_SERIES"] = PLACEHOLDERS["NUMERIC_SERIES"]
PLACEHOLDERS["RANGES_SERIES"] = {
    "type": "computeNode",
    "computeNode": {
        "seriesNode": {"type": "ranges", "ranges": {"type": "raw", "raw": {"name": "placeholder"}}},
        "context": {"variables": {}},
    },
}


def malformation(kind: str, node: Json, parameters: Mapping[str, str]) -> str | None:
    """Why a function's node (`kind`: numeric, enum or ranges) is not a Nominal node at all, if it
    is not: it is compiled with its parameters bound to placeholders. What it would refuse
    (ComputeError) may depend on the arguments, so only a malformed node is reported."""
    b = Builder({name: PLACEHOLDERS[t] for name, t in parameters.items() if t in PLACEHOLDERS})
    build = {"numeric": b.numeric, "enum": b.enum, "ranges": b.ranges}[kind]
    try:
        build(node)
    except ComputeError:
        return None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # MalformedNode is a ValueError
        return str(exc)
    return None


@builds("VariableValue", "derived")
def derived_variable(b: Builder, use: VariableUse) -> nodes.SeriesNode:
    """A variable bound to a derived series, referenced where a series is read (`use.expect`: the
    numeric or enum type wanted there, None: either)."""
    name, value, expect = use
    application = resolve(b, value)
    wanted = {"numeric", "enum"} if expect is None else {expect}
    if application.kind not in wanted:
        raise ComputeError(
            "InvalidComputation",
            f"variable '{name}' is function {application.label}, which computes {application.kind}, and is "
            f"referenced where {' or '.join(sorted(wanted))} is read",
            {
                "invalidTypes": "",
                "variant": "derived",
                "variable": name,
                "field": "functionName",
                "functionNode": application.kind,
            },
        )
    return apply(b, application, b.numeric if application.kind == "numeric" else b.enum)
