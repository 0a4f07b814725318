"""Every refusal travels with Nominal's error name and params, decoded by nominal-api's codec: at
creation for what validation can tell, as `subscriptionUpdate.error` for what only data reveals,
and a computation failing at run time leaves the others running."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from nominal_api import persistent_compute_api as pc

from tests import node_json as n
from tests.conftest import ServerProcess
from tests.wire import NANOS, Client, decode_server_message, new_id, subscription, write_points

HOUR = 3600.0


def rid_for(name: str) -> str:
    return f"ri.test.errors.{name}.{time.time_ns()}"


def variables(rid: str) -> dict[str, Any]:
    return {"a": n.channel(rid, "a"), "s": n.channel(rid, "s")}


def cumulative_sum(x: dict[str, Any]) -> dict[str, Any]:
    return n.union("cumulativeSum", {"input": x, "startTimestamp": n.literal({"seconds": 0, "nanos": 0})})


def integral(x: dict[str, Any]) -> dict[str, Any]:
    return n.union("integral", {"input": x, "startTimestamp": n.literal({"seconds": 0, "nanos": 0})})


A = n.num("a")
CREATION_ERRORS: dict[str, tuple[dict[str, Any], float, str, dict[str, str]]] = {
    # name: (node, window seconds, error name, params it must carry)
    "cumulative_sum": (
        n.series(n.numeric_series(cumulative_sum(A))),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "CUMULATIVE_SUM"},
    ),
    "integral": (
        n.series(n.numeric_series(integral(A))),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "INTEGRAL"},
    ),
    "property_selector_without_a_dataset": (
        n.series(n.numeric_series(n.union("selectNumericProperty", {"propertyName": "mass"}))),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "", "variant": "selectNumericProperty", "field": "dataset"},
    ),
    "z_score_by_a_tag_the_input_is_not_grouped_by": (
        n.series(n.numeric_series(n.union("zScore", {"input": A, "groupByTags": [n.literal("vehicle")]}))),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "", "variant": "zScore", "field": "groupByTags"},
    ),
    "unknown_variable": (
        n.series(n.numeric_series(n.num("nope"))),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "", "variable": "nope"},
    ),
    # a derived series over a module Sparkwire does not keep: named, no InvalidComputationType fits it
    "derived_over_an_unknown_module": (
        n.ranges(
            n.union(
                "derived",
                n.union(
                    "function",
                    {
                        "moduleName": n.literal("m"),
                        "functionName": n.literal("f"),
                        "versionReference": n.union("pinned", {"version": n.literal("1")}),
                        "functionArgs": {},
                    },
                ),
            )
        ),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "", "variant": "derived", "field": "moduleName", "moduleName": "m"},
    ),
    "buckets_not_positive": (
        n.series(n.numeric_series(A), buckets=-1),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "", "variant": "SummarizeSeries", "field": "buckets"},
    ),
    "max_ranges_not_positive": (
        n.ranges(n.threshold(A, "GREATER_THAN", n.literal(0.0)), max_ranges=-1),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "", "variant": "SummarizeRanges", "field": "maxRanges"},
    ),
    "enum_filter_regex": (
        n.ranges(n.enum_filter(n.raw("s"), "MATCHES_ANY_REGEX", n.literal(["o.*"]))),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "", "variant": "enumFilter", "field": "operator"},
    ),
    "numeric_resample_with_constant_interpolation": (
        n.series(
            n.numeric_series(
                n.union(
                    "resample",
                    {
                        "input": A,
                        "resampleConfiguration": {
                            "interval": n.literal(n.duration(NANOS)),
                            "interpolation": n.union(
                                "constantResampleInterpolationConfiguration", {"constant": n.literal(0.0)}
                            ),
                        },
                    },
                )
            )
        ),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "", "variant": "resample", "field": "resampleConfiguration.interpolation"},
    ),
    "variable_of_the_wrong_type": (
        n.series(n.numeric_series(n.time_shift(A, n.variable("a")))),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "", "variant": "channel", "variable": "a"},
    ),
    "constant_without_channel": (n.series(n.numeric_series(n.const(1.0))), HOUR, "InvalidComputation", {}),
    "persistence_window": (
        n.ranges(
            n.union(
                "threshold",
                {
                    "input": A,
                    "threshold": n.literal(1.0),
                    "operator": "GREATER_THAN",
                    "persistenceWindowConfiguration": {
                        "minPoints": n.literal(3),
                        "outputRangeStart": n.union("firstPointMatchingCondition", {}),
                    },
                },
            )
        ),
        HOUR,
        "InvalidComputation",
        {"invalidTypes": "POINT_PERSISTENCE"},
    ),
    "frequency": (
        n.union("frequency", n.union("fft", {"input": A})),
        HOUR,
        "PollingOnlyComputation",
        {"pollingOnlyTypes": "FREQUENCY_DOMAIN"},
    ),
    "lttb_strategy": (
        n.union(
            "series",
            {
                "input": n.numeric_series(A),
                "numericAggregations": {},
                "summarizationStrategy": n.union("largestTriangleThreeBuckets", {"maxPointsPerGroup": 100}),
            },
        ),
        HOUR,
        "PollingOnlyComputation",
        {"pollingOnlyTypes": "LTTB_SUMMARIZATION_STRATEGY"},
    ),
    # computed when polled (tests/server/test_array_struct_points.py), refused live as Nominal does
    "array_index": (
        n.series(n.numeric_series(n.union("select1dArrayIndex", {"input": A, "index": n.literal(0)}))),
        HOUR,
        "PollingOnlyComputation",
        {"pollingOnlyTypes": "ARRAY"},
    ),
    "struct_field": (
        n.series(n.enum_series(n.union("extractFromStruct", {"input": A, "fieldPath": [n.literal("a")]}))),
        HOUR,
        "PollingOnlyComputation",
        {"pollingOnlyTypes": "STRUCT"},
    ),
    "window_negative": (n.series(n.numeric_series(A)), -1.0, "WindowNegative", {"window": str(-NANOS)}),
    "window_too_large": (n.series(n.numeric_series(A)), 25 * HOUR, "WindowTooLarge", {}),
    "lookback_too_large": (
        n.series(n.numeric_series(n.rolling(n.numeric_series(A), 25 * 3600 * NANOS, "sum"))),
        HOUR,
        "WindowWithLookBackTooLarge",
        {},
    ),
    "too_many_points": (
        n.series(n.numeric_series(A), buckets=2_000_000),
        HOUR,
        "TooManyPoints",
        {"limit": "1000000"},
    ),
    "unsupported_granularity": (
        n.series(n.numeric_series(A), resolution=500_000),
        HOUR,
        "UnsupportedGranularity",
        {},
    ),
}


# Nominal's own values (persistent_compute_api), the only ones these params may carry; empty: none fits
NOMINAL_TYPES = {
    "invalidTypes": {t.value for t in pc.InvalidComputationType if t.value != "UNKNOWN"} | {""},
    "pollingOnlyTypes": {t.value for t in pc.PollingOnlyComputationType if t.value != "UNKNOWN"} | {""},
}


def assert_nominal_types(params: dict[str, str]) -> None:
    """`invalidTypes` / `pollingOnlyTypes` hold a value of Nominal's enum (or nothing), never a
    variant's name: what is refused is named by other params."""
    for key, allowed in NOMINAL_TYPES.items():
        if key in params:
            assert params[key] in allowed, (key, params)


