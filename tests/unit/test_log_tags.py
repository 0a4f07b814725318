"""The LogSeries variants `filterByTag`, `selectTags` and `derived`, compiled and evaluated as a poll
does (the numeric and enum nodes of nodes/cross_group.py over log lines; builders/derived.py),
against references written from nominal-api's docstrings:
- `LogTagFilterSeries`: "Applies a tag predicate to the log series produced by input" (`in`: the
  series that have the tag with one of the values; `notIn`: the others);
- `LogSelectTagsSeries`: "Subsets the tag dimensions of the input log series to the given tag keys.
  Preserves the input series' cardinality: points that share the selected keys but differ on
  dropped keys remain distinct";
- `ReservedTagKey` NOMINAL_CHANNEL "carries the channel name, so channels can be filtered and grouped
  the same way tags are (see the SelectSeries node)";
- `DerivedSeries`: "a series that is derived from a function within a module", whose
  `FunctionNode` is an enum, numeric or range series (or a udf): never log lines.
Every LogSeries is refused to a live subscription (PollingOnlyComputation LOG_SERIES)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compute.evaluation.compiler.catalogs import Catalogs
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Rows
from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.lttb_paging import PagedPoints
from compute.evaluation.polled import evaluate_period
from compute.evaluation.results import LogPoints
from compute.storage.log_lines import log_text, read_log_text
from compute.storage.modules import Module, ModuleVersion
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests import node_json as n

pytestmark = pytest.mark.unit

S = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * S
RID = "ri.sparkwire.test.logs.tagged"
Json = dict[str, Any]
Line = tuple[int, str]
# (channel, host) -> lines: three channels of one data source; app.log on two hosts, whose lines
# share their timestamps; db.log and sys.log untagged
LINES: dict[tuple[str, str | None], list[Line]] = {
    ("app.log", "a"): [(T0 + i * 200 * MS, f"app a {i}") for i in range(5)],
    ("app.log", "b"): [(T0 + i * 200 * MS, f"app b {i}") for i in range(5)],
    ("db.log", None): [(T0 + 50 * MS + i * 300 * MS, f"db {i}") for i in range(4)],
    ("sys.log", None): [(T0 + 70 * MS, "sys 0")],
}


def channel(name: str, group_by: list[str] | None = None) -> Json:
    source: Json = {"dataSourceRid": n.literal(RID), "channel": n.literal(name), "tags": {}}
    if group_by is not None:
        source["groupByTags"] = [n.literal(g) for g in group_by]
    return n.union("channel", n.union("dataSource", source))


def every_channel() -> Json:
    """nominal-api's SelectSeries without a name: the dataset's channels, NOMINAL_CHANNEL their name."""
    return n.union("selectLogs", {"dataset": {"type": "saved", "saved": {"rid": n.literal(RID)}}})


def filter_by_tag(log: Json, kind: str, key: str, values: list[str]) -> Json:
    predicate = n.union(kind, {"key": n.literal(key), "values": n.literal([n.literal(v) for v in values])})
    return n.union("filterByTag", {"input": log, "predicate": predicate})


def select_tags(log: Json, keys: list[str]) -> Json:
    return n.union("selectTags", {"input": log, "tagKeys": [n.literal(k) for k in keys]})


def paged(log: Json) -> Json:
    return n.union(
        "series",
        {
            "input": n.union("log", log),
            "numericAggregations": {},
            "summarizationStrategy": n.union("page", n.union("pageInfo", {"pageSize": 100})),
        },
    )


def polled(log: Json, catalogs: Catalogs | None = None) -> dict[Any, list[Line]]:
    start, end = T0, T0 + 2 * S
    plan = compile_plan(
        paged(log), end - start, {}, Limits(), ResultOptions(), catalogs=catalogs or Catalogs(), polled=True
    )
    known = [
        SeriesInfo(i, SeriesKey.of(RID, name, {} if host is None else {"host": host}), SeriesKind.LOG)
        for i, (name, host) in enumerate(LINES)
    ]
    lines = list(LINES.values())

    def read(ids: list[int], lo: int, hi: int) -> dict[int, Rows]:
        out = {}
        for i in ids:
            kept = [(t, m) for t, m in lines[i] if lo <= t <= hi]
            texts = np.array([log_text(m, {}) for _, m in kept], dtype=object)
            ts = np.array([t for t, _ in kept], np.int64)
            seqs = np.arange(len(kept), dtype=np.int64) + 1000 * i  # the log's sequence: unique
            out[i] = Rows(seqs, ts, texts)
        return out

    out: dict[Any, list[Line]] = {}
    for key, page in evaluate_period(plan, known, read, end).items():
        assert isinstance(page, PagedPoints) and isinstance(page.points, LogPoints)
        p = page.points
        out[key] = [
            (t, read_log_text(p.categories[c])[0])
            for t, c in zip(p.ts.tolist(), p.codes.tolist(), strict=True)
        ]
    return out


def in_time_order(*parts: list[Line]) -> list[Line]:
    """Every line of the parts in time order, equal times in the parts' order (a stable sort)."""
    return sorted((line for part in parts for line in part), key=lambda line: line[0])


