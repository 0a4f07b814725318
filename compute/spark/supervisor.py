"""Keeps the streaming query alive. A query that fails (an exception in a micro-batch, a broken
checkpoint, a lost worker) or stops without being asked to leaves every live computation frozen;
the supervisor notices within a poll, tells the subscribers (`JobInvalidState`, Nominal's name for
"the streaming compute job entered a terminal state unexpectedly"), restarts the query with
exponential backoff (first retry after `first_delay` <= 5 s) and, once every computation has been
rebuilt from the log, tells them again so each subscriber gets a fresh FullResult.

Once the server begins to shut down (`begin_shutdown`, at the first SIGTERM), a query that stops is
only reported, in one line: restarting it would outlive the process, and Spark's JVM may be going
too. A JVM that has exited cannot be restarted from here either: the supervisor says so once and
leaves the restart to whatever supervises the process (docs/decisions/0025).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from compute.evaluation.errors import ComputeError
from compute.spark.engine import Engine, error_line
from compute.spark.session import jvm_exit_status

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.25


class StreamSupervisor:
    def __init__(
        self,
        engine: Engine,
        on_failed: Callable[[ComputeError], None],
        on_recovered: Callable[[], None],
        first_delay: float = 1.0,
        max_delay: float = 30.0,
    ) -> None:
        self.engine = engine
        self.on_failed = on_failed
        self.on_recovered = on_recovered
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.failures = 0  # queries lost since start-up
        self.restarts = 0  # successful restarts
        self.next_attempt_at: float | None = None  # unix time of the next restart while degraded
        self.last_error: str | None = None
        self.gave_up = False  # the query stopped and will not be restarted (shutdown, or no JVM)
        self._delay = first_delay
        self._recovered_at = 0.0
        self._stop = threading.Event()
        self._shutting_down = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stream-supervisor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def begin_shutdown(self) -> None:
        """The server is draining: from now on a query that stops is not restarted (non-blocking)."""
        self._shutting_down.set()

    def stop(self) -> None:
        """Before the engine stops the query on purpose, so that is not taken for a failure."""
        self._shutting_down.set()
        self._stop.set()
        self._thread.join(timeout=30)

    @property
    def status(self) -> str:
        if not self.engine.degraded:
            return "running"
        if self.gave_up:
            return f"streaming query stopped ({self.last_error}); not restarted"
        wait = None if self.next_attempt_at is None else max(0.0, self.next_attempt_at - time.time())
        when = "" if wait is None else f" in {wait:.1f}s"
        return f"streaming query failed ({self.last_error}); restart attempt{when}"

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            if self.engine.query is None or self.engine.query_active():
                continue
            if self._stop.is_set():
                return
            jvm_status = jvm_exit_status(self.engine.spark)
            if self._shutting_down.is_set() or jvm_status is not None:
                self._give_up(jvm_status)
                return
            self._recover(self.engine.failure_reason())

    def _give_up(self, jvm_status: int | None) -> None:
        """A query that stopped when it cannot or must not be restarted: one line, no restart."""
        self.engine.degraded = True
        self.next_attempt_at = None
        self.gave_up = True
        if jvm_status is not None:
            self.last_error = f"Spark's JVM exited (status {jvm_status})"
        else:
            self.last_error = self.engine.failure_reason()
        if self._shutting_down.is_set():
            logger.warning("streaming query stopped during shutdown (%s); not restarted", self.last_error)
            return
        self.failures += 1
        logger.error(
            "streaming query terminated: %s; it cannot be restarted in this process", self.last_error
        )
        self.on_failed(
            ComputeError(
                "JobInvalidState",
                f"the streaming query stopped unexpectedly ({self.last_error}) and cannot be restarted",
                status_code=500,
            )
        )

    def _recover(self, reason: str) -> None:
        self.failures += 1
        self.last_error = reason
        logger.error("streaming query terminated: %s", reason)
        self.engine.degraded = True
        self.on_failed(
            ComputeError(
                "JobInvalidState",
                f"the streaming query stopped unexpectedly ({reason}); it is being restarted",
                status_code=500,
            )
        )
        # A query that dies again soon after a restart keeps backing off instead of starting over.
        stayed_up = time.monotonic() - self._recovered_at > 2 * self.max_delay
        delay = self.first_delay if stayed_up else min(self.max_delay, self._delay * 2)
        attempt = 1
        while True:
            self.next_attempt_at = time.time() + delay
            logger.info("restarting the streaming query in %.1fs (attempt %d)", delay, attempt)
            if self._stop.wait(delay) or self._shutting_down.is_set():
                return
            try:
                self.engine.recover()
                if not self.engine.query_active():
                    raise RuntimeError(self.engine.failure_reason())
            except Exception as exc:
                if self._shutting_down.is_set():
                    logger.warning("restarting the streaming query stopped by the shutdown: %s", exc)
                    return
                jvm_status = jvm_exit_status(self.engine.spark)
                if jvm_status is not None:
                    self.gave_up = True
                    self.next_attempt_at = None
                    self.last_error = f"Spark's JVM exited (status {jvm_status})"
                    logger.error("restarting the streaming query failed: %s; not retried", self.last_error)
                    return
                self.last_error = f"restart failed: {error_line(exc)}"
                delay = min(self.max_delay, delay * 2)
                # One line per attempt: an outage (the Kafka log away) fails every attempt the same
                # way, and a traceback each time told nothing new (issue 44). DEBUG keeps it.
                logger.warning(
                    "restarting the streaming query failed (attempt %d): %s; next attempt in %.1fs",
                    attempt,
                    self.last_error,
                    delay,
                )
                logger.debug("the restart's failure", exc_info=True)
                attempt += 1
                continue
            break
        self._delay = delay
        self._recovered_at = time.monotonic()
        self.next_attempt_at = None
        self.engine.degraded = False
        self.restarts += 1
        logger.info("streaming query restarted after %d attempt(s)", attempt)
        self.on_recovered()
