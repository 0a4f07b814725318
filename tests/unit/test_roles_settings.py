"""Which logs the tiers run on (app/config.py, docs/decisions/0094): `--role compute` and `--role
edge` need a shared log, Redis Streams or Kafka; the asset, run, module and event catalog is in
Redis whenever the processes share it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings


@pytest.mark.parametrize("role", ["compute", "edge"])
def test_a_tier_on_the_embedded_log_is_refused_naming_the_shared_logs(role: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(role=role, source="embedded")
    said = str(refused.value)
    assert f"role {role} needs a shared log" in said and "source=redis or source=kafka" in said


@pytest.mark.parametrize(
    ("role", "source", "shared"),
    [
        ("all", "embedded", False),
        ("all", "kafka", False),  # one server: its catalog in its data dir, as on the embedded log
        ("all", "redis", True),
        ("compute", "redis", True),
        ("edge", "redis", True),
        ("compute", "kafka", True),
        ("edge", "kafka", True),
    ],
)
def test_the_catalog_is_shared_by_the_tiers_on_either_log(role: str, source: str, shared: bool) -> None:
    assert Settings(role=role, source=source).shared_catalog is shared


def test_all_in_one_servers_on_the_kafka_log_share_the_catalog_in_the_redis_they_are_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings(source="kafka", redis_url="redis://catalog:6379/0").shared_catalog
    monkeypatch.setenv("SPARKWIRE_REDIS_URL", "redis://catalog:6379/0")
    assert Settings(source="kafka").shared_catalog
    assert not Settings(source="embedded").shared_catalog  # one server's own log: its own catalog
