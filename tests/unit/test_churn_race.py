"""Item 5 of the attacks (subscriptions leaked under subscribe/unsubscribe churn), at the race that
leaks: a start that is stopped, its id subscribed again, and the cancellation does not land (as
`asyncio.wait_for` can swallow one that races its result), so the first start attaches anyway.
What it attached must be released, or it holds its computation forever. No server: the driver
(app/ws.py) with a real Session and a hub that records what is attached."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from app.api.ws import SessionDriver, _now
from app.protocol.ws_session import Session, SessionConfig, StartSubscription
from tests.unit.test_session import principal, sub_of
from tests.wire import subscribe_message

pytestmark = pytest.mark.unit


class Attached:
    """What a start attached (a Subscriber, as far as the driver can tell)."""


class RecordingHub:
    def __init__(self) -> None:
        self.attached: set[Any] = set()

    def unsubscribe(self, subscriber: Any) -> None:
        self.attached.discard(subscriber)


async def test_a_start_that_outlived_its_stop_lets_go_of_what_it_attached() -> None:
    hub = RecordingHub()
    connection = SimpleNamespace(closed=asyncio.Event(), send=lambda frame: None, close_soon=lambda *a: None)
    session = Session(principal(), SessionConfig(), _now())
    driver = SessionDriver(SimpleNamespace(hub=hub), connection, session)  # type: ignore[arg-type]
    gate = asyncio.Event()

    async def attach(action: StartSubscription) -> Any:
        while True:  # a wait whose cancellation is swallowed, as wait_for's can be
            try:
                await gate.wait()
                break
            except asyncio.CancelledError:
                continue
        subscriber = Attached()
        hub.attached.add(subscriber)
        return subscriber

    driver._attach = attach  # type: ignore[method-assign]
    subscribe = subscribe_message({"c": sub_of()})
    unsubscribe = json.dumps({"type": "unsubscribe", "unsubscribe": ["c"]})
    for message in (subscribe, unsubscribe, subscribe):  # the churn: the id is subscribed again
        driver.perform(session.receive(message, _now()))
        await asyncio.sleep(0)
    gate.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(hub.attached) == 1, "the stopped start's attachment leaked"
    driver.perform(session.receive(unsubscribe, _now()))
    assert hub.attached == set()
