"""Log lines as the log stores them (compute/storage/log_lines.py) and as a computation reads them: one
text per line (the same line, whatever the order of its args, is the same text), and a channel whose
series are not all log series refused by name under contains rather than read as log lines."""

from __future__ import annotations

import numpy as np
import pytest

from compute.evaluation.compiler import Limits, ResultOptions, compile_plan
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
