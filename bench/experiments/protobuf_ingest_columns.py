"""The protobuf ingest decode: points read as columns through ptars against one upb object per point.

`app.ingest.nominal.nominal_writes(body, rid)` (the endpoint's whole decode, from the decompressed
body to the log's writes: upb's parse, then the points) is timed with its column read
(`_arrow_columns`: ptars decodes the body to Arrow, cut into numpy columns per series) and with the
per-point read it falls back to (the arm "per point": `_arrow_columns` patched to return {}, so
every series is read through upb's Python objects). Bodies as nominal-streaming sends them:
`channels` channels (one tag each) of double, integer or string points, `sizes` points per request
over all channels, timestamps 1 ms apart from a recent epoch second. Both arms must give the same
writes (checked once per body).

In one process the arms alternate for `rounds` rounds (A B, then B A, ...), each sample repeating
the call until it has run `sample_s`; reported: microseconds per point, the median over rounds per
arm, and the per-point/columns ratio of the medians, with the load average before and after (the
machine may be shared: compare the ratio, not the absolute figures, between runs).

Run: python -m bench.experiments.protobuf_ingest_columns [rounds=15] [sizes=1000,10000] [channels=10]
    [sample_s=0.2]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from unittest import mock

import numpy as np
from google.protobuf.timestamp_pb2 import Timestamp
from nominal.protos.write import nominal_write_pb2 as pb

from app.ingest import nominal as ingest_nominal

RID = "ri.nominal.bench.datasource.protobuf-decode"
EPOCH_S = 1_764_000_000  # late 2025, as a live stream's timestamps are
KINDS = ("double_points", "integer_points", "string_points")


def body(kind: str, points: int, channels: int) -> bytes:
    """A WriteRequestNominal of `points` points spread over `channels` channels of one kind."""
    request = pb.WriteRequestNominal()
    per = points // channels
    for c in range(channels):
        s = request.series.add(channel=pb.Channel(name=f"vehicle.sensor_{c:02d}"), tags={"vehicle": "v1"})
        held = getattr(s.points, kind).points
        for k in range(per):
            ns = k * 1_000_000 + c * 1_000  # 1 kHz, the channels a microsecond apart
            t = Timestamp(seconds=EPOCH_S + ns // 10**9, nanos=ns % 10**9)
            value: float | int | str = 1_000 * c + k
            if kind == "double_points":
                value = 20.0 + 5.0 * np.sin(k / 50.0)
            elif kind == "string_points":
                value = f"state_{k // 100 % 5}"  # an enum channel: a few states, each for a while
            held.add(timestamp=t, value=value)
    return request.SerializeToString()


def per_point() -> AbstractContextManager[object]:
    """The fallback arm: no series read as columns, every point through upb's objects."""
    return mock.patch.object(ingest_nominal, "_arrow_columns", lambda body, request: {})


def writes(data: bytes) -> list[tuple[object, list[int], list[float] | list[str]]]:
    out = ingest_nominal.nominal_writes(data, RID)
    return [(w.key, np.asarray(w.ts).tolist(), np.asarray(w.values).tolist()) for w in out]


def sample(data: bytes, points: int, sample_s: float) -> float:
    """Microseconds per point of nominal_writes, repeated until sample_s has passed."""
    calls = 0
    start = time.perf_counter()
    while True:
        ingest_nominal.nominal_writes(data, RID)
        calls += 1
        took = time.perf_counter() - start
        if took >= sample_s:
            return took / calls / points * 1e6


def compare(data: bytes, points: int, rounds: int, sample_s: float) -> tuple[float, float]:
    """Median us/point of the per-point arm and of the columns arm, alternating in rounds."""
    with per_point():
        slow = writes(data)
    assert writes(data) == slow, "the two arms give different writes"
    request = pb.WriteRequestNominal.FromString(data)
    read = ingest_nominal._arrow_columns(data, request)
    assert len(read) == len(request.series), "the columns arm reads some series per point"
    times: dict[bool, list[float]] = {True: [], False: []}  # by "per point"
    for r in range(rounds):
        for fallback in (False, True) if r % 2 == 0 else (True, False):
            with per_point() if fallback else nullcontext():
                times[fallback].append(sample(data, points, sample_s))
    return statistics.median(times[True]), statistics.median(times[False])


def main(argv: list[str]) -> None:
    opts = {"rounds": "15", "sizes": "1000,10000", "channels": "10", "sample_s": "0.2"}
    for arg in argv:
        name, _, value = arg.partition("=")
        if name not in opts:
            raise SystemExit(f"unknown option {name!r}; known: {', '.join(opts)}")
        opts[name] = value
    rounds, channels, sample_s = int(opts["rounds"]), int(opts["channels"]), float(opts["sample_s"])
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    rows = []
    for kind in KINDS:
        for size in (int(s) for s in opts["sizes"].split(",")):
            data = body(kind, size, channels)
            slow, fast = compare(data, size, rounds, sample_s)
            shape = f"{channels} x {size // channels:,}"
            rows.append(
                f"| {kind} | {shape} | {len(data):,} B | {slow:.3f} | {fast:.3f} | {slow / fast:.1f}x |"
            )
    after = "/".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"`nominal_writes`, median of {rounds} alternating rounds of {sample_s} s samples;")
    print(f"load average (1/5/15 min) {load} before, {after} after; {os.cpu_count()} cores\n")
    print("| kind | channels x points | body | per point (us/point) | columns (us/point) | ratio |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
