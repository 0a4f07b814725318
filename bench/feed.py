"""The feed: a separate process writing N numeric channels at R points/s each over HTTP, one request
every `request_ms`, and recording when each request's 200 arrived.

Point k of every channel has timestamp k * tick (tick = 1 s / R), so a frame's newest timestamp says
exactly which writes it includes. A request carries every tick since the previous one up to the
wall clock, so when the server falls behind the requests grow instead of the schedule slipping (up
to `max_request_ms` of ticks each: past that the feed falls behind the clock).
It stops after `duration_s` or at a line on stdin, whichever comes first.
Run: python -m bench.feed '<json spec>'  (see FeedSpec)
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.httpclient import HttpConnection

TABLE = [round(math.sin(2 * math.pi * i / 1000), 4) for i in range(1000)]  # one period per 1000 ticks


@dataclass
class FeedSpec:
    port: int
    rid: str
    channels: int
    rate_hz: int  # points per second per channel
    request_ms: float
    duration_s: float
    out: str
    connections: int = 4  # requests in flight at most
    # Ticks one request carries at most, in ms of them: behind by more, the feed falls behind the
    # clock instead of building ever bigger bodies (at 1.2M points/s an unbounded catch-up grew to
    # GB-sized bodies and never finished); what it never sent shows as a rate not held.
    max_request_ms: float = 1000
    first_channel: int = 0  # this feed writes channels first_channel .. first_channel + channels - 1
    # the writer: "json" (POST /storage/writer/v1), "columnar" (POST /storage/writer/v1/columnar) or
    # "remote_write" (Prometheus remote write: snappy protobuf, millisecond timestamps)
    format: str = "json"

    @property
    def tick_ns(self) -> int:
        return 1_000_000_000 // self.rate_hz


def channel_name(i: int) -> str:
    return f"ch{i:02d}"


def value_at(k: int, channel: int) -> float:
    return TABLE[(k + 97 * channel) % 1000] + channel


@functools.cache
def _value_texts(channel: int) -> list[str]:
    """Channel `channel`'s 1,000 values as JSON text, each closing its point's object."""
    return [f"{v + channel}}}" for v in TABLE]


def _values_from(k: int, channel: int, n: int) -> list[str]:
    """The texts of value_at(k .. k + n - 1, channel), by list slicing (C-speed, no float formatting)."""
    table = _value_texts(channel)
    start = (k + 97 * channel) % 1000
    rotated = table[start:] + table[:start]
    return (rotated * (n // 1000 + 1))[:n]


def body(rid: str, channels: int, first_k: int, last_k: int, tick_ns: int, first_channel: int = 0) -> bytes:
    """The request for ticks first_k..last_k of every channel (`channels` of them from
    `first_channel`), built as text from per-channel value texts formatted once: the feed shares the
    machine's cores with the server, so its cost per point is kept small (~0.2 us)."""
    stamps = []
    for k in range(first_k, last_k + 1):
        s, n = divmod(k * tick_ns, 1_000_000_000)
        stamps.append(f'{{"timestamp":{{"seconds":{s},"nanos":{n}}},"value":')
    count = len(stamps)
    batches = []
    for c in range(first_channel, first_channel + channels):
        pts = ",".join(map(str.__add__, stamps, _values_from(first_k, c, count)))
        batches.append(
            f'{{"channel":"{channel_name(c)}","tags":{{}},"points":{{"type":"double","double":[{pts}]}}}}'
        )
    return f'{{"dataSourceRid":"{rid}","batches":[{",".join(batches)}]}}'.encode()


@functools.cache
def _plain_values(channel: int) -> list[str]:
    return [repr(v + channel) for v in TABLE]


