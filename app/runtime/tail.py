"""`sparkwire tail`: follow a live computation from a terminal, as `nats sub` or `kcat` do.

A channel (--data-source, --channel, --tag k=v, --group-by, --window) or a compute request given as
JSON (--node FILE, or - for stdin): a StreamingComputeNodeRequest ({"node", "context",
"windowWidth"}) or just a ComputableNode over no variables.

Each new point, bucket or range is printed as a line: UTC time, the group's tags, the value. A
channel holding more points than --buckets (default: one per second of the window, at most 1000) is
shown as buckets (mean, min, max, count per bucket); a bucket is printed once it is complete. Of
what the window already holds, only the newest --last rows are printed first (--all: every one).
--table instead keeps a table of the newest row per group, redrawn on each update.

Notices go to stderr: why nothing arrives (a channel never written: the ones that were), and the
server going away and coming back. Ctrl+C (SIGINT) or SIGTERM ends it with exit status 0. Built on
the Python client (sparkwire_client, client/)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

HELP = "print a live computation's updates (a channel, or a compute node as JSON)"
NANOS = 1_000_000_000
DEFAULT_URL = "http://127.0.0.1:8000"
CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear screen: the table is redrawn in place on a terminal
MAX_BUCKETS = 1000  # the server's default raw limit: a larger count would send 1-point buckets
EXAMPLES = """examples:
  sparkwire tail --data-source ri.sparkwire.main.dataset.demo --channel engine.temp --group-by vehicle
  sparkwire tail --data-source ri.sparkwire.main.dataset.demo --channel drive.mode --enum --table
  sparkwire tail --node request.json --window 300
  sparkwire tail --url http://127.0.0.1:9000 ...   # a server started with `make run PORT=9000`
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # keep the examples' lines
    parser.epilog = EXAMPLES
    parser.add_argument("--url", default=DEFAULT_URL, help="the server's base URL (default: %(default)s)")
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
    parser.add_argument(
        "--buckets",
        type=int,
        default=None,
        metavar="N",
        help="raw points while the window holds at most N, N buckets beyond (default: one per second "
        f"of the window, at most {MAX_BUCKETS}); not with --node",
    )
    parser.add_argument(
        "--last",
        type=int,
        default=10,
        metavar="N",
        help="of the rows already in the window, print the newest N first (default: %(default)s)",
    )
    parser.add_argument("--all", action="store_true", help="print every row already in the window first")
    parser.add_argument("--node", metavar="FILE|-", help="a compute request or node as JSON, instead")
    parser.add_argument("--table", action="store_true", help="a live table of the newest row per group")


def default_buckets(window_seconds: float) -> int:
    """About one bucket a second: a 20 Hz channel reads as 1 s buckets of 20 points, not as 1-point
    buckets; a channel slower than 1 Hz stays raw points."""
    return max(1, min(MAX_BUCKETS, round(window_seconds)))


def run(args: argparse.Namespace) -> int:
    """The exit status: 0 on Ctrl+C or the end of the stream, 1 on an error (one line on stderr)."""
    try:
        from sparkwire_client import Client  # noqa: F401 (checked here: the client is client/)
    except ImportError:
        print("sparkwire tail needs the Python client: pip install ./client", file=sys.stderr)
        return 1
    try:
        node, window = _computable(args)
        if args.last < 0:
            raise ValueError(f"--last {args.last}: give 0 or more rows")
    except (ValueError, OSError) as exc:
        print(f"sparkwire tail: error: {exc}", file=sys.stderr)
        return 2
    backlog = None if args.all else args.last
    # the client logs its notices as warnings; tail prints them itself, as "# ..." lines on stderr
    logging.getLogger("sparkwire_client").addHandler(logging.NullHandler())
    printer: TablePrinter | LinePrinter = (
        TablePrinter(sys.stdout) if args.table else LinePrinter(sys.stdout, backlog)
    )
    try:
        return asyncio.run(_follow(args.url, node, window, printer))
    except KeyboardInterrupt:
        return 0


