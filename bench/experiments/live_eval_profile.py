"""Where workload 2b's evaluation CPU goes, per kind of computation: cProfile of `bench.live_eval
--mix2b`'s set-up (docs/decisions/0067-live-evaluation-fixed-cost-per-computation.md).

In process, no server and no Spark: the 1,000 computations back-filled with 70 s, then `batches`
micro-batches of 100 ms of all 10 channels, each computation handed its own series' rows as the
driver hands them. One profiler per kind, enabled only while that kind's computations apply a
batch. Reported per kind: the profiled CPU per micro-batch (cProfile inflates Python calls, so
compare shares, not milliseconds, with live_eval's), and the share of it each stage takes
(inclusive time):
- `window`: the rows merged into the computation's windows and trimmed (`Computation._apply`,
  `SeriesWindow.trim_before`): what windows shared by a series' readers could save at most;
- `evaluate`: the root's update (the nodes, the held output's splice, the bucket memo);
- `memo`: the bucket memo's re-bucketing of the window's edges (part of `evaluate`);
- `diff`: the comparison with the previous output that yields the AppendResult.
and the Python and numpy function calls per computation and micro-batch (deterministic, unlike the
CPU figures on a shared machine; slicing and other C-level work is not counted).
With `top=N`, each kind's N functions with the most time of their own.

Run: python -m bench.experiments.live_eval_profile [batches=10] [computations=1000] [top=0]
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

from bench.live_eval import Mix2b

STAGES = {
    "window": ("_apply", "trim_before"),
    "evaluate": ("update_groups",),
    "memo": ("_reuse",),
    "diff": ("_diff",),
}


def main(argv: list[str]) -> None:
    options = {"batches": 10, "computations": 1000, "top": 0}
    for item in argv:
        name, _, value = item.partition("=")
        options[name] = int(value)
    mix2b = Mix2b.setup(options["computations"])
    kinds = sorted({kind for kind, _ in mix2b.built})
    profiles = {kind: cProfile.Profile() for kind in kinds}
    cpu = dict.fromkeys(kinds, 0.0)
    for _ in range(options["batches"]):
        batch = mix2b.next_batch()
        for kind, c in mix2b.built:
            own = {sid: r for sid, r in batch.items() if sid in c.routes}
            profile = profiles[kind]
            began = time.thread_time()
            profile.enable()
            c.apply_batch(own, mix2b.t)
            profile.disable()
            cpu[kind] += time.thread_time() - began
    for kind in kinds:
        stats = pstats.Stats(profiles[kind])
        total = stats.total_tt  # type: ignore[attr-defined]
        raw = stats.stats  # type: ignore[attr-defined]
        shares = {
            stage: sum(v[3] for key, v in raw.items() if key[2] in names) / total
            for stage, names in STAGES.items()
        }
        calls = stats.total_calls / options["batches"] / sum(k == kind for k, _ in mix2b.built)  # type: ignore[attr-defined]
        sys.stdout.write(
            f"{kind}: {cpu[kind] * 1000 / options['batches']:.1f} ms per micro-batch (profiled), "
            f"{calls:.0f} function calls per computation and micro-batch; "
            + ", ".join(f"{stage} {share:.0%}" for stage, share in shares.items())
            + "\n"
        )
        if options["top"]:
            stats.sort_stats("tottime").print_stats(options["top"])


if __name__ == "__main__":
    main(sys.argv[1:])
