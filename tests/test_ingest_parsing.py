"""The ingest fast path gives exactly the validator's writes, and declines whatever it is not sure of
(the validator then accepts or explains), so the HTTP behaviour is the validator's alone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.ingest import InvalidWrite, fast_writes, to_writes
from schemas.ingest import write_request_adapter

timestamps = st.fixed_dictionaries(
    {"seconds": st.integers(0, 2**33), "nanos": st.integers(0, 999_999_999)},
)
doubles = st.fixed_dictionaries(
    {
        "timestamp": timestamps,
        "value": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**53), 2**53),
    }
)
strings = st.fixed_dictionaries({"timestamp": timestamps, "value": st.text(max_size=8)})
points = st.one_of(
    st.fixed_dictionaries({"type": st.just("double"), "double": st.lists(doubles, max_size=5)}),
    st.fixed_dictionaries({"type": st.just("string"), "string": st.lists(strings, max_size=5)}),
)
batches = st.fixed_dictionaries(
    {"channel": st.text(min_size=1, max_size=8), "points": points},
    optional={"tags": st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3)},
)
requests = st.fixed_dictionaries(
    {"dataSourceRid": st.text(min_size=1, max_size=8), "batches": st.lists(batches, max_size=4)}
)


@given(requests)
def test_fast_path_equals_the_validator_on_well_formed_requests(raw: dict[str, Any]) -> None:
    fast = fast_writes(raw)
    assert fast is not None
    assert fast == to_writes(write_request_adapter.validate_python(raw))


def _request(**point: Any) -> dict[str, Any]:
    p = {"timestamp": {"seconds": 1, "nanos": 0}, "value": 1.5, **point}
    return {
        "dataSourceRid": "ri.x",
        "batches": [{"channel": "c", "points": {"type": "double", "double": [p]}}],
    }


@pytest.mark.parametrize(
    "raw",
    [
        _request(value="1.5"),  # the validator may coerce a numeric string: it decides
        _request(value=True),
        _request(value=None),
        _request(timestamp={"seconds": 1.0, "nanos": 0}),
        _request(timestamp={"seconds": 1, "nanos": 1_000_000_000}),
        _request(timestamp={"seconds": -1, "nanos": 0}),
        _request(timestamp={"seconds": 2**62, "nanos": 0}),
        {"dataSourceRid": "", "batches": []},
        {
            "dataSourceRid": "ri.x",
            "batches": [{"channel": "c", "tags": {"a": 1}, "points": {"type": "double", "double": []}}],
        },
        {"dataSourceRid": "ri.x", "batches": [{"channel": "c", "points": {"type": "int", "int": []}}]},
        [],
    ],
)
def test_fast_path_declines_what_it_is_not_sure_of(raw: Any) -> None:
    assert fast_writes(raw) is None


def test_declined_requests_still_get_the_validators_verdict() -> None:
    raw = _request(timestamp={"seconds": 2**62, "nanos": 0})
    with pytest.raises(InvalidWrite, match="outside"):
        to_writes(write_request_adapter.validate_python(raw))
