"""A server's processes, read from /proc: its tree of descendants and whether one still runs."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def process_tree(pid: int) -> list[int]:
    """The process and every descendant, from /proc (parents before children)."""
    tree = [pid]
    for parent in tree:
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{parent}/task"):
                with contextlib.suppress(OSError):
                    children = Path(f"/proc/{parent}/task/{task}/children").read_text().split()
                    tree += [int(c) for c in children if int(c) not in tree]
    return tree


def alive(pid: int) -> bool:
    """Running (a zombie has exited: only its parent has not collected it yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
