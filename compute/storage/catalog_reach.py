"""Who may see an entry of the catalogs (assets, runs, modules): the rule of tenancy, in one place for
the HTTP routes (app/api/assets.py, app/api/modules.py) and for the compilation of a plan
(compute/evaluation/compiler/datasets.py, builders/derived.py), so that no node reads what a route would hide.

A token's reach is its `dataSourceRids` claim (exact rids or shell patterns); an `admin` token, and
every request with authentication off, reaches everything (the operators' view).
- An asset is seen by a token that reaches at least one data source of its data scopes: its data
  is that data source's, whoever else's data it also names (its other scopes are still refused by
  name when read: a subscription is checked against each data source it reads).
- A run is seen by a token that reaches at least one data source of its own data scopes or of its
  assets' scopes (a run is its assets over a time range).
- An asset or run with no data source at all belongs to no tenant that can be told: only admins see
  it (failing closed; only admins create them, so nothing is hidden from its creator).
- A module belongs to the reach of the token that created it (kept with it): a token sees it if its
  reach and the creator's overlap, i.e. one of the two sets of patterns matches a pattern of the
  other. A module made by an admin reaching `*` is everyone's (a shared library); one made by a
  tenant's admin (`dataSourceRids: ["ri.a.*"]`) is that tenant's. Modules written before their
  creator's reach was kept count as made by `*`: they were everyone's then."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from compute.storage.assets import Asset, Run

EVERYONE = ("*",)  # the reach of a module made before reaches were kept


@dataclass(frozen=True)
class Reach:
    patterns: tuple[str, ...]
    everything: bool = False  # an admin's, or authentication off

    def reaches(self, data_source_rid: str) -> bool:
        return self.everything or any(fnmatch.fnmatchcase(data_source_rid, p) for p in self.patterns)

    def sees_sources(self, data_source_rids: Iterable[str]) -> bool:
        """At least one of these (none: admins only)."""
        return self.everything or any(self.reaches(rid) for rid in data_source_rids)

    def sees_asset(self, asset: Asset) -> bool:
        return self.sees_sources(s.data_source_rid for s in asset.data_scopes)

    def sees_run(self, run: Run, asset: Callable[[str], Asset | None]) -> bool:
        """`asset` looks up the run's assets (a rid no asset has any more adds nothing)."""
        if self.everything:
            return True
        if self.sees_sources(s.data_source_rid for s in run.data_scopes):
            return True
        return any((a := asset(rid)) is not None and self.sees_asset(a) for rid in run.asset_rids)

    def sees_module(self, creator_reach: Iterable[str]) -> bool:
        """Whether this reach overlaps the module's creator's. A pattern matched as a string by a
        pattern of the other side (`ri.a.*` by `ri.a.*` or `*`; `ri.a.x` by `ri.a.*`) names a data
        source both reach."""
        if self.everything:
            return True
        creator = tuple(creator_reach)
        return any(
            fnmatch.fnmatchcase(c, p) or fnmatch.fnmatchcase(p, c) for c in creator for p in self.patterns
        )

    # A request that searched the catalog carries the reach it searched with (request.py), from the
    # edge that compiled it to the compute tier that compiles it again.
    def to_json(self) -> list[Any]:
        return [list(self.patterns), self.everything]

    @classmethod
    def from_json(cls, value: Any) -> Reach:
        patterns, everything = value
        return cls(tuple(str(p) for p in patterns), bool(everything))


EVERYTHING = Reach((), everything=True)
