"""An edge's judgement of which compute processes still live (app/tiers/liveness.py), fed the
heartbeats as its pub/sub connection delivers them: in Redis' order, however late they are read.
Under the sharded bench's load an edge read them tens of seconds late and took the survivors for
dead too (docs/decisions/0091)."""

from __future__ import annotations

from app.tiers.liveness import Liveness

TIMEOUT = 3.0
HEARTBEAT = 0.5


def test_a_backlog_read_late_is_no_silence() -> None:
    # Two processes' heartbeats for 30 s, every one read 40 s after it was sent, slowly: the edge
    # has not been caught up since it started (t = 0), and neither process is silent.
    live = Liveness(TIMEOUT)
    for i in range(60):
        sent = i * HEARTBEAT
        live.heard("a", 40 + 2 * sent, True, True, 1000 + sent)
        live.heard("b", 40 + 2 * sent, True, True, 5000 + sent)
        assert live.silent(caught_up=0.0 if i == 0 else 40.0) == []


def test_a_process_silent_while_its_sibling_speaks_is_seen_in_a_backlog() -> None:
    # "a" stops after 10 s; "b" goes on. The edge reads 30 s behind and is never caught up, so its
    # own clock says nothing; b's clock has gone on past the timeout since a's last heartbeat.
    live = Liveness(TIMEOUT)
    silent_from = None
    for i in range(60):
        sent = i * HEARTBEAT
        if sent <= 10:
            live.heard("a", 30 + sent, True, True, 100 + sent)
        live.heard("b", 30 + sent, True, True, 7000 + sent)
        if silent_from is None and live.silent(caught_up=30.0) == ["a"]:
            silent_from = sent
    assert silent_from is not None
    # silent once b's clock passed a's last heartbeat (at 10 s) by more than the timeout, not sooner
    assert 10 + TIMEOUT < silent_from <= 10 + TIMEOUT + HEARTBEAT
    live.forget("a")
    assert list(live.processes) == ["b"] and live.silent(caught_up=30.0) == []


def test_the_last_silence_is_judged_by_the_edge_clock_once_caught_up() -> None:
    # Both stop at once: no sibling speaks, and the edge, caught up, judges by its own clock.
    live = Liveness(TIMEOUT)
    live.heard("a", 10.0, True, True, 1.0)
    live.heard("b", 10.1, True, True, 2.0)
    assert live.silent(caught_up=12.0) == []
    assert live.silent(caught_up=13.05) == ["a"]
    assert live.silent(caught_up=13.2) == ["a", "b"]


def test_a_heartbeat_without_its_clock_judges_no_sibling() -> None:
    # "old" (a process that does not say its clock) speaks for 20 s after "b"'s last heartbeat: b
    # is judged by the edge's clock alone, once it is caught up.
    live = Liveness(TIMEOUT)
    live.heard("b", 0.0, True, True, 50.0)
    for i in range(20):
        live.heard("old", 1.0 + i, True, False, None)
    assert live.silent(caught_up=2.0) == []
    assert live.silent(caught_up=3.5) == ["b"]


def test_a_heartbeat_again_ends_the_silence_and_says_whether_it_was_known() -> None:
    live = Liveness(TIMEOUT)
    assert live.heard("a", 0.0, False, True, 0.0) is False
    for i in range(10):
        live.heard("b", float(i), True, True, float(i))
    assert live.silent(caught_up=0.0) == ["a"]
    assert live.heard("a", 10.0, True, True, 10.0) is True
    assert live.silent(caught_up=10.0) == []
    assert live.any_ready()


def test_heartbeats_lost_in_a_closed_subscription_are_no_silence() -> None:
    # Redis closed the edge's subscription and 60 s of messages went with it: neither the edge's
    # clock nor b's (its first heartbeat after the hole is 60 s on) may call a silent.
    live = Liveness(TIMEOUT)
    live.heard("a", 10.0, True, True, 100.0)
    live.heard("b", 10.1, True, True, 500.0)
    live.heard_all(70.0)  # the subscription opened again
    live.heard("b", 70.4, True, True, 560.0)
    assert live.silent(caught_up=71.0) == []
    live.heard("a", 70.5, True, True, 160.0)
    assert live.silent(caught_up=72.0) == []


def test_the_processes_urls_come_ready_first_and_go_with_their_process() -> None:
    # Where an edge forwards its reads of the log's points (app/api/forwarded_reads.py).
    live = Liveness(TIMEOUT)
    live.heard("a", 0.0, False, True, 1.0, "http://a:8000")
    live.heard("b", 0.0, True, True, 1.0, "http://b:8000")
    live.heard("c", 0.0, True, True, 1.0)  # an older process that does not say
    assert live.urls() == ["http://b:8000", "http://a:8000"]
    live.forget("b")
    assert live.urls() == ["http://a:8000"]
