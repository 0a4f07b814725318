"""A reference for `contains` (nominal-api's ContainsSeries), written from nominal-api's docs and
independent of Sparkwire's evaluator (compute/evaluation/nodes/logs.py, builders/logs.py):

- ContainsSeries: "Maps each log line to 1.0 when `operator` matches it and 0.0 otherwise."
- LogRegexFilterOperator: "Matches a text value against the given re2 regular expression" (a match
  anywhere in the text; the tests use expressions RE2 and Python's `re` read alike).
- LogExactMatchCaseInsensitiveFilter: "the log message in each point contains an exact
  case-insensitive match of the provided token" (a whole token: not inside a longer run of ASCII
  letters and digits).
- LogArgFilterOperator: "Matches against a single log arg" (a line without the arg does not match).
- and / or / not: every, any, not.

An operator here is nominal-api's JSON (`{"type": ..., ...}`), as ConjureEncoder writes it."""

from __future__ import annotations

import re
import string
from typing import Any

ALNUM = set(string.ascii_letters + string.digits)


def has_token(message: str, token: str) -> bool:
    """The token occurs in the message, case-insensitively, with no ASCII letter or digit just
    before or after it."""
    text, wanted = message.lower(), token.lower()
    start = text.find(wanted)
    while start >= 0:
        end = start + len(wanted)
        before = text[start - 1] if start > 0 else " "
        after = text[end] if end < len(text) else " "
        if before not in ALNUM and after not in ALNUM:
            return True
        start = text.find(wanted, start + 1)
    return False


def matches(operator: dict[str, Any], message: str, args: dict[str, str]) -> bool:
    kind = operator["type"]
    inner = operator[kind]
    if kind == "regexFilter":
        return re.search(inner["regex"], message) is not None
    if kind == "exactMatchCaseInsensitiveFilter":
        return has_token(message, inner["token"])
    if kind == "arg":
        value = args.get(inner["key"]["literal"])
        return value is not None and re.search(inner["operator"]["regex"], value) is not None
    if kind == "and":
        return all(matches(o, message, args) for o in inner)
    if kind == "or":
        return any(matches(o, message, args) for o in inner)
    assert kind == "not", kind
    return not matches(inner, message, args)


def contains(
    operator: dict[str, Any], lines: list[tuple[int, str, dict[str, str]]]
) -> list[tuple[int, float]]:
    """(timestamp, 1.0 or 0.0) per log line (timestamp, message, args), the last line written at a
    timestamp standing for it (as a later point of a series does), in time order."""
    latest = {t: (message, args) for t, message, args in lines}
    return [(t, 1.0 if matches(operator, *latest[t]) else 0.0) for t in sorted(latest)]
