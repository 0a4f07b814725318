"""compute/'s wings import one way (storage <- evaluation <- spark), and the evaluation wing runs
without PySpark: each wing is imported in a fresh interpreter where what it must not reach is made
unimportable, so an import added in the wrong direction fails here."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import compute

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent

_BLOCKER = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"{{name}} is out of bounds for this wing")
        return None
sys.meta_path.insert(0, Block())
import importlib
for module in {modules!r}:
    importlib.import_module(module)
print("imported", len({modules!r}))
"""


def _modules(package: str, skip: tuple[str, ...] = ()) -> list[str]:
    root = sys.modules[package] if package in sys.modules else __import__(package, fromlist=["_"])
    found = [package]
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        if not any(info.name == s or info.name.startswith(s + ".") for s in skip):
            found.append(info.name)
    return found


def _import_with_blocked(modules: list[str], blocked: list[str]) -> subprocess.CompletedProcess[str]:
    code = _BLOCKER.format(blocked=blocked, modules=modules)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_evaluation_wing_imports_neither_pyspark_nor_the_spark_wing() -> None:
    modules = _modules("compute.evaluation")
    assert "compute.evaluation.computation" in modules and "compute.evaluation.nodes.rolling" in modules
    done = _import_with_blocked(modules, ["pyspark", "py4j", "compute.spark"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"imported {len(modules)}" in done.stdout


def test_the_storage_wing_imports_no_other_wing() -> None:
    # The logs' Spark data sources (spark_source.py) are storage's own and may import PySpark.
    modules = _modules("compute.storage")
    done = _import_with_blocked(modules, ["compute.evaluation", "compute.spark"])
    assert done.returncode == 0, done.stderr[-3000:]


def test_writing_through_the_contract_needs_no_pyspark() -> None:
    """What an ingest-only process needs (the contract, records, the SQLite writer) runs without Spark."""
    modules = [
        "compute.storage.contract",
        "compute.storage.records",
        "compute.storage.series",
        "compute.storage.sqlite.writer",
        "compute.storage.sqlite.blocks",
    ]
    done = _import_with_blocked(modules, ["pyspark", "py4j"])
    assert done.returncode == 0, done.stderr[-3000:]


def test_an_edge_server_imports_no_pyspark() -> None:
    """`sparkwire serve --role edge` (app/tiers/edge.py) runs without a JVM: everything it loads,
    the Redis log it writes to included, imports with PySpark and the Spark wing blocked."""
    modules = [
        "app.runtime.cli",
        "app.runtime.server",
        "app.tiers.edge",
        "app.tiers.mirror",
        "app.api.ws",
        "app.fanout.hub",
        "compute.storage.redis.point_log",
        "compute.evaluation.deltas",
    ]
    done = _import_with_blocked(modules, ["pyspark", "py4j", "compute.spark"])
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_blocker_does_block() -> None:
    """The check above can fail: the Spark wing itself does not import with PySpark blocked."""
    done = _import_with_blocked(["compute.spark.engine"], ["pyspark"])
    assert done.returncode != 0 and "out of bounds" in done.stderr


def test_compute_holds_only_the_three_wings() -> None:
    children = sorted(info.name for info in pkgutil.iter_modules(compute.__path__))
    assert children == ["evaluation", "spark", "storage"]
