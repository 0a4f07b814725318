"""The NumericSeries variants of tests/test_compute_numeric_nodes.py without Spark: a live
Computation fed random write orders (history, then micro-batches; late points, overwrites, two
tag groups), its frames encoded by app.protocol.frames and merged by the client view, must equal
tests/reference_numeric.py's evaluation. Fast, so hypothesis tries many arrival orders per node."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.client_view import clip_ranges, first_difference
from tests.reference import evaluate
from tests.server.test_compute_numeric_nodes import CASES
from tests.server.test_compute_property import REL, WINDOW_NS, variables, writes
from tests.unit.test_compute_units import RID, run_live


@pytest.mark.parametrize("name", list(CASES))
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(requests=writes(), before_share=st.floats(0, 1))
def test_live_numeric_node_merged_by_a_client_equals_the_reference(
    name: str, requests: list[Any], before_share: float
) -> None:
    node = CASES[name]
    view, store, now = run_live(node, requests, int(len(requests) * before_share))
    cutoff = now - WINDOW_NS
    expected = evaluate(node, variables(RID), store, WINDOW_NS, cutoff)
    diff = first_difference(clip_ranges(view.snapshot(), cutoff), expected, REL)
    assert diff is None, f"{name}: {diff}"
