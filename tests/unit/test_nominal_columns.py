"""The protobuf endpoint's column read (app/ingest/nominal.py `_arrow_columns`: ptars decodes the body
to Arrow) against reading each point through upb's objects: the same writes, or the same refusal,
for whatever a request holds."""

from __future__ import annotations

import random

import numpy as np
import pytest
from nominal.protos.write import nominal_write_pb2 as pb

from app.ingest import nominal as ingest_nominal
from app.ingest.nominal import nominal_writes
from app.ingest.writes import InvalidWrite
from compute.storage.series import SeriesKey, SeriesKind

RID = "ri.sparkwire.test.dataset.columns"
KINDS = ("double_points", "integer_points", "uint64_points", "string_points")


def per_point(body: bytes, monkeypatch: pytest.MonkeyPatch) -> list[tuple] | str:
    with monkeypatch.context() as m:
        m.setattr(ingest_nominal, "_arrow_columns", lambda body, request: {})
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


def columns(request: pb.WriteRequestNominal | bytes) -> dict[int, ingest_nominal.Columns]:
    """The series the fast path reads as columns (the others are read per point)."""
    body = request if isinstance(request, bytes) else request.SerializeToString()
    return ingest_nominal._arrow_columns(body, pb.WriteRequestNominal.FromString(body))


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
        # the fast path read every series that holds points (one without holds no kind: refused)
        held = [i for i, s in enumerate(request.series) if s.points.WhichOneof("points_type")]
        assert sorted(columns(request)) == held


