"""New computations asking together share their back-fill (compute/spark/backfill.py): read series by
series beside the loads (the embedded log) or in one read (a log read by a Spark job), each one gets
exactly the FullResult it gets back-filled alone, and a read that fails fails only the computations
still waiting on it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from app import frames
from compute.evaluation.compiler import Limits, ResultOptions, compile_plan
from compute.evaluation.computation import Batch, Computation, Rows
from compute.spark import backfill
from compute.spark.backfill import BackfillQueue
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from compute.storage.sqlite import blocks
from compute.storage.sqlite.writer import DurableLog
from tests import node_json as n

NS = 1_000_000_000
MS = 1_000_000
RID = "ri.backfill"
CHANNELS = ("a", "b", "c")


def _computation(channels: tuple[str, ...], window_ns: int, buckets: int) -> Computation:
    """Buckets of one channel, or of the sum of two."""
    raw = [n.raw(f"v{i}") for i in range(len(channels))]
    node = n.series(n.numeric_series(raw[0] if len(raw) == 1 else n.binary("add", *raw)), buckets)
    context = {f"v{i}": n.channel(RID, name) for i, name in enumerate(channels)}
    plan = compile_plan(node, window_ns, context, Limits(), ResultOptions())
    return Computation(f"{channels}-{window_ns}-{buckets}", plan, allowed_lateness_ns=None)


@pytest.fixture
def log(tmp_path: Path) -> DurableLog:
    durable = DurableLog(tmp_path / "log.db")
    yield durable
    durable.close()


def _fill(log: DurableLog) -> tuple[dict[str, SeriesInfo], int]:
    """Three channels, 40 requests of 50 points each ending now; the series and the newest seq."""
    rng = np.random.default_rng(5)
    keys = {name: SeriesKey.of(RID, name, {}) for name in CHANNELS}
    end = time.time_ns() // MS * MS  # back-fills read the window ending at the clock
    for i in range(40):
        ts = end - (40 - i) * 50 * 10 * MS + np.arange(50, dtype=np.int64) * 10 * MS
        writes = [SeriesWrite(key, SeriesKind.NUMERIC, ts, rng.standard_normal(50)) for key in keys.values()]
        log.submit(writes).result()
    infos = {info.key.channel: info for info in log.series()}
    reader = blocks.connect_reader(log.path)
    try:
        return infos, blocks.max_seq(reader)
    finally:
        reader.close()


class _Reader:
    """The engine's read of the embedded log, recording what each read asked for."""

    def __init__(self, log: DurableLog, fail_on: int | None = None) -> None:
        self.path = log.path
        self.asked: list[list[int]] = []
        self.fail_on = fail_on
        self._lock = threading.Lock()

    def __call__(self, series_ids: list[int], from_ts: int, upto_seq: int) -> Batch:
        with self._lock:
            self.asked.append(list(series_ids))
            if self.fail_on is not None and len(self.asked) == self.fail_on:
                raise OSError("the log went away")
        conn = blocks.connect_reader(self.path)
        try:
            cols = blocks.read_series_columns(conn, series_ids, from_ts, upto_seq)
        finally:
            conn.close()
        return {sid: Rows(c.seq, c.ts, c.values) for sid, c in cols.items()}


def _make(infos: dict[str, SeriesInfo], upto: int) -> list[Computation]:
    """Computations over different channels, windows and back-fill marks (some cut the read)."""
    specs = [
        (("a",), 15 * NS, 40, upto),
        (("b",), 8 * NS, 25, upto - 7),
        (("a", "c"), 12 * NS, 30, upto - 20),
        (("c",), 19 * NS, 50, upto),
        (("b",), 3 * NS, 10, upto - 1),
    ]
    out = []
    for channels, window, buckets, mark in specs:
        c = _computation(channels, window, buckets)
        for name in CHANNELS:
            c.route(infos[name])
        c.backfill_seq = mark
        out.append(c)
    return out


def _full(c: Computation) -> bytes:
    return frames.full_update(c.snapshot(None), c.plan.grouped)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """One `now` for every back-fill, so that alone and together cover the same windows."""
    now = time.time_ns()
    monkeypatch.setattr(backfill, "time", SimpleNamespace(time_ns=lambda: now))


@pytest.mark.parametrize("split_reads", [True, False])
def test_computations_back_filled_together_get_what_each_gets_alone(
    log: DurableLog, clock: None, split_reads: bool
) -> None:
    infos, upto = _fill(log)
    alone = _make(infos, upto)
    for c in alone:
        BackfillQueue(_Reader(log), split_reads).run(c)
    reader = _Reader(log)
    together = _make(infos, upto)
    outcomes = BackfillQueue(reader, split_reads).run_all(together)
    assert [error for _, error in outcomes] == [None] * len(together)
    for a, t in zip(alone, together, strict=True):
        assert t.ready and len(t.outputs[next(iter(t.outputs))]) > 0
        assert _full(t) == _full(a)
    every = sorted({sid for c in together for sid in c.routes})
    if split_reads:  # series by series, each read once, in the order the computations asked
        ids = {name: infos[name].id for name in CHANNELS}
        assert reader.asked == [[ids["a"]], [ids["b"]], [ids["c"]]]
    else:
        assert reader.asked == [every]


def test_a_failed_read_fails_the_computations_still_waiting_on_it(log: DurableLog) -> None:
    infos, upto = _fill(log)
    computations = _make(infos, upto)
    outcomes = BackfillQueue(_Reader(log, fail_on=2), split_reads=True).run_all(computations)
    errors = [error for _, error in outcomes]
    assert errors[0] is None and computations[0].ready  # its series were read before the failure
    assert all(isinstance(e, OSError) for e in errors[1:])
    assert not any(c.ready for c in computations[1:])
