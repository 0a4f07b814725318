"""`sparkwire demo`: a synthetic telemetry feed for a running server, so a new user sees live data.

A few vehicles (tag `vehicle`), each with engine temperature, engine speed, battery voltage, road
speed (double channels) and a drive mode (a string channel). Values follow slow trends with sensor
noise and rare spikes, and a small share of points is sent late (after newer ones, with their
original timestamps), as radios and buffers do in the field.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field

import httpx

logger = logging.getLogger(__name__)

DEFAULT_RID = "ri.sparkwire.main.dataset.demo"
WRITER_PATH = "/storage/writer/v1"
NANOS = 1_000_000_000
MODES = ("PARK", "DRIVE", "NEUTRAL", "REVERSE")
NUMERIC_CHANNELS = ("engine.temp", "engine.rpm", "battery.voltage", "speed")
STOP_WITH_POLL_SECONDS = 0.5
STRING_CHANNEL = "drive.mode"


@dataclass
class DemoConfig:
    url: str = "http://127.0.0.1:8000"
    data_source_rid: str = DEFAULT_RID
    vehicles: int = 3
    rate: float = 20.0  # points per second per series
    duration: float | None = None  # seconds; None runs until stopped
    late_fraction: float = 0.02
    seed: int | None = None
    wait_for_server: float = 180.0
    stop_with: int | None = None  # a process id: the demo stops when that process has ended


@dataclass
class Vehicle:
    """One vehicle's signals: slow trends, sensor noise, rare spikes."""

    name: str
    rng: random.Random
    phase: float = 0.0
    speed: float = 0.0
    mode: str = "PARK"
    spikes: dict[str, float] = field(default_factory=dict)

    def sample(self, t: float) -> dict[str, float | str]:
        rng = self.rng
        if rng.random() < 0.004:  # the driver changes mode now and then
            self.mode = rng.choice(MODES)
        target = {"PARK": 0.0, "NEUTRAL": self.speed * 0.98, "REVERSE": 8.0}.get(self.mode, 90.0)
        self.speed = max(0.0, self.speed + 0.02 * (target - self.speed) + rng.gauss(0, 0.4))
        load = self.speed / 130
        values: dict[str, float | str] = {
            "engine.temp": 82
            + 8 * load
            + 2 * math.sin(2 * math.pi * t / 90 + self.phase)
            + rng.gauss(0, 0.15),
            "engine.rpm": 800
            + 2600 * load
            + 150 * math.sin(2 * math.pi * t / 7 + self.phase)
            + rng.gauss(0, 25),
            "battery.voltage": 12.7 - 0.4 * load - 0.0004 * (t % 900) + rng.gauss(0, 0.01),
            "speed": self.speed,
            STRING_CHANNEL: self.mode,
        }
        if rng.random() < 0.002:  # a sensor glitch: one reading well off the trend
            channel = rng.choice(NUMERIC_CHANNELS)
            values[channel] = float(values[channel]) * rng.choice((0.85, 1.15))
        return values


class WriteError(Exception):
    """The server refused a write (its answer is in the message)."""


