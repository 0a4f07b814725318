"""A process of Sparkwire's that serves gRPC and forks children while gRPC's threads run (Spark's
Java gateway, the decode workers) must see every child exec: with gRPC's fork handlers on (grpcio's
default), about a quarter of them died before exec, and a server whose Java gateway died never
became ready. `import app` turns the handlers off (app/__init__.py); this runs the race in a fresh
interpreter, as the server does."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

RACE = textwrap.dedent(
    """
    import app  # first, as every Sparkwire process imports it before grpc
    import asyncio, signal, subprocess, sys, threading, tempfile, os
    import grpc

    async def main():
        socket = os.path.join(tempfile.mkdtemp(), "grpc.sock")
        server = grpc.aio.server()
        server.add_insecure_port("unix:" + socket)
        await server.start()
        channel = grpc.aio.insecure_channel("unix:" + socket)
        failed = []

        def spawn():  # as pyspark launches its gateway: fork, a preexec_fn, exec
            for _ in range(40):
                child = subprocess.Popen(
                    ["/bin/true"],
                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
                    stderr=subprocess.PIPE,
                )
                err = child.communicate()[1]
                if child.returncode != 0 or err:
                    failed.append((child.returncode, err[:200]))

        async def calls():  # gRPC's threads busy meanwhile
            for _ in range(200):
                try:
                    await channel.unary_unary("/sparkwire.Test/Nothing")(b"", timeout=0.05)
                except grpc.RpcError:
                    pass

        spawning = threading.Thread(target=spawn)
        spawning.start()
        await asyncio.gather(*(calls() for _ in range(4)))
        spawning.join()
        await server.stop(0)
        print("failed", len(failed), failed[:2])
        sys.exit(1 if failed else 0)

    asyncio.run(main())
    """
)


def test_children_forked_beside_the_grpc_server_all_exec(tmp_path: Path) -> None:
    script = tmp_path / "race.py"
    script.write_text(RACE)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
