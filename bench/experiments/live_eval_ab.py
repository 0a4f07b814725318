"""Workload 2b's evaluation CPU, two trees against each other in lockstep
(docs/decisions/0067-live-evaluation-fixed-cost-per-computation.md).

    python -m bench.experiments.live_eval_ab BEFORE_DIR AFTER_DIR [batches=40]

Each DIR is a source tree (e.g. `git archive <commit> | tar -x -C DIR`) whose `compute` package is
measured with this tree's `bench.live_eval.Mix2b` set-up: one process per tree, both back-filled,
then fed the same micro-batches one at a time, alternating which goes first, so that both see the
machine in the same state batch by batch. Sequential runs of `bench.live_eval --mix2b` a minute
apart differed by up to 1.6x on the shared machine; in lockstep every batch is compared with its
twin. Reported: the mean (p50) CPU per micro-batch of the 1,000 in each tree, per kind, and the
ratio after / before, overall and batch by batch.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

KINDS = ("raw", "bucketed", "arithmetic", "ranges")

# Run in each child: the tree's `compute` first on the path, this tree's live_eval loaded by its file.
CHILD = """
import importlib.util, json, sys, time
sys.path.insert(0, sys.argv[1])
spec = importlib.util.spec_from_file_location("live_eval_here", sys.argv[2])
live_eval = sys.modules["live_eval_here"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(live_eval)
mix = live_eval.Mix2b.setup(1000)
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() != "go":
        break
    batch = mix.next_batch()
    spent = {}
    for kind, c in mix.built:
        own = {sid: r for sid, r in batch.items() if sid in c.routes}
        began = time.thread_time()
        c.apply_batch(own, mix.t)
        spent[kind] = spent.get(kind, 0.0) + (time.thread_time() - began) * 1000
    print(json.dumps(spent), flush=True)
"""


def main(argv: list[str]) -> None:
    trees = {"before": argv[0], "after": argv[1]}
    batches = int(argv[2].partition("=")[2]) if len(argv) > 2 else 40
    here = str(Path(__file__).resolve().parents[1] / "live_eval.py")
    procs = {
        arm: subprocess.Popen(
            [sys.executable, "-c", CHILD, tree, here],
            cwd=tree,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for arm, tree in trees.items()
    }
    for arm, proc in procs.items():
        assert proc.stdin is not None and proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"{arm}: the set-up failed")
    per_batch: dict[str, list[dict[str, float]]] = {arm: [] for arm in trees}
    for i in range(batches):
        for arm in list(trees) if i % 2 == 0 else list(trees)[::-1]:
            proc = procs[arm]
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
            per_batch[arm].append(json.loads(proc.stdout.readline()))
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    figures = {}
    for arm, rows in per_batch.items():
        totals = [sum(row.values()) for row in rows]
        figures[arm] = [statistics.fmean(totals), statistics.median(totals)] + [
            statistics.fmean(row[k] for row in rows) for k in KINDS
        ]
    lines = ["| tree | all, mean (p50) ms | " + " | ".join(KINDS) + " |", "|---|---|---|---|---|---|"]
    for arm, f in figures.items():
        lines.append(f"| {arm} | {f[0]:.1f} ({f[1]:.1f}) | " + " | ".join(f"{x:.1f}" for x in f[2:]) + " |")
    b, a = figures["before"], figures["after"]
    lines.append(
        f"| after / before | {a[0] / b[0]:.2f} ({a[1] / b[1]:.2f}) | "
        + " | ".join(f"{a[i] / b[i]:.2f}" for i in range(2, 6))
        + " |"
    )
    pairs = zip(per_batch["before"], per_batch["after"], strict=True)
    ratios = [sum(n.values()) / sum(o.values()) for o, n in pairs]
    lines.append(
        f"batch by batch, after / before: median {statistics.median(ratios):.2f}, "
        f"min {min(ratios):.2f}, max {max(ratios):.2f}"
    )
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
