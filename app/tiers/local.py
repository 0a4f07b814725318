"""The hub's computations when Spark runs in this process (`--role all`): the engine's own."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from app.fanout.hub import LiveResult
from compute.evaluation.compiler.plan import Plan
from compute.evaluation.computation import Computation
from compute.evaluation.request import ComputationRequest
from compute.spark.engine import Engine

# An add holds its thread until its back-fill is done. On the loop's default executor (cores + 4
# threads) a burst of subscriptions reached the back-fill queue a few at a time, read in several
# rounds instead of sharing one (20 at once: 5 rounds).
ADD_WORKERS = 64


class LocalComputations:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._pool = ThreadPoolExecutor(ADD_WORKERS, thread_name_prefix="sparkwire-add")

    @property
    def ready(self) -> bool:
        return self.engine.running

    def find(self, key: str) -> LiveResult | None:
        return self.engine.find(key)

    async def add(self, request: ComputationRequest, plan: Plan) -> LiveResult:
        computation = Computation(request.key, plan, request.allowed_lateness_ns)
        loop = asyncio.get_running_loop()  # back-fill: log reads, Spark
        return await loop.run_in_executor(self._pool, self.engine.add, computation)

    def remove(self, result: LiveResult) -> None:
        assert isinstance(result, Computation)
        self.engine.remove(result)

    def count(self) -> int:
        return len(self.engine.computations())
