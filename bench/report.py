"""BENCHMARKS.md from a run's results: machine, date, every figure, targets met or missed (by how
much, with the run's own evidence for why), and the command that reproduces it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
from pathlib import Path
from typing import Any

from bench import ingest_ceiling, live_eval, live_through, live_windows, long_windows, output_format, polled
from bench.baselines import DIED
from bench.machine import pyspark_line

Json = Any
FLOOR_RATIO = 1.25  # workload 1's p50 at most this times Spark's floor, measured in the same run
IDLE_KB = 30  # per idle connection, in the all-in-one server
HOUR_P50_MS, CONCURRENT_MS, DAY_P50_MS = 250, 3000, 1000  # workload 3b: subscribe -> FullResult


def _ms(x: float | None) -> str:
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


def _collect_floor(r: Json) -> Json | None:
    """The floor whose callback collects the batch's rows as the server's does, if it ran."""
    b = (r.get("baselines") or {}).get(f"floor_collect_{r.get('server_checkpoint', 'disk')}")
    return b if b and b.get("latency", {}).get("n") else None


def _collect_floor_row(r: Json, p50: float | None) -> list[tuple[str, str, str, str]]:
    """Workload 1's p50 against the floor that also runs the Spark job collecting the rows: any
    consumer of a micro-batch's rows runs that job, which the empty callback never starts."""
    fc = _collect_floor(r)
    if not fc or not p50:
        return []
    ratio = p50 / fc["latency"]["p50_ms"]
    return [
        (
            "1 p50 vs Spark's floor collecting the batch's rows",
            f"<= {FLOOR_RATIO}x (the same floor plus the job that hands the rows to Python)",
            f"{ratio:.2f}x ({_ms(fc['latency']['p50_ms'])} floor)",
            _verdict(ratio, FLOOR_RATIO),
        )
    ]


def targets(r: Json) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []
    lat, fan, sub = r.get("latency", {}), r.get("fanout", {}), r.get("subscribe", {})
    rows.append(("1 latency p50", "<= 250 ms", _ms(lat.get("p50_ms")), _verdict(lat.get("p50_ms"), 250)))
    rows.append(("1 latency p99", "<= 500 ms", _ms(lat.get("p99_ms")), _verdict(lat.get("p99_ms"), 500)))
    floor = _floor_for_server(r)
    if floor and lat.get("p50_ms") and floor.get("latency", {}).get("n"):
        ratio = lat["p50_ms"] / floor["latency"]["p50_ms"]
        rows.append(
            ("1 p50 vs Spark's floor", f"<= {FLOOR_RATIO}x", f"{ratio:.2f}x", _verdict(ratio, FLOOR_RATIO))
        )
    else:
        rows.append(("1 p50 vs Spark's floor", f"<= {FLOOR_RATIO}x", "n/a", "not measured"))
    rows += _collect_floor_row(r, lat.get("p50_ms"))
    rows += _fast_floor_rows(r)
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
    rows += _long_window_rows(r.get("long_windows") or {})
    rows += _live_eval_rows(r.get("live_eval") or {})
    rows += _mix2b_rows(r.get("live_eval") or {})
    rows += _live_windows_rows(r.get("live_windows") or {})
    rows += _ceiling_rows(r.get("ingest_ceiling") or {})
    rows += _output_format_rows(r.get("output_format") or {})
    rows += polled.rows(r.get("polled") or {}, _verdict)
    kb = r.get("connections", {}).get("kb_per_connection")
    rows.append(
        (
            "5 idle connection",
            f"<= {IDLE_KB} KB (all-in-one server)",
            f"{kb} KB" if kb is not None else "n/a",
            _verdict(kb, IDLE_KB),
        )
    )
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


def _fast_floor(r: Json) -> Json | None:
    """The floor measured at the shorter trigger (the server's checkpoint placement), if it ran."""
    fast = (r.get("plan") or {}).get("floor_fast_trigger_ms")
    name = f"floor_{r.get('server_checkpoint', 'disk')}_{fast}ms"
    return (r.get("baselines") or {}).get(name) if fast else None