def error_of(frame: dict[str, Any]) -> dict[str, Any]:
    """The SerializableError of a creation or update frame, after nominal-api decoded the frame."""
    decoded = decode_server_message(json.dumps(frame))
    if frame["type"] == "subscriptionCreation":
        body = frame["subscriptionCreation"]["creation"]
        assert decoded.subscription_creation.creation.error is not None
    else:
        body = frame["subscriptionUpdate"]["update"]
        assert decoded.subscription_update.update.error is not None
    assert body["type"] == "error", body
    return dict(body["error"]["serializableError"])


def last_frame(client: Client, kind: str, sub_id: str) -> dict[str, Any]:
    key = "subscriptionCreation" if kind == "creation" else "subscriptionUpdate"
    frames = [f for f in client.frames if f["type"] == key and f[key]["subscriptionId"] == sub_id]
    return frames[-1]


@pytest.mark.parametrize("case", list(CREATION_ERRORS))
async def test_refused_at_creation_with_nominal_error_name_and_params(
    server: ServerProcess, case: str
) -> None:
    node, window_s, name, params = CREATION_ERRORS[case]
    client = await Client.connect(server.ws_url)
    sub_id = new_id()
    await client.subscribe({sub_id: subscription(node, variables(rid_for(case)), window_s)})
    creation = await client.creation(sub_id)
    assert creation["type"] == "error", creation
    error = error_of(last_frame(client, "creation", sub_id))
    assert error["name"] == f"PersistentCompute:{name}"
    assert error["statusCode"] == 400
    assert error["params"].items() >= params.items(), error["params"]
    assert_nominal_types(error["params"])
    # the connection stays usable: a valid subscription on it still works
    ok_id = new_id()
    await client.subscribe(
        {ok_id: subscription(n.series(n.numeric_series(A)), variables(rid_for(case)), HOUR)}
    )
    assert (await client.creation(ok_id))["type"] == "success"
    await client.close()


