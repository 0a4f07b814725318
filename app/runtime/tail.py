"""`sparkwire tail`: follow a live computation from a terminal, as `nats sub` or `kcat` do.

    sparkwire tail --data-source ri.sparkwire.main.dataset.demo --channel engine.temp --group-by vehicle
    sparkwire tail --node request.json --table

A channel (`--data-source`, `--channel`, `--tag k=v`, `--group-by`, `--window`) or a compute request
given as JSON (`--node FILE`, or `-` for stdin): a `StreamingComputeNodeRequest` ({"node", "context",
"windowWidth"}) or just a `ComputableNode` over no variables. Each new point, bucket or range is
printed as a line (UTC timestamp, the group's tags, the value); `--table` instead keeps a small
table of the newest row per group, redrawn on each update. Ctrl+C (SIGINT) or SIGTERM ends it with
exit status 0. Built on the Python client (sparkwire_client, client/)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

HELP = "print a live computation's updates (a channel, or a compute node as JSON)"
NANOS = 1_000_000_000
EMPTY = "# nothing in the window yet (a mistyped channel or tag? GET /series lists what was written)"
CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear screen: the table is redrawn in place on a terminal


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the server's base URL")
    parser.add_argument("--data-source", help="data source rid of --channel")
    parser.add_argument("--channel", help="a channel to follow (double, or string with --enum)")
    parser.add_argument("--enum", action="store_true", help="--channel is a string channel")
    parser.add_argument(
        "--tag", action="append", default=[], metavar="K=V", help="select series by a tag (repeatable)"
    )
    parser.add_argument(
        "--group-by", action="append", default=[], metavar="TAG", help="one result per value of TAG"
    )
    parser.add_argument("--window", type=float, default=None, help="window in seconds (default 60)")
    parser.add_argument("--node", metavar="FILE|-", help="a compute request or node as JSON, instead")
    parser.add_argument("--table", action="store_true", help="a live table of the newest row per group")


def run(args: argparse.Namespace) -> int:
    """The exit status: 0 on Ctrl+C or the end of the stream, 1 on an error (one line on stderr)."""
    try:
        from sparkwire_client import Client  # noqa: F401 (checked here: the client is client/)
    except ImportError:
        print("sparkwire tail needs the Python client: pip install ./client", file=sys.stderr)
        return 1
    try:
        node, window = _computable(args)
    except (ValueError, OSError) as exc:
        print(f"sparkwire tail: error: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_follow(args.url, node, window, args.table, sys.stdout))
    except KeyboardInterrupt:
        return 0


def _computable(args: argparse.Namespace) -> tuple[Any, float]:
    from sparkwire_client import enum_channel, numeric_channel, series
    from sparkwire_client.nodes import Computable

    if args.node is not None:
        if args.channel or args.data_source or args.tag or args.group_by:
            raise ValueError(
                "--node takes the whole request: leave out --channel, --data-source, --tag, --group-by"
            )
        text = sys.stdin.read() if args.node == "-" else Path(args.node).read_text()
        try:
            given = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--node: not JSON ({exc})") from exc
        if not isinstance(given, dict):
            raise ValueError("--node: a JSON object is expected")
        return GivenRequest(given), _window(args.window, given)
    if not (args.channel and args.data_source):
        raise ValueError("give --data-source and --channel, or --node FILE")
    tags = {}
    for tag in args.tag:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise ValueError(f"--tag {tag!r}: expected K=V")
        tags[key] = value
    group_by = [g for spec in args.group_by for g in spec.split(",") if g]
    make = enum_channel if args.enum else numeric_channel
    node: Computable = series(make(args.data_source, args.channel, tags=tags, group_by=group_by))
    return node, args.window or 60.0


def _window(flag: float | None, given: dict[str, Any]) -> float:
    if flag is not None:
        return flag
    width = given.get("windowWidth")
    if isinstance(width, dict):
        return float(width.get("seconds", 0)) + float(width.get("nanos", 0)) / NANOS
    return 60.0


class GivenRequest:
    """A compute request given as JSON, sent as it is (only its window comes from `--window`)."""

    def __init__(self, given: dict[str, Any]) -> None:
        self.given = given if "node" in given else {"node": given, "context": {"variables": {}}}

    def request(self, window_seconds: float) -> dict[str, Any]:
        ns = round(window_seconds * NANOS)
        return {**self.given, "windowWidth": {"seconds": ns // NANOS, "nanos": ns % NANOS}}


async def _follow(url: str, node: Any, window: float, table: bool, out: TextIO) -> int:
    import websockets

    from sparkwire_client import Client, SubscriptionError

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    loop.add_signal_handler(signal.SIGTERM, task.cancel)  # as Ctrl+C: a clean end
    printer: TablePrinter | LinePrinter = TablePrinter(out) if table else LinePrinter(out)
    try:
        async with Client(url) as client:
            sub = await client.subscribe(node, window=window)
            try:
                async for view in sub:
                    if not sub.healthy:  # the compute tier or Spark's query is away: it comes back
                        print(f"# waiting for the server: {sub.outage}", file=sys.stderr, flush=True)
                        continue
                    rows = view.rows()
                    if not rows and not printer.said_empty:
                        printer.said_empty = True
                        print(EMPTY, file=sys.stderr, flush=True)
                    printer.show(rows)
            except SubscriptionError as exc:
                print(f"sparkwire tail: {exc}", file=sys.stderr)
                return 1
    except asyncio.CancelledError:
        return 0
    except (OSError, websockets.WebSocketException) as exc:  # refused, unreachable, not a server
        print(f"sparkwire tail: cannot reach {url}: {exc}", file=sys.stderr)
        return 1
    return 0


def _when(ns: int | None) -> str:
    if ns is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ns / NANOS, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ns % NANOS // 1000:06d}Z"


def _split(row: dict[str, Any]) -> tuple[str, int | None, str]:
    """(group, time, value) of a row of `View.rows()`; the group is its tags as k=v."""
    fields = {"timestamp", "value", "min", "max", "mean", "count", "variance", "histogram", "first"}
    fields |= {"start", "end"}
    group = " ".join(f"{k}={v}" for k, v in row.items() if k not in fields)
    if "start" in row:  # a range
        return group, row["start"], f"range {_when(row['start'])} .. {_when(row['end'])}"
    if "value" in row:
        value = row["value"]
        return group, row["timestamp"], f"{value:g}" if isinstance(value, float) else str(value)
    stats = [f"{k}={row[k]:g}" for k in ("mean", "min", "max") if isinstance(row.get(k), float)]
    stats += [f"{k}={row[k]}" for k in ("count", "first", "histogram") if k in row]
    return group, row.get("timestamp"), " ".join(stats)


class LinePrinter:
    """Each row not printed yet, as `time group value` (a bucket or range that changes is printed again)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.said_empty = False
        self.printed: dict[tuple[str, int | None], str] = {}

    def show(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            group, ns, value = _split(row)
            if self.printed.get((group, ns)) == value:
                continue
            self.printed[(group, ns)] = value
            self.out.write(" ".join(part for part in (_when(ns), group, value) if part) + "\n")
        self.out.flush()


class TablePrinter:
    """The newest row of each group, redrawn in place on a terminal (a block per update otherwise)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.said_empty = False
        self.terminal = out.isatty()

    def show(self, rows: list[dict[str, Any]]) -> None:
        newest: dict[str, tuple[int | None, str]] = {}
        for row in rows:
            group, ns, value = _split(row)
            if group not in newest or (ns or 0) >= (newest[group][0] or 0):
                newest[group] = (ns, value)
        lines = [("group", "time (UTC)", "value")]
        lines += [(group or "-", _when(ns), value) for group, (ns, value) in sorted(newest.items())]
        widths = [max(len(line[i]) for line in lines) for i in range(2)]
        text = "\n".join(f"{g:<{widths[0]}}  {t:<{widths[1]}}  {v}" for g, t, v in lines)
        with contextlib.suppress(BrokenPipeError):
            self.out.write((CLEAR if self.terminal else "") + text + "\n\n")
            self.out.flush()
