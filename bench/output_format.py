"""A SummarizeSeries FullResult as LEGACY Conjure JSON against Nominal's ArrowPlot (ARROW_V3): the
frame's size (as sent, and deflated as permessage-deflate sends it to a client that negotiated it)
and the cost to encode it on the server and to decode it on a client, per frame.

Frames are built by `app.protocol.frames.full_update` from the same outputs: `buckets` numeric
buckets of 10 points each (a random walk, one point a millisecond), or as many raw points. Arrow
arms: every NumericOutputField (`v1 all`: 10 columns with first/last timestamps) and none (`mean`:
nominal-api's default, two columns). Decoding is what a client does before it can draw: LEGACY,
`orjson.loads` and every bucket's figures into float arrays; Arrow, `orjson.loads`, base64 and
pyarrow's IPC reader into numpy columns.

In one process the arms alternate for `rounds` rounds, each sample repeating the call until it has
run `sample_s`; reported: the median over rounds of microseconds per frame, and the frame's bytes,
with the load average before and after (the machine may be shared: compare ratios between runs).
`make bench` runs it as a stage of its own (`output_format`, the full plan's sizes, 5 rounds) and
its report puts the 1,000-bucket FullResult's ratios against LEGACY in the targets table
(docs/decisions/0061).

Run: python -m bench.output_format [rounds=9] [sizes=100,1000,10000] [sample_s=0.2]
"""

from __future__ import annotations

import base64
import os
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from app.protocol import frames
from compute.evaluation.output_format import V1_FIELDS, ArrowFormat
from compute.evaluation.results import NumericPoints, Output
from compute.evaluation.summarize import numeric_buckets

EPOCH_NS = 1_764_000_000 * 10**9
MS = 1_000_000
ARMS: dict[str, ArrowFormat | None] = {
    "LEGACY": None,
    "ARROW v1 all": ArrowFormat("ARROW_V3", V1_FIELDS),
    "ARROW mean": ArrowFormat("ARROW_V3"),
}


def outputs(kind: str, size: int) -> dict[tuple[tuple[str, str], ...], Output]:
    rng = np.random.default_rng(61)
    if kind == "raw":
        ts = EPOCH_NS + np.arange(size, dtype=np.int64) * MS
        return {(): NumericPoints(ts, np.cumsum(rng.normal(0, 1, size)) + 20.0)}
    points = size * 10
    ts = EPOCH_NS + np.arange(points, dtype=np.int64) * MS
    return {(): numeric_buckets(ts, np.cumsum(rng.normal(0, 1, points)) + 20.0, 10 * MS)}


def decode_legacy(frame: bytes) -> list[np.ndarray]:
    result = orjson.loads(frame)["full"]["result"]
    body = result[result["type"]]
    if result["type"] == "numeric":
        return [
            np.array([t["seconds"] * 10**9 + t["nanos"] for t in body["timestamps"]]),
            np.array(body["values"]),
        ]
    buckets = body["buckets"]
    cols = [np.array([t["seconds"] * 10**9 + t["nanos"] for t in body["timestamps"]])]
    cols += [
        np.array([b[k] for b in buckets], np.float64) for k in ("min", "max", "mean", "variance", "count")
    ]
    for point in ("firstPoint", "lastPoint"):  # absent from a one-point bucket: its mean then
        held = [b.get(point) for b in buckets]
        cols.append(np.array([p["value"] if p else b["mean"] for p, b in zip(held, buckets, strict=True)]))
        cols.append(
            np.array([p["timestamp"]["seconds"] * 10**9 + p["timestamp"]["nanos"] if p else 0 for p in held])
        )
    return cols


def decode_arrow(frame: bytes) -> list[np.ndarray]:
    result = orjson.loads(frame)["full"]["result"]
    plot = result[result["type"]]
    with pa.ipc.open_stream(base64.b64decode(plot["arrowBinary"])) as reader:
        table = reader.read_all()
    return [c.to_numpy() for c in table.columns]


def per_call_us(fn: Callable[[], object], sample_s: float) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < sample_s:
        fn()
        n += 1
    return (time.perf_counter() - start) / n * 1e6


def _arm(
    outs: dict[tuple[tuple[str, str], ...], Output], fmt: ArrowFormat | None, frame: bytes
) -> tuple[Callable[[], object], Callable[[], object]]:
    """The arm's encode (the server's) and decode (a client's) of one frame, as calls."""
    decode = decode_legacy if fmt is None else decode_arrow
    return (lambda: frames.full_update(outs, False, fmt)), (lambda: decode(frame))


def measure(
    sizes: tuple[int, ...] = (100, 1000, 10000), rounds: int = 9, sample_s: float = 0.2
) -> dict[str, Any]:
    """Every arm for each result kind and size: frame bytes (sent, deflated) and the median encode /
    decode microseconds per frame, the arms alternating within a round."""
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    for kind in ("bucketed", "raw"):
        for size in sizes:
            outs = outputs(kind, size)
            arms = {k: v for k, v in ARMS.items() if kind == "bucketed" or k != "ARROW v1 all"}
            frame = {k: frames.full_update(outs, False, fmt) for k, fmt in arms.items()}
            # the same buckets, whatever the encoding
            legacy, arrow = decode_legacy(frame["LEGACY"]), decode_arrow(frame["ARROW mean"])
            assert np.array_equal(legacy[0], arrow[0])
            assert np.array_equal(legacy[3 if kind == "bucketed" else 1], arrow[1])
            samples: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in arms}
            for r in range(rounds):
                order = list(arms) if r % 2 == 0 else list(reversed(arms))
                for name in order:
                    encode, decode = _arm(outs, arms[name], frame[name])
                    samples[name][0].append(per_call_us(encode, sample_s))
                    samples[name][1].append(per_call_us(decode, sample_s))
            for name in arms:
                deflater = zlib.compressobj(wbits=-15)
                deflated = len(deflater.compress(frame[name]) + deflater.flush(zlib.Z_SYNC_FLUSH))
                enc, dec = (statistics.median(s) for s in samples[name])
                rows.append(
                    {
                        "kind": kind,
                        "rows": size,
                        "arm": name,
                        "bytes": len(frame[name]),
                        "deflated_bytes": deflated,
                        "encode_us": round(enc, 1),
                        "decode_us": round(dec, 1),
                    }
                )
    return {
        "rounds": rounds,
        "sizes": list(sizes),
        "rows": rows,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def find(results: dict[str, Any], kind: str, size: int, arm: str) -> dict[str, Any] | None:
    return next((r for r in results["rows"] if (r["kind"], r["rows"], r["arm"]) == (kind, size, arm)), None)


def render(results: dict[str, Any]) -> str:
    lines = [
        "### Output formats: a FullResult as LEGACY JSON against Nominal's ArrowPlot "
        "(bench/output_format.py)",
        "",
        "| result | rows | arm | frame bytes | deflated bytes | encode us | decode us |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        lines.append(
            f"| {r['kind']} | {r['rows']:,} | {r['arm']} | {r['bytes']:,} | {r['deflated_bytes']:,} | "
            f"{r['encode_us']:,.0f} | {r['decode_us']:,.0f} |"
        )
    before, after = results["load_average"]
    lines += ["", f"Load average {before:.2f} before, {after:.2f} after; {results['rounds']} rounds."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    results = measure(
        tuple(int(x) for x in args.get("sizes", "100,1000,10000").split(",")),
        int(args.get("rounds", 9)),
        float(args.get("sample_s", 0.2)),
    )
    sys.stdout.write(render(results))


if __name__ == "__main__":
    main(sys.argv[1:])
