"""Spark's class-data archive: the JVM classes a Sparkwire process loads at every start, recorded
once per machine and mapped from a file at each later start (the JDK's AppCDS, JEP 350).

Loading and verifying Spark's ~15,000 classes is most of a session's start. With the archive the
session starts in ~6 s instead of ~10.5 s and a server is ready ~7 s sooner
(docs/decisions/0102-spark-class-archive.md); JVMs on one machine also share its pages.

The archive belongs to one JDK and one installed PySpark (the JVM's class path): its name carries
both, so an upgrade or another virtualenv makes a new name and the old file is never offered. A file
the JDK still refuses (its jars changed under it) costs only the sharing: the JVM starts without it
(-Xshare:auto, the JDK's default), and the session's log line says so. `sparkwire spark-archive` records it
(compute/spark/class_archive_build.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pyspark

ARCHIVE_ENV = "SPARKWIRE_SPARK_CLASS_ARCHIVE"  # a path, or "off"; default: in the cache folder


def cache_dir() -> Path:
    """The per-machine cache deploy/kafka.sh also uses (Kafka's broker and connector jars)."""
    return Path(os.environ.get("SPARKWIRE_CACHE") or Path.home() / ".cache" / "sparkwire")


def java_binary() -> Path | None:
    """The `java` Spark's launcher runs: JAVA_HOME's, else PATH's."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return Path(home) / "bin" / "java"
    found = shutil.which("java")
    return Path(found) if found else None


def java_runtime() -> Path | None:
    """The JDK's class image (`lib/modules`) of that `java`: what names its archive."""
    java = java_binary()
    if java is None:
        return None
    modules = java.resolve().parent.parent / "lib" / "modules"
    return modules if modules.exists() else None


def spark_jars() -> Path:
    """The JVM's class path: PySpark's own jars, where this Python's PySpark is installed."""
    return Path(pyspark.__file__).resolve().parent / "jars"


def archive_path() -> Path | None:
    """Where the archive of this JDK and this installed PySpark lives (None: turned off, or no JDK
    found). The JDK maps an archive only for the class path it was recorded with (the jars' paths,
    sizes and times): another virtualenv's PySpark of the same version is another name."""
    chosen = os.environ.get(ARCHIVE_ENV, "")
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    runtime = java_runtime()
    if runtime is None:
        return None
    jars = spark_jars()
    jdk, installed = runtime.stat(), jars.stat()
    identity = f"{runtime}:{jdk.st_size}:{jdk.st_mtime_ns}:{jars}:{installed.st_mtime_ns}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return cache_dir() / f"spark-classes-{pyspark.__version__}-{key}.jsa"


def archive_in_use() -> Path | None:
    """The archive a session starts from: recorded and there, else None (a start without it)."""
    path = archive_path()
    return path if path is not None and path.is_file() else None


def java_option(archive: Path) -> str:
    return f"-XX:SharedArchiveFile={archive}"


def mapped_by(pid: int, archive: Path) -> bool | None:
    """Whether the JVM `pid` maps `archive`: the JDK refuses one silently (-Xshare:auto) when its class
    path changed since it was recorded. None where it cannot be told (no /proc)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    return str(archive) in maps


def recording_option(target: Path) -> str:
    """The JVM writes the classes it loaded to `target` as it exits (it takes ~20 s then)."""
    return f"-XX:ArchiveClassesAtExit={target}"
