"""Resume against re-snapshot (issue 22, docs/extensions.md): a dashboard with 100 subscriptions of
10,000 points each drops its connection, points keep arriving for a while, and it reconnects. How
many bytes and how long until all 100 views are complete again: with resume tokens (one
AppendResult of what changed each) against subscribing afresh (a FullResult each)?

Both arms run in turns against one server, on the same subscriptions and the same absence, and the
report gives the medians and their ratio. Bytes are the frames' text as received, with
permessage-deflate off so they are the bytes on the wire (less the WebSocket framing); a compressing
client shrinks both arms.

    python -m bench.resume [--smoke] [--out BENCHMARKS.resume.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import websockets

from bench.feed import body, channel_name
from bench.machine import describe_machine
from bench.serverproc import ROOT, ServerProcess, start_server

Json = Any
RID = "ri.bench.resume"
NANOS = 1_000_000_000


@dataclass(frozen=True)
class ResumePlan:
    subscriptions: int = 100
    points: int = 10_000  # per subscription, in its window
    tick_ms: int = 100  # 10 Hz: 10,000 points span 1,000 s
    away_s: float = 10.0  # of new points (at the same rate) written while the client is away
    rounds: int = 5


FULL = ResumePlan()
SMOKE = ResumePlan(subscriptions=5, points=500, away_s=2.0, rounds=2)


def log(message: str) -> None:
    print(f"[resume] {message}", flush=True)


def subscription(channel: str, window_s: float, token: str | None, resume: bool) -> Json:
    raw = {"type": "raw", "raw": {"name": "x"}}
    node = {
        "type": "series",
        "series": {"input": {"type": "numeric", "numeric": raw}, "numericAggregations": {}},
    }
    literal = {"type": "literal", "literal": channel}
    source: Json = {"dataSourceRid": {"type": "literal", "literal": RID}, "channel": literal, "tags": {}}
    source |= {"tagsToGroupBy": [], "groupByTags": []}
    variable = {"type": "channel", "channel": {"type": "dataSource", "dataSource": source}}
    sub: Json = {
        "computeRequest": {
            "node": node,
            "windowWidth": {"seconds": int(window_s), "nanos": 0},
            "context": {"variables": {"x": variable}, "datasetReferences": {}},
        },
        "subscriptionOptions": {"minDelay": 0, "allowAppends": True},
    }
    if resume:
        sub["sparkwire"] = {"resume": True} if token is None else {"resumeToken": token}
    return sub


@dataclass
class Reconnect:
    bytes: int
    seconds: float
    outcomes: dict[str, int]


class Dashboard:
    """One connection's worth of subscriptions, keeping the newest token of each."""

    def __init__(self, server: ServerProcess, plan: ResumePlan, resume: bool) -> None:
        self.server, self.plan, self.resume = server, plan, resume
        self.window_s = plan.points * plan.tick_ms / 1000 + 60
        self.tokens: dict[str, str | None] = {channel_name(c): None for c in range(plan.subscriptions)}

    async def connect(self) -> Reconnect:
        """Subscribe everything (again) and wait for one result update of each: the views complete."""
        ws = await websockets.connect(self.server.ws_url, max_size=None, compression=None)
        self._ws = ws
        subs = {
            sid: subscription(sid, self.window_s, token, self.resume) for sid, token in self.tokens.items()
        }
        started = time.perf_counter()
        await ws.send(json.dumps({"type": "subscribe", "subscribe": subs}))
        received, waiting, outcomes = 0, set(subs), dict[str, int]()
        while waiting:
            text = await asyncio.wait_for(ws.recv(), 120)
            received += len(text.encode() if isinstance(text, str) else text)
            frame = json.loads(text)
            if frame["type"] != "subscriptionUpdate":
                continue
            update = frame["subscriptionUpdate"]
            sid = update["subscriptionId"]
            if update["update"]["type"] == "error":
                raise RuntimeError(f"{sid}: {update['update']}")
            self.tokens[sid] = update.get("resumeToken")
            outcome = update.get("resume", {}).get("outcome", "none")
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            waiting.discard(sid)
        return Reconnect(received, time.perf_counter() - started, outcomes)

    async def drop(self) -> None:
        await self._ws.close()


