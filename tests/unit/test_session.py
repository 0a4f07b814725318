"""The connection protocol's core (app/protocol/ws_session.py) on its own: messages in, actions out, with the
time given. No server, no Spark, no socket."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.protocol.auth import AuthError, Principal
from app.protocol.ws_session import (
    Action,
    ArmExpiry,
    Close,
    Delivery,
    DisarmExpiry,
    Instant,
    Send,
    Session,
    SessionConfig,
    StartSubscription,
    StopSubscription,
)
from compute.evaluation.compiler.limits import ResultOptions
from compute.evaluation.request import ComputationRequest
from schemas.conjure import absent_nulls
from tests.wire import (
    channel_variable,
    decode_server_message,
    new_id,
    series_node,
    subscribe_message,
    subscription,
)

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0  # unix seconds at monotonic 0
RID = "ri.session.mine"
OTHER = "ri.session.theirs"


def at(t: float) -> Instant:
    return Instant(monotonic=t, unix=T0 + t)


def principal(*patterns: str, expires_in: float | None = 3600) -> Principal:
    return Principal("tester", patterns or ("ri.session.*",), None if expires_in is None else T0 + expires_in)


def new_session(
    who: Principal | None = None,
    config: SessionConfig | None = None,
    tokens: dict[str, Principal] | None = None,
) -> Session:
    def authenticate(token: str) -> Principal:
        if tokens is None or token not in tokens:
            raise AuthError("unknown token")
        return tokens[token]

    return Session(who or principal(), config or SessionConfig(), at(0), authenticate=authenticate)


def sent(actions: list[Action]) -> list[dict[str, Any]]:
    """The frames among the actions, each checked by nominal-api's decoder."""
    frames = []
    for action in actions:
        if isinstance(action, Send):
            decode_server_message(action.frame)
            frames.append(json.loads(action.frame))
    return frames


def of_type(actions: list[Action], kind: type) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def client_error(actions: list[Action]) -> str:
    """The message of the one clientMessageError these actions send (and nothing else)."""
    [frame] = sent(actions)
    assert len(actions) == 1
    health = frame["health"]
    assert health["type"] == "clientMessageError"
    error = health["clientMessageError"]["error"]
    assert error["name"] == "PersistentCompute:InvalidClientMessage"
    assert error["statusCode"] == 400
    message: str = error["message"]
    return message


def creation(frame: dict[str, Any], sub_id: str) -> dict[str, Any]:
    assert frame["type"] == "subscriptionCreation"
    assert frame["subscriptionCreation"]["subscriptionId"] == sub_id
    result: dict[str, Any] = frame["subscriptionCreation"]["creation"]
    return result


def error_update(frame: dict[str, Any], sub_id: str) -> dict[str, Any]:
    assert frame["type"] == "subscriptionUpdate"
    assert frame["subscriptionUpdate"]["subscriptionId"] == sub_id
    update = frame["subscriptionUpdate"]["update"]
    assert update["type"] == "error"
    error: dict[str, Any] = update["error"]["serializableError"]
    return error


def sub_of(rid: str = RID, **options: Any) -> dict[str, Any]:
    return subscription(series_node(), {"x": channel_variable(rid, "p")}, 60, **options)


def subscribe(session: Session, subs: dict[str, dict[str, Any]], t: float = 1) -> list[Action]:
    return session.receive(subscribe_message(subs), at(t))


def key_of(sub: dict[str, Any]) -> str:
    """The computation key of a subscription as a Nominal client sends it (its nulls absent, as the
    session reads them: schemas.conjure.absent_nulls)."""
    [sent_sub] = absent_nulls(json.loads(subscribe_message({"id": sub})))["subscribe"].values()
    request, options = sent_sub["computeRequest"], sent_sub["subscriptionOptions"]
    window, lateness = request["windowWidth"], options.get("allowedLateness")
    rc = options.get("resultConfiguration")
    return ComputationRequest(
        request["node"],
        window["seconds"] * 10**9 + window["nanos"],
        request["context"]["variables"],
        None if lateness is None else lateness["seconds"] * 10**9 + lateness["nanos"],
        ResultOptions(rc is not None, rc["appendOnly"].get("decimateResults", True) if rc else True),
    ).key


def update_token(token: str) -> str:
    return json.dumps({"type": "updateToken", "updateToken": {"token": token}})


