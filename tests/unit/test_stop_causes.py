"""The query's stop ends a running micro-batch's job in one of two ways the JVM reports: a cancelled
job, or (when the stop lands while the collect waits, as under heavy ingest) an interrupt of the
batch's thread. Both are the stop's own doing, logged as one INFO line; anything else, or either
one outside a stop, stays an error with its traceback."""

from __future__ import annotations

import logging

import pytest

from compute.spark.engine import Engine

CANCELLED = (
    "An error occurred while calling o123.collectAsArrowToPython.\n"
    ": org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 7 cancelled"
)
INTERRUPTED = (
    "An error occurred while calling o123.collectAsArrowToPython.\n: java.lang.InterruptedException\n"
    "\tat java.base/java.util.concurrent.locks.AbstractQueuedSynchronizer.acquireSharedInterruptibly"
)
OTHER = "An error occurred while calling o123.collectAsArrowToPython.\n: java.lang.OutOfMemoryError"


def _engine(stopping: bool) -> Engine:
    engine = Engine.__new__(Engine)  # only the stop flag matters here; no Spark session is needed
    engine._stopping = stopping
    return engine


def _record(exc: BaseException) -> logging.LogRecord:
    return logging.LogRecord(
        "py4j.clientserver", logging.ERROR, __file__, 1, "failed", (), (type(exc), exc, None)
    )


@pytest.mark.parametrize(
    ("text", "cause"), [(CANCELLED, "SPARK_JOB_CANCELLED"), (INTERRUPTED, "java.lang.InterruptedException")]
)
def test_a_stop_names_its_cause_and_hides_py4js_traceback(text: str, cause: str) -> None:
    engine = _engine(stopping=True)
    exc = RuntimeError(text)
    assert engine._stop_cause(exc) == cause
    assert engine._hide_cancelled_batch(_record(exc)) is False  # the record is dropped


@pytest.mark.parametrize("text", [CANCELLED, INTERRUPTED])
def test_outside_a_stop_the_same_failure_is_logged(text: str) -> None:
    engine = _engine(stopping=False)
    exc = RuntimeError(text)
    assert engine._stop_cause(exc) is None
    assert engine._hide_cancelled_batch(_record(exc)) is True


def test_any_other_failure_during_a_stop_is_logged() -> None:
    engine = _engine(stopping=True)
    exc = RuntimeError(OTHER)
    assert engine._stop_cause(exc) is None
    assert engine._hide_cancelled_batch(_record(exc)) is True