def _fast_floor_rows(r: Json) -> list[tuple[str, str, str, str]]:
    """What a shorter trigger buys: Spark's floor at it against the floor at the run's trigger."""
    p = r.get("plan") or {}
    fast_ms, trigger = p.get("floor_fast_trigger_ms"), p.get("trigger_ms", 100)
    if not fast_ms or fast_ms == trigger:
        return []
    name = f"1 Spark's floor at a {fast_ms} ms trigger (p50)"
    wanted = f"measured beside the {trigger} ms floor (docs/decisions/0035)"
    fast, floor = _fast_floor(r), _floor_for_server(r)
    if not fast or fast.get("error") or not fast.get("latency", {}).get("n"):
        return [(name, wanted, (fast or {}).get("error") or "n/a", "not measured")]
    f50 = fast["latency"]["p50_ms"]
    if not floor or not floor.get("latency", {}).get("n"):
        return [(name, wanted, _ms(f50), f"reported (no {trigger} ms floor to compare)")]
    b50 = floor["latency"]["p50_ms"]
    measured = (
        f"{_ms(f50)} against {_ms(b50)} at {trigger} ms ({f50 - b50:+,.0f} ms, {(f50 - b50) / b50:+.0%}), "
        f"for {fast['usage']['cpu_cores']:.2f} cores against {floor['usage']['cpu_cores']:.2f}"
    )
    return [(name, wanted, measured, "reported; the default trigger is decision 0035's")]


def _live_eval_rows(live: Json) -> list[tuple[str, str, str, str]]:
    """Workload 3c's evaluation arm (in process): the hour windows' evaluation CPU per micro-batch
    against the same computations over 60 s. Its server arm is `_live_windows_rows`."""
    ratio = live.get("cpu_ratio_long_to_short")
    measured = "not measured"
    if ratio is not None:
        long, short = live["long"]["all"]["mean_ms"], live["short"]["all"]["mean_ms"]
        measured = f"{ratio:.2f}x ({long} / {short} ms, {live['long']['computations']} computations)"
    return [
        (
            "3c evaluation CPU per micro-batch, hour / 60 s (in process)",
            "<= 1.5x",
            measured,
            _verdict(ratio, 1.5),
        )
    ]


def _mix2b_rows(live: Json) -> list[tuple[str, str, str, str]]:
    """Workload 2b's 1,000 evaluations measured in process (no server, no clients sharing the GIL):
    what the micro-batch callback spends evaluating, the part of 2b's latency the engine owns."""
    mix = live.get("mix2b")
    if not mix:
        return []
    mean = mix["all"]["mean_ms"]
    measured = f"{mean} ms mean (p95 {mix['all']['p95_ms']} ms, {mix['computations']:,} computations)"
    return [("2b evaluation CPU per micro-batch (in process)", "<= 50 ms", measured, _verdict(mean, 50))]


def _output_format_rows(out: Json) -> list[tuple[str, str, str, str]]:
    """ArrowPlot (every V1 field) against LEGACY for a 1,000-bucket FullResult: bytes and CPU."""
    legacy = output_format.find(out, "bucketed", 1000, "LEGACY") if out else None
    arrow = output_format.find(out, "bucketed", 1000, "ARROW v1 all") if out else None
    if not legacy or not arrow:
        return []
    measured = (
        f"{arrow['bytes'] / legacy['bytes']:.2f}x the bytes ({arrow['bytes']:,} / {legacy['bytes']:,}), "
        f"encode {arrow['encode_us'] / legacy['encode_us']:.2f}x, "
        f"decode {arrow['decode_us'] / legacy['decode_us']:.2f}x"
    )
    return [
        (
            "Arrow (ARROW_V3, every field) FullResult vs LEGACY, 1,000 buckets",
            "reported",
            measured,
            "reported",
        )
    ]


