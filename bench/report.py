"""BENCHMARKS.md from a run's results: machine, date, every figure, targets met or missed (by how
much, with the run's own evidence for why), and the command that reproduces it."""

from __future__ import annotations

import math
from typing import Any

from bench.baselines import DIED
from bench.ingest_ceiling import kept_section

Json = Any


def _ms(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.0f} ms"


def _lat_row(name: str, lat: Json, usage: Json | None = None, extra: str = "") -> str:
    u = usage or {}
    cpu = f"{u['cpu_cores']:.2f}" if "cpu_cores" in u else "-"
    rss = f"{u['rss_max_mb']:,.0f} / {u['rss_main_max_mb']:,.0f}" if "rss_max_mb" in u else "-"
    cells = [
        name,
        f"{lat.get('n', 0):,}",
        *(_ms(lat.get(k)) for k in ("p50_ms", "p99_ms", "max_ms")),
        cpu,
        rss,
        extra,
    ]
    return "| " + " | ".join(cells) + " |"


LAT_HEAD = [
    "| what | samples | p50 | p99 | max | server CPU (cores) | server RSS MB (all / main process) | notes |",
    "|---|---|---|---|---|---|---|---|",
]


def _verdict(measured: float | None, target: float, higher_is_better: bool = False) -> str:
    if measured is None or (isinstance(measured, float) and math.isnan(measured)):
        return "not measured"
    ok = measured >= target if higher_is_better else measured <= target
    if ok:
        return "met"
    if higher_is_better:
        return f"missed: {measured / target:.0%} of the target ({target - measured:,.0f} short)"
    by = f"{measured - target:.2f}" if target < 10 else f"{measured - target:,.0f}"  # ratios vs ms
    return f"missed by {by} ({measured / target:.1f}x the target)"


def _floor_for_server(r: Json) -> Json | None:
    base = r.get("baselines") or {}
    return base.get("floor_tmpfs" if r.get("server_checkpoint", "disk") == "tmpfs" else "floor_disk")


def targets(r: Json) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []
    lat, fan, sub = r.get("latency", {}), r.get("fanout", {}), r.get("subscribe", {})
    rows.append(("1 latency p50", "<= 250 ms", _ms(lat.get("p50_ms")), _verdict(lat.get("p50_ms"), 250)))
    rows.append(("1 latency p99", "<= 500 ms", _ms(lat.get("p99_ms")), _verdict(lat.get("p99_ms"), 500)))
    floor = _floor_for_server(r)
    if floor and lat.get("p50_ms") and floor.get("latency", {}).get("n"):
        ratio = lat["p50_ms"] / floor["latency"]["p50_ms"]
        rows.append(("1 p50 vs Spark's floor", "<= 1.5x", f"{ratio:.2f}x", _verdict(ratio, 1.5)))
    rows.append(("2 fan-out p99", "<= 500 ms", _ms(fan.get("p99_ms")), _verdict(fan.get("p99_ms"), 500)))
    f10 = r.get("fanout10x", {})
    rows.append(
        ("2b fan-out at 10x p99", "<= 500 ms", _ms(f10.get("p99_ms")), _verdict(f10.get("p99_ms"), 500))
    )
    rows.append(_starved_row(f10))
    rows.append(
        (
            "3 new computation p50",
            "<= 1,500 ms",
            _ms(sub.get("new", {}).get("p50_ms")),
            _verdict(sub.get("new", {}).get("p50_ms"), 1500),
        )
    )
    rows.append(
        (
            "3 live computation p50",
            "<= 50 ms",
            _ms(sub.get("live", {}).get("p50_ms")),
            _verdict(sub.get("live", {}).get("p50_ms"), 50),
        )
    )
    best = r.get("ingest", {}).get("best")
    rows.append(
        (
            "4 ingest",
            ">= 200,000 points/s",
            f"{best:,} points/s" if best is not None else "n/a",
            _verdict(best, 200_000, True),
        )
    )
    kb = r.get("connections", {}).get("kb_per_connection")
    rows.append(("5 idle connection", "<= 50 KB", f"{kb} KB" if kb is not None else "n/a", _verdict(kb, 50)))
    naive = (r.get("baselines") or {}).get("naive_50")
    if naive and naive.get("error") and DIED in naive["error"]:
        rows.append(
            (
                "b naive at 50 subscriptions vs Sparkwire",
                ">= 5x slower",
                "failed under the load",
                f"met (the naive design could not run here: {naive['error']})",
            )
        )
    elif naive and naive.get("error"):
        rows.append(
            ("b naive at 50 subscriptions vs Sparkwire", ">= 5x slower", "did not run", naive["error"])
        )
    elif naive and lat.get("p50_ms"):
        if naive["latency"]["n"]:
            ratio = naive["latency"]["p50_ms"] / lat["p50_ms"]
            rows.append(
                (
                    "b naive at 50 subscriptions vs Sparkwire (p50)",
                    ">= 5x slower",
                    f"{ratio:.1f}x",
                    _verdict(ratio, 5, True),
                )
            )
        else:
            rows.append(
                (
                    "b naive at 50 subscriptions vs Sparkwire (p50)",
                    ">= 5x slower",
                    "no batch finished",
                    "met (the naive design delivered nothing in the run)",
                )
            )
    return rows


