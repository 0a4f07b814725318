"""Edits of the asset and run catalog reach the live subscriptions over them: the HTTP routes that
change it (app/api/assets.py) publish each change here, and every open connection's session compiles
again the subscriptions that resolved through it (app/protocol/ws_session.py `catalog_changed`).
Only this process's connections hear of it: docs/decisions/0056-catalog-edits-re-resolve.md."""

from __future__ import annotations

import logging
from typing import Protocol

from compute.evaluation.datasets import CatalogKind

logger = logging.getLogger(__name__)


class CatalogListener(Protocol):
    def catalog_changed(self, kind: CatalogKind, rid: str) -> None:
        """Re-resolve what read this asset or run; never raises for one subscription's trouble."""
        ...


class CatalogEdits:
    def __init__(self) -> None:
        self._listeners: set[CatalogListener] = set()

    def add(self, listener: CatalogListener) -> None:
        self._listeners.add(listener)

    def discard(self, listener: CatalogListener) -> None:
        self._listeners.discard(listener)

    def changed(self, kind: CatalogKind, rid: str) -> None:
        """On the loop, once the change is stored: an asset or run was created, changed or deleted."""
        for listener in list(self._listeners):
            try:
                listener.catalog_changed(kind, rid)
            except Exception:  # one connection's failure must not keep the edit from the others
                logger.exception(
                    "a connection could not re-resolve its subscriptions after an edit of %s", rid
                )
