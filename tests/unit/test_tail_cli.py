"""`sparkwire tail`'s help and printing, without a server (issue 50, item 13)."""

from __future__ import annotations

import io
import subprocess
import sys

from app.runtime.tail import LinePrinter, TablePrinter, default_buckets
from tests.conftest import ROOT

S = 1_000_000_000


def test_help_keeps_its_examples_whole_and_shows_the_url_default() -> None:
    answer = subprocess.run(
        [sys.executable, "-m", "app.runtime.cli", "tail", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={"COLUMNS": "100", "PATH": ""},
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    lines = answer.stdout.splitlines()
    assert "  sparkwire tail --node request.json --window 300" in lines  # not reflowed into the text
    assert (
        "  sparkwire tail --url http://127.0.0.1:9000 ...   # a server started with `make run PORT=9000`"
        in lines
    )
    assert "(default: http://127.0.0.1:8000)" in answer.stdout


def test_about_one_bucket_a_second_up_to_the_raw_limit() -> None:
    assert [default_buckets(w) for w in (0.5, 60, 600, 3600)] == [1, 60, 600, 1000]


def bucket(second: int, mean: float, count: int) -> dict[str, object]:
    return {"timestamp": second * S, "mean": mean, "min": mean, "max": mean, "count": count, "variance": 0.0}


def test_a_bucket_is_printed_once_complete_and_again_only_if_it_changes() -> None:
    out = io.StringIO()
    printer = LinePrinter(out, backlog=2)
    printer.show([bucket(s, float(s), 20) for s in range(5)])  # 0..3 complete, 4 filling
    assert [line.split()[1:] for line in out.getvalue().splitlines()] == [
        ["mean=2", "min=2", "max=2", "count=20"],
        ["mean=3", "min=3", "max=3", "count=20"],
    ]  # the newest 2 of the backlog
    out.truncate(0), out.seek(0)
    printer.show([bucket(s, float(s), 20) for s in range(4)] + [bucket(4, 4.0, 25)])  # 4 still filling
    assert out.getvalue() == ""
    printer.show([bucket(s, float(s), 20) for s in range(5)] + [bucket(5, 5.0, 1)])  # 4 complete
    assert [line.split()[1:] for line in out.getvalue().splitlines()] == [
        ["mean=4", "min=4", "max=4", "count=20"]
    ]


def test_an_enum_bucket_reads_as_values_and_counts_not_a_dict() -> None:
    out = io.StringIO()
    TablePrinter(out).show([{"timestamp": S, "histogram": {"PARK": 20, "DRIVE": 60}, "first": "PARK"}])
    row = out.getvalue().splitlines()[1]
    assert row.endswith("DRIVE: 60, PARK: 20 (first PARK)") and "{" not in row
