"""Conjure JSON building blocks shared by every message: camelCase objects, Timestamp, Duration, errors."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator
from pydantic.alias_generators import to_camel

from schemas.timestamps import NANOS_PER_SECOND, to_nanos


def absent_nulls(value: Any) -> Any:
    """The JSON with every object member whose value is `null` left out. Conjure reads a present
    `null` as an absent optional field, and nominal-api's Python encoder writes every unset optional
    as `null` (`{"input": ..., "timeUnit": null}`): one rule for the whole message, applied once where
    it is decoded, so no reader downstream has to tell the two apart. List items stay as they are.
    Callers bound the nesting first (app/protocol/limits.py), so the recursion is shallow."""
    if isinstance(value, dict):
        return {k: absent_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [absent_nulls(v) for v in value]
    return value


class ConjureModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown keys are ignored as Conjure clients do."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class Timestamp(ConjureModel):
    seconds: int
    nanos: int = Field(ge=0, lt=NANOS_PER_SECOND)

    def to_nanos(self) -> int:
        return to_nanos(self.seconds, self.nanos)


class Duration(ConjureModel):
    """`scout.run.api.Duration`: the window width and the allowed lateness."""

    seconds: int
    nanos: int = Field(default=0, ge=0, lt=NANOS_PER_SECOND)

    def to_nanos(self) -> int:
        return to_nanos(self.seconds, self.nanos)


class SerializableError(ConjureModel):
    name: str
    message: str | None = None
    error_instance_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    status_code: int = 400
    params: dict[str, str] = Field(default_factory=dict)


class ConjureUnion(BaseModel):
    """`{"type": "<variant>", "<variant>": value}`: kept as raw JSON, checked for the union's shape.

    Compute nodes stay raw so that the compiler (compute/) can tell a valid Nominal node that Sparkwire
    does not evaluate (an honest `InvalidComputation`) from a malformed message.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    type: str

    @model_validator(mode="before")
    @classmethod
    def _variant_present(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise ValueError("a Conjure union needs a string 'type'")
        if data["type"] not in data:
            raise ValueError(f"union variant '{data['type']}' has no '{data['type']}' value")
        return data

    @property
    def value(self) -> JsonValue:
        return (self.model_extra or {})[self.type]

    def as_json(self) -> dict[str, JsonValue]:
        return {"type": self.type, self.type: self.value}
