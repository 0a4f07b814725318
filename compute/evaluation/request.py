"""What a subscription asks to compute, as plain data: the node, the window, the context (its
variables and dataset references), the allowed lateness and the result options, and how it resolved
against the asset and run catalog. Identical requests share one computation (`key`); a request
travels as JSON from an edge to the compute tier, which compiles it itself (app/tiers/)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from compute.evaluation.compiler.builder import Json
from compute.evaluation.compiler.catalogs import NO_CATALOGS, Catalogs
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import Plan, compile_plan
from compute.storage.catalog_reach import Reach


@dataclass(frozen=True)
class ComputationRequest:
    node: Json
    window_ns: int
    context: dict[str, Json]
    allowed_lateness_ns: int | None
    options: ResultOptions = field(default_factory=ResultOptions)
    dataset_references: dict[str, Json] = field(default_factory=dict)  # Context.datasetReferences
    # The digest of the assets and runs its plan resolved through (`Plan.catalog`), None if none:
    # the same request compiled after an edit of them is another computation.
    resolution: str | None = None
    # The token's reach, kept only when the plan searched the catalog (`CatalogUse.reach`): a search
    # finds what its token may see, so the compute tier searches with it too, and tokens of other
    # reach have computations of their own.
    reach: Reach | None = None
    # `sparkwire.streamPolled` (docs/extensions.md): the polled variants builders/streamed.py marks
    # are built live too. Part of the key: the same node without it is refused, never shared.
    stream_polled: bool = False

    @cached_property
    def key(self) -> str:
        """Same node, window, context, lateness, result options and resolution: one shared
        computation. The options are part of it because they change the output (decimation,
        append-only ranges)."""
        return json.dumps(self._fields(), sort_keys=True, separators=(",", ":"))

    def compile(
        self,
        limits: Limits,
        may_read: Callable[[str], bool] | None = None,
        reach: Reach | None = None,
        catalogs: Catalogs = NO_CATALOGS,
        polled: bool = False,
    ) -> Plan:
        """`may_read`: whether the token reaches a data source (compile_plan checks each read);
        `reach`: the catalog entries it may see (None: this request's own, if any); `catalogs`: the
        assets, runs, modules and events it may look up; `polled`: computed once over a past
        period (ComputeService), the variants Nominal only polls built too."""
        return compile_plan(
            self.node,
            self.window_ns,
            self.context,
            limits,
            self.options,
            self.dataset_references,
            may_read,
            reach if reach is not None else self.reach,
            catalogs,
            polled,
            self.stream_polled and not polled,
        )

    def resolved(self, plan: Plan) -> ComputationRequest:
        """This request keyed by how `plan` (its compilation) resolved against the catalog."""
        if plan.catalog is None:
            return replace(self, resolution=None, reach=None)
        return replace(self, resolution=plan.catalog.digest, reach=plan.catalog.reach)

    def _fields(self) -> list[Any]:
        options = [self.options.append_only, self.options.decimate]
        fields = [self.node, self.window_ns, self.context, self.allowed_lateness_ns, options]
        # keys of older requests unchanged
        if self.dataset_references or self.resolution is not None or self.stream_polled:
            fields += [self.dataset_references, self.resolution]
        if self.reach is not None or self.stream_polled:
            fields.append(None if self.reach is None else self.reach.to_json())
        if self.stream_polled:
            fields.append({"streamPolled": True})
        return fields

    def to_json(self) -> str:
        return self.key

    @classmethod
    def from_json(cls, text: str | bytes) -> ComputationRequest:
        node, window_ns, context, lateness, (append_only, decimate), *rest = json.loads(text)
        references, resolution = rest[:2] if rest else ({}, None)
        reach = Reach.from_json(rest[2]) if len(rest) > 2 and rest[2] is not None else None
        stream_polled = len(rest) > 3 and bool(rest[3].get("streamPolled"))
        options = ResultOptions(bool(append_only), bool(decimate))
        return cls(
            node, int(window_ns), context, lateness, options, references, resolution, reach, stream_polled
        )
