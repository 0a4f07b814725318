"""Before a server on the Kafka log starts anything: do its brokers answer? Without them the log's
start fails deep in the app's start-up with a traceback; checked first, it is one line naming the
brokers and what went wrong (as app/runtime/redis_check.py does for Redis)."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from app.config import Settings

CONNECT_TIMEOUT_S = 5.0


class KafkaUnreachable(Exception):
    """No broker answered a metadata request (the message names the brokers and the error)."""


def needs_kafka(settings: Settings) -> bool:
    return settings.source == "kafka"


def check_kafka(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    try:
        admin.list_topics(timeout=CONNECT_TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0].str() if exc.args else str(exc)
        raise KafkaUnreachable(
            f"cannot reach Kafka at {bootstrap} (--kafka-bootstrap-servers): {error}; "
            "start it (make kafka) or point --kafka-bootstrap-servers at it"
        ) from None
