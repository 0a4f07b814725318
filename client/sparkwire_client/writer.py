"""A batching writer for `POST /storage/writer/v1`.

    async with Writer("http://127.0.0.1:8000", "ri.demo") as writer:
        writer.add("engine.temp", time.time_ns(), 21.5, tags={"vehicle": "a1"})

Points are buffered and sent in one request when `max_points` are waiting or `max_delay` seconds
after the first of them, whichever comes first; `flush()` sends at once and returns when the server
has made them durable. Requests go out one at a time, in order, with the standard library's HTTP
client in a worker thread (the event loop never waits on the network). A request the server refuses
raises `WriteError`; one that cannot reach the server or read its answer raises an `OSError`
(`ConnectionError`, `TimeoutError`, `urllib.error.URLError`), at the next `add()` or `flush()`.
"""

from __future__ import annotations

import asyncio
import datetime
import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

NANOS = 1_000_000_000
WRITER_PATH = "/storage/writer/v1"
SeriesId = tuple[str, tuple[tuple[str, str], ...], str]  # channel, tags, point type


class WriteError(Exception):
    """The server refused a request (400 with a SerializableError): none of its points were stored."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"write refused ({status}): {body}")
        self.status = status
        self.body = body


class HTTPAnswer(Protocol):
    @property
    def status_code(self) -> int: ...
    @property
    def text(self) -> str: ...


class AsyncHTTP(Protocol):
    """What `Writer(client=...)` takes instead of its own HTTP client: anything with this `post`
    that resolves paths against the server's base URL, e.g. an `httpx.AsyncClient(base_url=...)`."""

    async def post(self, url: str, *, content: bytes, headers: dict[str, str]) -> HTTPAnswer: ...


@dataclass(frozen=True)
class _Answer:
    status_code: int
    text: str


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer like any other non-200 (a POST is not silently turned into a GET)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _StdlibHTTP:
    """POSTs with urllib (proxies from the environment, as usual), each in a worker thread."""

    def __init__(self, base_url: str, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_NoRedirects)

    async def post(self, url: str, *, content: bytes, headers: dict[str, str]) -> _Answer:
        return await asyncio.to_thread(self._post, self.base_url + url, content, headers)

    def _post(self, url: str, content: bytes, headers: dict[str, str]) -> _Answer:
        request = urllib.request.Request(url, data=content, headers=headers, method="POST")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return _Answer(response.status, response.read().decode("utf-8", "replace"))
        except urllib.error.HTTPError as answer:  # any status but 2xx: the server's answer
            with answer:
                return _Answer(answer.code, answer.read().decode("utf-8", "replace"))
        except http.client.HTTPException as exc:  # an answer cut short or malformed
            raise ConnectionError(f"POST {url}: {exc!r}") from exc


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
        client: AsyncHTTP | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.data_source_rid = data_source_rid
        self.max_points = max_points
        self.max_delay = max_delay
        self._http: AsyncHTTP = client if client is not None else _StdlibHTTP(base_url, timeout)
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
        request = {"dataSourceRid": self.data_source_rid, "batches": batches}
        body = json.dumps(request, separators=(",", ":"), ensure_ascii=False).encode()
        response = await self._http.post(
            WRITER_PATH, content=body, headers={"content-type": "application/json"}
        )
        self.requests_sent += 1
        if response.status_code != 200:
            raise WriteError(response.status_code, response.text)
        self.points_written += sum(len(p) for p in buffer.values())

    async def close(self) -> None:
        """Flush (a client passed as `client=` stays open: it is the caller's)."""
        await self.flush()
