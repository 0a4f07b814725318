"""`refprop` and `refpropV2` over a real server, the nodes built with nominal-api's classes: values
against published reference values of the standards (not against CoolProp's output), inputs aligned
by forward fill, an unsolvable state as NaN, late points, the merged live result equal to a fresh
FullResult; and what CoolProp cannot do refused by name at creation.

References:
- IAPWS-95 (IAPWS R6-95(2018)), Table 7, "values for the single-phase region": (T, rho) -> p, s.
- IAPWS-95 saturation at 101.325 kPa: T = 373.124 K (a (p, rho) state inside the two-phase dome
  is at the saturation temperature, whatever rho between the phases' densities).
- Nitrogen, Span et al. (2000): normal boiling point 77.355 K.
- Water at 300 K and 0.1 MPa: 996.56 kg/m^3 (IAPWS-95)."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest
from conjure_python_client import ConjureEncoder
from nominal_api import scout_compute_api as sc
from nominal_api import scout_run_api

from tests.client_view import ResultView
from tests.conftest import ServerProcess
from tests.server.test_compute_errors import assert_nominal_types
from tests.wire import NANOS, Client, channel_variable, subscription, write_points

Json = dict[str, Any]
WINDOW_S = 3600.0
WINDOW_NS = int(WINDOW_S * NANOS)
MS = 1_000_000

# IAPWS-95 Table 7: T [K], rho [kg/m^3] -> p [MPa], s [kJ/(kg K)]
IAPWS95_TABLE7 = [
    (300.0, 996.5560, 0.992418352e-1, 0.393062643),
    (300.0, 1005.308, 0.200022515e2, 0.387405401),
    (500.0, 0.435, 0.999679423e-1, 0.794488271e1),
    (500.0, 838.025, 0.100003858e2, 0.256690919e1),
    (647.0, 358.0, 0.220384756e2, 0.432092307e1),
    (900.0, 0.241, 0.100062559, 0.916653194e1),
]


def ref(name: str) -> sc.NumericSeries:
    return sc.NumericSeries(raw=sc.Reference(name=name))


def refprop_v2(inputs: dict[str, str], output: str, substance: str) -> sc.NumericSeries:
    return sc.NumericSeries(
        refprop_v2=sc.RefpropSeriesV2(
            inputs={sc.RefpropProperty[k]: ref(v) for k, v in inputs.items()},
            output_property=sc.RefpropProperty[output],
            substance=sc.RefpropSubstance[substance],
        )
    )


def refprop_v1(inputs: dict[str, str], output: str, substance: str, radius_s: int) -> sc.NumericSeries:
    literal = sc.DurationConstant(literal=scout_run_api.Duration(seconds=radius_s, nanos=0))
    return sc.NumericSeries(
        refprop=sc.RefpropSeries(
            inputs={sc.RefpropProperty[k]: ref(v) for k, v in inputs.items()},
            output_property=sc.RefpropProperty[output],
            substance=sc.RefpropSubstance[substance],
            interpolation_configuration=sc.InterpolationConfiguration(
                forward_fill_interpolation=sc.ForwardFillInterpolation(interpolation_radius=literal)
            ),
        )
    )


def node(x: sc.NumericSeries) -> Json:
    summarize = sc.SummarizeSeries(input=sc.Series(numeric=x), numeric_aggregations={})
    return dict(ConjureEncoder.do_encode(sc.ComputableNode(series=summarize)))


def points_of(view: ResultView) -> list[tuple[int, float]]:
    snapshot = view.snapshot()
    assert set(snapshot) == {()}, snapshot
    kind, points = snapshot[()]
    assert kind == "numeric", kind
    return [(t, float(v)) for t, v in points]


def close(got: list[tuple[int, float]], expected: list[tuple[int, float]], rel: float) -> bool:
    """Same timestamps; each value within `rel` of the reference, NaN where the reference is NaN."""
    if [t for t, _ in got] != [t for t, _ in expected]:
        return False
    for (_, g), (_, e) in zip(got, expected, strict=True):
        if math.isnan(e) != math.isnan(g) or (not math.isnan(e) and not math.isclose(g, e, rel_tol=rel)):
            return False
    return True


async def follow(client: Client, sub_id: str, view: ResultView, done: Any) -> None:
    """Apply `sub_id`'s updates until `done()`; on a timeout, fail with what the view holds (the
    points and every append's span), so that a missing point says what did arrive."""
    deadline = time.monotonic() + 240
    while not done() and time.monotonic() < deadline:
        try:
            update = await client.update(sub_id, timeout=max(1.0, deadline - time.monotonic()))
        except TimeoutError:
            pytest.fail(f"{sub_id}: no further update; holds {points_of(view)}, appends {view.appends}")
        view.apply(update)


