"""`POST /storage/writer/v1/prometheus/{dataSourceRid}`: Prometheus remote write (its 1.0
specification: a snappy-compressed protobuf WriteRequest, as Prometheus itself and Vector's
`prometheus_remote_write` sink send it), and `GET` on the same path, nominal-api's health check for
Vector's sink. Through the pipeline every writer shares (app/ingest/writes.py `accept_writes`:
Origin, bearer token, the body streamed under its limit, the ingest limits, the data sources the
token reaches, the durable log before the 200, nothing stored on a refusal, Conjure errors).

The request, before its body is read (415 Sparkwire:UnsupportedContentEncoding or
Sparkwire:UnsupportedMediaType otherwise): `Content-Encoding: snappy` (the block format, as the
specification says), a protobuf Content-Type (Prometheus: application/x-protobuf; nominal-api's
client: application/octet-stream), and no remote write 2.0 (`X-Prometheus-Remote-Write-Version` 2.x
or `proto=io.prometheus.write.v2.Request`: a 2.0 sender falls back to 1.0 on a 415).
The snappy block's declared length is checked against SPARKWIRE_MAX_REQUEST_BYTES before it is
decompressed (413), as the other encodings are bounded while they stream
(app/http/request_body.py). The protobuf is nominal-api-protos' own WriteRequest
(nominal/protos/write/prometheus_remote_write.proto: timeseries of labels and samples; metadata,
exemplars and native histograms are skipped as unknown fields).

How a series becomes points (docs/decisions/0070-telegraf-and-prometheus-writers.md):
- the `__name__` label is the channel (a series without it is refused, 400); the other labels are
  its tags, a label of empty value being no label (Prometheus' rule); a label named twice is refused;
- each sample is a numeric point, its millisecond timestamp in nanoseconds;
- Prometheus' staleness markers (the NaN of bits 0x7ff0000000000002, sent when a series ends) are
  not points and are left out; any other NaN is stored as a NaN point."""

from __future__ import annotations

import functools
from typing import Any

import cramjam
import numpy as np
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from google.protobuf.message import DecodeError
from nominal.protos.write.prometheus_remote_write_pb2 import WriteRequest

from app.http.errors import INVALID_ARGUMENT, UNSUPPORTED_CONTENT_ENCODING, HttpError, error_response
from app.http.request_body import BodyTooLarge
from app.ingest.nominal import PROTOBUF_TYPES
from app.ingest.writes import InvalidWrite, accept_writes
from app.protocol.admission import Refused
from compute.storage.contract import SeriesWrite
from compute.storage.series import SeriesKey, SeriesKind
from schemas.timestamps import MAX_SECONDS

PROMETHEUS_PATH = "/storage/writer/v1/prometheus/{dataSourceRid}"
NAME_LABEL = "__name__"
STALE_NAN_BITS = 0x7FF0000000000002  # Prometheus' value.StaleNaN
SNAPPY = ("snappy",)
MILLIS_PER_SECOND = 1000
NANOS_PER_MILLI = 1_000_000
MAX_MILLIS = (MAX_SECONDS + 1) * MILLIS_PER_SECOND - 1  # what the other writers accept, in ms


async def write_prometheus(request: Request, dataSourceRid: str) -> Response:
    """`POST`: a remote write request into `dataSourceRid`."""
    refused = _refuse_headers(request)
    if refused is not None:
        return refused
    limit = request.app.state.sparkwire.settings.max_request_bytes

    # snappy (C, bounded by the declared size) on the loop; the WriteRequest's series loop, which is
    # Python per series (a scrape is thousands), in a decode process when large (app/ingest/workers.py)
    to_writes = functools.partial(prometheus_writes, rid=dataSourceRid)

    async def decode(body: bytes) -> list[SeriesWrite]:
        return await request.app.state.sparkwire.decoders.decoded(to_writes, unsnappy(body, limit))

    return await accept_writes(request, decode, passed=SNAPPY)


async def prometheus_health(request: Request, dataSourceRid: str) -> Response:
    """`GET`: nominal-api's prometheusRemoteWriteHealthCheck, `true` once the caller is admitted
    (Origin and token: 403, 401); it reads no data and checks nothing of the data source."""
    try:
        request.app.state.sparkwire.admission.admit(request.headers, "write here")
    except Refused as refused:
        return error_response(refused.status, refused.message)
    return JSONResponse(True)


