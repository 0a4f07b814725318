"""Which logs the tiers run on (app/config.py, docs/decisions/0094 and 0097): `--role compute` and
`--role edge` need the shared log, Kafka; the Redis Streams log is gone and refused by name; the
asset, run, module and event catalog is in Redis whenever the processes share it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings


@pytest.mark.parametrize("role", ["compute", "edge"])
def test_a_tier_on_the_embedded_log_is_refused_naming_the_shared_log(role: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(role=role, source="embedded")
    said = str(refused.value)
    assert f"role {role} needs the shared log" in said and "source=kafka" in said


@pytest.mark.parametrize("source", ["redis", "REDIS"])
def test_the_removed_redis_log_is_refused_naming_what_replaced_it(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deployment still configured for the Redis Streams log fails at start with what to set
    instead, not with a bare list of allowed values (nor runs on the embedded log unnoticed)."""
    monkeypatch.setenv("SPARKWIRE_SOURCE", source)
    with pytest.raises(ValidationError) as refused:
        Settings()
    said = str(refused.value)
    assert "the Redis Streams point log was removed" in said, said
    assert "source=kafka" in said and "kafka-bootstrap-servers" in said, said


@pytest.mark.parametrize(
    ("role", "source", "shared"),
    [
        ("all", "embedded", False),
        ("all", "kafka", False),  # one server: its catalog in its data dir, as on the embedded log
        ("compute", "kafka", True),
        ("edge", "kafka", True),
    ],
)
def test_the_catalog_is_shared_by_the_tiers(role: str, source: str, shared: bool) -> None:
    assert Settings(role=role, source=source).shared_catalog is shared


def test_all_in_one_servers_on_the_kafka_log_share_the_catalog_in_the_redis_they_are_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings(source="kafka", redis_url="redis://catalog:6379/0").shared_catalog
    monkeypatch.setenv("SPARKWIRE_REDIS_URL", "redis://catalog:6379/0")
    assert Settings(source="kafka").shared_catalog
    assert not Settings(source="embedded").shared_catalog  # one server's own log: its own catalog


@pytest.mark.parametrize("seconds", [0, 61])
def test_the_kafka_log_refuses_a_future_limit_its_back_fill_cannot_reach(seconds: float) -> None:
    """Its back-fill reads from 60 s before a window by append time: a point stamped further ahead
    (or with no limit, 0) would be missed, so the setting is refused by name at start."""
    with pytest.raises(ValidationError, match="SPARKWIRE_MAX_FUTURE_SECONDS"):
        Settings(source="kafka", max_future_seconds=seconds)
    Settings(source="embedded", max_future_seconds=seconds)  # the embedded log reads by timestamp
    assert Settings(source="kafka", max_future_seconds=60).max_future_seconds == 60
    from app.config import KAFKA_FUTURE_MARGIN_S
    from compute.storage.kafka.layout import FUTURE_MARGIN_MS

    assert KAFKA_FUTURE_MARGIN_S * 1000 == FUTURE_MARGIN_MS  # the limit is the margin the back-fill reads
