"""A server of its own for the ingest limit tests: small limits (so a test reaches each with a small
request), a tokens file (so 401 and 403 can be seen), one process for the whole run. Import the
`limited` fixture into a test module to use it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServerProcess, start_server

TOKEN = "ingest-limits-token"
RID_PREFIX = "ri.limits."
LIMITS = {
    "max_request_bytes": 1 << 20,
    "max_points_per_request": 1000,
    "max_tags_per_series": 4,
    "max_tag_key_length": 16,
    "max_tag_value_length": 32,
    "max_channel_length": 32,
    "max_data_source_rid_length": 48,
}


@pytest.fixture(scope="session")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("limited")
    tokens = base / "tokens.json"
    tokens.write_text(
        json.dumps({"tokens": [{"token": TOKEN, "sub": "w", "dataSourceRids": [RID_PREFIX + "*"]}]})
    )
    env = {f"SPARKWIRE_{name.upper()}": str(value) for name, value in LIMITS.items()}
    proc = start_server(base / "data", base / "server.log", env={**env, "SPARKWIRE_TOKENS_FILE": str(tokens)})
    yield proc
    proc.stop()


def authorized() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def limited_rid(name: str) -> str:
    return f"{RID_PREFIX}{name}.{time.time_ns() % 10**12}"


def series_of(server: ServerProcess, rid: str) -> list[dict[str, Any]]:
    """The series the server's catalog lists for this data source (GET /series)."""
    listed = httpx.get(f"{server.base_url}/series", headers=authorized(), timeout=30).json()  # auth is on
    return [s for s in listed if s["dataSourceRid"] == rid]


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(field)


def reset_peak_rss(pid: int) -> None:
    """Start VmHWM (peak RSS) over from the current RSS (proc(5): clear_refs, value 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
