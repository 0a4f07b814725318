"""Log nodes: `contains` (nominal-api's ContainsSeries), "maps each log line to 1.0 when `operator`
matches it and 0.0 otherwise", over a log channel's lines (results.LogPoints).

A `LogFilterOperator` is compiled (builders/logs.py) to a `LineFilter`, a predicate of one line's
message and args. A line is judged once per distinct text: a live computation codes its log lines
as an enum channel's labels, so the judgement is kept by label and a batch costs its new labels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from compute.evaluation.errors import ComputeError
from compute.evaluation.nodes.base import EvalEnv, Node, PointByPoint, Series, SeriesNode, log_lines
from compute.evaluation.results import LogPoints, NumericPoints
from compute.storage.log_lines import read_log_text

# one log line's (message, args) -> whether the operator matches it
LineFilter = Callable[[str, dict[str, str]], bool]

MAX_KEPT_JUDGEMENTS = 100_000  # distinct lines whose judgement is kept; past it the memo starts over


@dataclass
class Contains(PointByPoint):
    """`contains`: 1.0 at each log line the filter matches, 0.0 at the others (one point per line)."""

    input: SeriesNode
    matches: LineFilter
    # the judgement of each line seen, by its stored text (compute/storage/log_lines.py)
    judged: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    def apply(self, x: Series) -> NumericPoints:
        lines = log_lines(x, "contains")
        judged = self.judged
        if len(judged) > MAX_KEPT_JUDGEMENTS:
            judged.clear()
        return NumericPoints(lines.ts, matching(lines, self.matches, judged).astype(np.float64))


@dataclass
class FilterLines(SeriesNode):
    """`LogSeries.filter` (LogFilterSeries), built only when polled: the log lines `matches` holds
    for, with their timestamps (Nominal's `search_logs` pages through them)."""

    POLLED_ONLY = True
    input: SeriesNode
    matches: LineFilter

    def children(self) -> Sequence[Node]:
        return (self.input,)

    def evaluate(self, env: EvalEnv) -> LogPoints:
        lines = log_lines(self.input.evaluate(env), "filter")
        keep = matching(lines, self.matches, {})
        return LogPoints(lines.ts[keep], lines.codes[keep], lines.categories)


def matching(lines: LogPoints, matches: LineFilter, judged: dict[str, bool]) -> np.ndarray:
    """Whether `matches` holds for each line, each distinct line (label) judged once; `judged`
    keeps the judgements by stored text across calls."""
    if not len(lines):
        return np.empty(0, bool)
    codes, index = np.unique(lines.codes, return_inverse=True)
    per_code = np.empty(len(codes), bool)
    for i, code in enumerate(codes.tolist()):
        text = lines.categories[code]
        value = judged.get(text)
        if value is None:
            value = judged[text] = matches(*_line(text))
        per_code[i] = value
    return per_code[index.reshape(-1)]


def _line(text: str) -> tuple[str, dict[str, str]]:
    """A stored log line's (message, args); a label of a string series that one selector reads
    beside a log series of the same channel (other tags) is no log line, and is refused by name."""
    try:
        message, args = read_log_text(text)
    except (ValueError, TypeError):
        message, args = None, None
    if not isinstance(message, str) or not isinstance(args, dict):
        raise ComputeError(
            "InvalidComputation",
            f"contains reads a channel whose series are not all log series (a label {text[:64]!r})",
            {"invalidTypes": "", "variant": "contains"},
        )
    return message, args
