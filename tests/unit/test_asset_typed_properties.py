"""The catalog keeps typed properties across a reopen, and loads records written before typed
properties existed (they have none)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from compute.storage.assets import AssetStore, DataScope


def test_typed_properties_survive_a_reopen_and_old_records_load(tmp_path: Path) -> None:
    path = tmp_path / "assets.sqlite"
    store = AssetStore(path)
    asset = store.create_asset(
        "rig", [DataScope("main", "ri.x")], {"site": "a"}, {"gain": 2.5, "fluid": "LOX"}
    )
    run = store.create_run("lap", [asset.rid], 1, None, [], {}, {"stage": 3.0})
    reopened = AssetStore(path)
    assert reopened.asset(asset.rid) == asset
    assert reopened.asset(asset.rid).typed_properties == {"gain": 2.5, "fluid": "LOX"}  # type: ignore[union-attr]
    assert reopened.run(run.rid).typed_properties == {"stage": 3.0}  # type: ignore[union-attr]

    # a record as an older Sparkwire wrote it: no typed_properties key, a number stored as an integer
    old = {"rid": "ri.scout.main.asset.old", "title": "old", "data_scopes": [], "properties": {"k": "v"}}
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO assets (rid, body) VALUES (?, ?)", (old["rid"], json.dumps(old)))
        body = json.loads(db.execute("SELECT body FROM runs").fetchone()[0])
        body["typed_properties"] = {"stage": 3}
        db.execute("UPDATE runs SET body = ?", (json.dumps(body),))
    loaded = reopened.asset(old["rid"])
    assert loaded is not None and loaded.typed_properties == {} and loaded.properties == {"k": "v"}
    stage = reopened.run(run.rid).typed_properties["stage"]  # type: ignore[union-attr]
    assert stage == 3.0 and isinstance(stage, float)

    # an update given typed properties replaces them; one without keeps them
    assert reopened.update_asset(asset.rid, typed_properties={"gain": 1.0}).typed_properties == {"gain": 1.0}  # type: ignore[union-attr]
    assert reopened.update_asset(asset.rid, title="rig 2").typed_properties == {"gain": 1.0}  # type: ignore[union-attr]


def test_the_client_builds_the_selectors_and_typed_properties_as_nominal_api_does() -> None:
    from conjure_python_client import ConjureEncoder
    from nominal_api import scout_compute_api as sc

    from sparkwire_client import nodes
    from sparkwire_client.assets import typed_json, typed_values

    lit = sc.StringConstant(literal="ri.a")
    numeric = nodes.select_numeric_property("asset", "ri.a", "gain")
    expected = sc.NumericSeries(
        select_numeric_property=sc.SelectProperty(
            property_name="gain", dataset=sc.Dataset(asset=sc.Asset(rid=lit))
        )
    )
    assert numeric.json == ConjureEncoder.do_encode(expected)
    categorical = nodes.select_categorical_property("run", "ri.a", "fluid")
    expected_enum = sc.EnumSeries(
        select_categorical_property=sc.SelectProperty(
            property_name="fluid", dataset=sc.Dataset(run=sc.Run(rid=lit))
        )
    )
    assert categorical.json == ConjureEncoder.do_encode(expected_enum)
    typed = typed_json({"gain": 2, "fluid": "LOX"})
    assert typed == {
        "gain": {"type": "numericValue", "numericValue": 2.0},
        "fluid": {"type": "stringValue", "stringValue": "LOX"},
    }
    assert typed_values({"typedProperties": typed}) == {"gain": 2.0, "fluid": "LOX"}
