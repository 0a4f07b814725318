"""The CSV of an export (app/api/export.py): the points read, one row per timestamp (or bucket, when
decimated) of any column, rendered by Arrow's CSV writer. Imported by the export when it first
answers, so that a process that never exports (an edge) does not hold Arrow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from app.api.log_reads import Points
from compute.storage.series import SeriesInfo, SeriesKind

if TYPE_CHECKING:
    from app.api.export import Column


def iso(times: np.ndarray) -> pa.Array:
    """ISO 8601 in UTC with nanoseconds: 2023-11-14T22:13:20.000000123Z."""
    text = np.datetime_as_string(times.astype("datetime64[ns]"), unit="ns")
    return pc.binary_join_element_wise(pa.array(text, pa.string()), "Z", "")


def relative(times: np.ndarray, origin: int, unit: int) -> pa.Array:
    """(ts - origin) in `unit`: exact decimals where the unit is a power of ten of nanoseconds (no
    trailing zeros), the nearest double beyond."""
    diff = times - np.int64(origin)
    if unit == 1:
        return pa.array(diff).cast(pa.string())
    digits = len(str(unit)) - 1
    if unit != 10**digits:
        return pa.array(diff / unit).cast(pa.string())
    whole, frac = np.divmod(np.abs(diff), unit)
    sign = pa.array(np.where(diff < 0, "-", ""), pa.string())
    fraction = pc.utf8_rtrim(pc.utf8_lpad(pa.array(frac).cast(pa.string()), digits, "0"), "0")
    dot = pc.if_else(pc.equal(pc.utf8_length(fraction), 0), "", ".")
    return pc.binary_join_element_wise(sign, pa.array(whole).cast(pa.string()), dot, fraction, "")


def doubles_text(values: np.ndarray) -> pa.Array:
    """The shortest text that reads back as the same double (Arrow's cast), whole numbers with a
    `.0` so that a reader takes the column for doubles."""
    text = pa.array(values, pa.float64()).cast(pa.string())
    whole = pc.match_substring_regex(text, r"^-?[0-9]+$")
    return pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)


def _latest_per_timestamp(
    ts: np.ndarray, seq: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One point per timestamp, the one written last (highest seq), in time order."""
    order = np.lexsort((seq, ts))
    ts, values = ts[order], values[order]
    last = np.ones(len(ts), dtype=bool)
    last[:-1] = ts[1:] != ts[:-1]
    return ts[last], values[last]


def decimate(
    ts: np.ndarray, values: np.ndarray, kind: SeriesKind, start: int, step: int
) -> tuple[np.ndarray, np.ndarray]:
    """One point per bucket [start + i * step, start + (i + 1) * step) that holds any, at the bucket's
    start: the mean of its values (numeric) or their mode (enum; of equally frequent labels, the first
    in sort order), as nominal-api's ResolutionOption says ("the mean of the values will be used for
    numeric types and the mode of the values will be used for enum types")."""
    if len(ts) == 0:
        return ts, values
    buckets, at = np.unique((ts - start) // step, return_inverse=True)
    if kind is SeriesKind.NUMERIC:
        x = values.astype(np.float64)
        out = np.bincount(at, weights=x, minlength=len(buckets)) / np.bincount(at, minlength=len(buckets))
    else:
        labels, code = np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)
        pairs, counts = np.unique(at * len(labels) + code, return_counts=True)
        bucket_of, label_of = np.divmod(pairs, len(labels))
        # per bucket the highest count, then the lowest label code (lexsort: last key first)
        order = np.lexsort((label_of, -counts, bucket_of))
        first = np.ones(len(order), dtype=bool)
        first[1:] = bucket_of[order][1:] != bucket_of[order][:-1]
        out = labels[label_of[order][first]]
    return start + buckets * step, out


def build_csv(
    read: Mapping[int, Points],
    columns: list[Column],
    infos: list[SeriesInfo],
    start: int,
    end: int,
    fmt: tuple[int, int] | None,
    step: int | None = None,
) -> bytes:
    """Blocking: the CSV of what was read (Arrow's writer; an absent cell is empty), decimated to
    `step` when given."""
    chosen = {c.name: [i for i in infos if c.selects(i)] for c in columns}
    per_column: list[tuple[np.ndarray, np.ndarray]] = []
    for column in columns:
        parts = [read[i.id] for i in chosen[column.name] if i.id in read]
        if parts:
            ts = np.concatenate([p.ts for p in parts])
            seq = np.concatenate([p.seq for p in parts])
            values = np.concatenate([p.values for p in parts])
            keep = (ts >= start) & (ts < end)
            latest = _latest_per_timestamp(ts[keep], seq[keep], values[keep])
            per_column.append(latest if step is None else decimate(*latest, column.kind, start, step))
        else:
            per_column.append((np.empty(0, dtype=np.int64), np.empty(0)))
    times = np.unique(np.concatenate([ts for ts, _ in per_column]))
    arrays = [iso(times) if fmt is None else relative(times, *fmt)]
    for column, (ts, values) in zip(columns, per_column, strict=True):
        if column.kind is SeriesKind.NUMERIC:
            text = doubles_text(values.astype(np.float64))
        else:
            text = pa.array(values.tolist(), pa.string())
        at = np.full(len(times), -1, dtype=np.int64)
        at[np.searchsorted(times, ts)] = np.arange(len(ts))
        arrays.append(pc.take(text, pa.array(at, mask=at < 0)))
    table = pa.Table.from_arrays(arrays, names=["timestamp", *(c.name for c in columns)])
    out = pa.BufferOutputStream()
    pa_csv.write_csv(table, out, pa_csv.WriteOptions(quoting_style="needed"))
    return bytes(out.getvalue().to_pybytes())
