"""The bench clients' lean reading of a frame (bench/frame_peek.py) gives what the full decode gives:
the subscription, the update's kind, an error's name and the newest feed timestamp it proves
delivered (bench.computations.included_through), on frames the server's own encoder makes."""

from __future__ import annotations

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from app.protocol import frames
from bench.computations import included_through
from bench.frame_peek import peek_update
from compute.evaluation.errors import ComputeError
from compute.evaluation.results import EnumPoints, NumericPoints, Output, Ranges
from compute.evaluation.summarize import enum_buckets, numeric_buckets

MS = 1_000_000


def _outputs(kind: str, ts: np.ndarray) -> Output:
    values = np.sin(ts / 1e9)
    if kind == "numeric":
        return NumericPoints(ts, values)
    if kind == "enum":
        return EnumPoints(ts, (ts // MS % 3).astype(np.int32), ["a", "b", "c"])
    if kind == "bucketedNumeric":
        return numeric_buckets(ts, values, 7 * MS)
    if kind == "bucketedEnum":
        return enum_buckets(ts, (ts // MS % 3).astype(np.int32), ["a", "b", "c"], 7 * MS)
    return Ranges(ts[::2], ts[::2] + MS)


def _check(spliced: str) -> None:
    frame = str(spliced)  # as a client receives it (the server's text is a str subclass)
    peeked = peek_update(frame)
    body = orjson.loads(frame)["subscriptionUpdate"]
    assert peeked is not None
    assert peeked.subscription_id == body["subscriptionId"]
    assert peeked.kind == body["update"]["type"]
    assert peeked.newest_ns == included_through(body["update"])


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["numeric", "enum", "bucketedNumeric", "bucketedEnum", "range"]),
    st.lists(st.integers(0, 200), unique=True, max_size=30),
    st.booleans(),
)
def test_peek_finds_the_newest_delivered_timestamp_as_a_full_decode_does(
    kind: str, offsets: list[int], append: bool
) -> None:
    ts = 1_800_000_000_000_000_000 + np.array(sorted(offsets), np.int64) * MS  # one-point buckets too
    outputs = {(): _outputs(kind, ts)}
    update = (
        frames.append_update(outputs, False, int(ts[0]) if len(ts) else 0, 1_900_000_000_000_000_000)
        if append
        else frames.full_update(outputs, False)
    )
    _check(frames.subscription_update('id "quoted" \\ too', update))


def test_peek_reads_an_error_update_and_leaves_other_messages_to_the_full_decode() -> None:
    error = frames.error_update(ComputeError("TooManyPoints", "too many", {"limit": "10"}))
    peeked = peek_update(str(frames.subscription_update("s", error)))
    assert peeked is not None and peeked.kind == "error"
    assert peeked.error_name == "PersistentCompute:TooManyPoints" and peeked.newest_ns == -1
    assert peek_update(str(frames.creation_success("s"))) is None
    assert peek_update(str(frames.ping())) is None
