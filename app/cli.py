"""`sparkwire serve`: run the server with embedded defaults (local Spark, SQLite log under ./data)."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from types import FrameType

import uvicorn

from app import demo
from app.config import Settings
from app.limits import http_protocol_with_header_deadline
from app.logging_setup import configure_logging
from app.server import create_app
from app.shutdown import drain
from app.ws_protocol import FanOutWebSocketProtocol


class DrainingServer(uvicorn.Server):
    """Uvicorn, except that the first SIGTERM/SIGINT drains connections before the server stops."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._draining: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        app = _find_app(self.config.loaded_app)
        state = getattr(getattr(app, "state", None), "sparkwire", None)
        if self._draining is not None or state is None or self._loop is None:
            self.should_exit = True
            if self._draining is not None:
                self.force_exit = True
            return
        loop = self._loop

        def begin() -> None:
            self._draining = loop.create_task(self._drain_then_exit(state))

        loop.call_soon_threadsafe(begin)

    async def _drain_then_exit(self, state: object) -> None:
        try:
            await drain(state)  # type: ignore[arg-type]
        finally:
            self.should_exit = True


def _find_app(app: object) -> object:
    """The FastAPI app under uvicorn's middleware wrappers (for its state)."""
    while not hasattr(app, "state") and hasattr(app, "app"):
        app = app.app
    return app


def serve(settings: Settings) -> None:
    configure_logging(settings.log_level, settings.log_format)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        log_config=None,  # uvicorn's loggers go through configure_logging's handler
        ws_max_size=settings.max_message_bytes,
        ws_ping_interval=None,
        lifespan="on",
        http=http_protocol_with_header_deadline(settings.handshake_timeout),
        ws=FanOutWebSocketProtocol,
    )
    server = DrainingServer(config)
    server.run()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sparkwire", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve_p = sub.add_parser("serve", help="run the Sparkwire server")
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        serve_p.add_argument(
            flag,
            dest=name,
            default=None,
            help=f"{field.description} (env SPARKWIRE_{name.upper()}, default {field.default})",
        )
    demo.add_arguments(sub.add_parser("demo", help="feed a running server with synthetic telemetry"))
    args = parser.parse_args(argv)
    if args.command == "demo":
        demo.run(args)
        return
    overrides = {k: v for k, v in vars(args).items() if k != "command" and v is not None}
    if "data_dir" in overrides:
        overrides["data_dir"] = Path(overrides["data_dir"])
    settings = Settings(**overrides)
    if args.command == "serve":
        serve(settings)


if __name__ == "__main__":
    main()