async def test_a_node_that_is_not_a_nominal_node_is_an_invalid_client_message(server: ServerProcess) -> None:
    client = await Client.connect(server.ws_url)
    sub = subscription(n.series(n.numeric_series(n.union("noSuchNode", {}))), variables(rid_for("bad")), HOUR)
    await client.ws.send(json.dumps({"type": "subscribe", "subscribe": {new_id(): sub}}))
    health = await asyncio.wait_for(client.health.get(), 30)
    assert health["type"] == "clientMessageError"
    assert health["clientMessageError"]["error"]["name"] == "PersistentCompute:InvalidClientMessage"
    await client.close()


def append_only(decimate: bool) -> dict[str, Any]:
    return {"type": "appendOnly", "appendOnly": {"decimateResults": decimate}}


@pytest.mark.parametrize(
    ("decimate", "reason"),
    [(True, "APPENDS_NOT_SUPPORTED_FOR_COMPUTE"), (False, "TOO_MANY_POINTS_FOR_UNDECIMATED_APPENDS")],
)
async def test_append_only_ranges_beyond_max_ranges_are_unavailable(
    server: ServerProcess, decimate: bool, reason: str
) -> None:
    """A rangesSummary has no append form: append-only subscribers get an honest error instead."""
    rid = rid_for(f"appendonly{decimate}")
    now = time.time_ns()
    await write_points(server.base_url, rid, "a", [(now - (60 - i) * NANOS, float(i % 2)) for i in range(10)])
    client = await Client.connect(server.ws_url)
    sub_id = new_id()
    sub = subscription(
        n.ranges(n.threshold(A, "GREATER_THAN", n.literal(0.5)), max_ranges=2), variables(rid), HOUR
    )
    sub["subscriptionOptions"]["resultConfiguration"] = append_only(decimate)
    await client.subscribe({sub_id: sub})
    assert (await client.creation(sub_id))["type"] == "success"
    update = await client.update(sub_id, timeout=120)
    assert update["type"] == "error", update
    error = error_of(last_frame(client, "update", sub_id))
    assert error["name"] == "PersistentCompute:UnavailableResultConfiguration"
    assert error["params"]["reason"] == reason
    await client.close()


async def test_a_failing_computation_reports_an_error_and_leaves_others_running(
    server: ServerProcess,
) -> None:
    """A numeric node over a channel that turns out to hold strings fails at run time."""
    rid = rid_for("runtime")
    client = await Client.connect(server.ws_url)
    bad, good = new_id(), new_id()
    await client.subscribe(
        {
            bad: subscription(n.series(n.numeric_series(n.num("s"))), variables(rid), HOUR, lateness_s=HOUR),
            good: subscription(n.series(n.numeric_series(A)), variables(rid), HOUR, lateness_s=HOUR),
        }
    )
    for sub_id in (bad, good):
        assert (await client.creation(sub_id))["type"] == "success"
        assert (await client.update(sub_id, timeout=120))["type"] == "full"
    now = time.time_ns()
    await write_points(server.base_url, rid, "s", [(now, "on")])
    await write_points(server.base_url, rid, "a", [(now, 1.0)])
    failure = await client.update(bad, timeout=120)
    assert failure["type"] == "error", failure
    error = error_of(last_frame(client, "update", bad))
    assert error["name"] == "PersistentCompute:InvalidComputation"
    assert error["params"].items() >= {"invalidTypes": "", "variant": "numeric"}.items(), error["params"]
    # the other computation keeps going: a point written after the failure reaches it
    seen: set[float] = set()
    await write_points(server.base_url, rid, "a", [(time.time_ns(), 2.0)])
    deadline = time.monotonic() + 120
    while 2.0 not in seen and time.monotonic() < deadline:
        update = await client.update(good, timeout=120)
        assert update["type"] in ("append", "full"), update
        body = update.get("append", update.get("full"))["result"]
        seen.update(body["numeric"]["values"])
    assert 2.0 in seen
    await client.close()