def _live_windows_rows(lw: Json) -> list[tuple[str, str, str, str]]:
    """Workload 3c through a server: the hour arm's updates per subscription per second against the
    60 s arm's (measured together), and its write-to-frame p99."""
    ratio = lw.get("updates_ratio_long_to_short")
    long, short = lw.get("long") or {}, lw.get("short") or {}
    p99 = (long.get("latency") or {}).get("p99_ms")
    window = f"{lw['plan']['long_s']:,} s" if lw else "hour"
    updates = "not measured"
    if ratio is not None:
        updates = (
            f"{ratio:.2f}x ({long['updates_per_sub_per_s']} / {short['updates_per_sub_per_s']} per s, "
            f"{long['subscriptions']} + {short['subscriptions']} subscriptions, {window})"
        )
    return [
        (
            "3c updates per subscription per second, hour / 60 s (server)",
            f">= {live_windows.UPDATES_RATIO_MIN}x",
            updates,
            _verdict(ratio, live_windows.UPDATES_RATIO_MIN, higher_is_better=True),
        ),
        (
            "3c hour windows: write-to-frame p99 (server)",
            f"<= {live_windows.P99_MS} ms",
            f"{_ms(p99)} (60 s arm {_ms((short.get('latency') or {}).get('p99_ms'))})" if p99 else "n/a",
            _verdict(p99, live_windows.P99_MS),
        ),
        *_live_through_rows(lw.get("through") or {}),
    ]


def _live_through_rows(t: Json) -> list[tuple[str, str, str, str]]:
    """Workload 3c's written-through arm (bench/live_through.py): the hour arm against the 60 s arm,
    measured one after the other over history written through the running server."""
    if not t:
        return []
    v, long, short = t["verdicts"], t["long"], t["short"]
    per_batch = "cpu_ms_per_computation_per_batch"

    def verdict(met: bool | None) -> str:
        return "not measured" if met is None else ("met" if met else "missed")

    return [
        (
            "3c written through the server: updates per subscription per second, hour / 60 s",
            f">= {live_through.UPDATES_RATIO_MIN}x",
            f"{v['updates_ratio']}x ({long['updates_per_sub_per_s']} / {short['updates_per_sub_per_s']} "
            f"per s, {t['plan']['computations']} distinct `summarize(x + y)` per arm)",
            verdict(v["updates_met"]),
        ),
        (
            "3c written through the server: CPU per computation per micro-batch, hour / 60 s",
            f"<= {live_through.CPU_RATIO_MAX}x (<= {live_through.CPU_CEILING_MS} ms "
            f"if the 60 s arm's < {live_through.CPU_FLOOR_MS} ms)",
            f"{v['cpu_ratio']}x ({long[per_batch]} / {short[per_batch]} ms above the feed alone)",
            verdict(v["cpu_met"]),
        ),
    ]