def _computable(args: argparse.Namespace) -> tuple[Any, float]:
    from sparkwire_client import enum_channel, numeric_channel, series
    from sparkwire_client.nodes import Computable

    if args.node is not None:
        if args.channel or args.data_source or args.tag or args.group_by or args.buckets is not None:
            raise ValueError(
                "--node takes the whole request: leave out --channel, --data-source, --tag, --group-by, "
                "--buckets"
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
    if args.buckets is not None and args.buckets < 1:
        raise ValueError(f"--buckets {args.buckets}: give 1 or more")
    tags = {}
    for tag in args.tag:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise ValueError(f"--tag {tag!r}: expected K=V")
        tags[key] = value
    group_by = [g for spec in args.group_by for g in spec.split(",") if g]
    make = enum_channel if args.enum else numeric_channel
    window = args.window or 60.0
    buckets = args.buckets or default_buckets(window)
    node: Computable = series(make(args.data_source, args.channel, tags=tags, group_by=group_by), buckets)
    return node, window


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


def _notice(text: str) -> None:
    print(f"# {text}", file=sys.stderr, flush=True)


async def _follow(url: str, node: Any, window: float, printer: TablePrinter | LinePrinter) -> int:
    import websockets

    from sparkwire_client import Client, SubscriptionError

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    loop.add_signal_handler(signal.SIGTERM, task.cancel)  # as Ctrl+C: a clean end
    try:
        async with Client(url) as client:
            watcher = asyncio.create_task(_watch_connection(client, url))
            sub = await client.subscribe(node, window=window)
            said: str | None = None
            try:
                async for view in sub:
                    if not sub.healthy:  # the compute tier or Spark's query is away: it comes back
                        _notice(f"waiting for the server: {sub.outage}")
                        continue
                    if sub.notice is not None and sub.notice != said:
                        said = sub.notice
                        _notice(sub.notice)
                    printer.show(view.rows())
            except SubscriptionError as exc:
                print(f"sparkwire tail: {exc}", file=sys.stderr)
                return 1
            finally:
                watcher.cancel()
    except asyncio.CancelledError:
        return 0
    except (OSError, websockets.WebSocketException) as exc:  # refused, unreachable, not a server
        print(f"sparkwire tail: cannot reach {url}: {exc}", file=sys.stderr)
        return 1
    return 0


async def _watch_connection(client: Any, url: str, every: float = 0.5, repeat: float = 30.0) -> None:
    """Say on stderr when the connection drops and when it is back (the client reconnects by itself,
    with backoff), and every `repeat` seconds while the server stays away."""
    state, away_since, said_at = client.state, 0.0, 0.0
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(every)
        now, previous, state = loop.time(), state, client.state
        if state == "reconnecting" and previous != "reconnecting":
            away_since = said_at = now
            _notice(f"lost the connection to {url}: reconnecting (the view resumes when it is back)")
        elif state == "reconnecting" and now - said_at >= repeat:
            said_at = now
            _notice(f"still waiting for {url} ({now - away_since:.0f} s)")
        elif state == "handing-over" and previous != "handing-over":
            _notice(f"the server at {url} is shutting down: moving to the next one")
        elif state == "open" and previous in ("reconnecting", "handing-over"):
            _notice(f"connected to {url} again")


def _when(ns: int | None) -> str:
    if ns is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ns / NANOS, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ns % NANOS // 1000:06d}Z"


VALUE_FIELDS = frozenset(
    {"timestamp", "value", "values", "min", "max", "mean", "count", "variance", "histogram", "first"}
    | {"start", "end"}
)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _split(row: dict[str, Any]) -> tuple[str, int | None, str]:
    """(group, time, value) of a row of `View.rows()`; the group is its tags as k=v."""
    group = " ".join(f"{k}={v}" for k, v in row.items() if k not in VALUE_FIELDS)
    if "start" in row:  # a range
        value = f" {_number(row['value'])}" if "value" in row else ""
        return group, row["start"], f"range {_when(row['start'])} .. {_when(row['end'])}{value}"
    if "value" in row:
        return group, row["timestamp"], _number(row["value"])
    if "histogram" in row:  # an enum bucket: its values by count, most frequent first
        counts = sorted(row["histogram"].items(), key=lambda kv: (-kv[1], kv[0]))
        text = ", ".join(f"{name}: {count}" for name, count in counts)
        first = f" (first {row['first']})" if row.get("first") is not None else ""
        return group, row.get("timestamp"), text + first
    if isinstance(row.get("values"), dict):  # a multivariate row
        return group, row.get("timestamp"), " ".join(f"{k}={_number(v)}" for k, v in row["values"].items())
    stats = [f"{k}={row[k]:g}" for k in ("mean", "min", "max") if isinstance(row.get(k), float)]
    stats += [f"count={row['count']}"] if "count" in row else []
    return group, row.get("timestamp"), " ".join(stats)


def _is_bucket(row: dict[str, Any]) -> bool:
    return "count" in row or "histogram" in row


class LinePrinter:
    """Each row not printed yet, as `time group value`, in time order. A bucket is printed once
    complete (a newer one of its group exists) and again only if it changes; a range or point that
    changes is printed again. Of the first view, only the newest `backlog` rows (None: all)."""

    def __init__(self, out: TextIO, backlog: int | None = None) -> None:
        self.out = out
        self.backlog = backlog
        self.first = True
        self.printed: dict[tuple[str, int | None], str] = {}  # what each row was printed as

    def show(self, rows: list[dict[str, Any]]) -> None:
        newest_bucket: dict[str, int] = {}
        for row in rows:
            if _is_bucket(row) and row.get("timestamp") is not None:
                group = _split(row)[0]
                newest_bucket[group] = max(newest_bucket.get(group, row["timestamp"]), row["timestamp"])
        seen: dict[tuple[str, int | None], str] = {}
        fresh: list[tuple[int, str, str]] = []
        for row in rows:
            group, ns, value = _split(row)
            if _is_bucket(row) and ns is not None and ns == newest_bucket.get(group):
                continue  # still filling: printed once complete
            seen[(group, ns)] = value
            if self.printed.get((group, ns)) != value:
                fresh.append((ns if ns is not None else -1, group, value))
        self.printed = seen  # a row out of the window never comes back: forget it
        fresh.sort()
        if self.first and self.backlog is not None:
            fresh = fresh[len(fresh) - self.backlog :] if self.backlog else []
        self.first = False
        with contextlib.suppress(BrokenPipeError):
            for ns, group, value in fresh:
                when = _when(None if ns == -1 else ns)
                self.out.write(" ".join(part for part in (when, group, value) if part) + "\n")
            self.out.flush()


class TablePrinter:
    """The newest row of each group, redrawn in place on a terminal (a block per update otherwise)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.terminal = out.isatty()
        self.shown = ""

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
        if text == self.shown:
            return  # nothing changed: no redraw
        self.shown = text
        with contextlib.suppress(BrokenPipeError):
            self.out.write((CLEAR if self.terminal else "") + text + "\n\n")
            self.out.flush()
