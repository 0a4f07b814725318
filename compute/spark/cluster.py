"""Running on a Spark cluster: the Python code executors need (the data sources and what they
import) is shipped with the application as a zip, so nothing depends on a path that exists only on
the driver. Executors still need the same Python version and the third-party packages (pyarrow,
numpy, orjson) installed."""

from __future__ import annotations

import importlib
import logging
import tempfile
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

SHIPPED_PACKAGES = ("compute", "schemas")  # executors import these; `app` stays on the driver


def is_cluster(master: str) -> bool:
    return not master.startswith("local")


def build_code_zip(target_dir: Path) -> Path:
    """A zip of the packages executors import, built from this process's own sources."""
    target = target_dir / "sparkwire-code.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in SHIPPED_PACKAGES:
            package_dir = Path(importlib.import_module(name).__file__ or "").parent
            for path in sorted(package_dir.rglob("*.py")):
                zf.write(path, Path(name) / path.relative_to(package_dir))
    return target


def ship_code(spark: SparkSession) -> Path:
    target = build_code_zip(Path(tempfile.mkdtemp(prefix="sparkwire-code-")))
    spark.sparkContext.addPyFile(str(target))
    logger.info("shipped %s to executors as %s", ", ".join(SHIPPED_PACKAGES), target)
    return target


def _origin(_: object) -> str:
    return str(importlib.import_module("compute").__file__)


def executor_code_origin(spark: SparkSession) -> str:
    """Where an executor imports `compute` from (a one-task job): the shipped zip on a cluster."""
    return str(spark.sparkContext.parallelize([0], 1).map(_origin).first())
