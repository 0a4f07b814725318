"""Log lines as the log stores them (compute/storage/log_lines.py) and as a computation reads them: one
text per line (the same line, whatever the order of its args, is the same text), and a channel whose
series are not all log series refused by name under contains rather than read as log lines."""

from __future__ import annotations

import numpy as np
import pytest

from compute.evaluation import computation as computation_module
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Computation, Rows
from compute.evaluation.errors import ComputeError
from compute.storage.log_lines import log_text, read_log_text
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from tests import node_json as n

pytestmark = pytest.mark.unit

NANOS = 1_000_000_000
BASE = 1_800_000_000 * NANOS


def test_a_line_is_one_text_whatever_the_order_of_its_args() -> None:
    one = log_text("température élevée", {"b": "2", "a": "1"})
    assert one == log_text("température élevée", {"a": "1", "b": "2"})
    assert read_log_text(one) == ("température élevée", {"a": "1", "b": "2"})
    assert read_log_text(log_text('quote " and \\ and \n', {})) == ('quote " and \\ and \n', {})


def test_contains_over_a_channel_mixing_log_and_string_series_is_refused_by_name() -> None:
    node = n.series(
        n.numeric_series(
            n.union(
                "contains",
                {"input": n.raw("x"), "operator": n.union("regexFilter", {"regex": "a"})},
            )
        )
    )
    plan = compile_plan(node, 60 * NANOS, {"x": n.channel("rid", "x")}, Limits(), ResultOptions())
    computation = Computation("mixed", plan, allowed_lateness_ns=None)
    computation.route(SeriesInfo(1, SeriesKey.of("rid", "x", {"unit": "1"}), SeriesKind.LOG))
    computation.route(SeriesInfo(2, SeriesKey.of("rid", "x", {"unit": "2"}), SeriesKind.ENUM))
    ts = BASE + np.arange(2, dtype=np.int64)
    rows = {
        1: Rows(np.arange(2), ts, np.array([log_text("a", {}), log_text("b", {})], dtype=object)),
        2: Rows(np.arange(2, 4), ts + 5, np.array(["PARK", "DRIVE"], dtype=object)),
    }
    computation.backfill_seq = 4
    with pytest.raises(ComputeError, match="not all log series") as refusal:
        computation.load_backfill(rows, BASE + NANOS)
    assert refusal.value.name == "InvalidComputation"


def test_a_computation_forgets_the_log_lines_no_window_holds_and_answers_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """3,000 distinct lines through a 2 s window, 10 a batch 100 ms apart: the live computation
    renumbers its log lines once they pass the bound (here 64) and twice those held, keeping only
    the lines its window still holds, and its output stays that of a computation fed everything at
    once (a fresh subscription's back-fill)."""
    monkeypatch.setattr(computation_module, "MIN_LOG_LINES_KEPT", 64)
    node = n.series(
        n.numeric_series(
            n.union(
                "contains",
                {"input": n.raw("x"), "operator": n.union("regexFilter", {"regex": "[05]$"})},
            )
        )
    )
    plan = compile_plan(node, 2 * NANOS, {"x": n.channel("rid", "x")}, Limits(), ResultOptions())

    def fresh() -> Computation:
        c = Computation("forget", plan, allowed_lateness_ns=None)
        c.route(SeriesInfo(1, SeriesKey.of("rid", "x", {}), SeriesKind.LOG))
        return c

    live = fresh()
    live.backfill_seq = 0
    live.load_backfill({}, BASE)
    written_ts: list[int] = []
    written: list[str] = []
    most = 0
    for batch in range(300):
        ts = BASE + (batch * 10 + np.arange(10, dtype=np.int64)) * 10_000_000
        lines = [log_text(f"line {batch * 10 + i}", {}) for i in range(10)]
        seqs = np.arange(batch * 10 + 1, batch * 10 + 11)
        now = int(ts[-1]) + 1
        live.apply_batch({1: Rows(seqs, ts, np.array(lines, dtype=object))}, now)
        written_ts += ts.tolist()
        written += lines
        most = max(most, len(live.log_lines))
        if batch % 50 == 49:
            again = fresh()
            again.backfill_seq = len(written)
            all_rows = Rows(
                np.arange(1, len(written) + 1), np.array(written_ts), np.array(written, dtype=object)
            )
            again.load_backfill({1: all_rows}, now)
            (out,) = live.snapshot(None).values()
            (expected,) = again.snapshot(None).values()
            assert np.array_equal(out.ts, expected.ts) and np.array_equal(out.values, expected.values)
            assert 0 < out.values.sum() < len(out.values)
    # a window holds 2 s (200 lines) plus its history step: the codes stay near that, not 3,000
    assert most < 1000, most
