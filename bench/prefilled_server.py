"""Steps the workloads with a server of their own share (3b's long windows, 3c's live windows, the
orchestrator's workloads): history written into a log before its server starts, a server started on
it and stopped afterwards, the feed's spec, the round-robin of subscriptions over connections, and
the micro-batch figures between two /metrics samples."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench.children import Child
from bench.procstat import TreeSampler
from bench.serverproc import ServerProcess, start_server

if TYPE_CHECKING:
    from compute.storage.contract import SeriesWrite

Json = Any
T = TypeVar("T")


def write_blocks(data_dir: Path, requests: Iterable[list[SeriesWrite]], in_flight: int) -> float:
    """Write each request (a list of series writes: one block per series) through the log's own
    writer into `data_dir`'s log, at most `in_flight` awaiting their commit; the seconds it took."""
    from compute.storage.sqlite.writer import DurableLog

    data_dir.mkdir(parents=True, exist_ok=True)
    durable = DurableLog(data_dir / "log.db")
    started = time.perf_counter()
    try:
        futures = []
        for writes in requests:
            futures.append(durable.submit(writes))
            if len(futures) >= in_flight:
                for f in futures:
                    f.result()
                futures.clear()
        for f in futures:
            f.result()
    finally:
        durable.close()
    return time.perf_counter() - started


@contextmanager
def server_on(
    work: Path, env: dict[str, str] | None, settle_s: float, keep_log: bool
) -> Iterator[tuple[ServerProcess, TreeSampler]]:
    """A server on `work`/server-data (its history already written), sampled from its start and
    left `settle_s` (Spark's first batches); stopped afterwards, its data removed unless `keep_log`."""
    server = start_server(
        work / "server-data", work / "server.log", {"SPARKWIRE_LOG_LEVEL": "WARNING", **(env or {})}
    )
    sampler = TreeSampler(server.pid).start()
    try:
        time.sleep(settle_s)
        yield server, sampler
    finally:
        sampler.stop()
        server.stop()
        if not keep_log:
            shutil.rmtree(work / "server-data", ignore_errors=True)


def feed_child(
    server: ServerProcess,
    rid: str,
    channels: int,
    rate_hz: int,
    request_ms: float,
    duration_s: float,
    out: Path,
    log: Path,
) -> Child:
    """bench/feed.py writing `channels` channels of `rid` at `rate_hz` into `server`."""
    spec = {
        "port": server.port,
        "rid": rid,
        "channels": channels,
        "rate_hz": rate_hz,
        "request_ms": request_ms,
        "duration_s": duration_s,
        "out": str(out),
    }
    return Child("bench.feed", [json.dumps(spec)], log)


def round_robin(items: Sequence[T], connections: int) -> list[list[T]]:
    """`items` dealt over `connections` in turn: item i on connection i % connections."""
    return [list(items[c::connections]) for c in range(connections)]


def batch_means(before: dict[str, float], after: dict[str, float], seconds: float) -> Json:
    """The server's micro-batches between two /metrics samples: how many per second, and the mean
    time each spent in the engine's callback (the narrow Spark job, then the evaluators)."""
    name = "sparkwire_microbatch_duration_seconds"
    count = after.get(f"{name}_count", 0.0) - before.get(f"{name}_count", 0.0)
    total = after.get(f"{name}_sum", 0.0) - before.get(f"{name}_sum", 0.0)
    return {
        "per_s": round(count / seconds, 2),
        "callback_ms": round(1000 * total / count, 1) if count else None,
    }