def _long_window_rows(lw: Json) -> list[tuple[str, str, str, str]]:
    """Workload 3b: new computations over hour- and day-long windows, subscribe -> FullResult, and
    what a live one costs in memory (the sizes are the run's plan's: smaller in a smoke run)."""
    p = lw.get("plan") or dataclasses.asdict(long_windows.FULL)
    single, conc, day = lw.get("single_ms") or [], lw.get("concurrent_ms") or [], lw.get("day_ms") or []
    hour = f"{p['hour_s']:,} s x {p['hour_rate_hz']:,} Hz = {p['hour_s'] * p['hour_rate_hz']:,} points"
    day_size = f"{p['day_s']:,} s x {p['day_rate_hz']:,} Hz = {p['day_s'] * p['day_rate_hz']:,} points"
    hour_p50 = statistics.median(single) if single else None
    day_p50 = statistics.median(day) if day else None
    last = max(conc) if conc else None
    mem = lw.get("memory") or {}
    held = mem.get("window_points") or []
    through = lw.get("through") or {}
    through_hour, through_day = through.get("hour_ms") or [], through.get("day_ms") or []
    through_hour_p50 = statistics.median(through_hour) if through_hour else None
    through_day_p50 = statistics.median(through_day) if through_day else None
    return [
        (
            "3b hour window, new computation: FullResult p50",
            f"<= {HOUR_P50_MS} ms from subscribe",
            f"{_ms(hour_p50)} (n={len(single)}; {hour}, {p['buckets']:,} buckets)" if single else "n/a",
            _verdict(hour_p50, HOUR_P50_MS),
        ),
        (
            f"3b {p['concurrent']} hour windows at once: last FullResult",
            f"<= {CONCURRENT_MS:,} ms, on different channels",
            f"{_ms(last)} (first {_ms(min(conc))})" if conc else "n/a",
            _verdict(last, CONCURRENT_MS),
        ),
        (
            "3b day window, new computation: FullResult p50",
            f"<= {DAY_P50_MS:,} ms from subscribe",
            f"{_ms(day_p50)} (n={len(day)}; {day_size})" if day else "n/a",
            _verdict(day_p50, DAY_P50_MS),
        ),
        (
            "3b hour window written through the server just before: FullResult p50",
            f"<= {HOUR_P50_MS} ms from subscribe",
            f"{_ms(through_hour_p50)} (n={len(through_hour)}; {hour}, written in "
            f"{_ms(1000 * max(through['hour_write_s']))} at most)"
            if through_hour
            else "n/a",
            _verdict(through_hour_p50, HOUR_P50_MS),
        ),
        (
            "3b day window written through the server just before: FullResult p50",
            f"<= {DAY_P50_MS:,} ms from subscribe",
            f"{_ms(through_day_p50)} (n={len(through_day)}; {day_size}, written in "
            f"{_ms(1000 * max(through['day_write_s']))} at most)"
            if through_day
            else "n/a",
            _verdict(through_day_p50, DAY_P50_MS),
        ),
        (
            "3b memory per live hour-window computation",
            "reported",
            (
                f"{mem['mb_per_computation']} MB ({mem['computations']} live, each holding "
                f"{min(held) if held else 0:,}-{max(held) if held else 0:,} points)"
            )
            if mem
            else "n/a",
            "reported" if mem else "not measured",
        ),
    ]


CEILING_LABELS = {"json": "JSON", "protobuf": "protobuf+zstd"}


def _ceiling_rows(c: Json) -> list[tuple[str, str, str, str]]:
    """Workload 4's target, on the ceiling's ramps: each endpoint's highest rate held."""
    rows = []
    wanted = f">= {ingest_ceiling.TARGET:,} points/s held"
    for endpoint, label in CEILING_LABELS.items():
        name = f"4 ingest ceiling {label}"
        if not c or not any(s["endpoint"] == endpoint for s in c.get("steps", [])):
            rows.append((name, wanted, "n/a", "not measured"))
            continue
        ceiling, held = ingest_ceiling.ceiling(c, endpoint), ingest_ceiling.rate_held(c, endpoint)
        failed = ingest_ceiling.failing_step(c, endpoint)
        measured = f"{ceiling:,} points/s stored at the {held:,} step" + (
            f" ({failed['target']:,} not held: {', '.join(ingest_ceiling.why_not_held(failed))})"
            if failed
            else f" (every step held, {ingest_ceiling.ramp_end(c, endpoint)})"
        )
        verdict = _verdict(held, ingest_ceiling.TARGET, True)
        if failed is None and held < ingest_ceiling.TARGET:
            verdict += "; the ramp's end, not a failing step, stopped it"
        rows.append((name, wanted, measured, verdict))
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
    over_floor = bool(fl.get("n")) and lat.get("p50_ms", 0) > FLOOR_RATIO * fl["p50_ms"]
    missed_1 = lat.get("p50_ms", 0) > 250 or lat.get("p99_ms", 0) > 500 or over_floor
    if missed_1 and fl.get("n"):
        out.append(
            "- Workload 1: Spark's floor alone (same source, trigger and checkpoint placement, an empty "
            f"foreachBatch) measured p50 {_ms(fl['p50_ms'])} / p99 {_ms(fl['p99_ms'])} in this run; "
            f"Sparkwire adds {_ms(lat['p50_ms'] - fl['p50_ms'])} at p50 (HTTP ingest, the narrow job, "
            "evaluation, encoding, WebSocket)."
            + _callbacks(lat.get("batch", {}), floor.get("batch_phases_ms", {}) if floor else {})
            + _collect_floor_why(r, lat["p50_ms"], fl["p50_ms"])
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
            + _fanout10x_needs(f10, sum(clients))
        )
    out += _long_window_why(r.get("long_windows") or {})
    out += _ceiling_why(r.get("ingest_ceiling") or {})
    c = r.get("connections", {})
    if c.get("kb_per_connection", 0) > IDLE_KB:
        out.append(
            f"- Workload 5: the server's Python process grew {c['server_rss_before_mb']} -> "
            f"{c['server_rss_after_mb']} MB for {c['count']:,} connections (its whole tree: "
            f"{c['tree_kb_per_connection']} KB each); what a connection holds: docs/decisions/0031."
        )
    return out


