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

from app.protocol import frames
from compute.evaluation.compiler.limits import Limits, ResultOptions
from compute.evaluation.compiler.plan import compile_plan
from compute.evaluation.computation import Batch, Computation, Rows
from compute.evaluation.window import spare_room
from compute.spark import backfill
from compute.spark.backfill import BackfillQueue
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesInfo, SeriesKey, SeriesKind
from compute.storage.sqlite import blocks
from compute.storage.sqlite.connection import connect_reader
from compute.storage.sqlite.writer import DurableLog
from tests import node_json as n

NS = 1_000_000_000
MS = 1_000_000
RID = "ri.backfill"
CHANNELS = ("a", "b", "c")


def _computation(
    channels: tuple[str, ...], window_ns: int, buckets: int, allowed_lateness_ns: int | None = None
) -> Computation:
    """Buckets of one channel, or of the sum of two."""
    raw = [n.raw(f"v{i}") for i in range(len(channels))]
    node = n.series(n.numeric_series(raw[0] if len(raw) == 1 else n.binary("add", *raw)), buckets)
    context = {f"v{i}": n.channel(RID, name) for i, name in enumerate(channels)}
    plan = compile_plan(node, window_ns, context, Limits(), ResultOptions())
    return Computation(f"{channels}-{window_ns}-{buckets}", plan, allowed_lateness_ns)


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
    reader = connect_reader(log.path)
    try:
        return infos, blocks.max_seq(reader)
    finally:
        reader.close()


class _Reader:
    """The engine's read of the embedded log, recording what each read asked for."""

    def __init__(self, log: DurableLog, fail_for: int | None = None, spare: bool = False) -> None:
        self.path = log.path
        self.spare = spare_room if spare else None  # the engine's read leaves a window's room
        self.asked: list[list[int]] = []
        self.fail_for = fail_for  # a series whose read raises
        self._lock = threading.Lock()

    def __call__(self, series_ids: list[int], from_ts: int, upto_seq: int) -> Batch:
        with self._lock:
            self.asked.append(list(series_ids))
            if self.fail_for in series_ids:
                raise OSError("the log went away")
        conn = connect_reader(self.path)
        try:
            cols = blocks.read_series_columns(conn, series_ids, from_ts, upto_seq, self.spare)
        finally:
            conn.close()
        return {sid: Rows(c.seq, c.ts, c.values, c.buffers) for sid, c in cols.items()}


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
        ((_, error),) = BackfillQueue(_Reader(log), split_reads).run_all([c])
        assert error is None, error
    reader = _Reader(log, spare=True)
    together = _make(infos, upto)
    outcomes = BackfillQueue(reader, split_reads).run_all(together)
    assert [error for _, error in outcomes] == [None] * len(together)
    for a, t in zip(alone, together, strict=True):
        assert t.ready and len(t.outputs[next(iter(t.outputs))]) > 0
        assert _full(t) == _full(a)
    every = sorted({sid for c in together for sid in c.routes})
    if split_reads:  # series by series, each read once (two reads run at once, so in either order)
        ids = {name: infos[name].id for name in CHANNELS}
        assert sorted(reader.asked) == sorted([[ids["a"]], [ids["b"]], [ids["c"]]])
    else:
        assert reader.asked == [every]


def test_a_failed_read_fails_the_computations_still_waiting_on_it(log: DurableLog) -> None:
    infos, upto = _fill(log)
    computations = _make(infos, upto)
    # read series by series in the order the computations ask: a, b (fails), c
    outcomes = BackfillQueue(_Reader(log, fail_for=infos["b"].id), split_reads=True).run_all(computations)
    errors = [error for _, error in outcomes]
    assert errors[0] is None and computations[0].ready  # its series were read before the failure
    assert all(isinstance(e, OSError) for e in errors[1:])
    assert not any(c.ready for c in computations[1:])


def test_computations_loading_the_same_read_append_into_windows_of_their_own(log: DurableLog) -> None:
    """The engine's read leaves room after each series' columns, which the first window to load them
    whole appends into without a copy (compute/evaluation/window.py adopt). Two computations load
    the same rows, one keeping live points the other drops as late, and are fed the same batches:
    each sends what it sends loaded from a read without room (its window a copy)."""
    infos, upto = _fill(log)
    sid = infos["a"].id
    roomy_rows = _Reader(log, spare=True)([sid], 0, upto)
    plain_rows = _Reader(log)([sid], 0, upto)
    assert roomy_rows[sid].buffers is not None and plain_rows[sid].buffers is None
    newest = int(plain_rows[sid].ts.max())
    loaded_at = newest + NS

    def load(rows: Batch) -> list[Computation]:
        keeps = _computation(("a",), 30 * NS, 40)  # late: 100 ms behind the series' newest point
        drops = _computation(("a",), 30 * NS, 40, allowed_lateness_ns=0)  # late: before the clock
        for c in (keeps, drops):
            c.route(infos["a"])
            c.backfill_seq = upto
            c.load_backfill(rows, loaded_at)
        return [keeps, drops]

    roomy, plain = load(roomy_rows), load(plain_rows)
    assert roomy_rows[sid].buffers is None  # taken by the first window, so the second copied
    # (first ts, points, applied at): behind the clock (only `keeps` takes it), then two both take:
    # the first fits in the room after the history, the second outgrows it.
    batches = [(newest + MS, 300, loaded_at + 5 * NS), (loaded_at + 5 * NS, 500, loaded_at + 5 * NS)]
    batches.append((loaded_at + 6 * NS, 3000, loaded_at + 6 * NS))
    seq = upto
    for first, count, at in batches:
        ts = first + np.arange(count, dtype=np.int64) * MS
        rows = {sid: Rows(np.arange(seq + 1, seq + 1 + count, dtype=np.int64), ts, np.cos(ts / 1e9))}
        seq += count
        for r, p in zip(roomy, plain, strict=True):
            r.apply_batch(rows, at)
            p.apply_batch(rows, at)
            assert _full(r) == _full(p)
    assert roomy[0].late.count == 0 and roomy[1].late.count == 300
