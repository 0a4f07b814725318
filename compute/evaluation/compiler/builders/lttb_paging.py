"""Builders of what Nominal only polls of a series' points, used only when polled (ComputeService):
the `largestTriangleThreeBuckets` NumericSeries, and the `SummarizationStrategy` variants
`largestTriangleThreeBuckets`, `page` and `truncate` of the `series` root (numeric.py's
`_summarize_series` hands a polled strategy here through the registry). A live subscription gets
their refusals with Nominal's `PollingOnlyComputation` types (refusals.py, numeric.py)."""

from __future__ import annotations

from typing import Any

from compute.evaluation import nodes
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.registry import polls
from compute.evaluation.errors import MalformedNode, refuse
from compute.evaluation.nodes.lttb_paging import (
    MAX_LTTB_POINTS,
    MAX_PAGE_SIZE,
    MAX_TRUNCATE_POINTS,
    LargestTriangleThreeBuckets,
    LttbStrategy,
    PageStrategy,
    PolledSummary,
    Strategy,
    Token,
    TruncateStrategy,
)
from compute.evaluation.output_format import arrow_format

Json = Any


def _within(what: str, field: str, n: int, least: int, most: int) -> int:
    if not least <= n <= most:
        raise refuse(what, field, f"{what}.{field} must be from {least} to {most:,}, got {n}")
    return n


def _integer(value: Json, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedNode(f"{what} must be an integer")
    return value


@polls("NumericSeries", "largestTriangleThreeBuckets")
def _lttb_series(b: Builder, v: Json) -> nodes.SeriesNode:
    what = "largestTriangleThreeBuckets"
    o = b.obj(v, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), what)
    n = b.integer_constant(b.get(o, "maxPointsToReturn", what))
    return LargestTriangleThreeBuckets(x, _within(what, "maxPointsToReturn", n, 1, MAX_LTTB_POINTS))


def _member(value: Json, union: str, kind: str) -> Json:
    """The value of a one-variant union (PageStrategy, PageToken, TruncateStrategy)."""
    if not isinstance(value, dict) or value.get("type") != kind or value.get(kind) is None:
        raise MalformedNode(f"{union}: expected {{'type': '{kind}', '{kind}': ...}}")
    return value[kind]


def _page_token(b: Builder, value: Json) -> Token:
    inner = _member(value, "PageToken", "timestampAndId")
    o = b.obj(inner, "TimestampAndId")
    t = b.obj(b.get(o, "timestamp", "TimestampAndId"), "Timestamp")
    seconds, nanos = t.get("seconds"), t.get("nanos", 0)
    if not isinstance(seconds, int) or not isinstance(nanos, int) or isinstance(seconds, bool):
        raise MalformedNode("a Timestamp needs integer 'seconds' and 'nanos'")
    ident = o.get("id")
    if ident is None:
        return seconds * 1_000_000_000 + nanos, 0
    if not isinstance(ident, str) or not ident.isdigit():
        raise refuse("page", "pageToken", f"page.pageToken: id {ident!r} is not a token Sparkwire gave")
    return seconds * 1_000_000_000 + nanos, int(ident)


def _strategy(b: Builder, kind: str, inner: Json) -> Strategy:
    if kind == "largestTriangleThreeBuckets":
        o = b.obj(inner, "LttbStrategy")
        n = _integer(b.get(o, "maxPointsPerGroup", "LttbStrategy"), "LttbStrategy.maxPointsPerGroup")
        return LttbStrategy(_within(kind, "maxPointsPerGroup", n, 1, MAX_LTTB_POINTS))
    if kind == "truncate":
        n = _integer(
            _member(inner, "TruncateStrategy", "maxPointsToReturn"), "TruncateStrategy.maxPointsToReturn"
        )
        return TruncateStrategy(_within(kind, "maxPointsToReturn", n, 0, MAX_TRUNCATE_POINTS))
    o = b.obj(_member(inner, "PageStrategy", "pageInfo"), "PageInfo")
    size = _integer(b.get(o, "pageSize", "PageInfo"), "PageInfo.pageSize")
    if size == 0 or abs(size) > MAX_PAGE_SIZE:
        raise refuse(
            kind,
            "pageSize",
            f"page.pageSize must be non-zero and at most {MAX_PAGE_SIZE:,} in size, got {size}",
        )
    token = o.get("pageToken")
    return PageStrategy(size, None if token is None else _page_token(b, token))


@polls("SummarizationStrategy", "largestTriangleThreeBuckets", "page", "truncate")
def _polled_summary(b: Builder, o: dict[str, Json]) -> nodes.OutputNode:
    """`o`: the whole SummarizeSeries (its strategy is one of these three). The answer is the
    selected points (LEGACY, or Arrow's `arrowNumeric`); buckets, resolution and numericAggregations
    do not apply."""
    kind, inner = b.variant("SummarizationStrategy", b.get(o, "summarizationStrategy", "SummarizeSeries"))
    strategy = _strategy(b, kind, inner)
    series = b.timed(b.series(b.get(o, "input", "SummarizeSeries")), "series")
    return PolledSummary(series, strategy, arrow_format(o))
