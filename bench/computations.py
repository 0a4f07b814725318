"""The computations the workloads subscribe to, as Nominal `StreamingComputeNodeSubscription` JSON,
and how to read from a frame which of the feed's points it already includes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.feed import channel_name

Json = Any
NANOS = 1_000_000_000
KINDS = ("raw", "bucketed", "arithmetic", "ranges")


@dataclass(frozen=True)
class BenchSubscription:
    kind: str
    body: Json  # StreamingComputeNodeSubscription
    measure: str  # how a frame shows progress: "points", "buckets" or "none" (ranges)


def named_channel(rid: str, name: str, **fields: Json) -> Json:
    """The numeric series of channel `name` of data source `rid`, untagged (`fields`: more of its
    dataSource's fields)."""
    lit = {"type": "literal"}
    source = {"dataSourceRid": {**lit, "literal": rid}, "channel": {**lit, "literal": name}, "tags": {}}
    return {"type": "channel", "channel": {"type": "dataSource", "dataSource": {**source, **fields}}}


def _channel(rid: str, channel: int) -> Json:
    return named_channel(rid, channel_name(channel), tagsToGroupBy=[], groupByTags=[])


def _raw(name: str) -> Json:
    return {"type": "raw", "raw": {"name": name}}


def _summarize(series: Json, buckets: int | None = None) -> Json:
    body: Json = {"input": {"type": "numeric", "numeric": series}, "numericAggregations": {}}
    if buckets is not None:
        body["buckets"] = buckets
    return {"type": "series", "series": body}


def _subscription(node: Json, variables: Json, window_ns: int, min_delay_ms: int = 0) -> Json:
    return {
        "computeRequest": {
            "node": node,
            "windowWidth": {"seconds": window_ns // NANOS, "nanos": window_ns % NANOS},
            "context": {"variables": variables, "datasetReferences": {}},
        },
        "subscriptionOptions": {"minDelay": min_delay_ms, "allowAppends": True},
    }


# Raw results ask for up to RAW_POINTS points, so a few seconds of a 1 kHz channel stay undecimated.
# The window is relative to the server's clock: a short one (say 500 ms) would show nothing at all
# whenever the stream lags by more than that, which is exactly when a latency benchmark must measure.
RAW_POINTS = 10_000


def raw(rid: str, channel: int, window_ms: int) -> BenchSubscription:
    node = _summarize(_raw("x"), RAW_POINTS)
    return BenchSubscription(
        "raw", _subscription(node, {"x": _channel(rid, channel)}, window_ms * 1_000_000), "points"
    )


def bucketed(rid: str, channel: int, buckets: int, window_s: int = 60) -> BenchSubscription:
    node = _summarize(_raw("x"), buckets)
    body = _subscription(node, {"x": _channel(rid, channel)}, window_s * NANOS)
    return BenchSubscription("bucketed", body, "buckets")


def arithmetic(rid: str, left: int, right: int, window_ms: int) -> BenchSubscription:
    node = _summarize({"type": "add", "add": {"left": _raw("x"), "right": _raw("y")}}, RAW_POINTS)
    variables = {"x": _channel(rid, left), "y": _channel(rid, right)}
    return BenchSubscription("arithmetic", _subscription(node, variables, window_ms * 1_000_000), "points")


def ranges(rid: str, channel: int, threshold: float, window_s: int = 10) -> BenchSubscription:
    node = {
        "type": "ranges",
        "ranges": {
            "input": {
                "type": "threshold",
                "threshold": {
                    "input": _raw("x"),
                    "threshold": {"type": "literal", "literal": threshold},
                    "operator": "GREATER_THAN",
                },
            }
        },
    }
    return BenchSubscription(
        "ranges", _subscription(node, {"x": _channel(rid, channel)}, window_s * NANOS), "none"
    )


def example(kind: str, rid: str) -> BenchSubscription:
    return mix(rid, 10, [kind])[0]


def mix(
    rid: str, count: int, kinds: list[str], channels: int = 10, bucket_step: int = 7
) -> list[BenchSubscription]:
    """`count` distinct computations cycling over `kinds` and the channels; the i-th asks for
    100 + bucket_step * i buckets when bucketed."""
    out = []
    for i in range(count):
        kind, c = kinds[i % len(kinds)], i % channels
        if kind == "raw":
            out.append(raw(rid, c, 5000 + i))
        elif kind == "bucketed":
            out.append(bucketed(rid, c, 100 + bucket_step * i))
        elif kind == "arithmetic":
            out.append(arithmetic(rid, c, (c + 1) % channels, 5000 + i))
        else:  # the threshold varies with i itself, so no two ranges computations are the same
            out.append(ranges(rid, c, c - 0.5 + (i // channels) / 100))
    return out


def included_through(update: Json) -> int:
    """The newest feed timestamp a frame proves delivered (-1 if it shows none).

    The feed writes every channel's ticks in order and the stream applies them in order, so a
    frame's newest point (or its last bucket's lastPoint) bounds everything it includes.
    """
    kind = update["type"]
    result = (
        update["full"]["result"]
        if kind == "full"
        else update[kind].get("result")
        if kind == "append"
        else None
    )
    if result is None:
        return -1
    rtype = result["type"]
    body = result.get(rtype)
    if rtype in ("numeric", "enum"):
        stamps = body["timestamps"]
        return _ns(stamps[-1]) if stamps else -1
    if rtype in ("bucketedNumeric", "bucketedEnum"):
        buckets = body["buckets"]
        if not buckets:
            return -1
        last = buckets[-1].get("lastPoint") or buckets[-1].get("firstPoint")
        if last is not None:
            return _ns(last["timestamp"])
        # a one-point bucket: its point is the first tick at or after the bucket's start
        # (a lower bound: the previous bucket's end, or nothing if there is none)
        ends = body["timestamps"]
        return _ns(ends[-2]) if len(ends) > 1 else -1
    return -1


def _ns(t: Json) -> int:
    return int(t["seconds"]) * NANOS + int(t["nanos"])
