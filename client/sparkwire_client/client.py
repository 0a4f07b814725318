"""An asyncio client of Sparkwire's persistent-compute WebSocket.

    async with Client("http://127.0.0.1:8000") as client:
        sub = await client.subscribe(series(numeric_channel("ri.demo", "engine.temp")), window=60)
        async for view in sub:
            print(view.to_pandas().tail())

It answers the server's pings, reconnects with exponential backoff when a connection drops, and on
`shutdownNotice` hands over as the protocol recommends: it opens a new connection, subscribes there
again, and each subscription switches to the new connection once that one has delivered its
FullResult; the old connection is closed when every subscription has switched.

It asks Sparkwire for its extensions (docs/extensions.md) unless told not to: each subscription
keeps the newest resume token and presents it when it subscribes again after a reconnect, so the
server answers with only what changed meanwhile (an AppendResult) when it can; and it keeps the
server's late-point reports (`Subscription.late`). `subscribe(..., replay=Replay(...))` re-watches
a past period from the server's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import itertools
import json
import logging
import random
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import websockets

from sparkwire_client.catalog_hint import channels_read, empty_hint, http_base, listed_series
from sparkwire_client.nodes import Computable, Json
from sparkwire_client.view import View

logger = logging.getLogger(__name__)
WS_PATH = "/persistent-compute/ws"


class SubscriptionError(Exception):
    """The server refused a subscription or reported an error for it (a SerializableError)."""

    def __init__(self, error: Json) -> None:
        super().__init__(f"{error.get('name')}: {error.get('message')}")
        self.error = error
        self.name: str = error.get("name", "")


def ws_url(url: str) -> str:
    """`http://host:port`, `ws://host:port` or a full WebSocket URL -> the protocol's WebSocket URL."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    path = parts.path if parts.path not in ("", "/") else WS_PATH
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


def _now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Replay:
    """Re-watch `[start, end)` of a subscription's series from the server's log (datetimes, or Unix
    seconds: a float holds about a microsecond): first the window ending at `start`, then appends
    as replay time advances, `speed` times real time (None: as fast as the server goes); at `end`,
    `then` "stop" or follow "live"."""

    start: datetime.datetime | float
    end: datetime.datetime | float
    speed: float | None = None
    then: Literal["stop", "live"] = "stop"

    def request(self) -> Json:
        replay: Json = {"start": _timestamp(self.start), "end": _timestamp(self.end), "then": self.then}
        if self.speed is not None:
            replay["speed"] = self.speed
        return replay


