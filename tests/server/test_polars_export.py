"""The `nominal` SDK's polars export (`nominal.thirdparty.polars.PolarsExportHandler`, what
`nominal download` runs) over a real server, run from `.venv-nominal` as the SDK's other reads are
(tests/server/test_sdk_reads.py): it asks `batchGetSeriesCount` which channels hold points,
`batchComputeWithUnits` for their rates, then `exportChannelData` undecimated or decimated to a
`resolution` (nanoseconds) or a number of `buckets`. Every value is checked against the points
written: exactly when undecimated, and per bucket against nominal-api's ResolutionOption ("the mean
of the values will be used for numeric types and the mode of the values will be used for enum
types") computed here from the points (docs/decisions/0083-polars-export-and-polled-cost.md)."""

from __future__ import annotations

import json
import math
import subprocess
import textwrap
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, ServerProcess
from tests.wire import NANOS, write_points

NOMINAL_PYTHON = ROOT / ".venv-nominal" / "bin" / "python"
Json = dict[str, Any]
LABELS = ["idle", "drive", "drive", "park", "idle"]

SDK_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from nominal.core import NominalClient
    from nominal.thirdparty.polars.polars_export_handler import PolarsExportHandler
    from nominal.ts import Relative

    base_url, rid, start, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    client = NominalClient.from_token("a-token", base_url=base_url)
    channels = list(client.get_dataset(rid).search_channels())
    relative = Relative(unit="nanoseconds", start=start)

    def frames(**options):
        out = []
        handler = PolarsExportHandler(client)
        for df in handler.export(channels, start, end, timestamp_type=relative, **options):
            out.append({c: df[c].to_list() for c in df.columns})
        return out

    result = {
        "whole": frames(tags={"vehicle": "a"}),
        "per_second": frames(tags={"vehicle": "a"}, resolution=NANOS),
        "buckets": frames(tags={"vehicle": "b"}, buckets=7),
        "none": frames(tags={"vehicle": "c"}),
    }
    print("RESULT" + json.dumps(result))
    """
).replace("NANOS", str(NANOS))


@pytest.fixture(scope="module", params=["embedded log", "Kafka log"])
def log_server(request: pytest.FixtureRequest) -> ServerProcess:
    """The shared server on the embedded log, and the one on the Kafka log: there no index says
    which series hold points in a range, and a Spark job counts them (app/api/data_sources.py)."""
    name = "server" if request.param == "embedded log" else "kafka_log_server"
    server: ServerProcess = request.getfixturevalue(name)
    return server


@pytest.fixture(scope="module")
async def written(log_server: ServerProcess) -> Json:
    server = log_server
    rid = f"ri.sparkwire.test.dataset.{uuid.uuid4().hex}"
    t0 = (time.time_ns() // NANOS - 300) * NANOS
    speed_a = [(t0 + i * 7_000_000 + (i % 3) * 1_000, math.sin(i / 10) * 100 + i / 64) for i in range(3000)]
    speed_b = [(t0 + i * 40_000_000 + 3, -0.25 * i) for i in range(500)]
    mode = [(t0 + i * 350_000_000, LABELS[i % len(LABELS)]) for i in range(60)]
    await write_points(server.base_url, rid, "speed", speed_a, {"vehicle": "a"})
    await write_points(server.base_url, rid, "speed", speed_b, {"vehicle": "b"})
    await write_points(server.base_url, rid, "mode", mode, {"vehicle": "a"})
    end = t0 + 30 * NANOS
    return {"rid": rid, "start": t0, "end": end, "a": speed_a, "b": speed_b, "mode": mode}


def run_sdk(server: ServerProcess, tmp_path: Path, w: Json) -> Json:
    assert NOMINAL_PYTHON.exists(), "the nominal SDK's environment is missing: run `make install`"
    script = tmp_path / "polars_export.py"
    script.write_text(SDK_SCRIPT)
    args = [str(NOMINAL_PYTHON), str(script), server.base_url, w["rid"], str(w["start"]), str(w["end"])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT"))
    result: Json = json.loads(line.removeprefix("RESULT"))
    return result


def column(frame: Json, name: str) -> list[tuple[int, Any]]:
    """(relative ns, value) of a frame's column where it holds a value."""
    return [(round(t), v) for t, v in zip(frame["timestamp"], frame[name], strict=True) if v is not None]


