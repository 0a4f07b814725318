"""One workload run alone from the command line (`python -m bench.<workload> [--smoke] [--out FILE.md]
[--work DIR] [NAME=VALUE ...]`): its full or smoke plan with overrides, a work folder, and its
section written as markdown, its figures beside it as JSON."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bench.plan import with_overrides

P = TypeVar("P")


def run_alone(
    doc: str | None,
    plans: tuple[P, P],
    measure: Callable[[P, Path], Any],
    render: Callable[[Any], str],
    title: str,
    outs: tuple[str, str],
    log: Callable[[str], None],
    argv: list[str] | None = None,
) -> None:
    """`plans` and `outs`: (full, smoke); `measure(plan, work)` -> figures, `render(figures)` -> markdown."""
    full, smoke = plans
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--work", type=Path)
    parser.add_argument("overrides", nargs="*", help=f"NAME=VALUE fields of {type(full).__name__}")
    args = parser.parse_args(argv)
    plan = with_overrides(smoke if args.smoke else full, args.overrides)
    out = args.out or Path(outs[1] if args.smoke else outs[0])
    work = args.work or Path(tempfile.mkdtemp(prefix="sparkwire-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results = measure(plan, work)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    out.write_text(f"# {title}\n\n" + render(results))
    log(f"wrote {out}")
