"""What serving gRPC on the HTTP port costs an HTTP or WebSocket connection
(docs/decisions/0077-grpc-on-the-same-port.md): the same uvicorn server (uvloop, Sparkwire's HTTP
protocol with its read deadline and header limits, a minimal app: GET /healthz and a WebSocket that
sends one message) with and without app/transport/preface.py in front, in turns (A, B, A, B, ...) so
that a shared machine's load falls on both arms alike.

Per arm and turn:
- http_connect: a new TCP connection, one `GET /healthz` (Connection: close), read to the end; N in a
  row: p50 and p99 in microseconds (what the sniffer adds: one protocol object and a prefix check);
- http_new_conn_rps: the same with 16 at once for `seconds`: connections (requests) per second;
- http_keepalive_rps: 4 kept-alive connections, requests in a row for `seconds` (the sniffer is out
  of the path once a connection is handed over: expected equal);
- ws_connect: WebSocket handshake, first message, close; N in a row: p50 and p99 (us);
- server_cpu_per_*: the server process's CPU time (every thread, /proc's schedstat) per HTTP
  connection (5N in a row), per kept-alive request (5N on one connection: the control, which the
  front never touches) and per WebSocket connection (N), in us.
With the front, gRPC through it and straight to its unix socket (WorkspaceService.GetDefaultWorkspace,
N calls on one channel: p50 in us; and a new channel's first call: p50 in ms).

Run: python -m bench.experiments.grpc_same_port [turns=3] [n=300] [seconds=3]
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace
from typing import Any

import grpc
import websockets
from fastapi import FastAPI, WebSocket  # at module level: the route's annotations are resolved here

HOST = "127.0.0.1"
REQUEST = b"GET /healthz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
KEEPALIVE = b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n"


def serve(mode: str, port: int, grpc_dir: str) -> None:
    import uvicorn

    from app.api.grpc_metadata import start_grpc_server
    from app.config import Settings
    from app.protocol.admission import Admission
    from app.transport.http_protocol import http_protocol_with_read_deadline
    from app.transport.preface import GrpcTarget, preface_sniffing

    settings = Settings.model_validate({})
    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("hello")
        await websocket.close()

    http: Any = http_protocol_with_read_deadline(settings.handshake_timeout, settings.min_body_rate)
    target = GrpcTarget()
    if mode == "front":
        http = preface_sniffing(http, settings.handshake_timeout, target)
    config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", http=http, loop="uvloop")
    server = uvicorn.Server(config)

    async def main() -> None:
        if mode == "front":
            state: Any = SimpleNamespace(settings=settings, admission=Admission.from_settings(settings))
            path = os.path.join(grpc_dir, "grpc.sock")
            grpc_server = await start_grpc_server(state, f"unix:{path}")
            target.listening(path)
        await server.serve()
        if mode == "front":
            await grpc_server.stop(0)

    import uvloop

    uvloop.run(main())


async def _one_http(port: int) -> float:
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(REQUEST)
    data = await reader.read()
    writer.close()
    assert data.startswith(b"HTTP/1.1 200"), data[:40]
    return time.perf_counter() - started


async def http_connect(port: int, n: int) -> list[float]:
    return [await _one_http(port) for _ in range(n)]


async def http_new_conn_rps(port: int, seconds: float) -> float:
    done = 0
    end = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < end:
            await _one_http(port)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(16)))
    return done / (time.perf_counter() - started)


async def http_keepalive_rps(port: int, seconds: float) -> float:
    done = 0
    end = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection(HOST, port)
        while time.perf_counter() < end:
            writer.write(KEEPALIVE)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            done += 1
        writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(4)))
    return done / (time.perf_counter() - started)


async def ws_connect(port: int, n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        async with websockets.connect(f"ws://{HOST}:{port}/ws") as ws:
            assert await ws.recv() == "hello"
        times.append(time.perf_counter() - started)
    return times


def grpc_calls(target: str, n: int) -> tuple[list[float], list[float]]:
    from nominal.protos.workspaces.v1 import workspaces_pb2 as ws
    from nominal.protos.workspaces.v1 import workspaces_pb2_grpc as ws_grpc

    calls, firsts = [], []
    with grpc.insecure_channel(target) as channel:
        stub = ws_grpc.WorkspaceServiceStub(channel)
        stub.GetDefaultWorkspace(ws.GetDefaultWorkspaceRequest(), timeout=10)
        for _ in range(n):
            started = time.perf_counter()
            stub.GetDefaultWorkspace(ws.GetDefaultWorkspaceRequest(), timeout=10)
            calls.append(time.perf_counter() - started)
    for _ in range(20):
        started = time.perf_counter()
        with grpc.insecure_channel(target) as channel:
            ws_grpc.WorkspaceServiceStub(channel).GetDefaultWorkspace(
                ws.GetDefaultWorkspaceRequest(), timeout=10
            )
        firsts.append(time.perf_counter() - started)
    return calls, firsts


class _NoOp(asyncio.Protocol):
    """Stands for uvicorn's protocol: what it does is the same with or without the front."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


class _Transport:
    """The little of a transport the sniffer touches."""

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def close(self) -> None:
        pass