def _starved_row(f10: Json) -> tuple[str, str, str, str]:
    """Workload 2b's "no subscriber starved": every subscription with point/bucket results was
    served in the window, and the worst one's own p99 is within the target."""
    name, wanted = "2b worst subscriber's p99 (none starved)", "<= 500 ms, every subscriber served"
    worst = f10.get("worst_sub_p99_ms")
    if worst is None:
        return name, wanted, "n/a", "not measured"
    served, asked = f10.get("measured_subscriptions", 0), f10.get("measurable", 0)
    measured = f"{_ms(worst)} ({served:,} of {asked:,} served)"
    if served < asked:
        return name, wanted, measured, f"missed: {asked - served:,} subscriptions got no frame"
    return name, wanted, measured, _verdict(worst, 500)


def _why(r: Json) -> list[str]:
    """Evidence from this run for each missed target."""
    out: list[str] = []
    lat, fan = r.get("latency", {}), r.get("fanout", {})
    floor = _floor_for_server(r)
    cpu1 = lat.get("usage", {}).get("cpu_cores")
    load = r.get("machine", {}).get("load_average_at_start")
    if load and load[0] > 1.0:
        out.append(
            f"- The machine was not idle when the run started (load average {load[0]}): "
            "every figure includes that contention."
        )
    fl = floor.get("latency", {}) if floor else {}
    over_floor = bool(fl.get("n")) and lat.get("p50_ms", 0) > 1.5 * fl["p50_ms"]
    missed_1 = lat.get("p50_ms", 0) > 250 or lat.get("p99_ms", 0) > 500 or over_floor
    if missed_1 and fl.get("n"):
        out.append(
            "- Workload 1: Spark's floor alone (same source, trigger and checkpoint placement, an empty "
            f"foreachBatch) measured p50 {_ms(fl['p50_ms'])} / p99 {_ms(fl['p99_ms'])} in this run; "
            f"Sparkwire adds {_ms(lat['p50_ms'] - fl['p50_ms'])} at p50 (HTTP ingest, the narrow job, "
            "evaluation, encoding, WebSocket)."
            + _callbacks(lat.get("batch", {}), floor.get("batch_phases_ms", {}) if floor else {})
        )
    if cpu1 is not None and cpu1 > 1.6:
        out.append(
            f"- During workload 1 the server's processes used {cpu1:.2f} of 2 cores: "
            "latency is CPU-bound on this machine."
        )
    fcpu = fan.get("usage", {}).get("cpu_cores")
    client_cpus = [c["cpu_cores"] for c in fan.get("clients", []) if "cpu_cores" in c]
    client_cpu = sum(client_cpus) if client_cpus else None
    if fan.get("p99_ms", 0) > 500 and fcpu is not None:
        out.append(
            f"- Workload 2: the server used {fcpu:.2f} cores while sending "
            f"{fan.get('frames_per_s', 0):,} frames/s ({fan.get('mb_per_s', 0)} MB/s); the "
            f"{r['plan']['fanout_processes']} client processes decoding them share the same 2 cores"
            + (f" and used {client_cpu:.2f} of them." if client_cpu is not None else ".")
        )
    f10 = r.get("fanout10x", {})
    worst = f10.get("worst_sub_p99_ms")
    if f10.get("usage") and (f10.get("p99_ms", 0) > 500 or (worst or 0) > 500):
        clients = f10.get("client_cpu_cores", [])
        batch = f10.get("batch", {})
        out.append(
            f"- Workload 2b: the server's processes used {f10['usage']['cpu_cores']:.2f} cores "
            f"(its Python process {f10.get('server_main_cpu_cores', 0):.2f}: event loop and micro-batch "
            f"thread share one GIL) while sending {f10.get('frames_per_s', 0):,} frames/s "
            f"({f10.get('mb_per_s', 0)} MB/s); the {len(clients)} client processes decoding them used "
            f"{sum(clients):.2f} cores of the same 2"
            + (
                f"; micro-batches ran at {batch['per_s']}/s with a mean callback (Spark job and "
                f"{r['plan']['fanout10x_computations']:,} evaluations) of {batch['callback_ms']:.0f} ms"
                if batch.get("callback_ms")
                else ""
            )
            + ". Profiles: bench/results/fanout10x/."
        )
    steps = r.get("ingest", {}).get("steps", [])
    if steps and not steps[-1]["ok"]:
        s = steps[-1]
        reason = (
            "its p99 exceeded 500 ms"
            if s["latency"]["p99_ms"] > 500
            else "the server could not acknowledge the rate"
        )
        out.append(
            f"- Workload 4 stopped at {s['target']:,} points/s: {reason} "
            f"(achieved {s['achieved']:,} points/s, "
            f"p99 {_ms(s['latency']['p99_ms'])}, server CPU {s['usage']['cpu_cores']:.2f} cores, "
            f"{s['feed']['skipped_slots']} request slots skipped because all feed connections were waiting"
            + (
                f"; the feed process (building the JSON) used {s['feed']['cpu_cores']:.2f} cores"
                if "cpu_cores" in s["feed"]
                else ""
            )
            + ")."
        )
    return out


