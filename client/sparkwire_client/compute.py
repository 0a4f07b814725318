"""A computation over a past period, asked of Nominal's ComputeService (`POST /compute/v2/compute`)
instead of subscribed to: the answer is the whole result at once, as a `View` (and a DataFrame with
`compute_frame`). It computes what Nominal only polls too (spectra, curve fits, LTTB, running sums).

    frame = await compute_frame(base_url, series(numeric_channel(rid, "temp"), buckets=100), start, end)
"""

from __future__ import annotations

import asyncio
import datetime
import json
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from sparkwire_client.nodes import Computable
from sparkwire_client.view import View

if TYPE_CHECKING:
    import pandas as pd

Json = dict[str, Any]
When = datetime.datetime | float  # a datetime, or seconds since the Unix epoch


class ComputeError(Exception):
    """The server refused the computation: `name` is its Conjure error name (e.g.
    `Compute:PollingOnlyComputation`), `params` its parameters."""

    def __init__(self, status: int, body: Json) -> None:
        self.status = status
        self.name = str(body.get("errorName", "")) or f"HTTP {status}"
        self.params: Json = body.get("parameters") or {}
        super().__init__(f"{self.name}: {body.get('message') or self.params or status}")


def _timestamp(when: When) -> Json:
    seconds = when.timestamp() if isinstance(when, datetime.datetime) else float(when)
    ns = round(seconds * 1e9)
    return {"seconds": ns // 1_000_000_000, "nanos": ns % 1_000_000_000}


def _seconds(when: When) -> float:
    return when.timestamp() if isinstance(when, datetime.datetime) else float(when)


def http_base(url: str) -> str:
    """The server's HTTP base from any of its URLs (ws:// or http://, with or without a path)."""
    if url.startswith("ws"):
        url = "http" + url[2:]
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


async def compute(
    url: str, node: Computable, start: When, end: When, *, token: str | None = None, timeout: float = 120.0
) -> View:
    """`node` over [start, end), computed once by the server: its result as a View (rows(),
    to_pandas()). Raises ComputeError with the server's error name when it refuses."""
    request = node.request(max(_seconds(end) - _seconds(start), 0.0))
    body = {
        "node": request["node"],
        "start": _timestamp(start),
        "end": _timestamp(end),
        "context": request["context"],
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"

    def post() -> Json:
        sent = urllib.request.Request(
            f"{http_base(url)}/compute/v2/compute", json.dumps(body).encode(), headers, method="POST"
        )
        try:
            with urllib.request.urlopen(sent, timeout=timeout) as answer:
                result: Json = json.loads(answer.read())
                return result
        except urllib.error.HTTPError as refused:
            try:
                error = json.loads(refused.read())
            except ValueError:
                error = {}
            raise ComputeError(refused.code, error if isinstance(error, dict) else {}) from None

    result = await asyncio.to_thread(post)
    view = View(window_ns=round((_seconds(end) - _seconds(start)) * 1e9))
    view.apply_full(result)
    return view


async def compute_frame(
    url: str, node: Computable, start: When, end: When, *, token: str | None = None, timeout: float = 120.0
) -> pd.DataFrame:
    """`compute(...)`'s View as a DataFrame (needs the `pandas` extra)."""
    return (await compute(url, node, start, end, token=token, timeout=timeout)).to_pandas()
