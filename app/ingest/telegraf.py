"""`POST /storage/writer/v1/telegraf/{dataSourceRid}`: Telegraf's HTTP output in its `json` data
format, nominal-api's WriteTelegrafBatchesRequest, through the pipeline every writer shares
(app/ingest/writes.py `accept_writes`: Origin, bearer token, the body streamed under its limit with
its Content-Encoding undone, the ingest limits, the data sources the token reaches, the durable log
before the 200, nothing stored on a refusal, Conjure errors).

The body is Telegraf's batch form, `{"metrics": [metric, ...]}` (what its HTTP output sends with
`use_batch_format = true`, the default), or one metric alone (its standard form). A metric is
`{"fields": {...}, "name": "cpu", "tags": {...}, "timestamp": 1700000000000000000}`.

How a metric becomes points (docs/decisions/0070-telegraf-and-prometheus-writers.md):
- each field is a channel named `<name>.<field>` (nominal-api: "Measurement name and field are
  concatenated when creating the Nominal channel name"), with the metric's tags as its tags;
- the timestamp is an integer of nanoseconds since the epoch, as nominal-api assumes (Telegraf:
  `json_timestamp_units = "1ns"`); another number or a string is refused by name;
- a float field is a numeric point; an integer one too, as a double, refused (never rounded) beyond
  what a double holds exactly (2^53), as on the other writers; a bool is a numeric 1.0 or 0.0; a
  string field is an enum (string) point. null, lists and objects are refused by name.
The points of one channel and tag set across the request's metrics are one series write.
A body of SPARKWIRE_INGEST_DECODE_MIN_BYTES or more is decoded in a decode process
(app/ingest/workers.py), as the JSON writers' are."""

from __future__ import annotations

import functools
from typing import Any

import msgspec
import numpy as np
from fastapi import Request
from fastapi.responses import Response

from app.ingest.writes import InvalidWrite, accept_writes
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesKey, SeriesKind
from schemas.timestamps import MAX_SECONDS, NANOS_PER_SECOND

TELEGRAF_PATH = "/storage/writer/v1/telegraf/{dataSourceRid}"
MAX_NANOS = (MAX_SECONDS + 1) * NANOS_PER_SECOND - 1  # what the other writers accept


class TelegrafMetric(msgspec.Struct, forbid_unknown_fields=True):
    """nominal-api's TelegrafMetric (Telegraf's json serializer writes exactly these members)."""

    fields: dict[str, Any]
    name: str
    timestamp: Any
    tags: dict[str, str] | None = None  # Conjure: a null member is an absent one


class TelegrafBody(msgspec.Struct, forbid_unknown_fields=True):
    """Either form: `metrics` (WriteTelegrafBatchesRequest), or one metric's members."""

    metrics: list[TelegrafMetric] | None = None
    fields: dict[str, Any] | None = None
    name: str | None = None
    timestamp: Any = None
    tags: dict[str, str] | None = None


_decoder = msgspec.json.Decoder(TelegrafBody)


async def write_telegraf(request: Request, dataSourceRid: str) -> Response:
    """`POST /storage/writer/v1/telegraf/{dataSourceRid}`: Telegraf's JSON, into `dataSourceRid`."""
    decode = functools.partial(
        request.app.state.sparkwire.decoders.decoded, functools.partial(telegraf_writes, rid=dataSourceRid)
    )
    return await accept_writes(request, decode)


def _metrics(body: bytes) -> list[TelegrafMetric]:
    try:
        parsed = _decoder.decode(body)
    except msgspec.DecodeError as exc:  # ValidationError included: msgspec names the path
        raise InvalidWrite(f"body is not Telegraf's JSON (a WriteTelegrafBatchesRequest): {exc}") from None
    except RecursionError:
        raise InvalidWrite("body: JSON nested too deeply for Telegraf's JSON") from None
    single = parsed.fields is not None or parsed.name is not None or parsed.timestamp is not None
    if parsed.metrics is not None:
        if single or parsed.tags is not None:
            raise InvalidWrite("body: holds `metrics` and a metric's members; send one form or the other")
        return parsed.metrics
    if parsed.fields is None or parsed.name is None or parsed.timestamp is None:
        raise InvalidWrite("body: neither `metrics` nor a metric (`fields`, `name`, `timestamp`)")
    return [TelegrafMetric(parsed.fields, parsed.name, parsed.timestamp, parsed.tags)]


def telegraf_writes(body: bytes, rid: str) -> list[SeriesWrite]:
    """Telegraf's JSON body to the log's writes for data source `rid`; InvalidWrite names what is
    wrong and where for anything the log would not store exactly."""
    if not rid:
        raise InvalidWrite("dataSourceRid: must not be empty")
    metrics = _metrics(body)
    # (channel, sorted tags, numeric?) -> timestamps and values, in the request's order
    series: dict[tuple[str, tuple[tuple[str, str], ...], bool], tuple[list[int], list[Any]]] = {}
    for i, metric in enumerate(metrics):
        where = f"metrics.{i} (name {metric.name!r})"
        if not metric.name:
            raise InvalidWrite(f"metrics.{i}.name: must not be empty")
        ts = metric.timestamp
        if type(ts) is not int:
            raise InvalidWrite(
                f"{where}.timestamp: {ts!r} is not an integer of nanoseconds since the epoch "
                '(configure Telegraf\'s json output with json_timestamp_units = "1ns")'
            )
        if not 0 <= ts <= MAX_NANOS:
            raise InvalidWrite(f"{where}.timestamp: {ts} is outside 0..{MAX_NANOS} nanoseconds")
        tags = tuple(sorted((metric.tags or {}).items()))
        for field, value in metric.fields.items():
            if not field:
                raise InvalidWrite(f"{where}.fields: a field name must not be empty")
            kind = type(value)
            if kind is bool:
                value, numeric = 1.0 if value else 0.0, True
            elif kind is int or kind is float:
                numeric = True
            elif kind is str:
                numeric = False
            else:
                raise InvalidWrite(
                    f"{where}.fields.{field}: {_kind(value)} is not a field value Telegraf sends "
                    "(numbers, strings and bools are); nothing of the request was stored"
                )
            stamps, values = series.setdefault((f"{metric.name}.{field}", tags, numeric), ([], []))
            stamps.append(ts)
            values.append(value)
    writes = []
    for (channel, tags, numeric), (stamps, values) in series.items():
        key = SeriesKey(rid, channel, tags)
        if not numeric:
            writes.append(SeriesWrite(key, SeriesKind.ENUM, stamps, values))
            continue
        doubles = _doubles(values, f"channel {channel!r}")
        writes.append(SeriesWrite(key, SeriesKind.NUMERIC, np.asarray(stamps, dtype=np.int64), doubles))
    return writes


def _doubles(values: list[float | int], where: str) -> np.ndarray:
    """Floats as they are; integers as doubles only where a double holds them exactly."""
    try:
        doubles = [float(v) for v in values]
    except OverflowError:  # an integer of hundreds of digits
        raise InvalidWrite(f"{where}: an integer value is beyond any double") from None
    for j, v in enumerate(values):
        if type(v) is int and int(doubles[j]) != v:
            raise InvalidWrite(
                f"{where}.{j}.value: {v} has no exact double (the nearest is {int(doubles[j])}); "
                "integers up to 2^53 are always exact"
            )
    return np.asarray(doubles, dtype=np.float64)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return repr(value)
