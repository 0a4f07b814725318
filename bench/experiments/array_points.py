"""What array points cost against the same numbers as channels of doubles (docs/decisions/0104), on a
real server (embedded log, 127.0.0.1): POINTS timestamps of WIDTH doubles each, written once as
double-array points of one channel and once as WIDTH double channels, through
`POST /storage/writer/v1` in requests of BATCH timestamps; then one element polled through the
ComputeService (`select1dArrayIndex` against the raw series of the matching double channel), each
ROUNDS times, alternating; the two polled answers must be equal.

`python -m bench.experiments.array_points [--points 100000] [--rounds 5]` prints a Markdown table."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from tests import node_json as n
from tests.conftest import start_secured_server
from tests.server.test_compute_service import TOKEN, request_body
from tests.wire import NANOS, ts

WIDTH = 16
BATCH = 10_000
MS = 1_000_000


def _post(c: httpx.Client, path: str, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    r = c.post(path, json=body)
    assert r.status_code == 200, r.text[:500]
    return time.perf_counter() - started


def _writes(rid: str, values: np.ndarray, t0: int, as_arrays: bool) -> list[dict[str, Any]]:
    bodies = []
    for k in range(0, len(values), BATCH):
        rows = values[k : k + BATCH]
        stamps = [ts(t0 + (k + i) * MS) for i in range(len(rows))]
        if as_arrays:
            points = [{"timestamp": t, "value": row} for t, row in zip(stamps, rows.tolist(), strict=True)]
            batches = [
                {
                    "channel": "vector",
                    "points": {"type": "array", "array": {"type": "double", "double": points}},
                }
            ]
        else:
            batches = [
                {
                    "channel": f"element.{j}",
                    "points": {
                        "type": "double",
                        "double": [
                            {"timestamp": t, "value": v}
                            for t, v in zip(stamps, rows[:, j].tolist(), strict=True)
                        ],
                    },
                }
                for j in range(WIDTH)
            ]
        bodies.append({"dataSourceRid": rid, "batches": batches})
    return bodies


def main(points: int, rounds: int) -> None:
    rng = np.random.default_rng(7)
    values = rng.normal(size=(points, WIDTH)).round(6)
    t0 = (time.time_ns() // NANOS - 3600) * NANOS
    end = t0 + points * MS + NANOS
    write_s: dict[str, list[float]] = {"arrays": [], "channels": []}
    poll_s: dict[str, list[float]] = {"arrays": [], "channels": []}
    answers: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="array-points-") as tmp:
        server = start_secured_server(
            Path(tmp), [{"token": TOKEN.split()[1], "sub": "bench", "dataSourceRids": ["*"]}]
        )
        try:
            with httpx.Client(base_url=server.base_url, headers={"Authorization": TOKEN}, timeout=600) as c:
                for r in range(rounds):
                    for kind in ("arrays", "channels"):
                        rid = f"ri.sparkwire.bench.dataset.{kind}{r}"
                        bodies = _writes(rid, values, t0, kind == "arrays")
                        write_s[kind].append(sum(_post(c, "/storage/writer/v1", b) for b in bodies))
                        if kind == "arrays":
                            select = {"input": n.channel(rid, "vector"), "index": n.literal(3)}
                            node = n.numeric_series(n.union("select1dArrayIndex", select))
                        else:
                            node = n.numeric_series(n.channel(rid, "element.3"))
                        started = time.perf_counter()
                        answer = c.post("/compute/v2/compute", json=request_body(n.series(node), t0, end))
                        poll_s[kind].append(time.perf_counter() - started)
                        assert answer.status_code == 200, answer.text[:500]
                        answers[kind] = answer.json()
                    # the element read out of the arrays is the channel of that element, bucket for bucket
                    assert answers["arrays"] == answers["channels"], "the two answers differ"
        finally:
            server.stop()
    print(f"{points:,} timestamps x {WIDTH} doubles, {rounds} alternating rounds (medians)\n")
    print("| stored as | write, whole (s) | per timestamp (us) | poll element 3 to 1,000 buckets (s) |")
    print("| --- | --- | --- | --- |")
    for kind, label in (("arrays", "one double-array channel"), ("channels", f"{WIDTH} double channels")):
        w, p = statistics.median(write_s[kind]), statistics.median(poll_s[kind])
        print(f"| {label} | {w:.2f} | {w / points * 1e6:.1f} | {p:.3f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    main(args.points, args.rounds)
