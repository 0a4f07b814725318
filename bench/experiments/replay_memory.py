"""Does the server give back the memory that replays take? (issue 36, item 7)

An attacker once ran 60 replays of 24 h in parallel and the server's RSS grew by 860 MiB that it
kept after they closed. Replays are now capped (4 a connection, 16 a server: decision 0043), which
bounds the peak; this measures what happens after, round after round, at the cap:
- a server with its defaults; `hours` hours of one channel at `hz` Hz written through it;
- `rounds` rounds of `connections` connections x `per_connection` replays of the whole history
  (each a `window_s` window bucketed to 1,000 buckets, as fast as the replay runs), each connection
  reading until every replay has sent `replayEnded`, then closing;
- the server process's own RSS (Python; the JVM is not involved in a replay) sampled every 0.5 s:
  before the first round, the peak of each round, and `settle_s` after each round's close.
If the RSS after each round climbs round after round, memory leaks; if it stays flat after the
first, the memory is held by the allocator for reuse, not lost.

Run: python -m bench.experiments.replay_memory [hours=24] [hz=10] [rounds=3] [NAME=VALUE ...]
Writes `out` (markdown, default data/bench-replay-memory.md) and the numbers beside it (.json).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import orjson
import websockets

from bench import feed
from bench.clients import _iso_now
from bench.computations import bucketed
from bench.procstat import rss_bytes
from bench.serverproc import launch, stop_process

DEFAULTS: dict[str, float] = {
    "hours": 24,
    "hz": 10,
    "rounds": 3,
    "connections": 4,
    "per_connection": 4,
    "window_s": 3600,
    "settle_s": 20,
}


def write_history(base_url: str, rid: str, hours: float, hz: float) -> int:
    tick = int(1e9 / hz)
    last_k = time.time_ns() // tick
    first_k = last_k - int(hours * 3600 * hz)
    chunk = 100_000
    for k in range(first_k, last_k + 1, chunk):
        body = feed.body(rid, 1, k, min(k + chunk - 1, last_k), tick)
        request = urllib.request.Request(
            base_url + "/storage/writer/v1", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as r:
            assert r.status == 200, r.status
    return last_k - first_k + 1


async def one_connection(ws_url: str, rid: str, n: int, hours: float, window_s: int, tag: str) -> int:
    now = int(time.time())
    span = {"start": {"seconds": now - int(hours * 3600), "nanos": 0}, "end": {"seconds": now, "nanos": 0}}
    subs = {}
    for i in range(n):
        body = bucketed(rid, 0, 1000, window_s).body
        body["sparkwire"] = {"replay": {**span, "then": "stop"}}
        subs[f"{tag}-{i}"] = body
    frames = 0
    async with websockets.connect(ws_url, max_size=None) as ws:
        await ws.send(json.dumps({"type": "subscribe", "subscribe": subs}))
        ended: set[str] = set()
        while len(ended) < n:
            frame = orjson.loads(await asyncio.wait_for(ws.recv(), 600))
            frames += 1
            if frame["type"] == "subscriptionCreation":
                assert frame["subscriptionCreation"]["creation"]["type"] == "success", frame
            elif frame["type"] == "replayEnded":
                ended.add(frame["replayEnded"]["subscriptionId"])
            elif frame["type"] == "health" and frame["health"]["type"] == "ping":
                pong = {"pingOriginallySentAt": frame["health"]["ping"]["sentAt"], "sentAt": _iso_now()}
                await ws.send(orjson.dumps({"type": "pong", "pong": pong}).decode())
    return frames


class Sampler:
    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, rss_bytes(self.pid))

    def __enter__(self) -> Sampler:
        self.peak = rss_bytes(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    args = dict(DEFAULTS)
    out = Path("data/bench-replay-memory.md")
    for arg in sys.argv[1:]:
        name, _, value = arg.partition("=")
        if name == "out":
            out = Path(value)
        elif name in args:
            args[name] = float(value)
        else:
            raise SystemExit(f"unknown argument {name!r}; known: out, {', '.join(args)}")
    mib = 1 << 20
    with tempfile.TemporaryDirectory(prefix="sparkwire-replay-mem-") as tmp:
        server = launch(Path(tmp) / "data", Path(tmp) / "server.log", {}, ready_timeout=180)
        try:
            rid = f"ri.bench.replay-memory.{time.time_ns()}"
            written = write_history(server.base_url, rid, args["hours"], args["hz"])
            time.sleep(args["settle_s"])
            before = rss_bytes(server.pid)
            rows = []
            for round_ in range(int(args["rounds"])):
                began = time.monotonic()
                with Sampler(server.pid) as sampler:

                    async def play(r: int = round_) -> list[int]:
                        return await asyncio.gather(
                            *(
                                one_connection(
                                    server.ws_url,
                                    rid,
                                    int(args["per_connection"]),
                                    args["hours"],
                                    int(args["window_s"]),
                                    f"r{r}c{c}",
                                )
                                for c in range(int(args["connections"]))
                            )
                        )

                    frames = sum(asyncio.run(play()))
                played_s = time.monotonic() - began
                time.sleep(args["settle_s"])
                after = rss_bytes(server.pid)
                rows.append(
                    {
                        "round": round_ + 1,
                        "played_s": round(played_s, 1),
                        "frames": frames,
                        "peak_mib": round(sampler.peak / mib, 1),
                        "after_mib": round(after / mib, 1),
                    }
                )
                print(rows[-1], flush=True)
        finally:
            stop_process(server.process)
    result = {"args": args, "points_written": written, "before_mib": round(before / mib, 1), "rounds": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2))
    lines = [
        "# Replay memory",
        "",
        f"{written:,} points ({args['hours']:g} h at {args['hz']:g} Hz) written through the server; each "
        f"round {int(args['connections'])} connections x {int(args['per_connection'])} replays of all of it "
        f"(window {int(args['window_s'])} s, 1,000 buckets, as fast as they run), then closed. RSS of the "
        f"server's Python process: {result['before_mib']} MiB before the first round.",
        "",
        f"| round | played, s | frames | peak RSS, MiB | RSS {int(args['settle_s'])} s after close, MiB |",
        "|---|---|---|---|---|",
        *(
            f"| {r['round']} | {r['played_s']} | {r['frames']} | {r['peak_mib']} | {r['after_mib']} |"
            for r in rows
        ),
    ]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
