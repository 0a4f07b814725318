"""Builders of the log nodes: `contains` (NumericSeries), over a `LogSeries` compiled here, with its
`LogFilterOperator` compiled to a predicate of one log line (nodes/logs.py). Registered into
registry.py by their Conjure variant names when this module loads.

A `LogSeries` streams here only as far as `contains` needs: `raw` (a variable bound to a channel, a
series or a sub-computation reading one) and `channel`. Its other variants (selectLogs, union,
filter, ...) are refused as Nominal refuses every LogSeries: polling only, `LOG_SERIES`. When
polled (Nominal's ComputeService, the SDK's `search_logs`), `Series.log` is built, and `filter`
too: the lines its operator matches (nodes/logs.py `FilterLines`), answered in pages.

The operators, as nominal-api documents them (docs/decisions/0071-log-points.md):
- `regexFilter`: the message holds a match of the re2 regular expression (RE2's partial match,
  read by Google's re2 itself, so its syntax and its linear time are RE2's);
- `exactMatchCaseInsensitiveFilter`: the message holds the token, case-insensitively (Unicode lower
  case), as a whole token: bounded on each side by the message's edge or a character other than an
  ASCII letter or digit ("err" matches "ERR: disk" and "disk err", not "error"); an empty token
  matches every line (the nominal SDK's `search_logs` sends one when it is given no match);
- `arg`: the arg named `key` is present and holds a match of its regular expression;
- `and` / `or` / `not`: every / any / not the operand(s) (an empty `and` matches, an empty `or`
  does not)."""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import re2
from re2 import _re2

from compute.evaluation.compiler import registry
from compute.evaluation.compiler.builder import Builder
from compute.evaluation.compiler.registry import builds, polls
from compute.evaluation.errors import MalformedNode, not_supported, polling_only
from compute.evaluation.nodes import SeriesNode
from compute.evaluation.nodes.logs import Contains, FilterLines, LineFilter

Json = Any
B = Builder

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad expression is refused by name, not logged by RE2 to stderr
_UNANCHORED = _re2.RE2.Anchor.UNANCHORED
_NO_MATCH = (-1, -1)
_TOKEN_CHARACTERS = frozenset(string.ascii_letters + string.digits)

# LogSeries variants that stream (for contains), by how each reads its channel
_LOG_READS = {
    "raw": lambda b, v: b.channel_input(v, "log"),
    "channel": lambda b, v: b.channel_series(v, "log"),
}


def log_series(b: B, value: Json) -> SeriesNode:
    """A `LogSeries` that reads a log channel (polled: also its lines a `filter` keeps), or
    PollingOnlyComputation `LOG_SERIES` by name."""
    kind, inner = b.variant("LogSeries", value)
    if kind == "filter" and b.polled:
        o = b.obj(inner, "LogFilterSeries")
        with b.budget:
            lines = log_series(b, b.get(o, "input", "LogFilterSeries"))
            return FilterLines(lines, line_filter(b, b.get(o, "operator", "LogFilterSeries")))
    read = _LOG_READS.get(kind)
    if read is None and b.polled and kind in registry.polled("LogSeries"):  # builders/log_series.py
        with b.budget:
            polled: SeriesNode = registry.builder("LogSeries", kind, polled=True)(b, inner)
        return polled
    if read is None and b.polled:  # every LogSeries variant of nominal-api 0.1505.0 has a builder
        raise not_supported(f"LogSeries '{kind}' is not computed by Sparkwire when polled", kind)
    if read is None:
        raise polling_only(f"LogSeries '{kind}' supports polling only", "LOG_SERIES")
    with b.budget:
        node: SeriesNode = read(b, inner)
    return node


def _regex(pattern: Json, what: str) -> Callable[[str], bool]:
    """Whether a text holds a match of the RE2 expression. RE2's own binding is called directly
    (`_re2.RE2.Match` on the UTF-8 bytes): re2's Python wrapper turns every match's byte offsets
    back into character offsets, which this test needs not, and which cost ~4x the match itself."""
    if not isinstance(pattern, str):
        raise MalformedNode(f"{what}.regex must be a string")
    regexp = _re2.RE2(pattern.encode(), _OPTIONS)
    if not regexp.ok():
        raise not_supported(
            f"{what}.regex {pattern[:200]!r} is not an RE2 regular expression: {regexp.error()}",
            what,
            field="regex",
        )
    match = regexp.Match

    def holds_match(text: str) -> bool:
        data = text.encode()
        return bool(match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH)

    return holds_match


def _has_token(token: str) -> Callable[[str], bool]:
    """Whether a text holds the token, case-insensitively (Unicode lower case), as a whole token:
    the characters just before and after it, if any, are not ASCII letters or digits."""
    wanted = token.lower()

    def holds_token(text: str) -> bool:
        lower = text.lower()
        start = lower.find(wanted)
        while start >= 0:
            end = start + len(wanted)
            if (start == 0 or lower[start - 1] not in _TOKEN_CHARACTERS) and (
                end == len(lower) or lower[end] not in _TOKEN_CHARACTERS
            ):
                return True
            start = lower.find(wanted, start + 1)
        return False

    return holds_token


def line_filter(b: B, value: Json) -> LineFilter:
    """A `LogFilterOperator` as a predicate of one line's (message, args)."""
    kind, inner = b.variant("LogFilterOperator", value)
    with b.budget:
        return _line_filter(b, kind, inner)


def _line_filter(b: B, kind: str, inner: Json) -> LineFilter:
    if kind == "regexFilter":
        search = _regex(b.get(b.obj(inner, kind), "regex", kind), kind)
        return lambda message, args: search(message)
    if kind == "exactMatchCaseInsensitiveFilter":
        token = b.get(b.obj(inner, kind), "token", kind)
        if not isinstance(token, str):
            raise MalformedNode(f"{kind}.token must be a string")
        if not token:  # what the nominal SDK's search_logs sends for no match asked: every line
            return lambda message, args: True
        holds_token = _has_token(token)
        return lambda message, args: holds_token(message)
    if kind == "arg":
        o = b.obj(inner, "LogArgFilterOperator")
        key = b.string_constant(b.get(o, "key", "LogArgFilterOperator"))
        operator = b.obj(b.get(o, "operator", "LogArgFilterOperator"), "LogRegexFilterOperator")
        arg_search = _regex(b.get(operator, "regex", "LogRegexFilterOperator"), "arg.operator")

        def arg_matches(message: str, args: dict[str, str]) -> bool:
            value = args.get(key)
            return value is not None and arg_search(value)

        return arg_matches
    if kind == "not":
        negated = line_filter(b, inner)
        return lambda message, args: not negated(message, args)
    if not isinstance(inner, list):
        raise MalformedNode(f"LogFilterOperator.{kind} must be a list of operators")
    operands = [line_filter(b, operand) for operand in inner]
    if kind == "and":
        return lambda message, args: all(f(message, args) for f in operands)
    return lambda message, args: any(f(message, args) for f in operands)


@builds("NumericSeries", "contains")
def _contains(b: B, v: Json) -> SeriesNode:
    what = "contains"
    o = b.obj(v, what)
    x = log_series(b, b.get(o, "input", what))
    return Contains(x, line_filter(b, b.get(o, "operator", what)))


@polls("Series", "log")
def _polled_log(b: B, v: Json) -> SeriesNode:
    """A log series polled (Nominal's `search_logs`: its lines in pages, builders/numeric.py's
    `series` root allowing the page strategy only over one)."""
    return log_series(b, v)
