"""The protobuf columnar writer's two reads of timestamps (app/ingest/columnar.py): ptars' Arrow
columns and upb's objects point by point give the same writes, and the same refusals, for the same
body: unset seconds or nanos, empty batches, every value kind, stamps out of range."""

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

MEMBERS = {
    "double_points": (common_pb.DoublePoints, lambda r: r.uniform(-1e9, 1e9)),
    "string_points": (common_pb.StringPoints, lambda r: r.choice(["a", "b", ""])),
    "int_points": (common_pb.IntPoints, lambda r: r.randint(-(2**53), 2**53)),
    "uint64_points": (common_pb.Uint64Points, lambda r: r.randint(0, 2**53)),
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
        member = r.choice(list(MEMBERS))
        kind, value = MEMBERS[member]
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
