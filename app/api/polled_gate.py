"""How many polled computations (Nominal's ComputeService, app/api/compute_service.py) run at once,
and for how long: each request's evaluations run on a pool of SPARKWIRE_MAX_POLLED_COMPUTATIONS
threads of their own, a request waits for one in a queue of at most SPARKWIRE_MAX_POLLED_QUEUE
(past it: 503 `Compute:ComputeBusy`), and a request still evaluating after
SPARKWIRE_POLLED_TIME_BUDGET_SECONDS is answered 503 `Compute:ComputeTimedOut` at once while its
thread is stopped at its next Python step (an exception raised in it, which its `finally` clauses
see: a running numpy or SQLite call ends first). Its slot is free once the thread has stopped, so
the pool's size holds (docs/decisions/0083-polars-export-and-polled-cost.md).

The threads are the pool's own, never the event loop's default executor: a stopping exception can
only reach a thread that runs polled work, and only while it runs it (a lock orders the stop
against the work's end)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from app.http.errors import HttpError

T = TypeVar("T")


class ComputationStopped(BaseException):
    """Raised in a polled computation's thread past its time budget (a BaseException, so that no
    `except Exception` on the way swallows it)."""


class _Job:
    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.lock = threading.Lock()
        self.thread: int | None = None
        self.finished = False

    def run(self) -> Any:
        with self.lock:
            self.thread = threading.get_ident()
        try:
            return self.fn()
        finally:
            with self.lock:
                self.finished = True

    def stop(self) -> bool:
        """Raise ComputationStopped in the job's thread if it still runs the job."""
        with self.lock:
            if self.thread is None or self.finished:
                return False
            done = ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.thread), ctypes.py_object(ComputationStopped)
            )
            return bool(done == 1)


class PolledGate:
    """The admission and time budget of polled computations, one per server (gate_of)."""

    def __init__(self, running: int, queued: int, budget_s: float) -> None:
        self.running, self.queued, self.budget_s = running, queued, budget_s
        self.pool = ThreadPoolExecutor(max_workers=running, thread_name_prefix="polled-compute")
        self.busy = 0  # requests holding a slot (evaluating, or stopping past their budget)
        self.waiting = 0
        self.stopped = 0  # requests stopped past their budget, since start
        self._slots: asyncio.Semaphore | None = None

    async def run(self, fn: Callable[[], T]) -> T:
        """`fn` (blocking) on the pool once a slot is free, answered within the time budget."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.running)
        slots = self._slots
        if slots.locked() and self.waiting >= self.queued:
            raise HttpError(
                503,
                f"{self.busy} polled computations run, this server's limit "
                f"(SPARKWIRE_MAX_POLLED_COMPUTATIONS), and {self.waiting} wait (SPARKWIRE_MAX_POLLED_QUEUE): "
                "try again later",
                name="Compute:ComputeBusy",
                params={
                    "running": str(self.busy),
                    "waiting": str(self.waiting),
                    "setting": "SPARKWIRE_MAX_POLLED_COMPUTATIONS",
                },
            )
        self.waiting += 1
        try:
            await slots.acquire()
        finally:
            self.waiting -= 1
        self.busy += 1
        job = _Job(fn)
        future = asyncio.get_running_loop().run_in_executor(self.pool, job.run)
        release = True
        try:
            started = time.monotonic()
            try:
                return await asyncio.wait_for(asyncio.shield(future), self.budget_s)
            except TimeoutError:
                pass
            except asyncio.CancelledError:  # the client went away: stop the work it asked for too
                if not future.done():
                    job.stop()
                    release = False
                    asyncio.get_running_loop().create_task(self._release_when_done(future))
                raise
            job.stop()
            self.stopped += 1
            release = False  # the slot is free once the thread has stopped (below)
            asyncio.get_running_loop().create_task(self._release_when_done(future))
            raise HttpError(
                503,
                f"the computation ran past this server's time budget of {self.budget_s:g} s "
                f"(SPARKWIRE_POLLED_TIME_BUDGET_SECONDS) and was stopped after "
                f"{time.monotonic() - started:.1f} s: ask for a shorter period or fewer computations",
                name="Compute:ComputeTimedOut",
                params={
                    "budgetSeconds": f"{self.budget_s:g}",
                    "setting": "SPARKWIRE_POLLED_TIME_BUDGET_SECONDS",
                },
            )
        finally:
            if release:
                self._release()

    def _release(self) -> None:
        self.busy -= 1
        assert self._slots is not None
        self._slots.release()

    async def _release_when_done(self, future: asyncio.Future[Any]) -> None:
        with contextlib.suppress(BaseException):
            await future
        self._release()


def gate_of(state: Any) -> PolledGate:
    """The server's gate (app/api/state.py: its settings max_polled_computations, max_polled_queue,
    polled_time_budget_seconds)."""
    gate: PolledGate = state.polled_gate
    return gate
