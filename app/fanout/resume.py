"""Resume tokens (extension, docs/extensions.md): what a subscriber that reconnects is owed instead
of a whole new window.

Each live computation keeps a short history of its changes: a version per change and the earliest
timestamp the change touched. A token names the server process, the computation and the version
the client's view stands at; presented again, the changes since that version merge into one span
exactly as the hub merges a slow subscriber's pending changes (app/fanout/hub.py), so one AppendResult
brings the view up to date. When that cannot be known, the answer is a FullResult and a reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
import time
from collections import deque
from dataclasses import dataclass

MAX_CHANGES = 4096  # per computation; older tokens get a FullResult ("tokenTooOld")
MAX_AGE_S = 600.0  # changes older than this are forgotten too


def key_digest(key: str) -> str:
    """What a token names a computation by (its key can be kilobytes of JSON)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Resumed:
    """The view can be brought up to date with the changes from `start` (None: nothing changed)."""

    start: int | None


@dataclass(frozen=True)
class Refused:
    """A FullResult instead, and why: tokenInvalid, serverRestarted, computationGone,
    computationRestarted or tokenTooOld."""

    reason: str


class ChangeHistory:
    """One computation's recent changes, by version."""

    def __init__(self, key: str) -> None:
        self.digest = key_digest(key)  # once, not per frame
        self.version = 0
        self.floor = 0  # tokens below this version need changes no longer kept
        self.rebuilt_at = 0  # tokens below this version predate a rebuild
        self._changes: deque[tuple[int, int, float]] = deque()  # (version, start, monotonic time)

    def record(self, start: int) -> None:
        self.version += 1
        now = time.monotonic()
        self._changes.append((self.version, start, now))
        while len(self._changes) > MAX_CHANGES or now - self._changes[0][2] > MAX_AGE_S:
            forgotten = self._changes.popleft()
            self.floor = forgotten[0]

    def rebuilt(self) -> None:
        """The computation was rebuilt (a stream restart, an edge's re-sync): no older view is known."""
        self.version += 1
        self.floor = self.rebuilt_at = self.version
        self._changes.clear()

    def since(self, version: int) -> Resumed | Refused:
        if version > self.version:
            return Refused("tokenInvalid")
        if version < self.rebuilt_at:
            return Refused("computationRestarted")
        if version < self.floor:
            return Refused("tokenTooOld")
        starts = [start for v, start, _ in self._changes if v > version]
        return Resumed(min(starts) if starts else None)


class Tokens:
    """Issues and reads the tokens of this server process (a restart makes a new `instance`)."""

    def __init__(self) -> None:
        self.instance = secrets.token_hex(6)

    def issue(self, history: ChangeHistory) -> str:
        """The token of the view as of `history`'s newest version."""
        raw = f"1.{self.instance}.{history.digest}.{history.version}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def read(self, token: str, digest: str) -> int | Refused:
        """The version a token stands at for the computation of `digest`, or why it cannot be used."""
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
            form, instance, token_digest, version = raw.split(".")
            number = int(version)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return Refused("tokenInvalid")
        if form != "1" or token_digest != digest or number < 0:
            return Refused("tokenInvalid")  # malformed, or another computation's token
        if instance != self.instance:
            return Refused("serverRestarted")
        return number