def write(server: ServerProcess, plan: ResumePlan, first_k: int, last_k: int) -> None:
    """Ticks first_k..last_k of every channel, in requests of at most 200,000 points."""
    per_request = max(1, 200_000 // plan.subscriptions)
    tick_ns = plan.tick_ms * 1_000_000
    for k in range(first_k, last_k + 1, per_request):
        payload = body(RID, plan.subscriptions, k, min(last_k, k + per_request - 1), tick_ns)
        request = urllib.request.Request(
            f"{server.base_url}/storage/writer/v1", payload, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            assert response.status == 200


async def measure(server: ServerProcess, plan: ResumePlan) -> dict[str, list[Reconnect]]:
    tick_ns = plan.tick_ms * 1_000_000
    away_ticks = int(plan.away_s * 1000 / plan.tick_ms)
    now_k = time.time_ns() // tick_ns
    # History: the window's points, ending before the rounds' writes begin.
    rounds_ticks = (plan.rounds + 1) * away_ticks
    next_k = now_k - rounds_ticks
    log(f"writing {plan.points * plan.subscriptions:,} points of history")
    await asyncio.to_thread(write, server, plan, next_k - plan.points, next_k - 1)
    arms = {
        "resume": Dashboard(server, plan, resume=True),
        "re-snapshot": Dashboard(server, plan, resume=False),
    }
    for dashboard in arms.values():
        await dashboard.connect()  # the first views (and the first tokens)
    results: dict[str, list[Reconnect]] = {name: [] for name in arms}
    for round_ in range(plan.rounds):
        for dashboard in arms.values():
            await dashboard.drop()
        await asyncio.to_thread(write, server, plan, next_k, next_k + away_ticks - 1)
        next_k += away_ticks
        await asyncio.sleep(1.0)  # the writes reach the computations
        order = list(arms) if round_ % 2 == 0 else list(reversed(arms))  # neither always goes first
        for name in order:
            again = await arms[name].connect()
            results[name].append(again)
            took = f"{again.bytes:,} bytes in {again.seconds * 1000:.0f} ms"
            log(f"round {round_ + 1} {name}: {took} {again.outcomes}")
    for dashboard in arms.values():
        await dashboard.drop()
    return results


def report(plan: ResumePlan, results: dict[str, list[Reconnect]], machine: str) -> str:
    def med(name: str, field: str) -> float:
        return statistics.median(getattr(r, field) for r in results[name])

    resumed = sum(r.outcomes.get("resumed", 0) for r in results["resume"])
    asked = plan.rounds * plan.subscriptions

    def row(label: str, name: str) -> str:
        return f"| {label} | {med(name, 'bytes'):,.0f} | {med(name, 'seconds') * 1000:.0f} ms |"

    bytes_ratio = med("re-snapshot", "bytes") / med("resume", "bytes")
    time_ratio = med("re-snapshot", "seconds") / med("resume", "seconds")
    rows = [
        "| arm | bytes to complete views (median) | time to complete views (median) |",
        "|---|---|---|",
        row("re-snapshot (FullResults)", "re-snapshot"),
        row("resume (AppendResults)", "resume"),
        f"| ratio re-snapshot / resume | {bytes_ratio:.1f}x | {time_ratio:.1f}x |",
    ]
    return "\n".join(
        [
            "# Resume against re-snapshot",
            "",
            f"`python -m bench.resume` ({machine}). A dashboard of {plan.subscriptions} subscriptions, "
            f"{plan.points:,} points each in its window ({1000 // plan.tick_ms} Hz), drops its connection; "
            f"{plan.away_s:g} s of new points arrive; it reconnects. Medians of {plan.rounds} rounds of each "
            "arm against one server: each round both drop, the points arrive, both reconnect (in turns). "
            "Bytes: the frames' text with permessage-deflate off.",
            "",
            *rows,
            "",
            f"Subscriptions resumed: {resumed} of {asked} presented tokens (any other got a FullResult "
            "and a reason).",
            "",
            "Both arms read the same live computations (the resume arm's keep them live), so the "
            "re-snapshot arm is its best case: FullResults from materialized windows, no back-fill. A "
            "dashboard alone on its computations would also wait for their back-fills.",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    plan = SMOKE if args.smoke else FULL
    out = (
        Path(args.out)
        if args.out
        else ROOT / ("data/bench-smoke/BENCHMARKS.resume.md" if args.smoke else "BENCHMARKS.resume.md")
    )
    with tempfile.TemporaryDirectory(prefix="sparkwire-resume-") as work:
        server = start_server(Path(work) / "data", Path(work) / "server.log", {})
        try:
            results = asyncio.run(measure(server, plan))
        finally:
            server.stop()
    out.parent.mkdir(parents=True, exist_ok=True)
    machine = describe_machine()
    summary = f"{machine['cores']} cores, {machine['cpu']}, load {machine['load_average_at_start']} at start"
    out.write_text(report(plan, results, summary))
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
