"""Which Redis mechanism carries the compute tier's results to the edges: pub/sub against streams
(XADD, each edge blocked in XREAD), measured here on a throwaway redis-server, 127.0.0.1.

Per mechanism: delivery latency (publish -> an edge has the message, p50/p99, over every reader),
the publisher's cost per message (seconds of wall time in the call: the compute tier's batch
thread pays it) and what Redis holds afterwards (used_memory growth). The message is a typical
change (a few KB of msgpack); N readers stand for the edges. Alternating rounds, so a noisy
neighbour hits both arms.

`python -m bench.experiments.compute_tier_and_edges` writes data/bench-redis-mechanisms.md
(docs/decisions/0030)."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from tests.infra import start_redis

MESSAGE_BYTES = 4096


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _publish(send: Callable[[bytes], object], messages: int, rate: float) -> float:
    """Send `messages` payloads (the send time first) at `rate`; seconds spent in `send` per message."""
    cost = 0.0
    for _ in range(messages):
        payload = f"{time.time():20.6f}".encode() + os.urandom(MESSAGE_BYTES - 20)
        t0 = time.perf_counter()
        send(payload)
        cost += time.perf_counter() - t0
        time.sleep(1 / rate)
    return cost / messages


def _pubsub_round(url: str, readers: int, messages: int, rate: float) -> dict[str, float]:
    client = redis.Redis.from_url(url)
    latencies: list[float] = []
    lock = threading.Lock()
    ready = threading.Barrier(readers + 1)

    def read() -> None:
        sub = redis.Redis.from_url(url).pubsub(ignore_subscribe_messages=True)
        sub.subscribe("bench:result")
        ready.wait()
        got, deadline = 0, time.monotonic() + messages / rate + 30
        while got < messages and time.monotonic() < deadline:
            m = sub.get_message(timeout=1)
            if m is None:  # a subscribe confirmation, or nothing yet
                continue
            sent = float(m["data"][:20].decode())
            with lock:
                latencies.append(time.time() - sent)
            got += 1
        sub.close()

    threads = [threading.Thread(target=read) for _ in range(readers)]
    for t in threads:
        t.start()
    ready.wait()
    time.sleep(0.2)
    before = client.info("memory")["used_memory"]
    cost = _publish(lambda payload: client.publish("bench:result", payload), messages, rate)
    for t in threads:
        t.join()
    held = client.info("memory")["used_memory"] - before
    return _summary(latencies, cost, held)


def _stream_round(url: str, readers: int, messages: int, rate: float, maxlen: int) -> dict[str, float]:
    client = redis.Redis.from_url(url)
    client.delete("bench:results")
    latencies: list[float] = []
    lock = threading.Lock()
    ready = threading.Barrier(readers + 1)

    def read() -> None:
        reader = redis.Redis.from_url(url)
        last = "$"
        ready.wait()
        got = 0
        while got < messages:
            batch: Any = reader.xread({"bench:results": last}, block=5000, count=100)
            if not batch:
                break
            for entry_id, fields in batch[0][1]:
                sent = float(bytes(fields[b"m"][:20]).decode())
                with lock:
                    latencies.append(time.time() - sent)
                last = entry_id
                got += 1

    threads = [threading.Thread(target=read) for _ in range(readers)]
    for t in threads:
        t.start()
    ready.wait()
    time.sleep(0.2)
    before = client.info("memory")["used_memory"]
    cost = _publish(
        lambda payload: client.xadd("bench:results", {"m": payload}, maxlen=maxlen, approximate=True),
        messages,
        rate,
    )
    for t in threads:
        t.join()
    held = client.info("memory")["used_memory"] - before
    client.delete("bench:results")
    return _summary(latencies, cost, held)


def _summary(latencies: list[float], cost: float, held: int) -> dict[str, float]:
    return {
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * _percentile(latencies, 0.99),
        "delivered": float(len(latencies)),
        "publish_us": 1e6 * cost,
        "held_kb": held / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--readers", type=int, default=3, help="edges")
    parser.add_argument("--messages", type=int, default=2000, help="per round and mechanism")
    parser.add_argument("--rate", type=float, default=500.0, help="messages per second")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("data/bench-redis-mechanisms.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        server = start_redis(Path(workdir))
        try:
            rows: dict[str, list[dict[str, float]]] = {"pub/sub": [], "stream (MAXLEN 1000)": []}
            for _ in range(args.rounds):
                rows["pub/sub"].append(_pubsub_round(server.url, args.readers, args.messages, args.rate))
                rows["stream (MAXLEN 1000)"].append(
                    _stream_round(server.url, args.readers, args.messages, args.rate, 1000)
                )
        finally:
            server.daemon.stop()
    lines = [
        f"# Redis mechanisms for results: {args.readers} readers, {args.messages} messages of "
        f"{MESSAGE_BYTES} B at {args.rate:.0f}/s, {args.rounds} alternating rounds",
        "",
        "| mechanism | delivery p50 ms | delivery p99 ms | publish call us | Redis memory held KB "
        "| delivered |",
        "|---|---|---|---|---|---|",
    ]
    for name, results in rows.items():

        def spread(key: str, results: list[dict[str, float]] = results) -> str:
            values = [r[key] for r in results]
            return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

        delivered = int(sum(r["delivered"] for r in results))
        lines.append(
            f"| {name} | {spread('p50_ms')} | {spread('p99_ms')} | {spread('publish_us')} | "
            f"{spread('held_kb')} | {delivered} of {args.readers * args.messages * args.rounds} |"
        )
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