class DemoWriter:
    """The demo's points, one `POST /storage/writer/v1` per tick, over httpx (a server dependency):
    the demo runs from the server's distribution alone, without sparkwire_client (client/)."""

    def __init__(self, http: httpx.AsyncClient, data_source_rid: str) -> None:
        self.http = http
        self.data_source_rid = data_source_rid
        self.buffer: dict[tuple[str, str, str], list[dict[str, object]]] = {}
        self.requests_sent = 0

    def add(self, channel: str, ts: int, value: float | str, vehicle: str) -> None:
        kind = "string" if isinstance(value, str) else "double"
        timestamp = {"seconds": ts // NANOS, "nanos": ts % NANOS}
        point: dict[str, object] = {"timestamp": timestamp, "value": value}
        self.buffer.setdefault((channel, vehicle, kind), []).append(point)

    async def flush(self) -> None:
        buffer, self.buffer = self.buffer, {}
        if not buffer:
            return
        batches = [
            {"channel": channel, "tags": {"vehicle": vehicle}, "points": {"type": kind, kind: points}}
            for (channel, vehicle, kind), points in buffer.items()
        ]
        answer = await self.http.post(
            WRITER_PATH, json={"dataSourceRid": self.data_source_rid, "batches": batches}
        )
        self.requests_sent += 1
        if answer.status_code != 200:
            raise WriteError(f"write refused ({answer.status_code}): {answer.text}")


@dataclass
class DemoStats:
    points: int = 0
    late_points: int = 0
    requests: int = 0


class NoServer(Exception):
    """No server answered within the demo's wait (the message says where it looked)."""


async def wait_for_server(url: str, timeout: float) -> None:
    """Until `url` answers /healthz; one line says so if it does not at once, then it retries quietly."""
    deadline = time.monotonic() + timeout
    said = False
    async with httpx.AsyncClient(base_url=url, timeout=2) as http:
        while True:
            try:
                if (await http.get("/healthz")).status_code == 200:
                    if said:
                        logger.info("demo feed: the server at %s answers", url)
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise NoServer(
                    f"demo feed: no Sparkwire server answered at {url} within {timeout:.0f}s; "
                    "start one (sparkwire serve) or give its address with --url"
                )
            if not said:
                logger.info("demo feed: waiting for the Sparkwire server at %s (up to %.0fs)", url, timeout)
                said = True
            await asyncio.sleep(0.5)


class ProcessWatch:
    """Whether a process has ended. When it is the demo's parent (make run's server is: the shell
    that started the demo becomes the server with `exec`), it counts as ended as soon as the demo
    is handed to another parent, before whoever started it has reaped it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.was_parent = os.getppid() == pid

    def ended(self) -> bool:
        if self.was_parent and os.getppid() != self.pid:
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # someone else's process: it is there
            return False
        return False


async def run_until_ended(config: DemoConfig) -> DemoStats | None:
    """The demo; with `config.stop_with`, stopped (with one line) once that process has ended."""
    feed = asyncio.ensure_future(run_demo(config))
    if config.stop_with is None:
        return await feed
    pid, watch = config.stop_with, ProcessWatch(config.stop_with)
    while not feed.done():
        await asyncio.wait({feed}, timeout=STOP_WITH_POLL_SECONDS)
        if not feed.done() and watch.ended():
            logger.info("demo feed: process %d (the server) has ended; the demo stops too", pid)
            feed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feed
            return None
    return feed.result()


async def run_demo(config: DemoConfig) -> DemoStats:
    rng = random.Random(config.seed)
    vehicles = [
        Vehicle(f"a{i + 1}", random.Random(rng.random()), phase=rng.uniform(0, math.tau))
        for i in range(config.vehicles)
    ]
    await wait_for_server(config.url, config.wait_for_server)
    logger.info(
        "demo feed: %d vehicle(s) x %d channels at %.0f Hz into %s (data source %s)",
        len(vehicles),
        len(NUMERIC_CHANNELS) + 1,
        config.rate,
        config.url,
        config.data_source_rid,
    )
    stats = DemoStats()
    tick = 1.0 / config.rate
    held: list[tuple[float, str, str, int, float | str]] = []  # late points: (release, vehicle, ...)
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=config.url, timeout=30) as http:
        writer = DemoWriter(http, config.data_source_rid)
        next_tick = started
        while config.duration is None or time.monotonic() - started < config.duration:
            now_ns = time.time_ns()
            try:
                for vehicle in vehicles:
                    for channel, value in vehicle.sample(now_ns / 1e9).items():
                        if rng.random() < config.late_fraction:
                            release = time.monotonic() + rng.uniform(0.05, 2.0)
                            held.append((release, vehicle.name, channel, now_ns, value))
                            continue
                        writer.add(channel, now_ns, value, vehicle.name)
                        stats.points += 1
                due = [h for h in held if h[0] <= time.monotonic()]
                for item in due:
                    held.remove(item)
                    _, name, channel, ts, value = item
                    writer.add(channel, ts, value, name)
                    stats.points += 1
                    stats.late_points += 1
                await writer.flush()
            except (httpx.HTTPError, OSError, WriteError) as exc:  # e.g. the server restarts: wait for it
                logger.warning("demo feed: write failed (%s); waiting for the server", exc)
                await wait_for_server(config.url, config.wait_for_server)
                next_tick = time.monotonic()
            next_tick += tick
            await asyncio.sleep(max(0.0, next_tick - time.monotonic()))
        for _, name, channel, ts, value in held:  # what is still held goes out late at the end
            writer.add(channel, ts, value, name)
            stats.points += 1
            stats.late_points += 1
        await writer.flush()
    stats.requests = writer.requests_sent
    logger.info(
        "demo feed stopped: %d points (%d late) in %d requests",
        stats.points,
        stats.late_points,
        stats.requests,
    )
    return stats


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = DemoConfig()
    parser.add_argument("--url", default=defaults.url, help="the server's base URL")
    parser.add_argument("--data-source-rid", default=defaults.data_source_rid, help="data source to write to")
    parser.add_argument(
        "--vehicles", type=int, default=defaults.vehicles, help="how many vehicles (tag values)"
    )
    parser.add_argument("--rate", type=float, default=defaults.rate, help="points per second per series")
    parser.add_argument(
        "--duration", type=float, default=None, help="seconds to run (default: until stopped)"
    )
    parser.add_argument("--late-fraction", type=float, default=defaults.late_fraction, help="share sent late")
    parser.add_argument("--seed", type=int, default=None, help="random seed, for a repeatable feed")
    parser.add_argument(
        "--wait",
        type=float,
        default=defaults.wait_for_server,
        help="seconds to wait for the server (at start, and after it went away) before giving up",
    )
    parser.add_argument(
        "--stop-with",
        type=int,
        default=None,
        metavar="PID",
        help="stop when process PID ends (make run: the server the demo feeds)",
    )


def run(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise here
    config = DemoConfig(
        url=args.url,
        data_source_rid=args.data_source_rid,
        vehicles=args.vehicles,
        rate=args.rate,
        duration=args.duration,
        late_fraction=args.late_fraction,
        seed=args.seed,
        wait_for_server=args.wait,
        stop_with=args.stop_with,
    )
    try:
        asyncio.run(run_until_ended(config))
    except KeyboardInterrupt:  # Ctrl+C: the feed simply stops
        pass
    except NoServer as exc:
        logger.error("%s", exc)
        sys.exit(1)
