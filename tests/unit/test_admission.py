"""One admission for every route (app/protocol/admission.py): the Origin first, then the bearer
token, from a request's headers; each route renders the refusal its own way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.protocol.admission import Admission, Refused
from app.protocol.auth import ANONYMOUS, Authenticator, TokensFile
from app.protocol.origin import OriginPolicy

HOST = {"host": "sparkwire.example:8000"}


def _admission(tmp_path: Path, allowed: str = "https://ok.example") -> Admission:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"token": "t-admin", "sub": "ops", "admin": True}]}))
    return Admission(OriginPolicy(allowed), Authenticator(None, TokensFile(tokens)))


def test_a_foreign_origin_is_refused_before_the_token_is_looked_at(tmp_path: Path) -> None:
    admission = _admission(tmp_path)
    headers = {**HOST, "origin": "https://evil.example", "authorization": "Bearer t-admin"}
    with pytest.raises(Refused) as refused:
        admission.admit(headers, "read the directory of computations")
    assert refused.value.status == 403
    assert refused.value.message == "this Origin may not read the directory of computations"


def test_a_listed_or_own_origin_then_the_token_decides(tmp_path: Path) -> None:
    admission = _admission(tmp_path)
    for origin in ("https://ok.example", "http://sparkwire.example:8000"):
        who = admission.admit({**HOST, "origin": origin, "authorization": "Bearer t-admin"}, "write here")
        assert who.subject == "ops" and who.admin
    with pytest.raises(Refused) as missing:
        admission.admit({**HOST, "origin": "https://ok.example"}, "write here")
    assert missing.value.status == 401 and "bearer token is required" in missing.value.message
    with pytest.raises(Refused) as unknown:
        admission.admit({"authorization": "Bearer nope"}, "write here")  # no Origin: not a browser
    assert unknown.value.status == 401 and unknown.value.message == "unknown token"


def test_the_websocket_token_may_come_as_a_subprotocol(tmp_path: Path) -> None:
    admission = _admission(tmp_path)
    who = admission.admit(HOST, "open WebSockets here", ["bearer", "t-admin"])
    assert who.subject == "ops"


def test_without_authentication_everyone_is_anonymous_but_the_origin_still_counts() -> None:
    admission = Admission(OriginPolicy(""), None)
    assert admission.admit(HOST, "read the catalog") is ANONYMOUS
    with pytest.raises(Refused) as refused:
        admission.admit({**HOST, "origin": "null"}, "read the catalog")
    assert refused.value.status == 403


def test_a_token_lookup_reads_the_file_at_most_once_per_recheck_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Token lookups cost no file system call between checks; an edit is seen after the interval."""
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": [{"token": "old", "sub": "a"}]}))
    now = [0.0]
    tokens = TokensFile(path, recheck_s=1.0, clock=lambda: now[0])
    stats: list[Path] = []
    real_stat = Path.stat

    def counted(self: Path, *args: object, **kwargs: object) -> object:
        if self == path:
            stats.append(self)
        return real_stat(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "stat", counted)
    for _ in range(1000):
        assert tokens.lookup("old") is not None
    assert stats == []
    path.write_text(json.dumps({"tokens": [{"token": "new", "sub": "b"}]}))
    assert tokens.lookup("new") is None  # not yet looked at
    now[0] = 1.0
    who = tokens.lookup("new")
    assert who is not None and who.subject == "b" and tokens.lookup("old") is None
    assert 1 <= len(stats) <= 2
