"""Which point log this server writes to and streams from: the embedded SQLite log in the data
directory (the default), or Kafka shared by several servers (SPARKWIRE_SOURCE=kafka)."""

from __future__ import annotations

import os
import socket

from app.config import Settings
from compute.storage.contract import PointLog


def open_point_log(settings: Settings) -> PointLog:
    # A consumer name per server process: its committed offsets and lag are its own.
    consumer = f"{socket.gethostname()}-{settings.port}-{os.getpid()}"
    if settings.source == "kafka":
        from compute.storage.kafka.point_log import KafkaLog

        return KafkaLog(
            settings.kafka_bootstrap_servers,
            settings.kafka_topic,
            settings.kafka_partitions,
            consumer,
            settings.retention,
        )
    from compute.storage.disk_space import Retention as LogRetention
    from compute.storage.sqlite.point_log import EmbeddedLog
    from compute.storage.sqlite.writer import DurableLog

    durable = DurableLog(
        settings.data_dir / "log.db",
        retention=LogRetention(settings.retention, settings.max_log_bytes),
        min_free_bytes=settings.min_free_bytes,
    )
    return EmbeddedLog(durable, consumer)