def means(points: list[tuple[int, float]], start: int, step: int) -> list[tuple[int, float]]:
    buckets: dict[int, list[float]] = {}
    for t, v in points:
        buckets.setdefault((t - start) // step, []).append(v)
    return [(k * step, sum(vs) / len(vs)) for k, vs in sorted(buckets.items())]


def modes(points: list[tuple[int, str]], start: int, step: int) -> list[tuple[int, str]]:
    buckets: dict[int, Counter[str]] = {}
    for t, v in points:
        buckets.setdefault((t - start) // step, Counter())[v] += 1
    out = []
    for k, counts in sorted(buckets.items()):
        top = max(counts.values())
        out.append((k * step, min(label for label, n in counts.items() if n == top)))
    return out


def approx_pairs(got: list[tuple[int, Any]], want: list[tuple[int, Any]]) -> None:
    assert [t for t, _ in got] == [t for t, _ in want]
    assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-12, abs=1e-12)


async def test_the_polars_export_reads_back_what_was_written(
    log_server: ServerProcess, written: Json, tmp_path: Path
) -> None:
    out = run_sdk(log_server, tmp_path, written)
    start = written["start"]
    rel = [(t - start, v) for t, v in written["a"]]
    rel_mode = [(t - start, v) for t, v in written["mode"]]

    # undecimated: every point of vehicle a's speed and of the mode, exact, in one frame
    [whole] = out["whole"]
    assert column(whole, "speed") == rel
    assert column(whole, "mode") == rel_mode

    # decimated to 1 s: per bucket [start + k s, start + (k + 1) s), the mean and the mode
    [per_second] = out["per_second"]
    approx_pairs(column(per_second, "speed"), means(rel, 0, NANOS))
    assert column(per_second, "mode") == modes(rel_mode, 0, NANOS)
    assert len(column(per_second, "speed")) == 21  # 3000 points 7 ms apart span 21 s

    # 7 buckets over the export's range: a step of ceil((end - start) / 7)
    [buckets] = out["buckets"]
    step = -(-(written["end"] - start) // 7)
    rel_b = [(t - start, v) for t, v in written["b"]]
    approx_pairs(column(buckets, "speed"), means(rel_b, 0, step))
    assert len(column(buckets, "speed")) == 1 + (rel_b[-1][0] // step)
    assert "mode" not in buckets  # vehicle b has no mode: that channel holds no series with its tags

    assert out["none"] == []  # no series carries vehicle c: nothing is exported


def tag_filter(key: str, value: str, operator: str = "IN") -> Json:
    literal = {"type": "literal", "literal": value}
    return {
        "type": "single",
        "single": {"key": {"type": "literal", "literal": key}, "values": [literal], "operator": operator},
    }


async def test_batch_get_series_count_counts_the_series_with_points_in_the_range(
    log_server: ServerProcess, written: Json
) -> None:
    start, rid = written["start"], written["rid"]

    def asked(channel: str, lo: int, hi: int, filters: Json | None = None) -> Json:
        r: Json = {
            "dataSourceRid": rid,
            "channel": channel,
            "range": {
                "start": {"seconds": lo // NANOS, "nanos": lo % NANOS},
                "end": {"seconds": hi // NANOS, "nanos": hi % NANOS},
            },
        }
        return r if filters is None else {**r, "tagFilters": filters}

    end = written["end"]
    requests = [
        asked("speed", start, end),
        asked("speed", start, end, tag_filter("vehicle", "a")),
        asked("speed", start, end, tag_filter("vehicle", "a", "NOT_IN")),
        asked(
            "speed", start, end, {"type": "and", "and": [tag_filter("vehicle", "b"), tag_filter("x", "y")]}
        ),
        asked("speed", start - 100 * NANOS, start - NANOS),  # before any point
        asked("speed", start + 20_500_000_000, end),  # after vehicle b's last point, within a's
        asked("mode", start, end),
        asked("nothing", start, end),
    ]
    async with httpx.AsyncClient(base_url=log_server.base_url, timeout=120) as c:
        r = await c.post("/data-source/v1/data-sources/batch-get-series-count", json={"requests": requests})
        assert r.status_code == 200, r.text
        counts = [x["seriesCount"] for x in r.json()["responses"]]
        assert counts == [2, 1, 1, 0, 0, 1, 1, 0]
        variable = {"type": "variable", "variable": "v"}
        bad = asked("speed", start, end)
        bad["tagFilters"] = {
            "type": "single",
            "single": {"key": variable, "values": [], "operator": "IN"},
        }
        r = await c.post("/data-source/v1/data-sources/batch-get-series-count", json={"requests": [bad]})
        assert r.status_code == 400
        assert r.json()["errorName"] == "Sparkwire:SeriesCountOptionNotSupported"


def test_batch_get_series_count_is_listed_in_openapi(server: ServerProcess) -> None:
    paths = httpx.get(f"{server.base_url}/openapi.json").json()["paths"]
    operation = paths["/data-source/v1/data-sources/batch-get-series-count"]["post"]
    assert "requestBody" in operation and "400" in operation["responses"]


def test_available_tags_over_a_range_are_those_of_series_with_points_in_it(
    log_server: ServerProcess, written: Json
) -> None:
    """`channel.get_available_tags(start, end)`: on the Kafka log, a Spark job counts which series
    hold points in the range (decision 0093); on the embedded log, the blocks' spans say."""
    rid, start, end = written["rid"], written["start"], written["end"]

    def tags(lo: int, hi: int) -> Json:
        body = {
            "channelWithTagFilters": {"dataSourceRid": rid, "channel": "speed", "tagFilters": {}},
            "startTime": {"secondsSinceEpoch": lo // NANOS, "offsetNanoseconds": lo % NANOS},
            "endTime": {"secondsSinceEpoch": hi // NANOS, "offsetNanoseconds": hi % NANOS},
        }
        url = f"{log_server.base_url}/data-source/v1/data-sources/get-available-tags"
        r = httpx.post(url, json=body, timeout=120)
        assert r.status_code == 200, r.text
        found: Json = r.json()["availableTags"]["availableTags"]
        return found

    assert tags(start, end) == {"vehicle": ["a", "b"]}
    after_b = written["b"][-1][0] + 1  # vehicle a's points go on after b's last one
    assert written["a"][-1][0] >= after_b
    assert tags(after_b, end) == {"vehicle": ["a"]}
    assert tags(start - 100 * NANOS, start - NANOS) == {}
