"""compute/'s wings import one way (storage <- evaluation <- spark), and the evaluation wing runs
without PySpark: each wing is imported in a fresh interpreter where what it must not reach is made
unimportable, so an import added in the wrong direction fails here.

app/'s wings import one way too (`APP_WINGS` says which wing may import which; every import
statement of every module counts, those only for type checking included), and app/protocol, the
sans-I/O core, imports no I/O library."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import app
import compute

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

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
    # The logs' Spark readers (sqlite/spark_source.py, kafka/spark_frames.py) are storage's own and
    # may import PySpark.
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


# What `sparkwire serve --role edge` (app/tiers/edge.py) loads, the Kafka log it writes to included.
EDGE_MODULES = [
    "app.runtime.cli",
    "app.runtime.server",
    "app.tiers.edge",
    "app.tiers.mirror",
    "app.api.ws",
    "app.fanout.hub",
    "compute.storage.redis.catalog_rows",
    "compute.storage.kafka.point_log",
    "compute.evaluation.deltas",
    "compute.evaluation.compiler.builders",
]


def test_an_edge_server_imports_no_pyspark() -> None:
    """An edge runs without a JVM: everything it loads imports with PySpark and the Spark wing blocked."""
    done = _import_with_blocked(EDGE_MODULES, ["pyspark", "py4j", "compute.spark"])
    assert done.returncode == 0, done.stderr[-3000:]


def test_an_edge_server_loads_scipy_only_to_evaluate() -> None:
    """Every server compiles every node (the compile registry), an edge too, which evaluates none:
    the frequency, filter and curve-fit nodes load scipy's signal and optimize (about 60 MB of an
    edge's baseline, BENCHMARKS.scale-out.md) only when they run."""
    done = _import_with_blocked(EDGE_MODULES, ["scipy.signal", "scipy.optimize", "scipy.stats"])
    assert done.returncode == 0, done.stderr[-3000:]


def test_an_edge_server_loads_arrow_only_to_read() -> None:
    """An edge writes to the Kafka log and reads none of it: Arrow (pyarrow, and ptars, which imports
    it) is about 35 MB of its baseline and loads only when a request needs it (a protobuf write, an
    export's CSV, an Arrow output, a read of the log)."""
    done = _import_with_blocked(EDGE_MODULES, ["pyarrow", "ptars"])
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_blocker_does_block() -> None:
    """The check above can fail: the Spark wing itself does not import with PySpark blocked."""
    done = _import_with_blocked(["compute.spark.engine"], ["pyspark"])
    assert done.returncode != 0 and "out of bounds" in done.stderr


def test_compute_holds_only_the_three_wings() -> None:
    children = sorted(info.name for info in pkgutil.iter_modules(compute.__path__))
    assert children == ["evaluation", "spark", "storage"]


# app/'s wings, and the wings (and top-level modules) each may import. config, metrics and
# periodic (one periodic task) serve every wing; runtime assembles them all.
APP_WINGS: dict[str, set[str]] = {
    "config": set(),
    "metrics": set(),
    "periodic": set(),
    "protocol": {"config"},
    "fanout": {"protocol", "config", "periodic", "metrics"},
    # transport answers a request it refuses before any route (431: headers too large) with the
    # same Conjure error body as every route (http/errors.py); http imports only config.
    "transport": {"protocol", "http", "config", "periodic", "metrics"},
    "tiers": {"fanout", "protocol", "config", "periodic", "metrics"},
    "http": {"config"},
    "ingest": {"http", "protocol", "config", "periodic", "metrics"},
    "api": {"protocol", "fanout", "transport", "tiers", "http", "ingest", "config", "periodic", "metrics"},
    "runtime": {
        "protocol",
        "fanout",
        "transport",
        "tiers",
        "http",
        "ingest",
        "api",
        "config",
        "periodic",
        "metrics",
    },
}
IO_LIBRARIES = ["websockets", "starlette", "fastapi", "uvicorn", "redis", "pyspark", "py4j"]


def _wing(module: str) -> str | None:
    """The wing of a dotted app module name (`app.fanout.hub` -> fanout), None outside app/."""
    parts = module.split(".")
    return parts[1] if parts[0] == "app" and len(parts) > 1 else None


def _imported(module: str, source: str) -> set[str]:
    """Every app module an import statement of `source` names (relative imports resolved)."""
    found: set[str] = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base == "app":  # `from app import fanout`: the names are the modules
                found.update(f"app.{alias.name}" for alias in node.names)
            else:
                found.add(base)
    return {name for name in found if name == "app" or name.startswith("app.")}


def wing_violations(modules: dict[str, str]) -> list[str]:
    """`importer -> imported` for each import that crosses from a wing into one it may not reach."""
    bad = []
    for module, source in sorted(modules.items()):
        own = _wing(module)
        if own is None or own not in APP_WINGS:
            continue
        for target in sorted(_imported(module, source)):
            other = _wing(target)
            if other is None or other == own or other not in APP_WINGS:
                continue  # `app` itself, or a name inside the importer's own wing
            if other not in APP_WINGS[own]:
                bad.append(f"{module} -> {target}")
    return bad


def _app_sources() -> dict[str, str]:
    sources = {}
    for path in sorted((ROOT / "app").rglob("*.py")):
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        sources[dotted.removesuffix(".__init__")] = path.read_text()
    return sources


def test_app_holds_only_its_wings() -> None:
    children = sorted(info.name for info in pkgutil.iter_modules(app.__path__))
    assert children == sorted(APP_WINGS)
    for name in APP_WINGS:
        is_package = (ROOT / "app" / name / "__init__.py").exists()
        assert is_package == (name not in ("config", "metrics", "periodic")), name


def test_app_wings_import_one_way() -> None:
    sources = _app_sources()
    assert "app.fanout.hub" in sources and "app.protocol.ws_session" in sources
    assert wing_violations(sources) == []


def test_the_wing_check_catches_a_wrong_way_import() -> None:
    """A synthetic module per forbidden direction: the fan-out reaching a socket type, the sans-I/O
    protocol reaching the fan-out, a route module imported by a tier, relative imports too."""
    synthetic = {
        "app.fanout.bad": "from app.transport.connection import Connection\n",
        "app.protocol.bad": "if TYPE_CHECKING:\n    from app.fanout import hub\n",
        "app.http.bad": "from app import ingest\n",
        "app.tiers.bad": "import app.api.state\n",
        "app.ingest.bad": "from ..runtime import server\n",
        "app.protocol.fine": "from app.protocol import frames\nfrom app.config import Settings\n",
    }
    assert wing_violations(synthetic) == [
        "app.fanout.bad -> app.transport.connection",
        "app.http.bad -> app.ingest",
        "app.ingest.bad -> app.runtime",
        "app.protocol.bad -> app.fanout",
        "app.tiers.bad -> app.api.state",
    ]


def test_the_protocol_wing_imports_no_io_library() -> None:
    """app/protocol is the sans-I/O core: every module of it imports with the WebSocket, HTTP and
    Redis libraries and PySpark made unimportable."""
    modules = _modules("app.protocol")
    assert "app.protocol.ws_session" in modules and "app.protocol.frames" in modules
    done = _import_with_blocked(modules, IO_LIBRARIES)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"imported {len(modules)}" in done.stdout


def test_the_io_blocker_catches_an_io_import() -> None:
    """The check above can fail: the transport wing (websockets, starlette) does not import with
    the I/O libraries blocked."""
    done = _import_with_blocked(["app.transport.connection"], IO_LIBRARIES)
    assert done.returncode != 0 and "out of bounds" in done.stderr
