"""One vocabulary on both sides of the wire (no server).

The server converts time in one module (schemas/timestamps.py) and names Nominal's operators and
units in one (compute/evaluation/nominal_variants.py, checked against nominal-api's IR by
tests/server/test_nominal_compute.py). sparkwire_client is a separate distribution and keeps its own small
copies; these tests check that the copies agree: the same instants split into the same
`{seconds, nanos}` (before the epoch included), and the same operator, comparison and unit names.
"""

from __future__ import annotations

import datetime
import typing
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from app.ingest.writes import json_writes
from app.protocol import frames
from compute.evaluation.nodes.arithmetic import BINARY_OPS, THRESHOLD_OPS, UNARY_OPS
from compute.evaluation.nodes.ranges import MIN_MAX_OPS
from compute.evaluation.nominal_variants import (
    BINARY_OPERATORS,
    DURATION_UNIT_NANOS,
    ENUMS,
    ROLLING_OPERATORS,
    THRESHOLD_COMPARISONS,
    TIME_UNIT_NANOS,
    UNARY_OPERATORS,
)
from schemas.conjure import Duration, Timestamp
from schemas.timestamps import (
    MAX_SECONDS,
    NANOS_PER_SECOND,
    split_nanos,
    split_nanos_array,
    to_nanos,
    to_nanos_array,
)
from sparkwire_client import nodes as client_nodes
from sparkwire_client.view import ns_of
from sparkwire_client.writer import Writer

N = NANOS_PER_SECOND
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
NEWEST_STORABLE = MAX_SECONDS * N + N - 1  # the write endpoints' upper limit
INSTANTS = [
    0,
    1,
    N - 1,
    N,
    N + 1,
    1_763_769_600 * N + 123_456_789,
    2**62,
    NEWEST_STORABLE,
    INT64_MAX,
    # before the epoch: seconds round toward minus infinity, nanos stay in 0..N-1
    -1,
    -(N - 1),
    -N,
    -N - 1,
    -3 * N // 2,
    -(2**62),
    INT64_MIN,
]
STORABLE = [ns for ns in INSTANTS if 0 <= ns <= NEWEST_STORABLE]