def subscribed(session: Session, sub_id: str, rid: str = RID) -> None:
    """Subscribe and report the start as a success."""
    actions = subscribe(session, {sub_id: sub_of(rid)})
    assert creation(sent(actions)[0], sub_id)["type"] == "success"
    assert session.subscription_started(sub_id) == []


# -- health and bad messages ----------------------------------------------------------------------


def test_a_ping_gets_a_pong_with_its_sent_at() -> None:
    session = new_session()
    actions = session.receive(json.dumps({"type": "ping", "ping": {"sentAt": "2025-01-01T00:00:00Z"}}), at(1))
    [frame] = sent(actions)
    assert len(actions) == 1
    assert frame["health"]["type"] == "pong"
    assert frame["health"]["pong"]["pingOriginallySentAt"] == "2025-01-01T00:00:00Z"


def test_a_pong_needs_no_answer() -> None:
    pong = {"pingOriginallySentAt": "2025-01-01T00:00:00Z", "sentAt": "2025-01-01T00:00:01Z"}
    assert new_session().receive(json.dumps({"type": "pong", "pong": pong}), at(1)) == []


def test_malformed_json_is_a_client_message_error() -> None:
    session = new_session()
    assert client_error(session.receive("not json at all", at(1))).startswith("not JSON: ")
    assert client_error(session.receive(b"\xff\xfe\x00garbage", at(1))) == "binary frame is not UTF-8 JSON"
    assert not session.closed


def test_json_nested_too_deep_is_refused_before_parsing_and_64_levels_pass() -> None:
    session = new_session()
    assert client_error(session.receive("[" * 100 + "]" * 100, at(1))) == "JSON nested deeper than 64 levels"
    deep = json.loads("[" * 62 + "]" * 62)  # + the message object + the ping object = 64
    ping = json.dumps({"type": "ping", "ping": {"sentAt": "2025-01-01T00:00:00Z", "pad": deep}})
    [frame] = sent(session.receive(ping, at(1)))
    assert frame["health"]["type"] == "pong"


@pytest.mark.parametrize(
    ("message", "says"),
    [
        ({"type": "launch", "launch": {}}, "not a ClientMessage: "),
        ({"type": "unsubscribe", "unsubscribe": [""]}, "not a ClientMessage: unsubscribe.unsubscribe.0: "),
        ({"type": "ping", "ping": {"sentAt": 12}}, "not a ClientMessage: ping.ping.sentAt: "),
    ],
)
def test_an_invalid_client_message_is_a_client_message_error(message: dict[str, Any], says: str) -> None:
    session = new_session()
    assert client_error(session.receive(json.dumps(message), at(1))).startswith(says)
    assert not session.closed


def test_a_message_over_the_size_limit_closes_with_1009() -> None:
    session = new_session(config=SessionConfig(max_message_bytes=100))
    ping = json.dumps({"type": "ping", "ping": {"sentAt": "2025-01-01T00:00:00Z"}})
    assert len(sent(session.receive(ping, at(1)))) == 1
    assert session.receive(ping + " " * 100, at(2)) == [Close(1009, "message too big")]
    assert session.closed
    assert session.receive(ping, at(3)) == []  # nothing more is read


def test_messages_over_the_rate_are_dropped_with_one_notice_then_the_flood_is_closed() -> None:
    session = new_session(config=SessionConfig(max_messages_per_second=1))  # a burst of 2
    ping = json.dumps({"type": "ping", "ping": {"sentAt": "2025-01-01T00:00:00Z"}})
    assert [len(session.receive(ping, at(1))) for _ in range(2)] == [1, 1]
    assert client_error(session.receive(ping, at(1))) == "over 1 messages per second: message dropped"
    assert session.receive(ping, at(1)) == []  # dropped; one notice a second
    assert session.receive(ping, at(1)) == [Close(1008, "message rate limit exceeded")]


# -- subscribe ------------------------------------------------------------------------------------