async def sniffer_cpu(rounds: int = 5, n: int = 20_000) -> tuple[float, float]:
    """The sniffer's own work per HTTP connection, in-process: (with, without) in ns, the best of
    `rounds` runs of `n` connections (a protocol made, given a transport, given the first bytes)."""
    from app.transport.preface import GrpcTarget, preface_sniffing

    sniffing = preface_sniffing(_NoOp, 10.0, GrpcTarget())
    transport: Any = _Transport()
    best = {"front": float("inf"), "plain": float("inf")}
    for _ in range(rounds):
        for mode in ("plain", "front"):
            started = time.perf_counter_ns()
            for _ in range(n):
                if mode == "front":
                    p = sniffing()
                    p.connection_made(transport)
                    p.data_received(REQUEST)
                else:
                    q = _NoOp()
                    transport.set_protocol(q)
                    q.connection_made(transport)
                    q.data_received(REQUEST)
            best[mode] = min(best[mode], (time.perf_counter_ns() - started) / n)
    return best["front"], best["plain"]


def server_cpu_ns(pid: int) -> int:
    """CPU time the server process has run, every thread, in ns (the scheduler's own count)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return total


async def http_keepalive_requests(port: int, n: int) -> None:
    reader, writer = await asyncio.open_connection(HOST, port)
    for _ in range(n):
        writer.write(KEEPALIVE)
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
    writer.close()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _wait(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the bench server did not start")


def measure(mode: str, n: int, seconds: float) -> dict[str, float]:
    port = _free_port()
    grpc_dir = tempfile.mkdtemp(prefix="bench-grpc-")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.experiments.grpc_same_port", "serve", mode, str(port), grpc_dir]
    )
    try:
        _wait(port)
        time.sleep(0.5)
        out: dict[str, float] = {}
        # the server's CPU per connection (or request): far less moved by a loaded machine than a latency
        before = server_cpu_ns(proc.pid)
        asyncio.run(http_connect(port, 5 * n))
        out["server_cpu_per_http_conn_us"] = (server_cpu_ns(proc.pid) - before) / (5 * n) / 1e3
        before = server_cpu_ns(proc.pid)
        asyncio.run(http_keepalive_requests(port, 5 * n))
        out["server_cpu_per_keepalive_req_us"] = (server_cpu_ns(proc.pid) - before) / (5 * n) / 1e3
        before = server_cpu_ns(proc.pid)
        asyncio.run(ws_connect(port, n))
        out["server_cpu_per_ws_conn_us"] = (server_cpu_ns(proc.pid) - before) / n / 1e3
        connect = asyncio.run(http_connect(port, n))
        out["http_connect_p50_us"] = statistics.median(connect) * 1e6
        out["http_connect_p99_us"] = _pct(connect, 0.99) * 1e6
        out["http_new_conn_rps"] = asyncio.run(http_new_conn_rps(port, seconds))
        out["http_keepalive_rps"] = asyncio.run(http_keepalive_rps(port, seconds))
        wst = asyncio.run(ws_connect(port, n))
        out["ws_connect_p50_us"] = statistics.median(wst) * 1e6
        out["ws_connect_p99_us"] = _pct(wst, 0.99) * 1e6
        if mode == "front":
            for name, target in [
                ("grpc_front", f"{HOST}:{port}"),
                ("grpc_unix", f"unix:{grpc_dir}/grpc.sock"),
            ]:
                calls, firsts = grpc_calls(target, n)
                out[f"{name}_call_p50_us"] = statistics.median(calls) * 1e6
                out[f"{name}_first_call_p50_ms"] = statistics.median(firsts) * 1e3
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def main(argv: list[str]) -> None:
    if argv and argv[0] == "serve":
        serve(argv[1], int(argv[2]), argv[3])
        return
    turns = int(argv[0]) if argv else 3
    n = int(argv[1]) if len(argv) > 1 else 300
    seconds = float(argv[2]) if len(argv) > 2 else 3.0
    print(f"load average before: {os.getloadavg()}", flush=True)
    front_ns, plain_ns = asyncio.run(sniffer_cpu())
    added = front_ns - plain_ns
    print(f"sniffer CPU per HTTP connection: {added:.0f} ns ({front_ns:.0f} with, {plain_ns:.0f} without)")
    results: dict[str, list[dict[str, float]]] = {"plain": [], "front": []}
    for turn in range(turns):
        for mode in ("plain", "front") if turn % 2 == 0 else ("front", "plain"):
            results[mode].append(measure(mode, n, seconds))
            print(turn, mode, {k: round(v, 1) for k, v in results[mode][-1].items()}, flush=True)
    print(f"load average after: {os.getloadavg()}")
    for key in results["front"][0]:
        plain = [r[key] for r in results["plain"] if key in r]
        front = [r[key] for r in results["front"]]
        shown = f"plain {statistics.median(plain):10.1f}  " if plain else " " * 19
        print(f"{key:28s} {shown}front {statistics.median(front):10.1f}  (median of {len(front)} turns)")


if __name__ == "__main__":
    main(sys.argv[1:])
