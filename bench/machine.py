"""What machine a run was on, for BENCHMARKS.md."""

from __future__ import annotations

import os
import platform
import subprocess
import sys


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return 0.0


def _java() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        return out.stderr.splitlines()[0] if out.stderr else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "not found"


def pyspark_line(m: dict[str, object]) -> str:
    """PySpark's version, and whether its JVMs started from the class archive (docs/decisions/0102:
    ~7 s off each start); a report written before the archive existed says nothing of it."""
    archive = m.get("spark_class_archive")
    if archive is None:
        return f"PySpark {m['pyspark']}"
    return f"PySpark {m['pyspark']} (its JVMs from the class archive: {'yes' if archive else 'no'})"


def describe_machine() -> dict[str, object]:
    import pyspark

    from compute.spark.class_archive import archive_in_use

    load = os.getloadavg()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _mem_gib(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "java": _java(),
        "pyspark": pyspark.__version__,
        "spark_class_archive": archive_in_use() is not None,
        "load_average_at_start": [round(x, 2) for x in load],
    }
