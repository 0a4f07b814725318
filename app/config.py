"""Configuration: every option is a `sparkwire serve` flag and a SPARKWIRE_<OPTION> variable."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from compute.evaluation.compiler.limits import Limits
from compute.evaluation.cost import EvaluationBudget
from schemas.timestamps import NANOS_PER_SECOND

DEFAULT_RETENTION_S = 7 * 86400.0


# compute/storage/kafka/layout.py's FUTURE_MARGIN_MS, in seconds (not imported: it loads pyarrow;
# tests/unit/test_roles_settings.py checks they agree)
KAFKA_FUTURE_MARGIN_S = 60.0


EVERY_ADDRESS = frozenset({"0.0.0.0", "::", ""})  # a listener on each of this machine's addresses


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SPARKWIRE_", extra="ignore")

    role: Literal["all", "compute", "edge"] = Field(
        "all",
        description="all: Spark and WebSockets in one process; compute: Spark and every live computation, "
        "results published to Redis; edge: WebSockets and ingest, results from the compute tier, no JVM "
        "(compute and edge need the shared log, source=kafka, and redis-url)",
    )
    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8000, ge=1, le=65535, description="port to listen on")
    data_dir: Path = Field(Path("./data"), description="where the embedded log and Spark checkpoints live")
    checkpoint_dir: Path | None = Field(
        None, description="where the stream's checkpoint goes (default DATA_DIR/checkpoints), e.g. /dev/shm"
    )
    spark_master: str = Field("local[2]", description="Spark master URL (local[N] or spark://host:port)")
    driver_memory: str = Field(
        "1g", pattern=r"^[0-9]+[kmgtKMGT]$", description="Spark driver's heap, taken whole at start (e.g. 1g)"
    )
    trigger_ms: int = Field(100, ge=10, description="micro-batch trigger interval, milliseconds")
    shutdown_grace: float = Field(10.0, ge=0, description="seconds updates keep flowing after SIGTERM")
    ping_interval: float = Field(20.0, gt=0, description="seconds of silence before the server pings")
    ping_timeout: float = Field(20.0, gt=0, description="seconds to wait for a pong before closing")
    max_window_seconds: float = Field(86400.0, gt=0, description="largest windowWidth accepted")
    max_points: int = Field(1_000_000, gt=0, description="most points/buckets a result may ask for")
    max_compile_nodes: int = Field(
        5_000,
        gt=0,
        description="nodes one subscription may expand to, counting every reference, dataset, variable, "
        "module function and expression operator each time it is expanded (ComputationTooComplex)",
    )
    max_compile_depth: int = Field(
        100,
        gt=0,
        le=200,  # each level is a few Python frames: well under the interpreter's recursion limit
        description="nesting of one subscription once its references, variables, module functions and "
        "expressions are expanded (ComputationTooComplex)",
    )
    max_compile_seconds: float = Field(
        1.0,
        gt=0,
        description="CPU seconds compiling one subscription may take, whatever its steps cost "
        "(ComputationTooComplex)",
    )
    max_message_bytes: int = Field(1 << 20, gt=0, description="largest client message, decompressed")
    resume_linger_seconds: float = Field(
        60.0,
        ge=0,
        description="a computation whose subscribers asked for resume tokens stays live this long after "
        "the last one leaves, so a client that reconnects resumes instead of re-snapshotting",
    )
    metrics_tenant_labels: bool = Field(
        False,
        description="GET /metrics (no token needed) may name data sources in labels, e.g. late points "
        "per data source; off: no metric names a tenant's data",
    )
    max_lingering_per_connection: int = Field(
        128,
        ge=0,
        description="computations a connection's resumable subscriptions may leave lingering; past it "
        "the oldest of them is released at once",
    )
    max_lingering_computations: int = Field(
        1024, ge=0, description="lingering computations, all connections; past it the oldest is released"
    )
    max_replays_per_connection: int = Field(
        4, ge=0, description="replay subscriptions a connection may hold (TooManyReplays)"
    )
    max_replays: int = Field(
        16, ge=0, description="replays running at once, all connections (TooManyReplays)"
    )
    max_polled_computations: int = Field(
        2,
        ge=1,
        description="ComputeService requests evaluating at once (each on a thread of its own); more wait",
    )
    max_polled_queue: int = Field(
        8, ge=0, description="ComputeService requests waiting for a slot; past it 503 Compute:ComputeBusy"
    )
    polled_time_budget_seconds: float = Field(
        30.0,
        gt=0,
        description="seconds a ComputeService request may evaluate, then stopped (Compute:ComputeTimedOut)",
    )
    max_polled_request_points: int = Field(
        50_000_000,
        ge=1,
        description="points one ComputeService request may read, a batch's or parameterized request's "
        "summed (Compute:TooManyPoints); one evaluation reads 10,000,000 at most",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "INFO", description="Python log level: DEBUG, INFO, WARNING, ERROR or CRITICAL (any case)"
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="text lines, or one JSON object per line (Spark's own output: DATA_DIR/spark.log)"
    )
    access_log: bool = Field(False, description="a log line per HTTP request and WebSocket handshake")
    summary_interval: float = Field(
        60.0, ge=0, description="seconds between summary log lines (requests, points, rejects; 0 = none)"
    )
    source: Literal["embedded", "kafka"] = Field(
        "embedded",
        description="point log: embedded (SQLite in data-dir) or kafka (Kafka, shared, read by Spark's "
        "Kafka source; `make kafka` runs a broker)",
    )
    kafka_bootstrap_servers: str = Field(
        "127.0.0.1:9092", description="Kafka brokers of the kafka source and of compute-slots"
    )
    kafka_topic: str = Field(
        "sparkwire-points", description="kafka source: the points topic (the catalog is TOPIC-series)"
    )
    kafka_partitions: int = Field(
        4, ge=1, description="kafka source: partitions of the points topic when this server creates it"
    )
    kafka_followed_points: int = Field(
        20_000_000,
        ge=0,
        description="kafka source: how many recent points of the series its live computations read a "
        "computing server keeps (24 bytes each), so that a new computation over them is back-filled "
        "without a Spark job reading their partitions (docs/decisions/0101); 0 = none",
    )
    compute_slots: int = Field(
        0,
        ge=0,
        description="role compute: 0 = one compute process runs every live computation; N = any number "
        "of compute processes share them over N slots, the partitions of topic KAFKA-TOPIC-compute, "
        "assigned by Kafka's consumer group (every compute process needs the same kafka-bootstrap-servers)",
    )
    advertise_url: str = Field(
        "",
        description="role compute: the base URL at which the edges reach this process's HTTP; an edge "
        "forwards there the ComputeService and export requests that read the Kafka log, which only a "
        "process running Spark can read (empty: http://HOST:PORT, with this machine's hostname when "
        "HOST listens on every address)",
    )
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description="Redis between the tiers (results, leases, catalogs); given to an all-in-one server on "
        "the kafka source, its asset, event and module catalogs are there (shared by every server given it)",
    )
    redis_prefix: str = Field("sparkwire", description="prefix of Sparkwire's keys in that Redis")
    # -- retention and disk (compute/log.py, compute/storage/disk_space.py)
    retention_seconds: float | None = Field(
        None,
        ge=0,
        description="keep points this long (embedded: by point timestamp; kafka: the topic's "
        "retention.ms when this server creates it); 0 = forever; default 7 days",
    )
    max_log_bytes: int = Field(
        0, ge=0, description="embedded log: prune the oldest points while it is larger; 0 = no cap"
    )
    min_free_bytes: int | None = Field(
        None,
        ge=0,
        description="refuse writes (507) while the data dir's disk has less free; "
        "default the smaller of 1 GiB and 5% of the disk; 0 = no floor",
    )
    # -- security (app/protocol/auth.py, app/protocol/origin.py): authentication is off unless a
    # secret or file is set
    jwt_secret: SecretStr | None = Field(None, description="HS256 secret: accept bearer JWTs (with exp)")
    tokens_file: Path | None = Field(None, description="JSON file of static bearer tokens and their claims")
    allowed_origins: str = Field("", description="comma-separated browser Origins allowed besides our own")
    # -- limits (app/protocol/limits.py, app/transport/connection.py)
    max_connections: int = Field(1000, gt=0, description="WebSocket connections; more are closed with 1013")
    max_subscriptions_per_connection: int = Field(128, gt=0, description="live subscriptions per connection")
    max_messages_per_second: float = Field(100.0, gt=0, description="client messages/s per connection")
    handshake_timeout: float = Field(
        10.0,
        gt=0,
        description="seconds for each request's headers (the first and every one after on a kept-alive "
        "connection) and for its body less what arrives at min-body-rate, then a WebSocket's 1st message",
    )
    min_body_rate: float = Field(
        1024.0, gt=0, description="bytes/s a request body must keep arriving at, past handshake-timeout"
    )
    send_queue_limit: int = Field(1000, gt=0, description="frames queued for a client before close 4008")
    slow_consumer_timeout: float = Field(30.0, gt=0, description="seconds a client may lag before close 4008")
    # -- ingest limits (app/http/request_body.py, app/ingest/writes.py): checked before anything is stored
    max_request_bytes: int = Field(
        64 << 20, gt=0, description="largest ingest body, bytes after Content-Encoding is undone (413)"
    )
    max_points_per_request: int = Field(1_000_000, gt=0, description="points in one ingest request (413)")
    max_tags_per_series: int = Field(64, ge=0, description="tags of one series in an ingest request (400)")
    max_tag_key_length: int = Field(256, gt=0, description="characters of a tag key (400)")
    max_tag_value_length: int = Field(1024, gt=0, description="characters of a tag value (400)")
    max_channel_length: int = Field(1024, gt=0, description="characters of a channel name (400)")
    max_data_source_rid_length: int = Field(256, gt=0, description="characters of a dataSourceRid (400)")
    max_future_seconds: float = Field(
        60.0,
        ge=0,
        description="a point stamped further ahead of the server's clock is refused (400, nothing of the "
        "request stored): it would move a live window's end past every real point to come; 0 = no limit "
        "(source=kafka: more than 0 and at most 60, the margin its back-fill reads before a window)",
    )
    # -- the HTTP and WebSocket edge (app/api/admitted_route.py, app/transport/): checked as bytes arrive
    max_json_body_bytes: int = Field(
        1 << 20,
        gt=0,
        description="largest JSON body of /assets/v1, /scout/v2/module, /event/v1 and getEnrichedDatasets, "
        "bytes after Content-Encoding is undone (413); read only once the token is checked",
    )
    max_header_bytes: int = Field(
        64 << 10, gt=0, description="request line and headers of one HTTP request, bytes (431, then closed)"
    )
    max_header_count: int = Field(
        100, gt=0, description="header lines of one HTTP request (431, then closed)"
    )
    max_pings_per_second: float = Field(
        10.0,
        gt=0,
        description="WebSocket control frames (ping, pong) a client may send per second, bursts 2x; "
        "past it the connection is closed with 1008",
    )
    # -- where JSON write bodies are decoded (app/ingest/workers.py)
    ingest_decode_workers: int = Field(
        1, ge=0, description="processes decoding large JSON write bodies off the event loop (0 = none)"
    )
    ingest_decode_min_bytes: int = Field(
        64 << 10, ge=0, description="a JSON write body this large or larger goes to a decode process"
    )
    # -- the evaluation cost model (compute/evaluation/cost.py, app/protocol/ledger.py): checked when a
    # subscription is made, and before each expensive step of an evaluation
    max_result_points_per_connection: int = Field(
        4_000_000,
        gt=0,
        description="result points/buckets/ranges a connection's live subscriptions may hold, one group's "
        "worth each (TooManyPoints)",
    )
    max_result_points_per_tenant: int = Field(
        8_000_000, gt=0, description="the same, summed over a token subject's connections (TooManyPoints)"
    )
    max_result_points: int = Field(
        32_000_000, gt=0, description="the same, summed over every connection (TooManyPoints)"
    )
    max_subscriptions_per_tenant: int = Field(
        1024,
        gt=0,
        description="live subscriptions of one token subject, all connections (TooManySubscriptions)",
    )
    max_subscriptions: int = Field(
        16_384, gt=0, description="live subscriptions, all connections (TooManySubscriptions)"
    )
    max_resample_points: int = Field(
        1_000_000,
        gt=0,
        description="grid points of one resample over a group's held history, up to the clock "
        "(TooManyPoints)",
    )
    max_groups: int = Field(
        10_000, gt=0, description="groups (tag value sets) of one computation (TooManyGroups)"
    )
    max_evaluation_work: int = Field(
        100_000_000,
        gt=0,
        description="values one node may reduce in one evaluation, e.g. rollingPoints: points x count; "
        "checked before the work (TooManyPoints, the computation stops)",
    )
    max_evaluation_cpu_seconds: float = Field(
        5.0,
        gt=0,
        description="CPU seconds one computation's evaluation of a live batch may take; one that overran "
        "is stopped (EvaluationBudgetExceeded)",
    )
    # -- recovery (compute/spark/supervisor.py)
    stream_restart_delay: float = Field(1.0, gt=0, le=5, description="seconds before the 1st query restart")
    stream_restart_max_delay: float = Field(30.0, gt=0, description="longest wait between query restarts")

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level_in_any_case(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("source", mode="before")
    @classmethod
    def _redis_log_removed(cls, value: object) -> object:
        if isinstance(value, str) and value.lower() == "redis":
            raise ValueError(
                "source=redis: the Redis Streams point log was removed; the shared log is Kafka "
                "(source=kafka and kafka-bootstrap-servers; `make kafka` runs a broker), and Redis "
                "(redis-url) keeps results, leases and catalogs (docs/decisions/0097)"
            )
        return value

    @model_validator(mode="after")
    def _roles_share_a_log(self) -> Settings:
        if self.role != "all" and self.source == "embedded":
            raise ValueError(
                f"role {self.role} needs the shared log: set source=kafka (SPARKWIRE_SOURCE) and "
                "kafka-bootstrap-servers, and redis-url; the compute tier and the edges find each "
                "other through that Redis"
            )
        return self

    @model_validator(mode="after")
    def _kafka_back_fill_reaches_future_points(self) -> Settings:
        # The Kafka log finds a window's points by their append time, reading from FUTURE_MARGIN_MS
        # (60 s) before the window: a point stamped further ahead of its append would be missed.
        if self.source == "kafka" and not 0 < self.max_future_seconds <= KAFKA_FUTURE_MARGIN_S:
            raise ValueError(
                f"max-future-seconds {self.max_future_seconds:g} (SPARKWIRE_MAX_FUTURE_SECONDS) with "
                f"source=kafka: the Kafka log's back-fill finds points stamped at most "
                f"{KAFKA_FUTURE_MARGIN_S:g} s ahead of their write, so it must be more than 0 and at "
                f"most {KAFKA_FUTURE_MARGIN_S:g}"
            )
        return self

    @property
    def shared_catalog(self) -> bool:
        """The asset, run, module and event catalog is in Redis, read by every process: whenever the
        server is split in tiers, and for an all-in-one server on the Kafka log given a redis-url
        (several of them on one topic then share their catalogs; without one its catalog is in its
        data directory, as on the embedded log)."""
        given_redis = "redis_url" in self.model_fields_set  # a flag or SPARKWIRE_REDIS_URL, not the default
        return self.role != "all" or (self.source == "kafka" and given_redis)

    @property
    def reachable_url(self) -> str:
        """`advertise-url`, or this process's HTTP as another machine reaches it (a listener on
        every address is reached by this machine's hostname; IPv6 literals in brackets)."""
        if self.advertise_url:
            return self.advertise_url.rstrip("/")
        host = socket.gethostname() if self.host in EVERY_ADDRESS else self.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    @property
    def evaluation_budget(self) -> EvaluationBudget:
        """The evaluation cost model's limits (compute/evaluation/cost.py)."""
        return EvaluationBudget(
            **{name: getattr(self, name) for name in EvaluationBudget.__dataclass_fields__}
        )

    @property
    def compute_limits(self) -> Limits:
        """What a computation may ask for (compute/evaluation/compiler/limits.py)."""
        return Limits(
            int(self.max_window_seconds * NANOS_PER_SECOND),
            self.max_points,
            max_compile_nodes=self.max_compile_nodes,
            max_compile_depth=self.max_compile_depth,
            max_compile_seconds=self.max_compile_seconds,
        )

    @property
    def retention(self) -> float:
        """Seconds points are kept by the configured source (0 = forever)."""
        return DEFAULT_RETENTION_S if self.retention_seconds is None else self.retention_seconds
