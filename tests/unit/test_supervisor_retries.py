"""The stream supervisor's failed restarts (compute/spark/supervisor.py): during an outage (the Redis
log away) every restart attempt fails the same way, and each is one WARNING line with the reason's
first line, not a traceback (issue 44: 7 tracebacks in the log for an 8 s Redis outage)."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import pytest

from compute.evaluation.errors import ComputeError
from compute.spark.supervisor import StreamSupervisor

# What a restart raises during a Redis outage: Spark's error from the Python data source, whose first
# line ends where the worker's Python traceback begins, then the JVM's stack.
OUTAGE = """the restarted query did not get through its first trigger: \
[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform \
latestOffset: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/redis/connection.py", line 3280, in get_connection
    connection.connect()
redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:6379. Connection refused.

\tat org.apache.spark.sql.execution.streaming.MicroBatchExecution.runStream(MicroBatchExecution.scala:1)
"""


class FailingEngine:
    """What the supervisor uses of compute/spark/engine.py's Engine: a query that stopped, and a
    restart that fails `failures` times before it works."""

    def __init__(self, failures: int) -> None:
        self.query = object()
        self.degraded = False
        self.spark = SimpleNamespace(sparkContext=SimpleNamespace())  # no JVM of ours: never "exited"
        self.failures = failures
        self.active = False

    def query_active(self) -> bool:
        return self.active

    def failure_reason(self) -> str:
        return "Error 111 connecting to 127.0.0.1:6379. Connection refused."

    def recover(self) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError(OUTAGE)
        self.active = True


def test_each_failed_restart_is_one_line_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    engine = FailingEngine(failures=3)
    recovered = threading.Event()
    failed: list[ComputeError] = []
    supervisor = StreamSupervisor(
        engine,  # type: ignore[arg-type]
        on_failed=failed.append,
        on_recovered=recovered.set,
        first_delay=0.01,
        max_delay=0.05,
    )
    with caplog.at_level(logging.INFO, logger="compute.spark.supervisor"):
        supervisor.start()
        try:
            assert recovered.wait(30), "the supervisor never restarted the query"
        finally:
            supervisor.stop()
    records = [r for r in caplog.records if r.name == "compute.spark.supervisor"]
    assert not [r for r in records if r.exc_info], [r.getMessage() for r in records if r.exc_info]
    retries = [r for r in records if "restarting the streaming query failed" in r.getMessage()]
    assert [r.levelno for r in retries] == [logging.WARNING] * 3, [r.getMessage() for r in records]
    for attempt, record in enumerate(retries, start=1):
        message = record.getMessage()
        assert f"(attempt {attempt})" in message, message
        # the Python exception stands for its traceback; the JVM's stack is left out
        assert "redis.exceptions.ConnectionError: Error 111" in message, message
        assert "Traceback" not in message and "org.apache.spark" not in message, message
    assert supervisor.restarts == 1 and len(failed) == 1
    assert "restarted after 4 attempt(s)" in caplog.text
