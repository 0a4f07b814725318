"""The protobuf endpoint's column reader (app/ingest_nominal.py `_wire_columns`) against reading each
point through upb's objects: the same writes, or the same refusal, for whatever a request holds."""

from __future__ import annotations

import random

import numpy as np
import pytest
from nominal.protos.write import nominal_write_pb2 as pb

from app import ingest_nominal
from app.ingest import InvalidWrite
from app.ingest_nominal import nominal_writes

RID = "ri.sparkwire.test.dataset.columns"
KINDS = ("double_points", "integer_points", "uint64_points", "string_points")


def per_point(body: bytes, monkeypatch: pytest.MonkeyPatch) -> list[tuple] | str:
    with monkeypatch.context() as m:
        m.setattr(ingest_nominal, "_wire_columns", lambda request: {})
        return outcome(body)


def outcome(body: bytes) -> list[tuple] | str:
    try:
        writes = nominal_writes(body, RID)
    except InvalidWrite as exc:
        return f"refused: {exc}"
    return [
        (w.key, w.kind, np.asarray(w.ts).tolist(), np.asarray(w.values, dtype=object).tolist())
        for w in writes
    ]


def assert_same(body: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = outcome(body)
    slow = per_point(body, monkeypatch)
    # float NaNs compare by identity in lists: compare their text
    assert repr(fast) == repr(slow)


def series(kind: str, stamps: list[tuple[int, int] | None], values: list, channel: str = "c") -> pb.Series:
    s = pb.Series(channel=pb.Channel(name=channel))
    held = getattr(s.points, kind).points
    for stamp, value in zip(stamps, values, strict=True):
        p = held.add()
        if stamp is not None:
            p.timestamp.seconds, p.timestamp.nanos = stamp
            p.timestamp.SetInParent()
        if value is not None:
            p.value = value
    return s


SECONDS = [0, 1, 127, 128, 1_700_000_000, 2**31, 2**40, 9_223_372_035, 9_223_372_036, -1, -5, -(2**63)]
NANOS = [0, 1, 127, 128, 16_384, 999_999_999, 1_000_000_000, 2**31 - 1, -1, -(2**31)]
VALUES = {
    "double_points": [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), float("nan"), 1e-310, 2.0**60],
    "integer_points": [0, 1, -1, 2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, -(2**63), 127, 128],
    "uint64_points": [0, 1, 2**53, 2**53 + 1, 2**63, 2**64 - 2**11, 2**64 - 1, 300],
    "string_points": ["", "a", "é" * 70],
}


def test_every_field_value_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    for _ in range(300):
        request = pb.WriteRequestNominal()
        for c in range(rng.randint(1, 4)):
            kind = rng.choice(KINDS)
            n = rng.randint(0, 12)
            # mostly valid timestamps, sometimes out of range or missing; values from the edge cases
            stamps = [
                None
                if rng.random() < 0.05
                else (
                    rng.choice(SECONDS) if rng.random() < 0.1 else rng.randint(0, 2**34),
                    rng.choice(NANOS) if rng.random() < 0.1 else rng.randint(0, 999_999_999),
                )
                for _ in range(n)
            ]
            values = [None if rng.random() < 0.05 else rng.choice(VALUES[kind]) for _ in range(n)]
            request.series.append(series(kind, stamps, values, f"ch{c}"))
        assert_same(request.SerializeToString(), monkeypatch)


def test_values_whose_bytes_look_like_records_read_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0x0a in a value's or a timestamp's bytes: the record starts are found by walking the lengths
    tricky = float(np.frombuffer(bytes([0x0A, 0x05, 0x0A, 0x03, 0x08, 0x01, 0x10, 0x40]), "<f8")[0])
    stamps = [(0x0A0A, 0x0A), (1_700_000_000, 0x0A0A0A)]
    request = pb.WriteRequestNominal(series=[series("double_points", stamps, [tricky, 0x0A0A / 7])])
    assert_same(request.SerializeToString(), monkeypatch)
    request.series.append(series("integer_points", stamps, [0x0A, 0x0A0A0A0A]))
    request.series.append(series("double_points", [None, (5, 0)], [1.0, None]))  # no timestamp, no value
    assert_same(request.SerializeToString(), monkeypatch)
    assert sorted(ingest_nominal._wire_columns(request)) == [0, 1, 2]


def test_unknown_fields_in_a_point_are_ignored_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    point = pb.DoublePoint(value=2.5)
    point.timestamp.seconds = 1_700_000_000
    extra = point.SerializeToString() + bytes([0x18, 0x07])  # field 3, a varint upb keeps as unknown
    points = bytes([0x0A, len(extra)]) + extra
    body = pb.WriteRequestNominal(
        series=[pb.Series(channel=pb.Channel(name="c"), points=pb.Points(double_points=pb.DoublePoints()))]
    ).SerializeToString()
    request = pb.WriteRequestNominal.FromString(body)
    request.series[0].points.double_points.MergeFromString(points)
    assert_same(request.SerializeToString(), monkeypatch)
    assert outcome(request.SerializeToString())[0][3] == [2.5]
    assert ingest_nominal._wire_columns(request) == {}  # read per point


def test_a_wide_request_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    request = pb.WriteRequestNominal()
    for c, kind in enumerate(("double_points", "integer_points", "double_points", "uint64_points")):
        stamps = [divmod(1_700_000_000 * 10**9 + i * 20_000, 10**9) for i in range(3000)]
        values = [float(i % 97) - 3 if kind == "double_points" else i % 1000 for i in range(3000)]
        request.series.append(series(kind, stamps, values, f"ch{c}"))
    assert_same(request.SerializeToString(), monkeypatch)
    assert sorted(ingest_nominal._wire_columns(request)) == [0, 1, 2, 3]
