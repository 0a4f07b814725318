"""What a bench client needs from a frame, read without building the whole frame in Python.

A recorder needs a subscription update's id, its kind (full, append, error), an error's name and
the newest feed timestamp the frame proves delivered (`bench.computations.included_through`'s
definition, unchanged). msgspec decodes the frame against the few fields below and skips the rest
(values, bucket figures, ranges) without making objects of them, where a full `orjson.loads` made a
dict per point and bucket: the clients share the server's two cores, so their CPU per frame must
stay below the server's. Anything else (a creation, a health message) is decoded in full by the
caller."""

from __future__ import annotations

import msgspec

NANOS = 1_000_000_000


class _Timestamp(msgspec.Struct, gc=False):
    seconds: int
    nanos: int


class _Point(msgspec.Struct, gc=False):
    timestamp: _Timestamp


class _Bucket(msgspec.Struct, gc=False):
    firstPoint: _Point | None = None
    lastPoint: _Point | None = None


class _Points(msgspec.Struct, gc=False):
    timestamps: msgspec.Raw  # left as text: only its last one or two elements are read


class _Buckets(msgspec.Struct, gc=False):
    timestamps: msgspec.Raw
    buckets: list[_Bucket]


class _Result(msgspec.Struct, gc=False):
    type: str
    numeric: _Points | None = None
    enum: _Points | None = None
    bucketedNumeric: _Buckets | None = None
    bucketedEnum: _Buckets | None = None


class _Full(msgspec.Struct, gc=False):
    result: _Result


class _Append(msgspec.Struct, gc=False):
    result: _Result | None = None


class _SerializableError(msgspec.Struct, gc=False):
    name: str


class _Error(msgspec.Struct, gc=False):
    serializableError: _SerializableError


class _Update(msgspec.Struct, gc=False):
    type: str
    full: _Full | None = None
    append: _Append | None = None
    error: _Error | None = None


class _SubscriptionUpdate(msgspec.Struct, gc=False):
    subscriptionId: str
    update: _Update


class _Envelope(msgspec.Struct, gc=False):
    type: str
    subscriptionUpdate: _SubscriptionUpdate | None = None


class Update(msgspec.Struct, gc=False):
    """A subscription update as a recorder sees it."""

    subscription_id: str
    kind: str  # full, append or error
    error_name: str | None
    newest_ns: int  # the newest feed timestamp it proves delivered, -1 if none


_decoder = msgspec.json.Decoder(_Envelope)


def peek_update(raw: str | bytes) -> Update | None:
    """The subscription update in `raw`, None when `raw` is another message."""
    envelope = _decoder.decode(raw)
    body = envelope.subscriptionUpdate
    if envelope.type != "subscriptionUpdate" or body is None:
        return None
    update = body.update
    result = (
        update.full.result if update.full is not None else update.append.result if update.append else None
    )
    error = update.error.serializableError.name if update.error is not None else None
    return Update(body.subscriptionId, update.type, error, _newest(result))


def _newest(result: _Result | None) -> int:
    """`included_through` over the decoded fields: a raw result's last timestamp, a bucketed one's
    last bucket's lastPoint (or firstPoint; for a one-point bucket, the previous bucket's end)."""
    if result is None:
        return -1
    points = result.numeric if result.type == "numeric" else result.enum if result.type == "enum" else None
    if points is not None:
        return _from_end(points.timestamps, 1)
    buckets = (
        result.bucketedNumeric
        if result.type == "bucketedNumeric"
        else result.bucketedEnum
        if result.type == "bucketedEnum"
        else None
    )
    if buckets is None or not buckets.buckets:
        return -1
    last = buckets.buckets[-1].lastPoint or buckets.buckets[-1].firstPoint
    if last is not None:
        return _ns(last.timestamp)
    return _from_end(buckets.timestamps, 2)


def _from_end(array: msgspec.Raw, k: int) -> int:
    """The k-th timestamp from the end of a JSON array of `Timestamp`s (objects without nested
    braces), -1 if it holds fewer: only that element is parsed."""
    text = bytes(array)
    at = len(text)
    for _ in range(k):
        at = text.rfind(b"{", 0, at)
        if at < 0:
            return -1
    return _ns(_timestamp.decode(text[at : text.index(b"}", at) + 1]))


_timestamp = msgspec.json.Decoder(_Timestamp)


def _ns(t: _Timestamp) -> int:
    return t.seconds * NANOS + t.nanos
