"""The Kafka log's record values (compute/storage/kafka/layout.py): a series' points of one request
as blocks and back, every timestamp and value exactly, whatever the request's size."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from compute.storage.kafka.blocks import BLOCK_SCHEMA, points_of_blocks
from compute.storage.kafka.layout import BLOCK_POINTS, encode_blocks
from compute.storage.series import SeriesKind


def _table(rows: list[tuple[int, int, bytes]]) -> pa.Table:
    seq, sid, block = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table([list(seq), list(sid), list(block)], schema=BLOCK_SCHEMA)


def test_a_large_numeric_write_is_several_records_that_decode_to_every_point_exactly() -> None:
    n = 2 * BLOCK_POINTS + 123
    ts = np.arange(n, dtype=np.int64) * 1_000_003 + 1_700_000_000_000_000_000
    values = np.random.default_rng(1).standard_normal(n)
    values[[0, 5, n - 1]] = [math.nan, math.inf, -math.inf]
    blocks = encode_blocks(SeriesKind.NUMERIC, ts, values)
    assert len(blocks) == 3  # a record stays under Kafka's 1 MiB default
    assert max(len(b) for b in blocks) < 1 << 20
    table = points_of_blocks(_table([(10 + i, 42, b) for i, b in enumerate(blocks)]))
    assert table.column("ts").to_pylist() == ts.tolist()
    got = table.column("value").to_numpy()
    assert np.array_equal(got, values, equal_nan=True)
    assert table.column("series_id").to_pylist() == [42] * n
    assert table.column("seq").to_pylist() == [10] * BLOCK_POINTS + [11] * BLOCK_POINTS + [12] * 123
    assert table.column("str").null_count == n


def test_string_blocks_keep_their_strings_beside_numeric_ones_and_barriers_are_no_points() -> None:
    text = ["idle", "ärm ✓", "", '{"a": 1}']
    ts_text = np.array([5, 6, 7, 8], dtype=np.int64)
    ts_num = np.array([1, 2], dtype=np.int64)
    rows = [
        (1, 7, encode_blocks(SeriesKind.NUMERIC, ts_num, [0.5, -0.25])[0]),
        (2, 0, b""),  # a snapshot barrier
        (3, 9, encode_blocks(SeriesKind.ENUM, ts_text, text)[0]),
    ]
    table = points_of_blocks(_table(rows))
    assert table.column("ts").to_pylist() == [1, 2, 5, 6, 7, 8]
    assert table.column("series_id").to_pylist() == [7, 7, 9, 9, 9, 9]
    assert table.column("str").to_pylist() == [None, None, *text]
    assert table.column("value").to_pylist()[:2] == [0.5, -0.25]


def test_a_back_fill_keeps_only_points_from_its_start() -> None:
    ts = np.array([10, 20, 30, 40], dtype=np.int64)
    rows = [
        (1, 3, encode_blocks(SeriesKind.NUMERIC, ts, [1.0, 2.0, 3.0, 4.0])[0]),
        (2, 4, encode_blocks(SeriesKind.ENUM, ts, ["a", "b", "c", "d"])[0]),
    ]
    table = points_of_blocks(_table(rows), from_ts=25)
    assert table.column("ts").to_pylist() == [30, 40, 30, 40]
    assert table.column("value").to_pylist()[:2] == [3.0, 4.0]
    assert table.column("str").to_pylist() == [None, None, "c", "d"]
    assert points_of_blocks(_table(rows), from_ts=50).num_rows == 0
    assert points_of_blocks(_table([])).num_rows == 0
