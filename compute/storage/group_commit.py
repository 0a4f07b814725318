"""The writer thread's loop both logs share: everything queued since the last round is one group
(one SQLite commit, one Kafka transaction)."""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def run_groups(requests: queue.SimpleQueue[T | None], handle: Callable[[list[T]], None]) -> None:
    """A writer thread's loop: hand everything queued since the last round to `handle` as one group
    (one commit or round trip for all of it); a None in the queue stops the loop after its group."""
    while True:
        first = requests.get()
        if first is None:
            return
        group = [first]
        stop = False
        while True:
            try:
                nxt = requests.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                stop = True
                break
            group.append(nxt)
        handle(group)
        if stop:
            return
