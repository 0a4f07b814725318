"""What the running server shares across requests: settings, the log, the engine, connections."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.auth import Authenticator
from app.config import Settings
from app.ingest_workers import DecodeWorkers
from app.liveness import Liveness
from app.metrics import Metrics
from app.origin import OriginPolicy
from app.session import SessionConfig
from compute.storage.contract import PointLog

if TYPE_CHECKING:
    from app.connection import Connection
    from app.hub import Hub
    from app.roles.compute import ComputeTier
    from compute.spark.engine import Engine
    from compute.spark.supervisor import StreamSupervisor


@dataclass
class ServerState:
    settings: Settings
    log: PointLog
    engine: Engine | None = None
    hub: Hub = field(init=False)
    connections: set[Connection] = field(default_factory=set)
    ready_event: asyncio.Event = field(default_factory=asyncio.Event)
    draining: bool = False
    end_grace: asyncio.Event = field(default_factory=asyncio.Event)  # a second signal: close clients now
    startup_error: str | None = None
    metrics: Metrics = field(default_factory=Metrics)
    # where JSON write bodies are decoded; the lifespan starts the worker processes (all and edge roles)
    decoders: DecodeWorkers = field(init=False)
    supervisor: StreamSupervisor | None = None
    tier: ComputeTier | None = None  # `--role compute`: publishes results to the edges
    # replays running (app/replay.py's ReplayRun), from their start until their period is over
    replays: set[Any] = field(default_factory=set)
    auth: Authenticator | None = field(init=False)  # None: authentication is off
    origins: OriginPolicy = field(init=False)

    liveness: Liveness = field(init=False)  # every connection's heartbeat and backlog check

    def __post_init__(self) -> None:
        self.auth = Authenticator.from_settings(self.settings)
        self.origins = OriginPolicy(self.settings.allowed_origins)
        if self.metrics.tenant_labels != self.settings.metrics_tenant_labels:  # the default's, unused yet
            self.metrics = Metrics(self.settings.metrics_tenant_labels)
        self.decoders = DecodeWorkers(0, 0, self.metrics.bodies_decoded)  # until the lifespan's start
        settings = self.settings
        heartbeat = SessionConfig(ping_interval=settings.ping_interval, ping_timeout=settings.ping_timeout)
        self.liveness = Liveness(min(1.0, settings.slow_consumer_timeout / 4, heartbeat.heartbeat_period))

    @property
    def ready(self) -> bool:
        """Spark runs and its query is not being restarted (an edge: the compute tier's, reached
        through Redis)."""
        return self.ready_event.is_set() and not self.draining and self._computations_ready()

    async def wait_ready(self, timeout: float = 120.0) -> None:
        """Until the computations can be served (see `ready`)."""
        await asyncio.wait_for(self._until_streaming(), timeout)

    async def _until_streaming(self) -> None:
        await self.ready_event.wait()
        while not self._computations_ready():
            await asyncio.sleep(0.1)

    def _computations_ready(self) -> bool:
        try:
            return self.hub.computations.ready
        except RuntimeError:  # no engine yet
            return False
