"""Log lines read back through the `nominal` SDK's own `Channel.search_logs` (run from
.venv-nominal) on a real server: lines written with the log writer, then searched over a period by
regular expression, by a case-insensitive token and with no match at all, paged by the SDK through the
ComputeService (`series` of a filtered `log` series, summarizationStrategy page: pagedLog), each
answer checked against the lines that match by the operator's definition. A log series is
answered in pages only; a subscription to one is refused as Nominal refuses it (LOG_SERIES)."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess
from tests.server.test_compute_service import NOMINAL_PYTHON, TOKEN, request, secured, service
from tests.server.test_log_writer import logs_body
from tests.wire import NANOS

__all__ = ["secured"]  # the module-scoped server with a tokens file, shared with test_compute_service

Json = dict[str, Any]
MS = 1_000_000

SDK_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from nominal.core import NominalClient

    base_url, token, rid, start, end = sys.argv[1:6]
    channel = NominalClient.from_token(token, base_url=base_url).get_dataset(rid).get_channel("app.log")
    out = {"type": str(channel.data_type)}
    searches = {"regex": {"regex_match": "disk (full|slow)"}, "token": {"insensitive_match": "error"}}
    searches["all"] = {}
    for name, kwargs in searches.items():
        found = channel.search_logs(start=int(start), end=int(end), **kwargs)
        out[name] = [[p.timestamp, p.message, dict(p.args)] for p in found]
    try:  # all of time, the SDK's default: longer than a computation's window may be
        list(channel.search_logs())
    except Exception as exc:
        out["all_time"] = str(exc)
    print("RESULT" + json.dumps(out))
    """
)


def _lines(t0: int) -> list[tuple[int, str, dict[str, str]]]:
    """450 lines 10 ms apart (over two of the SDK's 200-line pages): every seventh an ERROR."""
    out = []
    for i in range(450):
        if i % 7 == 0:
            message = f"ERROR disk {'full' if i % 2 else 'slow'} on node {i}"
        else:
            message = f"request {i} ok (errors: none)" if i % 5 else f"retry {i}: Error-prone path"
        out.append((t0 + i * MS * 10, message, {"i": str(i)}))
    return out


def test_search_logs_through_the_sdk(secured: ServerProcess, tmp_path: Path) -> None:
    assert NOMINAL_PYTHON.exists(), "the nominal SDK's environment is missing: run `make install`"
    rid = f"ri.sparkwire.test.logs.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 300) * NANOS
    lines = _lines(t0)
    r = httpx.post(
        f"{secured.base_url}/storage/writer/v1/logs/{rid}",
        content=logs_body(lines, channel="app.log"),
        headers={"Content-Type": "application/json", "Authorization": TOKEN},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    script = tmp_path / "search_logs_with_nominal.py"
    script.write_text(SDK_SCRIPT)
    done = subprocess.run(
        [
            str(NOMINAL_PYTHON),
            str(script),
            secured.base_url,
            TOKEN.removeprefix("Bearer "),
            rid,
            str(t0),
            str(t0 + 60 * NANOS),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got: Json = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("RESULT"))[6:])
    assert got["type"] == "ChannelDataType.LOG"

    def written(keep: Any) -> list[list[Any]]:
        return [[t, m, a] for t, m, a in lines if keep(m)]

    assert got["regex"] == written(lambda m: re.search("disk (full|slow)", m))
    # a whole token, in any case: "ERROR" and "Error-prone", not "errors:"
    token = written(lambda m: re.search(r"(?<![A-Za-z0-9])error(?![A-Za-z0-9])", m, re.IGNORECASE))
    assert got["token"] == token and len(token) > len(written(lambda m: m.startswith("ERROR")))
    assert got["all"] == written(lambda m: True)
    # without a period the SDK asks for all of time, refused by name (SPARKWIRE_MAX_WINDOW_SECONDS)
    assert "Compute:WindowTooLarge" in got["all_time"]


def test_a_log_series_is_answered_in_pages_only(secured: ServerProcess) -> None:
    from conjure_python_client import ConjureHTTPError

    from tests import node_json as n

    t0 = (time.time_ns() // NANOS - 300) * NANOS
    log = n.union(
        "log",
        n.union(
            "channel",
            n.union(
                "dataSource",
                {
                    "dataSourceRid": n.literal("ri.sparkwire.test.logs.none"),
                    "channel": n.literal("app.log"),
                    "tags": {},
                },
            ),
        ),
    )
    node = {"type": "series", "series": {"input": log, "numericAggregations": {}}}
    with pytest.raises(ConjureHTTPError) as refused:
        service(secured.base_url).compute(TOKEN, request(node, t0, t0 + NANOS))
    assert refused.value.error_name == "Compute:InvalidComputation"
    assert refused.value.parameters.get("field") == "summarizationStrategy"
