"""What the running server shares across requests: settings, the log, the engine, connections."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.api.polled_gate import PolledGate
from app.config import Settings
from app.fanout.catalog_edits import CatalogEdits
from app.fanout.hub import Hub
from app.ingest.workers import DecodeWorkers
from app.metrics import Metrics
from app.protocol.admission import Admission
from app.protocol.ledger import CostLedger
from app.protocol.ws_session import SessionConfig
from app.transport.liveness import Liveness
from compute.evaluation import cost
from compute.evaluation.compiler.catalogs import NO_CATALOGS, Catalogs
from compute.storage.contract import PointLog

if TYPE_CHECKING:
    from app.api.forwarded_reads import ForwardedReads
    from app.fanout.replay import ReplayRun
    from app.tiers.compute import ComputeTier
    from app.transport.connection import Connection
    from compute.spark.engine import Engine
    from compute.spark.supervisor import StreamSupervisor


@dataclass
class ServerState:
    settings: Settings
    log: PointLog
    hub: Hub  # fan-out to every WebSocket subscriber
    metrics: Metrics
    decoders: DecodeWorkers  # where JSON write bodies are decoded (processes in the all and edge roles)
    engine: Engine | None = None  # set by Spark's start-up thread, with supervisor and tier
    connections: set[Connection] = field(default_factory=set)
    ready_event: asyncio.Event = field(default_factory=asyncio.Event)
    draining: bool = False
    end_grace: asyncio.Event = field(default_factory=asyncio.Event)  # a second signal: close clients now
    startup_error: str | None = None
    supervisor: StreamSupervisor | None = None
    tier: ComputeTier | None = None  # `--role compute`: publishes results to the edges
    # an edge on a log only Spark reads (Kafka): where its reads of points go (app/api/forwarded_reads.py)
    forwarded_reads: ForwardedReads | None = None
    admission: Admission = field(init=False)  # Origin and bearer token, for every route
    # replays running (app/fanout/replay.py's ReplayRun), from their start until their period is over
    replays: set[ReplayRun] = field(default_factory=set)
    catalog_edits: CatalogEdits = field(default_factory=CatalogEdits)  # asset and run edits, to sessions
    catalogs: Catalogs = NO_CATALOGS  # what plans compiled in this process look up (the stores)

    liveness: Liveness = field(init=False)  # every connection's heartbeat and backlog check
    ledger: CostLedger = field(init=False)  # what live subscriptions cost, per connection, tenant, server
    polled_gate: PolledGate = field(init=False)  # ComputeService's evaluations: how many, how long

    def __post_init__(self) -> None:
        self.admission = Admission.from_settings(self.settings)
        settings = self.settings
        self.ledger = CostLedger(settings.evaluation_budget)
        self.polled_gate = PolledGate(
            settings.max_polled_computations, settings.max_polled_queue, settings.polled_time_budget_seconds
        )
        cost.configure(settings.evaluation_budget)  # the evaluations' run-time checks (process-wide)
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
