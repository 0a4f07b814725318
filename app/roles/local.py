"""The hub's computations when Spark runs in this process (`--role all`): the engine's own."""

from __future__ import annotations

import asyncio

from app.hub import LiveResult
from compute.evaluation.compiler import Plan
from compute.evaluation.computation import Computation
from compute.evaluation.request import ComputationRequest
from compute.spark.engine import Engine


class LocalComputations:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def ready(self) -> bool:
        return self.engine.running

    def find(self, key: str) -> LiveResult | None:
        return self.engine.find(key)

    async def add(self, request: ComputationRequest, plan: Plan) -> LiveResult:
        computation = Computation(request.key, plan, request.allowed_lateness_ns)
        return await asyncio.to_thread(self.engine.add, computation)  # back-fill: log reads, Spark

    def remove(self, result: LiveResult) -> None:
        assert isinstance(result, Computation)
        self.engine.remove(result)

    def count(self) -> int:
        return len(self.engine.computations())
