"""The light client package: client/ builds into a wheel of its own that requires websockets (and
pandas only as an extra) and holds nothing of the server; installed into a clean virtual
environment, it subscribes to the running server without PySpark, the server or pandas there."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
import venv
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import Requirement

from tests.conftest import ROOT, ServerProcess
from tests.wire import NANOS, write_points

CLIENT = ROOT / "client"

# Run by the clean environment's Python in isolated mode (-I: no PYTHON* variables, no user site,
# not the working directory on sys.path): where the package came from, what is importable there,
# and the FullResult of a subscription to the points the test wrote.
SUBSCRIBER = """
import asyncio, importlib.util, json, sys

import sparkwire_client
from sparkwire_client import Client, numeric_channel, series

HEAVY = ("pyspark", "fastapi", "app", "compute", "schemas", "pandas", "numpy", "orjson", "httpx")


async def main(url: str, rid: str) -> None:
    async with Client(url) as client:
        sub = await client.subscribe(series(numeric_channel(rid, "p")), window=3600)
        view = await sub.wait_for(lambda v: v.updates >= 1, timeout=30)
    try:
        view.to_pandas()
        pandas_error = None
    except ImportError as exc:
        pandas_error = str(exc)
    print(json.dumps({
        "package": sparkwire_client.__file__,
        "importable": [name for name in HEAVY if importlib.util.find_spec(name) is not None],
        "kind": view.kind,
        "timestamps": view.timestamps,
        "values": view.values,
        "pandas_error": pandas_error,
    }))


asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def run(command: list[str | Path], cwd: Path, timeout: float) -> str:
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command}: {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def build_wheel(tmp_path: Path) -> Path:
    """The wheel pip builds from a copy of client/ (so the build leaves nothing in the work tree)."""
    source = tmp_path / "source"
    shutil.copytree(
        CLIENT, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    )
    out = tmp_path / "dist"
    pip_wheel: list[str | Path] = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet"]
    run([*pip_wheel, source, "-w", out], cwd=tmp_path, timeout=120)
    (wheel,) = out.glob("sparkwire_client-*.whl")
    return wheel


def check_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = HeaderParser().parsestr(archive.read(metadata_name).decode())
    assert metadata["Name"] == "sparkwire-client"
    requirements = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    core = {r.name for r in requirements if r.marker is None}

    def with_extra(extra: str) -> set[str]:
        return {r.name for r in requirements if r.marker is not None and r.marker.evaluate({"extra": extra})}

    assert core == {"websockets"}, requirements
    assert with_extra("pandas") == {"pandas"}, requirements
    assert with_extra("arrow") == {"pyarrow"}, requirements  # ArrowPlot results (series(arrow=...))
    assert sorted(metadata.get_all("Provides-Extra")) == ["arrow", "pandas"]

    dist_info = metadata_name.split("/")[0]
    assert {n.split("/")[0] for n in names} == {"sparkwire_client", dist_info}, names
    modules = {n for n in names if n.startswith("sparkwire_client/")}
    assert modules == {f"sparkwire_client/{p.name}" for p in (CLIENT / "sparkwire_client").glob("*.py")} | {
        "sparkwire_client/py.typed"
    }
    assert not [n for n in names if any(word in n.lower() for word in ("pyspark", "fastapi", "uvicorn"))]


def clean_environment(tmp_path: Path, wheel: Path) -> Path:
    """A new virtual environment (no system site packages) with the wheel and what it requires."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    pip_install: list[str | Path] = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    run([*pip_install, wheel], cwd=tmp_path, timeout=180)
    return python


async def test_the_client_wheel_installs_alone_and_subscribes(server: ServerProcess, tmp_path: Path) -> None:
    wheel = await asyncio.to_thread(build_wheel, tmp_path)
    check_wheel(wheel)
    python = await asyncio.to_thread(clean_environment, tmp_path, wheel)

    rid = f"ri.test.client-package.{time.time_ns()}"
    now = time.time_ns()
    written = [
        (now - 60 * NANOS + i * 1_000_000_007, v) for i, v in enumerate([21.5, -3.25, 0.0, 1e-9, 87.125])
    ]
    await write_points(server.base_url, rid, "p", written)

    out = await asyncio.to_thread(
        run, [python, "-I", "-c", SUBSCRIBER, server.base_url, rid], cwd=tmp_path, timeout=60
    )
    seen = json.loads(out.strip().splitlines()[-1])
    assert Path(seen["package"]).is_relative_to(tmp_path / "venv"), seen["package"]
    assert seen["importable"] == [], "the client's environment holds only the client and websockets"
    assert seen["kind"] == "numeric"
    assert list(zip(seen["timestamps"], seen["values"], strict=True)) == written
    assert seen["pandas_error"] is not None and "sparkwire-client[pandas]" in seen["pandas_error"]