def _per_frame(f10: Json, client_cores: float) -> str:
    """CPU per frame sent, the clients' beside the server's (the clients must cost less)."""
    frames = f10.get("frames_per_s")
    if not frames:
        return ""
    client_us, server_us = client_cores / frames * 1e6, f10["usage"]["cpu_cores"] / frames * 1e6
    return f"; CPU per frame: clients {client_us:.0f} us, server {server_us:.0f} us"


def _fanout10x_needs(f10: Json, client_cores: float) -> str:
    """What 500 ms would take at this run's own costs: every subscription gets a frame per
    micro-batch (every computation changes in every batch), so the p99 moves with the batch period;
    the period that gives a 500 ms p99, at this run's p99 / period, sets the frames/s, and this
    run's CPU per frame (clients' and server's) what those frames cost."""
    batches, frames, p99 = f10.get("batch", {}).get("per_s"), f10.get("frames_per_s"), f10.get("p99_ms")
    if not batches or not frames or not p99 or p99 <= 500:
        return ""
    periods = p99 * batches / 1000  # the p99 in batch periods
    needed_frames = frames / batches * (1000 / (500 / periods))  # frames per batch x batches/s
    client_us, server_us = client_cores / frames * 1e6, f10["usage"]["cpu_cores"] / frames * 1e6
    clients_need = needed_frames * client_us / 1e6
    return (
        f" At this run's costs a 500 ms p99 is out of this machine's reach: the p99 was {periods:.1f} "
        f"batch periods, so it needs a period of {500 / periods:.0f} ms, {needed_frames:,.0f} frames/s; "
        f"at this run's {client_us:.0f} us of client CPU per frame the clients alone would need "
        f"{clients_need:.1f} cores of the machine's 2 (the server {server_us:.0f} us per frame more; "
        "smaller frames would shrink the part of either that follows the bytes)."
    )


