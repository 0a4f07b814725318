"""An edge's mirror (app/tiers/mirror.py) after a re-sync: a snapshot that brings nothing new owes
subscribers nothing, unless they were told of a failure since their last whole window."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.tiers import wire
from app.tiers.mirror import Fresh, Gap, ResultMirror
from compute.evaluation import deltas
from compute.evaluation.compiler.limits import Limits
from compute.evaluation.request import ComputationRequest
from compute.evaluation.results import NumericPoints
from tests.wire import channel_variable, series_node

SECOND = 1_000_000_000


def _mirror() -> ResultMirror:
    request = ComputationRequest(series_node(), 60 * SECOND, {"x": channel_variable("ri.m", "temp")}, None)
    return ResultMirror(request, request.compile(Limits()))


def _snapshot(epoch: str, version: int, values: list[float]) -> dict[str, Any]:
    ts = np.arange(1, len(values) + 1, dtype=np.int64) * SECOND
    outputs = {(): NumericPoints(ts, np.array(values))}
    message = {"t": wire.SNAPSHOT, "e": epoch, "v": version, "end": 100 * SECOND, "o": deltas.whole(outputs)}
    return deltas.decode(deltas.encode(message))  # as the edge receives it


def _error(sticky: bool) -> dict[str, Any]:
    err = ["PersistentCompute:JobInvalidState", "restarting", {}, 503]
    return {"t": wire.ERROR, "e": "a", "sticky": sticky, "err": err}


def test_the_first_snapshot_is_fresh_and_a_repeat_of_it_is_nothing() -> None:
    mirror = _mirror()
    assert isinstance(mirror.apply(_snapshot("a", 0, [1.0])), Fresh)
    assert mirror.apply(_snapshot("a", 0, [1.0])) is None  # another edge asked for it


def test_a_resync_with_nothing_new_owes_no_second_full_result() -> None:
    mirror = _mirror()
    mirror.apply(_snapshot("a", 0, [1.0]))
    mirror.synced = False  # e.g. a new compute epoch seen in a heartbeat, or a query restart
    assert mirror.apply(_snapshot("b", 0, [1.0])) is None
    assert mirror.synced and mirror.epoch == "b"
    assert isinstance(mirror.apply(_snapshot("b", 1, [1.0, 2.0])), Fresh)  # something new: owed


def test_after_a_lost_link_the_next_snapshot_is_owed_even_if_unchanged() -> None:
    mirror = _mirror()
    mirror.apply(_snapshot("a", 0, [1.0]))
    mirror.lost()  # subscribers got JobInvalidState
    assert isinstance(mirror.apply(_snapshot("a", 0, [1.0])), Fresh)
    mirror.synced = False
    assert mirror.apply(_snapshot("a", 0, [1.0])) is None  # they have it since


def test_after_an_error_message_the_next_snapshot_is_owed_even_if_unchanged() -> None:
    mirror = _mirror()
    mirror.apply(_snapshot("a", 0, [1.0]))
    mirror.apply(_error(sticky=False))  # the compute tier's query failed; it restarts
    assert isinstance(mirror.apply(_snapshot("a", 1, [1.0])), Fresh)


def test_a_missed_change_is_a_gap() -> None:
    mirror = _mirror()
    mirror.apply(_snapshot("a", 0, [1.0]))
    change = {"t": wire.CHANGE, "e": "a", "v": 2, "s": 0, "end": 0, "f": False, "d": []}
    assert isinstance(mirror.apply(change), Gap) and not mirror.synced
