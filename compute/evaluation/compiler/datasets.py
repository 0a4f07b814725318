"""Nominal's `Dataset` algebra, resolved when a plan is compiled: a dataset becomes its branches
(one data source each, with the tags that pre-filter it, the tag filters folded into it, the tags it
injects, its time shift) plus the derived series `withSeries` added and the names `dropSeries` took
away. Selecting a name from a dataset reads that channel on every branch (builder.py merges them).

Assets and runs come from Sparkwire's own catalog (compute/storage/assets.py), passed in by
whoever compiles (catalogs.py). What a plan read of it is kept (`CatalogReads` -> `CatalogUse`): an edit of
an asset or run it read re-resolves the live subscriptions over it (app/fanout/catalog_edits.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from compute.evaluation.compiler.catalogs import AssetCatalog
from compute.evaluation.errors import ComputeError, MalformedNode, not_supported
from compute.storage.assets import Asset, CatalogUnavailable, DataScope, Run, TypedValue
from compute.storage.catalog_reach import Reach
from compute.storage.events import Event
from compute.storage.modules import ModuleVersion
from compute.storage.series import TagCondition

if TYPE_CHECKING:
    from compute.evaluation.compiler.builder import Builder

Json = Any
T = TypeVar("T")

# Nominal's ReservedTagKey / ReservedTagValue
ASSET_RID, DATA_SCOPE, RUN_RID, NOMINAL_CHANNEL = "ASSET_RID", "DATA_SCOPE", "RUN_RID", "NOMINAL_CHANNEL"
NOMINAL_ABSENT = "NOMINAL_ABSENT"


@dataclass(frozen=True)
class Resource:
    """The asset or run a branch comes from (for `withDimensions`, `alignByAnchor` and the property
    selectors, which name it in their errors)."""

    properties: tuple[tuple[str, str], ...]
    run_start_ns: int | None = None
    typed: tuple[tuple[str, TypedValue], ...] = ()
    rid: str = ""


@dataclass(frozen=True)
class Branch:
    data_source_rid: str
    tags: tuple[tuple[str, str], ...] = ()  # equality pre-filter (a data scope's series tags)
    filters: tuple[TagCondition, ...] = ()
    injected: tuple[tuple[str, str], ...] = ()
    shift_ns: int = 0
    resource: Resource | None = None
    from_ns: int | None = None  # a run's branch: only the points from the run's start on

    def with_filter(self, condition: TagCondition) -> Branch | None:
        """The branch with one more tag condition, folded now where the tag's value is known
        (injected, or a scope's fixed tag): None when it can never hold."""
        known = {**dict(self.tags), **dict(self.injected)}
        if condition.key in known:
            return self if condition.holds(known) else None
        return replace(self, filters=(*self.filters, condition))


@dataclass(frozen=True)
class Derived:
    definition: Json  # a `Series`
    base: View  # what a `selectSeries` without a dataset inside it reads


@dataclass(frozen=True)
class View:
    branches: tuple[Branch, ...]
    derived: tuple[tuple[str, Derived], ...] = ()
    dropped: frozenset[str] = frozenset()


# The unions of the dataset algebra (their variant names, as in nominal-api 0.1505.0)
UNIONS: dict[str, frozenset[str]] = {
    "TagPredicate": frozenset(["in", "notIn", "and"]),
    "StringSetConstantV2": frozenset(["literal", "variable"]),
    "AnchorReference": frozenset(["earliestAnchor"]),
    "DatasetAnchor": frozenset(["run"]),
    "IntervalAnchor": frozenset(["intervalStart", "intervalEnd", "eventInInterval", "rangeInInterval"]),
    "DimensionValue": frozenset(["stringProperty", "identity"]),
    "TagFilters": frozenset(["single", "and"]),
    "SearchTarget": frozenset(["assets", "runs"]),
    "ResourceSearchQuery": frozenset(
        ["properties", "numericProperty", "numericPropertyRange", "labels", "workspace", "and", "or", "not"]
    ),
    "ComputeNode": frozenset(
        ["enum", "numeric", "log", "ranges", "array", "struct", "curveFit", "curveV2", "video", "raw"]
    ),
}


def malformed(message: str) -> Exception:
    return MalformedNode(message)


def variant(union: str, value: Json) -> tuple[str, Json]:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise malformed(f"{union}: expected a union object with a 'type'")
    kind = value["type"]
    if kind not in UNIONS[union]:
        raise malformed(f"{union}: unknown variant '{kind}'")
    if kind not in value:
        raise malformed(f"{union}: variant '{kind}' has no value")
    return kind, value[kind]


def tag_filters(b: Builder, value: Json) -> list[TagCondition]:
    """`TagFilters` (a channel's `tagFilters`, an asset or run channel's `additionalTagFilters`):
    IN / NOT_IN per key, combined with `and`; a key in more than one filter is an error, as in Nominal."""
    kind, inner = variant("TagFilters", value)
    if kind == "and":
        if not isinstance(inner, list):
            raise malformed("TagFilters.and must be a list")
        out = [c for f in inner for c in tag_filters(b, f)]
    else:
        f = b.obj(inner, "TagFilter")
        operator = b.get(f, "operator", "TagFilter")
        if operator not in ("IN", "NOT_IN"):
            raise malformed(f"TagFilter.operator: not a TagFilterOperator: {operator!r}")
        values = b.get(f, "values", "TagFilter")
        if not isinstance(values, list):
            raise malformed("TagFilter.values must be a list")
        key = b.string_constant(b.get(f, "key", "TagFilter"))
        out = [
            TagCondition(key, frozenset(b.string_constant(v) for v in values), negate=operator == "NOT_IN")
        ]
    keys = [c.key for c in out]
    if len(set(keys)) != len(keys):
        raise not_supported(f"tagFilters name a tag key more than once: {sorted(keys)}", "tagFilters")
    return out


def refuse(kind: str, reason: str) -> ComputeError:
    return not_supported(f"Dataset '{kind}' is not supported by Sparkwire: {reason}", kind)


def _hidden(what: str, rid: str) -> ComputeError:
    """An asset or run the token may not see (compute/storage/catalog_reach.py), refused as a channel
    of a data source it does not reach is (app/protocol/ws_session.py), naming the rid it gave."""
    return ComputeError(
        "PermissionDenied",
        f"the token reaches none of the data sources behind {what} '{rid}'",
        {"rids": rid},
        status_code=403,
    )


def _unknown(what: str, rid: str) -> ComputeError:
    return ComputeError(
        "InvalidComputation",
        f"no {what} has the rid '{rid}'",
        {"invalidTypes": "", "variant": what, "rid": rid},
    )


CatalogKind = Literal[
    "asset", "run", "module", "event"
]  # module: builders/derived.py; event: builders/events.py


class CatalogUnreachable(ComputeError):
    """The catalog could not be read (a shared one out of reach): a passing trouble, not an answer.
    A subscription being created gets it as `JobInvalidState` (a client tries again); a live one
    being re-resolved keeps its resolution until the catalog can be read again."""

    def __init__(self, why: str) -> None:
        super().__init__("JobInvalidState", why, status_code=503)


def _read(lookup: Callable[[], T]) -> T:
    try:
        return lookup()
    except CatalogUnavailable as exc:
        raise CatalogUnreachable(str(exc)) from None


@dataclass(frozen=True)
class CatalogUse:
    """What a compiled plan read of the catalog: the assets and runs it resolved through, whether it
    searched all assets or all runs, and a digest of every body it read. Two compilations with the
    same digest resolved the same way; a request's computation key carries it, so a request
    compiled after an edit is a computation of its own."""

    rids: frozenset[str]
    searched: frozenset[CatalogKind]
    digest: str
    # The reach a search found its entries with (None: no search, or every entry): what a search
    # finds depends on who asks, so the request carries it (request.py).
    reach: Reach | None = None

    def affected_by(self, kind: str, rid: str) -> bool:
        """Whether creating, changing or deleting this asset or run can change the resolution."""
        return rid in self.rids or kind in self.searched


@dataclass
class CatalogReads:
    """The catalog as one compilation reads it: every lookup goes through here and is recorded.
    `reach`: the subscribing token's (None: every entry, as the compute tier compiles a request its
    edge admitted); an asset or run it does not see is refused when named and never found by a
    search, before anything of it (a property, a scope) can reach a result or an error message."""

    entries: dict[str, Asset | Run | ModuleVersion | Event] = field(default_factory=dict)
    searched: set[CatalogKind] = field(default_factory=set)
    reach: Reach | None = None
    source: AssetCatalog | None = None  # the catalog looked up (None: none kept)

    def asset(self, rid: str) -> Asset:
        catalog = self.source
        asset = _read(lambda: catalog.asset(rid)) if catalog is not None else None
        if asset is None:
            raise _unknown("asset", rid)
        self.entries[rid] = asset
        if self.reach is not None and not self.reach.sees_asset(asset):
            raise _hidden("asset", rid)
        return asset

    def sees_run(self, run: Run) -> bool:
        """Its assets are read (and recorded: an edit of their scopes can show or hide the run)."""
        return self.reach is None or self.reach.sees_run(run, self._asset_if_any)

    def _asset_if_any(self, rid: str) -> Asset | None:
        catalog = self.source
        asset = _read(lambda: catalog.asset(rid)) if catalog is not None else None
        if asset is not None:
            self.entries[rid] = asset
        return asset

    def run(self, rid: str) -> Run:
        """A run a live subscription can read: one that has ended is refused as Nominal refuses it
        (RUN_WITH_FIXED_END: its data is fixed, so there is nothing to stream; replay or poll it)."""
        catalog = self.source
        run = _read(lambda: catalog.run(rid)) if catalog is not None else None
        if run is None:
            raise _unknown("run", rid)
        self.entries[rid] = run
        if not self.sees_run(run):
            raise _hidden("run", rid)
        if run.end_ns is not None:
            raise ComputeError(
                "InvalidComputation",
                f"run '{rid}' has a fixed end: a live subscription cannot stream a run that has ended",
                {"invalidTypes": "RUN_WITH_FIXED_END", "rid": rid},
            )
        return run

    def all_assets(self) -> list[Asset]:
        """Every asset, for a search: any asset's edit may change what it finds (those it found
        are recorded with `found`)."""
        self.searched.add("asset")
        catalog = self.source
        assets = _read(catalog.assets) if catalog is not None else []
        return assets if self.reach is None else [a for a in assets if self.reach.sees_asset(a)]

    def all_runs(self) -> list[Run]:
        """Every run this reach sees; an asset's edit can show or hide a run, so it re-resolves too."""
        self.searched.add("run")
        catalog = self.source
        runs = _read(catalog.runs) if catalog is not None else []
        if self.reach is None or self.reach.everything:
            return runs
        self.searched.add("asset")
        assets = {a.rid: a for a in (_read(catalog.assets) if catalog is not None else [])}
        return [r for r in runs if self.reach.sees_run(r, assets.get)]

    def found(self, entry: Asset | Run | ModuleVersion | Event) -> None:
        self.entries[entry.rid] = entry

    def use(self) -> CatalogUse | None:
        """None when the plan never read the catalog."""
        if not self.entries and not self.searched:
            return None
        read = [  # a title resolves nothing: renaming an asset or run re-resolves no subscription
            [rid, type(e).__name__, {k: v for k, v in asdict(e).items() if k != "title"}]
            for rid, e in sorted(self.entries.items())
        ]
        text = json.dumps([read, sorted(self.searched)], sort_keys=True, separators=(",", ":"))
        return CatalogUse(
            frozenset(self.entries),
            frozenset(self.searched),
            hashlib.sha256(text.encode()).hexdigest()[:32],
            self.reach if self.searched and self.reach is not None and not self.reach.everything else None,
        )


def scope_branch(scope: DataScope, injected: dict[str, str], resource: Resource) -> Branch:
    return Branch(
        scope.data_source_rid,
        tuple(sorted(scope.series_tags.items())),
        injected=tuple(sorted(injected.items())),
        resource=resource,
    )


def asset_branches(asset: Asset, extra: dict[str, str], resource: Resource | None = None) -> list[Branch]:
    """One branch per data scope, tagged by ASSET_RID and DATA_SCOPE (and `extra`, a run's tags)."""
    resource = resource or Resource(
        tuple(sorted(asset.properties.items())),
        typed=tuple(sorted(asset.typed_properties.items())),
        rid=asset.rid,
    )
    return [
        scope_branch(s, {ASSET_RID: asset.rid, DATA_SCOPE: s.name, **extra}, resource)
        for s in asset.data_scopes
    ]


def run_branches(run: Run, catalog: CatalogReads) -> list[Branch]:
    """One branch per data scope of each of the run's assets (tagged RUN_RID, ASSET_RID,
    DATA_SCOPE) and per data scope of the run itself (tagged RUN_RID, DATA_SCOPE), each holding
    the points from the run's start on: a run's channels show the run's time range."""
    resource = Resource(  # a run's branches, its assets' too, read the run's own properties
        tuple(sorted(run.properties.items())),
        run.start_ns,
        typed=tuple(sorted(run.typed_properties.items())),
        rid=run.rid,
    )
    out = [scope_branch(s, {RUN_RID: run.rid, DATA_SCOPE: s.name}, resource) for s in run.data_scopes]
    for asset_rid in run.asset_rids:
        out += asset_branches(catalog.asset(asset_rid), {RUN_RID: run.rid}, resource)
    return [replace(b, from_ns=run.start_ns) for b in out]


class Resolver:
    """Resolves `Dataset` JSON with the compiler's helpers for constants and variables."""

    def __init__(self, b: Builder, references: Mapping[str, Json]) -> None:
        self.b = b
        self.references = references  # Context.datasetReferences in scope
        self._resolving: list[str] = []
        self.kinds: dict[str, Callable[[Json], View]] = {
            "saved": self.saved,
            "asset": self.asset,
            "run": self.run,
            "combine": self.combine,
            "tag": self.tag,
            "filter": self.filter,
            "timeShift": self.time_shift,
            "alignByAnchor": self.align_by_anchor,
            "withSeries": self.with_series,
            "dropSeries": self.drop_series,
            "reference": self.reference,
            "withDimensions": self.with_dimensions,
            "search": self.search,
        }

    def resolve(self, value: Json) -> View:
        kind, inner = self.b.variant("Dataset", value)
        with self.b.budget:  # a reference is resolved as often as it is referenced: each time charged
            return self.kinds[kind](self.b.obj(inner, kind))

    def rid(self, o: dict[str, Json], what: str) -> str:
        return self.b.string_constant(self.b.get(o, "rid", what))

    def saved(self, o: dict[str, Json]) -> View:
        rid = self.rid(o, "SavedDataset")
        self.b.refuse_unreachable(rid)  # before anything else is expanded
        return View((Branch(rid),))

    def asset(self, o: dict[str, Json]) -> View:
        return View(tuple(asset_branches(self.b.catalog.asset(self.rid(o, "Asset")), {})))

    def run(self, o: dict[str, Json]) -> View:
        catalog = self.b.catalog
        return View(tuple(run_branches(catalog.run(self.rid(o, "Run")), catalog)))

    def _plain(self, view: View, kind: str) -> View:
        """`kind` transforms raw branches; over derived series it is refused by name."""
        if view.derived:
            raise refuse(
                kind, f"'{kind}' over a withSeries dataset; apply it to the withSeries input instead"
            )
        return view

    def combine(self, o: dict[str, Json]) -> View:
        inputs = self.b.get(o, "inputs", "CombinedDataset")
        if not isinstance(inputs, list):
            raise malformed("CombinedDataset.inputs must be a list")
        views = [self._plain(self.resolve(d), "combine") for d in inputs]
        branches = tuple(br for v in views for br in v.branches)
        self.b.budget.charge(len(branches))  # each a channel to read: combining copies multiply them
        return View(branches, dropped=frozenset().union(*(v.dropped for v in views)))

    def tag(self, o: dict[str, Json]) -> View:
        view = self._plain(self.resolve(self.b.get(o, "input", "TaggedDataset")), "tag")
        key = self.b.string_constant(self.b.get(o, "key", "TaggedDataset"))
        value = self.b.string_constant(self.b.get(o, "value", "TaggedDataset"))
        branches = tuple(
            replace(br, injected=tuple(sorted({**dict(br.injected), key: value}.items())))
            for br in view.branches
        )
        return replace(view, branches=branches)

    def filter(self, o: dict[str, Json]) -> View:
        view = self._plain(self.resolve(self.b.get(o, "input", "FilteredDataset")), "filter")
        branches: list[Branch] = list(view.branches)
        for condition in self.predicate(self.b.get(o, "predicate", "FilteredDataset")):
            branches = [nb for br in branches if (nb := br.with_filter(condition)) is not None]
        return replace(view, branches=tuple(branches))

    def predicate(self, value: Json) -> list[TagCondition]:
        kind, inner = variant("TagPredicate", value)
        o = self.b.obj(inner, kind)
        if kind == "and":
            return self.predicate(self.b.get(o, "left", "TagAnd")) + self.predicate(
                self.b.get(o, "right", "TagAnd")
            )
        key = self.b.string_constant(self.b.get(o, "key", kind))
        if key == NOMINAL_CHANNEL:
            raise refuse(
                "filter",
                "a NOMINAL_CHANNEL predicate selects channels without a name, which Sparkwire does not",
            )
        skind, values = variant("StringSetConstantV2", self.b.get(o, "values", kind))
        if skind == "variable":
            _, values = self.b.typed_variable(values, ("stringSet",))
            labels = frozenset(values) if isinstance(values, list) else None
        else:
            labels = (
                frozenset(self.b.string_constant(v) for v in values) if isinstance(values, list) else None
            )
        if labels is None or not all(isinstance(x, str) for x in labels):
            raise malformed(f"{kind}.values must be a set of strings")
        return [TagCondition(key, labels, negate=kind == "notIn")]

    def time_shift(self, o: dict[str, Json]) -> View:
        view = self._plain(self.resolve(self.b.get(o, "input", "TimeShiftedDataset")), "timeShift")
        offset = self.b.duration_expression(self.b.get(o, "offset", "TimeShiftedDataset"))
        return replace(
            view, branches=tuple(replace(br, shift_ns=br.shift_ns + offset) for br in view.branches)
        )

    def align_by_anchor(self, o: dict[str, Json]) -> View:
        """Only the form that stays in absolute time streams: run starts aligned onto the earliest
        run start (`reference: earliestAnchor`). Without a reference the output is relative time
        (the anchor at zero), which a window of wall-clock time cannot hold."""
        view = self._plain(self.resolve(self.b.get(o, "input", "AnchorAlignedDataset")), "alignByAnchor")
        if o.get("reference") is None:
            raise refuse(
                "alignByAnchor",
                "without a reference the output is in relative time, which a live window (wall-clock time) "
                "cannot show; add reference earliestAnchor",
            )
        variant("AnchorReference", o["reference"])
        _, anchor = variant("DatasetAnchor", self.b.get(o, "anchor", "AnchorAlignedDataset"))
        ikind, _ = variant("IntervalAnchor", anchor)
        if ikind != "intervalStart":
            raise refuse(
                "alignByAnchor",
                f"anchor '{ikind}': only run starts are known while a run streams (a streaming run has no "
                "end; events and ranges are not kept)",
            )
        starts = [br.resource.run_start_ns if br.resource else None for br in view.branches]
        if any(s is None for s in starts):
            raise refuse("alignByAnchor", "every branch of its input must come from a run")
        earliest = min((s for s in starts if s is not None), default=0)
        return replace(
            view,
            branches=tuple(
                replace(br, shift_ns=br.shift_ns + earliest - (s or 0))
                for br, s in zip(view.branches, starts, strict=True)
            ),
        )

    def with_series(self, o: dict[str, Json]) -> View:
        base = self.resolve(self.b.get(o, "input", "WithSeriesDataset"))
        entries = self.b.get(o, "series", "WithSeriesDataset")
        if not isinstance(entries, list):
            raise malformed("WithSeriesDataset.series must be a list")
        derived = dict(base.derived)
        dropped = set(base.dropped)
        seen: set[str] = set()
        for entry in entries:
            e = self.b.obj(entry, "NamedSeries")
            name = self.b.string_constant(self.b.get(e, "name", "NamedSeries"))
            if name in seen:
                raise not_supported(
                    f"withSeries names '{name}' twice; series names must be unique", "withSeries"
                )
            seen.add(name)
            derived[name] = Derived(self.b.get(e, "definition", "NamedSeries"), base)
            dropped.discard(name)
        return View(base.branches, tuple(derived.items()), frozenset(dropped))

    def drop_series(self, o: dict[str, Json]) -> View:
        view = self.resolve(self.b.get(o, "input", "DropSeriesDataset"))
        names = self.b.get(o, "names", "DropSeriesDataset")
        if not isinstance(names, list):
            raise malformed("DropSeriesDataset.names must be a list")
        gone = {self.b.string_constant(n) for n in names}
        derived = tuple((n, d) for n, d in view.derived if n not in gone)
        return View(view.branches, derived, view.dropped | gone)

    def reference(self, o: dict[str, Json]) -> View:
        """`DatasetReference`: the dataset of that name in `Context.datasetReferences` (the
        subscription's, or a computeNode variable's own context over it), resolved where it is
        referenced, as often as it is."""
        name = self.b.string_constant(self.b.get(o, "name", "DatasetReference"))
        if name not in self.references:
            known = ", ".join(sorted(self.references)) or "none"
            raise ComputeError(
                "InvalidComputation",
                f"dataset reference '{name}' names no dataset of the context's datasetReferences "
                f"(known: {known})",
                {"invalidTypes": "reference", "name": name},
            )
        if name in self._resolving:
            raise not_supported(f"dataset reference '{name}' refers to itself", "reference")
        self._resolving.append(name)
        try:
            return self.resolve(self.references[name])
        finally:
            self._resolving.pop()

    def with_dimensions(self, o: dict[str, Json]) -> View:
        view = self._plain(self.resolve(self.b.get(o, "input", "DimensionsDataset")), "withDimensions")
        dimensions = self.b.get(o, "dimensions", "DimensionsDataset")
        if not isinstance(dimensions, list) or not dimensions or len(dimensions) > 10:
            raise not_supported("withDimensions needs 1 to 10 dimensions", "withDimensions")
        keyed: list[tuple[str, str]] = []  # (tag key, property name)
        for dim in dimensions:
            d = self.b.obj(dim, "Dimension")
            vkind, value = variant("DimensionValue", self.b.get(d, "value", "Dimension"))
            if vkind != "stringProperty":
                raise refuse(
                    "withDimensions",
                    f"dimension '{vkind}': Sparkwire's assets have no types (only properties)",
                )
            prop = self.b.string_constant(self.b.get(self.b.obj(value, vkind), "propertyName", vkind))
            key = self.b.string_constant(d["tagKey"]) if d.get("tagKey") is not None else prop
            if key in (ASSET_RID, DATA_SCOPE, RUN_RID, NOMINAL_CHANNEL) or key.startswith(
                ("NOMINAL_", "EVENT_LABEL_PREFIX:")
            ):
                raise not_supported(f"withDimensions tag key '{key}' is reserved", "withDimensions")
            keyed.append((key, prop))
        if len({k for k, _ in keyed}) != len(keyed):
            raise not_supported("withDimensions: every dimension needs a distinct tag key", "withDimensions")
        branches = []
        for br in view.branches:
            props = dict(br.resource.properties) if br.resource else {}
            tags = {**dict(br.injected), **{k: props.get(p, NOMINAL_ABSENT) for k, p in keyed}}
            branches.append(replace(br, injected=tuple(sorted(tags.items()))))
        return replace(view, branches=tuple(branches))

    def search(self, o: dict[str, Json]) -> View:
        """Assets or runs of Sparkwire's catalog matching a `ResourceSearchQuery` over their string
        properties (`properties`, `and`, `or`, `not`), in rid order, at most `maxResults`."""
        target, inner = variant("SearchTarget", self.b.get(o, "target", "SearchDataset"))
        query = self.b.get(self.b.obj(inner, target), "query", target)
        limit = o.get("maxResults")
        limit = 10_000 if limit is None else limit
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise malformed("SearchDataset.maxResults must be a non-negative integer")
        self.matches(query, {})  # a query Sparkwire cannot answer is refused whatever the catalog holds
        catalog = self.b.catalog
        branches: list[Branch] = []
        if target == "assets":
            every = catalog.all_assets()
            self.b.budget.charge(len(every))  # each entry read is a step: a search referenced often adds up
            assets = [a for a in every if self.matches(query, a.properties)]
            for asset in assets[:limit]:
                catalog.found(asset)
                branches += asset_branches(asset, {})
        else:
            every_run = catalog.all_runs()
            self.b.budget.charge(len(every_run))
            runs = [r for r in every_run if self.matches(query, r.properties)]
            for run in runs[:limit]:
                branches += run_branches(catalog.run(run.rid), catalog)  # a run that has ended is refused
        return View(tuple(branches))

    def matches(self, query: Json, properties: dict[str, str]) -> bool:
        kind, inner = variant("ResourceSearchQuery", query)
        if kind in ("and", "or"):
            if not isinstance(inner, list):
                raise malformed(f"ResourceSearchQuery.{kind} must be a list")
            results = [self.matches(q, properties) for q in inner]  # every branch checked, no short cut
            return all(results) if kind == "and" else any(results)
        if kind == "not":
            return not self.matches(inner, properties)
        if kind == "properties":
            f = self.b.obj(inner, "PropertiesFilter")
            name, values = (
                self.b.get(f, "name", "PropertiesFilter"),
                self.b.get(f, "values", "PropertiesFilter"),
            )
            if not isinstance(name, str) or not isinstance(values, list):
                raise malformed("PropertiesFilter needs a name and a list of values")
            return properties.get(name) in values
        reasons = {
            "labels": "Sparkwire's assets and runs have no labels",
            "workspace": "Sparkwire has no workspaces",
            "numericProperty": "Sparkwire searches string properties only (not typed numeric ones)",
            "numericPropertyRange": "Sparkwire searches string properties only (not typed numeric ones)",
        }
        raise refuse("search", f"a '{kind}' query: {reasons[kind]}; search by string properties")
