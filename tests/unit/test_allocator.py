"""The server keeps freed memory for the next back-fill (app/runtime/allocator.py): an hour-long column freed
stays in the process, and the next one of its size takes the same pages instead of new ones."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter per case: the allocator's settings are the process's, for its whole life.
PROBE = """
import json, sys
import numpy as np
from app.runtime.allocator import keep_freed_memory

def rss_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))

kept = keep_freed_memory() if sys.argv[1] == "keep" else None
column = np.ones(3_600_000)  # an hour of a 1 kHz channel: 28.8 MB
held = rss_kb()
del column
freed = rss_kb()
again = np.ones(3_600_000)
reused = rss_kb()
print(json.dumps({"kept": kept, "held": held, "freed": freed, "reused": reused}))
"""


def _probe(mode: str) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the settings are glibc's")
def test_a_freed_column_stays_for_the_next_one() -> None:
    default, kept = _probe("default"), _probe("keep")
    column_kb = 3_600_000 * 8 // 1024
    # glibc's default hands the column back to the kernel on free, and faults a new one in
    assert default["held"] - default["freed"] > column_kb * 0.9
    assert default["reused"] - default["freed"] > column_kb * 0.9
    # kept: nothing goes back, and the next column takes the same pages
    assert kept["kept"] is True
    assert kept["held"] - kept["freed"] < column_kb * 0.1
    assert kept["reused"] - kept["freed"] < column_kb * 0.1
