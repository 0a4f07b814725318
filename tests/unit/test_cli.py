"""`sparkwire` on the command line, as a new user first meets it: help, version, and a bad value
as a usage error (argparse's two lines, exit 2), never a traceback."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit


def sparkwire(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.runtime.cli", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_serve_help_lists_every_option_with_its_default(flag: str) -> None:
    answer = sparkwire("serve", flag)
    assert answer.returncode == 0, answer.stderr
    assert "--min-free-bytes" in answer.stdout
    assert "5% of the disk" in answer.stdout  # the '%' that once broke argparse's formatting
    assert "env SPARKWIRE_PORT, default 8000" in answer.stdout


def test_version_prints_the_installed_version() -> None:
    answer = sparkwire("--version")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == f"sparkwire {importlib.metadata.version('sparkwire')}"


def test_a_bad_flag_value_is_a_usage_error_not_a_traceback() -> None:
    answer = sparkwire("serve", "--port", "abc")
    assert answer.returncode == 2
    assert answer.stdout == ""
    assert answer.stderr.splitlines() == [
        "usage: sparkwire serve [-h] [--OPTION VALUE ...]",
        "sparkwire serve: error: argument --port: Input should be a valid integer, unable to parse "
        "string as an integer (got 'abc')",
    ]


def test_a_bad_environment_value_names_its_variable() -> None:
    answer = sparkwire("serve", env={"SPARKWIRE_ROLE": "edges"})
    assert answer.returncode == 2
    assert "Traceback" not in answer.stderr
    assert answer.stderr.splitlines()[-1] == (
        "sparkwire serve: error: argument --role (env SPARKWIRE_ROLE): "
        "Input should be 'all', 'compute' or 'edge' (got 'edges')"
    )


def test_tail_without_a_channel_says_what_it_needs() -> None:
    answer = sparkwire("tail", "--channel", "engine.temp")
    assert answer.returncode == 2
    assert answer.stderr == "sparkwire tail: error: give --data-source and --channel, or --node FILE\n"


def test_tail_with_a_malformed_tag_names_it() -> None:
    answer = sparkwire("tail", "--data-source", "ri.a", "--channel", "c", "--tag", "vehicle")
    assert answer.returncode == 2
    assert answer.stderr == "sparkwire tail: error: --tag 'vehicle': expected K=V\n"


def test_spark_archive_records_nothing_when_this_jdk_s_archive_is_there(tmp_path: Path) -> None:
    recorded = tmp_path / "spark-classes.jsa"
    recorded.write_bytes(b"recorded earlier")
    done = sparkwire("spark-archive", env={"SPARKWIRE_SPARK_CLASS_ARCHIVE": str(recorded)})
    assert done.returncode == 0, done.stderr
    assert f"already recorded: {recorded}" in done.stdout
    assert recorded.read_bytes() == b"recorded earlier"