def _timestamp(when: datetime.datetime | float) -> Json:
    seconds = when.timestamp() if isinstance(when, datetime.datetime) else float(when)
    ns = round(seconds * 1e9)
    return {"seconds": ns // 1_000_000_000, "nanos": ns % 1_000_000_000}


@dataclass(frozen=True)
class LateReport:
    """Points the server left out of this subscription's results because they arrived later than
    its allowed lateness (they are kept in the log), since it subscribed."""

    dropped_points: int
    newest_dropped_ns: int | None


# Errors that say the server cannot compute for now (the compute tier is away, or Spark's query is
# restarting), not that the subscription is wrong: the server keeps it and sends a fresh FullResult
# when it can compute again, so the subscription stays (`Subscription.healthy` says which it is).
TRANSIENT_ERRORS = frozenset({"PersistentCompute:JobInvalidState"})
CATALOG_FRESH = 5.0  # seconds a catalog read explains the empty views of other subscriptions too


class Subscription:
    """One subscription: its merged view, updated as frames arrive; iterate to follow it.

    Iterating ends after a replay's period with `then="stop"`. A transient error (the compute tier
    or Spark's query is away: `TRANSIENT_ERRORS`) does not end it: `healthy` turns False and
    `outage` holds the error until the next FullResult; `healthy_changed` is set at each change.

    When the first FullResult is empty, `notice` says why, as the dashboard does (a data source,
    channel or tag never written, and the ones that were, from the server's catalog), is logged as
    a warning, and the view is yielded again with it; it is cleared when points arrive."""

    def __init__(self, client: Client, sub_id: str, request: Json, window_ns: int) -> None:
        self.client = client
        self.id = sub_id
        self.request = request
        self.view = View(window_ns)
        self.error: SubscriptionError | None = None
        self.link: _Link | None = None  # the connection whose frames this subscription follows
        self.resume_token: str | None = None  # the newest, presented when subscribing again
        self.resume_outcome: Json | None = None  # the server's answer to the last token presented
        self.late: LateReport | None = None
        self.replay_ended: str | None = None  # a replay's period is over: "stop" or "live"
        self.healthy = True  # False from a transient error until the next FullResult
        self.outage: SubscriptionError | None = None  # that transient error, while it lasts
        self.healthy_changed = asyncio.Event()  # set at each change of `healthy` (clear it to wait again)
        self.notice: str | None = None  # why the view is empty (catalog_hint.py), while it is
        self._explained = False  # whether the first FullResult was looked at for a notice
        self._explaining: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()
        self._version = 0
        self._view_version = 0  # updates that changed the view

    def subscribe_request(self) -> Json | None:
        """The request to send (again): with the newest resume token, if there is one; a replay
        that went live follows live; one that stopped is not sent again (None)."""
        extensions = dict(self.request.get("sparkwire") or {})
        if self.replay_ended == "stop":
            return None
        if self.replay_ended == "live":
            extensions.pop("replay", None)
        if self.resume_token is not None and "replay" not in extensions:
            extensions["resumeToken"] = self.resume_token
        return {**self.request, "sparkwire": extensions} if extensions else self.request

    async def _updated(self, view_changed: bool = False) -> None:
        async with self._changed:
            self._version += 1
            self._view_version += view_changed
            self._changed.notify_all()

    def _set_healthy(self, healthy: bool, outage: SubscriptionError | None = None) -> None:
        if healthy != self.healthy:
            logger.info(
                "subscription %s: %s",
                self.id,
                "recovered" if healthy else f"waiting for the server ({outage})",
            )
            self.healthy_changed.set()
        self.healthy, self.outage = healthy, outage

    @property
    def version(self) -> int:
        """How many updates (or errors) this subscription has seen."""
        return self._version

    async def wait_for(self, predicate: Callable[[View], bool], timeout: float | None = None) -> View:
        """The first view (the current one included) for which `predicate` holds."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            seen, view = self._version, self.view.snapshot()
            if self.error is not None:
                raise self.error
            if predicate(view):
                return view
            await self.next(None if deadline is None else max(0.0, deadline - loop.time()), after=seen)

    async def next(self, timeout: float | None = None, after: int | None = None) -> View:
        """The view once an update newer than `after` (default: the current one) has arrived."""
        seen = self._version if after is None else after
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self._version > seen or self.error), timeout
            )
        if self.error is not None:
            raise self.error
        return self.view.snapshot()

    async def __aiter__(self) -> AsyncIterator[View]:
        """The merged view after each update (a slow reader skips to the newest), until a replay
        with `then="stop"` has ended. A transient outage yields the unchanged view once with
        `healthy` False; the next FullResult comes with `healthy` True again."""
        seen, yielded, health, notice = 0, 0, True, None
        while True:
            if self.replay_ended == "stop" and self._view_version == yielded:
                return
            view = await self.next(after=seen)
            seen = self._version
            if self._view_version == yielded and self.healthy == health and self.notice == notice:
                continue  # nothing to show: a late report, a replay's end
            yielded, health, notice = self._view_version, self.healthy, self.notice
            yield view

    async def dataframes(self) -> AsyncIterator[Any]:
        """`View.to_pandas()` after each update (needs the `pandas` extra)."""
        async for view in self:
            yield view.to_pandas()

    async def unsubscribe(self) -> None:
        await self.client.unsubscribe(self)

    def _look_at_view(self, full: bool) -> None:
        """After an update: explain an empty first FullResult (in the background: it reads the
        catalog over HTTP), and drop a notice once points arrive."""
        if self.notice is not None and self.view.rows():
            self.notice = None
        if full and not self._explained and self.client.explain_empty:
            self._explained = True
            if not self.view.rows():
                self._explaining = asyncio.create_task(
                    self._explain_empty(), name=f"sparkwire-hint-{self.id}"
                )

    async def _explain_empty(self) -> None:
        listed = await self.client._catalog()
        if self.view.rows() or self.error is not None:
            return  # points arrived meanwhile
        window = self.view.window_ns / 1e9
        if listed is None:
            self.notice = f"No points in the last {window:g} s (the catalog, GET /series, could not be read)."
        else:
            self.notice = empty_hint(channels_read(self.request.get("computeRequest")), listed, window)
        logger.warning("subscription %s: %s", self.id, self.notice)
        await self._updated()


class _Link:
    """One WebSocket connection and the task reading it."""

    def __init__(self, generation: int, ws: websockets.ClientConnection, handover: bool) -> None:
        self.generation = generation
        self.ws = ws
        self.reader: asyncio.Task[None] | None = None
        # Opened to hand over from a server that announced its shutdown. If this one announces
        # it too (no other server behind the address), the client stays on it until it closes and
        # then reconnects with backoff, rather than handing over in a loop.
        self.handover = handover

    async def send(self, message: Json) -> None:
        await self.ws.send(json.dumps(message, separators=(",", ":"), ensure_ascii=False))


class Client:
    def __init__(
        self,
        url: str,
        *,
        backoff_initial: float = 0.25,
        backoff_max: float = 10.0,
        keepalive_interval: float | None = 20.0,
        handover_timeout: float = 30.0,
        extensions: bool = True,
        explain_empty: bool = True,
    ) -> None:
        """`extensions=False` asks for nothing beyond Nominal's protocol (no resume tokens, no
        late-point reports), as for a server that is not Sparkwire. `explain_empty=False`: no
        catalog read for a subscription whose first view is empty (`Subscription.notice`)."""
        self.url = ws_url(url)
        self.extensions = extensions
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.keepalive_interval = keepalive_interval
        self.handover_timeout = handover_timeout
        self.subscriptions: dict[str, Subscription] = {}
        self.state = "new"  # new, open, reconnecting, handing-over, closed
        self.connections_opened = 0
        self.pings_answered = 0
        self._generations = itertools.count(1)
        self._link: _Link | None = None  # the newest connection: new subscriptions go there
        self._links: set[_Link] = set()
        self._pongs: dict[str, asyncio.Future[None]] = {}
        self._replacing: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False
        self.explain_empty = explain_empty
        # GET /series, read once for every subscription explained within CATALOG_FRESH seconds
        self._catalog_read: asyncio.Task[list[Json] | None] | None = None
        self._catalog_at = 0.0

    # -- lifecycle ---------------------------------------------------------------------------------
    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        self._link = await self._open(handover=False)
        self.state = "open"

    async def close(self) -> None:
        self._closed = True
        self.state = "closed"
        if self._replacing is not None:
            self._replacing.cancel()
        for sub in self.subscriptions.values():
            if sub._explaining is not None:
                sub._explaining.cancel()
        if self._catalog_read is not None:
            self._catalog_read.cancel()
        for link in list(self._links):
            await self._drop(link)

    async def _open(self, handover: bool) -> _Link:
        ws = await websockets.connect(
            self.url, max_size=None, ping_interval=self.keepalive_interval, open_timeout=10
        )
        link = _Link(next(self._generations), ws, handover)
        self._links.add(link)
        self.connections_opened += 1
        link.reader = asyncio.create_task(self._read(link), name=f"sparkwire-read-{link.generation}")
        return link

    async def _drop(self, link: _Link) -> None:
        self._links.discard(link)
        with contextlib.suppress(Exception):
            await link.ws.close()
        if link.reader is not None and link.reader is not asyncio.current_task():
            link.reader.cancel()

    async def _catalog(self) -> list[Json] | None:
        """The server's catalog (GET /series), one request shared by the subscriptions that ask
        within CATALOG_FRESH seconds of each other (a client subscribing to many empty channels
        reads it once, not once each)."""
        now = asyncio.get_running_loop().time()
        if self._catalog_read is None or now - self._catalog_at > CATALOG_FRESH:
            self._catalog_read = asyncio.create_task(listed_series(http_base(self.url)))
            self._catalog_at = now
        return await asyncio.shield(self._catalog_read)

    # -- subscriptions -----------------------------------------------------------------------------
    async def subscribe(
        self,
        node: Computable,
        window: float | datetime.timedelta,
        *,
        min_delay_ms: int = 0,
        allowed_lateness: float | None = None,
        subscription_id: str | None = None,
        replay: Replay | None = None,
        stream_polled: bool = False,
    ) -> Subscription:
        """Subscribe to `node` over a window of `window` seconds; returns at once (the first
        FullResult arrives through the subscription). With `replay`, a past period instead (needs
        a Sparkwire server). With `stream_polled`, a node Nominal only polls that Sparkwire can
        stream exactly (a signal filter, a frequency-domain spectrum, an LTTB series or
        summarization strategy, a curve fit) streams live instead of being refused
        (`sparkwire.streamPolled`, docs/extensions.md; needs a Sparkwire server)."""
        seconds = window.total_seconds() if isinstance(window, datetime.timedelta) else float(window)
        options: Json = {"minDelay": int(min_delay_ms), "allowAppends": True}
        if allowed_lateness is not None:
            late = round(allowed_lateness * 1e9)
            options["allowedLateness"] = {"seconds": late // 1_000_000_000, "nanos": late % 1_000_000_000}
        request: Json = {"computeRequest": node.request(seconds), "subscriptionOptions": options}
        if self.extensions:
            request["sparkwire"] = {"resume": True, "lateReports": True}
        if replay is not None:
            request["sparkwire"] = {**request.get("sparkwire", {}), "replay": replay.request()}
        if stream_polled:
            request["sparkwire"] = {**request.get("sparkwire", {}), "streamPolled": True}
        sub = Subscription(self, subscription_id or str(uuid.uuid4()), request, round(seconds * 1e9))
        self.subscriptions[sub.id] = sub
        link = self._require_link()
        sub.link = link
        await link.send({"type": "subscribe", "subscribe": {sub.id: request}})
        return sub

    async def unsubscribe(self, sub: Subscription) -> None:
        self.subscriptions.pop(sub.id, None)
        for link in list(self._links):
            with contextlib.suppress(Exception):
                await link.send({"type": "unsubscribe", "unsubscribe": [sub.id]})

    async def ping(self, timeout: float = 10.0) -> float:
        """A protocol ping; returns the round trip in seconds."""
        link = self._require_link()
        sent_at = _now_iso()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pongs[sent_at] = future
        started = asyncio.get_running_loop().time()
        try:
            await link.send({"type": "ping", "ping": {"sentAt": sent_at}})
            await asyncio.wait_for(future, timeout)
        finally:
            self._pongs.pop(sent_at, None)
        return asyncio.get_running_loop().time() - started

    def _require_link(self) -> _Link:
        if self._link is None or self._closed:
            raise RuntimeError("not connected")
        return self._link

    # -- reading -----------------------------------------------------------------------------------
    async def _read(self, link: _Link) -> None:
        try:
            async for raw in link.ws:
                await self._dispatch(link, json.loads(raw))
        except websockets.ConnectionClosed:
            pass
        except Exception:
            logger.exception("connection %d: reading failed", link.generation)
        finally:
            self._links.discard(link)
            if link is self._link and not self._closed:
                self._replace(reason="connection lost")

    async def _dispatch(self, link: _Link, frame: Json) -> None:
        kind = frame["type"]
        if kind == "subscriptionUpdate":
            body = frame["subscriptionUpdate"]
            sub = self.subscriptions.get(body["subscriptionId"])
            if sub is not None:
                await self._on_update(link, sub, body)
        elif kind == "subscriptionCreation":
            body = frame["subscriptionCreation"]
            sub = self.subscriptions.get(body["subscriptionId"])
            creation = body["creation"]
            following = sub is not None and (link is sub.link or link is self._link)
            if sub is not None and following and creation["type"] == "error":
                sub.error = SubscriptionError(creation["error"]["serializableError"])
                await sub._updated()
        elif kind == "health":
            await self._on_health(link, frame["health"])
        elif kind == "replayEnded":
            ended = frame["replayEnded"]
            sub = self.subscriptions.get(ended["subscriptionId"])
            if sub is not None:
                sub.replay_ended = ended["then"]
                await sub._updated()
        elif kind == "lateReport":
            report = frame["lateReport"]
            sub = self.subscriptions.get(report["subscriptionId"])
            if sub is not None:
                newest = report.get("newestDroppedTimestamp")
                newest_ns = None if newest is None else newest["seconds"] * 1_000_000_000 + newest["nanos"]
                sub.late = LateReport(report["droppedPoints"], newest_ns)
                await sub._updated()

    async def _on_update(self, link: _Link, sub: Subscription, body: Json) -> None:
        update = body["update"]
        if link is not sub.link:
            # A newer connection takes a subscription over with its first FullResult (or error),
            # or with the AppendResult that resumes the view from the token it presented.
            resumed = body.get("resume", {}).get("outcome") == "resumed"
            if link is not self._link or (update["type"] == "append" and not resumed):
                return
            sub.link = link
            self._retire_if_unused()
        if "resume" in body:
            sub.resume_outcome = body["resume"]
        if "resumeToken" in body:
            sub.resume_token = body["resumeToken"]
        if update["type"] == "error":
            error = SubscriptionError(update["error"]["serializableError"])
            if error.name in TRANSIENT_ERRORS:
                sub._set_healthy(False, error)
            else:
                sub.error = error
            await sub._updated()
            return
        if update["type"] == "full":
            sub._set_healthy(True)
        sub.view.apply(update)
        sub._look_at_view(full=update["type"] == "full")
        await sub._updated(view_changed=True)

    async def _on_health(self, link: _Link, health: Json) -> None:
        kind = health["type"]
        if kind == "ping":
            sent_at = health["ping"]["sentAt"]
            pong = {"pingOriginallySentAt": sent_at, "sentAt": _now_iso()}
            with contextlib.suppress(websockets.ConnectionClosed):
                await link.send({"type": "pong", "pong": pong})
                self.pings_answered += 1
        elif kind == "pong":
            # Matched by the echoed timestamp; a server that reformats it answers the oldest ping.
            future = self._pongs.get(health["pong"]["pingOriginallySentAt"])
            waiting = [f for f in self._pongs.values() if not f.done()]
            if (future is None or future.done()) and waiting:
                future = waiting[0]
            if future is not None and not future.done():
                future.set_result(None)
        elif kind == "shutdownNotice":
            if link is self._link and not link.handover:
                self._replace(reason="shutdownNotice")
        elif kind == "clientMessageError":
            error = health["clientMessageError"]["error"]
            logger.warning("server refused a message: %s", error.get("message"))

    # -- reconnection and hand-over ----------------------------------------------------------------
    def _replace(self, reason: str) -> None:
        if self._replacing is None or self._replacing.done():
            self._replacing = asyncio.create_task(self._open_replacement(reason))

    async def _open_replacement(self, reason: str) -> None:
        """Open a new connection (retrying with backoff) and subscribe everything there again."""
        handover = reason == "shutdownNotice"
        self.state = "handing-over" if handover else "reconnecting"
        logger.info("opening a new connection: %s", reason)
        delay = self.backoff_initial
        while not self._closed:
            try:
                link = await self._open(handover)
            except Exception as exc:  # refused, reset, timed out, a failed handshake: all retry
                logger.info("connect failed (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self.backoff_max)
                continue
            self._link = link
            self.state = "open"
            requests = {s.id: s.subscribe_request() for s in self.subscriptions.values()}
            subs = {sub_id: request for sub_id, request in requests.items() if request is not None}
            if subs:  # (a stopped replay is not sent again)
                with contextlib.suppress(websockets.ConnectionClosed):
                    await link.send({"type": "subscribe", "subscribe": subs})
            self._retire_if_unused()
            asyncio.get_running_loop().call_later(self.handover_timeout, self._retire_all_but, link)
            return

    def _retire_if_unused(self) -> None:
        """Close older connections that no subscription follows any more."""
        in_use = {s.link for s in self.subscriptions.values()}
        for link in list(self._links):
            if link is not self._link and link not in in_use:
                task = asyncio.create_task(self._drop(link))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

    def _retire_all_but(self, newest: _Link) -> None:
        """After the hand-over timeout, a subscription the new connection never served moves anyway."""
        if newest is not self._link:
            return
        for sub in self.subscriptions.values():
            sub.link = newest
        self._retire_if_unused()
