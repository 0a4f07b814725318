"""Where Spark's class-data archive lives (compute/spark/class_archive.py): one name per JDK and
PySpark, in the machine's cache, offered to a session only once it is recorded."""

from __future__ import annotations

import os
from pathlib import Path

import pyspark
import pytest

from compute.spark import class_archive
from compute.spark.class_archive import ARCHIVE_ENV, archive_in_use, archive_path, java_option

pytestmark = pytest.mark.unit


def test_the_default_archive_is_named_for_this_pyspark_and_jdk_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    monkeypatch.setenv("SPARKWIRE_CACHE", str(tmp_path))
    path = archive_path()
    assert path is not None and path.parent == tmp_path
    assert path.name.startswith(f"spark-classes-{pyspark.__version__}-") and path.suffix == ".jsa"
    assert archive_in_use() is None  # not recorded yet: a session starts without one
    path.write_bytes(b"recorded")
    assert archive_in_use() == path
    assert java_option(path) == f"-XX:SharedArchiveFile={path}"


def test_another_jdk_gets_another_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    monkeypatch.setenv("SPARKWIRE_CACHE", str(tmp_path))
    names = set()
    for release in ("17.0.15", "17.0.16"):
        jdk = tmp_path / f"jdk-{release}"
        (jdk / "bin").mkdir(parents=True)
        (jdk / "lib").mkdir()
        (jdk / "bin" / "java").write_text("#!/bin/sh\n")
        (jdk / "lib" / "modules").write_bytes(release.encode() * 10)
        monkeypatch.setenv("JAVA_HOME", str(jdk))
        assert class_archive.java_runtime() == jdk / "lib" / "modules"
        path = archive_path()
        assert path is not None
        names.add(path.name)
    assert len(names) == 2


def test_the_archive_can_be_chosen_or_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = tmp_path / "mine.jsa"
    monkeypatch.setenv(ARCHIVE_ENV, str(chosen))
    assert archive_path() == chosen and archive_in_use() is None
    chosen.write_bytes(b"recorded")
    assert archive_in_use() == chosen
    monkeypatch.setenv(ARCHIVE_ENV, "off")
    assert archive_path() is None and archive_in_use() is None


def test_another_pyspark_install_gets_another_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The JDK maps an archive only for the class path it was recorded with: a second virtualenv's
    # PySpark of the same version must not be offered the first one's (CI's clone met exactly that).
    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    monkeypatch.setenv("SPARKWIRE_CACHE", str(tmp_path))
    names = set()
    for venv in ("a", "b"):
        jars = tmp_path / venv / "pyspark" / "jars"
        jars.mkdir(parents=True)
        monkeypatch.setattr(class_archive, "spark_jars", lambda jars=jars: jars)
        path = archive_path()
        assert path is not None
        names.add(path.name)
    assert len(names) == 2


def test_whether_a_process_maps_a_file_is_read_from_proc(tmp_path: Path) -> None:
    import numpy

    mapped = next(Path(numpy.__file__).parent.rglob("_multiarray_umath*.so"))  # imported: mapped
    assert class_archive.mapped_by(os.getpid(), mapped.resolve()) is True
    assert class_archive.mapped_by(os.getpid(), tmp_path / "never.jsa") is False