def wire(ns: int) -> dict[str, int]:
    """The Conjure form, worked out here independently: floor division."""
    return {"seconds": ns // N, "nanos": ns % N}


# -- timestamps --------------------------------------------------------------------------------------
@pytest.mark.parametrize("ns", INSTANTS)
def test_the_server_splits_and_joins_every_int64_instant(ns: int) -> None:
    seconds, nanos = split_nanos(ns)
    assert {"seconds": seconds, "nanos": nanos} == wire(ns)
    assert 0 <= nanos < N
    assert to_nanos(seconds, nanos) == ns
    assert split_nanos(np.int64(ns)) == (seconds, nanos)
    assert all(type(x) is int for x in split_nanos(np.int64(ns)))  # orjson takes no numpy integers
    assert frames.timestamp(ns) == wire(ns)
    assert Timestamp(seconds=seconds, nanos=nanos).to_nanos() == ns


def test_the_vectorised_conversions_match_the_scalar_ones() -> None:
    column = np.array(INSTANTS, np.int64)
    seconds, nanos = split_nanos_array(column)
    assert list(zip(seconds.tolist(), nanos.tolist(), strict=True)) == [split_nanos(ns) for ns in INSTANTS]
    assert frames.timestamps(column) == [wire(ns) for ns in INSTANTS]
    storable = np.array(STORABLE, np.int64)
    s, n = split_nanos_array(storable)
    assert to_nanos_array(s, n).tolist() == STORABLE
    assert MAX_SECONDS == INT64_MAX // N - 1  # every nanos of MAX_SECONDS fits int64, not so above it
    assert to_nanos(MAX_SECONDS + 1, N - 1) > INT64_MAX


async def _written(instants: list[int]) -> tuple[list[dict[str, Any]], bytes]:
    """The client Writer's request for one point at each instant: its timestamps and its body."""
    bodies: list[bytes] = []

    def server(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        return httpx.Response(200)

    http = httpx.AsyncClient(transport=httpx.MockTransport(server), base_url="http://sparkwire")
    async with http, Writer("http://sparkwire", "ri.vocabulary", client=http) as writer:
        for ns in instants:
            writer.add("p", ns, 1.0)
    (body,) = bodies
    (batch,) = orjson.loads(body)["batches"]
    return [point["timestamp"] for point in batch["points"]["double"]], body


async def test_the_clients_timestamps_are_the_servers() -> None:
    stamps, _ = await _written(INSTANTS)
    assert stamps == [frames.timestamp(ns) for ns in INSTANTS]  # what the writer sends, what the server sends
    assert [ns_of(t) for t in stamps] == INSTANTS  # the client's view reads back what the server sends
    assert [ns_of(frames.timestamp(ns)) for ns in INSTANTS] == INSTANTS


async def test_the_server_stores_the_instants_the_client_wrote() -> None:
    _, body = await _written(STORABLE)
    (write,) = json_writes(body)
    assert list(write.ts) == STORABLE


@pytest.mark.parametrize("seconds", [0.0, 1e-9, -1e-9, 0.25, 1.5, -1.5, 59.999999999, 86_400.0, -86_400.5])
def test_a_client_duration_means_the_same_nanoseconds_on_the_server(seconds: float) -> None:
    request = client_nodes.series(client_nodes.numeric_channel("ri.x", "p")).request(seconds)
    assert Duration.model_validate(request["windowWidth"]).to_nanos() == round(seconds * N)


# -- operators, comparisons and units ----------------------------------------------------------------
def _args(alias: Any) -> set[str]:
    return set(typing.get_args(alias))


def test_the_client_names_the_servers_comparisons_and_units() -> None:
    assert _args(client_nodes.ThresholdOperator) == set(THRESHOLD_COMPARISONS.values()) == set(THRESHOLD_OPS)
    assert _args(client_nodes.BoundsOperator) == ENUMS["MinMaxThresholdOperator"] == set(MIN_MAX_OPS)
    assert _args(client_nodes.Aggregation) == set(ROLLING_OPERATORS)
    assert _args(client_nodes.TimeUnit) == set(TIME_UNIT_NANOS)
    mode = client_nodes.enum_channel("ri.x", "mode")
    filters = [mode.is_in(["A"]), mode.is_not_in(["A"])]
    assert {f.json["enumFilter"]["operator"] for f in filters} <= ENUMS["EnumFilterOperator"]


def test_the_client_builds_the_servers_arithmetic() -> None:
    x = client_nodes.numeric_channel("ri.x", "p")
    unary = [-x, abs(x), x.sqrt(), x.ln(), x.log10()]
    binary = [x + 1, x - 1, x * 2, x / 2, 1 + x, 1 - x, 2 * x, 2 / x, x + x]
    assert {node.json["type"] for node in unary} == set(UNARY_OPERATORS) == set(UNARY_OPS)
    assert {node.json["type"] for node in binary} == set(BINARY_OPERATORS) == set(BINARY_OPS)
    assert all(set(node.json[node.json["type"]]) == {"x"} for node in unary)  # what the compiler reads
    assert all(set(node.json[node.json["type"]]) == {"left", "right"} for node in binary)


@pytest.mark.parametrize("seconds", [7e-9, 0.001, 0.25, 1.5, 2.0, 60.0, 3600.0])
def test_a_client_rolling_window_means_the_same_nanoseconds_on_the_server(seconds: float) -> None:
    node = client_nodes.numeric_channel("ri.x", "p").rolling(seconds, "sum")
    window = node.json["numericAggregation"]["input"]["rollingTime"]["window"]
    unit = window["type"]
    count = window[unit][unit]["literal"]
    assert unit in DURATION_UNIT_NANOS
    assert count * DURATION_UNIT_NANOS[unit] == round(seconds * N)


def test_the_unit_lengths_are_the_calendars() -> None:
    microsecond = datetime.timedelta(microseconds=1)
    for unit, ns in TIME_UNIT_NANOS.items():
        if unit != "NANOSECONDS":  # timedelta counts down to microseconds
            assert ns == datetime.timedelta(**{unit.lower(): 1}) // microsecond * 1000, unit
    assert TIME_UNIT_NANOS["NANOSECONDS"] == 1
    for unit, ns in DURATION_UNIT_NANOS.items():
        assert ns == TIME_UNIT_NANOS[unit.upper()], unit
