"""A batching writer for `POST /storage/writer/v1`.

    async with Writer("http://127.0.0.1:8000", "ri.demo") as writer:
        writer.add("engine.temp", time.time_ns(), 21.5, tags={"vehicle": "a1"})

Points are buffered and sent in one request when `max_points` are waiting or `max_delay` seconds
after the first of them, whichever comes first; `flush()` sends at once and returns when the server
has made them durable. Requests go out one at a time, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

NANOS = 1_000_000_000
WRITER_PATH = "/storage/writer/v1"
SeriesId = tuple[str, tuple[tuple[str, str], ...], str]  # channel, tags, point type


class WriteError(Exception):
    """The server refused a request (400 with a SerializableError): none of its points were stored."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"write refused ({status}): {body}")
        self.status = status
        self.body = body


def to_nanos(timestamp: int | float | datetime.datetime) -> int:
    """int: nanoseconds since the epoch; float: seconds; datetime: aware, or naive meaning UTC."""
    if isinstance(timestamp, datetime.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=datetime.UTC)
        delta = timestamp - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
        return (delta.days * 86_400 + delta.seconds) * NANOS + delta.microseconds * 1000
    if isinstance(timestamp, float):
        return round(timestamp * NANOS)
    return int(timestamp)


class Writer:
    def __init__(
        self,
        base_url: str,
        data_source_rid: str,
        *,
        max_points: int = 5_000,
        max_delay: float = 0.05,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.data_source_rid = data_source_rid
        self.max_points = max_points
        self.max_delay = max_delay
        self._http = client or httpx.AsyncClient(base_url=base_url, timeout=30)
        self._owns_http = client is None
        self._buffer: dict[SeriesId, list[Any]] = {}
        self._buffered = 0
        self._send_lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None
        self.points_written = 0
        self.requests_sent = 0

    async def __aenter__(self) -> Writer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def add(
        self,
        channel: str,
        timestamp: int | float | datetime.datetime,
        value: float | str,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """Buffer one point (a str value makes a string/enum channel)."""
        self._raise_failure()
        kind = "string" if isinstance(value, str) else "double"
        key = (channel, tuple(sorted((tags or {}).items())), kind)
        ns = to_nanos(timestamp)
        point = {"timestamp": {"seconds": ns // NANOS, "nanos": ns % NANOS}, "value": value}
        self._buffer.setdefault(key, []).append(point)
        self._buffered += 1
        if self._buffered >= self.max_points:
            self._send_in_background()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.max_delay, self._send_in_background)

    def _take(self) -> dict[SeriesId, list[Any]]:
        """Everything buffered so far, as one request's worth; the buffer starts anew."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        buffer, self._buffer, self._buffered = self._buffer, {}, 0
        return buffer

    def _send_in_background(self) -> None:
        task = asyncio.create_task(self._send_quietly(self._take()))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _send_quietly(self, buffer: dict[SeriesId, list[Any]]) -> None:
        try:
            await self._send(buffer)
        except Exception as exc:  # surfaces at the next add() or flush()
            self._failure = exc

    async def _send(self, buffer: dict[SeriesId, list[Any]]) -> None:
        async with self._send_lock:  # one request at a time, in the order they were taken
            if buffer:
                await self._post(buffer)

    async def flush(self) -> None:
        """Send what is buffered; returns once the server has made everything added so far durable."""
        self._raise_failure()
        buffer = self._take()
        if self._background:
            await asyncio.gather(*self._background)
        self._raise_failure()
        await self._send(buffer)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    async def _post(self, buffer: dict[SeriesId, list[Any]]) -> None:
        batches = [
            {"channel": channel, "tags": dict(tags), "points": {"type": kind, kind: points}}
            for (channel, tags, kind), points in buffer.items()
        ]
        body = orjson.dumps({"dataSourceRid": self.data_source_rid, "batches": batches})
        response = await self._http.post(
            WRITER_PATH, content=body, headers={"content-type": "application/json"}
        )
        self.requests_sent += 1
        if response.status_code != 200:
            raise WriteError(response.status_code, response.text)
        self.points_written += sum(len(p) for p in buffer.values())

    async def close(self) -> None:
        try:
            await self.flush()
        finally:
            if self._owns_http:
                with contextlib.suppress(Exception):
                    await self._http.aclose()
