"""Large JSON write bodies are decoded in a worker process (app/ingest/workers.py): what is stored and
what a client is told are the same as on the event loop; a worker that dies is replaced; no worker
outlives a server killed with SIGKILL."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import ServerProcess, start_server
from tests.log_file import StoredRow, stored_rows
from tests.processes import alive, process_tree
from tests.wire import NANOS

Body = dict[str, Any]
WRITE = "/storage/writer/v1"
T0 = (time.time_ns() // NANOS - 3600) * NANOS + 123_456_789  # inside the log's retention
MIN_BYTES = 64 << 10  # SPARKWIRE_INGEST_DECODE_MIN_BYTES's default


def decoded(base_url: str, where: str) -> float:
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    match = re.search(rf'^sparkwire_ingest_bodies_decoded_total\{{where="{where}"\}} (\S+)$', text, re.M)
    return 0.0 if match is None else float(match.group(1))


def large_body(rid: str, n: int = 2000) -> Body:
    """Two double series (one tagged) and a string series, n points each: well over MIN_BYTES."""

    def points(channel: str, values: list[Any], kind: str = "double") -> Body:
        stamps = [
            {"seconds": (T0 + i * 1_000_007) // NANOS, "nanos": (T0 + i * 1_000_007) % NANOS}
            for i in range(n)
        ]
        return {
            "channel": channel,
            "tags": {},
            "points": {
                "type": kind,
                kind: [{"timestamp": s, "value": v} for s, v in zip(stamps, values, strict=True)],
            },
        }

    return {
        "dataSourceRid": rid,
        "batches": [
            points("engine.temp", [20.0 + i / 7 for i in range(n)]),
            {**points("engine.rpm", [float(-i) * 1e300 for i in range(n)]), "tags": {"vehicle": "a1"}},
            points("gear", [["P", "R", "N", "D"][i % 4] for i in range(n)], "string"),
        ],
    }


def small_bodies(body: Body, per_request: int = 100) -> list[Body]:
    """The same points, `per_request` to a request: each body far below MIN_BYTES."""
    out = []
    for batch in body["batches"]:
        kind = batch["points"]["type"]
        pts = batch["points"][kind]
        for i in range(0, len(pts), per_request):
            piece = {**batch, "points": {"type": kind, kind: pts[i : i + per_request]}}
            out.append({"dataSourceRid": body["dataSourceRid"], "batches": [piece]})
    return out


def post(base_url: str, body: Body) -> httpx.Response:
    return httpx.post(f"{base_url}{WRITE}", content=orjson.dumps(body), timeout=30)


def rows_in_order(data_dir: Path, rid: str) -> list[StoredRow]:
    return sorted(stored_rows(data_dir, rid), key=lambda r: (r[0], r[2]))


def test_a_large_body_decoded_by_a_worker_stores_what_small_bodies_store(server: ServerProcess) -> None:
    stamp = time.time_ns()
    big_rid, small_rid = f"ri.workers.big.{stamp}", f"ri.workers.small.{stamp}"
    body = large_body(big_rid)
    assert len(orjson.dumps(body)) >= MIN_BYTES
    in_worker = decoded(server.base_url, "worker")
    r = post(server.base_url, body)
    assert r.status_code == 200, r.text
    assert decoded(server.base_url, "worker") == in_worker + 1
    in_loop = decoded(server.base_url, "event_loop")
    pieces = small_bodies(large_body(small_rid))
    for piece in pieces:
        assert post(server.base_url, piece).status_code == 200
    assert decoded(server.base_url, "event_loop") == in_loop + len(pieces)
    assert decoded(server.base_url, "worker") == in_worker + 1
    big, small = rows_in_order(server.data_dir, big_rid), rows_in_order(server.data_dir, small_rid)
    assert len(big) == 3 * 2000
    assert big == small  # channel, tags, exact nanosecond timestamp, double or string value
    assert ("engine.rpm", '{"vehicle":"a1"}', T0 + 5 * 1_000_007, -5e300, None) in big


@pytest.mark.parametrize(
    ("where", "bad", "message"),
    [
        (
            "seconds out of range",
            {"timestamp": {"seconds": 10**12, "nanos": 0}, "value": 1.0},
            "timestamp.seconds",
        ),
        ("a null value", {"timestamp": {"seconds": 1_700_000_000, "nanos": 0}, "value": None}, "value"),
    ],
)
def test_a_large_invalid_body_is_refused_as_a_small_one_is(
    server: ServerProcess, where: str, bad: Body, message: str
) -> None:
    rid = f"ri.workers.bad.{time.time_ns()}"
    body = large_body(rid)
    body["batches"][1]["points"]["double"].append(bad)
    small = {
        "dataSourceRid": rid,
        "batches": [{"channel": "c", "points": {"type": "double", "double": [bad]}}],
    }
    big_answer, small_answer = post(server.base_url, body), post(server.base_url, small)
    assert (big_answer.status_code, small_answer.status_code) == (400, 400)
    assert message in small_answer.json()["message"]
    # the same words, at the place the bad point has in each body
    assert _placeless(big_answer.json()["message"]) == _placeless(small_answer.json()["message"]), where
    assert stored_rows(server.data_dir, rid) == []  # nothing of either is stored


def _placeless(message: str) -> str:
    """An error message with the indices of the batch and the point taken out."""
    return re.sub(r"batches\.\d+(\.points\.double(?:\.double)?)\.\d+", r"batches.N\1.N", message)


def test_non_finite_values_in_a_large_body_are_stored(server: ServerProcess) -> None:
    rid = f"ri.workers.nan.{time.time_ns()}"
    body = large_body(rid)
    body["batches"][0]["points"]["double"][3]["value"] = "NaN"
    body["batches"][0]["points"]["double"][4]["value"] = "-Infinity"
    assert post(server.base_url, body).status_code == 200
    temps = [r for r in stored_rows(server.data_dir, rid) if r[0] == "engine.temp"]
    values = [v for _, _, _, v, _ in sorted(temps, key=lambda r: r[2])]
    assert values[3] is None  # NaN (tests/log_file.py reads it back as None)
    assert values[4] == float("-inf") and values[5] == 20.0 + 5 / 7


def _children(pid: int) -> dict[int, bytes]:
    """Every descendant of `pid`: its command line."""
    out = {}
    for child in process_tree(pid)[1:]:
        with contextlib.suppress(OSError):
            out[child] = Path(f"/proc/{child}/cmdline").read_bytes()
    return out


def _decode_workers(pid: int) -> list[int]:
    return [p for p, cmd in _children(pid).items() if b"spawn_main" in cmd]


def _wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_dead_worker_is_replaced_and_none_outlives_a_killed_server(tmp_path: Path) -> None:
    proc = start_server(tmp_path / "data", tmp_path / "server.log", own_process_group=True)
    try:
        _wait_for(lambda: len(_decode_workers(proc.process.pid)) == 1)
        (first,) = _decode_workers(proc.process.pid)
        os.kill(first, signal.SIGKILL)  # as the OOM killer would
        rid = f"ri.workers.replaced.{time.time_ns()}"
        r = post(proc.base_url, large_body(rid))
        assert r.status_code == 200, r.text  # decoded on the event loop, nothing lost
        assert len(stored_rows(proc.data_dir, rid)) == 3 * 2000
        assert "an ingest decode worker died" in proc.log_text()
        _wait_for(lambda: len(_decode_workers(proc.process.pid)) == 1)
        (second,) = _decode_workers(proc.process.pid)
        assert second != first
        in_worker = decoded(proc.base_url, "worker")
        assert post(proc.base_url, large_body(f"ri.workers.after.{time.time_ns()}")).status_code == 200
        assert decoded(proc.base_url, "worker") == in_worker + 1  # the new worker decodes again
        left = [p for p, cmd in _children(proc.process.pid).items() if b"multiprocessing" in cmd]
        assert second in left
        proc.process.send_signal(signal.SIGKILL)  # the server alone: its children see no signal
        proc.process.wait(30)
        _wait_for(lambda: not any(alive(p) for p in left), timeout=15)
    finally:
        proc.kill_all()
