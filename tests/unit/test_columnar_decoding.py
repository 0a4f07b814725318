"""The protobuf columnar writer's two reads of timestamps (app/ingest/columnar.py): ptars' Arrow
columns and upb's objects point by point give the same writes, and the same refusals, for the same
body: unset seconds or nanos, empty batches, every value kind (arrays and structs among them: ptars
decodes them too, though only the timestamps are read from it), stamps out of range."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from nominal.protos.direct_channel_writer.v2 import direct_nominal_channel_writer_pb2 as columnar_pb
from nominal.protos.direct_channel_writer_common.v2 import direct_channel_writer_common_pb2 as common_pb
from nominal.protos.types.time.time_pb2 import Timestamp

from app.ingest import columnar
from app.ingest.writes import InvalidWrite


def double_arrays(points: list[list[float]]) -> Any:
    arrays = [common_pb.DoubleArrayPoint(value=v) for v in points]
    return common_pb.ArrayPoints(double_array_points=common_pb.DoubleArrayPoints(points=arrays))


def string_arrays(points: list[list[str]]) -> Any:
    arrays = [common_pb.StringArrayPoint(value=v) for v in points]
    return common_pb.ArrayPoints(string_array_points=common_pb.StringArrayPoints(points=arrays))


# a kind of points: (Points' member, its message from the values, a random value)
MEMBERS: dict[str, tuple[str, Any, Any]] = {
    "doubles": ("double_points", common_pb.DoublePoints, lambda r: r.uniform(-1e9, 1e9)),
    "strings": ("string_points", common_pb.StringPoints, lambda r: r.choice(["a", "b", ""])),
    "ints": ("int_points", common_pb.IntPoints, lambda r: r.randint(-(2**53), 2**53)),
    "uint64s": ("uint64_points", common_pb.Uint64Points, lambda r: r.randint(0, 2**53)),
    "double arrays": (
        "array_points",
        double_arrays,
        lambda r: [r.uniform(-9, 9) for _ in range(r.randint(0, 4))],
    ),
    "string arrays": (
        "array_points",
        string_arrays,
        lambda r: [r.choice(["x", "é", ""]) for _ in range(r.randint(0, 4))],
    ),
    "structs": (
        "struct_points",
        common_pb.StructPoints,
        lambda r: r.choice(['{"a": 1}', "{}", '{"b": [1, {"c": null}]}']),
    ),
}


def stamp(r: random.Random) -> Timestamp:
    t = Timestamp()
    if r.random() < 0.9:  # proto3 optional: sometimes unset (read as 0)
        t.seconds = r.randint(0, 2_000_000_000)
    if r.random() < 0.9:
        t.nanos = r.randint(0, 999_999_999)
    return t


def body(r: random.Random) -> bytes:
    batches = []
    for i in range(r.randint(0, 6)):
        member, kind, value = MEMBERS[r.choice(list(MEMBERS))]
        n = r.choice([0, 1, r.randint(2, 50)])
        points: Any = common_pb.Points(
            timestamps=[stamp(r) for _ in range(n)], **{member: kind(points=[value(r) for _ in range(n)])}
        )
        batches.append(common_pb.RecordsBatch(channel=f"c{i}", tags={"k": str(i)}, points=points))
    return columnar_pb.WriteBatchesRequest(data_source_rid="r", batches=batches).SerializeToString()


def both(data: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    def outcome() -> Any:
        try:
            return [
                (w.key, w.kind, np.asarray(w.ts).tolist(), np.asarray(w.values).tolist())
                for w in columnar.columnar_protobuf_writes(data)
            ]
        except InvalidWrite as exc:
            return str(exc)

    fast = outcome()
    with monkeypatch.context() as m:
        m.setattr(columnar, "_ptars_timestamps", lambda body, batches: {})
        slow = outcome()
    return fast, slow


@pytest.mark.parametrize("seed", range(40))
def test_ptars_and_upb_read_the_same_timestamps(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = both(body(random.Random(seed)), monkeypatch)
    assert fast == slow


def test_ptars_columns_are_used_and_out_of_range_stamps_are_refused_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stamps = [Timestamp(seconds=5, nanos=1), Timestamp(seconds=6, nanos=-1)]
    points = common_pb.Points(timestamps=stamps, double_points=common_pb.DoublePoints(points=[1.0, 2.0]))
    data = columnar_pb.WriteBatchesRequest(
        data_source_rid="r", batches=[common_pb.RecordsBatch(channel="c", points=points)]
    ).SerializeToString()
    assert set(columnar._ptars_timestamps(data, 1)) == {0}  # the columns path is the one taken
    fast, slow = both(data, monkeypatch)
    assert fast == slow and "seconds 6, nanos -1 is outside" in fast


def test_arrays_and_structs_keep_the_ptars_timestamps_and_read_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    stamps = [Timestamp(seconds=5, nanos=1), Timestamp(seconds=6)]
    members = {
        "a": common_pb.Points(timestamps=stamps, array_points=double_arrays([[1.5, -0.0], []])),
        "s": common_pb.Points(timestamps=stamps, array_points=string_arrays([["é"], ["", "b"]])),
        "j": common_pb.Points(
            timestamps=stamps, struct_points=common_pb.StructPoints(points=["{}", '{"k": [1]}'])
        ),
    }
    data = columnar_pb.WriteBatchesRequest(
        data_source_rid="r", batches=[common_pb.RecordsBatch(channel=c, points=p) for c, p in members.items()]
    ).SerializeToString()
    assert set(columnar._ptars_timestamps(data, 3)) == {0, 1, 2}  # ptars read the body: no fallback
    fast, slow = both(data, monkeypatch)
    assert fast == slow
    assert [(w[0].channel, w[1].value, w[2], w[3]) for w in fast] == [
        ("a", "double-array", [5_000_000_001, 6_000_000_000], ["[1.5,-0.0]", "[]"]),
        ("s", "string-array", [5_000_000_001, 6_000_000_000], ['["é"]', '["","b"]']),
        ("j", "struct", [5_000_000_001, 6_000_000_000], ["{}", '{"k":[1]}']),
    ]
