"""Per-connection and per-server limits, each a setting with a safe default (app/config.py):

| limit                               | default  | when exceeded                                          |
|-------------------------------------|----------|--------------------------------------------------------|
| WebSocket connections per server    | 1000     | the new connection is accepted and closed with 1013    |
| subscriptions per connection        | 128      | `subscriptionCreation` error `TooManySubscriptions`    |
| client messages per second          | 100      | message dropped, `clientMessageError` (one per second); |
|                                     | (burst 2x) | a client that keeps going after that is closed 1008  |
| each request's headers (1st or not) | 10 s     | the socket is closed                                   |
| each request's body                 | 10 s + 1 s per 1 KiB received | the socket is closed              |
| first WebSocket message after accept| 10 s     | close 1008                                             |
| client message size (decompressed)  | 1 MiB    | close 1009 (enforced by the WebSocket protocol layer)  |
| JSON nesting depth                  | 64       | `clientMessageError`, the connection stays open        |
"""

from __future__ import annotations

import numpy as np

MAX_JSON_DEPTH = 64


def json_depth(raw: bytes) -> int:
    """Deepest nesting of `[`/`{` outside strings (or, when that is at most MAX_JSON_DEPTH, an
    upper bound of it), without parsing: a recursive parser could be made to blow its stack.
    Vectorized, so a 1 MiB message does not cost a Python loop over its characters."""
    openers = raw.count(b"[") + raw.count(b"{")
    if openers <= MAX_JSON_DEPTH:
        return openers  # an upper bound, and already small enough
    b = np.frombuffer(raw, np.uint8)
    # A quote delimits a string unless an odd run of backslashes precedes it.
    quotes = np.flatnonzero(b == 34)
    if len(quotes):
        positions = np.arange(len(b))
        last_plain = np.maximum.accumulate(np.where(b != 92, positions, -1))
        before = quotes - 1
        run = np.where(before >= 0, before - last_plain[np.maximum(before, 0)], 0)
        delimiters = quotes[run % 2 == 0]
        toggles = np.zeros(len(b), np.int8)
        toggles[delimiters] = 1
        outside = (np.cumsum(toggles, dtype=np.int64) % 2) == 0
    else:
        outside = np.ones(len(b), bool)
    step = ((b == 91) | (b == 123)).astype(np.int32) - ((b == 93) | (b == 125)).astype(np.int32)
    depth = np.cumsum(step * outside, dtype=np.int64)
    return int(depth.max(initial=0))


class MessageRate:
    """Token bucket: `rate` messages per second, bursts up to 2x. A client that goes on sending a
    whole burst's worth after being told it is over the limit is closed."""

    def __init__(self, rate: float, now: float) -> None:
        """`now` and every call's: seconds on a monotonic clock (the caller's, so tests can drive it)."""
        self.rate = rate
        self.burst = max(1.0, 2 * rate)
        self.tokens = self.burst
        self.refilled = now
        self.dropped = 0  # messages dropped since the client last stayed within the limit
        self.last_notice = float("-inf")

    def allow(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.refilled) * self.rate)
        self.refilled = now
        if self.tokens >= 1:
            self.tokens -= 1
            self.dropped = 0
            return True
        self.dropped += 1
        return False

    def should_notify(self, now: float) -> bool:
        """At most one over-the-limit notice per second (notices must not become a flood)."""
        if now - self.last_notice >= 1.0:
            self.last_notice = now
            return True
        return False

    @property
    def abusive(self) -> bool:
        return self.dropped > self.burst