def _refuse_headers(request: Request) -> Response | None:
    """A 415 for what is not a remote write 1.0 request, else None."""
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding != "snappy":
        shown = encoding or "none"
        return error_response(
            415,
            f"Content-Encoding {shown}: Prometheus remote write bodies are snappy-compressed "
            "(Content-Encoding: snappy)",
            UNSUPPORTED_CONTENT_ENCODING,
            params={"contentEncoding": shown[:100], "supported": "snappy"},
        )
    content_type = request.headers.get("content-type", "")
    media, _, parameters = content_type.partition(";")
    media = media.strip().lower()
    version = request.headers.get("x-prometheus-remote-write-version", "").strip()
    if "io.prometheus.write.v2" in parameters or version.startswith("2"):
        return error_response(
            415,
            f"remote write 2.0 (Content-Type {content_type!r}, X-Prometheus-Remote-Write-Version "
            f"{version or 'none'!r}) is not supported; send remote write 1.0 (prometheus.WriteRequest)",
            params={"contentType": content_type[:100]},
        )
    if media not in PROTOBUF_TYPES:
        shown = media or "none"
        return error_response(
            415,
            f"Content-Type {shown}: this endpoint takes a Prometheus remote write WriteRequest "
            "protobuf (application/x-protobuf)",
            params={"contentType": shown[:100]},
        )
    return None


def unsnappy(body: bytes, limit: int) -> bytes:
    """The snappy block `body` decompressed; 413 if it declares more than `limit` bytes (checked
    before any is produced), 400 if it is not valid snappy data."""
    try:
        declared = cramjam.snappy.decompress_raw_len(body)
        if declared > limit:
            raise BodyTooLarge(limit, f"decompressed (a snappy block of {declared} bytes)")
        return bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as exc:
        raise HttpError(400, f"the body is not valid snappy data: {exc}", INVALID_ARGUMENT) from None


def prometheus_writes(body: bytes, rid: str) -> list[SeriesWrite]:
    """A serialized remote write WriteRequest to the log's writes for data source `rid`;
    InvalidWrite names what is wrong and where.

    A scrape's request is thousands of series of one sample each: the samples of every series are
    gathered into one column of values and one of timestamps, checked and converted once, and cut
    per series (numpy's cost per call, paid per series, was most of the decode)."""
    if not rid:
        raise InvalidWrite("dataSourceRid: must not be empty")
    request = WriteRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise InvalidWrite(f"body is not a remote write WriteRequest protobuf: {exc}") from None
    keys: list[SeriesKey] = []
    indices: list[int] = []  # each key's timeseries
    offsets = [0]
    values: list[float] = []
    millis: list[int] = []
    for i, series in enumerate(request.timeseries):
        channel, tags = _labels(series.labels, i)
        samples = series.samples
        if not samples:
            continue
        keys.append(SeriesKey.of(rid, channel, tags))
        indices.append(i)
        values.extend([sample.value for sample in samples])
        millis.extend([sample.timestamp for sample in samples])
        offsets.append(len(values))
    if not keys:
        return []
    all_values = np.asarray(values, dtype=np.float64)
    all_millis = np.asarray(millis, dtype=np.int64)
    bad = (all_millis < 0) | (all_millis > MAX_MILLIS)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        k = int(np.searchsorted(offsets, j, side="right")) - 1
        ms = int(all_millis[j])
        raise InvalidWrite(
            f"timeseries.{indices[k]} ({NAME_LABEL} {keys[k].channel!r}).samples.{j - offsets[k]}.timestamp: "
            f"{ms} ms (seconds {ms // MILLIS_PER_SECOND}) is outside 0..{MAX_MILLIS} ms"
        )
    all_ts = all_millis * NANOS_PER_MILLI
    live = all_values.view(np.uint64) != STALE_NAN_BITS
    stale = not live.all()
    writes = []
    for k, key in enumerate(keys):
        a, b = offsets[k], offsets[k + 1]
        ts, column = all_ts[a:b], all_values[a:b]
        if stale:
            kept = live[a:b]
            ts, column = ts[kept], column[kept]
            if not len(ts):
                continue
        writes.append(SeriesWrite(key, SeriesKind.NUMERIC, ts, column))
    return writes


def _labels(labels: Any, i: int) -> tuple[str, dict[str, str]]:
    """A series' channel (its `__name__`) and tags (the other labels of non-empty value)."""
    pairs = [(label.name, label.value) for label in labels]
    tags = dict(pairs)
    if len(tags) != len(pairs):
        names = [name for name, _ in pairs]
        twice = next(name for name in names if names.count(name) > 1)
        raise InvalidWrite(f"timeseries.{i}.labels: label {twice!r} is given twice")
    if "" in tags:
        raise InvalidWrite(f"timeseries.{i}.labels: a label name must not be empty")
    channel = tags.pop(NAME_LABEL, "")
    if not channel:
        raise InvalidWrite(f"timeseries.{i}.labels: no {NAME_LABEL} label (the metric's name, the channel)")
    if not all(tags.values()):  # an empty value is no label (Prometheus' rule)
        tags = {name: value for name, value in tags.items() if value}
    return channel, tags