def test_subscribe_creates_and_starts_the_computation_by_its_key() -> None:
    session = new_session()
    sub_id = new_id()
    sub = sub_of(min_delay_ms=250, lateness_s=2)
    actions = subscribe(session, {sub_id: sub})
    [frame] = sent(actions)
    no_unit = {"type": "single", "single": {"type": "noUnitAvailable", "noUnitAvailable": []}}
    assert creation(frame, sub_id) == {"type": "success", "success": {"unitResult": no_unit}}
    [start] = of_type(actions, StartSubscription)
    assert actions.index(start) > 0  # created before it starts
    assert start.subscription_id == sub_id
    assert start.key == key_of(sub)
    assert start.allowed_lateness_ns == 2 * 10**9
    assert start.delivery == Delivery(min_delay_s=0.25, allow_appends=True, append_only=False)
    assert [s.data_source_rid for s in start.plan.selectors] == [RID]
    assert start.plan.window_ns == 60 * 10**9
    assert session.live == [sub_id]


def test_identical_subscriptions_share_a_computation_key() -> None:
    session = new_session()
    a, b = new_id(), new_id()
    starts = of_type(subscribe(session, {a: sub_of(), b: sub_of()}), StartSubscription)
    assert [s.subscription_id for s in starts] == [a, b]
    assert starts[0].key == starts[1].key


