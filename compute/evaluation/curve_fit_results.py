"""The result of a curve fit (`ComputableNode` `curve` and `curveV2`), nominal-api's `CurveFitResult`
and `CurveFitResultV2`: the fit curve's coefficients and how well it fits the points it was fit to.
Computed once over a polled period (compute/evaluation/nodes/curve_fits.py); it has no append form."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CurveFitOutput:
    """`v2`: answered as `curveFitV2` (a `curveV2` request), else `curveFit`. `curve` names the
    `CurveResultDetails` variant: `polynomial` (`coefficients` a_0 ... a_n of y = sum(a_i x^i)),
    `exponential` (a, b of y = a e^(b x)), `logarithmic` (a, b of y = a ln(x) + b), `power` (a, b of
    y = a x^b) or `custom` (`parameters` by name, `converged`, `iterations`)."""

    v2: bool
    curve: str
    coefficients: tuple[float, ...]
    r2: float
    mae: float
    mse: float
    rmse: float
    max_absolute_error: float
    sample_count: int
    parameters: dict[str, float] = field(default_factory=dict)
    converged: bool = True
    iterations: int = 0
    kind = "curveFit"
    appendable = False

    def first_change(self, old: CurveFitOutput) -> int | None:
        return None if self == old else 0

    def since(self, start: int) -> CurveFitOutput:
        return self

    def __len__(self) -> int:
        return self.sample_count
