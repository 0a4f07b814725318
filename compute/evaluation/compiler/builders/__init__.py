"""The builders, one module per family of Nominal's compute language. Each registers its variants
into registry.py as it loads; loading this package loads them all. No builder module imports
another (tests/unit/test_compile_registry.py): what two families share is in builder.py or
helpers.py."""

from compute.evaluation.compiler.builders import (
    charts,
    composite,
    cross_group,
    curve_fits,
    derived,
    events,
    fluids,
    frequency,
    log_series,
    logs,
    lttb_paging,
    numeric,
    on_request,
    properties,
    ranges,
    refusals,
    signal_filters,
    streamed,
    tag_intervals,
)

__all__ = [
    "charts",
    "composite",
    "cross_group",
    "curve_fits",
    "derived",
    "events",
    "fluids",
    "frequency",
    "log_series",
    "logs",
    "lttb_paging",
    "numeric",
    "on_request",
    "properties",
    "ranges",
    "refusals",
    "signal_filters",
    "streamed",
    "tag_intervals",
]