def _long_window_why(lw: Json) -> list[str]:
    """Workload 3b's evidence for a miss: the server's CPU over the waits, the log's merge."""
    if not lw:
        return []
    p, cpu, merged = lw["plan"], lw.get("cpu") or {}, lw.get("merged") or {}
    single, conc, day = lw.get("single_ms") or [], lw.get("concurrent_ms") or [], lw.get("day_ms") or []
    merge = (
        f"the log had merged the history's {lw['history']['blocks']:,} small blocks into "
        f"{merged['rows']:,} rows {merged['seconds']} s after the {p['settle_s']:g} s settle"
        if merged.get("merges")
        else "this server's log does not merge small blocks"
    )
    load = (lw.get("machine") or {}).get("load_average_at_start")

    def busy(phase: str) -> str:
        c = cpu.get(phase)
        if not c:
            return ""
        return (
            f"; over the waits the server's processes used {c['cpu_cores']:.2f} cores, its Python "
            f"process {c['main_cpu_cores']:.2f} (the back-fill runs there: two log reads at a time beside "
            "the loading and bucketing, under one GIL)"
        )

    out = []
    if single and statistics.median(single) > HOUR_P50_MS:
        out.append(
            f"- Workload 3b, hour window: FullResults in {long_windows._stats(single)}{busy('single')}; "
            f"{merge}"
            + (f"; load average {load[0]} when the workload started" if load else "")
            + ". Where one back-fill's time goes: BENCHMARKS.long-windows.md (decision 0032)."
        )
    if conc and max(conc) > CONCURRENT_MS:
        mem = lw.get("memory") or {}
        points = sum(mem.get("window_points") or [])
        out.append(
            f"- Workload 3b, {p['concurrent']} at once: the first FullResult came at {_ms(min(conc))}, "
            f"the last at {_ms(max(conc))}; the back-fills share the log's reads"
            + (f" and loaded {points:,} points in all" if points else "")
            + f"{busy('concurrent')}."
        )
    if day and statistics.median(day) > DAY_P50_MS:
        out.append(
            f"- Workload 3b, day window: FullResults in {long_windows._stats(day)}{busy('day')}; {merge}."
        )
    return out


def _ceiling_why(c: Json) -> list[str]:
    """Why an endpoint's ramp stopped short of the target: the failing step's figures, and which
    process or thread was saturated (a Python thread tops out at one core; the machine at its cores)."""
    out = []
    for endpoint, label in CEILING_LABELS.items():
        if not c or ingest_ceiling.rate_held(c, endpoint) >= ingest_ceiling.TARGET:
            continue
        step = ingest_ceiling.failing_step(c, endpoint)
        if step is None:
            if any(s["endpoint"] == endpoint for s in c.get("steps", [])):
                end = ingest_ceiling.ramp_end(c, endpoint)
                out.append(
                    f"- Workload 4 ceiling, {label}: every step held, {end}: "
                    "the plan, not the server, set this ceiling."
                )
            continue
        cpu, feed = step["server_cpu_cores"], step.get("feed_cpu_cores") or 0.0
        server = ingest_ceiling.server_cores(cpu)
        parts = {
            "the event loop (HTTP, decompression, decoding)": cpu.get("event_loop"),
            "the log writer threads (commits, merges)": cpu.get("log_writer"),
            "the other server threads (micro-batch callback, evaluation)": cpu.get("server_other"),
            "the JSON decode processes": cpu.get("decode_workers"),
            "Spark's JVM": cpu["jvm"],
            "Spark's Python runners (the stream's log reads)": cpu["spark_python"],
            "the feed": feed,
        }
        split = ", ".join(f"{k} {v:.2f}" for k, v in parts.items() if v is not None)
        if "machine_cpu_cores" in step:
            split += f"; the whole machine {step['machine_cpu_cores']:.2f}"
        threads = {k: v for k, v in list(parts.items())[:2] if v is not None}
        top = max(threads.items(), key=lambda kv: kv[1], default=("", 0.0))
        if top[1] >= 0.85:
            saturated = f"{top[0]}, one Python thread, was saturated at {top[1]:.2f} of a core"
        elif cpu["server_python"] >= 0.9:
            saturated = (
                f"the server's Python process was saturated at {cpu['server_python']:.2f} cores "
                "(its threads share one GIL)"
            )
        elif server + feed >= 1.8:
            saturated = f"the machine's 2 cores were saturated: server {server:.2f}, feed {feed:.2f}"
        elif (machine := step.get("machine_cpu_cores", 0.0)) >= 1.8:
            saturated = (
                f"the machine's 2 cores were saturated ({machine:.2f} busy), {machine - server - feed:.2f} "
                f"of them by processes outside this benchmark (server {server:.2f}, feed {feed:.2f})"
            )
        else:
            saturated = (
                f"no process was saturated (server {server:.2f} cores, feed {feed:.2f}, "
                f"the whole machine {step.get('machine_cpu_cores', float('nan')):.2f})"
            )
        why_not = ", ".join(ingest_ceiling.why_not_held(step))
        out.append(
            f"- Workload 4 ceiling, {label}: the ramp stopped at {step['target']:,} points/s ({why_not}: "
            f"stored {step['achieved']:,}/s, p99 {_ms(step['latency']['p99_ms'])}); {saturated}. "
            f"CPU at that step, in cores: {split}."
        )
    return out