def test_values_whose_bytes_look_like_records_read_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0x0a in a value's or a timestamp's bytes (the earlier hand-written reader's hard case), a point
    # without a timestamp (ptars: a null struct) and one without a value
    tricky = float(np.frombuffer(bytes([0x0A, 0x05, 0x0A, 0x03, 0x08, 0x01, 0x10, 0x40]), "<f8")[0])
    stamps = [(0x0A0A, 0x0A), (1_700_000_000, 0x0A0A0A)]
    request = pb.WriteRequestNominal(series=[series("double_points", stamps, [tricky, 0x0A0A / 7])])
    assert_same(request.SerializeToString(), monkeypatch)
    request.series.append(series("integer_points", stamps, [0x0A, 0x0A0A0A0A]))
    request.series.append(series("double_points", [None, (5, 0)], [1.0, None]))  # no timestamp, no value
    assert_same(request.SerializeToString(), monkeypatch)
    assert sorted(columns(request)) == [0, 1, 2]


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
    # ptars skips unknown fields as upb does: read as columns, no longer per point
    assert sorted(columns(request)) == [0]
    assert columns(request)[0][2].tolist() == [2.5]


def test_a_wide_request_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    request = pb.WriteRequestNominal()
    for c, kind in enumerate(("double_points", "integer_points", "double_points", "uint64_points")):
        stamps = [divmod(1_700_000_000 * 10**9 + i * 20_000, 10**9) for i in range(3000)]
        values = [float(i % 97) - 3 if kind == "double_points" else i % 1000 for i in range(3000)]
        request.series.append(series(kind, stamps, values, f"ch{c}"))
    assert_same(request.SerializeToString(), monkeypatch)
    assert sorted(columns(request)) == [0, 1, 2, 3]


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field's bytes (short payloads only: a one-byte length)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def raw_point(stamp: bytes | None, value: bytes) -> bytes:
    """A point's record in an XPoints message, from its timestamp's and its value's bytes."""
    return field(1, (b"" if stamp is None else field(1, stamp)) + value)


def double(value: float) -> bytes:
    return bytes([0x11]) + np.float64(value).tobytes()  # DoublePoint.value (field 2, 64-bit)


def test_a_oneof_switched_on_the_wire_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # double points, then integer points, then double points again in one Points message: upb keeps
    # only the points after the last switch, ptars every point of each member; where the counts of
    # the member upb holds differ, that series is read per point
    stamp = bytes([0x08, 0x05, 0x10, 0x06])  # seconds 5, nanos 6
    first = field(1, raw_point(stamp, double(1.0)))  # Points.double_points
    between = field(3, raw_point(stamp, bytes([0x10, 0x07])))  # Points.integer_points
    last = field(1, raw_point(stamp, double(3.0)))
    empty = field(1, b"")  # double points without points: nothing left behind
    cases = {
        first + between + last: ("double_points", False),
        between + first + between: ("integer_points", False),
        first + between: ("integer_points", True),  # ptars' double points are not read
        between + first: ("double_points", True),
        empty + between + last: ("double_points", True),
        first + last: ("double_points", True),  # one member in two parts: merged by both
    }
    for members, (kind, as_columns) in cases.items():
        body = field(1, field(1, field(1, b"c")) + field(3, members))  # series { channel, points }
        assert pb.WriteRequestNominal.FromString(body).series[0].points.WhichOneof("points_type") == kind
        # and a series read as columns anyway (bodies concatenated: their series one after the other)
        body += pb.WriteRequestNominal(series=[series("double_points", [(1, 2)], [4.5])]).SerializeToString()
        assert_same(body, monkeypatch)
        assert len(outcome(body)) == 2
        assert sorted(columns(body)) == ([0, 1] if as_columns else [1])


def test_fields_repeated_on_the_wire_merge_as_upb_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    # a timestamp in two parts (seconds, then nanos), a value twice (the last one counts), a value
    # with the wrong wire type (unknown to both), a nanos varint of 5 bytes (int32: its low 32 bits)
    records = (
        field(1, field(1, bytes([0x08, 0x05])) + field(1, bytes([0x10, 0x06])) + double(2.0))
        + raw_point(bytes([0x08, 0x01]), double(1.0) + double(4.0))
        + raw_point(bytes([0x08, 0x01]), bytes([0x10, 0x05]))
        + raw_point(bytes([0x10, 0x85, 0x80, 0x80, 0x80, 0x10]), double(1.0))
    )
    # the bytes as they are (upb would write them canonically): series { channel, points }
    body = field(1, field(1, field(1, b"c")) + field(3, field(1, records)))
    assert_same(body, monkeypatch)
    assert sorted(columns(body)) == [0]
    assert outcome(body)[0][2:] == (
        [5_000_000_006, 1_000_000_000, 1_000_000_000, 5],
        [2.0, 4.0, 0.0, 1.0],
    )


def test_a_body_ptars_refuses_is_read_per_point(monkeypatch: pytest.MonkeyPatch) -> None:
    request = pb.WriteRequestNominal(
        series=[series(k, [(1, 2), None], [VALUES[k][1], VALUES[k][2]], k) for k in KINDS]
    )

    class Refusing:
        def list_to_record_batch(self, payloads: list[bytes]) -> object:
            raise ValueError("failed to decode Protobuf message")

    slow = per_point(request.SerializeToString(), monkeypatch)
    monkeypatch.setattr(ingest_nominal, "_ptars_handler", lambda: Refusing())
    assert columns(request) == {}
    assert outcome(request.SerializeToString()) == slow


def test_what_ptars_skips_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # ptars is given only the points of the four kinds read; channels, tags, session_name and array
    # or struct points are unknown fields to it (upb reads them, per point), skipped between the
    # points it reads
    request = pb.WriteRequestNominal(session_name="s" * 300)
    for c, kind in enumerate(KINDS):
        s = series(kind, [(1_700_000_000, c), None], VALUES[kind][:2], f"ch{c}é")
        s.tags.update({"vehicle": "v1", "é" * 40: "x" * 200, f"k{c}": ""})
        request.series.append(s)
    assert_same(request.SerializeToString(), monkeypatch)
    assert sorted(columns(request)) == [0, 1, 2, 3]
    assert outcome(request.SerializeToString())[3][3] == VALUES["string_points"][:2]
    stored = {
        "double_array_points": (SeriesKind.DOUBLE_ARRAY, "[1.0,2.0]"),
        "string_array_points": (SeriesKind.STRING_ARRAY, '["x","é"]'),
        "struct_points": (SeriesKind.STRUCT, '{"a":1}'),
    }
    for member, (kind, text) in stored.items():
        odd = pb.WriteRequestNominal.FromString(request.SerializeToString())
        extra = odd.series.add(channel=pb.Channel(name="odd"), tags={"a": "b"})
        if member == "double_array_points":
            p = extra.points.array_points.double_array_points.points.add(value=[1.0, 2.0])
        elif member == "string_array_points":
            p = extra.points.array_points.string_array_points.points.add(value=["x", "é"])
        else:
            p = extra.points.struct_points.points.add(json_string='{"a": 1}')
        p.timestamp.seconds = 5
        odd.series.append(series("double_points", [(2, 3)], [1.5], "after"))
        assert_same(odd.SerializeToString(), monkeypatch)
        read = outcome(odd.SerializeToString())
        assert read[4] == (SeriesKey.of(RID, "odd", {"a": "b"}), kind, [5 * 10**9], [text])
        assert read[5][0].channel == "after" and read[5][3] == [1.5]
        assert sorted(columns(odd)) == [0, 1, 2, 3, 5]  # the array or struct series read per point
