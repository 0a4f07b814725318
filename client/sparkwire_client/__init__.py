"""Python client of Sparkwire: subscribe to live computations and read the merged window as a
pandas DataFrame or plain lists (`Client`), build compute nodes (`nodes`), write points (`Writer`)."""

from sparkwire_client import charts, nodes, range_nodes
from sparkwire_client.assets import Catalog, CatalogError, DataScope
from sparkwire_client.client import Client, LateReport, Replay, Subscription, SubscriptionError, ws_url
from sparkwire_client.compute import ComputeError, compute, compute_frame
from sparkwire_client.modules import Modules, derived_enum, derived_numeric, derived_ranges
from sparkwire_client.nodes import (
    asset_channel,
    curve_fit,
    enum_channel,
    expression,
    first_point,
    fluid_property,
    if_else,
    last_point,
    numeric_channel,
    ranges,
    raw_node,
    run_channel,
    series,
    spectrum,
)
from sparkwire_client.view import Range, View
from sparkwire_client.writer import WriteError, Writer

__all__ = [
    "Catalog",
    "CatalogError",
    "Client",
    "ComputeError",
    "DataScope",
    "LateReport",
    "Modules",
    "Range",
    "Replay",
    "Subscription",
    "SubscriptionError",
    "View",
    "WriteError",
    "Writer",
    "asset_channel",
    "charts",
    "compute",
    "compute_frame",
    "curve_fit",
    "derived_enum",
    "derived_numeric",
    "derived_ranges",
    "enum_channel",
    "expression",
    "first_point",
    "fluid_property",
    "if_else",
    "last_point",
    "nodes",
    "numeric_channel",
    "range_nodes",
    "ranges",
    "raw_node",
    "run_channel",
    "series",
    "spectrum",
    "ws_url",
]
