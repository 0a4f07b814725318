"""Builder of `NumericSeries.signalFilter` (evaluator in nodes/signal_filters.py), registered to be
built only when polled (ComputeService): a live subscription still gets Nominal's
`PollingOnlyComputation` `SIGNAL_FILTER` (builders/refusals.py)."""

from __future__ import annotations

import math
from typing import Any

from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.helpers import one_of
from compute.evaluation.compiler.registry import polls
from compute.evaluation.errors import refuse
from compute.evaluation.nodes.signal_filters import BTYPES, MAX_ORDER, SignalFilter

Json = Any

# each SignalFilterConfiguration variant's frequency fields, in (low, high) order
FREQUENCIES = {
    "lowPass": ("cutoffFrequency",),
    "highPass": ("cutoffFrequency",),
    "bandPass": ("lowPassbandFrequency", "highPassbandFrequency"),
    "bandStop": ("lowStopbandFrequency", "highStopbandFrequency"),
}


@polls("NumericSeries", "signalFilter")
def signal_filter(b: Builder, value: Json) -> SignalFilter:
    what = "SignalFilterSeries"
    o = b.obj(value, what)
    x = b.timed(b.numeric(b.get(o, "input", what)), "signalFilter")
    kind, config = one_of(
        b.get(o, "signalFilterConfiguration", what), "SignalFilterConfiguration", tuple(FREQUENCIES)
    )
    co = b.obj(config, kind)
    cutoffs = tuple(b.double_constant(b.get(co, name, kind)) for name in FREQUENCIES[kind])
    for f in cutoffs:
        if not (f > 0 and math.isfinite(f)):
            raise refuse("signalFilter", kind, f"a cutoff frequency must be a positive number, got {f}")
    order = b.integer_constant(b.get(o, "order", what))
    if not 1 <= order <= MAX_ORDER:  # "Must be a positive integer"
        raise refuse("signalFilter", "order", f"must be between 1 and {MAX_ORDER}, got {order}")
    fs = None if o.get("samplingFrequency") is None else b.double_constant(o["samplingFrequency"])
    if fs is not None and not (fs > 0 and math.isfinite(fs)):
        raise refuse("signalFilter", "samplingFrequency", f"must be a positive number, got {fs}")
    return SignalFilter(x, BTYPES[kind], cutoffs, order, fs, live=b.streamed)