def test_every_log_series_is_refused_live() -> None:
    for log in (
        filter_by_tag(channel("app.log", ["host"]), "in", "host", ["a"]),
        select_tags(channel("app.log"), ["host"]),
        derived("logs", "levels"),
    ):  # `contains` streams over a log channel, not over these
        regex = n.union("regexFilter", {"regex": "app"})
        node = n.series(n.numeric_series(n.union("contains", {"input": log, "operator": regex})))
        with pytest.raises(ComputeError) as live:
            compile_plan(node, 2 * S, {}, Limits(), ResultOptions(), catalogs=Catalogs(modules=Modules()))
        assert live.value.name == "PollingOnlyComputation"
        assert live.value.params["pollingOnlyTypes"] == "LOG_SERIES"


def test_filter_by_tag_keeps_the_series_whose_tags_meet_the_predicate() -> None:
    app_a, app_b = LINES[("app.log", "a")], LINES[("app.log", "b")]
    assert polled(filter_by_tag(channel("app.log", ["host"]), "in", "host", ["b"])) == {
        (("host", "b"),): app_b
    }
    assert polled(filter_by_tag(channel("app.log", ["host"]), "notIn", "host", ["b"])) == {
        (("host", "a"),): app_a
    }
    # a tag the input is not grouped by narrows the channel's series: one answer, host a's lines
    assert polled(filter_by_tag(channel("app.log"), "in", "host", ["a"])) == {(): app_a}
    # NOMINAL_CHANNEL over the dataset's channels names the channels read (SelectSeries)
    named = polled(filter_by_tag(every_channel(), "in", "NOMINAL_CHANNEL", ["db.log", "sys.log"]))
    assert named == {(): in_time_order(LINES[("db.log", None)], LINES[("sys.log", None)])}


def test_select_tags_groups_by_the_keys_kept_and_keeps_every_line() -> None:
    app_a, app_b = LINES[("app.log", "a")], LINES[("app.log", "b")]
    # no key kept: one group; the two hosts' lines at one timestamp both stay ("remain distinct")
    merged = polled(select_tags(channel("app.log", ["host"]), []))
    assert merged == {(): in_time_order(app_a, app_b)}
    assert len(merged[()]) == 10
    # a key the input is not grouped by groups the channel's series by it
    assert polled(select_tags(channel("app.log"), ["host"])) == {
        (("host", "a"),): app_a,
        (("host", "b"),): app_b,
    }
    # the channels of a selection kept apart by their name
    channels = filter_by_tag(every_channel(), "in", "NOMINAL_CHANNEL", ["db.log", "sys.log"])
    assert polled(select_tags(channels, ["NOMINAL_CHANNEL"])) == {
        (("NOMINAL_CHANNEL", "db.log"),): LINES[("db.log", None)],
        (("NOMINAL_CHANNEL", "sys.log"),): LINES[("sys.log", None)],
    }


class Modules:
    """One module, `logs` v1, whose function `levels` computes an enum channel."""

    module = Module("ri.module.logs", "logs", "logs", "", "tester", T0, None, None, 1)
    body = {
        "functions": [
            {"name": "levels", "parameters": [], "functionNode": n.union("enum", channel("level"))},
        ]
    }

    def module_named(self, api_name: str) -> Module | None:
        return self.module if api_name == "logs" else None

    def version(self, module: Module, version: int) -> ModuleVersion | None:
        if version != 1:
            return None
        return ModuleVersion(module.rid, "logs", 1, "tester", T0, self.body, False)


def derived(module: str, function: str) -> Json:
    pinned = n.union("pinned", {"version": n.literal("1")})
    body = {
        "moduleName": n.literal(module),
        "functionName": n.literal(function),
        "versionReference": pinned,
        "functionArgs": {},
    }
    return n.union("derived", n.union("function", body))


def test_a_derived_log_series_is_resolved_then_refused_by_name() -> None:
    catalogs = Catalogs(modules=Modules())
    with pytest.raises(ComputeError) as missing:  # resolved as every derived series: no such module
        polled(derived("nope", "levels"), catalogs)
    assert missing.value.params.get("field") == "moduleName"
    with pytest.raises(ComputeError) as refused:  # a module function computes no log lines
        polled(derived("logs", "levels"), catalogs)
    assert refused.value.name == "InvalidComputation"
    assert refused.value.params.get("field") == "functionName"
    assert refused.value.params.get("functionNode") == "enum"
    assert "LogSeries" in refused.value.message
