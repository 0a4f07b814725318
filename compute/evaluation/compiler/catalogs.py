"""What a compilation may look up beyond its request, passed in by whoever compiles (the server's
stores): the assets and runs, the modules `derived` series apply, the events `eventsSearch` finds.
The compiler keeps none of them itself, so compiling does no I/O of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from compute.storage.assets import Asset, Run
from compute.storage.events import Event
from compute.storage.modules import Module, ModuleVersion


class AssetCatalog(Protocol):
    def asset(self, rid: str) -> Asset | None: ...

    def run(self, rid: str) -> Run | None: ...

    def assets(self) -> list[Asset]: ...

    def runs(self) -> list[Run]: ...


class ModuleCatalog(Protocol):
    def module_named(self, api_name: str) -> Module | None: ...

    def version(self, module: Module, version: int) -> ModuleVersion | None: ...


class EventCatalog(Protocol):
    def events(self) -> list[Event]: ...


@dataclass(frozen=True)
class Catalogs:
    """None: that catalog is not kept (an asset, module or event named is then unknown)."""

    assets: AssetCatalog | None = None
    modules: ModuleCatalog | None = None
    events: EventCatalog | None = None


NO_CATALOGS = Catalogs()
