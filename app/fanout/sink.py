"""What fan-out writes to: a subscriber's connection as the hub sees it (centrifuge's transport
interface). app/transport/connection.py's `Connection` is one; fan-out never imports it."""

from __future__ import annotations

from typing import Protocol


class FrameSource(Protocol):
    """A subscription with an update owed; its frame is built when the sink can send it."""

    def take_frame(self) -> str | None: ...


class Closed(Protocol):
    def is_set(self) -> bool: ...


class Sink(Protocol):
    @property
    def id(self) -> int:
        """Names the connection in logs and the directory of computations."""
        ...

    @property
    def closed(self) -> Closed:
        """Set once the connection is over: nothing offered or sent reaches the client any more."""
        ...

    def send(self, text: str) -> None:
        """Queue a message (a creation, a pong, a notice) after what is queued already."""

    def offer(self, source: FrameSource) -> None:
        """`source` has an update owed: the sink asks it for the frame when it can send one."""

    def withdraw(self, source: FrameSource) -> None:
        """`source` is gone: nothing more is asked of it."""
