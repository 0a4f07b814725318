"""Profile the server's hot paths under the feed and a fan-out load with py-spy (the `bench` extra):

    python -m bench.profile [--seconds 30] [--subscriptions 200] [--rate 1000] [--out DIR]

Writes py-spy's collapsed stacks for the server process (all threads: the event loop, the log writer,
the micro-batch callback) and prints the functions with the most samples, self and inclusive.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import computations as comps
from bench.children import Child, write_spec
from bench.serverproc import start_server

RID = "ri.bench.feed"


# The hot paths the issue names, by a frame that identifies each (first match wins).
AREAS = [
    ("ingest (HTTP handler, parsing)", "write_points"),
    ("log writer thread", "DurableLog._run"),
    ("micro-batch callback (Spark job, evaluation)", "ForeachBatchFunction.call"),
    ("result encoding", "app/protocol/frames.py"),
    ("fan-out (hub, connection send, websockets)", "app/fanout/hub.py"),
    ("fan-out (hub, connection send, websockets)", "app/transport/connection.py"),
    ("HTTP request plumbing (uvicorn, starlette)", "httptools_impl.py"),
    ("WebSocket protocol (uvicorn, websockets)", "websockets"),
]


def areas(collapsed: Path) -> str:
    sums: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        total += int(count)
        area = next((name for name, frame in AREAS if frame in stack), "other (event loop idle, py4j, ...)")
        sums[area] += int(count)
    return "\n".join(f"{c / max(1, total):6.1%}  {a}" for a, c in sums.most_common())


def top(collapsed: Path, n: int = 40) -> str:
    self_c: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        c = int(count)
        total += c
        frames = stack.split(";")
        self_c[frames[-1]] += c
        for f in set(frames):
            incl[f] += c
    out = [f"{total} samples", "", "self:"]
    out += [f"{c / total:6.1%}  {f}" for f, c in self_c.most_common(n)]
    out += ["", "inclusive:"]
    out += [f"{c / total:6.1%}  {f}" for f, c in incl.most_common(n)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=15)
    parser.add_argument("--subscriptions", type=int, default=200)
    parser.add_argument("--computations", type=int, default=20)
    parser.add_argument("--connections", type=int, default=40)
    parser.add_argument("--rate", type=int, default=1000, help="points/s per channel (10 channels)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    work = args.out or Path(tempfile.mkdtemp(prefix="sparkwire-profile-"))
    work.mkdir(parents=True, exist_ok=True)
    server = start_server(work / "data", work / "server.log", {})
    children: list[Child] = []
    try:
        feed_spec = {
            "port": server.port, "rid": RID, "channels": 10, "rate_hz": args.rate, "request_ms": 10,
            "duration_s": 3600, "out": str(work / "feed.npy"),
        }  # fmt: skip
        children.append(Child("bench.feed", [json.dumps(feed_spec)], work / "feed.log"))
        time.sleep(2)
        mix = comps.mix(RID, args.computations, ["raw", "bucketed"], 10)
        conns: list[list[dict[str, object]]] = [[] for _ in range(args.connections)]
        for i in range(args.subscriptions):
            conns[i % args.connections].append({"sub": mix[i % len(mix)].body, "measure": "none"})
        spec = {"url": server.ws_url, "deflate": True, "out": str(work / "frames.npy"), "connections": conns}
        client = Child(
            "bench.clients", ["stream", write_spec(work / "clients.json", spec)], work / "clients.log"
        )
        children.append(client)
        client.read(timeout=300)
        time.sleep(args.warmup)
        collapsed = work / "server.collapsed"
        subprocess.run(
            [py_spy, "record", "--pid", str(server.pid), "--duration", str(int(args.seconds)),
             "--rate", "200", "--format", "raw", "--output", str(collapsed), "--nonblocking"],
            check=True, capture_output=True,
        )  # fmt: skip
        report = "by hot path:\n" + areas(collapsed) + "\n\n" + top(collapsed)
        (work / "top.txt").write_text(report)
        print(report)
        print(f"\nraw stacks: {collapsed}", file=sys.stderr)
    finally:
        for c in children:
            c.kill()
        server.stop()


if __name__ == "__main__":
    main()
