"""Errors as values, with Nominal's names: they travel to clients as SerializableErrors.

`invalidTypes` and `pollingOnlyTypes` are Nominal's enum-typed params (persistent_compute_api's
InvalidComputationType / PollingOnlyComputationType): they hold one of those values, or nothing
(the empty set) when Sparkwire refuses something Nominal itself streams; what is refused is then
named by other params (`variant`, `field`, `variable`, ...). A ComputeError built with anything
else there (a node's own name) is normalized as it is made: the name moves to `variant` and the
enum param is left empty, so no refusal puts a non-enum value on the wire, whoever wrote it."""

from __future__ import annotations

from dataclasses import dataclass, field

from compute.evaluation.nominal_variants import ENUMS

ENUM_PARAMS = {"invalidTypes": "InvalidComputationType", "pollingOnlyTypes": "PollingOnlyComputationType"}


@dataclass(frozen=True)
class ComputeError(Exception):
    name: str  # without the "PersistentCompute:" prefix
    message: str
    params: dict[str, str] = field(default_factory=dict)
    status_code: int = 400

    def __post_init__(self) -> None:
        for param, enum in ENUM_PARAMS.items():
            value = self.params.get(param)
            if value and value not in ENUMS[enum]:
                self.params[param] = ""
                self.params.setdefault("variant", value)

    def __str__(self) -> str:
        return f"{self.name}: {self.message}"


def invalid_computation(message: str, types: str, **params: str) -> ComputeError:
    """What Nominal cannot stream either: `types` is its InvalidComputationType value."""
    return ComputeError("InvalidComputation", message, {"invalidTypes": types, **params})


def polling_only(message: str, types: str) -> ComputeError:
    return ComputeError("PollingOnlyComputation", message, {"pollingOnlyTypes": types})


def not_supported(message: str, variant: str, **params: str) -> ComputeError:
    """What Nominal streams and Sparkwire refuses: InvalidComputationType has no value for it, so
    `invalidTypes` is empty and `variant` names the node, dataset or setting (`field` the part of it,
    where one is at fault)."""
    return ComputeError("InvalidComputation", message, {"invalidTypes": "", "variant": variant, **params})


def refuse(variant: str, field: str, why: str) -> ComputeError:
    """The one refusal of a valid node's setting Sparkwire does not stream (`not_supported` with the
    field at fault): the message names `variant.field` unless `why` already starts with the variant."""
    message = why if why.startswith(variant) else f"{variant}.{field}: {why}"
    return not_supported(message, variant, field=field)


class MalformedNode(ValueError):
    """Not a Nominal node at all: the client message is invalid (clientMessageError)."""