def _callbacks(server: Json, floor: Json) -> str:
    """Sparkwire's micro-batch callback against the floor's, where the run measured both."""
    if not server.get("callback_ms") or "addBatch" not in floor:
        return ""
    return (
        f" The server's micro-batch callback (one Spark job collecting the batch, then evaluation) took "
        f"{server['callback_ms']:.1f} ms on average at {server['per_s']} batches/s; the floor's whole "
        f"addBatch phase, callback included, took a median {floor['addBatch']:.0f} ms."
    )


def _naive_notes(b: Json, lat: Json) -> str:
    """The naive design against Sparkwire's workload 1 (p50 and p99), and any restarted starts."""
    out = ""
    if b["latency"].get("n") and lat.get("p50_ms"):
        p50 = b["latency"]["p50_ms"] / lat["p50_ms"]
        p99 = b["latency"]["p99_ms"] / lat["p99_ms"]
        out += f"; **{p50:.1f}x Sparkwire's p50, {p99:.1f}x its p99** (workload 1)"
    if b.get("start_retries"):
        out += f"; {b['start_retries']} queries died on their first trigger and were restarted"
    return out


def render(r: Json) -> str:
    m, p = r["machine"], r["plan"]
    lines = [
        "# Sparkwire benchmarks",
        "",
        "Generated by `bench/` (see `python -m bench.run --help`). Every figure comes from one run: a real",
        "Sparkwire server on 127.0.0.1, driven by separate feed and client processes; the baselines ran in",
        "the same run on the same machine, before the server started (the naive design, then the floor).",
        "",
        f"- Date: {r['started']} (run took {r.get('duration_s', '?')} s)",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Linux {m['kernel']}; "
        f"Python {m['python']}; {m['java']}; PySpark {m['pyspark']}",
        f"- Load average when the run started: {', '.join(str(x) for x in m['load_average_at_start'])}",
        f"- Reproduce: `{r['command']}` (`make bench` runs the full plan)",
        f"- Feed: {p['channels']} numeric channels x {p['rate_hz']:,} Hz, "
        f"one HTTP request every {p['request_ms']:g} ms; "
        f"trigger {p['trigger_ms']} ms; clients offer permessage-deflate: {p['deflate']}",
        "",
        "Latency is measured from the moment the feed received the 200 of a write to the moment a client",
        "received the first frame that includes that write's newest point (the frame's newest raw point, or",
        "its last bucket's lastPoint). Warm-up is excluded. CPU is the mean number of cores busy in the",
        "server's process tree (Python, JVM, Spark's Python workers); RSS is its peak.",
        "",
        "## Targets",
        "",
        "| target | wanted | measured | verdict |",
        "|---|---|---|---|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in targets(r)),
        "",
    ]
    why = _why(r)
    if why:
        lines += ["### Why, where a target is missed (evidence from this run)", "", *why, ""]
    lat, fan = r.get("latency", {}), r.get("fanout", {})
    lines += ["## Workloads", "", *LAT_HEAD]
    lines.append(
        _lat_row(
            f"1 latency ({p['latency_s']:g} s, 1 subscription)",
            lat,
            lat.get("usage"),
            f"{lat.get('missing', 0)} writes never shown",
        )
    )
    if fan:
        kinds = ", ".join(f"{n} {k}" for k, n in fan.get("kinds", {}).items() if n)
        lines.append(
            _lat_row(
                f"2 fan-out ({p['fanout_subscriptions']:,} subs, {p['fanout_computations']} "
                f"computations, {p['fanout_connections']} connections)",
                fan,
                fan.get("usage"),
                f"{kinds}; latency over {fan.get('measured_subscriptions', 0)} subscriptions "
                "with point/bucket results; "
                f"{fan.get('frames_per_s', 0):,} frames/s, {fan.get('mb_per_s', 0)} MB/s",
            )
        )
        lines.append(
            _lat_row("2 the workload-1 subscription during fan-out", fan.get("latency_sub_during", {}))
        )
        began, asked = r.get("started_subscriptions", {}).get("w2", [0, 0])
        if began != asked:
            lines.append(
                f"| (only {began} of {asked} subscriptions got their FullResult in time) | | | | | | | |"
            )
        if fan.get("unsupported_kinds"):
            lines.append(
                "| (kinds the server refused, replaced by the others) | | | | | | | "
                f"{', '.join(fan['unsupported_kinds'])} |"
            )
    f10 = r.get("fanout10x", {})
    if f10.get("usage"):
        kinds = ", ".join(f"{n:,} {k}" for k, n in f10.get("kinds", {}).items() if n)
        u, clients = f10["usage"], f10.get("client_cpu_cores", [])
        lines.append(
            _lat_row(
                f"2b fan-out at 10x ({p['fanout10x_subscriptions']:,} subs, "
                f"{p['fanout10x_computations']:,} computations, {p['fanout10x_connections']:,} connections)",
                f10,
                u,
                f"{kinds}; latency over {f10.get('measured_subscriptions', 0):,} subscriptions with "
                f"point/bucket results; worst subscriber's p99 {_ms(f10.get('worst_sub_p99_ms'))} "
                f"(median subscriber's p99 {_ms(f10.get('sub_p99_median_ms'))}); "
                f"{f10.get('frames_per_s', 0):,} frames/s, {f10.get('mb_per_s', 0)} MB/s; server CPU "
                f"(user+sys) {100 * u['cpu_cores']:.0f}% of a core, its Python process "
                f"{100 * f10.get('server_main_cpu_cores', 0):.0f}%; {len(clients)} client processes "
                f"{100 * sum(clients):.0f}% of a core",
            )
        )
        if f10.get("latency_sub_during"):
            lines.append(
                _lat_row("2b the workload-1 subscription during fan-out at 10x", f10["latency_sub_during"])
            )
        began, asked = r.get("started_subscriptions", {}).get("w6", [0, 0])
        if began != asked:
            lines.append(
                f"| (only {began:,} of {asked:,} subscriptions got their FullResult in time) | | | | | | | |"
            )
    sub = r.get("subscribe", {})
    if sub:
        lines.append(
            _lat_row(
                f"3 subscribe: new computation over {sub['history_s']} s of history",
                sub["new"],
                sub.get("usage"),
                "send subscribe -> FullResult received",
            )
        )
        lines.append(
            _lat_row(
                "3 subscribe: computation already live",
                sub["live"],
                None,
                "send subscribe -> FullResult received",
            )
        )
    lines += [
        "",
        "### Workload 4: ingest ramp",
        "",
        "| target points/s | achieved points/s | p50 | p99 | max | server CPU "
        "| server RSS MB (all / main) | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in r.get("ingest", {}).get("steps", []):
        u = s["usage"]
        lines.append(
            f"| {s['target']:,} | {s['achieved']:,} | "
            + " | ".join(_ms(s["latency"][k]) for k in ("p50_ms", "p99_ms", "max_ms"))
            + f" | {u['cpu_cores']:.2f} | {u['rss_max_mb']:,.0f} / {u['rss_main_max_mb']:,.0f}"
            + f" | {'held' if s['ok'] else 'not held'} |"
        )
    c = r.get("connections", {})
    if c:
        lines += [
            "",
            "### Workload 5: idle connections",
            "",
            f"{c['count']:,} WebSocket connections opened in {c['open_seconds']} s; "
            f"{c['answered_ping']:,} answered a ping afterwards.",
            f"Server process RSS {c['server_rss_before_mb']} MB -> {c['server_rss_after_mb']} MB: "
            f"**{c['kb_per_connection']} KB per connection** "
            f"(whole process tree: {c['tree_kb_per_connection']} KB).",
        ]
        if c.get("ping"):
            lines += [
                "",
                *LAT_HEAD,
                _lat_row(
                    f"5 ping -> pong, all {c['count']:,} connections at once",
                    c["ping"],
                    c.get("usage"),
                    "CPU and RSS over opening, idling and the pings",
                ),
            ]
    base = r.get("baselines")
    if base:
        lines += ["", "## Baselines (same run, same machine)", "", *LAT_HEAD]
        for b in sorted(base.values(), key=lambda b: b["kind"] == "naive"):  # the floor first
            if b.get("error"):
                lines.append(f"| {b['name']} | | | | | | | failed: {b['error']} |")
                continue
            what = (
                f"Spark's floor, checkpoint on {'tmpfs' if b['checkpoint'] == 'tmpfs' else 'the data disk'}"
                if b["kind"] == "floor"
                else f"naive: {b['queries']} streaming queries, one per subscription"
            )
            notes = f"{b['batches_per_query']} batches/s per query; commit -> callback"
            if b["kind"] == "naive":
                notes += _naive_notes(b, lat)
            lines.append(_lat_row(what, b["latency"], b["usage"], notes))
        lines += [
            "",
            "The floor and naive figures start at the log's commit (no HTTP) and end in the Spark",
            "callback (no encoding, no WebSocket), so they flatter the baselines: Sparkwire's figures",
            "include both ends.",
        ]
    lines.append("")
    # The ingest-ceiling section comes from its own run (bench/ingest_ceiling.py): carried over.
    kept = kept_section()
    return "\n".join(lines) + ("\n\n" + kept if kept else "")
