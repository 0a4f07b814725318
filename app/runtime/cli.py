"""`sparkwire serve` runs the server (embedded defaults: local Spark, SQLite log under ./data);
`sparkwire demo` feeds it synthetic telemetry; `sparkwire tail` prints a live computation."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import logging
import os
import socket
import sys
import time
from pathlib import Path
from types import FrameType

import uvicorn
from pydantic import ValidationError

from app.api.state import ServerState
from app.config import Settings
from app.runtime import demo
from app.runtime.allocator import keep_freed_memory
from app.runtime.data_dir_lock import DataDirLock, DataDirUnavailable
from app.runtime.grpc_front import GrpcFront
from app.runtime.kafka_check import KafkaUnreachable, check_kafka, needs_kafka
from app.runtime.listen import CannotListen, bind_listener
from app.runtime.logging_setup import configure_logging
from app.runtime.redis_check import RedisUnreachable, check_redis, needs_redis
from app.runtime.server import create_app
from app.runtime.shutdown import drain
from app.transport.http_protocol import HeaderLimits, http_protocol_with_read_deadline
from app.transport.preface import preface_sniffing
from app.transport.ws_protocol import websocket_protocol

logger = logging.getLogger("app.runtime.cli")
SPARK_WATCH_SECONDS = 1.0  # how often the server checks that Spark's JVM is still there


class DrainingServer(uvicorn.Server):
    """Uvicorn, except that the first SIGTERM/SIGINT drains connections before the server stops
    (app/runtime/shutdown.py), a second one ends the drain's grace period at once (the clients get their
    1012, Spark is stopped as usual), a third stops the process without waiting for anything, and
    that a Spark JVM gone for good drains it
    too, ending with exit status 1: a query cannot be restarted without its JVM, and a fresh process
    from the service manager (systemd's Restart=on-failure, Kubernetes) can serve again."""

    def __init__(self, config: uvicorn.Config, grpc_front: GrpcFront | None = None) -> None:
        super().__init__(config)
        self.grpc_front = grpc_front  # gRPC on the same port (app/transport/preface.py)
        self._draining: asyncio.Task[None] | None = None
        self._signals = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.exit_status = 0

    async def serve(self, sockets: list | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        watch = self._loop.create_task(self._watch_spark(), name="spark-watch")
        try:
            await super().serve(sockets)
        finally:
            watch.cancel()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        # uvicorn names the address only when it binds it itself; serve() bound it beforehand.
        host, port = self.config.host, self.config.port
        shown = f"[{host}]" if ":" in host else host
        logging.getLogger("uvicorn.error").info(
            "Uvicorn running on http://%s:%d (Press CTRL+C to quit)", shown, port
        )
        state = self._state()
        # the line a newcomer reads next, right after the address (tests/server/test_first_hour_processes.py)
        if state is not None and state.settings.role != "edge" and not state.ready:
            logger.info(
                "Spark is warming up (half a minute or more on a busy machine): /readyz answers 503 "
                "until the streaming query runs, then a 'ready:' line follows"
            )
        if state is not None and self.grpc_front is not None:
            await self.grpc_front.start(state)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.grpc_front is not None:
            await self.grpc_front.stop()
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        state = self._state()
        if state is None or self._loop is None:  # not serving yet: uvicorn's own handling
            super().handle_exit(sig, frame)
            return
        self._signals += 1
        if self._signals == 1:
            self._loop.call_soon_threadsafe(self._begin_drain, state)
        elif self._signals == 2:  # runs in a signal handler: the loop logs and acts
            self._loop.call_soon_threadsafe(self._end_grace, state)
        else:
            self.should_exit = self.force_exit = True

    def _begin_drain(self, state: ServerState) -> None:
        if self._draining is None and self._loop is not None:
            self._draining = self._loop.create_task(self._drain_then_exit(state))

    def _end_grace(self, state: ServerState) -> None:
        logger.info("second signal: ending the grace period now (a third stops the process at once)")
        state.end_grace.set()

    async def _drain_then_exit(self, state: ServerState) -> None:
        try:
            await drain(state)
        finally:
            self.should_exit = True

    async def _watch_spark(self) -> None:
        while True:
            await asyncio.sleep(SPARK_WATCH_SECONDS)
            state = self._state()
            if state is None or state.draining or state.supervisor is None or not state.supervisor.gave_up:
                continue
            logger.error("%s: the server stops, with exit status 1", state.supervisor.last_error)
            self.exit_status = 1
            self._begin_drain(state)
            return

    def _state(self) -> ServerState | None:
        app = _find_app(self.config.loaded_app)
        return getattr(getattr(app, "state", None), "sparkwire", None)


def _find_app(app: object) -> object:
    """The FastAPI app under uvicorn's middleware wrappers (for its state)."""
    while not hasattr(app, "state") and hasattr(app, "app"):
        app = app.app
    return app


def serve(settings: Settings) -> None:
    configure_logging(settings.log_level, settings.log_format, settings.access_log)
    # What would make the start fail, checked before Spark spends half a minute starting: one line
    # each, exit status 1.
    data_dir_lock = DataDirLock(settings.data_dir)  # held as long as the process lives
    try:
        data_dir_lock.acquire()
        listener = bind_listener(settings.host, settings.port)
        if needs_redis(settings):
            check_redis(settings.redis_url)
        if needs_kafka(settings):
            check_kafka(settings.kafka_bootstrap_servers)
    except (DataDirUnavailable, CannotListen, RedisUnreachable, KafkaUnreachable) as exc:
        logger.error("%s", exc)
        sys.exit(1)
    keep_freed_memory()  # before the server starts its threads (app/runtime/allocator.py)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    app = create_app(settings)
    grpc_front = GrpcFront()
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        log_config=None,  # uvicorn's loggers go through configure_logging's handler
        access_log=settings.access_log,  # off: app/api/request_summary.py's summary line instead
        ws_max_size=settings.max_message_bytes,
        ws_ping_interval=None,
        # An idle kept-alive connection is closed by the read deadline (handshake-timeout, 10 s), not
        # by uvicorn's own 5 s: that equals httpx's pool expiry, so a client reusing a connection at
        # 4.99 s could have it closed under its request (a ReadError, no answer: seen on CI).
        timeout_keep_alive=int(settings.handshake_timeout) + 1,
        lifespan="on",
        # HTTP/1.1 and, on the same port, gRPC (HTTP/2's preface: app/transport/preface.py)
        http=preface_sniffing(
            http_protocol_with_read_deadline(
                settings.handshake_timeout,
                settings.min_body_rate,
                HeaderLimits(settings.max_header_bytes, settings.max_header_count),
            ),
            settings.handshake_timeout,
            grpc_front.target,
        ),
        ws=websocket_protocol(settings.max_pings_per_second),
    )
    server = DrainingServer(config, grpc_front)
    server.run(sockets=[listener])
    data_dir_lock.release()
    if server.exit_status:
        sys.exit(server.exit_status)


def _version() -> str:
    try:
        return importlib.metadata.version("sparkwire")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def settings_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Settings:
    """Settings from the flags and the environment; a bad value is a one-line usage error (exit 2)
    naming the flag, as argparse gives for its own checks, instead of pydantic's traceback."""
    overrides = {k: v for k, v in vars(args).items() if k != "command" and v is not None}
    if "data_dir" in overrides:
        overrides["data_dir"] = Path(overrides["data_dir"])
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = ".".join(str(part) for part in error["loc"])
            where = f"argument --{name.replace('_', '-')}" if name else "settings"
            if name and name not in overrides:
                where += f" (env SPARKWIRE_{name.upper()})"
            given = f" (got {error['input']!r})" if name else ""
            problems.append(f"{where}: {error['msg']}{given}")
        parser.error("; ".join(problems))


def add_serve_arguments(serve_p: argparse.ArgumentParser) -> None:
    """A flag per setting; a boolean one is a switch (--access-log, --no-access-log) that also
    takes a value (--access-log false), as its variable does."""
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        text = f"{field.description} (env SPARKWIRE_{name.upper()}, default {field.default})"
        if field.annotation is bool:
            serve_p.add_argument(
                flag,
                dest=name,
                default=None,
                nargs="?",
                const="true",
                metavar="true|false",
                help=text.replace("%", "%%"),
            )
            serve_p.add_argument(
                "--no-" + flag[2:], dest=name, action="store_const", const="false", help=f"{flag} false"
            )
            continue
        serve_p.add_argument(flag, dest=name, default=None, help=text.replace("%", "%%"))


SPARK_ARCHIVE_HELP = (
    "record Spark's class-data archive for this machine (~1 min, once): servers started after it "
    "are ready ~7 s sooner"
)


def record_spark_archive(again: bool = False) -> int:
    """`sparkwire spark-archive`: record it unless this JDK and PySpark's is already there (`again`:
    even then)."""
    from compute.spark.class_archive import archive_in_use
    from compute.spark.class_archive_build import record

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its per-call INFO lines say nothing here
    existing = archive_in_use()
    if existing is not None and not again:
        print(f"Spark's class archive is already recorded: {existing}")
        return 0
    started = time.monotonic()
    print("recording Spark's class archive (a short server run; about a minute)...", flush=True)
    try:
        path = record()
    except RuntimeError as exc:
        print(f"sparkwire spark-archive: {exc}", file=sys.stderr)
        return 1
    print(f"recorded {path} ({path.stat().st_size // 1_000_000} MB) in {time.monotonic() - started:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> None:
    from app.runtime import tail  # beside demo: the subcommands that talk to a running server

    parser = argparse.ArgumentParser(prog="sparkwire", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    # A short usage line: a usage error is then two lines, not the forty flags (--help lists them).
    serve_p = sub.add_parser(
        "serve", help="run the Sparkwire server", usage="%(prog)s [-h] [--OPTION VALUE ...]"
    )
    add_serve_arguments(serve_p)
    demo.add_arguments(sub.add_parser("demo", help="feed a running server with synthetic telemetry"))
    tail.add_arguments(sub.add_parser("tail", help=tail.HELP, description=tail.__doc__))
    archive_p = sub.add_parser("spark-archive", help=SPARK_ARCHIVE_HELP, description=SPARK_ARCHIVE_HELP)
    archive_p.add_argument(
        "--again",
        action="store_true",
        help="record it even if one is there (the JVM refused it: its jars changed)",
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        demo.run(args)
        return
    if args.command == "tail":
        sys.exit(tail.run(args))
    if args.command == "spark-archive":
        sys.exit(record_spark_archive(again=args.again))
    serve(settings_from(args, serve_p))


if __name__ == "__main__":
    main()