@pytest.fixture
async def client(server: ServerProcess) -> Any:
    c = await Client.connect(server.ws_url)
    yield c
    await c.close()


@pytest.mark.timeout(600)
async def test_fluid_properties_match_the_standards_live_late_and_fresh(
    server: ServerProcess, client: Client
) -> None:
    rid = f"ri.test.fluids.{time.time_ns()}"
    variables = {name: channel_variable(rid, name) for name in ("T", "D", "P", "Dn", "Pn")}
    cases = {
        "pressure_v2": node(refprop_v2({"TEMPERATURE": "T", "MASS_DENSITY": "D"}, "PRESSURE", "WATER")),
        "entropy_v1": node(
            refprop_v1({"TEMPERATURE": "T", "MASS_DENSITY": "D"}, "MASS_SPECIFIC_ENTROPY", "WATER", 3)
        ),
        "saturation_water": node(refprop_v2({"PRESSURE": "P", "MASS_DENSITY": "D"}, "TEMPERATURE", "WATER")),
        "boiling_nitrogen": node(
            refprop_v2({"PRESSURE": "Pn", "MASS_DENSITY": "Dn"}, "TEMPERATURE", "NITROGEN")
        ),
        "density_water": node(refprop_v2({"TEMPERATURE": "T", "PRESSURE": "P"}, "MASS_DENSITY", "WATER")),
    }
    t0 = time.time_ns() - 600 * NANOS
    step = 10 * NANOS
    table = IAPWS95_TABLE7
    # History: the first three states of the table, T and D written at the same instants.
    history = [(t0 + i * step, row) for i, row in enumerate(table[:3])]
    await write_points(server.base_url, rid, "T", [(t, row[0]) for t, row in history])
    await write_points(server.base_url, rid, "D", [(t, row[1]) for t, row in history])
    # Every channel the computations read exists before they are created (a point each, 600 s ago:
    # outside every instant checked below), so what this test follows is the nodes, not a series
    # appearing mid-stream (tests/server/test_compute_numeric_nodes.py covers that).
    for name, value in (("P", 101325.0), ("Pn", 101325.0), ("Dn", 300.0)):
        await write_points(server.base_url, rid, name, [(t0, value)])

    ids = {name: f"fluid-{name}-{time.time_ns()}" for name in cases}
    await client.subscribe(
        {ids[k]: subscription(v, variables, WINDOW_S, lateness_s=WINDOW_S) for k, v in cases.items()}
    )
    views = {}
    for name, sub_id in ids.items():
        creation = await client.creation(sub_id, timeout=120)
        assert creation["type"] == "success", (name, creation)
        views[name] = ResultView(WINDOW_NS)
        full = await client.update(sub_id, timeout=300)
        assert full["type"] == "full", full
        views[name].apply(full)

    def pressure_reference(rows: list[tuple[int, tuple[float, ...]]]) -> list[tuple[int, float]]:
        return sorted((t, row[2] * 1e6) for t, row in rows)

    assert close(points_of(views["pressure_v2"]), pressure_reference(history), 1e-8)

    # Live: the other three states; then a late one (between two history points) and a state
    # below water's melting line (2 K), which no equation of state solves: NaN.
    now = time.time_ns()
    live = [(now + i * 100 * MS, row) for i, row in enumerate(table[3:])]
    await write_points(server.base_url, rid, "T", [(t, row[0]) for t, row in live])
    await write_points(server.base_url, rid, "D", [(t, row[1]) for t, row in live])
    late = [(t0 + step // 2, table[5])]
    await write_points(server.base_url, rid, "T", [(t0 + step // 2, table[5][0]), (now + 900 * MS, 2.0)])
    await write_points(server.base_url, rid, "D", [(t0 + step // 2, table[5][1]), (now + 900 * MS, 1000.0)])
    # Forward fill: D alone, 0.5 s after the last T; T's value is carried to it (radius 1 s).
    await write_points(server.base_url, rid, "D", [(now + 1400 * MS, table[0][1])])

    rows = history + live + late
    unsolvable = (now + 900 * MS, math.nan)
    carried_p = (now + 1400 * MS, math.nan)  # T = 2 K carried: still unsolvable
    expected_p = sorted([*pressure_reference(rows), unsolvable, carried_p])
    expected_s = sorted([*((t, row[3] * 1e3) for t, row in rows), unsolvable, carried_p])

    await follow(
        client,
        ids["pressure_v2"],
        views["pressure_v2"],
        lambda: close(points_of(views["pressure_v2"]), expected_p, 1e-8),
    )
    assert close(points_of(views["pressure_v2"]), expected_p, 1e-8), points_of(views["pressure_v2"])
    await follow(
        client,
        ids["entropy_v1"],
        views["entropy_v1"],
        lambda: close(points_of(views["entropy_v1"]), expected_s, 1e-8),
    )
    assert close(points_of(views["entropy_v1"]), expected_s, 1e-8), points_of(views["entropy_v1"])
    for name in ("pressure_v2", "entropy_v1"):
        assert views[name].appends, f"{name}: live points reached it in no AppendResult"
        assert min(start for start, _ in views[name].appends) <= t0 + step // 2, "the late point's append"

    # Saturation: p = 101.325 kPa with densities between the phases' -> the boiling point.
    # The live points above are stamped up to 1.4 s ahead of `now`; the states below start once
    # the clock is past them by more than any fill radius (1 s; entropy_v1's 3 s), so that none of
    # those values is carried into them. (Started sooner, T = 2 K at now + 900 ms could lie between
    # T = 300 K at tp + 500 ms and P at tp + 600 ms and be the T carried there: a NaN density.)
    await asyncio.sleep(max(0.0, (now + 4_500 * MS - time.time_ns()) / NANOS))
    tp = time.time_ns()
    await write_points(server.base_url, rid, "P", [(tp, 101325.0), (tp + 500 * MS, 101325.0)])
    await write_points(server.base_url, rid, "D", [(tp, 500.0), (tp + 500 * MS, 10.0)])
    await write_points(server.base_url, rid, "Pn", [(tp, 101325.0)])
    await write_points(server.base_url, rid, "Dn", [(tp, 300.0)])
    # T and P at the same instant: water at 300 K, 0.1 MPa.
    await write_points(server.base_url, rid, "T", [(tp + 500 * MS, 300.0)])
    await write_points(server.base_url, rid, "P", [(tp + 600 * MS, 100000.0)])

    def water_boils() -> bool:
        got = dict(points_of(views["saturation_water"]))
        return all(t in got and abs(got[t] - 373.124) < 0.001 for t in (tp, tp + 500 * MS))

    def nitrogen_boils() -> bool:
        got = dict(points_of(views["boiling_nitrogen"]))
        return tp in got and abs(got[tp] - 77.355) < 0.001

    def water_density() -> bool:
        got = dict(points_of(views["density_water"]))
        return tp + 600 * MS in got and abs(got[tp + 600 * MS] - 996.56) < 0.01

    await follow(client, ids["saturation_water"], views["saturation_water"], water_boils)
    await follow(client, ids["boiling_nitrogen"], views["boiling_nitrogen"], nitrogen_boils)
    await follow(client, ids["density_water"], views["density_water"], water_density)
    assert water_boils(), points_of(views["saturation_water"])
    assert nitrogen_boils(), points_of(views["boiling_nitrogen"])
    assert water_density(), points_of(views["density_water"])

    # A fresh computation of each (a distinct key: one more variable), back-filled from the log,
    # equals the merged live result.
    await asyncio.sleep(2.0)
    for name, sub_id in ids.items():
        queue = client.updates.setdefault(sub_id, asyncio.Queue())
        while not queue.empty():
            views[name].apply(queue.get_nowait())
    other = await Client.connect(server.ws_url)
    try:
        extra = {**variables, "unused": channel_variable(rid, "unused")}
        fresh_ids = {name: f"fresh-{name}-{time.time_ns()}" for name in cases}
        await other.subscribe(
            {fresh_ids[k]: subscription(v, extra, WINDOW_S, lateness_s=WINDOW_S) for k, v in cases.items()}
        )
        for name, sub_id in fresh_ids.items():
            assert (await other.creation(sub_id, timeout=120))["type"] == "success"
            fresh = ResultView(WINDOW_NS)
            fresh.apply(await other.update(sub_id, timeout=300))
            cutoff = fresh.applied_at - WINDOW_NS
            live_points = [p for p in points_of(views[name]) if p[0] >= cutoff]
            fresh_points = [p for p in points_of(fresh) if p[0] >= cutoff]
            assert close(live_points, fresh_points, 0.0), (name, live_points, fresh_points)
    finally:
        await other.close()


REFUSALS: dict[str, tuple[sc.NumericSeries, dict[str, str]]] = {
    "jet_a": (
        refprop_v2({"TEMPERATURE": "T", "PRESSURE": "P"}, "MASS_DENSITY", "JET_A_4658"),
        {"variant": "refpropV2", "field": "substance"},
    ),
    "viscosity_input": (
        refprop_v2({"TEMPERATURE": "T", "VISCOSITY": "P"}, "MASS_DENSITY", "WATER"),
        {"variant": "refpropV2", "field": "inputs"},
    ),
    "temperature_enthalpy": (
        refprop_v2({"TEMPERATURE": "T", "MASS_SPECIFIC_ENTHALPY": "P"}, "PRESSURE", "WATER"),
        {"variant": "refpropV2", "field": "inputs"},
    ),
    "three_inputs": (
        refprop_v2({"TEMPERATURE": "T", "PRESSURE": "P", "MASS_DENSITY": "D"}, "VISCOSITY", "WATER"),
        {"variant": "refpropV2", "field": "inputs"},
    ),
    "output_is_input": (
        refprop_v1({"TEMPERATURE": "T", "PRESSURE": "P"}, "PRESSURE", "WATER", 1),
        {"variant": "refprop", "field": "outputProperty"},
    ),
    "xenon_viscosity": (
        refprop_v2({"TEMPERATURE": "T", "PRESSURE": "P"}, "VISCOSITY", "XENON"),
        {"variant": "refpropV2", "field": "outputProperty"},
    ),
}


async def test_what_coolprop_cannot_compute_is_refused_by_name(server: ServerProcess, client: Client) -> None:
    rid = f"ri.test.fluids.refused.{time.time_ns()}"
    variables = {name: channel_variable(rid, name) for name in ("T", "P", "D")}
    await client.subscribe(
        {name: subscription(node(x), variables, WINDOW_S) for name, (x, _) in REFUSALS.items()}
    )
    for name, (_, params) in REFUSALS.items():
        creation = await client.creation(name)
        assert creation["type"] == "error", (name, creation)
        error = creation["error"]["serializableError"]
        assert error["name"] == "PersistentCompute:InvalidComputation", (name, error)
        assert error["params"].items() >= params.items(), (name, error["params"])
        assert_nominal_types(error["params"])


async def test_the_python_client_builds_a_fluid_property(server: ServerProcess) -> None:
    """sparkwire_client's `fluid_property`: water at 300 K and 0.1 MPa, 996.56 kg/m^3 (IAPWS-95)."""
    from sparkwire_client import Client as PyClient
    from sparkwire_client import fluid_property, numeric_channel, series

    rid = f"ri.test.fluids.client.{time.time_ns()}"
    t = time.time_ns() - 5 * NANOS
    await write_points(server.base_url, rid, "T", [(t, 26.85)])  # degrees Celsius
    await write_points(server.base_url, rid, "P", [(t, 1.0)])  # bar
    kelvin = numeric_channel(rid, "T") + 273.15
    pascal = numeric_channel(rid, "P") * 100_000
    node = series(fluid_property("WATER", "MASS_DENSITY", {"TEMPERATURE": kelvin, "PRESSURE": pascal}))
    async with PyClient(server.base_url) as client:
        sub = await client.subscribe(node, window=600)
        view = await sub.wait_for(lambda v: len(v.values) == 1, timeout=120)
    assert view.timestamps == [t]
    assert abs(view.values[0] - 996.56) < 0.01, view.values
