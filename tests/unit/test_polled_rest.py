"""tagByIntervals (compute/evaluation/nodes/tag_intervals.py) compiled and evaluated as a poll does,
against references from nominal-api's `TagByIntervalsSeries`: "Points within an interval get tagged;
points outside all intervals are dropped", each interval a group of its own tagged by its
`tagBy` sources, "Optional time shift subtracts a per-interval anchor from timestamps after
matching". A live subscription keeps Nominal's refusal (InvalidComputation TAG_BY_INTERVALS)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Rows
from compute.evaluation.errors import ComputeError
from compute.evaluation.polled import evaluate_period
from compute.evaluation.results import NumericPoints
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests import node_json as n

pytestmark = pytest.mark.unit

S = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * S
RID = "ri.sparkwire.test.dataset.intervals"
Json = dict[str, Any]
# two vehicles' channel, each at 10 Hz over 10 s: vehicle a's i-th point is i, vehicle b's is 100 + i
SERIES = {
    ("level", "a"): [(T0 + i * 100 * MS, float(i)) for i in range(100)],
    ("level", "b"): [(T0 + i * 100 * MS, 100.0 + i) for i in range(100)],
}


def timestamp(t: int) -> Json:
    return n.union("literal", n.duration(t))


def tag_by_intervals(spans: Sequence[tuple[int | None, int | None]], tag_by: list[str], **extra: Any) -> Json:
    ranges = [
        {
            **({} if a is None else {"startTimestamp": timestamp(a)}),
            **({} if b is None else {"endTimestamp": timestamp(b)}),
        }
        for a, b in spans
    ]
    body = {
        "input": n.channel(RID, "level", group_by=["vehicle"]),
        "intervals": n.union(
            "ranges",
            {
                "ranges": n.union("literalRanges", {"literalRanges": ranges}),
                "tagBy": [n.union(t, {}) for t in tag_by],
            },
        ),
        **extra,
    }
    return n.series(n.numeric_series(n.union("tagByIntervals", body)))


def polled(node: Json, start: int, end: int) -> dict[Any, list[tuple[int, float]]]:
    plan = compile_plan(node, end - start, {}, Limits(), ResultOptions(), polled=True)
    known = [
        SeriesInfo(i, SeriesKey.of(RID, name, {"vehicle": v}), SeriesKind.NUMERIC)
        for i, (name, v) in enumerate(SERIES)
    ]
    points = list(SERIES.values())

    def read(ids: list[int], lo: int, hi: int) -> dict[int, Rows]:
        out = {}
        for i in ids:
            kept = [(t, v) for t, v in points[i] if lo <= t <= hi]
            ts = np.array([t for t, _ in kept], np.int64)
            out[i] = Rows(
                np.arange(len(kept), dtype=np.int64), ts, np.array([v for _, v in kept], np.float64)
            )
        return out

    got = evaluate_period(plan, known, read, end)
    out: dict[Any, list[tuple[int, float]]] = {}
    for key, result in got.items():
        assert isinstance(result, NumericPoints)
        out[key] = list(zip(result.ts.tolist(), result.values.tolist(), strict=True))
    return out


def test_a_live_subscription_keeps_nominals_refusal() -> None:
    node = tag_by_intervals([(T0 + S, T0 + 2 * S)], ["intervalIndex"])
    with pytest.raises(ComputeError) as refused:
        compile_plan(node, 10 * S, {}, Limits(), ResultOptions())
    assert refused.value.name == "InvalidComputation"
    assert refused.value.params["invalidTypes"] == "TAG_BY_INTERVALS"


def test_each_groups_points_in_each_interval_form_a_group() -> None:
    spans = [(T0 + S, T0 + 2 * S), (T0 + 8500 * MS, None)]  # the second open to the period's end
    got = polled(tag_by_intervals(spans, ["rangeStartTimestamp", "intervalIndex"]), T0, T0 + 10 * S)
    want = {}
    for vehicle, offset in (("a", 0.0), ("b", 100.0)):
        for index, (lo, hi) in enumerate([(10, 20), (85, 100)]):
            key = (
                ("vehicle", vehicle),
                ("INTERVAL_START", str(spans[index][0])),
                ("INTERVAL_INDEX", str(index)),
            )
            want[key] = [(T0 + i * 100 * MS, offset + i) for i in range(lo, hi)]
    assert got == want


def test_the_time_shift_subtracts_each_intervals_anchor() -> None:
    spans = [(T0 + S, T0 + 2 * S), (T0 + 5 * S, T0 + 6500 * MS)]
    by_start = polled(
        tag_by_intervals(spans, ["intervalIndex"], timeShift=n.union("intervalStart", {})), T0, T0 + 10 * S
    )
    assert by_start[(("vehicle", "a"), ("INTERVAL_INDEX", "1"))] == [
        (i * 100 * MS, 50.0 + i) for i in range(15)
    ]
    by_end = polled(
        tag_by_intervals(spans, ["intervalIndex"], timeShift=n.union("intervalEnd", {})), T0, T0 + 10 * S
    )
    assert by_end[(("vehicle", "b"), ("INTERVAL_INDEX", "0"))] == [
        ((i - 10) * 100 * MS, 110.0 + i) for i in range(10)
    ]
    # "resolution throws if start is missing": a range begun before anything held has none
    with pytest.raises(ComputeError) as missing:
        polled(
            tag_by_intervals([(None, T0 + S)], ["intervalIndex"], timeShift=n.union("intervalStart", {})),
            T0,
            T0 + 10 * S,
        )
    assert missing.value.name == "InvalidComputation"


def test_what_is_not_computed_is_refused_by_name() -> None:
    node = tag_by_intervals([(T0 + S, T0 + 2 * S)], [])
    with pytest.raises(ComputeError) as empty:  # "Non-empty ordered list of tag sources"
        compile_plan(node, 10 * S, {}, Limits(), ResultOptions(), polled=True)
    assert empty.value.params.get("field") == "tagBy"
    events = n.series(
        n.numeric_series(
            n.union(
                "tagByIntervals",
                {
                    "input": n.channel(RID, "level"),
                    "intervals": n.union("events", {"query": {}, "tagBy": []}),
                },
            )
        )
    )
    with pytest.raises(ComputeError) as refused:  # events' tagBy is "non-empty" too
        compile_plan(events, 10 * S, {}, Limits(), ResultOptions(), polled=True)
    assert refused.value.params.get("field") == "tagBy"


def log_series(kind: str, body: Json) -> Json:
    channel = n.union(
        "channel",
        n.union("dataSource", {"dataSourceRid": n.literal(RID), "channel": n.literal("app.log"), "tags": {}}),
    )
    inner = n.union(kind, {"input": channel, **body})
    return n.union(
        "series",
        {
            "input": n.union("log", inner),
            "numericAggregations": {},
            "summarizationStrategy": n.union("page", n.union("pageInfo", {"pageSize": 10})),
        },
    )


def test_log_series_variants_are_refused_live_and_computed_when_polled() -> None:
    shifted = log_series("timeShift", {"duration": n.union("literal", n.duration(S))})
    with pytest.raises(ComputeError) as live:  # Nominal refuses every log series to a subscription
        compile_plan(shifted, 10 * S, {}, Limits(), ResultOptions())
    assert live.value.name == "PollingOnlyComputation"
    compile_plan(shifted, 10 * S, {}, Limits(), ResultOptions(), polled=True)
    # filterByTag and selectTags are computed when polled too (tests/unit/test_log_tags.py)
    predicate = n.union("in", {"key": n.literal("a"), "values": n.literal([n.literal("b")])})
    tagged = log_series("filterByTag", {"predicate": predicate})
    with pytest.raises(ComputeError) as live_tagged:
        compile_plan(tagged, 10 * S, {}, Limits(), ResultOptions())
    assert live_tagged.value.name == "PollingOnlyComputation"
    compile_plan(tagged, 10 * S, {}, Limits(), ResultOptions(), polled=True)
    with pytest.raises(ComputeError) as empty:
        compile_plan(
            log_series("union", {"input": [], "operation": "KEEP_ALL"}),
            10 * S,
            {},
            Limits(),
            ResultOptions(),
            polled=True,
        )
    assert empty.value.params.get("field") == "input"