def columnar_body(
    rid: str, channels: int, first_k: int, last_k: int, tick_ns: int, first_channel: int = 0
) -> bytes:
    """body()'s points as a WriteColumnBatchesRequest: a column of timestamps and one of values a
    channel, built as text as body() is."""
    stamps = []
    for k in range(first_k, last_k + 1):
        s, n = divmod(k * tick_ns, 1_000_000_000)
        stamps.append(f'{{"seconds":{s},"nanos":{n}}}')
    times = ",".join(stamps)
    count = len(stamps)
    batches = []
    for c in range(first_channel, first_channel + channels):
        table = _plain_values(c)
        start = (first_k + 97 * c) % 1000
        values = ((table[start:] + table[:start]) * (count // 1000 + 1))[:count]
        batches.append(
            f'{{"channel":"{channel_name(c)}","tags":{{}},"timestamps":[{times}],'
            f'"values":{{"type":"doubles","doubles":[{",".join(values)}]}}}}'
        )
    return f'{{"dataSourceRid":"{rid}","batches":[{",".join(batches)}]}}'.encode()


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def remote_write_body(
    first_k: int, last_k: int, tick_ns: int, channels: int, first_channel: int = 0
) -> bytes:
    """body()'s points as a snappy-compressed Prometheus WriteRequest, a TimeSeries a channel
    (`__name__` its name), timestamps in milliseconds (several samples share one above 1,000 points/s
    a channel). Encoded with numpy, 18 bytes a sample: the feed's cost per point stays small."""
    import cramjam

    ks = np.arange(first_k, last_k + 1, dtype=np.int64)
    millis = (ks * tick_ns) // 1_000_000
    assert len(ks) == 0 or (millis.min() >= 1 << 35 and millis.max() < 1 << 42)  # a 6-byte varint
    groups = np.stack([(millis >> (7 * i)) & 0x7F for i in range(6)], axis=1).astype(np.uint8)
    groups[:, :5] |= 0x80
    series = []
    for c in range(first_channel, first_channel + channels):
        values = np.asarray(TABLE, dtype=np.float64)[(ks + 97 * c) % 1000] + c
        samples = np.empty((len(ks), 18), dtype=np.uint8)
        samples[:, 0], samples[:, 1] = 0x12, 16  # TimeSeries.samples, 16 bytes
        samples[:, 2] = 0x09  # Sample.value: a double
        samples[:, 3:11] = values.astype("<f8").view(np.uint8).reshape(-1, 8)
        samples[:, 11] = 0x10  # Sample.timestamp: a varint
        samples[:, 12:18] = groups
        name = channel_name(c).encode()
        label = b"\x0a\x08__name__\x12" + _varint(len(name)) + name  # Label{name, value}
        inner = b"\x0a" + _varint(len(label)) + label + samples.tobytes()  # TimeSeries.labels, samples
        series.append(b"\x0a" + _varint(len(inner)) + inner)  # WriteRequest.timeseries
    return bytes(cramjam.snappy.compress_raw(b"".join(series)))


REMOTE_WRITE_HEADERS = (
    "Content-Type: application/x-protobuf\r\nContent-Encoding: snappy\r\n"
    "X-Prometheus-Remote-Write-Version: 0.1.0\r\n"
)


def request(spec: FeedSpec, first_k: int, last_k: int) -> tuple[str, bytes, str]:
    """The path, body and header lines of the request for ticks first_k..last_k, in spec.format."""
    tick, n, first = spec.tick_ns, spec.channels, spec.first_channel
    if spec.format == "columnar":
        return "/storage/writer/v1/columnar", columnar_body(spec.rid, n, first_k, last_k, tick, first), JSON
    if spec.format == "remote_write":
        path = f"/storage/writer/v1/prometheus/{spec.rid}"
        return path, remote_write_body(first_k, last_k, tick, n, first), REMOTE_WRITE_HEADERS
    return "/storage/writer/v1", body(spec.rid, n, first_k, last_k, tick, first), JSON


JSON = "Content-Type: application/json\r\n"


def newest_stamp(spec: FeedSpec, last_k: int) -> int:
    """The newest point's timestamp as stored: remote write's are whole milliseconds."""
    ts = last_k * spec.tick_ns
    return ts - ts % 1_000_000 if spec.format == "remote_write" else ts


async def run(spec: FeedSpec) -> dict[str, object]:
    tick = spec.tick_ns
    idle = [HttpConnection("127.0.0.1", spec.port) for _ in range(spec.connections)]
    rows: list[tuple[int, int, int, int, int]] = []  # sent, t200, newest point ts, points, status
    skipped = 0
    tasks: set[asyncio.Task[None]] = set()

    async def send(conn: HttpConnection, first_k: int, last_k: int) -> None:
        path, payload, headers = request(spec, first_k, last_k)
        sent = time.time_ns()
        try:
            status, _ = await conn.post(path, payload, headers)
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            status = 0
            conn.close()
        newest = newest_stamp(spec, last_k)
        rows.append((sent, time.time_ns(), newest, (last_k - first_k + 1) * spec.channels, status))
        idle.append(conn)

    stop = threading.Event()

    def wait_for_stop() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    last_k = first_k = time.time_ns() // tick
    cap = max(1, int(spec.max_request_ms * 1_000_000) // tick)
    slot = int(spec.request_ms * 1_000_000) // tick
    step = spec.request_ms / 1000
    loop = asyncio.get_running_loop()
    begin = loop.time()
    cpu_before = time.process_time()
    i = 0
    while (due := begin + i * step) < begin + spec.duration_s and not stop.is_set():
        i += 1
        await asyncio.sleep(max(0.0, due - loop.time()))
        now_k = time.time_ns() // tick
        if now_k <= last_k:
            continue
        if not idle:  # every connection busy: these ticks go out with the next request
            skipped += 1
            continue
        upto = min(now_k, last_k + cap)
        task = asyncio.create_task(send(idle.pop(), last_k + 1, upto))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        last_k = upto
    ended_k = time.time_ns() // tick  # the clock when sending stopped (before waiting for replies)
    if tasks:
        await asyncio.wait(tasks, timeout=30)
    # The feed shares the machine's cores with the server: its own CPU belongs in the explanation.
    cpu_cores = (time.process_time() - cpu_before) / max(1e-9, loop.time() - begin)
    arr = np.array(rows, dtype=np.int64).reshape(-1, 5)
    np.save(spec.out, arr)
    ok = arr[:, 4] == 200
    return {
        "requests": len(arr),
        "failed": int((~ok).sum()),
        "skipped_slots": skipped,
        "points_acked": int(arr[ok, 3].sum()),
        # The time the sent points cover: the step's length less the slot still due when it ended.
        "span_s": (last_k - first_k) * tick / 1e9,
        # ticks a capped feed never sent, beyond the one slot still due at the end (as span_s)
        "behind_s": max(0, ended_k - last_k - slot) * tick / 1e9,
        "cpu_cores": round(cpu_cores, 2),
    }


def load(path: str | Path) -> np.ndarray:
    """Rows (sent_ns, t200_ns, newest_point_ts, points, status) of a finished feed."""
    return np.load(path)


def main() -> None:
    spec = FeedSpec(**json.loads(sys.argv[1]))
    summary = asyncio.run(run(spec))
    print(json.dumps({"spec": asdict(spec), **summary}), flush=True)


if __name__ == "__main__":
    main()
