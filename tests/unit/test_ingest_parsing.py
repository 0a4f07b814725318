"""The ingest fast path gives exactly the validator's writes, and declines whatever it is not sure of
(the validator then accepts or explains), so the HTTP behaviour is the validator's alone."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.ingest.writes import InvalidWrite, fast_writes, json_writes, to_writes
from schemas.ingest import write_request_adapter

# JSON text cannot carry lone surrogates; everything else may appear in names, tags and values.
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
timestamps = st.fixed_dictionaries(
    {"seconds": st.integers(0, 2**33), "nanos": st.integers(0, 999_999_999)},
)
doubles = st.fixed_dictionaries(
    {
        "timestamp": timestamps,
        "value": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**53), 2**53),
    }
)
strings = st.fixed_dictionaries({"timestamp": timestamps, "value": texts})
points = st.one_of(
    st.fixed_dictionaries({"type": st.just("double"), "double": st.lists(doubles, max_size=5)}),
    st.fixed_dictionaries({"type": st.just("string"), "string": st.lists(strings, max_size=5)}),
)
batches = st.fixed_dictionaries(
    {"channel": texts.filter(bool), "points": points},
    optional={"tags": st.dictionaries(texts, texts, max_size=3)},
)
requests = st.fixed_dictionaries(
    {"dataSourceRid": texts.filter(bool), "batches": st.lists(batches, max_size=4)}
)


@given(requests)
def test_fast_path_equals_the_validator_on_well_formed_requests(raw: dict[str, Any]) -> None:
    body = orjson.dumps(raw)
    fast = fast_writes(body)
    assert fast is not None
    assert fast == to_writes(write_request_adapter.validate_python(orjson.loads(body)))


def test_fast_path_reads_the_variant_wherever_it_stands() -> None:
    point = b'{"value":2,"timestamp":{"nanos":5,"seconds":1}}'
    body = b'{"batches":[{"points":{"double":[' + point + b'],"type":"double"},'
    body += b'"channel":"c","tags":{"k":"v"}}],"dataSourceRid":"ri.x"}'
    fast = fast_writes(body)
    assert fast is not None
    assert fast == to_writes(write_request_adapter.validate_python(orjson.loads(body)))
    assert fast[0].ts == [1_000_000_005] and fast[0].values == [2.0]


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
    assert fast_writes(orjson.dumps(raw)) is None


@pytest.mark.parametrize("body", [b"", b"{", b'{"dataSourceRid": "ri.x", "batches": []} trailing', b"\xff"])
def test_fast_path_declines_what_is_not_json(body: bytes) -> None:
    assert fast_writes(body) is None


def test_declined_requests_still_get_the_validators_verdict() -> None:
    raw = _request(timestamp={"seconds": 2**62, "nanos": 0})
    with pytest.raises(InvalidWrite, match="outside"):
        to_writes(write_request_adapter.validate_python(raw))


def test_a_null_member_is_an_absent_field() -> None:
    """nominal-api's encoder writes unset optionals as null (`"unit": null`, `"sessionName": null`);
    Conjure reads them as absent, so `tags: null` is no tags, not a 400 for a map that is not one."""
    point = {"timestamp": {"seconds": 5, "nanos": 0}, "value": 1.5}
    batch = {"channel": "c", "tags": None, "unit": None, "points": {"type": "double", "double": [point]}}
    body = orjson.dumps({"dataSourceRid": "ri.x", "batches": [batch], "sessionName": None})
    (write,) = json_writes(body)
    assert write.key.tags == () and list(write.values) == [1.5]
