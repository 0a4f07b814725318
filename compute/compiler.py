"""From a subscription's `ComputableNode` + `Context` to a Plan: the channels it reads (data for the
single Spark job, never plan branches) and the tree of evaluators (compute/nodes.py).

Every refusal is a ComputeError carrying Nominal's error name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compute import nodes
from compute.errors import ComputeError, invalid_computation, polling_only
from compute.nominal_variants import INVALID_TYPES, POLLING_ONLY_TYPES, STRATEGY_POLLING_ONLY, VARIANTS
from compute.series import ChannelSelector
from compute.summarize import Decimation

Json = Any


class MalformedNode(ValueError):
    """Not a Nominal node at all: the client message is invalid (clientMessageError)."""


@dataclass(frozen=True)
class Limits:
    max_window_ns: int = 24 * 3600 * 1_000_000_000
    max_points: int = 1_000_000  # TooManyPoints: a result may not ask for more buckets/points than this


@dataclass(frozen=True)
class ResultOptions:
    append_only: bool = False
    decimate: bool = True


@dataclass
class Plan:
    root: nodes.OutputNode
    selectors: list[ChannelSelector]
    window_ns: int
    lookback_ns: int
    grouped: bool


@dataclass
class _Builder:
    context: Mapping[str, Json]
    selectors: list[ChannelSelector] = field(default_factory=list)

    # -- unions ------------------------------------------------------------------------------------
    def variant(self, union: str, value: Json) -> tuple[str, Json]:
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise MalformedNode(f"{union}: expected a union object with a 'type'")
        kind = value["type"]
        if kind not in VARIANTS.get(union, frozenset()):
            raise MalformedNode(f"{union}: unknown variant '{kind}'")
        if kind not in value:
            raise MalformedNode(f"{union}: variant '{kind}' has no value")
        return kind, value[kind]

    def unsupported(self, union: str, kind: str) -> ComputeError:
        if kind in POLLING_ONLY_TYPES:
            return polling_only(f"{union} '{kind}' supports polling only", POLLING_ONLY_TYPES[kind])
        if kind in INVALID_TYPES:
            return invalid_computation(f"{union} '{kind}' cannot stream", INVALID_TYPES[kind])
        return invalid_computation(f"{union} '{kind}' is not supported by Sparkwire", kind)

    # -- variables and constants -------------------------------------------------------------------
    def variable(self, name: Json) -> tuple[str, Json]:
        if not isinstance(name, str):
            raise MalformedNode("a variable name must be a string")
        if name not in self.context:
            raise ComputeError(
                "InvalidComputation",
                f"unknown variable '{name}'",
                {"invalidTypes": "variable", "variable": name},
            )
        return self.variant("VariableValue", self.context[name])

    def string_constant(self, value: Json) -> str:
        kind, inner = self.variant_of(value, ("literal", "variable"))
        if kind == "literal":
            if not isinstance(inner, str):
                raise MalformedNode("a string literal must be a string")
            return inner
        vkind, vvalue = self.variable(inner)
        if vkind != "string" or not isinstance(vvalue, str):
            raise ComputeError(
                "InvalidComputation", f"variable '{inner}' is not a string", {"invalidTypes": vkind}
            )
        return vvalue

    @staticmethod
    def variant_of(value: Json, allowed: tuple[str, ...]) -> tuple[str, Json]:
        if not isinstance(value, dict) or value.get("type") not in allowed or value["type"] not in value:
            raise MalformedNode(f"expected one of {allowed}")
        return value["type"], value[value["type"]]

    # -- channels ----------------------------------------------------------------------------------
    def channel_input(self, reference: Json, expect: str | None) -> nodes.ChannelInput:
        if not isinstance(reference, dict) or not isinstance(reference.get("name"), str):
            raise MalformedNode("a Reference needs a 'name'")
        kind, value = self.variable(reference["name"])
        if kind != "channel":
            raise ComputeError(
                "InvalidComputation",
                f"variable '{reference['name']}' is a {kind}, not a channel",
                {"invalidTypes": kind},
            )
        ckind, source = self.variant("ChannelSeries", value)
        if ckind != "dataSource":
            raise self.unsupported("ChannelSeries", ckind)
        return self.data_source_channel(source, expect)

    def data_source_channel(self, source: Json, expect: str | None) -> nodes.ChannelInput:
        if not isinstance(source, dict):
            raise MalformedNode("DataSourceChannel must be an object")
        tags = source.get("tags") or {}
        if not isinstance(tags, dict):
            raise MalformedNode("DataSourceChannel.tags must be a map")
        group_by = [self.string_constant(g) for g in source.get("groupByTags") or []]
        group_by += [g for g in source.get("tagsToGroupBy") or [] if isinstance(g, str)]
        if source.get("tagFilters"):
            raise invalid_computation("tagFilters are not supported; use tags", "tagFilters")
        selector = ChannelSelector(
            data_source_rid=self.string_constant(source.get("dataSourceRid")),
            channel=self.string_constant(source.get("channel")),
            tags=tuple(sorted((k, self.string_constant(v)) for k, v in tags.items())),
            group_by=tuple(sorted(set(group_by))),
        )
        self.selectors.append(selector)
        return nodes.ChannelInput(len(self.selectors) - 1, expect)

    # -- series ------------------------------------------------------------------------------------
    def series(self, value: Json) -> nodes.SeriesNode:
        kind, inner = self.variant("Series", value)
        if kind == "raw":
            return self.channel_input(inner, None)
        if kind == "numeric":
            return self.numeric(inner)
        if kind == "enum":
            return self.enum(inner)
        raise self.unsupported("Series", kind)

    def numeric(self, value: Json) -> nodes.SeriesNode:
        kind, inner = self.variant("NumericSeries", value)
        build = NUMERIC_BUILDERS.get(kind)
        if build is None:
            raise self.unsupported("NumericSeries", kind)
        return build(self, inner)

    def enum(self, value: Json) -> nodes.SeriesNode:
        kind, inner = self.variant("EnumSeries", value)
        build = ENUM_BUILDERS.get(kind)
        if build is None:
            raise self.unsupported("EnumSeries", kind)
        return build(self, inner)


SeriesBuilder = Callable[[_Builder, Json], nodes.SeriesNode]


def _numeric_channel(b: _Builder, v: Json) -> nodes.SeriesNode:
    kind, source = b.variant("ChannelSeries", v)
    if kind != "dataSource":
        raise b.unsupported("ChannelSeries", kind)
    return b.data_source_channel(source, "numeric")


def _enum_channel(b: _Builder, v: Json) -> nodes.SeriesNode:
    kind, source = b.variant("ChannelSeries", v)
    if kind != "dataSource":
        raise b.unsupported("ChannelSeries", kind)
    return b.data_source_channel(source, "enum")


NUMERIC_BUILDERS: dict[str, SeriesBuilder] = {
    "raw": lambda b, v: b.channel_input(v, "numeric"),
    "channel": _numeric_channel,
}
ENUM_BUILDERS: dict[str, SeriesBuilder] = {
    "raw": lambda b, v: b.channel_input(v, "enum"),
    "channel": _enum_channel,
}


def _summarize_series(
    b: _Builder, value: Json, window_ns: int, limits: Limits, options: ResultOptions
) -> nodes.OutputNode:
    if not isinstance(value, dict):
        raise MalformedNode("SummarizeSeries must be an object")
    strategy = value.get("summarizationStrategy")
    if strategy is not None:
        skind, _ = b.variant_of(strategy, ("decimate", "largestTriangleThreeBuckets", "page", "truncate"))
        if skind in STRATEGY_POLLING_ONLY:
            raise polling_only(
                f"summarization strategy '{skind}' supports polling only", STRATEGY_POLLING_ONLY[skind]
            )
    buckets, resolution = value.get("buckets"), value.get("resolution")
    for name, x in (("buckets", buckets), ("resolution", resolution)):
        if x is not None and (not isinstance(x, int) or isinstance(x, bool)):
            raise MalformedNode(f"SummarizeSeries.{name} must be an integer")
    decimation = Decimation.of(window_ns, buckets, resolution)
    if decimation.max_points > limits.max_points:
        raise ComputeError(
            "TooManyPoints",
            f"{decimation.max_points} buckets exceed the limit",
            {"limit": str(limits.max_points)},
        )
    return nodes.SummarizeSeries(
        b.series(value.get("input")), decimation, decimate=options.decimate, max_points=decimation.max_points
    )


def compile_plan(
    node: Json, window_ns: int, context: Mapping[str, Json], limits: Limits, options: ResultOptions
) -> Plan:
    """Raises ComputeError for a valid request Sparkwire refuses, MalformedNode for a broken one."""
    if window_ns < 0:
        raise ComputeError("WindowNegative", f"windowWidth is negative ({window_ns} ns)")
    if window_ns > limits.max_window_ns:
        raise ComputeError(
            "WindowTooLarge",
            f"windowWidth {window_ns} ns exceeds {limits.max_window_ns} ns",
            {"maxWindowNanos": str(limits.max_window_ns)},
        )
    b = _Builder(context)
    kind, value = b.variant("ComputableNode", node)
    if kind == "series":
        root = _summarize_series(b, value, window_ns, limits, options)
    else:
        raise b.unsupported("ComputableNode", kind)
    return Plan(root, b.selectors, window_ns, lookback_ns=0, grouped=any(s.group_by for s in b.selectors))


def computation_key(node: Json, window_ns: int, context: Json, allowed_lateness_ns: int | None) -> str:
    """Identical subscriptions (same node, window, context and lateness) share one computation."""
    return json.dumps([node, window_ns, context, allowed_lateness_ns], sort_keys=True, separators=(",", ":"))
