"""Errors as values, with Nominal's names: they travel to clients as SerializableErrors."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ComputeError(Exception):
    name: str  # without the "PersistentCompute:" prefix
    message: str
    params: dict[str, str] = field(default_factory=dict)
    status_code: int = 400

    def __str__(self) -> str:
        return f"{self.name}: {self.message}"


def invalid_computation(message: str, types: str) -> ComputeError:
    return ComputeError("InvalidComputation", message, {"invalidTypes": types})


def polling_only(message: str, types: str) -> ComputeError:
    return ComputeError("PollingOnlyComputation", message, {"pollingOnlyTypes": types})