def test_a_node_sparkwire_refuses_is_a_creation_error_and_the_others_still_start() -> None:
    session = new_session()
    good, bad = new_id(), new_id()
    unknown_variable = subscription(series_node("y"), {"x": channel_variable(RID, "p")}, 60)
    actions = subscribe(session, {good: sub_of(), bad: unknown_variable})
    frames = sent(actions)
    assert creation(frames[0], good)["type"] == "success"
    error = creation(frames[1], bad)["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:InvalidComputation"
    assert [s.subscription_id for s in of_type(actions, StartSubscription)] == [good]
    assert session.live == [good]


def test_one_malformed_node_refuses_the_whole_message() -> None:
    session = new_session()
    good, bad = new_id(), new_id()
    not_a_node = {"type": "series", "series": {"input": {"type": "numeric", "numeric": 5}}}
    malformed = subscription(not_a_node, {}, 60)
    message = json.dumps({"type": "subscribe", "subscribe": {good: sub_of(), bad: malformed}})
    assert client_error(session.receive(message, at(1))).startswith(f"subscription {bad}: ")
    assert session.live == []  # nothing was created, not even the good one


def test_reusing_a_live_id_replaces_the_subscription() -> None:
    session = new_session()
    sub_id = new_id()
    subscribed(session, sub_id)
    replacement = subscription(series_node(), {"x": channel_variable(RID, "q")}, 60)
    actions = subscribe(session, {sub_id: replacement}, t=2)
    assert actions[0] == StopSubscription(sub_id)  # the old one goes first
    assert creation(sent(actions)[0], sub_id)["type"] == "success"
    [start] = of_type(actions, StartSubscription)
    assert start.key == key_of(replacement) != key_of(sub_of())
    assert session.live == [sub_id]  # and takes no more room


def test_a_connection_holds_at_most_max_subscriptions() -> None:
    session = new_session(config=SessionConfig(max_subscriptions=2))
    ids = [new_id() for _ in range(4)]
    actions = subscribe(session, {i: sub_of() for i in ids[:2]})
    assert [creation(f, i)["type"] for f, i in zip(sent(actions), ids[:2], strict=True)] == ["success"] * 2
    refused = subscribe(session, {ids[2]: sub_of()}, t=1)
    error = creation(sent(refused)[0], ids[2])["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:TooManySubscriptions"
    assert error["params"] == {"limit": "2"}
    assert len(of_type(actions + refused, StartSubscription)) == 2

    # Unsubscribing frees room; re-using a live id takes no more room.
    session.receive(json.dumps({"type": "unsubscribe", "unsubscribe": ids[:1]}), at(2))
    again = subscribe(session, {ids[1]: sub_of(), ids[3]: sub_of()}, t=3)
    assert [creation(f, i)["type"] for f, i in zip(sent(again), ids[1::2], strict=True)] == ["success"] * 2
    assert sorted(session.live) == sorted(ids[1::2])


def test_subscriptions_past_the_cap_in_one_message_are_refused_in_one_frame() -> None:
    """1,700 in one message were 1,700 creation frames, past the send queue's limit (issue 44)."""
    session = new_session(config=SessionConfig(max_subscriptions=3))
    ids = [new_id() for _ in range(300)]
    actions = subscribe(session, {i: sub_of() for i in ids})
    frames = sent(actions)
    assert len(frames) == 4
    assert [creation(f, i)["type"] for f, i in zip(frames, ids[:3], strict=False)] == ["success"] * 3
    message = frames[3]["health"]["clientMessageError"]["error"]["message"]
    assert "subscribe names 300 subscriptions; a connection holds at most 3" in message
    assert "and 287 more not subscribed" in message
    assert sorted(session.live) == sorted(ids[:3])


def test_a_data_source_the_token_does_not_reach_is_permission_denied() -> None:
    session = new_session(principal(RID))
    mine, theirs = new_id(), new_id()
    actions = subscribe(session, {mine: sub_of(RID), theirs: sub_of(OTHER)})
    frames = sent(actions)
    assert creation(frames[0], mine)["type"] == "success"
    error = creation(frames[1], theirs)["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:PermissionDenied"
    assert error["statusCode"] == 403
    assert error["params"] == {"rids": OTHER}
    assert [s.subscription_id for s in of_type(actions, StartSubscription)] == [mine]


def test_a_subscribe_after_the_token_expired_is_refused() -> None:
    session = new_session(principal(expires_in=10))
    sub_id = new_id()
    actions = subscribe(session, {sub_id: sub_of()}, t=11)  # before the timer fired
    error = creation(sent(actions)[0], sub_id)["error"]["serializableError"]
    assert error["name"] == "PersistentCompute:SubscriptionAuthExpired"
    assert error["statusCode"] == 403
    assert of_type(actions, StartSubscription) == []


def test_a_start_that_fails_becomes_the_subscriptions_error_update() -> None:
    session = new_session()
    sub_id = new_id()
    subscribe(session, {sub_id: sub_of()})
    error = error_update(sent(session.subscription_failed(sub_id, RuntimeError("no engine")))[0], sub_id)
    assert error["name"] == "PersistentCompute:ComputeFailed"
    assert error["message"] == "the computation could not start: no engine"
    assert error["statusCode"] == 500
    assert session.live == []  # it takes no room any more


def test_a_start_that_ends_after_its_subscription_is_let_go() -> None:
    session = new_session()
    sub_id = new_id()
    subscribe(session, {sub_id: sub_of()})
    session.receive(json.dumps({"type": "unsubscribe", "unsubscribe": [sub_id]}), at(2))
    assert session.subscription_started(sub_id) == [StopSubscription(sub_id)]
    assert session.subscription_failed(sub_id, RuntimeError("late")) == []


def test_unsubscribe_stops_the_subscription_and_names_unknown_ids() -> None:
    session = new_session()
    keep, drop, unknown = new_id(), new_id(), new_id()
    subscribed(session, keep)
    subscribed(session, drop)
    actions = session.receive(json.dumps({"type": "unsubscribe", "unsubscribe": [drop, unknown]}), at(2))
    assert actions[0] == StopSubscription(drop)
    assert len(actions) == 2 and isinstance(actions[1], Send)
    error = json.loads(actions[1].frame)["health"]["clientMessageError"]
    assert unknown in json.dumps(error) and drop not in json.dumps(error)
    assert session.live == [keep]


# -- tokens ---------------------------------------------------------------------------------------


def test_the_expiry_timer_is_armed_at_the_tokens_exp() -> None:
    assert new_session(principal(expires_in=30)).start() == [ArmExpiry(T0 + 30)]
    assert new_session(principal(expires_in=None)).start() == [DisarmExpiry()]


def test_token_expiry_ends_every_subscription_then_closes_with_1008() -> None:
    session = new_session(principal(expires_in=10))
    a, b = new_id(), new_id()
    subscribed(session, a)
    subscribe(session, {b: sub_of()})  # still starting
    actions = session.token_expired()
    assert actions[-1] == Close(1008, "token expired")
    assert of_type(actions, StopSubscription) == [StopSubscription(a), StopSubscription(b)]
    frames = sent(actions)
    for frame, sub_id in zip(frames, (a, b), strict=True):
        assert error_update(frame, sub_id)["name"] == "PersistentCompute:SubscriptionAuthExpired"
    assert session.closed and session.live == []
    assert session.receive(subscribe_message({new_id(): sub_of()}), at(12)) == []


def test_update_token_rearms_the_timer_and_keeps_what_it_reaches() -> None:
    fresh = principal(RID, expires_in=300)
    session = new_session(principal(RID, expires_in=5), tokens={"fresh": fresh})
    sub_id = new_id()
    subscribed(session, sub_id)
    actions = session.receive(update_token("fresh"), at(2))
    assert actions == [ArmExpiry(T0 + 300)]
    assert session.principal == fresh
    assert session.live == [sub_id]
    assert of_type(subscribe(session, {new_id(): sub_of()}, t=10), StartSubscription)  # past the old exp


def test_update_token_with_a_narrower_claim_ends_what_it_no_longer_reaches() -> None:
    narrower = principal(RID)
    session = new_session(principal(RID, OTHER), tokens={"narrower": narrower})
    kept, lost = new_id(), new_id()
    subscribed(session, kept, RID)
    subscribed(session, lost, OTHER)
    actions = session.receive(update_token("narrower"), at(2))
    assert actions[0] == ArmExpiry(T0 + 3600)
    assert of_type(actions, StopSubscription) == [StopSubscription(lost)]
    [frame] = sent(actions)
    error = error_update(frame, lost)
    assert error["name"] == "PersistentCompute:PermissionDenied"
    assert error["params"] == {"rids": OTHER}
    assert session.live == [kept]


def test_a_bad_update_token_closes_with_1008() -> None:
    session = new_session()
    actions = session.receive(update_token("forged"), at(2))
    assert actions == [Close(1008, "updateToken refused: unknown token")]
    assert session.closed


def test_update_token_is_answered_when_authentication_is_off() -> None:
    session = Session(principal(), SessionConfig(), at(0), authenticate=None)
    (answer,) = session.receive(update_token("x"), at(1))
    assert isinstance(answer, Send)
    assert "authentication is off" in json.dumps(json.loads(answer.frame)["health"]["clientMessageError"])
    assert not session.closed


# -- liveness and the end -------------------------------------------------------------------------


def test_a_silent_peer_is_pinged_and_closed_if_it_never_answers() -> None:
    session = new_session(config=SessionConfig(ping_interval=10, ping_timeout=5))
    assert session.config.heartbeat_period == 2.5
    assert session.heartbeat(at(9)) == []  # not silent long enough
    [frame] = sent(session.heartbeat(at(11)))
    assert frame["health"]["type"] == "ping"
    assert session.heartbeat(at(13)) == []  # awaiting the pong, within the timeout: no second ping
    assert session.heartbeat(at(16.5)) == [Close(1001, "ping timeout")]
    assert session.closed
    assert session.heartbeat(at(30)) == []


def test_any_message_counts_as_the_pong() -> None:
    session = new_session(config=SessionConfig(ping_interval=10, ping_timeout=5))
    assert len(sent(session.heartbeat(at(11)))) == 1
    session.receive("not json at all", at(12))  # even a bad one is a sign of life
    assert session.heartbeat(at(17)) == []
    assert len(sent(session.heartbeat(at(22.5)))) == 1  # silent for the interval again


def test_close_lets_go_of_every_subscription_and_the_timer() -> None:
    session = new_session()
    a, b = new_id(), new_id()
    subscribed(session, a)
    subscribe(session, {b: sub_of()})
    assert session.close() == [StopSubscription(a), StopSubscription(b), DisarmExpiry()]
    assert session.live == []


def test_result_options_are_part_of_the_computation_key() -> None:
    """Decimation and append-only shape the output, so subscriptions differing only there must not
    share a computation (they did before the request carried its options)."""
    session = new_session()
    plain, raw_appends, decimated_appends = sub_of(), sub_of(), sub_of()
    raw_appends["subscriptionOptions"]["resultConfiguration"] = {
        "type": "appendOnly",
        "appendOnly": {"decimateResults": False},
    }
    decimated_appends["subscriptionOptions"]["resultConfiguration"] = {
        "type": "appendOnly",
        "appendOnly": {"decimateResults": True},
    }
    subs = {new_id(): plain, new_id(): raw_appends, new_id(): decimated_appends}
    starts = of_type(subscribe(session, subs), StartSubscription)
    assert len(starts) == 3
    assert len({s.key for s in starts}) == 3
    assert [s.key for s in starts] == [key_of(s) for s in subs.values()]
    assert [s.request.options.decimate for s in starts] == [True, False, True]
