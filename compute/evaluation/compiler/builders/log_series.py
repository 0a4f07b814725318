"""Builders of the `LogSeries` variants beyond a channel's lines and `filter` (builders/logs.py),
registered with `polls`: Nominal refuses every LogSeries to a subscription (PollingOnlyComputation
`LOG_SERIES`, which live subscriptions keep); Nominal's ComputeService computes them, and so does
Sparkwire's, each with the evaluator its numeric or enum form uses:
- `selectLogs` (`SelectSeries`): one log channel of a dataset, by name, as `selectEnum` selects;
- `timeShift` (`LogTimeShiftSeries`): every line moved by the duration (nodes/time_ops.py);
- `toStartOfInterval` (`LogToStartOfIntervalSeries`): "a point at timestamp `t` (nanoseconds) is
  rewritten to `floor(t / window) * window`. Values and tag groupings are preserved; aggregation
  of points that collide ... is the responsibility of downstream nodes": every line kept
  (nodes/aggregate.py);
- `union` (`LogUnionSeries`, operation KEEP_ALL, the only one nominal-api lists): every line of
  every input in time order (nodes/enum_ops.py).
The inner log series is built by `Series.log`'s builder, the one a polled log series uses.
`filterByTag` and `selectTags` are built with the numeric and enum ones (builders/cross_group.py),
`derived` with the other derived series (builders/derived.py: always refused by name, as no module
function computes log lines)."""

from __future__ import annotations

from typing import Any

from compute.evaluation import nodes
from compute.evaluation.compiler import registry
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.registry import polls
from compute.evaluation.durations import human_duration
from compute.evaluation.errors import ComputeError, MalformedNode, refuse
from compute.evaluation.nodes.aggregate import ToStartOfInterval
from compute.evaluation.nodes.enum_ops import EnumUnion
from compute.evaluation.results import INT64_MAX

Json = Any
B = Builder


def _log(b: B, value: Json) -> nodes.SeriesNode:
    """An inner `LogSeries`, built as a polled `Series.log` is (builders/logs.py's `log_series`)."""
    node: nodes.SeriesNode = registry.builder("Series", "log", polled=True)(b, value)
    return node


@polls("LogSeries", "selectLogs")
def _select_logs(b: B, v: Json) -> nodes.SeriesNode:
    return b.select_series(v, "log")


@polls("LogSeries", "timeShift")
def _time_shift(b: B, v: Json) -> nodes.SeriesNode:
    what = "LogTimeShiftSeries"
    o = b.obj(v, what)
    x = _log(b, b.get(o, "input", what))
    shift_ns = b.duration_constant(b.get(o, "duration", what))
    if abs(shift_ns) > INT64_MAX:
        raise ComputeError(
            "InvalidComputation",
            f"timeShift.duration of {human_duration(shift_ns)} is beyond int64 nanoseconds (about 292 years)",
            {"invalidTypes": "", "variant": "timeShift", "field": "duration"},
        )
    return nodes.TimeShift(x, shift_ns)


@polls("LogSeries", "toStartOfInterval")
def _to_start_of_interval(b: B, v: Json) -> nodes.SeriesNode:
    what = "LogToStartOfIntervalSeries"
    o = b.obj(v, what)
    x = _log(b, b.get(o, "input", what))
    width = b.duration_expression(b.get(o, "window", what))
    if width <= 0:
        raise refuse(
            "toStartOfInterval",
            "window",
            f"toStartOfInterval.window must be positive, got {human_duration(width)}",
        )
    return ToStartOfInterval(x, width, lines=True)


@polls("LogSeries", "union")
def _union(b: B, v: Json) -> nodes.SeriesNode:
    what = "LogUnionSeries"
    o = b.obj(v, what)
    listed = b.get(o, "input", what)
    if not isinstance(listed, list):
        raise MalformedNode(f"{what}.input must be a list")
    if not listed:
        raise refuse("union", "input", "needs at least one log series")
    operation = b.get(o, "operation", what)
    if operation != "KEEP_ALL":
        raise MalformedNode(f"{what}.operation: not a LogUnionOperation: {operation!r}")
    return EnumUnion([_log(b, x) for x in listed], "KEEP_ALL", lines=True)
