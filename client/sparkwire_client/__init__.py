"""Python client of Sparkwire: subscribe to live computations and read the merged window as a
pandas DataFrame or plain lists (`Client`), build compute nodes (`nodes`), write points (`Writer`)."""

from sparkwire_client import nodes
from sparkwire_client.client import Client, LateReport, Replay, Subscription, SubscriptionError, ws_url
from sparkwire_client.nodes import (
    enum_channel,
    first_point,
    last_point,
    numeric_channel,
    ranges,
    series,
)
from sparkwire_client.view import Range, View
from sparkwire_client.writer import WriteError, Writer

__all__ = [
    "Client",
    "LateReport",
    "Range",
    "Replay",
    "Subscription",
    "SubscriptionError",
    "View",
    "WriteError",
    "Writer",
    "enum_channel",
    "first_point",
    "last_point",
    "nodes",
    "numeric_channel",
    "ranges",
    "series",
    "ws_url",
]
