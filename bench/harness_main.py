"""What a scale benchmark's `main` does around its run, shared by bench/scale_out.py and
bench/sharded_compute.py: a file limit for the clients' sockets, a work folder, SIGTERM as an exit,
the machine and code measured, every process stopped whatever happens, and the report and its JSON
written."""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from bench.machine import describe_machine
from bench.plan import with_overrides
from bench.serverproc import ROOT

Json = Any


class Run(Protocol):
    results: dict[str, Json]

    def run(self) -> None: ...

    def cleanup(self) -> None: ...


def main(
    argv: list[str] | None,
    module: str,
    doc: str | None,
    plans: tuple[Any, Any],
    reports: tuple[str, str],
    make: Callable[[Any, Path], Run],
    render: Callable[[Json], str],
    log: Callable[[str], None],
) -> None:
    """`python -m bench.MODULE [--smoke] [--out REPORT] [--work DIR] [NAME=VALUE ...]`: `plans` and
    `reports` are (full, smoke); a smoke report goes into data/bench-smoke/, the JSON beside it."""
    parser = argparse.ArgumentParser(
        prog=f"python -m bench.{module}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--smoke", action="store_true", help="a run of a few minutes at a tiny load")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"the report (default {reports[0]}; --smoke: data/bench-smoke/{reports[1]}); the JSON beside it",
    )
    parser.add_argument("--work", type=Path, default=None, help="keep logs and raw records here")
    parser.add_argument("overrides", nargs="*", metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    plan = with_overrides(plans[1] if args.smoke else plans[0], args.overrides)
    out: Path = args.out or (ROOT / "data" / "bench-smoke" / reports[1] if args.smoke else ROOT / reports[0])
    command = " ".join([f"python -m bench.{module}", *(["--smoke"] if args.smoke else []), *args.overrides])
    run_and_report(command, out, args.work, lambda work: make(plan, work), render, log)


def run_and_report(
    command: str,
    out: Path,
    work: Path | None,
    make: Callable[[Path], Run],
    render: Callable[[Json], str],
    log: Callable[[str], None],
) -> None:
    """`command`: how to reproduce the run (in the report); `work`: kept if given, else a temporary
    folder removed after a successful run."""
    from bench.scale_out import code_state

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # children inherit: the clients' sockets
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    folder = (work or Path(tempfile.mkdtemp(prefix="sparkwire-bench-"))).resolve()
    folder.mkdir(parents=True, exist_ok=True)

    def on_term(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    run = make(folder)
    started = time.time()
    run.results["machine"] = describe_machine()
    run.results["started"] = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started))
    run.results["command"] = command
    run.results["code"] = code_state()
    ok = False
    try:
        run.run()
        ok = True
    except KeyboardInterrupt:
        log("interrupted")
        raise SystemExit(130) from None
    finally:
        run.cleanup()
        if not ok:
            log(f"failed; logs and records kept in {folder}")
    run.results["duration_s"] = round(time.time() - started)
    run.results["code_at_end"] = code_state()
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path = out.with_suffix(".json")
    run.results["json_name"] = json_path.name
    json_path.write_text(json.dumps(run.results, indent=1, default=str))
    out.write_text(render(run.results))
    log(f"wrote {out} and {json_path.name} in {run.results['duration_s']} s (records in {folder})")
    if work is None:
        shutil.rmtree(folder, ignore_errors=True)