def _collect_floor_why(r: Json, p50: float, floor_p50: float) -> str:
    """How much of the gap to the empty floor is Spark's collecting job, measured in this run."""
    fc = _collect_floor(r)
    if not fc:
        return ""
    c50 = fc["latency"]["p50_ms"]
    return (
        f" The same floor with its callback collecting the batch's rows to Python as the server's "
        f"does (the Spark job any consumer of the rows runs; the empty callback starts none) "
        f"measured p50 {_ms(c50)} / p99 {_ms(fc['latency']['p99_ms'])}: that job is "
        f"{_ms(c50 - floor_p50)} of the gap, and Sparkwire is {p50 / c50:.2f}x that floor "
        f"({_ms(p50 - c50)} over it)."
    )


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


def render(r: Json, kept: str = "") -> str:
    """The report; `kept` is an ingest-ceiling section (markers included) of an earlier report,
    carried over when this run did not measure the ceiling."""
    m, p = r["machine"], r["plan"]
    lines = [
        "# Sparkwire benchmarks",
        "",
        "Generated by `bench/` (see `python -m bench.run --help`). Every figure comes from one run: a real",
        "Sparkwire server on 127.0.0.1, driven by separate feed and client processes; the baselines ran in",
        "the same run on the same machine, before the server started (the naive design, then the floor);",
        "workload 3b (long windows) and the ingest ceiling ran after it, each on a server of its own.",
        "",
        f"- Date: {r['started']} (run took {r.get('duration_s', '?')} s)",
        *(f"- Measured by a later run, not this one: {note}" for note in r.get("taken_from_other_runs", [])),
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Linux {m['kernel']}; "
        f"Python {m['python']}; {m['java']}; {pyspark_line(m)}",
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
    errors = r.get("errors") or {}
    if errors:
        lines += ["### Workloads that failed in this run (their targets: not measured)", ""]
        for key, error in errors.items():
            last = [line for line in error.splitlines() if line.strip()] or ["?"]
            lines.append(f"- {key}: {last[0][:300]}" + (f" ... {last[-1][:300]}" if len(last) > 1 else ""))
        lines.append("")
    lat, fan = r.get("latency", {}), r.get("fanout", {})
    lines += ["## Workloads", "", *LAT_HEAD]
    if lat:
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
                f"{100 * sum(clients):.0f}% of a core{_per_frame(f10, sum(clients))}",
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
    lw = r.get("long_windows")
    if lw:
        lines += ["", long_windows.render(lw, title="### Workload 3b: long windows (a server of its own)")]
        lines[-1] = lines[-1].rstrip("\n")
    live = r.get("live_eval")
    if live:
        lines += ["", live_eval.render(live).rstrip("\n")]
    formats = r.get("output_format")
    if formats:
        lines += ["", output_format.render(formats).rstrip("\n")]
    windows = r.get("live_windows")
    if windows:
        lines += ["", live_windows.render(windows).rstrip("\n")]
    ramp = r.get("ingest", {}).get("steps", [])
    if ramp:
        lines += [
            "",
            "### Workload 4: ingest ramp in the shared server",
            "",
            "The feed of workload 1 raised step by step, workload 1's subscriber measuring; a step holds at "
            "p99 <= 500 ms with 95% of its rate acknowledged. The ingest target is judged on the ceiling "
            "below (each endpoint on a fresh server, ramped until a step fails).",
            "",
            "| target points/s | achieved points/s | p50 | p99 | max | server CPU "
            "| server RSS MB (all / main) | verdict |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for s in ramp:
            u = s["usage"]
            lines.append(
                f"| {s['target']:,} | {s['achieved']:,} | "
                + " | ".join(_ms(s["latency"][k]) for k in ("p50_ms", "p99_ms", "max_ms"))
                + f" | {u['cpu_cores']:.2f} | {u['rss_max_mb']:,.0f} / {u['rss_main_max_mb']:,.0f}"
                + f" | {'held' if s['ok'] else 'not held'} |"
            )
        if not ramp[-1]["ok"]:
            lines += ["", _ramp_stop(ramp[-1])]
    if r.get("ingest_ceiling"):
        title = "### Workload 4: ingest ceiling per endpoint (a fresh server)"
        lines += ["", ingest_ceiling.render(r["ingest_ceiling"], title=title).rstrip("\n")]
    elif kept:
        lines += ["", "(From an earlier run, not this one:)", "", kept.rstrip("\n")]
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
        # the floors first (the run's trigger, then the shorter one), then the naive design
        order = {name: i for i, name in enumerate(base)}
        for b in sorted(
            base.values(),
            key=lambda b: (
                b["kind"] == "naive",
                b.get("trigger_ms", p["trigger_ms"]) != p["trigger_ms"],
                order[b["name"]],
            ),
        ):
            if b.get("error"):
                lines.append(f"| {b['name']} | | | | | | | failed: {b['error']} |")
                continue
            where = "tmpfs" if b["checkpoint"] == "tmpfs" else "the data disk"
            what = {
                "floor": f"Spark's floor, checkpoint on {where}",
                "floor_collect": f"Spark's floor collecting the batch's rows, checkpoint on {where}",
            }.get(b["kind"], f"naive: {b['queries']} streaming queries, one per subscription")
            what += f", trigger {b.get('trigger_ms', p['trigger_ms'])} ms"
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
    return "\n".join(lines)


def _ramp_stop(s: Json) -> str:
    """Why workload 4's ramp stopped where it did, from the step that did not hold."""
    reason = (
        "its p99 exceeded 500 ms"
        if s["latency"]["p99_ms"] > 500
        else "the server could not acknowledge the rate"
    )
    return (
        f"The ramp stopped at {s['target']:,} points/s: {reason} (achieved {s['achieved']:,} points/s, "
        f"p99 {_ms(s['latency']['p99_ms'])}, server CPU {s['usage']['cpu_cores']:.2f} cores, "
        f"{s['feed']['skipped_slots']} request slots skipped because all feed connections were waiting"
        + (
            f"; the feed process (building the JSON) used {s['feed']['cpu_cores']:.2f} cores"
            if "cpu_cores" in s["feed"]
            else ""
        )
        + ")."
    )


def main(argv: list[str] | None = None) -> None:
    """Render a run's JSON again, optionally taking some workloads' figures from another run's JSON
    (a workload that failed in a long run, measured again alone with `--only`); the report says
    which figures came from where.

        python -m bench.report RUN.json OUT.md [--take WORKLOAD=OTHER.json ...]
    """
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=main.__doc__)
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--take", action="append", default=[], metavar="WORKLOAD=OTHER.json")
    args = parser.parse_args(argv)
    r = json.loads(args.run.read_text())
    for item in args.take:
        key, _, other_path = item.partition("=")
        other = json.loads(Path(other_path).read_text())
        if key not in other:
            parser.error(f"{other_path} has no {key!r}")
        r[key] = other[key]
        (r.get("errors") or {}).pop(key, None)
        r.setdefault("taken_from_other_runs", []).append(
            f"{key} (`{other['command']}`, started {other['started']}, load average "
            f"{', '.join(str(x) for x in other['machine']['load_average_at_start'])})"
        )
    args.out.with_suffix(".json").write_text(json.dumps(r, indent=1, default=str))
    args.out.write_text(render(r))


if __name__ == "__main__":
    main()
