"""deploy/docker-compose.yml runs the roles tests/server/test_two_tier.py runs."""

from __future__ import annotations

import yaml

from tests.server.test_two_tier import COMPOSE, compose_service


def test_the_compose_file_runs_the_roles_these_tests_run() -> None:
    assert compose_service("compute")["command"] == ["sparkwire", "serve", "--role", "compute"]
    for edge in ("edge-a", "edge-b"):
        spec = compose_service(edge)
        assert spec["command"] == ["sparkwire", "serve", "--role", "edge"]
        assert spec["environment"]["SPARKWIRE_SOURCE"] == "redis"
    assert {"redis", "spark-master", "spark-worker"} <= set(yaml.safe_load(COMPOSE.read_text())["services"])
