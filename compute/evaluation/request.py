"""What a subscription asks to compute, as plain data: the node, the window, the context, the
allowed lateness and the result options. Identical requests share one computation (`key`); a
request travels as JSON from an edge to the compute tier, which compiles it itself (app/tiers/)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from compute.evaluation.compiler import Json, Limits, Plan, ResultOptions, compile_plan


@dataclass(frozen=True)
class ComputationRequest:
    node: Json
    window_ns: int
    context: dict[str, Json]
    allowed_lateness_ns: int | None
    options: ResultOptions = field(default_factory=ResultOptions)

    @cached_property
    def key(self) -> str:
        """Same node, window, context, lateness and result options: one shared computation. The
        options are part of it because they change the output (decimation, append-only ranges)."""
        return json.dumps(self._fields(), sort_keys=True, separators=(",", ":"))

    def compile(self, limits: Limits) -> Plan:
        return compile_plan(self.node, self.window_ns, self.context, limits, self.options)

    def _fields(self) -> list[Any]:
        options = [self.options.append_only, self.options.decimate]
        return [self.node, self.window_ns, self.context, self.allowed_lateness_ns, options]

    def to_json(self) -> str:
        return self.key

    @classmethod
    def from_json(cls, text: str | bytes) -> ComputationRequest:
        node, window_ns, context, lateness, (append_only, decimate) = json.loads(text)
        return cls(node, int(window_ns), context, lateness, ResultOptions(bool(append_only), bool(decimate)))
